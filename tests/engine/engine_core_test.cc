// The engine's rules without sockets (engine/engine_core.h, engine/fence.h):
// tasks taken once, run in order, answered once; send-ahead's gate; the
// fence; when replies go. The time is a fake clock's.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/engine/engine_core_fixture.h"

namespace ztask::engine {
namespace {

using Ids = std::vector<uint64_t>;

TEST_F(EngineCoreTest, TasksRunOneAtATimeInTheOrderTheyCame) {
  Arrive(TaskJob(1));
  Arrive(TaskJob(2));
  EXPECT_EQ(Next(), 1u);
  Finish(1);
  EXPECT_EQ(Next(), 2u);
  Finish(2);
  EXPECT_EQ(Next(), std::nullopt);
  EXPECT_EQ(SentIds(), (std::vector<uint64_t>{1, 2}));
}

TEST_F(EngineCoreTest, ATaskSentAgainWhileQueuedRunsOnce) {
  Arrive(TaskJob(1));
  Arrive(TaskJob(1));
  Arrive(TaskJob(1).Attempt(2));
  EXPECT_EQ(Next(), 1u);
  Finish(1);
  EXPECT_EQ(Next(), std::nullopt);
  EXPECT_EQ(SentIds(), std::vector<uint64_t>{1}) << "one run, one reply";
}

TEST_F(EngineCoreTest, ATaskThatRanHereGetsItsReplyAgainNotASecondRun) {
  Arrive(TaskJob(1));
  ASSERT_EQ(Next(), 1u);
  Finish(1);
  ASSERT_EQ(SentIds(), std::vector<uint64_t>{1});
  // A restarted scheduler that did not hear sends it again.
  Arrive(TaskJob(1));
  EXPECT_FALSE(core().HasQueued());
  EXPECT_EQ(Next(), std::nullopt);
  EXPECT_EQ(SentIds(), std::vector<uint64_t>{1});
  // A later attempt (it failed over and came back) runs.
  Arrive(TaskJob(1).Attempt(2));
  EXPECT_EQ(Next(), 1u);
}

TEST_F(EngineCoreTest, ATaskSentAheadRunsOnlyBehindASuccessHere) {
  Arrive(TaskJob(1));
  Arrive(TaskJob(2).After(1));
  Arrive(TaskJob(3));
  Arrive(TaskJob(4).After(3));
  ASSERT_EQ(Next(), 1u);
  Finish(1, /*ok=*/true);
  EXPECT_EQ(Next(), 2u) << "its dependency succeeded here";
  Finish(2);
  ASSERT_EQ(Next(), 3u);
  Finish(3, /*ok=*/false);
  EXPECT_EQ(Next(), std::nullopt) << "behind a failure: answered, not run";
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[3].id, Id(4));
  EXPECT_TRUE(sent[3].meta.not_run);
  EXPECT_FALSE(sent[3].meta.ok);
  EXPECT_EQ(sent[3].meta.engine_id, 7);
}

TEST_F(EngineCoreTest, ATaskSentAheadBehindATaskNeverSeenHereIsNotRun) {
  Arrive(TaskJob(2).After(1));
  EXPECT_EQ(Next(), std::nullopt);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].meta.not_run);
}

TEST_F(EngineCoreTest, TasksAskedBackThatHaveNotStartedAreAnsweredNotRun) {
  Arrive(TaskJob(1));
  Arrive(TaskJob(2));
  Arrive(TaskJob(3));
  Arrive(TaskJob(4));
  ASSERT_EQ(Next(), 1u);  // started: it stays
  // 1 started, 2 and 4 queued, 9 never held here.
  EXPECT_EQ(core().TakeBack({Id(1), Id(2), Id(4), Id(9)}), 2u);
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].id, Id(2));
  EXPECT_EQ(sent[1].id, Id(4));
  EXPECT_TRUE(sent[0].meta.not_run && sent[1].meta.not_run);
  EXPECT_EQ(core().Held(), (std::vector<TaskId>{Id(1), Id(3)}));
  Finish(1);
  EXPECT_EQ(Next(), 3u) << "what was not asked back runs in its order";
  Finish(3);
  EXPECT_EQ(Next(), std::nullopt);
  EXPECT_EQ(SentIds(), (std::vector<uint64_t>{1, 3})) << "one answer each";
  // Asked back again (late): nothing is held, nothing changes.
  EXPECT_EQ(core().TakeBack({Id(2), Id(3)}), 0u);
  EXPECT_TRUE(SentIds().empty());
}

