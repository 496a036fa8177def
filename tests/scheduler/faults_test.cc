// Timeouts, retries, lost engines, aborts and late replies.
#include <set>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Faults : public CoreTest {};

TEST_F(Faults, TimeoutFailsATaskThatNeverStarted) {
  Submit(TaskSpec(1).Timeout(2.0));
  Tick(1.9);
  EXPECT_FALSE(FinalOf(1).has_value());
  ASSERT_TRUE(core().NextDeadline().has_value());
  Tick(0.2);
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskTimeout);
  EXPECT_EQ(core().live_tasks(), 0u);
}

TEST_F(Faults, TimeoutNeverLimitsRunningTime) {
  AddEngine(1);
  Submit(TaskSpec(1).Timeout(1.0));
  ASSERT_EQ(DispatchesOf(1).size(), 1u);
  Tick(100);
  EXPECT_FALSE(FinalOf(1).has_value());
  Finish(1, true);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver);
}

TEST_F(Faults, TimeoutCountsWhileWaitingForDependencies) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}).Timeout(1.0));
  Tick(1.5);
  EXPECT_EQ(ErrorOf(2), ErrorType::kTaskTimeout);
  Finish(1, true);
  EXPECT_EQ(FinalCount(2), 1);
}

TEST_F(Faults, TimeoutAfterRequeueIsCountedFromTheRequeue) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(8).Targets({2}));  // holds engine 2 throughout
  Submit(TaskSpec(9).Targets({1}));  // holds engine 1 for now
  Submit(TaskSpec(1).Targets({1, 2}).Timeout(1.0).Retries(1));
  Finish(9, true);  // task 1 starts on engine 1
  ASSERT_EQ(DispatchesOf(1), (std::vector<int32_t>{1}));
  Tick(0.8);
  Submit(TaskSpec(2).Targets({1}));
  Finish(1, false);  // re-queued; engine 2 is busy, engine 1 it failed on
  EXPECT_EQ(DispatchesOf(2).size(), 1u);
  Tick(0.9);  // 1.7 s since submission, 0.9 s since the re-queue
  EXPECT_FALSE(FinalOf(1).has_value());
  Tick(0.2);
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskTimeout);
}

TEST_F(Faults, RetryPrefersAnEngineWhereItHasNotFailed) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(2));
  const int32_t first = DispatchesOf(1)[0];
  Finish(1, false);
  ASSERT_EQ(DispatchesOf(1).size(), 2u);
  EXPECT_NE(DispatchesOf(1)[1], first);
  auto retries = RetriesOf(1);
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_EQ(retries[0].attempt, 1);
  EXPECT_EQ(retries[0].engine_id, first);
}

TEST_F(Faults, RetriesExhaustedDeliverTheLastRealError) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(1));
  Finish(1, false, ErrorType::kTaskFailed);
  Finish(1, false, ErrorType::kTimeLimitExceeded);
  ASSERT_TRUE(FinalOf(1).has_value());
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver) << "the engine's own reply goes out";
  EXPECT_EQ(ErrorOf(1), ErrorType::kTimeLimitExceeded);
  EXPECT_EQ(FinalCount(1), 1);
  EXPECT_EQ(RetriesOf(1).size(), 1u);
}

// A failure the engine says would repeat (a result over its limit) is
// final: the retries left are not spent on it.
TEST_F(Faults, AFailureThatWouldRepeatAnywhereIsNotRetried) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(3));
  const int32_t engine = DispatchesOf(1)[0];
  EXPECT_EQ(core_->TaskFinished(slots_.at(engine), Id(1), false, ErrorType::kTaskFailed,
                                /*retriable=*/false),
            SchedulerCore::Finish::kAccepted);
  Collect();
  EXPECT_EQ(DispatchesOf(1).size(), 1u);
  EXPECT_TRUE(RetriesOf(1).empty());
  ASSERT_TRUE(FinalOf(1).has_value());
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskFailed);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(Faults, RetriesRunAgainOnTheOnlyEngineRatherThanHang) {
  AddEngine(1);
  Submit(TaskSpec(1).Retries(3));
  Finish(1, false);
  Finish(1, false);
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver);
  EXPECT_EQ(ErrorOf(1), ErrorType::kNone);
}

