// A child process started with fork/exec in its own process group, its
// stdout and stderr appended to a log file; stopped (SIGTERM, then SIGKILL
// after a grace period) when the object goes.
//
// Thread safety: owned by one thread.
#ifndef ZTASK_CLUSTER_CHILD_PROCESS_H_
#define ZTASK_CLUSTER_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"

namespace ztask::cluster {

class ChildProcess {
 public:
  // What becomes of the child when the thread that started it ends without
  // stopping it (its process killed): it runs on (a supervised daemon
  // outlives a supervisor killed, to be adopted by the next), or it is
  // killed with it (what a benchmark or a test starts).
  enum class WhenParentDies { kRunOn, kDie };

  ChildProcess(std::vector<std::string> argv, std::filesystem::path log,
               WhenParentDies when_parent_dies = WhenParentDies::kRunOn);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code once it has exited (128+signal when killed), else nullopt.
  std::optional<int> Poll();
  // Waits up to `timeout` for it to exit by itself.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  void Kill(int signal);
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path log_;
};

// True while `pid` is a live process (not gone, not a zombie).
bool ProcessRunning(pid_t pid);

// Polls `condition` about every millisecond until it holds or `timeout`
// passes; returns whether it held.
template <class F>
bool WaitFor(F&& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return base::WaitUntil(std::forward<F>(condition), timeout);
}

}  // namespace ztask::cluster

#endif  // ZTASK_CLUSTER_CHILD_PROCESS_H_
