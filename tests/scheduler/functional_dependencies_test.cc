// Functional dependencies: an engine answers that a task cannot run there
// (a Python require/depend, a command's exit code, a C++ UnmetDependency).
#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class FunctionalDependencies : public CoreTest {};

TEST_F(FunctionalDependencies, AnUnmetTaskRunsOnAnotherEngineWithoutUsingARetry) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));  // retries 0: a retry would fail it
  const int32_t first = DispatchesOf(1).at(0);
  EXPECT_EQ(Unmet(1), SchedulerCore::Finish::kAccepted);
  ASSERT_EQ(DispatchesOf(1).size(), 2u);
  EXPECT_NE(DispatchesOf(1).at(1), first);
  EXPECT_EQ(CountOf(Action::Kind::kUnmet, 1), 1);
  EXPECT_TRUE(RetriesOf(1).empty());
  Finish(1, true);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(FunctionalDependencies, OnceEveryEngineAnsweredUnmetTheTaskIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1).Retries(5));
  Unmet(1);
  Unmet(1);
  EXPECT_FALSE(FinalOf(1).has_value());
  Unmet(1, "module numpy cannot be imported");
  ASSERT_TRUE(FinalOf(1).has_value());
  EXPECT_EQ(ErrorOf(1), ErrorType::kImpossibleDependency);
  EXPECT_NE(FinalOf(1)->message.find("module numpy cannot be imported"), std::string::npos);
  EXPECT_EQ(DispatchesOf(1).size(), 3u);  // once on each engine, never twice on one
  EXPECT_EQ(FinalCount(1), 1);
  EXPECT_EQ(core().live_tasks(), 0u);
}

TEST_F(FunctionalDependencies, OnlyTheEnginesATaskMayUseCount) {
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1).Targets({2, 3}));
  Unmet(1);
  EXPECT_FALSE(FinalOf(1).has_value());
  Unmet(1);
  EXPECT_EQ(ErrorOf(1), ErrorType::kImpossibleDependency);
  for (int32_t e : DispatchesOf(1)) EXPECT_NE(e, 1);
}

TEST_F(FunctionalDependencies, WhenTheLastEngineThatMightRunItLeavesTheTaskIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(9));  // keeps one engine busy (HWM 1)
  Submit(TaskSpec(1));
  const int32_t busy = DispatchesOf(9).at(0);
  ASSERT_EQ(DispatchesOf(1).size(), 1u);
  ASSERT_NE(DispatchesOf(1).at(0), busy);
  Unmet(1);
  EXPECT_FALSE(FinalOf(1).has_value());  // waits for the busy engine
  RemoveEngine(busy);
  EXPECT_EQ(ErrorOf(1), ErrorType::kImpossibleDependency);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(FunctionalDependencies, AnEngineThatJoinsGetsTheTaskUnmetElsewhere) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(7));  // keeps one engine busy
  Submit(TaskSpec(1));
  Unmet(1);
  // Engine 1 or 2 said unmet; the other is busy with task 7 (HWM 1).
  EXPECT_FALSE(FinalOf(1).has_value());
  AddEngine(3);
  ASSERT_FALSE(DispatchesOf(1).empty());
  EXPECT_EQ(DispatchesOf(1).back(), 3);
  Finish(1, true);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver);
}

TEST_F(FunctionalDependencies, TheTimeoutCountsAgainWhileAnUnmetTaskWaits) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(7));  // engine busy
  Submit(TaskSpec(1).Timeout(1.0));
  Unmet(1);
  Tick(1.5);
  EXPECT_EQ(ErrorOf(1), ErrorType::kTaskTimeout);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(FunctionalDependencies, AnUnmetAnswerFromAnEngineNotRunningTheTaskChangesNothing) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  const int32_t running = DispatchesOf(1).at(0);
  const int32_t other = running == 1 ? 2 : 1;
  EXPECT_EQ(core().TaskUnmet(slots_.at(other), Id(1), "late"), SchedulerCore::Finish::kLate);
  EXPECT_EQ(core().TaskUnmet(slots_.at(running), Id(99), "unknown"), SchedulerCore::Finish::kLate);
  Collect();
  EXPECT_EQ(CountOf(Action::Kind::kUnmet, 1), 0);
  EXPECT_TRUE(Running(1));
}

TEST_F(FunctionalDependencies, AFollowTaskUnmetWhereItMustRunIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  Finish(1, true);
  Submit(TaskSpec(2).Follow({1}));
  ASSERT_EQ(DispatchesOf(2).size(), 1u);
  Unmet(2);
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency);
  EXPECT_EQ(DispatchesOf(2).size(), 1u);
}

}  // namespace
}  // namespace ztask::scheduler
