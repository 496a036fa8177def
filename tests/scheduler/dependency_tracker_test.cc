// The dependency tracker alone: counting outcomes, the verdicts and their
// reasons, the cascade without recursion, dependencies never seen, and the
// "unmet here" answers.
#include "scheduler/dependency_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ztask::scheduler {
namespace {

TaskId T(uint64_t n) { return TaskId{0xde9, n}; }

TaskDependencies After(uint32_t total, DependencyMode mode = DependencyMode::kAll,
                       AcceptedOutcome outcome = AcceptedOutcome::kSuccess) {
  TaskDependencies deps;
  deps.after = {total, 0, 0, mode, outcome};
  return deps;
}

TaskDependencies Follow(uint32_t total, DependencyMode mode = DependencyMode::kAll) {
  TaskDependencies deps;
  deps.follow = {total, 0, 0, mode, AcceptedOutcome::kSuccess};
  return deps;
}

class Tracker : public ::testing::Test {
 protected:
  Verdict Judge(TaskDependencies& deps, const Cause& cause = {}) {
    reason_.clear();
    return Evaluate(T(1), deps, cause, engines_, &reason_);
  }
  EngineBook engines_{1, MakeScheme("leastload", 1)};
  std::string reason_;
};

TEST_F(Tracker, AfterAllIsReadyOnceEveryDependencySucceeded) {
  TaskDependencies deps = After(2);
  EXPECT_TRUE(CountDependency(deps, false, {kNoSlot, true}));
  EXPECT_EQ(Judge(deps), Verdict::kWait);
  CountDependency(deps, false, {kNoSlot, true});
  EXPECT_EQ(Judge(deps), Verdict::kReady);
}

TEST_F(Tracker, AfterAllIsImpossibleAtTheFirstRejectedOutcomeAndSaysWhich) {
  TaskDependencies deps = After(3);
  EXPECT_FALSE(CountDependency(deps, false, {kNoSlot, false}));
  EXPECT_EQ(Judge(deps, {T(2), false}), Verdict::kImpossible);
  EXPECT_NE(reason_.find("after dependency " + T(2).ToHex() + " ended in failure, but success"),
            std::string::npos)
      << reason_;
}

TEST_F(Tracker, AfterAnyWaitsUntilEveryOneIsRejected) {
  TaskDependencies deps = After(2, DependencyMode::kAny, AcceptedOutcome::kFailure);
  CountDependency(deps, false, {kNoSlot, true});
  EXPECT_EQ(Judge(deps), Verdict::kWait);
  CountDependency(deps, false, {kNoSlot, true});
  EXPECT_EQ(Judge(deps), Verdict::kImpossible);
  EXPECT_NE(reason_.find("none of its 2 after dependencies ended in failure"), std::string::npos)
      << reason_;
}

TEST_F(Tracker, FollowAllRunsWhereEveryDependencyRan) {
  const EngineSlot a = engines_.Add(1, true, {});
  TaskDependencies deps = Follow(2);
  CountDependency(deps, true, {a, true});
  CountDependency(deps, true, {a, true});
  EXPECT_EQ(deps.location, std::vector<EngineSlot>{a}) << "each engine once";
  EXPECT_EQ(Judge(deps), Verdict::kReady);
}

TEST_F(Tracker, FollowAllOnTwoEnginesOrNoneIsImpossible) {
  const EngineSlot a = engines_.Add(1, true, {});
  const EngineSlot b = engines_.Add(2, true, {});
  TaskDependencies two = Follow(2);
  CountDependency(two, true, {a, true});
  CountDependency(two, true, {b, true});
  EXPECT_EQ(Judge(two), Verdict::kImpossible);
  EXPECT_NE(reason_.find("ran on 2 different engines"), std::string::npos) << reason_;

  TaskDependencies nowhere = Follow(1);
  CountDependency(nowhere, true, {kNoSlot, true});
  EXPECT_EQ(nowhere.follow_unlocated, 1u);
  EXPECT_EQ(Judge(nowhere), Verdict::kImpossible);
}

TEST_F(Tracker, FollowAllIsImpossibleOnceItsEngineIsGone) {
  const EngineSlot a = engines_.Add(4, true, {});
  TaskDependencies deps = Follow(1);
  CountDependency(deps, true, {a, true});
  engines_.Remove(a);
  EXPECT_EQ(Judge(deps), Verdict::kImpossible);
  EXPECT_NE(reason_.find("engine 4, where its follow dependencies ran, is gone"),
            std::string::npos)
      << reason_;
}

TEST_F(Tracker, FollowAnyDropsDeadEnginesAndWaitsWhileOthersMayRun) {
  const EngineSlot a = engines_.Add(1, true, {});
  const EngineSlot b = engines_.Add(2, true, {});
  TaskDependencies deps = Follow(3, DependencyMode::kAny);
  CountDependency(deps, true, {a, true});
  CountDependency(deps, true, {b, true});
  engines_.Remove(a);
  EXPECT_EQ(Judge(deps), Verdict::kReady);
  EXPECT_EQ(deps.location, std::vector<EngineSlot>{b});
  engines_.Remove(b);
  EXPECT_EQ(Judge(deps), Verdict::kWait) << "the third may still run somewhere alive";
  CountDependency(deps, true, {kNoSlot, false});
  EXPECT_EQ(Judge(deps), Verdict::kImpossible);
}

TEST_F(Tracker, UnmetAnswersAreKeptOnceAndNamedInTheReason) {
  TaskDependencies deps;
  NoteUnmet(deps, 3);
  NoteUnmet(deps, 5);
  NoteUnmet(deps, 3);
  EXPECT_EQ(deps.unmet, (std::vector<int32_t>{3, 5}));
  const std::string why = NowhereUnmet(T(1), deps, 5, "no numpy");
  EXPECT_NE(why.find("engines 3, 5 answered that its dependencies are unmet there (engine 5: "
                     "no numpy)"),
            std::string::npos)
      << why;
}

TEST(DependencyTracker, ResolveTellsEveryWaiterOnceAndForgetsThem) {
  DependencyTracker tracker(100, false);
  tracker.Wait(T(2), T(1), false);
  tracker.Wait(T(3), T(1), true);
  std::vector<std::pair<TaskId, bool>> told;
  auto record = [&](const Waiter& w, const TaskId& dep, const Finished& f) {
    EXPECT_EQ(dep, T(1));
    EXPECT_TRUE(f.success());
    told.emplace_back(w.task, w.is_follow);
  };
  tracker.Resolve(T(1), {kNoSlot, true}, record);
  EXPECT_EQ(told, (std::vector<std::pair<TaskId, bool>>{{T(2), false}, {T(3), true}}));
  EXPECT_TRUE(tracker.HasFinished(T(1)));
  EXPECT_EQ(tracker.WaitersOf(T(1)), nullptr);
}

TEST(DependencyTracker, AGraphsWaitersGiveTheirMemoryBackOnceNoneWaits) {
  DependencyTracker tracker(100'000, false);
  constexpr uint64_t kTasks = 20'000;  // each waits for the one before
  for (uint64_t i = 1; i < kTasks; ++i) tracker.Wait(T(i + 1), T(i), false);
  EXPECT_GT(tracker.waiter_slots(), kTasks);
  auto none = [](const Waiter&, const TaskId&, const Finished&) {};
  for (uint64_t i = 1; i < kTasks - 1; ++i) tracker.Resolve(T(i), {kNoSlot, true}, none);
  EXPECT_GT(tracker.waiter_slots(), 0u) << "one still waits: the table stays";
  tracker.Resolve(T(kTasks - 1), {kNoSlot, true}, none);
  EXPECT_EQ(tracker.waiter_slots(), 0u) << "none waits: the table is given back";
  tracker.Wait(T(kTasks + 1), T(kTasks), false);
  ASSERT_NE(tracker.WaitersOf(T(kTasks)), nullptr) << "and made again when one waits";
}

TEST(DependencyTracker, AFailedChainCascadesWithoutRecursion) {
  constexpr uint64_t kChain = 100'000;
  DependencyTracker tracker(kChain + 1, false);
  for (uint64_t n = 1; n < kChain; ++n) tracker.Wait(T(n + 1), T(n), false);
  uint64_t depth = 0, max_depth = 0, failed = 0;
  std::function<void(const Waiter&, const TaskId&, const Finished&)> fail_next;
  fail_next = [&](const Waiter& w, const TaskId&, const Finished&) {
    ++depth;
    max_depth = std::max(max_depth, depth);
    ++failed;
    tracker.Resolve(w.task, {kNoSlot, false}, fail_next);  // queued, not applied here
    --depth;
  };
  tracker.Resolve(T(1), {kNoSlot, false}, fail_next);
  EXPECT_EQ(failed, kChain - 1);
  EXPECT_EQ(max_depth, 1u);
  EXPECT_TRUE(tracker.HasFinished(T(kChain)));
}

TEST(DependencyTracker, OnlyTheLatestOutcomesAreKept) {
  DependencyTracker tracker(2, false);
  for (uint64_t n = 1; n <= 3; ++n) tracker.Restore(T(n), {kNoSlot, n != 2});
  EXPECT_FALSE(tracker.HasFinished(T(1)));
  ASSERT_NE(tracker.OutcomeOf(T(2)), nullptr);
  EXPECT_FALSE(tracker.OutcomeOf(T(2))->success());
  EXPECT_EQ(tracker.finished_count(), 2u);
}

TEST(DependencyTracker, AnUnknownDependencyIsInvalidUnlessLookedUpOrAwaited) {
  DependencyTracker plain(10, false);
  EXPECT_FALSE(plain.WaitForUnknown(T(1), T(9), 0));

  DependencyTracker looking(10, true);
  EXPECT_TRUE(looking.WaitForUnknown(T(1), T(9), 0));
  EXPECT_TRUE(looking.WaitForUnknown(T(2), T(9), 0));
  EXPECT_EQ(looking.TakeLookups(), std::vector<TaskId>{T(9)}) << "asked once";
  EXPECT_EQ(looking.lookups_pending(), 1u);
  looking.Answered(T(9));
  EXPECT_EQ(looking.lookups_pending(), 0u);
}

TEST(DependencyTracker, UnknownDependenciesAreAwaitedUntilTheDeadline) {
  DependencyTracker tracker(10, false);
  tracker.AwaitUnknownUntil(100);
  EXPECT_TRUE(tracker.WaitForUnknown(T(1), T(9), 50));
  EXPECT_EQ(tracker.AwaitDeadline(), 100);
  EXPECT_FALSE(tracker.AwaitExpired(99));
  EXPECT_TRUE(tracker.AwaitExpired(100));
  EXPECT_EQ(tracker.TakeAwaited(), (std::vector<std::pair<TaskId, TaskId>>{{T(1), T(9)}}));
  EXPECT_FALSE(tracker.AwaitExpired(200)) << "over once taken";
  EXPECT_FALSE(tracker.WaitForUnknown(T(2), T(9), 150));
}

}  // namespace
}  // namespace ztask::scheduler
