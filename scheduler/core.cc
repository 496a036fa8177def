#include "scheduler/core.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ztask::scheduler {
namespace {

std::vector<TaskId> Unique(std::vector<TaskId> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool Contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Outcome(bool success) { return success ? "success" : "failure"; }

}  // namespace

SchedulerCore::SchedulerCore(CoreOptions options, std::unique_ptr<Scheme> scheme, Clock* clock)
    : options_(options), scheme_(std::move(scheme)), clock_(clock) {
  assert(scheme_ && clock_);
}

bool SchedulerCore::Submit(const Submission& s) {
  if (tasks_.count(s.id) || finished_.contains(s.id)) {
    ++counters_.duplicates;
    return false;
  }
  ++counters_.submitted;
  Task& task = tasks_[s.id];
  task.id = s.id;
  task.priority = s.priority;
  task.seq = next_seq_++;
  task.targets = s.targets;
  task.slots = static_cast<uint32_t>(std::max(1, s.needs.slots));
  for (const auto& [name, units] : s.needs.resources) {
    if (units > 0) task.needs.emplace_back(ResourceIndex(name), units);
  }
  task.timeout_us = s.timeout_s > 0 ? static_cast<int64_t>(std::llround(s.timeout_s * 1e6)) : 0;
  // Every earlier attempt but a running one failed and used a retry.
  const bool running =
      s.running_on != kNoSlot && s.running_on < engines_.size() && engines_[s.running_on].alive;
  task.attempt = std::max(0, s.attempts);
  task.retries_left = std::max(0, s.retries - std::max(0, task.attempt - (running ? 1 : 0)));

  const std::vector<TaskId> after = Unique(s.after.ids);
  const std::vector<TaskId> follow = Unique(s.follow.ids);
  task.after = {static_cast<uint32_t>(after.size()), 0, 0, s.after.mode, s.after.outcome};
  task.follow = {static_cast<uint32_t>(follow.size()), 0, 0, s.follow.mode, s.follow.outcome};
  if (running) {
    // Its dependencies were met when it was sent, or it was sent ahead and
    // may come back not run: they are counted as for any task (one never
    // seen is not waited for).
    for (const auto* ids : {&after, &follow}) {
      const bool is_follow = ids == &follow;
      for (const TaskId& dep : *ids) {
        if (const Finished* f = finished_.find(dep)) {
          CountDependency(task, is_follow, *f);
        } else if (dep != s.id && tasks_.count(dep)) {
          waiters_[dep].push_back({s.id, is_follow});
        } else {
          --(is_follow ? task.follow : task.after).total;
        }
      }
    }
    Place(task, s.running_on);
    return true;
  }

  for (const auto* ids : {&after, &follow}) {
    for (const TaskId& dep : *ids) {
      if (dep == s.id) {
        Fail(task, ErrorType::kInvalidDependency, "task " + s.id.ToHex() + " depends on itself");
        Pump();
        return true;
      }
      if (!tasks_.count(dep) && !finished_.contains(dep)) {
        bool waits = false;
        if (clock_->NowMicros() < await_unknown_until_us_) {
          awaiting_unknown_.emplace_back(s.id, dep);  // waits below like any other
          waits = true;
        }
        if (options_.look_up_unknown) {
          if (looking_up_.insert(dep).second) lookups_.push_back(dep);
          waits = true;
        }
        if (waits) continue;
        Fail(task, ErrorType::kInvalidDependency,
             "task " + s.id.ToHex() + " depends on " + dep.ToHex() +
                 ", which this scheduler has never seen");
        Pump();
        return true;
      }
    }
  }
  Cause cause;  // the first dependency already finished with a rejected outcome
  bool have_cause = false;
  Waiter last_wait{};  // the dependency waited for, when there is one
  for (const auto* ids : {&after, &follow}) {
    const bool is_follow = ids == &follow;
    for (const TaskId& dep : *ids) {
      if (const Finished* f = finished_.find(dep)) {
        if (!CountDependency(task, is_follow, *f) && !have_cause) {
          cause = {dep, f->success()};
          have_cause = true;
        }
      } else {
        waiters_[dep].push_back({s.id, is_follow});
        last_wait = {dep, is_follow};
      }
    }
  }
  AddDeadline(task);
  Settle(task, cause);
  if (options_.send_ahead && !last_wait.task.IsZero()) TrySendAhead(s.id, last_wait);
  Pump();
  return true;
}

void SchedulerCore::TrySendAhead(const TaskId& id, const Waiter& wait) {
  auto t = tasks_.find(id);  // Settle may have failed it
  auto d = tasks_.find(wait.task);
  if (t != tasks_.end() && d != tasks_.end()) GoAheadIfMay(t->second, d->second, wait.is_follow);
}

void SchedulerCore::RestoreFinished(const TaskId& id, bool success, int32_t engine_id) {
  if (tasks_.count(id) || finished_.contains(id)) return;
  finished_.try_emplace(id, Finished{SlotOf(engine_id), success});
}

std::vector<TaskId> SchedulerCore::TakeLookups() {
  std::vector<TaskId> out;
  out.swap(lookups_);
  return out;
}

void SchedulerCore::LookedUp(const TaskId& dep, Lookup answer, bool success, int32_t engine_id) {
  looking_up_.erase(dep);
  if (tasks_.count(dep) || finished_.contains(dep)) return;  // it came meanwhile
  switch (answer) {
    case Lookup::kFinished:
      Resolve(dep, {SlotOf(engine_id), success});
      break;
    case Lookup::kUnfinished:
      // Being restored (a later page of the recovery), or lost with its
      // request: the recovery's deadline decides.
      if (clock_->NowMicros() < await_unknown_until_us_) return;
      FailWaitersOf(dep);
      break;
    case Lookup::kUnknown:
      FailWaitersOf(dep);
      break;
  }
  Pump();
}

std::vector<SchedulerCore::Waiter> SchedulerCore::TakeWaiters(const TaskId& dep) {
  std::vector<Waiter> waiters;
  if (auto it = waiters_.find(dep); it != waiters_.end()) {
    waiters = std::move(it->second);
    waiters_.erase(it);
  }
  return waiters;
}

void SchedulerCore::FailWaitersOf(const TaskId& dep) {
  for (const Waiter& w : TakeWaiters(dep)) {
    auto t = tasks_.find(w.task);
    if (t == tasks_.end() || t->second.state != State::kWaiting) continue;
    Fail(t->second, ErrorType::kInvalidDependency,
         "task " + w.task.ToHex() + " depends on " + dep.ToHex() +
             ", which neither this scheduler nor the hub has seen");
  }
}

bool SchedulerCore::CountDependency(Task& task, bool is_follow, const Finished& f) {
  DependencyProgress& progress = is_follow ? task.follow : task.after;
  const bool accepted = progress.Count(f.success());
  if (is_follow && accepted) {
    if (f.slot() == kNoSlot) {
      ++task.follow_unlocated;
    } else if (std::find(task.location.begin(), task.location.end(), f.slot()) ==
               task.location.end()) {
      task.location.push_back(f.slot());
    }
  }
  return accepted;
}

SchedulerCore::Verdict SchedulerCore::Evaluate(Task& task, const Cause& cause,
                                               std::string* reason) const {
  // Only a failure needs the task's name: no string work on the common path.
  auto name = [&] { return "task " + task.id.ToHex(); };
  for (const bool is_follow : {false, true}) {
    const DependencyProgress& p = is_follow ? task.follow : task.after;
    if (!p.Impossible()) continue;
    const char* kind = is_follow ? "follow" : "after";
    if (p.mode == DependencyMode::kAll) {
      *reason = name() + ": " + kind + " dependency " + cause.dep.ToHex() + " ended in " +
                Outcome(cause.success) + ", but " + std::string(AcceptedOutcomeName(p.outcome)) +
                " was required";
    } else {
      *reason = name() + ": none of its " + std::to_string(p.total) + " " + kind +
                " dependencies ended in " + std::string(AcceptedOutcomeName(p.outcome));
    }
    return Verdict::kImpossible;
  }
  if (!task.after.Met() || !task.follow.Met()) return Verdict::kWait;
  if (task.follow.total == 0) return Verdict::kReady;

  auto alive = [&](EngineSlot slot) { return engines_[slot].alive; };
  if (task.follow.mode == DependencyMode::kAll) {
    if (task.follow_unlocated > 0) {
      *reason = name() + ": a follow dependency never ran on an engine";
      return Verdict::kImpossible;
    }
    if (task.location.size() > 1) {
      *reason = name() + ": its follow dependencies ran on " +
                std::to_string(task.location.size()) + " different engines";
      return Verdict::kImpossible;
    }
    if (!alive(task.location[0])) {
      *reason = name() + ": engine " + std::to_string(engines_[task.location[0]].id) +
                ", where its follow dependencies ran, is gone";
      return Verdict::kImpossible;
    }
    return Verdict::kReady;
  }
  std::erase_if(task.location, [&](EngineSlot s) { return !alive(s); });
  if (!task.location.empty()) return Verdict::kReady;
  if (!task.follow.AllFinished()) return Verdict::kWait;
  *reason = name() + ": no engine where one of its follow dependencies ran is still alive";
  return Verdict::kImpossible;
}

void SchedulerCore::Settle(Task& task, const Cause& cause) {
  std::string reason;
  switch (Evaluate(task, cause, &reason)) {
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
  for (EngineSlot slot : task.location) located_on_[slot].push_back(task.id);
  task.grouped = Wide(task) && !Constrained(task);
  const ReadyQueue::Group group{task.slots, task.needs};
  ready_.Add(KeyOf(task), task.grouped ? &group : nullptr);
}

void SchedulerCore::LeaveReady(Task& task) {
  const ReadyQueue::Group group{task.slots, task.needs};
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
  const int32_t engine_id = slot == kNoSlot ? -1 : engines_[slot].id;
  actions_.push_back(
      {Action::Kind::kFail, id, slot, engine_id, task.attempt, error, std::move(message), false});
  tasks_.erase(id);
  Resolve(id, {slot, false});
}

void SchedulerCore::Resolve(const TaskId& id, Finished outcome) {
  finished_.try_emplace(id, outcome);
  resolving_.emplace_back(id, outcome);
  if (draining_) return;  // the outer call drains the list: no recursion
  draining_ = true;
  while (!resolving_.empty()) {
    auto [dep, f] = resolving_.back();
    resolving_.pop_back();
    for (const Waiter& w : TakeWaiters(dep)) {
      auto t = tasks_.find(w.task);
      if (t == tasks_.end()) continue;
      Task& task = t->second;
      if (task.state == State::kRunning && task.ahead) {
        // Sent ahead: its engine runs it only if this was a success; if it
        // comes back not run, it is settled then (TaskNotRun).
        if (!CountDependency(task, w.is_follow, f))
          ahead_cause_.try_emplace(w.task, dep, f.success());
        continue;
      }
      if (task.state != State::kWaiting) continue;
      CountDependency(task, w.is_follow, f);
      Settle(task, {dep, f.success()});
    }
  }
  draining_ = false;
}

void SchedulerCore::AddDeadline(Task& task) {
  if (task.timeout_us <= 0) return;
  task.deadline_us = clock_->NowMicros() + task.timeout_us;
  deadlines_.emplace(task.deadline_us, task.id);
}

SchedulerCore::Finish SchedulerCore::TaskFinished(EngineSlot slot, const TaskId& id, bool success,
                                                  ErrorType error, bool retriable) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.state != State::kRunning || it->second.slot != slot) {
    ++counters_.late_replies;
    return Finish::kLate;
  }
  Task& task = it->second;
  Release(task);
  if (!ahead_cause_.empty()) ahead_cause_.erase(id);
  if (success) {
    ++counters_.succeeded;
    actions_.push_back({Action::Kind::kDeliver,
                        id,
                        slot,
                        engines_[slot].id,
                        task.attempt,
                        ErrorType::kNone,
                        {},
                        true});
    tasks_.erase(it);
    Resolve(id, {slot, true});
  } else {
    AttemptFailed(task, slot, error == ErrorType::kNone ? ErrorType::kTaskFailed : error, {},
                  /*from_reply=*/true, retriable);
  }
  Pump();
  return Finish::kAccepted;
}

