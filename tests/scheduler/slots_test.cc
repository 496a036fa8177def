// Engines with slots and countable resources: where a task may go, when it
// waits, when it can never run, and that a wide task is not starved.
#include <algorithm>
#include <random>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Slots : public CoreTest {};

Amounts FourSlots() { return {4, {}}; }
Amounts Gpus(int64_t n, int32_t slots = 4) { return {slots, {{"gpus", n}}}; }

TEST_F(Slots, AnEngineOfFourSlotsRunsFourTasksAtOnce) {
  AddEngine(1, FourSlots());
  for (uint64_t n = 1; n <= 6; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder(), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(core().LoadOf(slots_[1]), 4u);
  Finish(2, true);
  EXPECT_EQ(DispatchOrder().back(), 5u);
}

TEST_F(Slots, AWideTaskGoesOnlyWhereAllItsSlotsAreFree) {
  AddEngine(1, FourSlots());
  for (uint64_t n = 1; n <= 3; ++n) Submit(TaskSpec(n));
  Submit(TaskSpec(10).Slots(4));
  EXPECT_TRUE(DispatchesOf(10).empty());
  Finish(1, true);
  Finish(2, true);
  EXPECT_TRUE(DispatchesOf(10).empty()) << "three slots are free, it needs four";
  Finish(3, true);
  EXPECT_EQ(DispatchesOf(10), (std::vector<int32_t>{1}));
  EXPECT_EQ(core().LoadOf(slots_[1]), 4u);
  Submit(TaskSpec(11));
  EXPECT_TRUE(DispatchesOf(11).empty()) << "the wide task holds every slot";
  Finish(10, true);
  EXPECT_EQ(DispatchesOf(11), (std::vector<int32_t>{1}));
}

// A task waiting for units holds them, not the slots it does not lack:
// tasks that ask none of those units still go there.
TEST_F(Slots, ResourcesAreNeverBookedBeyondWhatTheEngineHasEvenWithoutAnHwm) {
  Make(0);  // no limit on slots waiting on an engine
  AddEngine(1, Gpus(2));
  for (uint64_t n = 1; n <= 3; ++n) Submit(TaskSpec(n).Uses("gpus", 1));
  for (uint64_t n = 4; n <= 9; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchesOf(1).size() + DispatchesOf(2).size() + DispatchesOf(3).size(), 2u);
  EXPECT_EQ(DispatchesOf(9), (std::vector<int32_t>{1})) << "slots without an HWM: no limit";
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
}

TEST_F(Slots, ATaskWaitingForUnitsHoldsThemAgainstLaterTasks) {
  AddEngine(1, Gpus(2, 8));
  Submit(TaskSpec(1).Uses("gpus", 1));
  Submit(TaskSpec(2).Uses("gpus", 2));  // waits for both
  Submit(TaskSpec(3).Uses("gpus", 1));
  Submit(TaskSpec(4));
  EXPECT_TRUE(DispatchesOf(3).empty()) << "it would take a unit the older task waits for";
  EXPECT_EQ(DispatchesOf(4), (std::vector<int32_t>{1})) << "it asks no unit";
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{1}));
  EXPECT_TRUE(DispatchesOf(3).empty());
  Finish(2, true);
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
}

TEST_F(Slots, TheHwmCountsSlotsWaitingBeyondThoseRunning) {
  Make(3);  // two slots' worth may wait on an engine beyond its four
  AddEngine(1, FourSlots());
  for (uint64_t n = 1; n <= 8; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder().size(), 6u);
  EXPECT_EQ(core().LoadOf(slots_[1]), 6u);
}

