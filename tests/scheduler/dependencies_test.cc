// The after/follow truth table, cascades and invalid dependencies.
#include <tuple>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

using M = DependencyMode;
using O = AcceptedOutcome;

enum class Expect { kRun, kImpossible };

// Two dependencies (tasks 1 and 2) finished with these outcomes.
struct Row {
  M mode;
  O outcome;
  bool first_ok, second_ok;
  Expect expect;
};

// Written out by hand from the rules, not computed by the code under test.
const Row kTable[] = {
    {M::kAll, O::kSuccess, true, true, Expect::kRun},
    {M::kAll, O::kSuccess, true, false, Expect::kImpossible},
    {M::kAll, O::kSuccess, false, false, Expect::kImpossible},
    {M::kAll, O::kFailure, true, true, Expect::kImpossible},
    {M::kAll, O::kFailure, true, false, Expect::kImpossible},
    {M::kAll, O::kFailure, false, false, Expect::kRun},
    {M::kAll, O::kEither, true, true, Expect::kRun},
    {M::kAll, O::kEither, true, false, Expect::kRun},
    {M::kAll, O::kEither, false, false, Expect::kRun},
    {M::kAny, O::kSuccess, true, true, Expect::kRun},
    {M::kAny, O::kSuccess, true, false, Expect::kRun},
    {M::kAny, O::kSuccess, false, false, Expect::kImpossible},
    {M::kAny, O::kFailure, true, true, Expect::kImpossible},
    {M::kAny, O::kFailure, true, false, Expect::kRun},
    {M::kAny, O::kFailure, false, false, Expect::kRun},
    {M::kAny, O::kEither, true, true, Expect::kRun},
    {M::kAny, O::kEither, true, false, Expect::kRun},
    {M::kAny, O::kEither, false, false, Expect::kRun},
};

// (row, is_follow, dependencies finished before the dependent is submitted)
class TruthTable : public CoreTest,
                   public ::testing::WithParamInterface<std::tuple<int, bool, bool>> {};

TEST_P(TruthTable, DependentRunsOrIsImpossible) {
  const auto [index, is_follow, deps_first] = GetParam();
  const Row& row = kTable[index];
  Make(/*hwm=*/0);
  AddEngine(1);
  // Both dependencies run on engine 1, so a follow location is one engine.
  Submit(TaskSpec(1).Targets({1}));
  Submit(TaskSpec(2).Targets({1}));
  AddEngine(2);
  TaskSpec dependent(10);
  if (is_follow) {
    dependent.Follow({1, 2}, row.mode, row.outcome);
  } else {
    dependent.After({1, 2}, row.mode, row.outcome);
  }
  if (!deps_first) Submit(dependent);
  Finish(1, row.first_ok);
  Finish(2, row.second_ok);
  if (deps_first) Submit(dependent);

  if (row.expect == Expect::kRun) {
    ASSERT_EQ(DispatchesOf(10).size(), 1u) << "dependent should have run";
    if (is_follow) {
      EXPECT_EQ(DispatchesOf(10)[0], 1) << "follow must run where deps ran";
    }
  } else {
    EXPECT_TRUE(DispatchesOf(10).empty());
    EXPECT_EQ(ErrorOf(10), ErrorType::kImpossibleDependency);
  }
  EXPECT_LE(FinalCount(10), 1);
}

INSTANTIATE_TEST_SUITE_P(AllRows, TruthTable,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kTable))),
                                            ::testing::Bool(), ::testing::Bool()));

class Dependencies : public CoreTest {};

TEST_F(Dependencies, AllWaitsForEveryDependency) {
  Make(0);
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  Submit(TaskSpec(3).After({1, 2}));
  Finish(1, true);
  EXPECT_TRUE(DispatchesOf(3).empty());
  Finish(2, true);
  EXPECT_EQ(DispatchesOf(3).size(), 1u);
}

TEST_F(Dependencies, AllFailsAtFirstRejectedWithoutWaitingForTheRest) {
  Make(0);
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  Submit(TaskSpec(3).After({1, 2}));
  Finish(1, false);
  ASSERT_TRUE(FinalOf(3).has_value()) << "must not wait for task 2";
  EXPECT_EQ(ErrorOf(3), ErrorType::kImpossibleDependency);
  EXPECT_NE(FinalOf(3)->message.find(Id(1).ToHex()), std::string::npos)
      << "the message names the failed dependency: " << FinalOf(3)->message;
}

TEST_F(Dependencies, AnyRunsAtFirstAcceptedAndWaitsOnRejected) {
  Make(0);
  AddEngine(1);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  Submit(TaskSpec(3).After({1, 2}, M::kAny));
  Finish(1, false);
  EXPECT_FALSE(FinalOf(3).has_value());
  EXPECT_TRUE(DispatchesOf(3).empty());
  Finish(2, true);
  EXPECT_EQ(DispatchesOf(3).size(), 1u);
}