SchedulerCore::Finish SchedulerCore::TaskNotRun(EngineSlot slot, const TaskId& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.state != State::kRunning || it->second.slot != slot) {
    ++counters_.late_replies;
    return Finish::kLate;
  }
  Release(it->second);
  Return(it->second, slot);
  Pump();
  return Finish::kAccepted;
}

SchedulerCore::Finish SchedulerCore::TaskUnmet(EngineSlot slot, const TaskId& id, std::string why) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.state != State::kRunning || it->second.slot != slot) {
    ++counters_.late_replies;
    return Finish::kLate;
  }
  Task& task = it->second;
  const int32_t engine_id = engines_[slot].id;
  Release(task);
  if (!Contains(task.unmet, engine_id)) task.unmet.push_back(engine_id);
  actions_.push_back(
      {Action::Kind::kUnmet, id, slot, engine_id, task.attempt, ErrorType::kNone, why, true});
  std::vector<EngineSlot> allowed;
  std::string never;
  AllowedSlots(task, &allowed, &never);
  if (!never.empty()) {
    std::string ids;
    for (int32_t e : task.unmet) ids += (ids.empty() ? "" : ", ") + std::to_string(e);
    Fail(task, ErrorType::kImpossibleDependency,
         "task " + id.ToHex() + ": no engine can run it: engine" +
             (task.unmet.size() > 1 ? "s " : " ") + ids +
             " answered that its dependencies are unmet there (engine " +
             std::to_string(engine_id) + ": " + why + ")");
  } else {
    AddDeadline(task);  // it waits to start again, within its timeout
    MakeReady(task);
  }
  Pump();
  return Finish::kAccepted;
}

