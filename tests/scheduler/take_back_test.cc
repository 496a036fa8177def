// The default HWM (learned per engine) and the take-back rule
// (CoreOptions::hwm = kAdaptiveHwm), with a fake clock.
#include <algorithm>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class LearnedHwm : public CoreTest {
 protected:
  void SetUp() override { MakeWith({.hwm = kAdaptiveHwm}); }

  // How many tasks engine `id` holds (dispatched there, not finished, not
  // given back).
  int Held(int32_t id) const { return static_cast<int>(core_->LoadOf(slots_.at(id))); }
  // Tasks asked back so far, in order.
  std::vector<uint64_t> TakenBack() const {
    std::vector<uint64_t> out;
    for (const auto& a : log_) {
      if (a.kind == Action::Kind::kTakeBack) out.push_back(a.task.lo);
    }
    return out;
  }
  // Every task dispatched to `engine` and not finished yet, oldest first.
  std::vector<uint64_t> On(int32_t engine) const {
    std::vector<uint64_t> out;
    for (const auto& [n, e] : running_on_) {
      if (e == engine && Running(n)) out.push_back(n);
    }
    return out;
  }
  // Submits tasks from..to (inclusive).
  void SubmitRange(uint64_t from, uint64_t to) {
    for (uint64_t n = from; n <= to; ++n) ASSERT_TRUE(Submit(TaskSpec(n)));
  }
  // Finishes, `gap_us` apart, every task engine `id` holds, as it would
  // run them one after the other, until none is left or `limit` ran.
  int RunAll(int32_t id, int64_t gap_us, int limit = 1000) {
    int ran = 0;
    while (ran < limit) {
      std::vector<uint64_t> on = On(id);
      if (on.empty()) break;
      clock_.AdvanceMicros(gap_us);
      EXPECT_EQ(FinishOn(id, on.front(), true), SchedulerCore::Finish::kAccepted);
      ++ran;
    }
    return ran;
  }
};

TEST_F(LearnedHwm, ANewEngineHoldsOneTaskUntilItHasAnswered) {
  AddEngine(0);
  SubmitRange(1, 10);
  EXPECT_EQ(Held(0), 1);
  EXPECT_EQ(core().HwmOf(slots_.at(0)), 1u);
}

TEST_F(LearnedHwm, FastTasksDeepenTheQueueUpToSixtyFour) {
  AddEngine(0);
  SubmitRange(1, 400);
  RunAll(0, /*gap_us=*/10, /*limit=*/200);
  EXPECT_EQ(core().HwmOf(slots_.at(0)), DepthGauge::kMaxDepth + 1);
  EXPECT_EQ(Held(0), static_cast<int>(DepthGauge::kMaxDepth) + 1);
}

