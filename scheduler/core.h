// SchedulerCore: every scheduling rule of ztask, with no I/O. Events go in
// (a task submitted, an engine added or removed, an attempt finished, an
// abort, the time passing); actions come out (send this task to that engine,
// deliver this reply, fail this task, tell the hub a retry happened). The
// clock is injected, so tests drive it in microseconds with a fake one and
// benchmarks measure it without a network.
//
// Every task submitted and accepted gets exactly one final action (kDeliver
// or kFail). The core never sees a task's arguments: only what routing needs.
//
// The core keeps each task's state (waiting, ready, running) and turns
// events into actions; it composes the parts that own the rest, each
// tested alone: the engines and what they hold (engine_book.h), the ready
// tasks in order (ready_queue.h), what tasks wait for (dependency_tracker.h)
// and the retry and send-ahead policy (retry_policy.h).
//
// Thread safety: owned by one thread.
#ifndef ZTASK_SCHEDULER_CORE_H_
#define ZTASK_SCHEDULER_CORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/flat_id_map.h"
#include "base/id_slots.h"
#include "base/recent_id_map.h"
#include "scheduler/dependencies.h"
#include "scheduler/dependency_tracker.h"
#include "scheduler/depth_gauge.h"
#include "scheduler/engine_book.h"
#include "scheduler/ready_queue.h"
#include "scheduler/retry_policy.h"
#include "scheduler/run_times.h"
#include "scheduler/scheme.h"
#include "ztask/task.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

struct CoreOptions {
  // Slots an engine may hold beyond those it runs, plus one: 1 (the
  // default) sends a task only where its slots are free, HWM h lets h-1
  // more slots' worth of tasks wait on an engine; 0 means no limit.
  // Resources are never booked beyond what an engine has.
  //
  // kAdaptiveHwm (taskscheduler's default): each engine's HWM is learned
  // (depth_gauge.h): a queue there only while its tasks finish fast, as
  // deep as hides the round trip. And the take-back rule: when an engine
  // is idle while another has tasks queued behind one that has run far
  // longer than its tasks usually take, those queued tasks are asked back
  // (kTakeBack); the engine answers "not run" for each it had not started
  // (TaskNotRun: it waits again, no retry used, and goes where there is
  // room) and runs the others as usual. A task never moves once started,
  // and nothing moves before its engine said it did not start it.
  uint32_t hwm = 1;
  // Send ahead: a task waiting for one last dependency, running on an
  // engine with room, goes to that engine at once, to run there as soon as
  // the dependency succeeds (the engine checks, and answers "not run" when
  // it did not). A chain then costs no round trip per link. Only for
  // dependencies whose required outcome is success, tasks without a
  // timeout, and engines the task may use. Off: a task is sent only once
  // its dependencies are met.
  bool send_ahead = false;
  // Outcomes of finished tasks remembered, at most (the latest): a task
  // naming an older one as a dependency waits while it is looked up
  // (look_up_unknown), or fails as never seen.
  size_t keep_finished = 1000000;
  // A dependency this core does not know (never seen, or let go of) is
  // asked about (TakeLookups) before it is called unknown: the answer comes
  // through LookedUp. Off: such a task fails at once with InvalidDependency.
  bool look_up_unknown = false;
};

// What the hub said of a dependency this core asked about.
enum class Lookup : uint8_t { kFinished, kUnfinished, kUnknown };

struct Submission {
  TaskId id;
  DependencySet after;
  DependencySet follow;
  std::vector<int32_t> targets;  // engine ids; empty: any engine
  double timeout_s = 0;          // 0: no timeout
  int32_t retries = 0;
  int32_t priority = 0;
  Amounts needs;  // placed only where all of it is free at once
  // Restoring a scheduler's state after a restart: the attempts already
  // made, and the engine running the latest one (kNoSlot: it waits).
  int32_t attempts = 0;
  EngineSlot running_on = kNoSlot;
};