void SchedulerCore::AttemptFailed(Task& task, EngineSlot slot, ErrorType error, std::string message,
                                  bool from_reply, bool retriable) {
  const int32_t engine_id = engines_[slot].id;
  // A task that cannot be read, or whose failure would repeat, fails the
  // same way on every engine.
  if (task.retries_left > 0 && error != ErrorType::kBadTask && retriable) {
    --task.retries_left;
    ++counters_.retried;
    if (!Contains(task.blacklist, engine_id)) task.blacklist.push_back(engine_id);
    actions_.push_back(
        {Action::Kind::kRetry, task.id, slot, engine_id, task.attempt, error, message, from_reply});
    const bool failed_on_every_target =
        !task.targets.empty() &&
        std::all_of(task.targets.begin(), task.targets.end(),
                    [&](int32_t t) { return Contains(task.blacklist, t); });
    if (failed_on_every_target) {
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
    const TaskId id = task.id;
    actions_.push_back(
        {Action::Kind::kDeliver, id, slot, engine_id, task.attempt, error, {}, true});
    tasks_.erase(id);
    Resolve(id, {slot, false});
    return;
  }
  Fail(task, error, std::move(message), slot);
}

AbortOutcome SchedulerCore::Abort(const std::vector<TaskId>& ids) {
  AbortOutcome outcome;
  for (const TaskId& id : ids) {
    if (auto it = tasks_.find(id); it != tasks_.end()) {
      if (it->second.state == State::kRunning) {
        outcome.running.push_back(id);
      } else {
        Fail(it->second, ErrorType::kTaskAborted, "task " + id.ToHex() + " was aborted on request");
        outcome.aborted.push_back(id);
      }
    } else if (finished_.contains(id)) {
      outcome.finished.push_back(id);
    } else {
      outcome.unknown.push_back(id);
    }
  }
  Pump();
  return outcome;
}

void SchedulerCore::FailAwaitingUnknown() {
  std::vector<std::pair<TaskId, TaskId>> awaiting;
  awaiting.swap(awaiting_unknown_);
  await_unknown_until_us_ = 0;
  for (const auto& [id, dep] : awaiting) {
    if (tasks_.count(dep) || finished_.contains(dep)) continue;  // it came
    waiters_.erase(dep);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second.state != State::kWaiting) continue;
    Fail(it->second, ErrorType::kInvalidDependency,
         "task " + id.ToHex() + " depends on " + dep.ToHex() +
             ", which this scheduler has never seen");
  }
}

