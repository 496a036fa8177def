// The runner threads of an engine of many slots (engine/pool.h).
#include "engine/pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include "base/clock.h"

namespace ztask::engine {

Pool::Pool(int32_t threads, const RunnerSetup& setup, const EngineCore& core,
           const std::atomic<bool>& stop)
    : core_(core), stop_(stop) {
  for (int32_t i = 0; i < threads; ++i) runners_.push_back(std::make_unique<TaskRunner>(setup));
}

Pool::~Pool() {
  if (done_fd_ >= 0) ::close(done_fd_);
}

Status Pool::Start() {
  done_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (done_fd_ < 0) return Status::Unavailable("cannot make an eventfd for the task pool");
  for (auto& runner : runners_) {
    TaskRunner* r = runner.get();
    threads_.emplace_back([this, r] { RunnerMain(*r); });
  }
  return Status::Ok();
}

void Pool::Hand(EngineCore::Start start) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back(std::move(start));
  }
  wake_.notify_one();
}

std::deque<Pool::Finished> Pool::TakeFinished() {
  uint64_t count = 0;
  (void)!::read(done_fd_, &count, sizeof count);
  std::deque<Finished> finished;
  std::lock_guard<std::mutex> lock(mutex_);
  finished.swap(finished_);
  return finished;
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
  wake_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Pool::RunnerMain(TaskRunner& runner) {
  for (;;) {
    EngineCore::Start work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_.load() || !work_.empty(); });
      if (stop_.load()) break;
      work = std::move(work_.front());
      work_.pop_front();
    }
    // Handed over just before the fence: not started, answered not run.
    const int32_t engine_id = core_.engine_id();
    Done done = core_.fence().Fenced(base::MonotonicMicros())
                    ? NotRunAnswer(work.job, engine_id)
                    : runner.Run(work.job, work.grant, engine_id);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back({std::move(done), std::move(work.grant)});
    }
    const uint64_t one = 1;
    (void)!::write(done_fd_, &one, sizeof one);
  }
  runner.CloseSockets();
}

}  // namespace ztask::engine
