#include "protocol/replay_guard.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "protocol/codec.h"

namespace ztask::protocol {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kNow = int64_t{1'800'000'000} * kSecond;

Header At(const std::string& session, int64_t date_us) {
  return {TaskId::Random(), MsgType::kTaskRequest, session, date_us};
}

TEST(ReplayGuard, AdmitsEachSessionsMessagesInOrder) {
  ReplayGuard guard;
  EXPECT_TRUE(guard.Admit(At("a", kNow), kNow).ok());
  EXPECT_TRUE(guard.Admit(At("b", kNow - 5), kNow).ok());
  EXPECT_TRUE(guard.Admit(At("a", kNow + 1), kNow).ok());
  EXPECT_TRUE(guard.Admit(At("b", kNow), kNow).ok());
}

TEST(ReplayGuard, RefusesTheSameMessageTwice) {
  ReplayGuard guard;
  const Header h = At("client", kNow);
  ASSERT_TRUE(guard.Admit(h, kNow).ok());
  Status again = guard.Admit(h, kNow + kSecond);
  EXPECT_EQ(again.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(again.message().find("replayed"), std::string::npos);
}

TEST(ReplayGuard, RefusesAnOlderMessageOfAKnownSession) {
  ReplayGuard guard;
  ASSERT_TRUE(guard.Admit(At("client", kNow), kNow).ok());
  EXPECT_FALSE(guard.Admit(At("client", kNow - 1), kNow).ok());
}

TEST(ReplayGuard, RefusesMessagesDatedOutsideTheWindow) {
  ReplayGuard guard({.window_us = 10 * kSecond});
  EXPECT_FALSE(guard.Admit(At("old", kNow - 11 * kSecond), kNow).ok());
  EXPECT_FALSE(guard.Admit(At("future", kNow + 11 * kSecond), kNow).ok());
  EXPECT_TRUE(guard.Admit(At("fine", kNow - 9 * kSecond), kNow).ok());
}

TEST(ReplayGuard, WithoutAClockCheckOnlyOrderCounts) {
  ReplayGuard guard({.window_us = 0});
  EXPECT_TRUE(guard.Admit(At("scheduler", kNow - 3600 * kSecond), kNow).ok());
  EXPECT_FALSE(guard.Admit(At("scheduler", kNow - 3600 * kSecond), kNow).ok());
}

TEST(ReplayGuard, ForgetsOnlySessionsIdlePastTheWindowAndOldReplaysStayRefused) {
  ReplayGuard guard({.window_us = 10 * kSecond, .max_sessions = 100});
  const Header early = At("early", kNow);
  ASSERT_TRUE(guard.Admit(early, kNow).ok());
  for (int i = 0; i < 1000; ++i) {
    // 20 s later "early" has been idle past the window; each batch of 99
    // newcomers ages out before the next comes.
    const int64_t at = kNow + 20 * kSecond + (i / 99) * 11 * kSecond;
    ASSERT_TRUE(guard.Admit(At("s" + std::to_string(i), at), at).ok()) << i;
  }
  EXPECT_LE(guard.sessions(), 100u);
  // "early" is forgotten, but its message is now too old to be admitted.
  EXPECT_FALSE(guard.Admit(early, kNow + 20 * kSecond).ok());
}

TEST(ReplayGuard, NeverForgetsASessionInsideTheWindow) {
  ReplayGuard guard({.window_us = 10 * kSecond, .max_sessions = 100});
  std::vector<Header> first;
  for (int i = 0; i < 100; ++i) {
    first.push_back(At("s" + std::to_string(i), kNow + i));
    ASSERT_TRUE(guard.Admit(first.back(), kNow + i).ok());
  }
  // Full, every session young: a newcomer is refused, none is evicted.
  Status newcomer = guard.Admit(At("new", kNow + kSecond), kNow + kSecond);
  EXPECT_EQ(newcomer.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(newcomer.message().find("too many sessions"), std::string::npos);
  EXPECT_EQ(guard.sessions(), 100u);
  for (const Header& h : first) EXPECT_FALSE(guard.Admit(h, kNow + kSecond).ok());
  // Known sessions go on.
  EXPECT_TRUE(guard.Admit(At("s0", kNow + 2 * kSecond), kNow + 2 * kSecond).ok());
  // Once the others have been idle past the window, the newcomer gets in.
  EXPECT_TRUE(guard.Admit(At("new", kNow + 11 * kSecond), kNow + 11 * kSecond).ok());
}

TEST(ReplayGuard, WithoutAWindowNothingIsForgotten) {
  ReplayGuard guard({.window_us = 0, .max_sessions = 2});
  const Header a = At("a", kNow), b = At("b", kNow);
  ASSERT_TRUE(guard.Admit(a, kNow).ok());
  ASSERT_TRUE(guard.Admit(b, kNow).ok());
  EXPECT_FALSE(guard.Admit(At("c", kNow), kNow + 3600 * kSecond).ok());
  EXPECT_FALSE(guard.Admit(a, kNow + 3600 * kSecond).ok());
}

TEST(NowMicros, StrictlyIncreases) {
  int64_t last = base::WallMicros();
  for (int i = 0; i < 100000; ++i) {
    const int64_t now = base::WallMicros();
    ASSERT_GT(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace ztask::protocol