void SchedulerCore::Tick() {
  const int64_t now = clock_->NowMicros();
  if (await_unknown_until_us_ != 0 && now >= await_unknown_until_us_) FailAwaitingUnknown();
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const auto [deadline, id] = deadlines_.top();
    deadlines_.pop();
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second.state == State::kRunning ||
        it->second.deadline_us != deadline) {
      continue;  // finished, started, or re-queued with a later deadline
    }
    Task& task = it->second;
    Fail(task, ErrorType::kTaskTimeout,
         "task " + id.ToHex() + " did not start within " +
             std::to_string(task.timeout_us / 1e6).substr(0, 8) + " s of being queued");
  }
  Pump();
}

std::optional<int64_t> SchedulerCore::NextDeadline() const {
  std::optional<int64_t> next;
  if (!deadlines_.empty()) next = deadlines_.top().first;
  if (!awaiting_unknown_.empty() && (!next || await_unknown_until_us_ < *next)) {
    next = await_unknown_until_us_;
  }
  return next;
}

void SchedulerCore::TakeActions(std::vector<Action>* out) {
  out->clear();
  out->swap(actions_);
}

uint32_t SchedulerCore::LoadOf(EngineSlot slot) const {
  return slot < engines_.size() ? engines_[slot].load : 0;
}

}  // namespace ztask::scheduler
