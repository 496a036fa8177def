// HWM, order, targets, engines coming and going, and each scheme's choice
// inside the core.
#include <set>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Dispatch : public CoreTest {};

TEST_F(Dispatch, HwmOneKeepsExtraTasksInTheScheduler) {
  Make(1);
  AddEngine(1);
  for (uint64_t n = 1; n <= 3; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(core().LoadOf(slots_[1]), 1u);
  EXPECT_EQ(core().unassigned_tasks(), 2u);
  Finish(1, true);
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{1, 2}));
}

TEST_F(Dispatch, HwmNAllowsNOutstanding) {
  Make(3);
  AddEngine(1);
  for (uint64_t n = 1; n <= 5; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder().size(), 3u);
  EXPECT_EQ(core().LoadOf(slots_[1]), 3u);
}

TEST_F(Dispatch, HwmZeroIsUnlimited) {
  Make(0);
  AddEngine(1);
  for (uint64_t n = 1; n <= 50; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder().size(), 50u);
  EXPECT_EQ(core().unassigned_tasks(), 0u);
}

TEST_F(Dispatch, TasksWaitWhenNoEngineIsRegistered) {
  for (uint64_t n = 1; n <= 3; ++n) EXPECT_TRUE(Submit(TaskSpec(n)));
  EXPECT_TRUE(DispatchOrder().empty());
  EXPECT_EQ(core().unassigned_tasks(), 3u);
  AddEngine(7);
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{7}));
}

TEST_F(Dispatch, FifoWithinAPriority) {
  for (uint64_t n = 1; n <= 5; ++n) Submit(TaskSpec(n));
  AddEngine(1);
  for (uint64_t n = 1; n <= 5; ++n) Finish(n, true);
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST_F(Dispatch, HigherPriorityFirst) {
  Submit(TaskSpec(1).Priority(0));
  Submit(TaskSpec(2).Priority(5));
  Submit(TaskSpec(3).Priority(-1));
  Submit(TaskSpec(4).Priority(5));
  AddEngine(1);
  for (uint64_t n : {2, 4, 1, 3}) Finish(n, true);
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{2, 4, 1, 3}));
}

TEST_F(Dispatch, PassedOverTasksKeepTheirOrder) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Targets({1}));  // engine 1 now busy
  // Passed over again and again while engine 2 takes other work.
  Submit(TaskSpec(2).Targets({1}));
  Submit(TaskSpec(3).Targets({1}));
  Submit(TaskSpec(4).Targets({1}));
  Submit(TaskSpec(5));
  Finish(5, true);
  Submit(TaskSpec(6));
  Finish(1, true);
  Finish(2, true);
  Finish(3, true);
  std::vector<uint64_t> on_one;
  for (uint64_t n : DispatchOrder()) {
    if (DispatchesOf(n)[0] == 1) on_one.push_back(n);
  }
  EXPECT_EQ(on_one, (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST_F(Dispatch, TargetsRestrictTheEngines) {
  Make(0);
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  for (uint64_t n = 1; n <= 6; ++n) Submit(TaskSpec(n).Targets({2, 3}));
  for (uint64_t n = 1; n <= 6; ++n) EXPECT_NE(DispatchesOf(n).at(0), 1) << n;
}

TEST_F(Dispatch, TargetsNotRegisteredWaitForTheEngine) {
  AddEngine(1);
  Submit(TaskSpec(1).Targets({4}));
  EXPECT_TRUE(DispatchesOf(1).empty());
  EXPECT_FALSE(FinalOf(1).has_value());
  AddEngine(4);
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{4}));
}

TEST_F(Dispatch, ADuplicateIdIsRefused) {
  AddEngine(1);
  EXPECT_TRUE(Submit(TaskSpec(1)));
  EXPECT_FALSE(Submit(TaskSpec(1)));
  Finish(1, true);
  EXPECT_FALSE(Submit(TaskSpec(1)));
  EXPECT_EQ(core().counters().duplicates, 2u);
  EXPECT_EQ(FinalCount(1), 1);
}

TEST_F(Dispatch, LeastLoadPicksTheFewestOutstanding) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  // Build loads 2, 0, 1 on engines 1, 2, 3 with targeted tasks.
  Submit(TaskSpec(1).Targets({1}));
  Submit(TaskSpec(2).Targets({1}));
  Submit(TaskSpec(3).Targets({3}));
  Submit(TaskSpec(4));
  EXPECT_EQ(DispatchesOf(4), (std::vector<int32_t>{2}));
  Submit(TaskSpec(5));  // loads now 2, 1, 1: tie, engine 2 used more recently
  EXPECT_EQ(DispatchesOf(5), (std::vector<int32_t>{3}));
}

