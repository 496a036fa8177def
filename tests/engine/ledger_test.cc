// The engine's ledger (engine/ledger.h): which tasks are queued, the kept
// replies, the send-ahead gate and the batching of replies, with the time
// given by the test.
#include "engine/ledger.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace ztask::engine {
namespace {

TaskId Id(uint64_t n) { return TaskId{1, n}; }

// A reply's frames: its task's number, so the tests can tell them apart.
std::vector<std::string> Frames(uint64_t n, size_t bytes = 8) {
  std::string body = std::to_string(n);
  body.resize(std::max(bytes, body.size()), '.');
  return {body};
}

uint64_t NumberOf(const std::vector<std::string>& frames) {
  return std::stoull(frames[0].substr(0, frames[0].find('.')));
}

std::vector<uint64_t> Numbers(const std::vector<Ledger::Frames>& batch) {
  std::vector<uint64_t> out;
  for (const auto& r : batch) out.push_back(NumberOf(*r));
  return out;
}

TEST(Ledger, ATaskSentAgainWhileQueuedIsTakenOnce) {
  Ledger ledger;
  EXPECT_EQ(ledger.Arrive(Id(1), 1, 0), Ledger::Arrival::kQueued);
  EXPECT_EQ(ledger.Arrive(Id(1), 1, 0), Ledger::Arrival::kDuplicate);
  EXPECT_EQ(ledger.Arrive(Id(1), 2, 0), Ledger::Arrival::kDuplicate)
      << "queued here: whatever the attempt, it runs once";
  EXPECT_EQ(ledger.queued(), 1u);
  ledger.Dequeued(Id(1));
  EXPECT_EQ(ledger.queued(), 0u);
  EXPECT_FALSE(ledger.has_unsent()) << "a duplicate makes no reply";
}

TEST(Ledger, ATaskThatRanHereGetsItsReplyAgainNotASecondRun) {
  Ledger ledger;
  ASSERT_EQ(ledger.Arrive(Id(1), 1, 0), Ledger::Arrival::kQueued);
  ledger.Dequeued(Id(1));
  ledger.Reply(Id(1), 1, true, Frames(1), 10);
  EXPECT_EQ(Numbers(ledger.TakeUnsent()), std::vector<uint64_t>{1});
  // A restarted scheduler that did not hear sends it again.
  EXPECT_EQ(ledger.Arrive(Id(1), 1, 20), Ledger::Arrival::kAnswered);
  EXPECT_EQ(ledger.queued(), 0u);
  EXPECT_EQ(Numbers(ledger.TakeUnsent()), std::vector<uint64_t>{1});
  // An earlier attempt too; a later attempt (it failed over, came back) runs.
  EXPECT_EQ(ledger.Arrive(Id(1), 0, 30), Ledger::Arrival::kAnswered);
  (void)ledger.TakeUnsent();
  EXPECT_EQ(ledger.Arrive(Id(1), 2, 40), Ledger::Arrival::kQueued);
}

TEST(Ledger, ATaskSentAheadRunsOnlyOnceTheOneBeforeItSucceededHere) {
  Ledger ledger;
  EXPECT_TRUE(ledger.MayRun(std::nullopt));
  EXPECT_FALSE(ledger.MayRun(Id(1))) << "no reply yet";
  ledger.Reply(Id(1), 1, true, Frames(1), 0);
  EXPECT_TRUE(ledger.MayRun(Id(1)));
  ledger.Reply(Id(2), 1, false, Frames(2), 0);
  EXPECT_FALSE(ledger.MayRun(Id(2))) << "it failed (or was not run)";
  // The latest reply of an id counts: a retry that succeeded opens the gate.
  ledger.Reply(Id(2), 2, true, Frames(2), 0);
  EXPECT_TRUE(ledger.MayRun(Id(2)));
  ledger.Reply(Id(1), 2, false, Frames(1), 0);
  EXPECT_FALSE(ledger.MayRun(Id(1)));
}

TEST(Ledger, KeptRepliesAreBoundedByCountAndBytesTheLatestAlwaysKept) {
  Ledger by_count(/*keep_replies=*/3, /*keep_bytes=*/1 << 20);
  for (uint64_t n = 1; n <= 5; ++n) by_count.Reply(Id(n), 1, true, Frames(n), 0);
  EXPECT_EQ(by_count.kept(), 3u);
  EXPECT_FALSE(by_count.MayRun(Id(2))) << "let go of: a task sent behind it is not run";
  EXPECT_TRUE(by_count.MayRun(Id(3)));
  (void)by_count.TakeUnsent();
  EXPECT_EQ(by_count.ResendAll(0), 3u);
  EXPECT_EQ(Numbers(by_count.TakeUnsent()), (std::vector<uint64_t>{3, 4, 5}));

  Ledger by_bytes(/*keep_replies=*/100, /*keep_bytes=*/250);
  for (uint64_t n = 1; n <= 4; ++n) by_bytes.Reply(Id(n), 1, true, Frames(n, 100), 0);
  EXPECT_EQ(by_bytes.kept(), 2u);
  by_bytes.Reply(Id(9), 1, true, Frames(9, 1000), 0);
  EXPECT_EQ(by_bytes.kept(), 1u) << "one reply over the bytes is kept alone";
  EXPECT_TRUE(by_bytes.MayRun(Id(9)));
}

TEST(Ledger, RepliesWaitForCompanyOnlyBriefly) {
  Ledger ledger;
  EXPECT_FALSE(ledger.FlushDue(0)) << "nothing waits";
  ledger.Reply(Id(1), 1, true, Frames(1), 1000);
  EXPECT_EQ(ledger.unsent_since_us(), 1000);
  EXPECT_FALSE(ledger.FlushDue(1000 + Ledger::kFlushAfterUs - 1));
  EXPECT_TRUE(ledger.FlushDue(1000 + Ledger::kFlushAfterUs));
  for (uint64_t n = 2; n <= Ledger::kFlushReplies; ++n)
    ledger.Reply(Id(n), 1, true, Frames(n), 1000);
  EXPECT_TRUE(ledger.FlushDue(1000)) << "enough wait";
  (void)ledger.TakeUnsent();
  EXPECT_FALSE(ledger.has_unsent());
  EXPECT_FALSE(ledger.FlushDue(1 << 30));
}

TEST(Ledger, ABatchStaysWithinTheProtocolsLimitsInOrder) {
  Ledger ledger(/*keep_replies=*/1000, /*keep_bytes=*/1 << 30, /*batch_replies=*/4,
                /*batch_bytes=*/300);
  for (uint64_t n = 1; n <= 3; ++n) ledger.Reply(Id(n), 1, true, Frames(n), 0);
  EXPECT_FALSE(ledger.BatchFull());
  ledger.Reply(Id(4), 1, true, Frames(4), 0);
  EXPECT_TRUE(ledger.BatchFull()) << "four replies";
  for (uint64_t n = 5; n <= 10; ++n) ledger.Reply(Id(n), 1, true, Frames(n, 100), 0);
  ledger.Reply(Id(11), 1, true, Frames(11, 1000), 0);
  std::vector<uint64_t> all;
  while (ledger.has_unsent()) {
    auto batch = ledger.TakeUnsent();
    ASSERT_FALSE(batch.empty());
    EXPECT_LE(batch.size(), 4u);
    size_t bytes = 0;
    for (const auto& r : batch) bytes += (*r)[0].size();
    EXPECT_TRUE(bytes <= 300 || batch.size() == 1) << "over the bytes only alone";
    for (uint64_t n : Numbers(batch)) all.push_back(n);
  }
  EXPECT_EQ(all, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_FALSE(ledger.BatchFull());
}

// Random arrivals, resends and replies: while its reply is kept (here every
// reply is), every task runs at most once per attempt;
// every reply given goes out, in order.
TEST(Ledger, RandomTrafficRunsEachAttemptOnceAndLosesNoReply) {
  std::mt19937_64 random(7);
  Ledger ledger(/*keep_replies=*/100000, /*keep_bytes=*/1 << 20, /*batch_replies=*/16,
                /*batch_bytes=*/1 << 20);
  std::vector<uint64_t> queue, given, sent;
  std::map<std::pair<uint64_t, int32_t>, int> runs;
  std::map<uint64_t, int32_t> attempt;
  int64_t now = 0;
  for (int step = 0; step < 20000; ++step) {
    now += 7;
    const uint64_t n = 1 + random() % 200;
    switch (random() % 4) {
      case 0:
      case 1: {  // the scheduler sends a task (again, perhaps, or a retry)
        const int32_t a = attempt[n] + static_cast<int32_t>(random() % 2);
        if (ledger.Arrive(Id(n), a, now) == Ledger::Arrival::kQueued) {
          queue.push_back(n);
          attempt[n] = a;
        }
        break;
      }
      case 2:  // the first queued task runs and is answered
        if (!queue.empty()) {
          const uint64_t t = queue.front();
          queue.erase(queue.begin());
          ledger.Dequeued(Id(t));
          ++runs[{t, attempt[t]}];
          ledger.Reply(Id(t), attempt[t], true, Frames(t), now);
          given.push_back(t);
        }
        break;
      default:  // a batch goes
        for (uint64_t t : Numbers(ledger.TakeUnsent())) sent.push_back(t);
    }
  }
  for (const auto& [key, count] : runs) {
    EXPECT_EQ(count, 1) << "task " << key.first << " attempt " << key.second << " ran twice";
  }
  while (ledger.has_unsent()) {
    for (uint64_t t : Numbers(ledger.TakeUnsent())) sent.push_back(t);
  }
  // What was sent holds every reply given, in order (resent ones between).
  size_t at = 0;
  for (uint64_t t : sent) {
    if (at < given.size() && given[at] == t) ++at;
  }
  EXPECT_EQ(at, given.size());
}

}  // namespace
}  // namespace ztask::engine
