// Retention of finished records (StoreOptions::max_finished_records and
// drop_finished_after_s) against a real SQLite file in a temporary
// directory: what goes from the file and from memory, what always stays.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "hub/store.h"
#include "tests/support/task_db.h"
#include "tests/support/temp_dir.h"

namespace ztask::hub {
namespace {

TaskId Id(uint64_t n) { return TaskId{7, n}; }

constexpr int64_t kSecond = 1'000'000;

class RetentionTest : public ::testing::Test {
 protected:
  std::unique_ptr<TaskStore> Open(StoreOptions options) {
    auto store = TaskStore::Open(path_, std::move(options));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }
  // Task n submitted (after the tasks in `after`), not finished.
  static void Submit(TaskStore& store, uint64_t n, std::vector<TaskId> after = {}) {
    protocol::RoutingMeta meta;
    meta.after.ids = std::move(after);
    store.Submitted({Id(n), protocol::MsgType::kTaskRequest, "client", 1}, meta, {},
                    {"header", "content"});
  }
  // Task n ended well at `completed_us` on the wall clock.
  static void Finish(TaskStore& store, uint64_t n, int64_t completed_us = kSecond) {
    protocol::TaskResult result;
    result.completed_us = completed_us;
    store.Outcome(Id(n), {true, true, ErrorType::kNone, 1, 1}, result, completed_us);
  }
  // Tasks first..last submitted and finished, then written.
  static void Run(TaskStore& store, uint64_t first, uint64_t last,
                  int64_t completed_us = kSecond) {
    for (uint64_t n = first; n <= last; ++n) {
      Submit(store, n);
      Finish(store, n, completed_us);
    }
    ASSERT_TRUE(store.Flush().ok());
  }
  // Deletes until a turn deletes nothing; returns how many went.
  static size_t DropAll(TaskStore& store, int64_t now_us = kSecond) {
    size_t total = 0;
    for (;;) {
      auto dropped = store.DropFinished(now_us);
      EXPECT_TRUE(dropped.ok()) << dropped.status().ToString();
      if (!dropped.ok() || *dropped == 0) return total;
      total += *dropped;
    }
  }
  static bool Known(const TaskStore& store, uint64_t n) {
    protocol::TaskRecord scratch;
    return store.Find(Id(n), &scratch) != nullptr;
  }
  // Rows in the file, read by a connection of the test's own.
  int64_t RowsInFile() const { return testing::TaskRowsIn(path_); }

  ztask::testing::TempDir dir_;
  const std::string path_ = (dir_.path() / "tasks.db").string();
};

TEST_F(RetentionTest, OffByDefaultEveryRecordStays) {
  auto store = Open({});
  ASSERT_NE(store, nullptr);
  Run(*store, 1, 50);
  EXPECT_FALSE(store->retains());
  EXPECT_EQ(DropAll(*store, 1000 * kSecond), 0u);
  EXPECT_EQ(RowsInFile(), 50);
  for (uint64_t n = 1; n <= 50; ++n) EXPECT_TRUE(Known(*store, n)) << n;
}

TEST_F(RetentionTest, CountBoundKeepsTheNewestRecordedAndEveryUnfinished) {
  StoreOptions options;
  options.max_finished_records = 10;
  options.keep_finished = 4;  // most are read from the file
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  Submit(*store, 100);  // unfinished, recorded first
  Run(*store, 1, 50);
  EXPECT_EQ(DropAll(*store), 40u);
  EXPECT_EQ(RowsInFile(), 11) << "ten finished and the unfinished one";
  for (uint64_t n = 1; n <= 40; ++n) EXPECT_FALSE(Known(*store, n)) << n;
  for (uint64_t n = 41; n <= 50; ++n) EXPECT_TRUE(Known(*store, n)) << n;
  EXPECT_TRUE(Known(*store, 100));
  EXPECT_EQ(store->IdsAfter(std::nullopt, 100).size(), 11u);
  EXPECT_EQ(store->ok(), 50) << "the counts keep the history";
}

// Rows already in the file when it opens (a bound lowered on a restart)
// go a batch at a turn.
TEST_F(RetentionTest, ATurnDeletesAtMostItsBatchOfWhatWasThere) {
  {
    auto earlier = Open({});
    ASSERT_NE(earlier, nullptr);
    Run(*earlier, 1, 30);
  }
  StoreOptions options;
  options.max_finished_records = 5;
  options.drop_per_turn = 7;
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  auto dropped = store->DropFinished(kSecond);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 7u);
  EXPECT_EQ(RowsInFile(), 23);
  EXPECT_EQ(DropAll(*store), 18u);
  EXPECT_EQ(RowsInFile(), 5);
}

// Turns that come far apart in a burst still keep the file at its bound:
// a turn deletes its batch and as many rows as were written since the
// last one.
TEST_F(RetentionTest, ATurnKeepsPaceWithWhatWasWrittenSinceTheLast) {
  StoreOptions options;
  options.max_finished_records = 5;
  options.drop_per_turn = 7;
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  Run(*store, 1, 10);
  Run(*store, 11, 30);
  auto dropped = store->DropFinished(kSecond);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 25u) << "everything past the bound";
  EXPECT_EQ(RowsInFile(), 5);
  Run(*store, 31, 33);
  dropped = store->DropFinished(kSecond);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 3u);
  Run(*store, 34, 60);
  dropped = store->DropFinished(kSecond);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 27u) << "the 27 past the bound, more than a batch";
  EXPECT_EQ(RowsInFile(), 5);
}

