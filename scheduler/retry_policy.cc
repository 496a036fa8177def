// Retries and sending ahead (retry_policy.h).
#include "scheduler/retry_policy.h"

#include <algorithm>
#include <tuple>

namespace ztask::scheduler {

int32_t RetriesLeft(int32_t retries, int32_t attempts, bool running) {
  return std::max(0, retries - std::max(0, attempts - (running ? 1 : 0)));
}

bool FailedOn(const Attempts& attempts, int32_t engine_id) {
  return Contains(attempts.failed_on, engine_id);
}

bool UseRetry(Attempts& attempts, int32_t engine_id, ErrorType error, bool retriable) {
  // A task that cannot be read, or whose failure would repeat, fails the
  // same way on every engine.
  if (attempts.retries_left <= 0 || error == ErrorType::kBadTask || !retriable) return false;
  --attempts.retries_left;
  if (!FailedOn(attempts, engine_id)) attempts.failed_on.push_back(engine_id);
  return true;
}

bool FailedOnEveryTarget(const Attempts& attempts, const std::vector<int32_t>& targets) {
  return !targets.empty() && std::all_of(targets.begin(), targets.end(),
                                         [&](int32_t t) { return FailedOn(attempts, t); });
}

bool SendAhead::MetBySuccessOf(const TaskDependencies& deps, bool is_follow,
                               EngineSlot dep_slot) {
  const auto unfinished = [](const DependencyProgress& p) {
    return p.total - p.accepted - p.rejected;
  };
  if (unfinished(deps.after) + unfinished(deps.follow) != 1) return false;
  if (deps.after.Impossible() || deps.follow.Impossible()) return false;
  DependencyProgress if_ok = is_follow ? deps.follow : deps.after;
  if (if_ok.outcome != AcceptedOutcome::kSuccess) return false;
  if_ok.Count(true);
  if (!if_ok.Met() || !(is_follow ? deps.after : deps.follow).Met()) return false;
  if (deps.follow.total > 0) {
    if (deps.follow.mode != DependencyMode::kAll || deps.follow_unlocated > 0) return false;
    for (EngineSlot s : deps.location) {
      if (s != dep_slot) return false;
    }
  }
  return true;
}

bool SendAhead::TakeCheck(TaskId* dep, EngineSlot* blocked_on) {
  if (check_.empty()) return false;
  std::tie(*dep, *blocked_on) = check_.back();
  check_.pop_back();
  return true;
}

void SendAhead::RoomOn(EngineSlot slot) {
  if (auto it = blocked_.find(slot); it != blocked_.end()) {
    for (const TaskId& dep : it->second) check_.push_back({dep, slot});
    blocked_.erase(it);
  }
}

Cause SendAhead::TakeCause(const TaskId& id) {
  Cause cause;
  if (auto c = cause_.find(id); c != cause_.end()) {
    cause = c->second;
    cause_.erase(c);
  }
  return cause;
}

}  // namespace ztask::scheduler
