// DependencyTracker: what tasks wait for. It keeps the latest outcomes of
// finished tasks (where each last ran, whether it succeeded), the tasks
// waiting for each unfinished one, the dependencies never seen that are
// asked about or awaited after a restart, and it applies an outcome to
// every dependent, and theirs in turn when they fail, without recursion
// (Resolve). Per task, the core keeps a TaskDependencies, which the
// tracker's functions count and judge: met, still waiting, or impossible
// (with the reason), functional "unmet here" answers included.
//
// It owns outcomes and waiting lists; it must not place, fail or count
// tasks itself, nor read the clock: the core acts on what it says and
// passes the time in.
//
// Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_DEPENDENCY_TRACKER_H_
#define ZTASK_SCHEDULER_DEPENDENCY_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/flat_id_map.h"
#include "base/recent_id_map.h"
#include "scheduler/dependencies.h"
#include "scheduler/engine_book.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

// What later dependents need of a finished task, in 4 bytes: where it last
// ran (kNoSlot: nowhere) and whether it succeeded.
class Finished {
 public:
  Finished() = default;
  Finished(EngineSlot slot, bool success)
      : bits_((slot == kNoSlot ? kNowhere : slot) << 1 | (success ? 1u : 0u)) {}
  EngineSlot slot() const { return (bits_ >> 1) == kNowhere ? kNoSlot : bits_ >> 1; }
  bool success() const { return bits_ & 1; }

 private:
  static constexpr uint32_t kNowhere = UINT32_MAX >> 1;
  uint32_t bits_ = 0;
};

// A task waiting for a dependency, and in which of its sets.
struct Waiter {
  TaskId task;
  bool is_follow;
};

// The dependency whose outcome is being applied, for error messages.
struct Cause {
  TaskId dep;
  bool success = false;
};

// One task's dependencies: its after and follow sets, where its follow
// dependencies ran, and the engines that answered it cannot run there.
struct TaskDependencies {
  DependencyProgress after;
  DependencyProgress follow;
  uint32_t follow_unlocated = 0;     // accepted follow deps that never ran
  std::vector<EngineSlot> location;  // follow: where it may run
  std::vector<int32_t> unmet;        // engine ids that cannot run it (TaskUnmet)

  bool Met() const { return after.Met() && follow.Met(); }
};

enum class Verdict { kWait, kReady, kImpossible };

// Applies one finished dependency; returns whether its outcome was accepted.
bool CountDependency(TaskDependencies& deps, bool is_follow, const Finished& f);
// Judges a waiting task's dependencies (of task `id`, `cause` the latest
// applied, for the reason); may prune dead engines from a follow-any
// location. *reason is set when impossible.
Verdict Evaluate(const TaskId& id, TaskDependencies& deps, const Cause& cause,
                 const EngineBook& engines, std::string* reason);
// Records that `engine_id` answered it cannot run the task (functional
// dependencies unmet there): the task never goes back there.
void NoteUnmet(TaskDependencies& deps, int32_t engine_id);
// Why the task can run nowhere once no engine it may use is left: the
// engines that answered unmet, the latest (`engine_id`) with `why`.
std::string NowhereUnmet(const TaskId& id, const TaskDependencies& deps, int32_t engine_id,
                         const std::string& why);

class DependencyTracker {
 public:
  // `keep_finished` and `look_up_unknown` as in CoreOptions.
  DependencyTracker(size_t keep_finished, bool look_up_unknown);

  // The outcome of a finished task still remembered, or null.
  const Finished* OutcomeOf(const TaskId& id) const { return finished_.find(id); }
  bool HasFinished(const TaskId& id) const { return finished_.contains(id); }
  // Starts loading what resolving `id` looks up (its outcome's slot, its
  // waiters).
  void Prefetch(const TaskId& id) const {
    finished_.prefetch(id);
    waiters_.prefetch(id);
  }
  size_t finished_count() const { return finished_.size(); }
  // A task that finished before a restart, as dependents see it.
  void Restore(const TaskId& id, Finished outcome) { finished_.try_emplace(id, outcome); }

