// A real cluster (taskcluster start --daemonize) in a temporary profile, for
// end-to-end tests; `taskctl` run as a child process with its output read.
#ifndef ZTASK_TESTS_SUPPORT_CLUSTER_FIXTURE_H_
#define ZTASK_TESTS_SUPPORT_CLUSTER_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/proc_status.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "ztask/client.h"

namespace ztask {

// A record's status by its name in failed assertions ("ok", not a byte).
inline void PrintTo(TaskState state, std::ostream* os) { *os << TaskStateName(state); }

}  // namespace ztask

namespace ztask::testing {

inline const std::string kBin = ZTASK_BIN_DIR;

struct Ran {
  int code = -1;
  std::string out, err;
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

// Runs a program to completion (bounded by `timeout_s`), capturing both streams.
inline Ran RunProgram(const std::vector<std::string>& argv, const TempDir& dir,
                      double timeout_s = 60) {
  static int counter = 0;
  const auto out = dir.path() / ("run" + std::to_string(counter) + ".out");
  const auto err = dir.path() / ("run" + std::to_string(counter++) + ".err");
  std::vector<std::string> sh = {"/bin/sh", "-c", "exec \"$0\" \"$@\" >\"$OUT\" 2>\"$ERR\""};
  sh.insert(sh.end(), argv.begin(), argv.end());
  ::setenv("OUT", out.c_str(), 1);
  ::setenv("ERR", err.c_str(), 1);
  ChildProcess child(sh, dir.path() / "runs.log");
  Ran run;
  auto code = child.Wait(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  run.code = code ? *code : child.Stop();
  run.out = ReadFile(out);
  run.err = ReadFile(err);
  return run;
}

// Waits (up to `timeout`) until the hub has a final record for every id;
// *records gets the last answer. False when it did not happen in time.
inline bool WaitForFinalRecords(Client& client, const std::vector<TaskId>& ids,
                                std::vector<TaskInfo>* records,
                                std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return WaitFor([&] {
    auto fetched = client.Fetch(ids);
    if (!fetched.ok()) return false;
    *records = *fetched;
    return std::all_of(records->begin(), records->end(),
                       [](const TaskInfo& r) { return r.finished(); });
  }, timeout);
}

class ClusterTest : public ::testing::Test {
 protected:
  void StartCluster(int engines, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kBin + "/taskcluster", "start", "--profile-dir", profile(),
                                     "--daemonize"};
    if (engines > 0) argv.insert(argv.end(), {"-n", std::to_string(engines)});
    const auto layout = std::find(extra.begin(), extra.end(), "--layout");
    if (layout == extra.end()) {
      argv.insert(argv.end(), {"--layout", TestLayout()});
    } else if (layout + 1 != extra.end()) {
      ChosenLayout() = *(layout + 1);  // PidOf and the logs follow it
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    Ran started = RunProgram(argv, dir_);
    ASSERT_EQ(started.code, 0) << started.out << started.err;
    auto client = Client::Connect(profile());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    running_ = true;
  }
  void TearDown() override {
    if (running_) RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
    ChosenLayout().clear();
  }
  Ran Ctl(std::vector<std::string> args, double timeout_s = 60) {
    args.insert(args.begin(), {kBin + "/taskctl", "--profile-dir", profile()});
    return RunProgram(args, dir_, timeout_s);
  }
  // `taskctl submit ...`: the id it printed.
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    Ran r = Ctl(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.size(), 33u) << "an id and a newline: " << r.out;
    return r.out.substr(0, 32);
  }
  // `taskctl wait` on ids: the JSON records it printed, and its exit code.
  std::vector<Value> Wait(const std::vector<std::string>& ids, int* code = nullptr) {
    std::vector<std::string> args = {"wait", "--timeout", "60"};
    args.insert(args.end(), ids.begin(), ids.end());
    Ran r = Ctl(args, 90);
    if (code) *code = r.code;
    std::vector<Value> records;
    for (const auto& line : r.Lines()) records.push_back(Value::parse(line));
    EXPECT_EQ(records.size(), ids.size()) << r.out << r.err;
    return records;
  }
  std::string profile() const { return (dir_.path() / profile_name_).string(); }

  std::string profile_name_ = "profile";  // set before StartCluster to change

  TempDir dir_;
  std::unique_ptr<Client> client_;
  bool running_ = false;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_CLUSTER_FIXTURE_H_