TEST_F(Slots, ATaskNoEngineCouldHoldFailsAtOnceSayingWhy) {
  AddEngine(1, Gpus(1, 2));
  AddEngine(2, FourSlots());
  Submit(TaskSpec(1).Uses("gpus", 2));
  ASSERT_TRUE(FinalOf(1));
  EXPECT_EQ(ErrorOf(1), ErrorType::kUnsatisfiable);
  EXPECT_NE(FinalOf(1)->message.find("needs gpus=2, the largest engine has 1"), std::string::npos)
      << FinalOf(1)->message;

  Submit(TaskSpec(2).Slots(8));
  EXPECT_EQ(ErrorOf(2), ErrorType::kUnsatisfiable);
  EXPECT_NE(FinalOf(2)->message.find("needs 8 slots, the largest engine has 4"),
            std::string::npos)
      << FinalOf(2)->message;

  Submit(TaskSpec(3).Uses("fpgas", 1));
  EXPECT_NE(FinalOf(3)->message.find("needs fpgas=1, the largest engine has no fpgas"),
            std::string::npos)
      << FinalOf(3)->message;

  // Each alone fits somewhere; both at once nowhere.
  Submit(TaskSpec(4).Slots(4).Uses("gpus", 1));
  ASSERT_TRUE(FinalOf(4));
  EXPECT_EQ(ErrorOf(4), ErrorType::kUnsatisfiable);
  Submit(TaskSpec(5).Slots(2).Uses("gpus", 1));
  EXPECT_EQ(DispatchesOf(5), (std::vector<int32_t>{1}));
}

TEST_F(Slots, OnlyTheEnginesItMayUseAreJudged) {
  AddEngine(1, Gpus(4));
  AddEngine(2, FourSlots());
  Submit(TaskSpec(1).Uses("gpus", 1).Targets({2}));
  EXPECT_EQ(ErrorOf(1), ErrorType::kUnsatisfiable);
  EXPECT_NE(FinalOf(1)->message.find("the largest engine it may use has no gpus"),
            std::string::npos)
      << FinalOf(1)->message;
}

TEST_F(Slots, ItWaitsWhileAFittingEngineIsBusyOrNoEngineIsThere) {
  Submit(TaskSpec(1).Uses("gpus", 1));
  EXPECT_FALSE(FinalOf(1)) << "no engine to judge by: it waits";
  AddEngine(1, Gpus(1));
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{1}));
  Submit(TaskSpec(2).Uses("gpus", 1));
  Tick(3600);
  EXPECT_FALSE(FinalOf(2)) << "the engine that fits is busy: it waits";
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{1}));
}

TEST_F(Slots, OnceAnEngineCouldHoldItItWaitsThroughThatEngineLeaving) {
  AddEngine(1, Gpus(1));
  Submit(TaskSpec(1).Uses("gpus", 1));
  Submit(TaskSpec(2).Uses("gpus", 1));
  AddEngine(2, FourSlots());
  RemoveEngine(1);  // it restarts, say
  EXPECT_FALSE(FinalOf(2));
  AddEngine(3, Gpus(1));
  EXPECT_EQ(DispatchesOf(2), (std::vector<int32_t>{3}));
}

// The rule: the oldest ready task that fits nowhere now holds the engine
// where it could fit with the most slots free; no other task goes there
// until it starts. Tasks of higher priority still go first.
TEST_F(Slots, AWideTaskIsNotStarvedByNarrowOnes) {
  AddEngine(1, FourSlots());
  for (uint64_t n = 1; n <= 4; ++n) Submit(TaskSpec(n));
  Submit(TaskSpec(100).Slots(4));
  for (uint64_t n = 5; n <= 40; ++n) Submit(TaskSpec(n));
  for (uint64_t n = 1; n <= 3; ++n) {
    Finish(n, true);
    EXPECT_TRUE(DispatchesOf(n + 4).empty()) << "task " << n + 4 << " took a held slot";
  }
  Finish(4, true);
  EXPECT_EQ(DispatchesOf(100), (std::vector<int32_t>{1}));
  Finish(100, true);
  EXPECT_EQ(DispatchOrder().size(), 9u);  // 1-4, the wide one, then 5-8
}

