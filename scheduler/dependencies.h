// The arithmetic of one dependency set (after or follow) of one task: how
// many of its tasks have finished with an accepted outcome, how many with a
// rejected one, and what that means. Kept as counters so that a finished
// dependency costs O(1) per dependent, whatever the set's size.
#ifndef ZTASK_SCHEDULER_DEPENDENCIES_H_
#define ZTASK_SCHEDULER_DEPENDENCIES_H_

#include <cstdint>

#include "ztask/task.h"

namespace ztask::scheduler {

inline bool Accepts(AcceptedOutcome accepted, bool success) {
  switch (accepted) {
    case AcceptedOutcome::kSuccess: return success;
    case AcceptedOutcome::kFailure: return !success;
    case AcceptedOutcome::kEither: return true;
  }
  return false;
}

struct DependencyProgress {
  uint32_t total = 0;
  uint32_t accepted = 0;
  uint32_t rejected = 0;
  DependencyMode mode = DependencyMode::kAll;
  AcceptedOutcome outcome = AcceptedOutcome::kSuccess;

  // Records one dependency's final outcome; returns whether it was accepted.
  bool Count(bool success) {
    const bool ok = Accepts(outcome, success);
    ok ? ++accepted : ++rejected;
    return ok;
  }
  bool AllFinished() const { return accepted + rejected == total; }
  // True when no outcome of the tasks still running can meet the set.
  bool Impossible() const {
    if (total == 0) return false;
    return mode == DependencyMode::kAll ? rejected > 0 : rejected == total;
  }
  // True when the set's outcomes are met (an empty set always is).
  bool Met() const {
    if (total == 0) return true;
    return mode == DependencyMode::kAll ? accepted == total : accepted > 0;
  }
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_DEPENDENCIES_H_