struct Action {
  enum class Kind : uint8_t {
    kDispatch,  // send the task to engine (slot, engine_id) as `attempt`
    kDeliver,   // final: the reply just given to TaskFinished goes to the client
    kFail,      // final: the scheduler fails the task with error/message
    kRetry,     // attempt `attempt` failed on engine_id; the task waits again
    kRetire,    // the draining engine (slot, engine_id) has no task left: let it go
    kReturned,  // sent ahead, or taken back (message: why), not run there (attempt
                // `attempt`): waits again, no retry used
    kUnmet,     // engine_id answered that the task's functional dependencies are unmet
                // there (message: why): it waits for another engine, no retry used
    kTakeBack,  // ask engine (slot, engine_id) to give `attempt` of the task back if it
                // has not started it (its answer: TaskNotRun, or the task's reply)
  };
  Kind kind;
  TaskId task;
  EngineSlot slot = kNoSlot;
  int32_t engine_id = -1;  // -1: no engine involved
  int32_t attempt = 0;
  ErrorType error = ErrorType::kNone;
  std::string message;
  bool from_reply = false;  // kDeliver/kRetry caused by an engine's reply
  // kDispatch sent ahead: the engine runs the task only after this task
  // (running there) succeeded there. Zero: none.
  TaskId run_after{};
};

struct CoreCounters {
  uint64_t submitted = 0;
  uint64_t duplicates = 0;  // submissions with an id already known
  uint64_t dispatched = 0;
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  uint64_t retried = 0;
  uint64_t late_replies = 0;  // replies for tasks not running there
  uint64_t taken_back = 0;    // tasks asked back from engines (kTakeBack)
};

struct AbortOutcome {
  std::vector<TaskId> aborted, running, finished, unknown;
};

class SchedulerCore {
 public:
  // REQUIRES: scheme and clock non-null; clock outlives the core.
  SchedulerCore(CoreOptions options, std::unique_ptr<Scheme> scheme, base::Clock* clock);

  // Accepts a task. Returns false (and does nothing else) when a task with
  // this id was already submitted: a duplicate is a peer's bug, not a task.
  bool Submit(const Submission& submission);

  // An engine life begins; returns its slot. An engine id already alive is
  // first removed (it restarted before we heard it was gone). An engine not
  // `accepting` holds tasks restored onto it but gets no new one until
  // EngineAccepting().
  EngineSlot EngineAdded(int32_t engine_id, bool accepting = true, const Amounts& capacity = {});
  void EngineAccepting(EngineSlot slot);
  // What the engine can hold at once, as it said when it came (an engine
  // restored after a restart holds one slot until it says).
  void SetCapacity(EngineSlot slot, const Amounts& capacity);
  // The engine is gone: its running tasks fail with EngineError (retried
  // when they may be). Unknown or already removed slots are ignored.
  void EngineRemoved(EngineSlot slot);
  // The engine is to leave: it gets no new task, finishes what it has, and
  // then a kRetire action says it may go (at once when it is idle).
  void EngineDraining(EngineSlot slot);

  enum class Finish { kAccepted, kLate };
  // An attempt ended on `slot`. kLate when the task is not running there
  // (its engine was declared lost, or the id is unknown): nothing changes.
  // A failure that is not `retriable` (it would repeat anywhere: a limit
  // the task broke) is final, whatever retries are left. `run_us`: how long
  // it ran, as the engine measured it (negative: not said), which sets the
  // engine's pack for leastload (run_times.h).
  Finish TaskFinished(EngineSlot slot, const TaskId& task, bool success, ErrorType error,
                      bool retriable = true, int64_t run_us = -1);
  // The engine did not run a task sent ahead (its dependency did not
  // succeed there): the task waits again, as if never sent, and fails only
  // if its dependencies now say so. kLate as for TaskFinished.
  Finish TaskNotRun(EngineSlot slot, const TaskId& task);
  // The engine answered that the task cannot run there (a functional
  // dependency, `why`): the task goes to another engine it may use,
  // without using a retry, and never back to this one; once every live
  // engine it may use has answered so, it fails with ImpossibleDependency.
  // kLate as for TaskFinished.
  Finish TaskUnmet(EngineSlot slot, const TaskId& task, std::string why);

