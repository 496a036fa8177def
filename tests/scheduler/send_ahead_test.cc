// Sending ahead (CoreOptions::send_ahead): a task waiting for one last
// dependency goes to the engine running it, to run there once it succeeds;
// whatever happens to the dependency, the task still runs only when its
// dependencies allow, and at most once.
#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class SendAheadTest : public CoreTest {
 protected:
  void SetUp() override { Make(/*hwm=*/4, "leastload", /*send_ahead=*/true); }
  // The single dispatch of task n, which must exist.
  Action OnlyDispatchOf(uint64_t n) {
    auto d = DispatchActionsOf(n);
    EXPECT_EQ(d.size(), 1u) << "task " << n;
    return d.empty() ? Action{} : d.front();
  }
};

TEST_F(SendAheadTest, AChainGoesToItsEngineAheadAsFarAsItsRoom) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  for (uint64_t n = 2; n <= 6; ++n) Submit(TaskSpec(n).After({n - 1}));
  const int32_t engine = OnlyDispatchOf(1).engine_id;
  for (uint64_t n = 2; n <= 4; ++n) {
    const Action a = OnlyDispatchOf(n);
    EXPECT_EQ(a.engine_id, engine) << "task " << n << " goes where its dependency runs";
    EXPECT_EQ(a.run_after, Id(n - 1)) << "task " << n;
  }
  EXPECT_TRUE(DispatchesOf(5).empty()) << "the engine's room (HWM 4) is full";
  Finish(1, true);
  EXPECT_EQ(OnlyDispatchOf(5).engine_id, engine);
  EXPECT_EQ(OnlyDispatchOf(5).run_after, Id(4));
  for (uint64_t n = 2; n <= 4; ++n) Finish(n, true);
  EXPECT_EQ(OnlyDispatchOf(6).run_after, Id(5));
  Finish(5, true);
  Finish(6, true);
  for (uint64_t n = 1; n <= 6; ++n) EXPECT_EQ(FinalOf(n)->kind, Action::Kind::kDeliver);
}

TEST_F(SendAheadTest, TwoTasksBlockedOnAFullEngineEachSendTheirWaiterAheadWhenThereIsRoom) {
  Make(/*hwm=*/3, "leastload", /*send_ahead=*/true);
  AddEngine(1);
  Submit(TaskSpec(1));  // fills the engine with 2 and 3
  Submit(TaskSpec(2));
  Submit(TaskSpec(3));
  Submit(TaskSpec(4).After({2}));  // 2 and 3 are each blocked: no room
  Submit(TaskSpec(5).After({3}));
  EXPECT_TRUE(DispatchesOf(4).empty());
  EXPECT_TRUE(DispatchesOf(5).empty());
  Finish(1, true);  // room for one: one waiter goes, the other's dependency waits again
  ASSERT_EQ(DispatchesOf(4).size() + DispatchesOf(5).size(), 1u);
  const uint64_t first = DispatchesOf(4).empty() ? 5 : 4;
  const uint64_t second = first == 4 ? 5 : 4;
  EXPECT_EQ(OnlyDispatchOf(first).run_after, Id(first - 2));
  Finish(first - 2, true);  // room again: the other still goes ahead of its dependency
  EXPECT_EQ(OnlyDispatchOf(second).run_after, Id(second - 2))
      << "blocked twice, it still goes where its dependency runs";
  Finish(second - 2, true);
  Finish(first, true);
  Finish(second, true);
  for (uint64_t n = 1; n <= 5; ++n) EXPECT_EQ(FinalOf(n)->kind, Action::Kind::kDeliver);
}

TEST_F(SendAheadTest, OffByDefaultADependentWaitsForItsDependency) {
  Make(/*hwm=*/4);
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}));
  EXPECT_TRUE(DispatchesOf(2).empty());
  Finish(1, true);
  EXPECT_TRUE(OnlyDispatchOf(2).run_after.IsZero());
}

TEST_F(SendAheadTest, ADependencyThatFailsBringsItsFollowerBackToFailAsImpossible) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}).Retries(3));
  ASSERT_EQ(OnlyDispatchOf(2).run_after, Id(1));
  Finish(1, false);
  EXPECT_FALSE(FinalOf(2).has_value()) << "its engine has not answered yet";
  EXPECT_EQ(NotRun(2), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(CountOf(Action::Kind::kReturned, 2), 1);
  ASSERT_TRUE(FinalOf(2).has_value());
  EXPECT_EQ(FinalOf(2)->error, ErrorType::kImpossibleDependency);
  EXPECT_NE(FinalOf(2)->message.find(Id(1).ToHex()), std::string::npos) << FinalOf(2)->message;
  EXPECT_TRUE(RetriesOf(2).empty()) << "not run: no retry used";
  EXPECT_EQ(NotRun(2), SchedulerCore::Finish::kLate) << "a repeated answer changes nothing";
}

