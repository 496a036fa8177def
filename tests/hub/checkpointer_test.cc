// The task database's checkpoints on a thread of their own
// (hub/checkpointer.h): a real SQLite file in WAL mode, in a temporary
// directory, written by one connection as the hub's loop writes it.
#include "hub/checkpointer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "hub/store_file.h"
#include "tests/support/temp_dir.h"

namespace ztask::hub {
namespace {

// Polls `condition` until it holds or 10 s have passed.
template <class F>
bool Eventually(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(path_.c_str(), &writer_), SQLITE_OK);
    Exec("PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
         "CREATE TABLE t (n INTEGER PRIMARY KEY, body BLOB NOT NULL);");
  }
  void TearDown() override { sqlite3_close(writer_); }
  void Exec(const std::string& sql) {
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(writer_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  }
  // One transaction of `rows` rows of 3 KiB: about a page each.
  void Commit(int rows) {
    Exec("BEGIN");
    for (int i = 0; i < rows; ++i) Exec("INSERT INTO t (body) VALUES (zeroblob(3000))");
    Exec("COMMIT");
  }
  int64_t LogBytes() const {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_ + "-wal", ec);
    return ec ? 0 : static_cast<int64_t>(size);
  }

  ztask::testing::TempDir dir_;
  const std::string path_ = (dir_.path() / "tasks.db").string();
  sqlite3* writer_ = nullptr;
};

TEST_F(CheckpointerTest, TheLogIsCopiedOnItsOwnThreadAndStaysBounded) {
  auto checkpointer = Checkpointer::Start(path_, 64);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status().ToString();
  (*checkpointer)->Attach(writer_);
  // A writer that commits 35 pages at a time, 30 times (two commits take
  // the log past the limit, not a quarter past it), and whose next commit
  // comes once the thread is done with the last checkpoint due.
  for (int i = 0; i < 30; ++i) {
    const uint64_t before = (*checkpointer)->checkpoints();
    Commit(35);
    if (i % 2 == 1) {
      ASSERT_TRUE(Eventually([&] { return (*checkpointer)->checkpoints() > before; })) << i;
    }
  }
  EXPECT_GE((*checkpointer)->checkpoints(), 15u);
  EXPECT_EQ((*checkpointer)->writer_checkpoints(), 0u) << "the writer never checkpointed";
  EXPECT_EQ((*checkpointer)->failures(), 0u);
  // 1,050 pages written; the log restarts from its beginning after each
  // checkpoint: it never held more than two commits' pages past the limit.
  EXPECT_LT(LogBytes(), (64 + 2 * 40 + 8) * 4096) << LogBytes();
  checkpointer->reset();
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(writer_, "SELECT count(*) FROM t", -1, &count, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(count, 0), 1050);
  sqlite3_finalize(count);
}

TEST_F(CheckpointerTest, AWriterFarPastTheLimitCheckpointsItself) {
  // A reader that holds its snapshot keeps every checkpoint from copying
  // the log whole, so the thread never catches up; a quarter past the
  // limit the writer's own commits checkpoint, as SQLite's default does.
  auto checkpointer = Checkpointer::Start(path_, 16);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status().ToString();
  (*checkpointer)->Attach(writer_);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &reader), SQLITE_OK);
  Commit(8);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM t;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  // A row a commit, until the writer checkpoints: the log then holds a
  // quarter more than the limit (20 pages), give or take a commit's.
  int64_t frames = 0;
  for (int i = 0; i < 200 && (*checkpointer)->writer_checkpoints() == 0; ++i) {
    Commit(1);
    frames = (LogBytes() - 32) / (4096 + 24);  // the log's header, then frames
  }
  EXPECT_GT((*checkpointer)->writer_checkpoints(), 0u);
  EXPECT_GE(frames, 20);
  EXPECT_LE(frames, 24);
  EXPECT_EQ((*checkpointer)->checkpoints(), 0u) << "none copied the whole log";
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
}

TEST(StoreFileCheckpoints, TheHubsFileIsCheckpointedOffItsWriter) {
  ztask::testing::TempDir dir;
  auto file = StoreFile::Open((dir.path() / "tasks.db").string(), /*power=*/false, nullptr);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  RecordBook book(100, file->get());
  ASSERT_TRUE((*file)->Load(&book, 100).ok());
  // Flushes of 512 requests of 4 KiB, as the hub's loop writes them, until
  // the log passes the 32 MiB at which it is checkpointed (its file only
  // grows until the first checkpoint); then, as the hub's next flush comes
  // 50 ms later, two more once the thread has copied the log.
  const std::string body(4096, 'x');
  const auto log = dir.path() / "tasks.db-wal";
  uint64_t n = 0;
  auto flush = [&] {
    for (int i = 0; i < 512; ++i, ++n) {
      const protocol::Header request{TaskId{7, n}, protocol::MsgType::kTaskRequest, "client-1",
                                     1'000'000 + static_cast<int64_t>(n)};
      book.Submitted(request, {}, protocol::TaskSpec{}, {"header", body});
    }
    auto added = (*file)->Write(book);
    ASSERT_TRUE(added.ok()) << added.status().ToString();
    book.Committed(*added);
  };
  while (std::filesystem::file_size(log) < (uint64_t{32} << 20)) {
    ASSERT_NO_FATAL_FAILURE(flush());
    ASSERT_LT(n, 100'000u);
  }
  EXPECT_TRUE(Eventually([&] { return (*file)->checkpointer().checkpoints() > 0; }));
  ASSERT_NO_FATAL_FAILURE(flush());
  ASSERT_NO_FATAL_FAILURE(flush());
  EXPECT_EQ((*file)->checkpointer().writer_checkpoints(), 0u);
  EXPECT_LT(std::filesystem::file_size(log), uint64_t{40} << 20) << "the log restarted";
}

}  // namespace
}  // namespace ztask::hub
