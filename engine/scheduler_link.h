// The engine's link to the scheduler: the scheduler socket and the worker
// thread that owns it. It takes the tasks that came (task batches;
// engine_retire) into the engine's core, and sends the replies in batches,
// engine_ready, and everything again after a reconnection (Resume). The
// tasks run on the pool's runner threads (engine/pool.h), one by default.
//
// One owner per socket: the worker thread alone uses the scheduler socket,
// and it never runs a task, so it is free to send while one runs. The core
// is shared with the runners under the pool's mutex, held only to put
// tasks in, take replies out, or take the next task: a runner takes its
// next task and gives its answer without waking this thread, and wakes it
// only when replies wait that no deadline of this thread's covers, or must
// go at once (engine/pool.h). So the replies go in batches, as they did
// when a one-slot engine ran each task on this thread: at once when nothing
// runs or a batch is due (full, Ledger::kFlushReplies of them, or the oldest
// waited Ledger::kFlushAfterUs), and while a long task runs by this
// thread's own deadline (the poll's millisecond). Before, a one-slot
// engine ran its tasks inline on this thread and lent the socket to the
// loop thread under a mutex to flush while a long task ran; a task handed
// to a runner and back one at a time had cost two wake-ups per task and
// halved no-op throughput (33,700 to 16,400 tasks/s at --hwm 64). Taken
// by the runners from the core, measured alternated against the inline
// path (e2e_bench --engines 2, Release, medians of ten, a shared and
// loaded 2-core host): at --hwm 64, 27,300 vs 29,800 tasks/s (best runs
// 36,000 vs 34,000) and 8.6 vs 11.4 µs of engine CPU per no-op; at
// --hwm 1, 4,320 vs 4,300 tasks/s, round trip p50 419 vs 445 µs, but
// 133 vs 106 µs of engine CPU per no-op (a wake-up each way per task when
// one task at a time is in flight).
//
// Must not: run a task's code (engine/task_runner.h does), decide what
// starts or what a reply says (engine/engine_core.h), or touch the hub
// socket. Thread safety: made and Connect()ed on the engine's main thread;
// from Start() on, owned by the worker thread it starts, but for KillTasks
// (any thread) and Join (the thread that called Start, once stop is set).
#ifndef ZTASK_ENGINE_SCHEDULER_LINK_H_
#define ZTASK_ENGINE_SCHEDULER_LINK_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/reactor.h"
#include "engine/engine_core.h"
#include "engine/pool.h"
#include "engine/task_runner.h"
#include "protocol/wire.h"
#include "ztask/status.h"

namespace ztask::engine {

class SchedulerLink {
 public:
  // Words on the inproc pair between the loop thread and the worker thread.
  // To the worker: "ready" (registered again), "stop". To the loop:
  // "retire" (stop is set).
  static constexpr std::string_view kReady = "ready";

  // REQUIRES: everything given outlives the link.
  SchedulerLink(const RunnerSetup& setup, EngineCore& core, std::atomic<bool>& stop);
  ~SchedulerLink();

  // Connects the scheduler socket and the worker's end of the inproc pair
  // bound at `wake_endpoint`, and says engine_ready.
  Status Connect(const std::string& wake_endpoint);
  // Starts the pool's runners and the worker thread.
  Status Start();
  // REQUIRES: stop is set and the worker woken. Joins the worker thread,
  // then the pool's.
  void Join();
  // The running tasks' commands and Python workers die now. Any thread.
  void KillTasks();

 private:
  // What a turn of the worker's loop found: the loop's word (any: stop, or
  // ready_again), tasks from the scheduler, news of the connection.
  struct Woken {
    bool any = false, ready_again = false, tasks = false, watch = false;
  };
  void Main();
  int64_t Look();
  void TakeTasks();
  // Reads a message from the scheduler: its tasks go to `jobs`, the ids a
  // task_take_back asks back to `take_back`.
  void OnMessage(const protocol::Frames& frames, std::vector<Job>& jobs,
                 std::vector<TaskId>& take_back);
  void Resume(bool resend_replies);
  // engine_ready; when the socket will not take it now (the scheduler
  // stalled past its queue), it goes again at each Look until it left: a
  // scheduler that never hears it gives this engine nothing.
  void SendReady(std::optional<std::vector<TaskId>> held);
  // Sends the replies that wait (all, or only when due).
  void FlushReplies();
  void SendBatch(const std::vector<Ledger::Frames>& replies);

  const RunnerSetup& setup_;
  EngineCore& core_;
  std::atomic<bool>& stop_;
  zmq::socket_t scheduler_, wake_;
  std::unique_ptr<protocol::ReconnectWatch> watch_;
  // Runs the tasks; its mutex guards the core.
  std::unique_ptr<Pool> pool_;
  std::thread thread_;
  // engine_ready waits to be sent again (and whether with what is held).
  bool ready_unsent_ = false, ready_with_held_ = false;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_SCHEDULER_LINK_H_
