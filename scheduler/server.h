// SchedulerServer: the taskscheduler process's socket loop around the
// SchedulerCore. One thread owns every socket:
//
//   client ROUTER  <- task_request, abort_request; -> task_reply, abort_reply
//   engine ROUTER  -> task_request; <- task_reply, engine_ready
//   notifier SUB   <- engine_registered / engine_unregistered (from the hub)
//   monitor DEALER -> task_submitted / task_assigned / task_outcome (to the hub)
//
// It verifies and decodes only the header and routing metadata of a task,
// and forwards every other frame as it came (shared, never re-encoded).
//
// Thread safety: Create and Run on one thread; RequestStop from any thread
// or from a signal handler.
#ifndef ZTASK_SCHEDULER_SERVER_H_
#define ZTASK_SCHEDULER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "base/signals.h"
#include "protocol/codec.h"
#include "scheduler/engine_book.h"
#include "ztask/status.h"

namespace zmq {
class context_t;
}

namespace ztask::scheduler {

struct TaskLimits {
  // Bytes of a task's content and buffers (its function, arguments, command).
  size_t max_task_bytes = size_t{16} << 20;
  // Ids in a task's after and follow lists together.
  size_t max_dependencies = 100000;
  // Tasks of one client waiting or running at once.
  size_t max_queued_per_client = size_t{1} << 20;
};

struct SchedulerOptions {
  // Scheme name (scheme.h). Default: "leastload".
  std::string scheme = "leastload";
  // Most tasks outstanding per engine, 0 for no limit. Default:
  // kAdaptiveHwm, learned per engine (CoreOptions::hwm).
  uint32_t hwm = kAdaptiveHwm;
  // Send a task waiting for one last dependency to the engine running it
  // (CoreOptions::send_ahead). Default: on.
  bool send_ahead = true;
  // Outcomes of finished tasks remembered for the tasks that will name them
  // (CoreOptions::keep_finished); an older one is asked of the hub when a
  // new task names it. Default: 1,000,000 (about 40 MB).
  size_t keep_finished = 1000000;
  // "process": the journal survives a crash of the scheduler (written to
  // the kernel); "power": it survives a power loss too (synced to disk once
  // per turn of the loop, before what the turn decided leaves).
  std::string durability = "process";
  // Where the connection file is. Default: ~/.ztask/profile_default.
  std::filesystem::path profile_dir;
  // Where clients and engines connect. Default: loopback, any free port,
  // which is a Unix socket in the profile unless `tcp` (every peer of a
  // cluster on loopback is on this host: see BindRouters).
  std::string client_endpoint = "tcp://127.0.0.1:*";
  std::string engine_endpoint = "tcp://127.0.0.1:*";
  bool tcp = false;
  // Bounds on what a peer may send.
  protocol::Limits limits;
  // Seed for the sampling schemes; 0 picks one at random. Default: 0.
  uint64_t seed = 0;
  // What one task and one client may ask; over a limit, the task fails at
  // once with TaskRejected and a message naming the limit.
  TaskLimits task_limits;
  // Accept a connection file without a key.
  bool insecure = false;
  // A message dated further than this from our clock is refused as a
  // possible replay (replay_guard.h); 0 turns the check off. Default: 300 s.
  double replay_window_s = 300;
  // At start, the hub says which tasks were in flight when an earlier
  // scheduler of this cluster stopped; the scheduler asks until it does,
  // with an error in the log each time this long passes. Default: 30 s.
  double recover_timeout_s = 30;
  // A task dispatched is recorded in the hub as running once it has run
  // this long (hub_link.h); one that ends sooner costs the hub two records,
  // not three. Default: 0.05 s.
  double record_running_after_s = 0.05;
  // After a restart, how long engines that held tasks have to come back
  // before those tasks count as lost with them. Default: 10 s.
  double recover_grace_s = 10;
  // ZeroMQ's high-water mark (messages) on the client and engine sockets.
  // What a peer's queue will not take waits in the scheduler (outbox.h).
  int socket_hwm = 1000000;
  // A hub in the same process (taskcontroller): its ZeroMQ context, and the
  // inproc endpoints its monitor and notifier bind, reached instead of the
  // connection file's. Null: the hub is another process. REQUIRES: the
  // context outlives the server.
  zmq::context_t* hub_context = nullptr;
  std::string hub_monitor, hub_notifier;
  // A stop flag of the caller's, used instead of the server's own: set
  // while Create still waits (for the hub, at a restart), it ends the wait
  // (within a couple of seconds) and Create fails, or Run returns at once.
  // REQUIRES: it outlives the server.
  std::atomic<bool>* stop = nullptr;
};

struct ServerCounters {
  uint64_t dropped = 0;          // unsigned, malformed or unexpected messages
  uint64_t duplicate_tasks = 0;  // task ids submitted twice
  uint64_t late_replies = 0;     // replies from an engine not running the task
  uint64_t unknown_engines = 0;  // replies from an engine never registered
  uint64_t undeliverable = 0;    // replies to a client that is gone
  uint64_t rejected = 0;         // tasks over a limit (TaskLimits)
  uint64_t resubmitted = 0;      // tasks a client sent again after a reconnection
  uint64_t recovered = 0;        // unfinished tasks restored from the hub at start
  uint64_t monitor_resent = 0;   // monitor batches sent again (the hub did not acknowledge)
  uint64_t lookups = 0;          // dependencies asked of the hub (let go of, or never seen)
};

class SchedulerServer final : public Stoppable {
 public:
  // Reads the connection file, binds, records the endpoints in the file.
  static Result<std::unique_ptr<SchedulerServer>> Create(const SchedulerOptions& options);
  ~SchedulerServer();

  // Serves until RequestStop().
  void Run();
  // Safe from a signal handler.
  void RequestStop() override;

  const std::string& client_endpoint() const;
  const std::string& engine_endpoint() const;
  ServerCounters counters() const;

 private:
  class Impl;
  explicit SchedulerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_SERVER_H_