TEST_F(Dispatch, LeastLoadTiesGoToTheLeastRecentlyUsed) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  Finish(1, true);  // engine 1 used, load back to 0
  Submit(TaskSpec(2));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
}

TEST_F(Dispatch, LeastLoadPacksTasksFarShorterThanAMessageOntoOneEngine) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1));
  ASSERT_EQ(DispatchesOf(1), (std::vector<int32_t>{1}));
  FinishRan(1, 25);  // 100 us / 25 us: four of its tasks count as one
  for (uint64_t n = 2; n <= 11; ++n) Submit(TaskSpec(n));
  // Engines 2 and 3, unmeasured, take the pool's measure: a pack of four
  // fills before the next engine gets one; the least recently used first.
  std::vector<int32_t> got;
  for (uint64_t n = 2; n <= 11; ++n) got.push_back(DispatchesOf(n).at(0));
  EXPECT_EQ(got, (std::vector<int32_t>{2, 2, 2, 2, 3, 3, 3, 3, 1, 1}));
}

TEST_F(Dispatch, APackIsOpenOnlyToTasksThatComeInTheTurnThatBeganIt) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1));
  FinishRan(1, 10);  // packs of ten
  core().EndTurn();
  Submit(TaskSpec(2));  // engine 2, the least recently used: a pack begins
  Submit(TaskSpec(3));  // the same turn: into it
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{2}));
  core().EndTurn();
  // A task that comes later does not wait behind them (one may be long):
  // engine 2 holds no full pack, as engines 1 and 3, and was used last.
  Submit(TaskSpec(4));
  EXPECT_EQ(DispatchesOf(4), (std::vector<int32_t>{3}));
}

TEST_F(Dispatch, ALoneTaskDoesNotWaitBehindALongOneAmongShortOnes) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  FinishRan(1, 10);
  FinishRan(2, 10);  // packs of ten on both
  core().EndTurn();
  Submit(TaskSpec(3));  // engine 1, the less recently used: a long one
  ASSERT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
  core().EndTurn();
  Submit(TaskSpec(4));
  ASSERT_EQ(DispatchesOf(4), (std::vector<int32_t>{2}));
  FinishRan(4, 10);
  core().EndTurn();
  // Engine 1 is the less recently used, but holds task 3: the next task
  // that comes alone goes to the idle engine 2.
  Submit(TaskSpec(5));
  EXPECT_EQ(DispatchesOf(5), (std::vector<int32_t>{2}));
}

TEST_F(Dispatch, AnEngineThatDoesNotSayHowLongItsTasksRanCountsOneATask) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  Submit(TaskSpec(2));
  FinishRan(1, 10);  // engine 1 measures: packs of ten, and so the pool's
  Finish(2, true);   // engine 2 does not say: one a task, whatever the pool's
  core().EndTurn();
  for (uint64_t n = 3; n <= 6; ++n) Submit(TaskSpec(n));
  std::vector<int32_t> got;
  for (uint64_t n = 3; n <= 6; ++n) got.push_back(DispatchesOf(n).at(0));
  // Engine 1, the less recently used, begins a pack: the others fill it.
  EXPECT_EQ(got, (std::vector<int32_t>{1, 1, 1, 1}));
  core().EndTurn();
  for (uint64_t n = 3; n <= 6; ++n) FinishRan(n, 10);
  core().EndTurn();
  // Engine 2 is the less recently used now; it takes a task, which it counts
  // as a whole unit (the pool's packs are not its own): the next goes to
  // engine 1.
  Submit(TaskSpec(7));
  Submit(TaskSpec(8));
  EXPECT_EQ(DispatchesOf(7), (std::vector<int32_t>{2}));
  EXPECT_EQ(DispatchesOf(8), (std::vector<int32_t>{1})) << "engine 2 holds one: a unit";
}

TEST_F(Dispatch, AFailedTaskIsNotMeasured) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  ASSERT_EQ(core().TaskFinished(slots_[1], Id(1), false, ErrorType::kTaskFailed,
                                /*retriable=*/false, /*run_us=*/1),
            SchedulerCore::Finish::kAccepted);
  core().EndTurn();
  Submit(TaskSpec(2));
  Submit(TaskSpec(3));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1})) << "no pack: nothing measured";
}

