// The retry and send-ahead policy alone: when a failure uses a retry, where
// the task has failed, which waiter may go ahead of its last dependency,
// and the lists of what to look at again.
#include "scheduler/retry_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace ztask::scheduler {
namespace {

TaskId T(uint64_t n) { return TaskId{0x7e7, n}; }

TEST(Retries, RestoredTasksCountEveryEarlierAttemptButARunningOne) {
  EXPECT_EQ(RetriesLeft(3, 0, false), 3);
  EXPECT_EQ(RetriesLeft(3, 2, false), 1);
  EXPECT_EQ(RetriesLeft(3, 2, true), 2);
  EXPECT_EQ(RetriesLeft(1, 5, false), 0) << "never below zero";
}

TEST(Retries, AFailureUsesARetryAndNotesTheEngineOnce) {
  Attempts a;
  a.retries_left = 2;
  EXPECT_TRUE(UseRetry(a, 4, ErrorType::kTaskFailed, true));
  EXPECT_TRUE(UseRetry(a, 4, ErrorType::kEngineError, true));
  EXPECT_EQ(a.retries_left, 0);
  EXPECT_EQ(a.failed_on, std::vector<int32_t>{4});
  EXPECT_TRUE(FailedOn(a, 4));
  EXPECT_FALSE(FailedOn(a, 5));
  EXPECT_FALSE(UseRetry(a, 5, ErrorType::kTaskFailed, true)) << "none left";
  EXPECT_FALSE(FailedOn(a, 5)) << "a final failure steers nothing";
}

TEST(Retries, FailuresThatWouldRepeatAnywhereAreFinal) {
  Attempts a;
  a.retries_left = 5;
  EXPECT_FALSE(UseRetry(a, 1, ErrorType::kBadTask, true));
  EXPECT_FALSE(UseRetry(a, 1, ErrorType::kTaskFailed, /*retriable=*/false));
  EXPECT_EQ(a.retries_left, 5);
}

TEST(Retries, FailedOnEveryTargetOnlyWithTargets) {
  Attempts a;
  a.retries_left = 5;
  EXPECT_FALSE(FailedOnEveryTarget(a, {}));
  UseRetry(a, 1, ErrorType::kTaskFailed, true);
  EXPECT_FALSE(FailedOnEveryTarget(a, {1, 2}));
  UseRetry(a, 2, ErrorType::kTaskFailed, true);
  EXPECT_TRUE(FailedOnEveryTarget(a, {1, 2}));
  EXPECT_FALSE(FailedOnEveryTarget(a, {}));
}

TaskDependencies Waiting(uint32_t after, uint32_t follow,
                         AcceptedOutcome outcome = AcceptedOutcome::kSuccess) {
  TaskDependencies deps;
  deps.after = {after, 0, 0, DependencyMode::kAll, outcome};
  deps.follow = {follow, 0, 0, DependencyMode::kAll, AcceptedOutcome::kSuccess};
  return deps;
}

TEST(SendAheadPolicy, AWaiterForOneLastSuccessMayGoAhead) {
  TaskDependencies deps = Waiting(2, 0);
  EXPECT_FALSE(SendAhead::MetBySuccessOf(deps, false, 0)) << "two unfinished";
  CountDependency(deps, false, {kNoSlot, true});
  EXPECT_TRUE(SendAhead::MetBySuccessOf(deps, false, 0));
}

TEST(SendAheadPolicy, NotWhenAnotherOutcomeIsRequiredOrItIsAlreadyImpossible) {
  EXPECT_FALSE(SendAhead::MetBySuccessOf(Waiting(1, 0, AcceptedOutcome::kFailure), false, 0));
  EXPECT_FALSE(SendAhead::MetBySuccessOf(Waiting(1, 0, AcceptedOutcome::kEither), false, 0));
  TaskDependencies failed = Waiting(2, 0);
  CountDependency(failed, false, {kNoSlot, false});
  EXPECT_FALSE(SendAhead::MetBySuccessOf(failed, false, 0));
}

TEST(SendAheadPolicy, AFollowerGoesOnlyToTheEngineItFollows) {
  TaskDependencies deps = Waiting(0, 2);
  CountDependency(deps, true, {3, true});
  EXPECT_TRUE(SendAhead::MetBySuccessOf(deps, true, 3));
  EXPECT_FALSE(SendAhead::MetBySuccessOf(deps, true, 4));
}

TEST(SendAheadPolicy, ABlockedEngineIsLookedAtAgainOnceItHasRoom) {
  SendAhead ahead;
  TaskId dep;
  EngineSlot on = 0;
  EXPECT_FALSE(ahead.TakeCheck(&dep, &on));
  ahead.Dispatched(T(3));
  ASSERT_TRUE(ahead.TakeCheck(&dep, &on));
  EXPECT_EQ(dep, T(3));
  EXPECT_EQ(on, kNoSlot) << "a dispatched task was blocked nowhere";
  ahead.Blocked(1, T(1));
  ahead.Blocked(2, T(2));
  EXPECT_TRUE(ahead.AnyBlocked());
  ahead.EngineGone(2);
  ahead.RoomOn(1);
  EXPECT_FALSE(ahead.AnyBlocked());
  ASSERT_TRUE(ahead.TakeCheck(&dep, &on));
  EXPECT_EQ(dep, T(1));
  EXPECT_EQ(on, 1u) << "it says the engine it was blocked on";
  EXPECT_FALSE(ahead.TakeCheck(&dep, &on)) << "the lost engine's are forgotten";
}

TEST(SendAheadPolicy, TheCauseOfAReturnIsTakenOnce) {
  SendAhead ahead;
  ahead.NoteRejected(T(2), {T(1), false});
  ahead.NoteRejected(T(2), {T(3), false});
  EXPECT_EQ(ahead.TakeCause(T(2)).dep, T(1)) << "the first one";
  EXPECT_TRUE(ahead.TakeCause(T(2)).dep.IsZero());
  ahead.NoteRejected(T(4), {T(1), false});
  ahead.Forget(T(4));
  EXPECT_TRUE(ahead.TakeCause(T(4)).dep.IsZero());
}

}  // namespace
}  // namespace ztask::scheduler
