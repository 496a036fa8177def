// Sending a task ahead of its last dependency (CoreOptions::send_ahead):
// when it may go is the policy's (retry_policy.h); this is the core acting
// on it.
#include <algorithm>

#include "scheduler/core.h"

namespace ztask::scheduler {
bool SchedulerCore::MayGoAhead(const Task& task, const Task& dep, bool is_follow,
                               bool* no_room) const {
  *no_room = false;
  if (task.state != State::kWaiting || task.timeout_us > 0) return false;
  if (dep.state != State::kRunning || dep.slot == kNoSlot || dep.followed) return false;
  if (!SendAhead::MetBySuccessOf(task.deps, is_follow, dep.slot)) return false;
  // An engine of many slots runs what it holds side by side: the task
  // could start before its dependency ended there.
  if (task.demand.Wide() || book_.SlotsOf(dep.slot) > 1) return false;
  const int32_t engine_id = book_.IdOf(dep.slot);
  if (!task.targets.empty() && !Contains(task.targets, engine_id)) return false;
  if (FailedOn(task.attempts, engine_id) || Contains(task.deps.unmet, engine_id)) return false;
  if (!book_.HasRoom(dep.slot)) {
    *no_room = true;
    return false;
  }
  return true;
}

bool SchedulerCore::GoAheadIfMay(Task& task, Task& dep, bool is_follow) {
  bool no_room = false;
  if (MayGoAhead(task, dep, is_follow, &no_room)) {
    dep.followed = true;
    Assign(task, dep.slot, dep.id);
    return true;
  }
  // Looked at again once the engine has room (Release).
  if (no_room) ahead_.Blocked(dep.slot, dep.id);
  return no_room;
}

void SchedulerCore::TrySendAhead(const TaskId& id, const Waiter& wait) {
  Task* t = tasks_.find(id);  // Settle may have failed it
  Task* d = tasks_.find(wait.task);
  if (t && d) GoAheadIfMay(*t, *d, wait.is_follow);
}

// One waiter at most goes behind a task: the others wait for its outcome
// and then spread over every engine, as they would without sending ahead.
void SchedulerCore::SendAheadAfter(const TaskId& dep_id, EngineSlot blocked_on) {
  Task* d = tasks_.find(dep_id);  // just dispatched, or blocked: its entry was touched lately
  if (!d) return;
  Task& dep = *d;
  if (dep.state != State::kRunning || dep.followed) return;
  // Every task blocked on an engine is looked at again once the engine has
  // room for one more: after the first takes it, the others wait again
  // without their waiters looked up and scanned once more (a random DAG
  // spent 7% of the cluster's time on that).
  if (blocked_on == dep.slot && !book_.HasRoom(dep.slot)) return ahead_.Blocked(dep.slot, dep.id);
  const std::vector<Waiter>* waiters = tracker_.WaitersOf(dep_id);  // most tasks have none
  if (waiters == nullptr) return;
  size_t looked = 0;
  for (size_t i = 0; i < waiters->size() && looked < SendAhead::kScan; ++i) {
    const Waiter waiter = (*waiters)[i];
    Task* t = tasks_.find(waiter.task);
    if (!t) continue;
    if (t->state != State::kWaiting) return;  // running already: one at most
    ++looked;
    if (GoAheadIfMay(*t, dep, waiter.is_follow)) return;
  }
}

void SchedulerCore::SendAheadAll() {
  TaskId dep;
  EngineSlot blocked_on;
  while (ahead_.TakeCheck(&dep, &blocked_on)) SendAheadAfter(dep, blocked_on);
}

void SchedulerCore::Return(Task& task, EngineSlot slot, std::string why) {
  actions_.push_back({Action::Kind::kReturned,
                      task.id,
                      slot,
                      book_.IdOf(slot),
                      task.attempt,
                      ErrorType::kNone,
                      std::move(why),
                      false});
  task.ahead = false;
  task.taking_back = false;
  Settle(task, ahead_.TakeCause(task.id));
}

}  // namespace ztask::scheduler
