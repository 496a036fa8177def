#include "base/clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

namespace ztask::base {
namespace {

TEST(Clock, MonotonicNeverGoesBack) {
  int64_t last = MonotonicMicros();
  for (int i = 0; i < 100000; ++i) {
    const int64_t now = MonotonicMicros();
    ASSERT_GE(now, last);
    last = now;
  }
}

TEST(Clock, WallMicrosStrictlyIncreaseAcrossThreads) {
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (auto& out : seen) {
    threads.emplace_back([&out] {
      for (int i = 0; i < 20000; ++i) out.push_back(WallMicros());
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& out : seen) {
    for (size_t i = 1; i < out.size(); ++i) ASSERT_LT(out[i - 1], out[i]);
    all.insert(all.end(), out.begin(), out.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "no two calls share a date";
}

TEST(Deadline, ExpiresAfterItsTimeAndNeverWhenNegative) {
  const Deadline soon(std::chrono::milliseconds(20));
  EXPECT_FALSE(soon.expired());
  EXPECT_LE(soon.remaining(), std::chrono::milliseconds(20));
  EXPECT_TRUE(WaitUntil([&] { return soon.expired(); }, std::chrono::seconds(5)));
  EXPECT_EQ(soon.remaining(), std::chrono::milliseconds(0));
  const Deadline never(std::chrono::microseconds(-1));
  EXPECT_TRUE(never.never());
  EXPECT_FALSE(never.expired());
  EXPECT_FALSE(Deadline::Never().expired());
}

TEST(WaitUntil, ReturnsFalseWhenTheConditionNeverHolds) {
  const int64_t start = MonotonicMicros();
  EXPECT_FALSE(WaitUntil([] { return false; }, std::chrono::milliseconds(30)));
  EXPECT_GE(MonotonicMicros() - start, 30000);
  int calls = 0;
  EXPECT_TRUE(WaitUntil([&] { return ++calls == 3; }));
  EXPECT_EQ(calls, 3);
}

TEST(Clock, ADurationFlagOfAnySizeIsMicrosecondsThatCannotOverflowAClock) {
  EXPECT_EQ(DurationMicros(0.05), 50'000);
  EXPECT_EQ(DurationMicros(10), 10'000'000);
  EXPECT_EQ(DurationMicros(0), 0);
  EXPECT_EQ(DurationMicros(-3), 0);
  EXPECT_EQ(DurationMicros(std::numeric_limits<double>::quiet_NaN()), 0);
  const int64_t most = DurationMicros(100.0 * 365 * 24 * 3600);
  EXPECT_EQ(DurationMicros(1e300), most);
  EXPECT_EQ(DurationMicros(std::numeric_limits<double>::infinity()), most);
  // A clock reading plus the largest still fits.
  EXPECT_GT(MonotonicMicros() + most, MonotonicMicros());
}

}  // namespace
}  // namespace ztask::base
