#include "ztask/task_id.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

// Task ids start with the time in milliseconds: unique, and those made in
// a later millisecond sort after those made before, in their bytes too
// (the order of the hub's index).
TEST(TaskId, NewIdsAreUniqueAndGrowWithTime) {
  std::unordered_set<TaskId, TaskIdHash> seen;
  const auto ms = [](const TaskId& id) { return id.hi >> 16; };
  TaskId last = TaskId::New();
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  EXPECT_LE(now_ms - ms(last), 1000u) << "the first 48 bits are the time in ms";
  for (int i = 0; i < 20000; ++i) {
    const TaskId id = TaskId::New();
    EXPECT_TRUE(seen.insert(id).second);
    EXPECT_GE(ms(id), ms(last));
    if (ms(id) > ms(last)) {
      EXPECT_LT(last, id);
      EXPECT_LT(last.ToBytes(), id.ToBytes());
    }
    last = id;
  }
}

TEST(TaskId, AForkedChildDrawsIdsOfItsOwn) {
  (void)TaskId::Random();  // this thread now holds ids drawn in advance
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char bytes[16];
    TaskId::Random().ToBytes(bytes);
    _exit(::write(pipe_fds[1], bytes, sizeof bytes) == sizeof bytes ? 0 : 1);
  }
  const TaskId parent_next = TaskId::Random();
  char bytes[16];
  ASSERT_EQ(::read(pipe_fds[0], bytes, sizeof bytes), 16);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_NE(TaskId::FromBytes({bytes, 16}), parent_next)
      << "the child handed out the id its parent drew next";
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