TEST_F(Slots, TheHeldEngineIsTheOneWithMostSlotsFreeAndTheOthersKeepWorking) {
  AddEngine(1, FourSlots());
  AddEngine(2, FourSlots());
  for (uint64_t n = 1; n <= 8; ++n) Submit(TaskSpec(n));
  // Engine 2 is left with one task, engine 1 with three.
  std::vector<uint64_t> on1, on2;
  for (uint64_t n = 1; n <= 8; ++n) (running_on_.at(n) == 1 ? on1 : on2).push_back(n);
  ASSERT_EQ(on1.size(), 4u);
  for (size_t i = 0; i < 3; ++i) Finish(on2[i], true);
  Finish(on1[0], true);
  Submit(TaskSpec(100).Slots(4));
  EXPECT_TRUE(DispatchesOf(100).empty());
  Submit(TaskSpec(9));
  EXPECT_EQ(DispatchesOf(9), (std::vector<int32_t>{1}));
  Submit(TaskSpec(10));
  EXPECT_TRUE(DispatchesOf(10).empty()) << "engine 1 is full and engine 2 is held";
  Finish(on1[1], true);
  EXPECT_EQ(DispatchesOf(10), (std::vector<int32_t>{1}));
  Finish(on2[3], true);
  EXPECT_EQ(DispatchesOf(100), (std::vector<int32_t>{2}));
}

TEST_F(Slots, AHigherPriorityNarrowTaskStillGoesFirst) {
  AddEngine(1, FourSlots());
  for (uint64_t n = 1; n <= 4; ++n) Submit(TaskSpec(n));
  Submit(TaskSpec(100).Slots(2));
  Submit(TaskSpec(5).Priority(10));
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(5), (std::vector<int32_t>{1}));
  Finish(2, true);
  EXPECT_TRUE(DispatchesOf(100).empty());
  Finish(3, true);
  EXPECT_EQ(DispatchesOf(100), (std::vector<int32_t>{1}));
}

TEST_F(Slots, ARetryRunsAgainWhereItFailedWhenNoOtherEngineCouldHoldIt) {
  AddEngine(1, Gpus(1));
  AddEngine(2, FourSlots());
  Submit(TaskSpec(1).Uses("gpus", 1).Retries(1));
  Finish(1, false);
  EXPECT_EQ(DispatchesOf(1), (std::vector<int32_t>{1, 1}))
      << "engine 2 is fresh but could never hold it";
}

TEST_F(Slots, ATaskTheOnlyEnginesThatCouldHoldItCannotRunFails) {
  AddEngine(1, Gpus(1));
  AddEngine(2, FourSlots());
  Submit(TaskSpec(1).Uses("gpus", 1));
  Unmet(1);
  ASSERT_TRUE(FinalOf(1)) << "it must not wait for engine 2, which could never hold it";
  EXPECT_EQ(ErrorOf(1), ErrorType::kImpossibleDependency);
}

TEST_F(Slots, ManyTasksWaitingForTheSameUnitsStartInOrderAndOthersPassThem) {
  AddEngine(1, Gpus(1));
  constexpr uint64_t kWaiting = 2000;
  for (uint64_t n = 1; n <= kWaiting; ++n) Submit(TaskSpec(n).Uses("gpus", 1));
  Submit(TaskSpec(kWaiting + 1).Slots(2));
  EXPECT_EQ(DispatchesOf(kWaiting + 1), (std::vector<int32_t>{1})) << "it asks no gpu";
  for (uint64_t n = 1; n < kWaiting; ++n) {
    ASSERT_EQ(Finish(n, true), SchedulerCore::Finish::kAccepted);
    ASSERT_EQ(DispatchesOf(n + 1), (std::vector<int32_t>{1})) << "task " << n + 1;
  }
}

TEST_F(Slots, AmongTasksAskingTheSameTheHigherPriorityStillGoesFirst) {
  AddEngine(1, Gpus(1));
  Submit(TaskSpec(1).Uses("gpus", 1));
  Submit(TaskSpec(2).Uses("gpus", 1));
  Submit(TaskSpec(3).Uses("gpus", 1).Priority(5));
  Abort({2});
  Submit(TaskSpec(4).Uses("gpus", 1));
  Finish(1, true);
  EXPECT_EQ(DispatchesOf(3), (std::vector<int32_t>{1}));
  Finish(3, true);
  EXPECT_EQ(DispatchesOf(4), (std::vector<int32_t>{1}));
  EXPECT_EQ(ErrorOf(2), ErrorType::kTaskAborted);
  EXPECT_EQ(core().ready_tasks(), 0u);
}

