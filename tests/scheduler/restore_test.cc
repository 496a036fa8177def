// Restoring a scheduler's state after a restart (core.h: Submission.attempts
// and running_on, RestoreFinished, Adopt, AttemptLost, engines not accepting).
#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Restore : public CoreTest {
 protected:
  // An engine restored from the hub's records: it holds tasks, takes none.
  EngineSlot AddHeldEngine(int32_t id) {
    EngineSlot slot = core_->EngineAdded(id, /*accepting=*/false);
    slots_[id] = slot;
    Collect();
    return slot;
  }
  void Restored(TaskSpec spec, int32_t attempts, std::optional<int32_t> running_on) {
    spec.s.attempts = attempts;
    if (running_on) {
      spec.s.running_on = slots_.at(*running_on);
      running_on_[spec.s.id.lo] = *running_on;
    }
    Submit(spec);
  }
};

TEST_F(Restore, ARunningTaskStaysOnItsEngineAndIsNotSentAgain) {
  AddHeldEngine(1);
  Restored(TaskSpec(1), 1, 1);
  AddEngine(2);
  EXPECT_TRUE(DispatchesOf(1).empty()) << "it runs on engine 1 already";
  core().EngineAccepting(slots_.at(1));
  Collect();
  EXPECT_TRUE(DispatchesOf(1).empty());
  EXPECT_EQ(Finish(1, true), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(Restore, AHeldEngineGetsNoNewTaskUntilItIsBack) {
  AddHeldEngine(1);
  Restored(TaskSpec(1), 0, std::nullopt);
  EXPECT_TRUE(DispatchesOf(1).empty());
  core().EngineAccepting(slots_.at(1));
  Collect();
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{1}));
}

TEST_F(Restore, RetriesUsedBeforeTheRestartStayUsed) {
  AddEngine(1);
  // Two attempts failed before the restart; one retry of three is left.
  Restored(TaskSpec(1).Retries(3), 2, std::nullopt);
  ASSERT_EQ(DispatchesOf(1).size(), 1u);
  EXPECT_EQ(log_.back().attempt, 3);
  Finish(1, false);
  ASSERT_EQ(DispatchesOf(1).size(), 2u) << "the last retry";
  Finish(1, false);
  ASSERT_TRUE(FinalOf(1).has_value());
  EXPECT_EQ(FinalOf(1)->error, ErrorType::kTaskFailed);
}

TEST_F(Restore, DependentsSeeOutcomesFromBeforeTheRestart) {
  AddEngine(1);
  core().RestoreFinished(Id(1), true, 1);
  core().RestoreFinished(Id(2), false, 1);
  Restored(TaskSpec(3).After({1}), 0, std::nullopt);
  Restored(TaskSpec(4).After({2}), 0, std::nullopt);
  Restored(TaskSpec(5).Follow({1}), 0, std::nullopt);
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
  EXPECT_EQ(ErrorOf(4), ErrorType::kImpossibleDependency);
  Finish(3, true);
  EXPECT_EQ(DispatchesOf(5), (std::vector<int32_t>{1})) << "where task 1 ran";
}

TEST_F(Restore, ATaskTheEngineHoldsIsAdoptedNotRunAgain) {
  AddHeldEngine(1);
  AddEngine(2);
  // The hub had not recorded its dispatch: restored as waiting... but the
  // only engine accepting is 2, busy with task 9.
  Restored(TaskSpec(9), 0, std::nullopt);
  ASSERT_EQ(DispatchesOf(9), (std::vector<int32_t>{2}));
  Restored(TaskSpec(1), 0, std::nullopt);
  EXPECT_TRUE(DispatchesOf(1).empty());
  EXPECT_TRUE(core().Adopt(slots_.at(1), Id(1), 1));
  EXPECT_FALSE(core().Adopt(slots_.at(1), Id(1), 1)) << "running already";
  running_on_[1] = 1;
  Finish(9, true);
  EXPECT_TRUE(DispatchesOf(1).empty()) << "adopted: not sent to engine 2";
  Finish(1, true);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(Restore, AnAdoptionOfAnOlderAttemptChangesNothing) {
  AddEngine(1);
  Restored(TaskSpec(1).Retries(1), 2, std::nullopt);  // waits for attempt 3
  EXPECT_FALSE(core().Adopt(slots_.at(1), Id(1), 2));
}

TEST_F(Restore, ATaskTheEngineNeverGotIsSentAgainWithoutSpendingARetry) {
  AddHeldEngine(1);
  AddEngine(2);
  Restored(TaskSpec(1).Retries(1), 1, 1);
  Restored(TaskSpec(2), 1, 1);  // no retries: it must not fail for a dispatch lost
  core().AttemptLost(slots_.at(1), Id(1));
  core().AttemptLost(slots_.at(1), Id(2));
  Collect();
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{2}));
  EXPECT_FALSE(FinalOf(2).has_value()) << "it never ran: it waits to run";
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
  EXPECT_TRUE(RetriesOf(1).empty());
  EXPECT_TRUE(RetriesOf(2).empty());
  Finish(2, true);
  EXPECT_EQ(FinalCount(2), 1);
}

TEST_F(Restore, AHeldEngineThatNeverComesBackLosesItsTasks) {
  AddHeldEngine(1);
  AddEngine(2);
  Restored(TaskSpec(1).Retries(1), 1, 1);
  RemoveEngine(1);
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{2}));
}

TEST_F(Restore, ADependencyNotSeenYetIsAwaitedWithinTheGrace) {
  AddEngine(1);
  core().AwaitUnknownUntil(clock_.now_us + 10'000'000);
  // Task 2 came first; its dependency, lost with the old connection, is
  // sent again by its client a moment later.
  Submit(TaskSpec(2).After({1}));
  EXPECT_FALSE(FinalOf(2).has_value());
  EXPECT_TRUE(DispatchesOf(2).empty());
  ASSERT_TRUE(core().NextDeadline().has_value());
  EXPECT_EQ(*core().NextDeadline(), clock_.now_us + 10'000'000);
  Submit(TaskSpec(1));
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{1})) << "it ran after its dependency";
  Tick(11);
  Finish(2, true);
  EXPECT_EQ(FinalOf(2)->kind, Action::Kind::kDeliver);
  EXPECT_EQ(FinalCount(2), 1);
}

TEST_F(Restore, ADependencyStillUnknownWhenTheGraceEndsFailsItsDependents) {
  AddEngine(1);
  core().AwaitUnknownUntil(clock_.now_us + 10'000'000);
  Submit(TaskSpec(2).After({99}));
  Submit(TaskSpec(3).After({2}));
  Tick(9);
  EXPECT_FALSE(FinalOf(2).has_value());
  Tick(2);
  EXPECT_EQ(ErrorOf(2), ErrorType::kInvalidDependency);
  EXPECT_EQ(ErrorOf(3), ErrorType::kImpossibleDependency) << "the failure cascades";
  EXPECT_FALSE(core().NextDeadline().has_value());
  // After the grace an unknown dependency fails at once again.
  Submit(TaskSpec(4).After({98}));
  EXPECT_EQ(ErrorOf(4), ErrorType::kInvalidDependency);
}

}  // namespace
}  // namespace ztask::scheduler