TEST_F(Dispatch, LeastLoadSpreadsTasksAsLongAsAMessageOnePerEngine) {
  Make(0, "leastload");
  AddEngine(1);
  AddEngine(2);
  AddEngine(3);
  Submit(TaskSpec(1));
  FinishRan(1, RunTimes::kPackUs);
  for (uint64_t n = 2; n <= 7; ++n) Submit(TaskSpec(n));
  std::vector<int32_t> got;
  for (uint64_t n = 2; n <= 7; ++n) got.push_back(DispatchesOf(n).at(0));
  EXPECT_EQ(got, (std::vector<int32_t>{2, 3, 1, 2, 3, 1}));
}

TEST_F(Dispatch, APackNeverPassesTheHwm) {
  Make(3, "leastload");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));
  FinishRan(1, 0);  // packs of RunTimes::kMaxPack
  for (uint64_t n = 2; n <= 9; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(core().LoadOf(slots_[1]), 3u);
  EXPECT_EQ(core().LoadOf(slots_[2]), 3u);
  EXPECT_EQ(core().unassigned_tasks(), 2u);
}

TEST_F(Dispatch, NewEnginesCountAsLeastRecentlyUsed) {
  Make(0, "lru");
  AddEngine(1);
  Submit(TaskSpec(1));
  Finish(1, true);
  AddEngine(2);
  Submit(TaskSpec(2));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
}

TEST_F(Dispatch, LruIgnoresLoad) {
  Make(0, "lru");
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1));  // engine 1 (never used, first registered)
  Submit(TaskSpec(2));  // engine 2
  Submit(TaskSpec(3));  // engine 1 again: least recently used, though loaded
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{2}));
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
}

TEST_F(Dispatch, EveryTaskGetsAnEngineUnderEveryScheme) {
  for (const auto& scheme : SchemeNames()) {
    Make(2, scheme);
    finals_.clear();
    running_on_.clear();
    log_.clear();
    for (int32_t e = 1; e <= 4; ++e) AddEngine(e);
    for (uint64_t n = 1; n <= 40; ++n) Submit(TaskSpec(n));
    for (uint64_t n = 1; n <= 40; ++n) Finish(n, true);
    for (uint64_t n = 1; n <= 40; ++n) {
      EXPECT_EQ(FinalCount(n), 1) << scheme << " task " << n;
    }
    EXPECT_EQ(core().live_tasks(), 0u) << scheme;
  }
}

}  // namespace
}  // namespace ztask::scheduler

namespace ztask::scheduler {
namespace {

class Draining : public CoreTest {
 protected:
  int Retires(int32_t engine) const {
    int n = 0;
    for (const auto& a : log_) n += a.kind == Action::Kind::kRetire && a.engine_id == engine;
    return n;
  }
};

TEST_F(Draining, ADrainingEngineFinishesItsTaskGetsNoMoreAndIsRetiredOnce) {
  AddEngine(1);
  AddEngine(2);
  Submit(TaskSpec(1).Targets({1}));
  core().EngineDraining(slots_[1]);
  EXPECT_EQ(Retires(1), 0) << "it still runs task 1";
  for (uint64_t n = 2; n <= 5; ++n) Submit(TaskSpec(n));
  Finish(2, true);
  Finish(3, true);
  Finish(4, true);
  Finish(5, true);
  for (uint64_t n = 2; n <= 5; ++n) EXPECT_EQ(DispatchesOf(n), (std::vector<int32_t>{2})) << n;
  Finish(1, true);
  EXPECT_EQ(FinalOf(1)->kind, Action::Kind::kDeliver) << "draining loses nothing";
  EXPECT_EQ(Retires(1), 1);
  Submit(TaskSpec(6));
  Finish(6, true);
  EXPECT_EQ(Retires(1), 1);
  EXPECT_EQ(DispatchesOf(6), (std::vector<int32_t>{2}));
}

TEST_F(Draining, AnIdleEngineIsRetiredAtOnce) {
  AddEngine(1);
  core().EngineDraining(slots_[1]);
  Collect();
  EXPECT_EQ(Retires(1), 1);
  Submit(TaskSpec(1));
  EXPECT_TRUE(DispatchesOf(1).empty()) << "tasks wait for an engine that is not leaving";
}

}  // namespace
}  // namespace ztask::scheduler
