#include "cluster/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/spawn.h"

namespace ztask::cluster {

ChildProcess::ChildProcess(std::vector<std::string> argv, std::filesystem::path log,
                           WhenParentDies when_parent_dies)
    : log_(std::move(log)) {
  const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  base::SpawnOptions spawn;
  spawn.argv = std::move(argv);
  spawn.dies_with_parent = when_parent_dies == WhenParentDies::kDie;
  if (fd >= 0) spawn.fds = {{1, fd}, {2, fd}};
  Result<pid_t> pid = base::Spawn(spawn);
  if (pid.ok()) {
    pid_ = *pid;
  } else {  // as a program that could not start: exit code 127, why in its log
    exit_code_ = 127;
    if (fd >= 0) {
      const std::string line = pid.status().message() + "\n";
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
    }
  }
  if (fd >= 0) ::close(fd);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) Stop(std::chrono::seconds(2));
}

std::optional<int> ChildProcess::Poll() {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_code_;
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  WaitFor([&] { return Poll().has_value(); }, timeout);
  return exit_code_;
}

void ChildProcess::Kill(int signal) {
  // The whole group: what the child started goes with it.
  if (pid_ > 0 && !Poll()) ::kill(-pid_, signal);
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  Kill(SIGTERM);
  if (!Wait(grace)) {
    Kill(SIGKILL);
    Wait(std::chrono::seconds(5));
  }
  return exit_code_.value_or(-1);
}

bool ProcessRunning(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ztask::cluster