TEST_F(Dependencies, FailuresCascadeThroughTheWholeChainAtOnce) {
  AddEngine(1);
  Submit(TaskSpec(1));
  for (uint64_t n = 2; n <= 6; ++n) Submit(TaskSpec(n).After({n - 1}));
  Finish(1, false);
  for (uint64_t n = 2; n <= 6; ++n) {
    EXPECT_EQ(ErrorOf(n), ErrorType::kImpossibleDependency) << "task " << n;
  }
  EXPECT_EQ(core().live_tasks(), 0u);
}

TEST_F(Dependencies, CascadeOfAMillionDeepChainDoesNotRecurse) {
  AddEngine(1);
  Submit(TaskSpec(1));
  constexpr uint64_t kDepth = 200'000;
  for (uint64_t n = 2; n <= kDepth; ++n) Submit(TaskSpec(n).After({n - 1}));
  Finish(1, false);
  EXPECT_EQ(ErrorOf(kDepth), ErrorType::kImpossibleDependency);
  EXPECT_EQ(core().live_tasks(), 0u);
}

TEST_F(Dependencies, FailureOutcomeLetsTheDependentRunAfterAScheduledFailure) {
  AddEngine(1);
  Submit(TaskSpec(1).After({99}));  // never seen: fails InvalidDependency
  Submit(TaskSpec(2).After({1}, M::kAll, O::kFailure));
  EXPECT_EQ(ErrorOf(1), ErrorType::kInvalidDependency);
  EXPECT_EQ(DispatchesOf(2).size(), 1u);
}

TEST_F(Dependencies, OnItselfIsInvalid) {
  AddEngine(1);
  Submit(TaskSpec(1).After({1}));
  EXPECT_EQ(ErrorOf(1), ErrorType::kInvalidDependency);
  EXPECT_NE(FinalOf(1)->message.find("itself"), std::string::npos);
}

TEST_F(Dependencies, OnAnUnknownIdIsInvalid) {
  AddEngine(1);
  Submit(TaskSpec(1).Follow({77}));
  EXPECT_EQ(ErrorOf(1), ErrorType::kInvalidDependency);
  EXPECT_NE(FinalOf(1)->message.find(Id(77).ToHex()), std::string::npos);
}

TEST_F(Dependencies, AlreadyFinishedAtSubmissionAreResolvedAtOnce) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Finish(1, true);
  Submit(TaskSpec(2).After({1}));
  EXPECT_EQ(DispatchesOf(2).size(), 1u);
}

TEST_F(Dependencies, FollowAllOnDifferentEnginesIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Targets({1}));
  Submit(TaskSpec(2).Targets({2}));
  Submit(TaskSpec(3).Follow({1, 2}));
  Finish(1, true);
  Finish(2, true);
  EXPECT_EQ(ErrorOf(3), ErrorType::kImpossibleDependency);
  EXPECT_NE(FinalOf(3)->message.find("different engines"), std::string::npos);
}

TEST_F(Dependencies, FollowAnyRunsOnOneOfTheEnginesWhereDependenciesRan) {
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1).Targets({1}));
  Submit(TaskSpec(2).Targets({2}));
  Finish(1, true);
  Finish(2, true);
  Submit(TaskSpec(3).Follow({1, 2}, M::kAny));
  ASSERT_EQ(DispatchesOf(3).size(), 1u);
  EXPECT_NE(DispatchesOf(3)[0], 3);
}

TEST_F(Dependencies, FollowOnAnEngineThatIsGoneIsImpossible) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Targets({1}));
  Finish(1, true);
  RemoveEngine(1);
  Submit(TaskSpec(2).Follow({1}));
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency);
}

TEST_F(Dependencies, FollowFailsWhenItsEngineIsLostWhileItWaitsForRoom) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Targets({1}));
  Finish(1, true);
  Submit(TaskSpec(2).Targets({1}));  // engine 1 busy (hwm 1)
  Submit(TaskSpec(3).Follow({1}));   // ready, but waits for engine 1
  EXPECT_TRUE(DispatchesOf(3).empty());
  RemoveEngine(1);
  EXPECT_EQ(ErrorOf(3), ErrorType::kImpossibleDependency);
}

TEST_F(Dependencies, FollowOnAnEngineThatRestartedIsImpossible) {
  AddEngine(1);
  Submit(TaskSpec(1));
  Finish(1, true);
  RemoveEngine(1);
  AddEngine(1);  // same id, new life: its state is gone
  Submit(TaskSpec(2).Follow({1}));
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency);
}

TEST_F(Dependencies, FollowOnATaskThatNeverRanIsImpossibleForModeAll) {
  AddEngine(1);
  Submit(TaskSpec(1).After({55}));  // InvalidDependency: never ran anywhere
  Submit(TaskSpec(2).Follow({1}, M::kAll, O::kFailure));
  EXPECT_EQ(ErrorOf(2), ErrorType::kImpossibleDependency);
}

TEST_F(Dependencies, FinishedTasksKeepOnlyTheirOutcome) {
  AddEngine(1);
  for (uint64_t n = 1; n <= 100; ++n) {
    Submit(TaskSpec(n));
    Finish(n, true);
  }
  EXPECT_EQ(core().live_tasks(), 0u);
  EXPECT_EQ(core().finished_tasks(), 100u);
}