TEST_F(Faults, RetriesMoveAcrossSeveralEngines) {
  for (int32_t e = 1; e <= 3; ++e) AddEngine(e);
  Submit(TaskSpec(1).Retries(2));
  Finish(1, false);
  Finish(1, false);
  Finish(1, false);
  auto engines = DispatchesOf(1);
  ASSERT_EQ(engines.size(), 3u);
  EXPECT_EQ(std::set<int32_t>(engines.begin(), engines.end()).size(), 3u);
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskFailed);
}

TEST_F(Faults, BlacklistedOnEveryTargetIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1).Targets({1, 2}).Retries(5));
  Finish(1, false);
  Finish(1, false);
  EXPECT_EQ(ErrorOf(1), ErrorType::kImpossibleDependency);
  EXPECT_EQ(DispatchesOf(1).size(), 2u);
}

TEST_F(Faults, LostEngineFailsItsTaskWithEngineError) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}));
  RemoveEngine(1);
  EXPECT_EQ(ErrorOf(1), ErrorType::kEngineError);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kFail);
  EXPECT_EQ(FinalOf(1)->engine_id, 1);
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency) << "dependents cascade";
}

TEST_F(Faults, LostEngineRetriesItsTaskElsewhere) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(1).Targets({}));
  const int32_t first = DispatchesOf(1)[0];
  RemoveEngine(first);
  ASSERT_EQ(DispatchesOf(1).size(), 2u);
  EXPECT_NE(DispatchesOf(1)[1], first);
  ASSERT_EQ(RetriesOf(1).size(), 1u);
  EXPECT_EQ(RetriesOf(1)[0].error, ErrorType::kEngineError);
  EXPECT_FALSE(RetriesOf(1)[0].from_reply);
}

TEST_F(Faults, LateReplyFromALostEngineIsIgnoredAndCounted) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(1));
  const int32_t first = DispatchesOf(1)[0];
  const EngineSlot old_slot = slots_[first];
  RemoveEngine(first);
  EXPECT_EQ(core().TaskFinished(old_slot, Id(1), true, ErrorType::kNone),
            SchedulerCore::Finish::kLate);
  EXPECT_EQ(core().counters().late_replies, 1u);
  EXPECT_FALSE(FinalOf(1).has_value());
  Finish(1, true);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(Faults, ReplyFromTheWrongEngineIsLate) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  const int32_t other = DispatchesOf(1)[0] == 1 ? 2 : 1;
  EXPECT_EQ(FinishOn(other, 1, true), SchedulerCore::Finish::kLate);
  EXPECT_FALSE(FinalOf(1).has_value());
}

TEST_F(Faults, AbortFailsWaitingTasksAndReportsTheRest) {
  AddEngine(1);
  Submit(TaskSpec(1));             // runs
  Submit(TaskSpec(2));             // waits for room
  Submit(TaskSpec(3).After({2}));  // waits for task 2
  Submit(TaskSpec(4));             // waits for room
  Finish(1, true);                 // task 2 runs now
  auto outcome = Abort({2, 4, 1, 99});
  EXPECT_EQ(outcome.running, (std::vector<TaskId>{Id(2)}));
  EXPECT_EQ(outcome.aborted, (std::vector<TaskId>{Id(4)}));
  EXPECT_EQ(outcome.finished, (std::vector<TaskId>{Id(1)}));
  EXPECT_EQ(outcome.unknown, (std::vector<TaskId>{Id(99)}));
  EXPECT_EQ(ErrorOf(4), ErrorType::kTaskAborted);
  EXPECT_FALSE(FinalOf(2).has_value()) << "a running task is not aborted";
  Finish(2, true);
  EXPECT_EQ(DispatchesOf(3).size(), 1u);
}

