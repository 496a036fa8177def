// The retry and send-ahead policy: what becomes of an attempt that did not
// succeed, and which task may go to an engine before its last dependency
// ended.
//
// Retries: a failed attempt is retried while the task has retries left,
// unless its failure would repeat anywhere (a task that cannot be read, a
// limit it broke); a retry prefers engines where the task has not failed,
// and a task that failed on every one of its targets fails for good.
//
// Send ahead (CoreOptions::send_ahead): a task waiting for one last
// dependency, whose required outcome is success, may go to the engine
// running that dependency, to run there once it succeeded; at most one
// waiter goes behind each task. SendAhead keeps the tasks whose waiters are
// to be looked at, those blocked by an engine without room, and why a task
// sent ahead will come back.
//
// It owns those decisions and lists; it must not place tasks, make actions
// or read the clock: the core asks and acts.
//
// Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_RETRY_POLICY_H_
#define ZTASK_SCHEDULER_RETRY_POLICY_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/dependency_tracker.h"
#include "scheduler/scheme.h"
#include "ztask/task.h"
#include "ztask/task_id.h"

namespace ztask::scheduler {

// One task's retries as the policy sees them.
struct Attempts {
  int32_t retries_left = 0;
  std::vector<int32_t> failed_on;  // engine ids where an attempt failed
};

// The retries left to a task of `retries` that made `attempts` already, the
// latest still `running` (restored after a restart): every earlier attempt
// but a running one failed and used a retry.
int32_t RetriesLeft(int32_t retries, int32_t attempts, bool running);
// An attempt failed on `engine_id` with `error`: uses a retry and returns
// true when the task may try again, else false (its failure is final).
bool UseRetry(Attempts& attempts, int32_t engine_id, ErrorType error, bool retriable);
// Whether the task has failed on every engine of its non-empty `targets`.
bool FailedOnEveryTarget(const Attempts& attempts, const std::vector<int32_t>& targets);
bool FailedOn(const Attempts& attempts, int32_t engine_id);
// Whether engine `id` is in `ids` (a task's targets, its unmet engines).
inline bool Contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

class SendAhead {
 public:
  // Waiters of a task looked at, at most, each time it is checked.
  static constexpr size_t kScan = 64;

  // Whether the dependencies of a waiting task are met as soon as its one
  // unfinished dependency (in its follow set when `is_follow`), running on
  // `dep_slot`, succeeds, and only then: what the engine checks.
  static bool MetBySuccessOf(const TaskDependencies& deps, bool is_follow, EngineSlot dep_slot);

  // `id` was dispatched: its waiters may follow it.
  void Dispatched(const TaskId& id) { check_.push_back({id, kNoSlot}); }
  // Takes the next task whose waiters are to be looked at; false: none.
  // *blocked_on: the engine it was blocked on (RoomOn), or kNoSlot.
  bool TakeCheck(TaskId* dep, EngineSlot* blocked_on);
  // A waiter of `dep` would go ahead but its engine `slot` has no room.
  void Blocked(EngineSlot slot, const TaskId& dep) { blocked_[slot].push_back(dep); }
  // The engine has room again: what it blocked is looked at again.
  void RoomOn(EngineSlot slot);
  bool AnyBlocked() const { return !blocked_.empty(); }
  void EngineGone(EngineSlot slot) { blocked_.erase(slot); }

  // A task sent ahead will come back not run: `cause` says why.
  void NoteRejected(const TaskId& id, const Cause& cause) { cause_.try_emplace(id, cause); }
  // Why the task came back (zero cause when none was noted), forgotten.
  Cause TakeCause(const TaskId& id);
  void Forget(const TaskId& id) {
    if (!cause_.empty()) cause_.erase(id);
  }

 private:
  // Tasks to look at, each with the engine it was blocked on (kNoSlot:
  // dispatched).
  std::vector<std::pair<TaskId, EngineSlot>> check_;
  std::unordered_map<EngineSlot, std::vector<TaskId>> blocked_;
  std::unordered_map<TaskId, Cause, TaskIdHash> cause_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_RETRY_POLICY_H_
