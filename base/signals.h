// SIGINT, SIGTERM and SIGHUP for a server process: installed before the server
// exists, so a signal that arrives while it starts is not lost; delivered as
// RequestStop() once it does.
//
// The signals are blocked in every thread and taken by one thread of their
// own (sigwait), so RequestStop() runs as ordinary code, never inside a
// signal handler. Programs started through base/spawn.h get the usual mask
// back before they run.
//
// Thread safety: call InstallStopSignals from the main thread before it
// starts any other thread (those inherit the blocked mask); SetStopTarget and
// StopRequested from any thread.
#ifndef ZTASK_BASE_SIGNALS_H_
#define ZTASK_BASE_SIGNALS_H_

#include <atomic>

namespace ztask {

class Stoppable {
 public:
  virtual ~Stoppable() = default;
  // Called from the signal thread: must be thread-safe and must not block.
  virtual void RequestStop() = 0;
};

// A stop that only sets a flag: the target while a server is being made,
// for the waits its making does (SchedulerOptions::stop).
class StopFlag final : public Stoppable {
 public:
  void RequestStop() override { flag_.store(true); }
  std::atomic<bool>* flag() { return &flag_; }

 private:
  std::atomic<bool> flag_{false};
};

// Idempotent within a process. A process that forks to carry on without
// exec calls it after the fork, in the child: it starts a thread.
void InstallStopSignals();
// From now on a signal stops `target` (nullptr: forget it). A signal that
// came earlier stops it at once. Once it returns, the old target is no longer
// called.
void SetStopTarget(Stoppable* target);
// Whether a stop signal came (for waits before there is a target).
bool StopRequested();

// The stop target for as long as it lives: however the scope is left, the
// target is forgotten before it can be destroyed.
class ScopedStopTarget {
 public:
  explicit ScopedStopTarget(Stoppable* target) { SetStopTarget(target); }
  ~ScopedStopTarget() { SetStopTarget(nullptr); }
  ScopedStopTarget(const ScopedStopTarget&) = delete;
  ScopedStopTarget& operator=(const ScopedStopTarget&) = delete;
};

}  // namespace ztask

#endif  // ZTASK_BASE_SIGNALS_H_
