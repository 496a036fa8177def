// The runner threads of an engine (taskengine --slots N: N threads, one by
// default), each with a TaskRunner of its own. A runner that is free takes
// the next task itself, from the engine's core under the pool's mutex, in
// the order the tasks came, and gives the core its answer there: a task
// crosses threads without a hand-off of its own. The thread that owns the
// scheduler socket puts the tasks that came in the core under the same
// mutex and sends the replies; the two tell each other only what changes
// the other's wait, so a stream of tasks costs a few wake-ups per batch,
// not two per task:
//  - the owner wakes a runner only when one waits for work (WakeRunners);
//  - a runner runs tasks back to back while any may start, and sleeps only
//    when none may;
//  - a runner writes the eventfd only when a reply waits, the owner has not
//    been told since it last looked (Looked), and either no deadline of the
//    owner's covers it (the first reply of a batch: the owner then sets one)
//    or the replies are due at once (EngineCore::FlushDue, or nothing
//    runs here).
//
// Must not: send on a socket of the engine's (each runner has only its own
// hub query socket), or decide what starts or what a reply says
// (engine/engine_core.h). Thread safety: the core is used only under
// mutex(); WakeRunners, idle and Looked need it held; fd belongs to the
// owner; KillAll may be called from any thread; Stop from the thread that
// made the pool, once the owner stopped.
#ifndef ZTASK_ENGINE_POOL_H_
#define ZTASK_ENGINE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_core.h"
#include "engine/task_runner.h"
#include "ztask/status.h"

namespace ztask::engine {

class Pool {
 public:
  // Once `stop` is set no runner starts another task.
  // REQUIRES: threads >= 1; `setup`, `core` and `stop` outlive the pool.
  Pool(int32_t threads, const RunnerSetup& setup, EngineCore& core,
       const std::atomic<bool>& stop);
  ~Pool();

  // Makes the eventfd and starts the threads.
  Status Start();
  // Guards the core, and what follows.
  std::mutex& mutex() { return mutex_; }
  // Tasks may start now (they came, or the fence lifted): wakes the runners
  // that wait for work. REQUIRES: mutex() held.
  void WakeRunners();
  // Whether no task runs here. REQUIRES: mutex() held.
  bool idle() const { return running_ == 0; }
  // The owner looked at the replies, and sent them or not: `timed`, it
  // will send those that wait by its own deadline. The eventfd is read; a
  // runner writes it again when a reply waits that no deadline covers, or
  // the replies are due at once. REQUIRES: mutex() held.
  void Looked(bool timed);
  // Readable when the owner should look at the replies (for base::Reactor).
  int fd() const { return signal_fd_; }
  // The running commands and Python workers die now.
  void KillAll();
  // Ends the threads once their tasks ended. REQUIRES: `stop` is set.
  void Stop();

 private:
  void RunnerMain(TaskRunner& runner);
  // Writes the eventfd if the owner must look (above). REQUIRES: mutex_.
  void TellOwner();

  EngineCore& core_;
  const std::atomic<bool>& stop_;
  std::vector<std::unique_ptr<TaskRunner>> runners_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_;
  int32_t running_ = 0;   // under mutex_
  int32_t waiting_ = 0;   // runners waiting for work, under mutex_
  bool signaled_ = false;     // under mutex_
  bool owner_timed_ = false;  // under mutex_
  int signal_fd_ = -1;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_POOL_H_
