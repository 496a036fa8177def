#include "ztask/task_id.h"

#include <gtest/gtest.h>

#include <unordered_set>

namespace ztask {
namespace {

TEST(TaskId, HexRoundTripsAnd32Digits) {
  TaskId id = TaskId::Random();
  const std::string hex = id.ToHex();
  EXPECT_EQ(hex.size(), 32u);
  auto back = TaskId::FromHex(hex);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, id);
}

TEST(TaskId, BytesRoundTrip) {
  TaskId id{0x0102030405060708ull, 0x090a0b0c0d0e0f10ull};
  EXPECT_EQ(id.ToHex(), "0102030405060708090a0b0c0d0e0f10");
  EXPECT_EQ(TaskId::FromBytes(id.ToBytes()), id);
}

TEST(TaskId, RandomIdsDoNotRepeat) {
  std::unordered_set<TaskId, TaskIdHash> seen;
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(TaskId::Random()).second);
}

TEST(TaskId, BadHexIsAClearError) {
  auto short_id = TaskId::FromHex("abc");
  EXPECT_FALSE(short_id.ok());
  EXPECT_NE(short_id.status().message().find("32 hex digits"), std::string::npos);
  auto bad = TaskId::FromHex(std::string(31, 'a') + "g");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("non-hex"), std::string::npos);
  EXPECT_TRUE(TaskId::FromHex(std::string(32, 'A')).ok());
}

}  // namespace
}  // namespace ztask
