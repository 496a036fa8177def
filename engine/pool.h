// The runner threads of an engine of many slots (taskengine --slots N > 1):
// N threads, each with a TaskRunner of its own, take the tasks handed to
// them in the order they were handed and hand back each answer with what it
// held; an eventfd tells the owner that answers wait. A task handed over
// just before the engine fenced itself is not started: it is answered "not
// run" (the fence is checked again on the runner's thread).
//
// Must not: choose what starts (engine/engine_core.h does), or touch a
// socket of the engine's but each runner's own hub query socket. Thread
// safety: Hand, TakeFinished and fd belong to one thread (the scheduler
// link's); KillAll may be called from any thread; Stop from the thread that
// made the pool, after the owner stopped handing work.
#ifndef ZTASK_ENGINE_POOL_H_
#define ZTASK_ENGINE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/capacity.h"
#include "engine/engine_core.h"
#include "engine/job.h"
#include "engine/task_runner.h"
#include "ztask/status.h"

namespace ztask::engine {

class Pool {
 public:
  struct Finished {
    Done done;
    Grant grant;
  };

  // `core` answers the engine id and the fence (its thread-safe parts);
  // once `stop` is set no runner starts another task.
  // REQUIRES: threads >= 1; `setup`, `core` and `stop` outlive the pool.
  Pool(int32_t threads, const RunnerSetup& setup, const EngineCore& core,
       const std::atomic<bool>& stop);
  ~Pool();

  // Makes the eventfd and starts the threads.
  Status Start();
  // Gives a started task to the next free runner.
  void Hand(EngineCore::Start start);
  // The answers of the tasks that ended since the last call, in the order
  // they ended.
  std::deque<Finished> TakeFinished();
  // Readable while answers wait (for base::Reactor).
  int fd() const { return done_fd_; }
  // The running commands and Python workers die now.
  void KillAll();
  // Ends the threads once their tasks ended; work not taken is dropped.
  // REQUIRES: `stop` is set.
  void Stop();

 private:
  void RunnerMain(TaskRunner& runner);

  const EngineCore& core_;
  const std::atomic<bool>& stop_;
  std::vector<std::unique_ptr<TaskRunner>> runners_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<EngineCore::Start> work_;  // under mutex_
  std::deque<Finished> finished_;       // under mutex_
  int done_fd_ = -1;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_POOL_H_
