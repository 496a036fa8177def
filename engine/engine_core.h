// The engine's logic without I/O, as the scheduler's core is: events in
// (a task arrived, a task finished, the connection was made again), answers
// out (which task starts now and with what it holds, the replies to send in
// batches and when they must go), the clock injected. It owns the queue of
// tasks held here in the order they came, the ledger (a task sent twice is
// taken once; the latest replies are kept to be sent again; the send-ahead
// gate), what is free (slots, resource units), and the fence (it starts
// nothing while the hub may have removed this engine, and answers "not run"
// for what it held once it was).
//
// The contract: every task taken here gets exactly one reply, in the order
// the tasks finished: ran (any outcome), "not run" (sent ahead behind a task
// that did not succeed here; held when the hub had removed this engine;
// queued and asked back by the scheduler, to run elsewhere), or
// "unsatisfiable" (it asks more than this engine has). Tasks start in the
// order they came: none overtakes the first one waiting for room.
//
// Must not: touch a socket, a thread or a real clock; run a task. Thread
// safety: none of its own; used under the pool's mutex by the thread that
// owns the scheduler socket (the engine's worker thread) and by the runner
// threads (engine/pool.h); fence() and engine_id() may be used from any
// thread.
#ifndef ZTASK_ENGINE_ENGINE_CORE_H_
#define ZTASK_ENGINE_ENGINE_CORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "engine/capacity.h"
#include "engine/fence.h"
#include "engine/job.h"
#include "engine/ledger.h"
#include "protocol/messages.h"

namespace ztask::engine {

struct CoreOptions {
  // The engine's session id, in the header of each reply.
  std::string uuid;
  // What the engine can hold at once (taskengine --slots, --resource).
  int32_t slots = 1;
  protocol::ResourceMap resources;
};

class EngineCore {
 public:
  // A task to start, and the slots and units it holds until it finished.
  struct Start {
    Job job;
    Grant grant;
  };

  // REQUIRES: `clock` outlives the core.
  EngineCore(CoreOptions options, base::Clock* clock);

  // ---- events ----
  // The scheduler sent `job`: queued, or ignored (queued here already), or
  // answered with its kept reply (it ran here already).
  void Arrive(Job&& job);
  // A free runner: the first queued task if it fits now (none overtakes
  // it), tasks that need no run answered on the way; nullopt: none.
  std::optional<Start> NextThatFits();
  // A started task ended with `done`: what it held is free, its reply waits.
  void Finished(const Done& done, const Grant& grant);
  // The connection to the scheduler was made again: the latest replies go
  // again (a scheduler that had them ignores them). Returns how many.
  size_t ResendReplies();
  // After this engine registered again: when the hub had removed it, every
  // task queued here is answered "not run" (a scheduler that failed it over
  // takes that as late; one that did not, after a hub restart, runs it again
  // without using a retry). Returns how many, or nullopt when it was not
  // removed.
  std::optional<size_t> DropIfRemoved();
  // The scheduler asks these tasks back (task_take_back): each still
  // queued here leaves the queue, answered "not run"; one started, or not
  // held, is left as it is (its reply comes as usual). Returns how many
  // were given back.
  size_t TakeBack(const std::vector<TaskId>& ids);
  // The tasks held here, running and queued, for engine_ready.
  std::vector<TaskId> Held() const;

  // ---- replies ----
  // Whether the replies that wait must go at once (a full batch).
  bool MustFlush() const { return ledger_.BatchFull(); }
  bool HasUnsent() const { return ledger_.has_unsent(); }
  // Whether the replies that wait are due to go (a full batch, enough of
  // them, or the oldest waited Ledger::kFlushAfterUs), and when the oldest
  // will have waited that long.
  bool FlushDue() const {
    return ledger_.BatchFull() || ledger_.FlushDue(clock_->MonotonicMicros());
  }
  int64_t FlushDueAtUs() const { return ledger_.unsent_since_us() + Ledger::kFlushAfterUs; }
  // The next batch of replies to send (each its frames, header first).
  std::vector<Ledger::Frames> TakeUnsent() { return ledger_.TakeUnsent(); }

  // ---- state ----
  bool MayStart() const { return !fence_.Fenced(clock_->MonotonicMicros()); }
  bool HasQueued() const { return !queue_.empty(); }
  Fence& fence() { return fence_; }
  const Fence& fence() const { return fence_; }
  // Set by the loop thread when the hub gives the engine its id.
  int32_t engine_id() const { return engine_id_.load(); }
  void set_engine_id(int32_t id) { engine_id_.store(id); }
  const Capacity& capacity() const { return capacity_; }

 private:
  // Answers `job` without running it when it needs no run; true if so.
  bool AnsweredWithoutRun(const Job& job);
  void Reply(const Done& done);
  void Running(const TaskId& id) { running_ids_.push_back(id); }

  CoreOptions options_;
  base::Clock* clock_;
  Ledger ledger_;
  Capacity capacity_;
  Fence fence_;
  std::atomic<int32_t> engine_id_{-1};
  std::deque<Job> queue_;
  // At most one per slot: a vector, reserved, so that no task allocates.
  std::vector<TaskId> running_ids_;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_ENGINE_CORE_H_
