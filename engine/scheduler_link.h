// The engine's link to the scheduler: the scheduler socket, the worker
// thread that owns it, and what that thread does. It takes the tasks that
// came (task batches; engine_retire), gives them to the engine's core,
// runs what the core starts (inline on this thread with one slot, or on the
// pool's runner threads with more), and sends the replies in batches,
// engine_ready, and everything again after a reconnection (Resume).
//
// One owner per socket, with one exception kept on purpose. With one slot
// the worker thread runs each task itself: a task crosses no thread inside
// the engine, which is what the one-slot no-op round trip is made of
// (handing each task to another thread and its answer back costs two
// wake-ups; docs/architecture.md, "Engines run tasks off the heartbeat
// thread"). But then nothing on this thread can send while a long task
// runs, and the replies of the short tasks before it (batched, waiting at
// most Ledger::kFlushAfterUs) would wait for its end. So the scheduler
// socket and the core are held under io_mutex_ by the worker thread at all
// times but while it runs a task inline, and only then may the loop thread
// take them (FlushWhileTaskRuns) to send the replies that waited 1 ms: the
// socket changes owner under a mutex, a full barrier, as ZeroMQ allows a
// socket to migrate between threads, and is never used by two threads at
// once. Handing such replies to this thread through an inproc socket or an
// eventfd cannot work (it is busy running the task); the one-owner way is
// to keep this thread free and run every task on a runner thread, which is
// the pool's path with one runner. Measured side by side (e2e_bench
// --engines 2, Release, alternated, medians of two, a loaded 2-core host):
// at --hwm 1 the round trip's p50 went from 286 µs inline to 368 µs and
// no-op throughput from 6,350 to 3,940 tasks/s; at --hwm 64 throughput from
// 33,700 to 16,400 tasks/s, and the engines' CPU per no-op from 8.1 to
// 44.7 µs. So the mechanism stays.
//
// Must not: run a task's code itself (engine/task_runner.h does), decide
// what starts or what a reply says (engine/engine_core.h), or touch the hub
// socket. Thread safety: made and Connect()ed on the engine's main thread;
// from Start() on, owned by the worker thread it starts, but for KillTasks
// (any thread), the FlushWhileTaskRuns pair (the loop thread) and Join (the
// thread that called Start, once stop is set).
#ifndef ZTASK_ENGINE_SCHEDULER_LINK_H_
#define ZTASK_ENGINE_SCHEDULER_LINK_H_

#include <atomic>
#include <memory>
#include <mutex>
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
  // To the worker: "ready" (registered again), "stop". To the loop: "flush"
  // (replies wait while a task runs), "retire" (stop is set).
  static constexpr std::string_view kReady = "ready";

  // REQUIRES: everything given outlives the link.
  SchedulerLink(const RunnerSetup& setup, EngineCore& core, std::atomic<bool>& stop);
  ~SchedulerLink();

  // Connects the scheduler socket and the worker's end of the inproc pair
  // bound at `wake_endpoint`, and says engine_ready.
  Status Connect(const std::string& wake_endpoint);
  // Starts the pool (more than one slot) and the worker thread.
  Status Start();
  // REQUIRES: stop is set and the worker woken. Joins the worker thread,
  // then the pool's.
  void Join();
  // The running tasks' commands and Python workers die now. Any thread.
  void KillTasks();

  // The loop thread: whether the worker asked it to watch the replies that
  // wait while a task runs, and the look itself (sends those that waited
  // long enough, when a task runs inline; else nothing).
  bool flush_asked() const { return flush_asked_.load(); }
  void FlushWhileTaskRuns();

 private:
  struct Woken {
    bool any = false, ready_again = false, finished = false;
  };
  void Main();
  bool Turn(base::Reactor& reactor, Woken& woken);
  void AfterTurn(const Woken& woken, std::unique_lock<std::mutex>& io);
  void RunNext(std::unique_lock<std::mutex>& io);
  void StartWhatFits();
  void CollectFinished();
  void TakeTasks();
  void OnMessage(const protocol::Frames& frames);
  void Resume(bool resend_replies);
  void SendReady(std::optional<std::vector<TaskId>> held);
  void FlushIfFull() {
    if (core_.MustFlush()) FlushReplies();
  }
  void FlushReplies();
  void SendBatch(const std::vector<std::vector<std::string>>& replies);

  const RunnerSetup& setup_;
  EngineCore& core_;
  std::atomic<bool>& stop_;
  zmq::socket_t scheduler_, wake_;
  std::unique_ptr<protocol::ReconnectWatch> watch_;
  // Runs the tasks of an engine of one slot, on the worker thread.
  TaskRunner runner_;
  // An engine of more slots runs its tasks here.
  std::unique_ptr<Pool> pool_;
  // The scheduler socket and the core (see above).
  std::mutex io_mutex_;
  std::atomic<bool> flush_asked_{false};
  std::thread thread_;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_SCHEDULER_LINK_H_
