// What the hub tells a dashboard of its finished tasks (hub/activity.h):
// the newest of them after a position, or, when a reader asks for a sample,
// every failure and the rest evenly spaced, with what was left out counted.
#include "hub/activity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace ztask::hub {
namespace {

TaskId Id(uint64_t n) { return TaskId{7, n}; }

// Tasks 1..n finished in order; those in `failed` failed.
Activity FinishedInOrder(uint64_t n, const std::set<uint64_t>& failed) {
  Activity activity;
  for (uint64_t i = 1; i <= n; ++i) {
    protocol::TaskRecord r;
    r.id = Id(i);
    r.state = failed.count(i) ? TaskState::kError : TaskState::kOk;
    activity.Finished(r);
  }
  return activity;
}

std::vector<uint64_t> Numbers(const protocol::StatsReply& reply) {
  std::vector<uint64_t> out;
  for (const auto& e : reply.finished) out.push_back(e.id.lo);
  return out;
}

protocol::StatsReply Ask(const Activity& activity, int64_t after, int32_t limit, bool sample) {
  protocol::StatsReply reply;
  activity.Fill({after, limit, sample ? std::optional(true) : std::nullopt}, 0, &reply);
  return reply;
}

TEST(ActivityFeed, WithoutASampleAReaderGetsTheNewestAndTheCountOfTheRest) {
  const Activity activity = FinishedInOrder(1000, {5});
  const auto reply = Ask(activity, 0, 10, false);
  EXPECT_EQ(reply.feed, 1000);
  EXPECT_EQ(Numbers(reply),
            (std::vector<uint64_t>{991, 992, 993, 994, 995, 996, 997, 998, 999, 1000}));
  EXPECT_EQ(reply.missed, 990);
}

TEST(ActivityFeed, ASampleHoldsEveryFailureAndTheRestEvenlySpacedInOrder) {
  const std::set<uint64_t> failed = {3, 17, 402, 403, 999};
  const Activity activity = FinishedInOrder(1000, failed);
  const auto reply = Ask(activity, 100, 20, true);
  const auto got = Numbers(reply);
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(reply.missed, 900 - 20);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size()) << "no task twice";
  // The failures after position 100, not those before it.
  for (uint64_t f : {402u, 403u, 999u}) EXPECT_EQ(std::count(got.begin(), got.end(), f), 1) << f;
  for (uint64_t f : {3u, 17u}) EXPECT_EQ(std::count(got.begin(), got.end(), f), 0) << f;
  // The others spread over the whole range, the newest last: no gap wider
  // than twice the even spacing (900 / 17 picks).
  std::vector<uint64_t> ok;
  for (uint64_t n : got) {
    if (!failed.count(n)) ok.push_back(n);
  }
  ASSERT_EQ(ok.size(), 17u);
  EXPECT_EQ(ok.back(), 1000u);
  EXPECT_LE(ok.front(), 100u + 2 * 900 / 17);
  for (size_t i = 1; i < ok.size(); ++i) EXPECT_LE(ok[i] - ok[i - 1], 2u * 900 / 17) << i;
}

TEST(ActivityFeed, ABurstOfFailuresPastTheLimitKeepsTheNewestOfThem) {
  std::set<uint64_t> failed;
  for (uint64_t i = 1; i <= 50; ++i) failed.insert(i);
  const auto reply = Ask(FinishedInOrder(60, failed), 0, 8, true);
  EXPECT_EQ(Numbers(reply), (std::vector<uint64_t>{43, 44, 45, 46, 47, 48, 49, 50}));
  EXPECT_EQ(reply.missed, 52);
}

TEST(ActivityFeed, ASampleWithinTheLimitIsEveryTask) {
  const auto reply = Ask(FinishedInOrder(30, {2}), 20, 10, true);
  EXPECT_EQ(Numbers(reply), (std::vector<uint64_t>{21, 22, 23, 24, 25, 26, 27, 28, 29, 30}));
  EXPECT_EQ(reply.missed, 0);
}

TEST(ActivityFeed, ASampleCountsTasksThatLeftTheFeedAsMissed) {
  const uint64_t n = Activity::kFeedSize + 100;
  const auto reply = Ask(FinishedInOrder(n, {}), 0, 50, true);
  EXPECT_EQ(reply.finished.size(), 50u);
  EXPECT_EQ(reply.missed, static_cast<int64_t>(n) - 50);
  EXPECT_GT(reply.finished.front().id.lo, 100u) << "only what the feed still holds";
  EXPECT_EQ(reply.finished.back().id.lo, n);
}

}  // namespace
}  // namespace ztask::hub
