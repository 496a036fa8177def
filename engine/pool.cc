// The runner threads of an engine (engine/pool.h).
#include "engine/pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <optional>
#include <utility>

namespace ztask::engine {

Pool::Pool(int32_t threads, const RunnerSetup& setup, EngineCore& core,
           const std::atomic<bool>& stop)
    : core_(core), stop_(stop) {
  for (int32_t i = 0; i < threads; ++i) runners_.push_back(std::make_unique<TaskRunner>(setup));
}

Pool::~Pool() {
  if (signal_fd_ >= 0) ::close(signal_fd_);
}

Status Pool::Start() {
  signal_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (signal_fd_ < 0) return Status::Unavailable("cannot make an eventfd for the task pool");
  for (auto& runner : runners_) {
    TaskRunner* r = runner.get();
    threads_.emplace_back([this, r] { RunnerMain(*r); });
  }
  return Status::Ok();
}

void Pool::WakeRunners() {
  if (waiting_ == 1) {
    work_.notify_one();
  } else if (waiting_ > 1) {
    work_.notify_all();
  }
}

void Pool::Looked(bool timed) {
  if (signaled_) {  // only TellOwner writes it
    uint64_t count = 0;
    (void)!::read(signal_fd_, &count, sizeof count);
    signaled_ = false;
  }
  owner_timed_ = timed;
}

void Pool::KillAll() {
  for (auto& runner : runners_) runner->Kill();
}

void Pool::Stop() {
  {
    // Taken after stop_ was set: a runner is either before its check of
    // stop_ or waiting, and then woken.
    std::lock_guard<std::mutex> lock(mutex_);
  }
  work_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Pool::TellOwner() {
  if (signaled_ || !core_.HasUnsent()) return;
  // The owner's deadline covers the replies that wait, while tasks run.
  if (owner_timed_ && running_ > 0 && !core_.FlushDue()) return;
  signaled_ = true;
  const uint64_t one = 1;
  (void)!::write(signal_fd_, &one, sizeof one);
}

// Runs tasks back to back while any may start; between two, the mutex is
// held only to give the answer and take the next task.
void Pool::RunnerMain(TaskRunner& runner) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool ran = false;  // counted in running_
  while (!stop_.load()) {
    std::optional<EngineCore::Start> start = core_.NextThatFits();
    if (!start) {
      if (ran) --running_;
      ran = false;
      TellOwner();
      ++waiting_;
      work_.wait(lock);
      --waiting_;
      continue;
    }
    if (!ran) ++running_;
    ran = true;
    TellOwner();
    // Others may start too (a task that held several slots ended).
    if (waiting_ > 0 && core_.HasQueued()) work_.notify_one();
    lock.unlock();
    Done done = runner.Run(start->job, start->grant, core_.engine_id());
    lock.lock();
    core_.Finished(done, start->grant);
  }
  if (ran) --running_;
  lock.unlock();
  runner.CloseSockets();
}

}  // namespace ztask::engine