TEST_F(RetentionTest, AgeBoundDropsThoseThatEndedBeforeIt) {
  StoreOptions options;
  options.drop_finished_after_s = 60;
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  Run(*store, 1, 10, 100 * kSecond);
  Run(*store, 11, 20, 200 * kSecond);
  EXPECT_EQ(DropAll(*store, 200 * kSecond), 10u);
  for (uint64_t n = 1; n <= 10; ++n) EXPECT_FALSE(Known(*store, n)) << n;
  for (uint64_t n = 11; n <= 20; ++n) EXPECT_TRUE(Known(*store, n)) << n;
  EXPECT_EQ(DropAll(*store, 255 * kSecond), 0u) << "not a minute old yet";
  EXPECT_EQ(DropAll(*store, 261 * kSecond), 10u);
  EXPECT_EQ(RowsInFile(), 0);
}

TEST_F(RetentionTest, AnAgeBeyondTheClockKeepsEveryRecord) {
  uint64_t rows = 0;
  for (double seconds : {1e300, std::numeric_limits<double>::infinity()}) {
    StoreOptions options;
    options.drop_finished_after_s = seconds;
    auto store = Open(options);
    ASSERT_NE(store, nullptr);
    Run(*store, rows + 1, rows + 10, 100 * kSecond);
    rows += 10;
    EXPECT_EQ(DropAll(*store, 200 * kSecond), 0u) << seconds;
    EXPECT_EQ(RowsInFile(), static_cast<int64_t>(rows)) << seconds;
  }
}

TEST_F(RetentionTest, AWaitingTasksDependencyStaysUntilItEnds) {
  StoreOptions options;
  options.max_finished_records = 2;
  {
    auto store = Open(options);
    ASSERT_NE(store, nullptr);
    Run(*store, 1, 3);
    Submit(*store, 100, {Id(1), Id(2)});  // waits for 1 and 2 (say, a restored scheduler's)
    Run(*store, 4, 20);
    EXPECT_EQ(DropAll(*store), 16u) << "3 to 18 go; 1 and 2 stay";
    EXPECT_TRUE(Known(*store, 1));
    EXPECT_TRUE(Known(*store, 2));
  }
  // A restarted hub knows what its unfinished records wait for.
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(DropAll(*store), 0u);
  EXPECT_TRUE(Known(*store, 1));
  Finish(*store, 100);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(DropAll(*store), 3u) << "once nothing waits for them, 1 and 2 go, and 100 "
                                      "(recorded before 4)";
  EXPECT_FALSE(Known(*store, 1));
  EXPECT_FALSE(Known(*store, 2));
  EXPECT_FALSE(Known(*store, 100));
  EXPECT_TRUE(Known(*store, 19));
  EXPECT_TRUE(Known(*store, 20));
}

TEST_F(RetentionTest, ABoundWithoutAFileIsRefused) {
  StoreOptions options;
  options.max_finished_records = 10;
  auto store = TaskStore::Open(":memory:", options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("database file"), std::string::npos);
}

}  // namespace
}  // namespace ztask::hub