TEST_F(SendAheadTest, AFollowerWaitsForItsDependencysRetryAndUsesNoRetryOfItsOwn) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(1));
  Submit(TaskSpec(2).After({1}));
  const int32_t first = OnlyDispatchOf(1).engine_id;
  Finish(1, false);  // retried, elsewhere
  ASSERT_EQ(DispatchActionsOf(1).size(), 2u);
  EXPECT_NE(DispatchActionsOf(1)[1].engine_id, first);
  NotRun(2);
  EXPECT_FALSE(FinalOf(2).has_value()) << "its dependency may still succeed";
  Finish(1, true);
  ASSERT_EQ(DispatchActionsOf(2).size(), 2u);
  EXPECT_EQ(DispatchActionsOf(2)[1].attempt, 2);
  Finish(2, true);
  EXPECT_EQ(FinalOf(2)->kind, Action::Kind::kDeliver);
  EXPECT_TRUE(RetriesOf(2).empty());
}

TEST_F(SendAheadTest, NotRunAfterItsDependencySucceededItIsSentAgainPlainly) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}));
  Finish(1, true);
  NotRun(2);  // the engine had lost its dependency's reply
  ASSERT_EQ(DispatchActionsOf(2).size(), 2u);
  EXPECT_TRUE(DispatchActionsOf(2)[1].run_after.IsZero()) << "its dependencies are met now";
  Finish(2, true);
  EXPECT_EQ(FinalOf(2)->kind, Action::Kind::kDeliver);
}

TEST_F(SendAheadTest, OnlyOneDependentGoesBehindATaskTheOthersSpreadAfterIt) {
  Make(/*hwm=*/8, "leastload", /*send_ahead=*/true);
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  for (uint64_t n = 2; n <= 5; ++n) Submit(TaskSpec(n).After({1}));
  int ahead = 0;
  for (uint64_t n = 2; n <= 5; ++n) ahead += !DispatchesOf(n).empty();
  EXPECT_EQ(ahead, 1);
  Finish(1, true);
  std::map<int32_t, int> per_engine;
  for (uint64_t n = 2; n <= 5; ++n) {
    ASSERT_EQ(DispatchesOf(n).size(), 1u);
    ++per_engine[DispatchesOf(n)[0]];
  }
  EXPECT_EQ(per_engine.size(), 2u) << "the rest go to both engines";
}

TEST_F(SendAheadTest, OnlyWhereTheTaskCouldRunAndOnlyWhenSuccessIsAllItNeeds) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2).After({1}).Timeout(5));  // a timeout counts until it starts
  Submit(TaskSpec(3).After({1}, DependencyMode::kAll, AcceptedOutcome::kFailure));
  Submit(TaskSpec(4).After({1}, DependencyMode::kAll, AcceptedOutcome::kEither));
  Submit(TaskSpec(5).After({1}).Targets({2}));  // not on engine 1
  Submit(TaskSpec(6));
  Submit(TaskSpec(7).After({1, 6}));  // two dependencies left
  for (uint64_t n : {2, 3, 4, 5, 7}) EXPECT_TRUE(DispatchesOf(n).empty()) << "task " << n;
}

TEST_F(SendAheadTest, AnEngineLostBeforeAFollowerCouldStartReturnsItWithoutARetry) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Retries(1));
  Submit(TaskSpec(2).After({1}));  // no retries: an attempt lost would fail it
  const int32_t engine = OnlyDispatchOf(1).engine_id;
  ASSERT_EQ(OnlyDispatchOf(2).engine_id, engine);
  RemoveEngine(engine);
  EXPECT_FALSE(FinalOf(2).has_value()) << "it could not have started";
  EXPECT_EQ(CountOf(Action::Kind::kReturned, 2), 1);
  // Its dependency runs again on the other engine, and it goes behind it.
  const int32_t other = engine == 1 ? 2 : 1;
  ASSERT_EQ(DispatchActionsOf(2).size(), 2u);
  EXPECT_EQ(DispatchActionsOf(2)[1].engine_id, other);
  EXPECT_EQ(DispatchActionsOf(2)[1].run_after, Id(1));
  Finish(1, true);
  Finish(2, true);
  EXPECT_EQ(FinalOf(2)->kind, Action::Kind::kDeliver);
}

TEST_F(SendAheadTest, RestoredAheadOfAFailedDependencyItFailsInsteadOfRunning) {
  const EngineSlot slot = AddEngine(1);
  Submission dep = TaskSpec(1).s;
  dep.attempts = 1;
  dep.running_on = slot;
  core().Submit(dep);
  Submission follower = TaskSpec(2).After({1}).s;
  follower.attempts = 1;
  follower.running_on = slot;  // a scheduler before the restart sent it ahead
  core().Submit(follower);
  Collect();
  running_on_[1] = running_on_[2] = 1;
  Finish(1, false);
  NotRun(2);
  ASSERT_TRUE(FinalOf(2).has_value());
  EXPECT_EQ(FinalOf(2)->error, ErrorType::kImpossibleDependency);
}

}  // namespace
}  // namespace ztask::scheduler