TEST_F(EngineCoreTest, ATaskAskingMoreThanTheEngineHasIsUnsatisfiable) {
  Make(/*slots=*/2, {{"gpus", 1}});
  Arrive(TaskJob(1).Slots(3));
  Arrive(TaskJob(2).Uses("gpus", 2));
  Arrive(TaskJob(3).Uses("gpus", 1));
  EXPECT_EQ(StartWhatFits(), Ids{3u});
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& r : sent) EXPECT_EQ(r.meta.error_type, ErrorType::kUnsatisfiable);
}

TEST_F(EngineCoreTest, NoTaskOvertakesTheFirstWaitingForRoom) {
  Make(/*slots=*/2);
  Arrive(TaskJob(1));
  Arrive(TaskJob(2).Slots(2));
  Arrive(TaskJob(3));
  EXPECT_EQ(StartWhatFits(), Ids{1u});
  EXPECT_EQ(StartWhatFits(), Ids{}) << "2 waits for both slots; 3 waits behind it";
  Finish(1);
  EXPECT_EQ(StartWhatFits(), Ids{2u});
  Finish(2);
  EXPECT_EQ(StartWhatFits(), Ids{3u});
  EXPECT_EQ(core().capacity().free_slots(), 1);
}

TEST_F(EngineCoreTest, HeldTasksAreTheRunningAndTheQueued) {
  Make(/*slots=*/2);
  Arrive(TaskJob(1));
  Arrive(TaskJob(2).Slots(2));
  ASSERT_EQ(StartWhatFits(), Ids{1u});
  auto held = core().Held();
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, (std::vector<TaskId>{Id(1), Id(2)}));
}

TEST_F(EngineCoreTest, AReconnectionSendsTheLatestRepliesAgain) {
  Arrive(TaskJob(1));
  ASSERT_EQ(Next(), 1u);
  Finish(1);
  ASSERT_EQ(SentIds(), std::vector<uint64_t>{1});
  EXPECT_EQ(core().ResendReplies(), 1u);
  EXPECT_EQ(SentIds(), std::vector<uint64_t>{1});
}

// ---- the fence ----

TEST_F(EngineCoreTest, NothingStartsOnceTheHubsWindowPassedUnanswered) {
  Arrive(TaskJob(1));
  clock().AdvanceMicros(kWindowUs + 1);
  EXPECT_FALSE(core().MayStart());
  EXPECT_EQ(Next(), std::nullopt);
  EXPECT_TRUE(core().HasQueued()) << "held, not dropped: the hub may not have removed it";
}

TEST_F(EngineCoreTest, TheWindowCountsFromWhenTheAnsweredHeartbeatLeft) {
  Fence& fence = core().fence();
  clock().AdvanceMicros(1'000'000);
  fence.BeatSent(/*date_us=*/200, clock().now_us);
  // Its answer comes late (the engine was paused): the window counts from
  // when the heartbeat left, not from now.
  clock().AdvanceMicros(1'500'000);
  EXPECT_FALSE(fence.BeatAnswered(200, clock().now_us)) << "it was not fenced";
  clock().AdvanceMicros(1'600'000);
  EXPECT_TRUE(fence.Fenced(clock().now_us)) << "3.1 s since the answered heartbeat left";
  fence.BeatSent(300, clock().now_us);
  EXPECT_FALSE(fence.BeatAnswered(999, clock().now_us)) << "no heartbeat of that date";
  EXPECT_TRUE(fence.BeatAnswered(300, clock().now_us)) << "an answer lifts the fence";
  EXPECT_TRUE(core().MayStart());
}

TEST_F(EngineCoreTest, ARefusalWhileFencedDropsWhatIsHeldAsNotRun) {
  Arrive(TaskJob(1));
  Arrive(TaskJob(2));
  clock().AdvanceMicros(kWindowUs + 1);
  EXPECT_EQ(core().fence().Refused(/*parent_date_us=*/500, clock().now_us),
            Fence::Refusal::kRegisterAndDrop);
  EXPECT_FALSE(core().MayStart()) << "nothing starts until registered again and dropped";
  core().fence().Registered(600, clock().now_us, kWindowUs);
  EXPECT_EQ(core().DropIfRemoved(), std::optional<size_t>(2));
  const auto sent = Sent();
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& r : sent) EXPECT_TRUE(r.meta.not_run);
  EXPECT_TRUE(core().MayStart());
  EXPECT_EQ(core().DropIfRemoved(), std::nullopt) << "dropped once";
  EXPECT_TRUE(core().Held().empty());
}

