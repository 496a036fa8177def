// The task side of the core: submissions, outcomes, failures and their
// cascades, deadlines. Engines and placement are in core_engines.cc, sending
// ahead in core_ahead.cc.
#include "scheduler/core.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ztask::scheduler {
namespace {

std::string Aborted(const TaskId& id) { return "task " + id.ToHex() + " was aborted on request"; }

std::vector<TaskId> Unique(std::vector<TaskId> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

SchedulerCore::SchedulerCore(CoreOptions options, std::unique_ptr<Scheme> scheme, base::Clock* clock)
    : options_(options),
      clock_(clock),
      book_(options.hwm, std::move(scheme)),
      tracker_(options.keep_finished, options.look_up_unknown) {
  assert(clock_);
}

bool SchedulerCore::Submit(const Submission& s) {
  if (tasks_.contains(s.id) || tracker_.HasFinished(s.id)) {
    ++counters_.duplicates;
    return false;
  }
  ++counters_.submitted;
  Task& task = NewTask(s);
  const std::vector<TaskId> after = Unique(s.after.ids);
  const std::vector<TaskId> follow = Unique(s.follow.ids);
  task.deps.after = {static_cast<uint32_t>(after.size()), 0, 0, s.after.mode, s.after.outcome};
  task.deps.follow = {static_cast<uint32_t>(follow.size()), 0, 0, s.follow.mode,
                      s.follow.outcome};
  if (book_.Alive(s.running_on)) {
    CountRestored(task, after, follow);
    Place(task, s.running_on);
    return true;
  }
  Cause cause;  // the first dependency already finished with a rejected outcome
  Waiter last_wait{};
  if (!after.empty() || !follow.empty()) {  // most tasks have none: no call
    if (!CheckDependencies(task, after, follow)) {
      Pump();
      return true;
    }
    last_wait = WaitForDependencies(task, after, follow, &cause);
  }
  AddDeadline(task);
  Settle(task, cause);
  if (options_.send_ahead && !last_wait.task.IsZero()) TrySendAhead(s.id, last_wait);
  Pump();
  return true;
}

SchedulerCore::Task& SchedulerCore::NewTask(const Submission& s) {
  Task& task = tasks_[s.id];
  task.id = s.id;
  task.priority = s.priority;
  task.seq = next_seq_++;
  task.targets = s.targets;
  task.demand = book_.DemandOf(s.needs);
  task.timeout_us = s.timeout_s > 0 ? static_cast<int64_t>(std::llround(s.timeout_s * 1e6)) : 0;
  task.attempt = std::max(0, s.attempts);
  task.attempts.retries_left = RetriesLeft(s.retries, task.attempt, book_.Alive(s.running_on));
  return task;
}

void SchedulerCore::CountRestored(Task& task, const std::vector<TaskId>& after,
                                  const std::vector<TaskId>& follow) {
  // Its dependencies were met when it was sent, or it was sent ahead and
  // may come back not run: they are counted as for any task (one never
  // seen is not waited for).
  for (const auto* ids : {&after, &follow}) {
    const bool is_follow = ids == &follow;
    for (const TaskId& dep : *ids) {
      if (const Finished* f = tracker_.OutcomeOf(dep)) {
        CountDependency(task.deps, is_follow, *f);
      } else if (dep != task.id && tasks_.contains(dep)) {
        tracker_.Wait(task.id, dep, is_follow);
      } else {
        --(is_follow ? task.deps.follow : task.deps.after).total;
      }
    }
  }
}

bool SchedulerCore::CheckDependencies(Task& task, const std::vector<TaskId>& after,
                                      const std::vector<TaskId>& follow) {
  const TaskId id = task.id;
  for (const auto* ids : {&after, &follow}) {
    for (const TaskId& dep : *ids) {
      if (dep == id) {
        Fail(task, ErrorType::kInvalidDependency, "task " + id.ToHex() + " depends on itself");
        return false;
      }
      if (tasks_.contains(dep) || tracker_.HasFinished(dep)) continue;
      if (tracker_.WaitForUnknown(id, dep, clock_->MonotonicMicros())) continue;
      Fail(task, ErrorType::kInvalidDependency,
           "task " + id.ToHex() + " depends on " + dep.ToHex() +
               ", which this scheduler has never seen");
      return false;
    }
  }
  return true;
}

Waiter SchedulerCore::WaitForDependencies(Task& task, const std::vector<TaskId>& after,
                                          const std::vector<TaskId>& follow, Cause* cause) {
  bool have_cause = false;
  Waiter last_wait{};
  for (const auto* ids : {&after, &follow}) {
    const bool is_follow = ids == &follow;
    for (const TaskId& dep : *ids) {
      if (const Finished* f = tracker_.OutcomeOf(dep)) {
        if (!CountDependency(task.deps, is_follow, *f) && !have_cause) {
          *cause = {dep, f->success()};
          have_cause = true;
        }
      } else {
        tracker_.Wait(task.id, dep, is_follow);
        last_wait = {dep, is_follow};
      }
    }
  }
  return last_wait;
}

void SchedulerCore::RestoreFinished(const TaskId& id, bool success, int32_t engine_id) {
  if (tasks_.contains(id) || tracker_.HasFinished(id)) return;
  tracker_.Restore(id, {SlotOf(engine_id), success});
}

std::vector<TaskId> SchedulerCore::TakeLookups() { return tracker_.TakeLookups(); }

void SchedulerCore::LookedUp(const TaskId& dep, Lookup answer, bool success, int32_t engine_id) {
  tracker_.Answered(dep);
  if (tasks_.contains(dep) || tracker_.HasFinished(dep)) return;  // it came meanwhile
  switch (answer) {
    case Lookup::kFinished:
      Resolve(dep, {SlotOf(engine_id), success});
      break;
    case Lookup::kUnfinished:
      // Being restored (a later page of the recovery), or lost with its
      // request: the recovery's deadline decides.
      if (tracker_.Awaiting(clock_->MonotonicMicros())) return;
      FailWaitersOf(dep);
      break;
    case Lookup::kUnknown:
      FailWaitersOf(dep);
      break;
  }
  Pump();
}

void SchedulerCore::FailWaitersOf(const TaskId& dep) {
  for (const Waiter& w : tracker_.TakeWaiters(dep)) {
    Task* t = tasks_.find(w.task);
    if (!t || t->state != State::kWaiting) continue;
    Fail(*t, ErrorType::kInvalidDependency,
         "task " + w.task.ToHex() + " depends on " + dep.ToHex() +
             ", which neither this scheduler nor the hub knows (never recorded, or its record "
             "dropped by the hub's retention)");
  }
}

void SchedulerCore::Settle(Task& task, const Cause& cause) {
  std::string reason;
  switch (Evaluate(task.id, task.deps, cause, book_, &reason)) {
    case Verdict::kImpossible:
      Fail(task, ErrorType::kImpossibleDependency, std::move(reason));
      break;
    case Verdict::kReady:
      MakeReady(task);
      break;
    case Verdict::kWait:
      break;
  }
}

void SchedulerCore::MakeReady(Task& task) {
  task.state = State::kReady;
  for (EngineSlot slot : task.deps.location) located_on_[slot].push_back(task.id);
  task.grouped = task.demand.Wide() && !Constrained(task);
  const ReadyQueue::Group group{task.demand.slots, task.demand.units};
  ready_.Add(KeyOf(task), task.grouped ? &group : nullptr);
}

void SchedulerCore::LeaveReady(Task& task) {
  const ReadyQueue::Group group{task.demand.slots, task.demand.units};
  ready_.Remove(KeyOf(task), task.grouped ? &group : nullptr);
  task.grouped = false;
}

void SchedulerCore::Unready(Task& task) {
  if (task.state != State::kReady) return;
  LeaveReady(task);
  task.state = State::kWaiting;
}

void SchedulerCore::Fail(Task& task, ErrorType error, std::string message, EngineSlot slot) {
  assert(task.state != State::kRunning);
  Unready(task);
  ++counters_.failed;
  const TaskId id = task.id;
  const int32_t engine_id = slot == kNoSlot ? -1 : book_.IdOf(slot);
  actions_.push_back(
      {Action::Kind::kFail, id, slot, engine_id, task.attempt, error, std::move(message), false});
  tasks_.erase(id);
  Resolve(id, {slot, false});
}

void SchedulerCore::Resolve(const TaskId& id, Finished outcome) {
  tracker_.Resolve(id, outcome, [this](const Waiter& w, const TaskId& dep, const Finished& f) {
    DependencyDone(w, dep, f);
  });
}

void SchedulerCore::DependencyDone(const Waiter& w, const TaskId& dep, const Finished& f) {
  Task* t = tasks_.find(w.task);
  if (!t) return;
  Task& task = *t;
  if (task.state == State::kRunning && task.ahead) {
    // Sent ahead: its engine runs it only if this was a success; if it
    // comes back not run, it is settled then (TaskNotRun).
    if (!CountDependency(task.deps, w.is_follow, f)) ahead_.NoteRejected(w.task, {dep, f.success()});
    return;
  }
  if (task.state != State::kWaiting) return;
  CountDependency(task.deps, w.is_follow, f);
  Settle(task, {dep, f.success()});
}

void SchedulerCore::AddDeadline(Task& task) {
  if (task.timeout_us <= 0) return;
  task.deadline_us = clock_->MonotonicMicros() + task.timeout_us;
  deadlines_.emplace(task.deadline_us, task.id);
}

SchedulerCore::Task* SchedulerCore::RunningTask(EngineSlot slot, const TaskId& id) {
  Task* task = tasks_.find(id);
  if (!task || task->state != State::kRunning || task->slot != slot) {
    ++counters_.late_replies;
    return nullptr;
  }
  return task;
}

SchedulerCore::Finish SchedulerCore::TaskFinished(EngineSlot slot, const TaskId& id, bool success,
                                                  ErrorType error, bool retriable, int64_t run_us) {
  Task* task = RunningTask(slot, id);
  if (!task) return Finish::kLate;
  if (adaptive()) Measured(slot);
  if (success) book_.SetPack(slot, run_times_.Ran(slot, run_us));
  Release(*task);
  ahead_.Forget(id);
  if (success) {
    ++counters_.succeeded;
    Deliver(*task, slot, ErrorType::kNone);
  } else {
    AttemptFailed(*task, slot, error == ErrorType::kNone ? ErrorType::kTaskFailed : error, {},
                  /*from_reply=*/true, retriable);
  }
  Pump();
  return Finish::kAccepted;
}

void SchedulerCore::Deliver(Task& task, EngineSlot slot, ErrorType error) {
  const TaskId id = task.id;
  actions_.push_back(
      {Action::Kind::kDeliver, id, slot, book_.IdOf(slot), task.attempt, error, {}, true});
  tasks_.erase(id);
  Resolve(id, {slot, error == ErrorType::kNone});
}

SchedulerCore::Finish SchedulerCore::TaskNotRun(EngineSlot slot, const TaskId& id) {
  Task* task = RunningTask(slot, id);
  if (!task) return Finish::kLate;
  // Sent ahead and its dependency failed there: that is why, whether or
  // not it was also asked back.
  const bool taken_back = task->taking_back && !task->ahead;
  Release(*task);
  if (task->aborting) {  // given back unstarted after an abort: it ends here
    ahead_.Forget(id);
    Fail(*task, ErrorType::kTaskAborted, Aborted(id));
    Pump();
    return Finish::kAccepted;
  }
  Return(*task, slot,
         taken_back ? "taken back from engine " + std::to_string(book_.IdOf(slot)) +
                          " before it started there: it waited behind a long task"
                    : std::string());
  Pump();
  return Finish::kAccepted;
}

SchedulerCore::Finish SchedulerCore::TaskUnmet(EngineSlot slot, const TaskId& id, std::string why) {
  Task* running = RunningTask(slot, id);
  if (!running) return Finish::kLate;
  Task& task = *running;
  const int32_t engine_id = book_.IdOf(slot);
  if (adaptive()) Measured(slot);
  Release(task);
  if (task.aborting) {  // not run there after an abort: nowhere else either
    ahead_.Forget(id);
    Fail(task, ErrorType::kTaskAborted, Aborted(id));
    Pump();
    return Finish::kAccepted;
  }
  NoteUnmet(task.deps, engine_id);
  actions_.push_back(
      {Action::Kind::kUnmet, id, slot, engine_id, task.attempt, ErrorType::kNone, why, true});
  std::vector<EngineSlot> allowed;
  std::string never;
  AllowedSlots(task, &allowed, &never);
  if (!never.empty()) {
    Fail(task, ErrorType::kImpossibleDependency, NowhereUnmet(id, task.deps, engine_id, why));
  } else {
    AddDeadline(task);  // it waits to start again, within its timeout
    MakeReady(task);
  }
  Pump();
  return Finish::kAccepted;
}

void SchedulerCore::AttemptFailed(Task& task, EngineSlot slot, ErrorType error, std::string message,
                                  bool from_reply, bool retriable) {
  const int32_t engine_id = book_.IdOf(slot);
  // Aborted: never run again. Lost with its engine, it fails as aborted;
  // started and failed there, with its own error.
  if (task.aborting && !from_reply) {
    Fail(task, ErrorType::kTaskAborted, Aborted(task.id), slot);
    return;
  }
  if (!task.aborting && UseRetry(task.attempts, engine_id, error, retriable)) {
    ++counters_.retried;
    actions_.push_back(
        {Action::Kind::kRetry, task.id, slot, engine_id, task.attempt, error, message, from_reply});
    if (FailedOnEveryTarget(task.attempts, task.targets)) {
      Fail(task, ErrorType::kImpossibleDependency,
           "task " + task.id.ToHex() + " failed on every one of its target engines (last error: " +
               std::string(ErrorTypeName(error)) + ")");
      return;
    }
    AddDeadline(task);
    MakeReady(task);
    return;
  }
  if (from_reply) {
    ++counters_.failed;
    Deliver(task, slot, error);
    return;
  }
  Fail(task, error, std::move(message), slot);
}

AbortOutcome SchedulerCore::Abort(const std::vector<TaskId>& ids) {
  AbortOutcome outcome;
  for (const TaskId& id : ids) {
    if (Task* task = tasks_.find(id)) {
      if (task->state == State::kRunning) {
        task->aborting = true;
        AskBack(*task);
        outcome.running.push_back(id);
      } else {
        Fail(*task, ErrorType::kTaskAborted, Aborted(id));
        outcome.aborted.push_back(id);
      }
    } else if (tracker_.HasFinished(id)) {
      outcome.finished.push_back(id);
    } else {
      outcome.unknown.push_back(id);
    }
  }
  Pump();
  return outcome;
}

void SchedulerCore::FailAwaitingUnknown() {
  for (const auto& [id, dep] : tracker_.TakeAwaited()) {
    if (tasks_.contains(dep) || tracker_.HasFinished(dep)) continue;  // it came
    tracker_.TakeWaiters(dep);
    Task* task = tasks_.find(id);
    if (!task || task->state != State::kWaiting) continue;
    Fail(*task, ErrorType::kInvalidDependency,
         "task " + id.ToHex() + " depends on " + dep.ToHex() +
             ", which this scheduler has never seen");
  }
}

void SchedulerCore::Tick() {
  const int64_t now = clock_->MonotonicMicros();
  if (tracker_.AwaitExpired(now)) FailAwaitingUnknown();
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const auto [deadline, id] = deadlines_.top();
    deadlines_.pop();
    Task* late = tasks_.find(id);
    if (!late || late->state == State::kRunning || late->deadline_us != deadline) {
      continue;  // finished, started, or re-queued with a later deadline
    }
    Task& task = *late;
    Fail(task, ErrorType::kTaskTimeout,
         "task " + id.ToHex() + " did not start within " +
             std::to_string(task.timeout_us / 1e6).substr(0, 8) + " s of being queued");
  }
  if (adaptive() && maybe_queued_ && now >= next_take_back_us_) {
    next_take_back_us_ = now + kTakeBackLookUs;
    TakeBackStuck(now);
  }
  Pump();
}

std::optional<int64_t> SchedulerCore::NextDeadline() const {
  std::optional<int64_t> next;
  if (!deadlines_.empty()) next = deadlines_.top().first;
  const std::optional<int64_t> await = tracker_.AwaitDeadline();
  if (await && (!next || *await < *next)) next = await;
  if (adaptive() && maybe_queued_ && (!next || next_take_back_us_ < *next)) {
    next = next_take_back_us_;
  }
  return next;
}

void SchedulerCore::TakeActions(std::vector<Action>* out) {
  out->clear();
  out->swap(actions_);
}

}  // namespace ztask::scheduler