// A task queued on its engine behind another (HWM 2) may not have started:
// its abort asks it back, and the engine's "not run" fails it as aborted,
// with its dependents; one that started runs to its end.
TEST_F(Faults, AnAbortedTaskQueuedOnItsEngineIsAskedBackAndFailsWhenGivenBack) {
  Make(/*hwm=*/2);
  AddEngine(1);
  Submit(TaskSpec(1));             // runs
  Submit(TaskSpec(2));             // queued behind it on the engine
  Submit(TaskSpec(3).After({2}));  // waits for task 2
  ASSERT_EQ(DispatchesOf(2).size(), 1u);
  auto outcome = Abort({2});
  EXPECT_EQ(outcome.running, (std::vector<TaskId>{Id(2)}));
  size_t asked = 0;
  for (const auto& a : log_) asked += a.kind == Action::Kind::kTakeBack && a.task == Id(2);
  EXPECT_EQ(asked, 1u) << "asked back from its engine";
  EXPECT_FALSE(FinalOf(2).has_value()) << "not failed before the engine answers";
  EXPECT_EQ(NotRun(2), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(ErrorOf(2), ErrorType::kTaskAborted);
  EXPECT_EQ(ErrorOf(3), ErrorType::kImpossibleDependency);
  EXPECT_EQ(DispatchesOf(2).size(), 1u) << "never sent again";
  Finish(1, true);
  EXPECT_EQ(core().live_tasks(), 0u);
}

TEST_F(Faults, AnAbortedTaskThatHadStartedEndsAsItRan) {
  Make(/*hwm=*/2);
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  Abort({2});
  Finish(1, true);
  Finish(2, true);  // the engine had started it
  ASSERT_TRUE(FinalOf(2).has_value());
  EXPECT_EQ(ErrorOf(2), ErrorType::kNone);
}

TEST_F(Faults, AnAbortedTaskWhoseEngineIsLostIsNotRetried) {
  Make(/*hwm=*/2);
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(3).Targets({1}));
  Submit(TaskSpec(2).Retries(3).Targets({1}));  // queued behind it
  Abort({2});
  RemoveEngine(1);
  EXPECT_EQ(ErrorOf(2), ErrorType::kTaskAborted);
  EXPECT_EQ(DispatchesOf(2).size(), 1u) << "never sent again";
  EXPECT_NE(ErrorOf(1), ErrorType::kTaskAborted) << "only the aborted one";
}

// Aborted while queued on its engine, then run there and failed: its own
// error, final, not retried; answered unmet: aborted, not moved on.
TEST_F(Faults, AnAbortedTaskIsNeitherRetriedNorMovedToAnotherEngine) {
  Make(/*hwm=*/2);
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(3).Targets({1}));
  Submit(TaskSpec(2).Retries(3).Targets({1}));  // queued behind it
  Abort({2});
  Finish(1, true);
  Finish(2, false);  // it had started, and failed
  EXPECT_EQ(ErrorOf(2), ErrorType::kTaskFailed);
  EXPECT_EQ(DispatchesOf(2).size(), 1u) << "not retried";
  Submit(TaskSpec(4));
  Submit(TaskSpec(5));
  const int32_t engine = DispatchesOf(4)[0];
  Abort({4});
  EXPECT_EQ(Unmet(4), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(ErrorOf(4), ErrorType::kTaskAborted);
  EXPECT_EQ(DispatchesOf(4), (std::vector<int32_t>{engine})) << "not moved";
}

TEST_F(Faults, AbortCascadesToDependents) {
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}));
  Abort({1});
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskAborted);
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency);
}

TEST_F(Faults, EngineReregisteringWithTheSameIdReplacesTheOldLife) {
  AddEngine(1);
  Submit(TaskSpec(1));
  AddEngine(1);  // restarted before anyone said it was gone
  EXPECT_EQ(ErrorOf(1), ErrorType::kEngineError);
  Submit(TaskSpec(2));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace ztask::scheduler