  // Restoring after a restart: a task that finished before, as dependents
  // see it. Call before submitting its dependents.
  void RestoreFinished(const TaskId& id, bool success, int32_t engine_id);
  // Dependencies to ask about (look_up_unknown), each once while unanswered.
  std::vector<TaskId> TakeLookups();
  // The answer for `dep`: finished (with `success` and the engine it ran
  // on, -1 for none) settles its waiters as its outcome would have; unknown
  // fails them with InvalidDependency; unfinished leaves them waiting while
  // AwaitUnknownUntil's deadline runs (it is being restored), and fails
  // them otherwise.
  void LookedUp(const TaskId& dep, Lookup answer, bool success = false, int32_t engine_id = -1);
  // Dependencies asked about and not answered yet.
  size_t lookups_pending() const { return tracker_.lookups_pending(); }
  // The slot of a live engine id, or kNoSlot.
  EngineSlot SlotOf(int32_t engine_id) const { return book_.SlotOf(engine_id); }
  int32_t EngineIdOf(EngineSlot slot) const { return book_.IdOf(slot); }
  // Whether the task finished here (and is still remembered).
  bool HasFinished(const TaskId& id) const { return tracker_.HasFinished(id); }
  // Starts loading what a task's arrival looks up (a hint).
  void Prefetch(const TaskId& id) const {
    tracker_.Prefetch(id);
    tasks_.prefetch(id);
  }
  // Whether the task is waiting or running here.
  bool Knows(const TaskId& id) const { return tasks_.contains(id); }
  // The latest attempt of a task waiting or running here, or -1.
  int32_t AttemptOf(const TaskId& id) const {
    const Task* task = tasks_.find(id);
    return task ? task->attempt : -1;
  }
  // Whether the task runs (or waits there, sent ahead) on `slot` as
  // `attempt`.
  bool RunsAs(const TaskId& id, EngineSlot slot, int32_t attempt) const {
    const Task* task = tasks_.find(id);
    return task && task->state == State::kRunning && task->slot == slot && task->attempt == attempt;
  }
  // The tasks running on a slot.
  std::vector<TaskId> RunningOn(EngineSlot slot) const;
  // After a restart, an engine says it holds (or ran) `id` as `attempt`,
  // which the restored state has waiting: it was dispatched there after the
  // hub's last record. Returns false (nothing changes) unless the task
  // waits and `attempt` is later than its last known attempt.
  bool Adopt(EngineSlot slot, const TaskId& id, int32_t attempt);
  // After a restart, the engine neither holds a task restored as running on
  // it nor sent its reply again: the dispatch was lost with the old
  // scheduler and the task never ran there. It waits again (no retry spent)
  // and goes to an engine like any waiting task.
  void AttemptLost(EngineSlot slot, const TaskId& id);

  // Until the clock reaches `deadline_us`, a dependency never seen makes a
  // task wait for it instead of failing. After a restart a client's
  // messages can come out of order: those lost in the kernel's buffers when
  // the connection broke are sent again after those still queued in its
  // socket. Tasks still waiting for a dependency never seen at the deadline
  // fail with InvalidDependency.
  void AwaitUnknownUntil(int64_t deadline_us) { tracker_.AwaitUnknownUntil(deadline_us); }

  // Fails every listed task still waiting with TaskAborted. One sent to an
  // engine (listed as running) is asked back (kTakeBack): if the engine had
  // not started it (TaskNotRun), or loses it, it fails with TaskAborted;
  // once started it runs to its end.
  AbortOutcome Abort(const std::vector<TaskId>& tasks);

  // Fails the tasks whose timeout passed.
  void Tick();
  // The caller's turn ended (what it dispatched went out together): packs
  // begun in it are closed to the tasks that come later (run_times.h).
  void EndTurn() { ++turn_; }
  // When Tick() next has work, if ever.
  std::optional<int64_t> NextDeadline() const;

  // Moves the actions produced since the last call into *out (cleared
  // first); the core keeps out's storage for the next ones.
  void TakeActions(std::vector<Action>* out);

  const CoreCounters& counters() const { return counters_; }
  size_t live_tasks() const { return tasks_.size(); }
  size_t unassigned_tasks() const { return tasks_.size() - running_; }
  // Tasks whose dependencies are met, waiting for an engine.
  size_t ready_tasks() const { return ready_.size(); }
  size_t finished_tasks() const { return tracker_.finished_count(); }
  // Slots booked on the engine by the tasks it holds.
  uint32_t LoadOf(EngineSlot slot) const { return book_.LoadOf(slot); }
  // The engine's HWM now: learned with kAdaptiveHwm, else the option's.
  // REQUIRES: slot was returned by EngineAdded.
  uint32_t HwmOf(EngineSlot slot) const { return book_.HwmOf(slot); }
  size_t live_engines() const { return book_.live().size(); }
  // Live engine ids and their slots.
  const std::unordered_map<int32_t, EngineSlot>& engines() const { return book_.live(); }