  // `task` waits for `dep` (as a follow dependency when is_follow).
  void Wait(const TaskId& task, const TaskId& dep, bool is_follow) {
    waiters_.try_emplace(dep).first->push_back({task, is_follow});
  }
  // The tasks waiting for `dep` (null: none), which keep waiting.
  const std::vector<Waiter>* WaitersOf(const TaskId& dep) const { return waiters_.find(dep); }
  // The tasks waiting for `dep`, no longer waiting for it here.
  std::vector<Waiter> TakeWaiters(const TaskId& dep);
  // Slots of the table of waiters (memory held for them).
  size_t waiter_slots() const { return waiters_.capacity(); }

  // Records `id`'s final outcome and calls on_waiter(waiter, dep, outcome)
  // for every task waiting for it; a failure it causes there may call
  // Resolve again, which is queued and applied by the outermost call, so
  // a failed chain of a million tasks does not recurse.
  template <typename OnWaiter>
  void Resolve(const TaskId& id, Finished outcome, OnWaiter&& on_waiter);

  // Task `task` names `dep`, which is neither live nor finished here at
  // `now_us`. Returns whether it waits for it: awaited during a recovery
  // (AwaitUnknownUntil) or asked about (look_up_unknown); false: `dep` is
  // unknown, the task's dependency is invalid.
  bool WaitForUnknown(const TaskId& task, const TaskId& dep, int64_t now_us);
  // Dependencies to ask about, each once while unanswered.
  std::vector<TaskId> TakeLookups();
  // `dep` was answered.
  void Answered(const TaskId& dep) { looking_up_.erase(dep); }
  size_t lookups_pending() const { return looking_up_.size(); }

  // Until `deadline_us`, a dependency never seen is awaited (a restart).
  void AwaitUnknownUntil(int64_t deadline_us) { await_until_us_ = deadline_us; }
  bool Awaiting(int64_t now_us) const { return now_us < await_until_us_; }
  // At the deadline: the (task, dependency) pairs awaited, no longer.
  bool AwaitExpired(int64_t now_us) const {
    return await_until_us_ != 0 && now_us >= await_until_us_;
  }
  std::vector<std::pair<TaskId, TaskId>> TakeAwaited();
  // When the awaiting ends, if anything is awaited.
  std::optional<int64_t> AwaitDeadline() const;

 private:
  // The latest keep_finished outcomes: 21 bytes a slot (flat_id_map.h) and
  // 16 in the order they came.
  RecentIdMap<Finished> finished_;
  // Flat: a chain of a million tasks looks up one entry a task, each a
  // cache miss, where a node-based map costs two. Emptied, a table past
  // kKeepWaiterSlots is given back.
  static constexpr size_t kKeepWaiterSlots = 4096;
  FlatIdMap<std::vector<Waiter>> waiters_;
  bool look_up_unknown_;
  // Dependencies asked about: in lookups_ until taken, here until answered.
  std::vector<TaskId> lookups_;
  std::unordered_set<TaskId, TaskIdHash> looking_up_;
  // Tasks waiting for a dependency never seen (AwaitUnknownUntil): task, dependency.
  int64_t await_until_us_ = 0;
  std::vector<std::pair<TaskId, TaskId>> awaited_;
  std::vector<std::pair<TaskId, Finished>> resolving_;
  bool resolving_now_ = false;
};

template <typename OnWaiter>
void DependencyTracker::Resolve(const TaskId& id, Finished outcome, OnWaiter&& on_waiter) {
  finished_.try_emplace(id, outcome);
  resolving_.emplace_back(id, outcome);
  if (resolving_now_) return;  // the outer call drains the list: no recursion
  resolving_now_ = true;
  while (!resolving_.empty()) {
    auto [dep, f] = resolving_.back();
    resolving_.pop_back();
    for (const Waiter& w : TakeWaiters(dep)) on_waiter(w, dep, f);
  }
  resolving_now_ = false;
}

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_DEPENDENCY_TRACKER_H_