// ---- outcomes let go of (keep_finished) and looked up ---------------------

class Lookups : public Dependencies {
 protected:
  void SetUp() override {
    MakeWith({.hwm = 1, .keep_finished = 2, .look_up_unknown = true});
    AddEngine(1);
    AddEngine(2);
  }
  // Runs tasks n.. one after another, each to success.
  void RunAndFinish(std::vector<uint64_t> ids) {
    for (uint64_t n : ids) {
      Submit(TaskSpec(n));
      Finish(n, true);
    }
  }
};

TEST_F(Lookups, OnlyTheLatestOutcomesAreKept) {
  RunAndFinish({1, 2, 3, 4, 5});
  EXPECT_EQ(core().finished_tasks(), 2u);
  EXPECT_FALSE(core().HasFinished(Id(1)));
  EXPECT_TRUE(core().HasFinished(Id(5)));
}

TEST_F(Lookups, AForgottenDependencyIsAskedAboutOnceAndItsAnswerSettlesItsWaiters) {
  RunAndFinish({1, 2, 3});
  Submit(TaskSpec(4).After({1}));
  Submit(TaskSpec(5).After({1}));
  EXPECT_TRUE(DispatchesOf(4).empty()) << "waits for the answer";
  EXPECT_EQ(core().TakeLookups(), std::vector<TaskId>{Id(1)}) << "asked once for both";
  EXPECT_TRUE(core().TakeLookups().empty());
  EXPECT_EQ(core().lookups_pending(), 1u);
  core().LookedUp(Id(1), Lookup::kFinished, true, 1);
  Collect();
  EXPECT_EQ(DispatchesOf(4).size() + DispatchesOf(5).size(), 2u);
  EXPECT_EQ(core().lookups_pending(), 0u);
}

TEST_F(Lookups, AFailedOutcomeLookedUpMakesASuccessDependentImpossible) {
  Submit(TaskSpec(6).After({40}));
  ASSERT_EQ(core().TakeLookups(), std::vector<TaskId>{Id(40)});
  core().LookedUp(Id(40), Lookup::kFinished, false, 1);
  Collect();
  EXPECT_EQ(ErrorOf(6), ErrorType::kImpossibleDependency);
}

TEST_F(Lookups, AFollowDependencyLookedUpGoesWhereItRan) {
  Submit(TaskSpec(7).Follow({41}));
  ASSERT_EQ(core().TakeLookups(), std::vector<TaskId>{Id(41)});
  core().LookedUp(Id(41), Lookup::kFinished, true, 2);
  Collect();
  EXPECT_EQ(DispatchesOf(7), std::vector<int32_t>{2});
}

TEST_F(Lookups, AnIdNobodyKnowsFailsItsWaitersWithInvalidDependency) {
  Submit(TaskSpec(8).After({99}));
  Submit(TaskSpec(9).After({8}));
  ASSERT_EQ(core().TakeLookups(), std::vector<TaskId>{Id(99)});
  EXPECT_FALSE(FinalOf(8)) << "not before the answer";
  core().LookedUp(Id(99), Lookup::kUnknown);
  Collect();
  EXPECT_EQ(ErrorOf(8), ErrorType::kInvalidDependency);
  EXPECT_NE(FinalOf(8)->message.find(Id(99).ToHex()), std::string::npos);
  EXPECT_EQ(ErrorOf(9), ErrorType::kImpossibleDependency) << "its own dependents follow";
}

TEST_F(Lookups, AnUnfinishedAnswerWaitsOnlyWhileARecoveryMayStillBringIt) {
  core().AwaitUnknownUntil(static_cast<int64_t>(10e6));
  Submit(TaskSpec(10).After({50}));
  Submit(TaskSpec(11).After({51}));
  core().TakeLookups();
  core().LookedUp(Id(50), Lookup::kUnfinished);
  Collect();
  EXPECT_FALSE(FinalOf(10)) << "a later recovery page brings it";
  Submit(TaskSpec(50));  // restored
  Finish(50, true);
  EXPECT_EQ(DispatchesOf(10).size(), 1u);
  Tick(11);  // the window closes with 51 never restored
  EXPECT_EQ(ErrorOf(11), ErrorType::kInvalidDependency);
  Submit(TaskSpec(12).After({52}));
  core().TakeLookups();
  core().LookedUp(Id(52), Lookup::kUnfinished);
  Collect();
  EXPECT_EQ(ErrorOf(12), ErrorType::kInvalidDependency) << "outside a recovery: lost";
}

TEST_F(Lookups, AnAnswerForADependencyThatCameMeanwhileChangesNothing) {
  Submit(TaskSpec(13).After({60}));
  core().TakeLookups();
  Submit(TaskSpec(60));  // submitted after its dependent, before the answer
  core().LookedUp(Id(60), Lookup::kUnknown);
  Collect();
  EXPECT_FALSE(FinalOf(13));
  Finish(60, true);
  EXPECT_EQ(DispatchesOf(13).size(), 1u);
}

}  // namespace
}  // namespace ztask::scheduler
