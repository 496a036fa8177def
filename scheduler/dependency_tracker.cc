// Outcomes, waiting lists and the judgement of dependencies
// (dependency_tracker.h).
#include "scheduler/dependency_tracker.h"

#include <algorithm>

namespace ztask::scheduler {
namespace {

std::string Outcome(bool success) { return success ? "success" : "failure"; }

// The reason an after or follow set can no longer be met.
std::string SetImpossible(const std::string& name, const DependencyProgress& p, bool is_follow,
                          const Cause& cause) {
  const char* kind = is_follow ? "follow" : "after";
  if (p.mode == DependencyMode::kAll) {
    return name + ": " + kind + " dependency " + cause.dep.ToHex() + " ended in " +
           Outcome(cause.success) + ", but " + std::string(AcceptedOutcomeName(p.outcome)) +
           " was required";
  }
  return name + ": none of its " + std::to_string(p.total) + " " + kind +
         " dependencies ended in " + std::string(AcceptedOutcomeName(p.outcome));
}

// Where a task whose dependencies are met may run, judged by its follow set.
Verdict Located(const TaskId& id, TaskDependencies& deps, const EngineBook& engines,
                std::string* reason) {
  // Only a failure needs the task's name: no string work on the common path.
  auto name = [&] { return "task " + id.ToHex(); };
  if (deps.follow.mode == DependencyMode::kAll) {
    if (deps.follow_unlocated > 0) {
      *reason = name() + ": a follow dependency never ran on an engine";
      return Verdict::kImpossible;
    }
    if (deps.location.size() > 1) {
      *reason = name() + ": its follow dependencies ran on " +
                std::to_string(deps.location.size()) + " different engines";
      return Verdict::kImpossible;
    }
    if (!engines.Alive(deps.location[0])) {
      *reason = name() + ": engine " + std::to_string(engines.IdOf(deps.location[0])) +
                ", where its follow dependencies ran, is gone";
      return Verdict::kImpossible;
    }
    return Verdict::kReady;
  }
  std::erase_if(deps.location, [&](EngineSlot s) { return !engines.Alive(s); });
  if (!deps.location.empty()) return Verdict::kReady;
  if (!deps.follow.AllFinished()) return Verdict::kWait;
  *reason = name() + ": no engine where one of its follow dependencies ran is still alive";
  return Verdict::kImpossible;
}

}  // namespace

bool CountDependency(TaskDependencies& deps, bool is_follow, const Finished& f) {
  DependencyProgress& progress = is_follow ? deps.follow : deps.after;
  const bool accepted = progress.Count(f.success());
  if (is_follow && accepted) {
    if (f.slot() == kNoSlot) {
      ++deps.follow_unlocated;
    } else if (std::find(deps.location.begin(), deps.location.end(), f.slot()) ==
               deps.location.end()) {
      deps.location.push_back(f.slot());
    }
  }
  return accepted;
}

Verdict Evaluate(const TaskId& id, TaskDependencies& deps, const Cause& cause,
                 const EngineBook& engines, std::string* reason) {
  for (const bool is_follow : {false, true}) {
    const DependencyProgress& p = is_follow ? deps.follow : deps.after;
    if (!p.Impossible()) continue;
    *reason = SetImpossible("task " + id.ToHex(), p, is_follow, cause);
    return Verdict::kImpossible;
  }
  if (!deps.Met()) return Verdict::kWait;
  if (deps.follow.total == 0) return Verdict::kReady;
  return Located(id, deps, engines, reason);
}

void NoteUnmet(TaskDependencies& deps, int32_t engine_id) {
  if (std::find(deps.unmet.begin(), deps.unmet.end(), engine_id) == deps.unmet.end()) {
    deps.unmet.push_back(engine_id);
  }
}

std::string NowhereUnmet(const TaskId& id, const TaskDependencies& deps, int32_t engine_id,
                         const std::string& why) {
  std::string ids;
  for (int32_t e : deps.unmet) ids += (ids.empty() ? "" : ", ") + std::to_string(e);
  return "task " + id.ToHex() + ": no engine can run it: engine" +
         (deps.unmet.size() > 1 ? "s " : " ") + ids +
         " answered that its dependencies are unmet there (engine " + std::to_string(engine_id) +
         ": " + why + ")";
}

DependencyTracker::DependencyTracker(size_t keep_finished, bool look_up_unknown)
    : finished_(keep_finished), look_up_unknown_(look_up_unknown) {}

std::vector<Waiter> DependencyTracker::TakeWaiters(const TaskId& dep) {
  std::vector<Waiter> waiters;
  if (std::vector<Waiter>* found = waiters_.find(dep)) {
    waiters = std::move(*found);
    waiters_.erase(dep);
    // A graph's last waiter gone: the table made for its largest moment
    // goes with it (a flat table never shrinks by itself).
    if (waiters_.empty() && waiters_.capacity() > kKeepWaiterSlots) waiters_ = {};
  }
  return waiters;
}

bool DependencyTracker::WaitForUnknown(const TaskId& task, const TaskId& dep, int64_t now_us) {
  bool waits = false;
  if (Awaiting(now_us)) {
    awaited_.emplace_back(task, dep);
    waits = true;
  }
  if (look_up_unknown_) {
    if (looking_up_.insert(dep).second) lookups_.push_back(dep);
    waits = true;
  }
  return waits;
}

std::vector<TaskId> DependencyTracker::TakeLookups() {
  std::vector<TaskId> out;
  out.swap(lookups_);
  return out;
}

std::vector<std::pair<TaskId, TaskId>> DependencyTracker::TakeAwaited() {
  std::vector<std::pair<TaskId, TaskId>> awaited;
  awaited.swap(awaited_);
  await_until_us_ = 0;
  return awaited;
}

std::optional<int64_t> DependencyTracker::AwaitDeadline() const {
  if (awaited_.empty()) return std::nullopt;
  return await_until_us_;
}

}  // namespace ztask::scheduler