 private:
  enum class State : uint8_t { kWaiting, kReady, kRunning };

  // Fields ordered to leave no padding: every live task holds one
  // (BM_Memory in bench/core_bench.cc counts the bytes).
  struct Task {
    TaskId id;
    State state = State::kWaiting;
    bool ahead = false;     // running: sent before its dependencies were met
    bool followed = false;  // running: one of its waiters was sent ahead behind it
    // Some engine it may use could hold it (not Unsatisfiable): once found,
    // it waits for one to have room, even through engines leaving.
    bool judged = false;
    bool grouped = false;  // ready, in a group of ready_
    bool taking_back = false;  // running: asked back from its engine (kTakeBack)
    bool aborting = false;     // running: aborted, asked back to fail when given back
    int32_t priority = 0;
    int32_t attempt = 0;
    uint64_t seq = 0;
    TaskDependencies deps;
    std::vector<int32_t> targets;
    Attempts attempts;  // retries left, engines where it failed
    int64_t timeout_us = 0;
    int64_t deadline_us = 0;
    EngineSlot slot = kNoSlot;
    uint32_t running_index = 0;  // in the engine's list (EngineBook::Place)
    Demand demand;
  };

  using ReadyKey = ReadyQueue::Key;

  // --- tasks and their outcomes (core.cc) ---
  Task& NewTask(const Submission& s);
  // A task restored as running: its dependencies counted, none waited for
  // unless live here.
  void CountRestored(Task& task, const std::vector<TaskId>& after,
                     const std::vector<TaskId>& follow);
  // Fails the task (and returns false) when it depends on itself or on a
  // task unknown here and not to be waited for.
  bool CheckDependencies(Task& task, const std::vector<TaskId>& after,
                         const std::vector<TaskId>& follow);
  // Counts the dependencies finished, waits for the others; returns the
  // last one waited for (zero id: none) and sets *cause to the first that
  // finished in a rejected outcome.
  Waiter WaitForDependencies(Task& task, const std::vector<TaskId>& after,
                             const std::vector<TaskId>& follow, Cause* cause);
  // Evaluates a waiting task and acts: fails it, makes it ready, or leaves it.
  void Settle(Task& task, const Cause& cause);
  void MakeReady(Task& task);
  // Takes a ready task out of ready_ and its group (the group's next goes
  // into ready_); its state is left to the caller.
  void LeaveReady(Task& task);
  ReadyKey KeyOf(const Task& task) const {
    return {-static_cast<int64_t>(task.priority), task.seq, task.id};
  }
  void Unready(Task& task);
  // Final failure of a task not running; `slot` is where it last ran, if it
  // matters to follow dependents. Cascades to dependents.
  void Fail(Task& task, ErrorType error, std::string message, EngineSlot slot = kNoSlot);
  // Records a final outcome and applies it to every waiting dependent.
  void Resolve(const TaskId& id, Finished outcome);
  void DependencyDone(const Waiter& w, const TaskId& dep, const Finished& f);
  // The task running on `slot` with this id, or null (counted late).
  Task* RunningTask(EngineSlot slot, const TaskId& id);
  void AttemptFailed(Task& task, EngineSlot slot, ErrorType error, std::string message,
                     bool from_reply, bool retriable = true);
  // The engine's reply is final: delivered, and the task forgotten.
  void Deliver(Task& task, EngineSlot slot, ErrorType error);
  void AddDeadline(Task& task);
  // At the AwaitUnknownUntil deadline: fails the tasks still waiting for a
  // dependency never seen.
  void FailAwaitingUnknown();
  // Fails every task waiting for `dep` with InvalidDependency.
  void FailWaitersOf(const TaskId& dep);