TEST_F(Slots, ClientsNamingThousandsOfResourcesKeepTheTableBounded) {
  AddEngine(1, Gpus(1));
  for (uint64_t n = 1; n <= 3000; ++n) {
    Submit(TaskSpec(n).Uses("r" + std::to_string(n), 1));
    ASSERT_EQ(ErrorOf(n), ErrorType::kUnsatisfiable) << "task " << n;
  }
  Submit(TaskSpec(5000).Uses("gpus", 1));
  EXPECT_EQ(DispatchesOf(5000), (std::vector<int32_t>{1}));
}

TEST_F(Slots, AnEngineRestoredWithOneSlotTakesMoreOnceItSaysWhatItHas) {
  const EngineSlot slot = AddEngine(1);
  for (uint64_t n = 1; n <= 4; ++n) Submit(TaskSpec(n));
  EXPECT_EQ(DispatchOrder().size(), 1u);
  core().SetCapacity(slot, FourSlots());
  Collect();
  EXPECT_EQ(DispatchOrder().size(), 4u);
}

// Under every scheme, with random widths, random finishing order and
// engines coming and going: no engine ever holds more slots or units than
// it has, and every task ends exactly once.
class SlotsEveryScheme : public CoreTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(SlotsEveryScheme, NoEngineIsEverOverbookedAndEveryTaskEnds) {
  Make(1, GetParam());
  std::mt19937_64 rng(7);
  const std::map<int32_t, Amounts> engines = {{1, Gpus(2, 4)}, {2, FourSlots()}, {3, Gpus(1, 2)}};
  for (const auto& [id, capacity] : engines) AddEngine(id, capacity);
  std::map<uint64_t, Amounts> asked;
  constexpr uint64_t kTasks = 400;
  for (uint64_t n = 1; n <= kTasks; ++n) {
    Amounts a{static_cast<int32_t>(1 + rng() % 4), {}};
    if (rng() % 4 == 0) a.resources["gpus"] = 1 + static_cast<int64_t>(rng() % 2);
    asked[n] = a;
    TaskSpec t(n);
    t.Slots(a.slots);
    for (const auto& [name, units] : a.resources) t.Uses(name, units);
    Submit(t);
  }
  auto check = [&] {
    std::map<int32_t, std::pair<int32_t, int64_t>> held;  // slots, gpus
    for (const auto& [n, engine] : running_on_) {
      if (!Running(n)) continue;
      held[engine].first += asked[n].slots;
      auto g = asked[n].resources.find("gpus");
      held[engine].second += g == asked[n].resources.end() ? 0 : g->second;
    }
    for (const auto& [engine, h] : held) {
      const Amounts& cap = engines.at(engine);
      EXPECT_LE(h.first, cap.slots) << "engine " << engine;
      auto g = cap.resources.find("gpus");
      EXPECT_LE(h.second, g == cap.resources.end() ? 0 : g->second) << "engine " << engine;
    }
  };
  for (int step = 0; step < 5000 && finals_.size() < kTasks; ++step) {
    check();
    std::vector<uint64_t> running;
    for (const auto& [n, engine] : running_on_) {
      if (Running(n)) running.push_back(n);
    }
    if (running.empty()) break;
    Finish(running[rng() % running.size()], true);
  }
  for (uint64_t n = 1; n <= kTasks; ++n) {
    ASSERT_EQ(FinalCount(n), 1) << "task " << n;
    EXPECT_EQ(ErrorOf(n), ErrorType::kNone) << "task " << n << ": " << FinalOf(n)->message;
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, SlotsEveryScheme, ::testing::ValuesIn(SchemeNames()));

}  // namespace
}  // namespace ztask::scheduler