TEST_F(EngineCoreTest, ARemovalFoundWhileTheLastOneIsDroppedIsNotLost) {
  Fence& fence = core().fence();
  clock().AdvanceMicros(kWindowUs + 1);
  ASSERT_EQ(fence.Refused(500, clock().now_us), Fence::Refusal::kRegisterAndDrop);
  const uint64_t seen = fence.removals();  // the dropping thread reads...
  fence.Registered(600, clock().now_us, kWindowUs);
  clock().AdvanceMicros(kWindowUs + 1);
  // ...and before it says it dropped, the hub removes the engine again.
  ASSERT_EQ(fence.Refused(700, clock().now_us), Fence::Refusal::kRegisterAndDrop);
  fence.Dropped(seen);
  EXPECT_TRUE(fence.drop_held()) << "the second removal still asks for its drop";
  fence.Dropped(fence.removals());
  EXPECT_FALSE(fence.drop_held());
}

TEST_F(EngineCoreTest, ARefusalWithinTheWindowKeepsWhatIsHeld) {
  Arrive(TaskJob(1));
  EXPECT_EQ(core().fence().Refused(500, clock().now_us), Fence::Refusal::kRegister);
  EXPECT_EQ(core().DropIfRemoved(), std::nullopt);
  EXPECT_EQ(Next(), 1u);
}

TEST_F(EngineCoreTest, ARefusalOfAHeartbeatFromBeforeTheRegistrationIsStale) {
  clock().AdvanceMicros(kWindowUs + 1);
  EXPECT_EQ(core().fence().Refused(/*parent_date_us=*/100, clock().now_us),
            Fence::Refusal::kStale)
      << "dated at or before the latest registration: it says nothing of this life";
  EXPECT_FALSE(core().fence().drop_held());
}

// A restarted hub asks for its base period at registration; an answer its
// predecessor sent to an earlier heartbeat, with the period it had
// stretched, must not lengthen the window past the new hub's wait.
TEST_F(EngineCoreTest, OnlyHeartbeatsSinceTheLatestRegistrationSpeakForTheHub) {
  Fence& fence = core().fence();
  EXPECT_TRUE(fence.SinceRegistration(200));
  fence.Registered(600, clock().now_us, kWindowUs);
  EXPECT_FALSE(fence.SinceRegistration(200)) << "sent to the hub before it restarted";
  EXPECT_FALSE(fence.SinceRegistration(600));
  EXPECT_TRUE(fence.SinceRegistration(700));
}

// ---- when replies go ----

TEST_F(EngineCoreTest, RepliesAreDueWhenEnoughWaitOrTheOldestWaited) {
  for (uint64_t n = 1; n <= Ledger::kFlushReplies + 2; ++n) Arrive(TaskJob(n));
  ASSERT_EQ(Next(), 1u);
  EXPECT_FALSE(core().FlushDue()) << "nothing waits";
  const int64_t first_us = clock().now_us;
  Finish(1);
  EXPECT_FALSE(core().FlushDue()) << "a fresh reply waits for the next ones";
  EXPECT_EQ(core().FlushDueAtUs(), first_us + Ledger::kFlushAfterUs);
  clock().AdvanceMicros(Ledger::kFlushAfterUs);
  EXPECT_TRUE(core().FlushDue()) << "the oldest waited long enough";
  Sent();
  for (uint64_t n = 2; n < Ledger::kFlushReplies + 1; ++n) {
    ASSERT_EQ(Next(), n);
    Finish(n);
  }
  EXPECT_FALSE(core().FlushDue());
  ASSERT_EQ(Next(), Ledger::kFlushReplies + 1);
  Finish(Ledger::kFlushReplies + 1);
  EXPECT_TRUE(core().FlushDue()) << "enough of them wait";
}

TEST_F(EngineCoreTest, AFullBatchMustGo) {
  for (uint64_t n = 1; n <= Ledger::kBatchReplies; ++n) {
    Arrive(TaskJob(n));
    ASSERT_EQ(Next(), n);
    Finish(n);
  }
  EXPECT_TRUE(core().MustFlush());
  EXPECT_EQ(Sent().size(), Ledger::kBatchReplies);
  EXPECT_FALSE(core().MustFlush());
}

TEST_F(EngineCoreTest, EveryTaskTakenGetsExactlyOneReply) {
  Make(/*slots=*/3, {{"gpus", 2}});
  std::vector<uint64_t> expected;
  for (uint64_t n = 1; n <= 60; ++n) {
    TaskJob t(n);
    if (n % 7 == 0) t.After(n - 1);
    if (n % 5 == 0) t.Slots(static_cast<int32_t>(1 + n % 4));
    if (n % 3 == 0) t.Uses("gpus", static_cast<int64_t>(n % 4));
    Arrive(t);
    Arrive(t);
    expected.push_back(n);
  }
  for (int round = 0; round < 200 && (core().HasQueued() || !running_.empty()); ++round) {
    StartWhatFits();
    if (!running_.empty()) Finish(running_.front().job.header.id.lo, round % 4 != 0);
  }
  std::vector<uint64_t> ids = SentIds();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, expected);
}

}  // namespace
}  // namespace ztask::engine