TEST_F(LearnedHwm, TasksOfTenMillisecondsGetOneQueuedAndLongOnesNone) {
  AddEngine(0);
  SubmitRange(1, 50);
  RunAll(0, /*gap_us=*/10, /*limit=*/100);  // fast at first: a deep queue
  ASSERT_GT(core().HwmOf(slots_.at(0)), 8u);
  SubmitRange(101, 300);
  RunAll(0, /*gap_us=*/10'000, /*limit=*/80);  // then slower
  EXPECT_EQ(core().HwmOf(slots_.at(0)), 2u);
  EXPECT_EQ(Held(0), 2);
  RunAll(0, /*gap_us=*/200'000, /*limit=*/60);  // then long
  EXPECT_EQ(core().HwmOf(slots_.at(0)), 1u);
  EXPECT_EQ(Held(0), 1);
}

TEST_F(LearnedHwm, AnExplicitHwmKeepsItsMeaning) {
  Make(/*hwm=*/4);
  AddEngine(0);
  SubmitRange(1, 100);
  RunAll(0, /*gap_us=*/10, /*limit=*/200);
  SubmitRange(101, 104);
  EXPECT_EQ(Held(0), 4);
  EXPECT_EQ(core().HwmOf(slots_.at(0)), 4u);
  AddEngine(1);  // idle, beside an engine with three tasks queued
  Tick(60);      // however long the first one runs, nothing is taken back
  EXPECT_TRUE(TakenBack().empty());
}

TEST_F(LearnedHwm, TasksRestoredOnAnEngineCountFromWhenTheyWerePlaced) {
  clock_.AdvanceSeconds(100);  // a scheduler restarted long after its clock began
  AddEngine(0);
  for (uint64_t n = 1; n <= 3; ++n) {  // restored running on engine 0: two queued
    TaskSpec t(n);
    t.s.attempts = 1;
    t.s.running_on = slots_.at(0);
    ASSERT_TRUE(Submit(t));
  }
  AddEngine(1);
  Tick(0.001);
  EXPECT_TRUE(TakenBack().empty()) << "quiet for 1 ms since they were placed, not since 0";
  Tick(0.05);
  EXPECT_EQ(TakenBack().size(), 3u) << "restored queues are looked at too";
}

// Engine 0 has learned a deep queue on fast tasks; then one long task
// comes with fast ones behind it, while engine 1 runs dry.
class TakeBack : public LearnedHwm {
 protected:
  void SetUp() override {
    LearnedHwm::SetUp();
    AddEngine(0);
    SubmitRange(1, 200);
    RunAll(0, /*gap_us=*/10, /*limit=*/200);
    ASSERT_EQ(On(0).size(), 0u);
    SubmitRange(1001, 1020);  // 1001 is the long one: engine 0 starts it
    ASSERT_EQ(Held(0), 20);
    AddEngine(1);  // idle: nothing ready is left for it
    ASSERT_EQ(Held(1), 0);
  }
};

TEST_F(TakeBack, TasksQueuedBehindALongOneMoveToAnIdleEngine) {
  Tick(0.001);
  EXPECT_TRUE(TakenBack().empty()) << "a short silence is not a long task";
  Tick(0.05);
  std::vector<uint64_t> asked = TakenBack();
  EXPECT_EQ(asked.size(), 20u) << "the engine knows which it started: all are asked";
  // The engine started 1001 and gives back the others, "not run".
  for (uint64_t n = 1002; n <= 1020; ++n) {
    EXPECT_EQ(NotRun(n), SchedulerCore::Finish::kAccepted) << n;
  }
  EXPECT_EQ(Held(0), 1) << "the stuck engine queues nothing more";
  EXPECT_EQ(Held(1), 1) << "the idle engine takes them, one at a time while it is new";
  RunAll(1, /*gap_us=*/100);
  for (uint64_t n = 1002; n <= 1020; ++n) {
    EXPECT_EQ(DispatchesOf(n), (std::vector<int32_t>{0, 1})) << n;
    EXPECT_EQ(FinalCount(n), 1) << n;
    EXPECT_EQ(FinalOf(n)->engine_id, 1) << n;
    EXPECT_EQ(RetriesOf(n).size(), 0u) << "no retry is used";
  }
  EXPECT_EQ(CountOf(Action::Kind::kReturned, 1002), 1);
  EXPECT_EQ(FinishOn(0, 1001, true), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(FinalCount(1001), 1);
}

TEST_F(TakeBack, ATaskAlreadyStartedNeverMoves) {
  Tick(0.05);
  ASSERT_FALSE(TakenBack().empty());
  // The engine had started 1001: it gives back only the others, and
  // answers 1001 as usual later.
  for (uint64_t n = 1002; n <= 1020; ++n) NotRun(n);
  RunAll(1, /*gap_us=*/100);
  Tick(1);
  EXPECT_EQ(DispatchesOf(1001), (std::vector<int32_t>{0}));
  EXPECT_TRUE(Running(1001));
  EXPECT_EQ(FinishOn(0, 1001, true), SchedulerCore::Finish::kAccepted);
  EXPECT_EQ(FinalOf(1001)->engine_id, 0);
  const std::vector<uint64_t> asked = TakenBack();
  EXPECT_EQ(std::count(asked.begin(), asked.end(), 1001u), 1)
      << "asked once, not again while it runs";
}

TEST_F(TakeBack, NothingIsAskedBackWhileNoEngineIsIdle) {
  SubmitRange(2001, 2001);
  ASSERT_EQ(Held(1), 1);  // engine 1 runs a task: no engine is idle
  Tick(0.05);
  EXPECT_TRUE(TakenBack().empty());
  RunAll(1, /*gap_us=*/100);  // now it is
  Tick(0.01);
  EXPECT_EQ(TakenBack().size(), 20u);
}

TEST_F(TakeBack, AnEngineLostWhileATakeBackIsInFlightLosesNothingAndRunsNothingTwice) {
  Tick(0.05);
  ASSERT_EQ(TakenBack().size(), 20u);
  // Two answers came ("not run"); then the engine is lost before the rest.
  NotRun(1002);
  NotRun(1003);
  RemoveEngine(0);
  RunAll(1, /*gap_us=*/100);
  for (uint64_t n = 1001; n <= 1020; ++n) {
    EXPECT_EQ(FinalCount(n), 1) << n;
  }
  // Given back: run on engine 1, once. Lost with the engine (it may have
  // started them): failed as any task on a lost engine without retries.
  EXPECT_EQ(DispatchesOf(1002), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(FinalOf(1002)->kind, Action::Kind::kDeliver);
  for (uint64_t n : {1001u, 1004u, 1020u}) {
    EXPECT_EQ(DispatchesOf(n), (std::vector<int32_t>{0})) << n;
    EXPECT_EQ(ErrorOf(n), ErrorType::kEngineError) << n;
  }
  // A late "not run" of the lost engine changes nothing.
  EXPECT_EQ(core().TaskNotRun(slots_.at(0), Id(1004)), SchedulerCore::Finish::kLate);
}

TEST_F(TakeBack, TheStuckEngineGetsAQueueAgainOnceItAnswers) {
  Tick(0.05);
  for (uint64_t n = 1002; n <= 1020; ++n) NotRun(n);
  EXPECT_EQ(core().HwmOf(slots_.at(0)), 1u);
  SubmitRange(4001, 4300);
  clock_.AdvanceSeconds(2);
  FinishOn(0, 1001, true);  // the long one ends
  RunAll(0, /*gap_us=*/10, /*limit=*/250);
  EXPECT_GT(core().HwmOf(slots_.at(0)), 8u) << "fast tasks deepen it again";
}

}  // namespace
}  // namespace ztask::scheduler
