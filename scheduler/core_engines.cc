// The engine side of the core: placing ready tasks on engines with room,
// engines coming, going and draining. What the engines hold is the
// EngineBook's; the task side is in core.cc.
#include <algorithm>
#include <cassert>

#include "scheduler/core.h"

namespace ztask::scheduler {
void SchedulerCore::Place(Task& task, EngineSlot slot) {
  const bool was_idle = book_.LoadOf(slot) == 0;
  // An idle engine's pack weighs nothing yet: brought up to date as it
  // takes work (its own measure, or the pool's before it has one).
  if (was_idle) book_.SetPack(slot, run_times_.PackOf(slot));
  task.running_index = book_.Place(slot, task.id, task.demand, turn_);
  if (adaptive()) {
    gauge_.Dispatched(slot, was_idle, clock_->MonotonicMicros());
    if (book_.Queued(slot) > 0) maybe_queued_ = true;
  }
  task.state = State::kRunning;
  task.slot = slot;
  task.ahead = !task.deps.Met();
  task.followed = false;
  task.taking_back = false;
  ++running_;
}

void SchedulerCore::Assign(Task& task, EngineSlot slot, const TaskId& run_after) {
  Place(task, slot);
  ++task.attempt;
  ++counters_.dispatched;
  actions_.push_back({Action::Kind::kDispatch,
                      task.id,
                      slot,
                      book_.IdOf(slot),
                      task.attempt,
                      ErrorType::kNone,
                      {},
                      false,
                      run_after});
  if (options_.send_ahead) ahead_.Dispatched(task.id);
}

void SchedulerCore::Release(Task& task) {
  const EngineSlot slot = task.slot;
  const std::optional<TaskId> moved = book_.Unplace(slot, task.running_index, task.demand);
  if (moved) tasks_.at(*moved).running_index = task.running_index;
  --running_;
  RetireIfDrained(slot);
  if (ahead_.AnyBlocked() && book_.HasRoom(slot)) ahead_.RoomOn(slot);
  task.state = State::kWaiting;
  task.slot = kNoSlot;
}

void SchedulerCore::RetireIfDrained(EngineSlot slot) {
  if (!book_.Drained(slot)) return;
  actions_.push_back(
      {Action::Kind::kRetire, TaskId{}, slot, book_.IdOf(slot), 0, ErrorType::kNone, {}, false});
}

bool SchedulerCore::Constrained(const Task& task) const {
  return !task.deps.location.empty() || !task.targets.empty() ||
         !task.attempts.failed_on.empty() || !task.deps.unmet.empty();
}

void SchedulerCore::AllowedSlots(const Task& task, std::vector<EngineSlot>* allowed,
                                 std::string* never) const {
  allowed->clear();
  never->clear();
  if (!task.deps.location.empty()) {
    for (EngineSlot s : task.deps.location) {
      if (book_.Alive(s)) allowed->push_back(s);
    }
    if (allowed->empty()) {
      *never = "task " + task.id.ToHex() + ": the engine where its follow dependencies ran is gone";
      return;
    }
  } else if (!task.targets.empty()) {
    for (int32_t id : task.targets) {
      if (const EngineSlot s = book_.SlotOf(id); s != kNoSlot) allowed->push_back(s);
    }
  } else {
    for (const auto& [id, slot] : book_.live()) allowed->push_back(slot);
  }
  if (task.deps.unmet.empty()) return;
  const size_t before = allowed->size();
  std::erase_if(*allowed, [&](EngineSlot s) { return Contains(task.deps.unmet, book_.IdOf(s)); });
  if (before > 0 && allowed->empty()) {
    *never = "task " + task.id.ToHex() +
             ": no engine can run it: every engine it may use answered that its dependencies "
             "are unmet there";
  }
}

void SchedulerCore::Candidates(Task& task, std::vector<EngineView>* out, std::string* never,
                               ErrorType* why) {
  out->clear();
  std::vector<EngineSlot> allowed;
  AllowedSlots(task, &allowed, never);
  *why = ErrorType::kImpossibleDependency;
  if (!never->empty()) return;
  if (task.demand.Wide() && !allowed.empty() && (!task.judged || !task.deps.unmet.empty())) {
    *never = book_.Unsatisfiable(task.id, task.demand, allowed, !task.targets.empty());
    if (!never->empty()) {
      // Judged before: engines that could hold it answered that it cannot
      // run there.
      *why = task.judged ? ErrorType::kImpossibleDependency : ErrorType::kUnsatisfiable;
      if (task.judged) *never += " (of the engines that did not answer that it cannot run there)";
      return;
    }
    task.judged = true;
  }
  // Prefer engines where it has not failed; when it failed on all of them,
  // run again on one rather than wait for an engine that may never come.
  const bool any_fresh = std::any_of(allowed.begin(), allowed.end(), [&](EngineSlot s) {
    return !FailedOn(task.attempts, book_.IdOf(s)) && book_.CouldHold(task.demand, s);
  });
  for (EngineSlot s : allowed) {
    if (!book_.Fits(task.id, task.demand, s)) continue;
    if (any_fresh && FailedOn(task.attempts, book_.IdOf(s))) continue;
    EngineView view = book_.ViewOf(s);
    view.open = view.open && !book_.PackExpired(s, turn_);
    out->push_back(view);
  }
}

void SchedulerCore::Reserve(const Task& task) {
  std::vector<EngineSlot> allowed;
  std::string never;
  AllowedSlots(task, &allowed, &never);
  book_.Reserve(task.id, task.demand, allowed);
}

ReadyQueue::Iterator SchedulerCore::TakeReady(ReadyQueue::Iterator at, Task& task) {
  const ReadyQueue::Group group{task.demand.slots, task.demand.units};
  const ReadyQueue::Iterator next = ready_.Take(at, task.grouped ? &group : nullptr);
  task.grouped = false;
  return next;
}

ReadyQueue::Iterator SchedulerCore::PlaceConstrained(ReadyQueue::Iterator at, Task& task,
                                                     std::vector<EngineView>* candidates) {
  std::string never;
  ErrorType why = ErrorType::kNone;
  Candidates(task, candidates, &never, &why);
  if (!never.empty()) {
    at = TakeReady(at, task);
    task.state = State::kWaiting;
    Fail(task, why, never);
    return at;
  }
  if (candidates->empty()) {
    if (task.demand.Wide() && !book_.holding()) Reserve(task);
    return ++at;
  }
  const EngineSlot slot = book_.PickFrom(*candidates);
  at = TakeReady(at, task);
  Assign(task, slot);
  return at;
}

EngineSlot SchedulerCore::Pick() {
  for (;;) {
    const EngineSlot slot = book_.Pick();
    if (!book_.PackExpired(slot, turn_)) return slot;
    book_.ClosePack(slot);  // the tasks that came with its first have gone
  }
}

void SchedulerCore::Pump() {
  std::vector<EngineView> candidates;
  book_.Unreserve();  // looked at again: the oldest wide task may fit now
  do {
    ready_.ClearGrew();
    for (auto it = ready_.begin(); it != ready_.end() && !book_.SchemeEmpty();) {
      Task& task = tasks_.at(it->id);
      if (!Constrained(task) && !task.demand.Wide()) {  // the common task: the scheme's pick
        const EngineSlot slot = Pick();
        it = TakeReady(it, task);
        Assign(task, slot);
        continue;
      }
      it = PlaceConstrained(it, task, &candidates);
    }
  } while (ready_.grew() && !book_.SchemeEmpty());
  // What room is left after the ready tasks may take tasks sent ahead.
  if (options_.send_ahead) SendAheadAll();
}

EngineSlot SchedulerCore::EngineAdded(int32_t engine_id, bool accepting,
                                      const Amounts& capacity) {
  if (const EngineSlot old = book_.SlotOf(engine_id); old != kNoSlot) EngineRemoved(old);
  const EngineSlot slot = book_.Add(engine_id, accepting, capacity);
  gauge_.Added(slot);
  run_times_.Added(slot);
  Pump();
  return slot;
}

void SchedulerCore::SetCapacity(EngineSlot slot, const Amounts& capacity) {
  if (!book_.SetCapacity(slot, capacity)) return;
  if (book_.Queued(slot) > 0) maybe_queued_ = true;  // fewer slots than it holds
  Pump();
}

void SchedulerCore::EngineAccepting(EngineSlot slot) {
  if (book_.Accept(slot)) Pump();
}

void SchedulerCore::EngineDraining(EngineSlot slot) {
  if (book_.Drain(slot)) RetireIfDrained(slot);
}

std::vector<TaskId> SchedulerCore::RunningOn(EngineSlot slot) const {
  return book_.RunningOn(slot);
}

bool SchedulerCore::Adopt(EngineSlot slot, const TaskId& id, int32_t attempt) {
  Task* found = tasks_.find(id);
  if (!book_.Alive(slot) || !found) return false;
  Task& task = *found;
  if (task.state == State::kRunning || attempt <= task.attempt) return false;
  Unready(task);
  task.state = State::kWaiting;
  task.attempt = attempt;
  Place(task, slot);
  return true;
}

void SchedulerCore::AttemptLost(EngineSlot slot, const TaskId& id) {
  Task* task = tasks_.find(id);
  if (!task || task->state != State::kRunning || task->slot != slot) return;
  // The engine neither holds it nor sent its reply again (it sends the
  // replies it keeps before it says what it holds): the dispatch died with
  // the old scheduler, the task never ran. It waits again, no retry spent.
  Release(*task);
  Return(*task, slot);
  Pump();
}

void SchedulerCore::EngineRemoved(EngineSlot slot) {
  if (!book_.Alive(slot)) return;
  const int32_t engine_id = book_.IdOf(slot);
  const std::vector<TaskId> running = book_.Remove(slot);
  ahead_.EngineGone(slot);
  RunningLost(slot, engine_id, running);
  LocatedLost(slot, engine_id);
  Pump();
}

void SchedulerCore::RunningLost(EngineSlot slot, int32_t engine_id,
                                const std::vector<TaskId>& running) {
  for (const TaskId& id : running) {
    Task& task = tasks_.at(id);
    task.state = State::kWaiting;
    task.slot = kNoSlot;
    --running_;
    if (task.ahead && !task.deps.Met()) {  // it could not have started
      Return(task, slot);
      continue;
    }
    AttemptFailed(task, slot, ErrorType::kEngineError,
                  "engine " + std::to_string(engine_id) + " was lost while running task " +
                      id.ToHex() + " (attempt " + std::to_string(task.attempt) + ")",
                  /*from_reply=*/false);
  }
}

void SchedulerCore::LocatedLost(EngineSlot slot, int32_t engine_id) {
  auto it = located_on_.find(slot);
  if (it == located_on_.end()) return;
  std::vector<TaskId> located = std::move(it->second);
  located_on_.erase(it);
  for (const TaskId& id : located) {
    Task* t = tasks_.find(id);
    if (!t || t->state != State::kReady) continue;
    Task& task = *t;
    const bool any_alive = std::any_of(task.deps.location.begin(), task.deps.location.end(),
                                       [&](EngineSlot s) { return book_.Alive(s); });
    if (!any_alive) {
      Fail(task, ErrorType::kImpossibleDependency,
           "task " + id.ToHex() + ": engine " + std::to_string(engine_id) +
               ", where its follow dependencies ran, is gone");
    }
  }
}

}  // namespace ztask::scheduler
