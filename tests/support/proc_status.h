// What tests and benchmarks read of processes and files: a file's whole
// text, a cluster's processes by program and profile, and a process's
// memory, through /proc. Header-only and free of gtest, so that a benchmark
// may read the same figures as a test.
#ifndef ZTASK_TESTS_SUPPORT_PROC_STATUS_H_
#define ZTASK_TESTS_SUPPORT_PROC_STATUS_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ztask::testing {

// The whole of a file ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The layout a test chose for its cluster itself (taskcluster start
// --layout), which outranks ZTASK_TEST_LAYOUT; "" when it chose none.
inline std::string& ChosenLayout() {
  static std::string layout;
  return layout;
}

// The cluster layout under test: the one the test chose, else
// ZTASK_TEST_LAYOUT: "controller" (the hub and the scheduler in
// taskcontroller, taskcluster's default) unless it says "separate"
// (taskhub and taskscheduler).
inline std::string TestLayout() {
  if (!ChosenLayout().empty()) return ChosenLayout();
  const char* layout = std::getenv("ZTASK_TEST_LAYOUT");
  return layout != nullptr && std::string(layout) == "separate" ? "separate" : "controller";
}

// The program that plays `program`'s part in the layout under test: with
// the controller layout, taskcontroller is the hub and the scheduler.
inline std::string RoleProgram(const std::string& program) {
  const bool server = program == "taskhub" || program == "taskscheduler";
  return server && TestLayout() == "controller" ? "taskcontroller" : program;
}

// The log taskcluster writes for a server's part ("hub", "scheduler") in
// the layout under test: logs/NAME.log.
inline std::string RoleLogName(const std::string& part) {
  const bool server = part == "hub" || part == "scheduler";
  return server && TestLayout() == "controller" ? "controller" : part;
}

// What a server's part ("hub", "scheduler") of the cluster in `profile`
// logged: logs/PART.log, or in the controller layout the lines of
// logs/controller.log that name the part ("taskcontroller hub info: ...").
inline std::string PartLog(const std::filesystem::path& profile, const std::string& part) {
  const std::string text = ReadFile(profile / "logs" / (RoleLogName(part) + ".log"));
  if (RoleLogName(part) == part) return text;
  const std::string named = "taskcontroller " + part + " ";
  std::istringstream lines(text);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(named) != std::string::npos) kept += line + "\n";
  }
  return kept;
}

// The live processes running `program` (by its path's last part) of the
// cluster in `profile`, found through /proc.
inline std::vector<pid_t> ProcessesRunning(const std::string& program, const std::string& profile) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFile(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("/" + program + " ") != std::string::npos &&
        cmdline.find(profile + " ") != std::string::npos &&
        ReadFile(entry.path() / "stat").find(") Z") == std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// The live processes playing `role`'s part (RoleProgram) in the cluster in
// `profile`.
inline std::vector<pid_t> PidsOf(const std::string& role, const std::string& profile) {
  return ProcessesRunning(RoleProgram(role), profile);
}

// A /proc/PID/status field in kB (VmRSS, or VmHWM: the peak resident
// memory), as bytes; -1 when there is no such process.
inline int64_t StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

// The one such process, or -1.
inline pid_t PidOf(const std::string& program, const std::string& profile) {
  const std::vector<pid_t> pids = PidsOf(program, profile);
  return pids.empty() ? -1 : pids.front();
}

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_PROC_STATUS_H_