  // --- engines and placement (core_engines.cc) ---
  void Assign(Task& task, EngineSlot slot, const TaskId& run_after = TaskId{});
  // Puts the task on the engine's list, with no dispatch (Assign's first half).
  void Place(Task& task, EngineSlot slot);
  void Release(Task& task);
  void Pump();
  // The scheme's choice, once packs begun in earlier turns are closed.
  EngineSlot Pick();
  // Places the ready task at `at` (constrained or wide) if it may go
  // somewhere now, or fails it if it never can; returns where the walk
  // goes on.
  ReadyQueue::Iterator PlaceConstrained(ReadyQueue::Iterator at, Task& task,
                                        std::vector<EngineView>* candidates);
  // Takes the task at `at` out of ready_; where to go on.
  ReadyQueue::Iterator TakeReady(ReadyQueue::Iterator at, Task& task);
  bool Constrained(const Task& task) const;
  // The live engines `task` may use, whatever their load; sets *never when
  // it can never run.
  void AllowedSlots(const Task& task, std::vector<EngineSlot>* allowed, std::string* never) const;
  // Engines with room that `task` may use now; sets *never (and *why) when
  // it can never run.
  void Candidates(Task& task, std::vector<EngineView>* out, std::string* never, ErrorType* why);
  // Packing fairness (EngineBook::Reserve) for `task`, fitting nowhere now.
  void Reserve(const Task& task);
  void RetireIfDrained(EngineSlot slot);
  // The tasks that ran on a lost engine: retried, failed or returned.
  void RunningLost(EngineSlot slot, int32_t engine_id, const std::vector<TaskId>& running);
  // Ready tasks that may follow only onto a lost engine fail.
  void LocatedLost(EngineSlot slot, int32_t engine_id);

  // --- send ahead (core_ahead.cc; CoreOptions::send_ahead) ---
  // Whether `task`, waiting, may go now to the engine running `dep`, its
  // one unfinished dependency.
  bool MayGoAhead(const Task& task, const Task& dep, bool is_follow, bool* no_room) const;
  // Sends `task` ahead behind `dep` if it may go, or notes `dep` to be looked
  // at again when only its engine's room was missing. True in both cases.
  bool GoAheadIfMay(Task& task, Task& dep, bool is_follow);
  // Sends `id` ahead behind `wait.task`, its one unfinished dependency, if it may go.
  void TrySendAhead(const TaskId& id, const Waiter& wait);
  // Sends ahead the first waiter of `dep` that may go (of SendAhead::kScan looked at).
  // `blocked_on`: the engine it was blocked on (SendAhead::TakeCheck), or kNoSlot.
  void SendAheadAfter(const TaskId& dep, EngineSlot blocked_on);
  // Sends ahead what waits for the tasks just dispatched or unblocked.
  void SendAheadAll();
  // A task sent ahead whose dependencies are not met comes back: it waits
  // again, its attempt not counted against its retries.
  // `why`: why it came back, when not because its dependency failed.
  void Return(Task& task, EngineSlot slot, std::string why = {});

  // --- the default HWM and the take-back rule (core_take_back.cc) ---
  bool adaptive() const { return book_.adaptive(); }
  // An engine answered a task it ran: its depth is measured again.
  void Measured(EngineSlot slot);
  // Asks back what waits on stuck engines while another engine is idle.
  void TakeBackStuck(int64_t now);
  // Asks a running task back from its engine (kTakeBack), once.
  void AskBack(Task& task);
  // How often the take-back rule looks, while tasks may be queued on
  // engines.
  static constexpr int64_t kTakeBackLookUs = 5000;

  CoreOptions options_;
  base::Clock* clock_;
  EngineBook book_;
  DependencyTracker tracker_;
  SendAhead ahead_;
  DepthGauge gauge_;
  RunTimes run_times_;
  uint64_t turn_ = 0;  // EndTurn
  // Some engine may hold queued tasks (set on dispatch, cleared by a look
  // that found none), and when the take-back rule looks next.
  bool maybe_queued_ = false;
  int64_t next_take_back_us_ = 0;
  IdSlots<Task> tasks_;  // waiting and running, by id
  // Tasks ready to be placed; wide ones that may go anywhere in groups.
  ReadyQueue ready_;
  size_t running_ = 0;
  uint64_t next_seq_ = 0;
  // Ready tasks by the engines their follow dependencies ran on: checked
  // when such an engine goes.
  std::unordered_map<EngineSlot, std::vector<TaskId>> located_on_;

  using Deadline = std::pair<int64_t, TaskId>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<>> deadlines_;

  std::vector<Action> actions_;
  CoreCounters counters_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_CORE_H_
