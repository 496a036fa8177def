// The SQLite file of the hub's records (hub/store_file.h): what a write puts
// in it comes back on a load, in a temporary directory.
#include "hub/store_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace ztask::hub {
namespace {

TaskId Id(uint64_t n) { return TaskId{9, n}; }

protocol::Header Request(uint64_t n) {
  return {Id(n), protocol::MsgType::kTaskRequest, "client-1", 1'000'000 + static_cast<int64_t>(n)};
}

class StoreFileTest : public ::testing::Test {
 protected:
  std::unique_ptr<StoreFile> OpenFile() {
    auto file = StoreFile::Open(path_, /*power=*/false, nullptr);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(*file) : nullptr;
  }
  // Writes what `book` changed, as TaskStore::Flush does.
  void Write(StoreFile& file, RecordBook& book) {
    auto added = file.Write(book);
    ASSERT_TRUE(added.ok()) << added.status().ToString();
    book.Committed(*added);
  }

  ztask::testing::TempDir dir_;
  const std::string path_ = (dir_.path() / "tasks.db").string();
};

TEST_F(StoreFileTest, WhatIsWrittenIsLoadedBackWithItsCounts) {
  {
    auto file = OpenFile();
    ASSERT_NE(file, nullptr);
    RecordBook book(100, file.get());
    ASSERT_TRUE(file->Load(&book, 100).ok());
    EXPECT_EQ(book.size(), 0u) << "a new file is empty";
    protocol::TaskSpec spec;
    spec.job = "3";
    spec.label = "step";
    for (uint64_t n = 1; n <= 3; ++n) {
      book.Submitted(Request(n), {}, spec, {"header", "content " + std::to_string(n)});
    }
    book.Assigned(Id(2), {4, 1});
    book.Outcome(Id(1), {true, true, ErrorType::kNone, 4, 1}, {}, 5);
    Write(*file, book);
    EXPECT_FALSE(book.HasChanges());
    book.Outcome(Id(3), {true, false, ErrorType::kTaskFailed, 4, 1}, {}, 6);
    Write(*file, book);  // a known row rewritten, its request dropped
  }
  auto file = OpenFile();
  ASSERT_NE(file, nullptr);
  RecordBook book(100, file.get());
  ASSERT_TRUE(file->Load(&book, 100).ok());
  EXPECT_EQ(book.size(), 3u);
  protocol::TaskRecord scratch;
  EXPECT_EQ(book.Find(Id(1), &scratch)->state, TaskState::kOk);
  EXPECT_EQ(book.Find(Id(2), &scratch)->state, TaskState::kRunning);
  EXPECT_EQ(book.Find(Id(2), &scratch)->label, "step");
  EXPECT_EQ(book.Find(Id(3), &scratch)->state, TaskState::kError);
  EXPECT_EQ(book.RequestOf(Id(1)), nullptr);
  EXPECT_EQ(book.RequestOf(Id(3)), nullptr);
  ASSERT_NE(book.RequestOf(Id(2)), nullptr);
  EXPECT_EQ(book.RequestOf(Id(2))->frames(), (std::vector<std::string>{"header", "content 2"}));
  EXPECT_EQ(book.ok(), 1);
  EXPECT_EQ(book.failed(), 1);
  EXPECT_EQ(book.by_engine().at(4).finished, 2);
  EXPECT_EQ(book.by_engine().at(4).running, 1);
  EXPECT_EQ(book.jobs().at("3").ok, 1);
  EXPECT_EQ(book.jobs().at("3").failed, 1);
  EXPECT_EQ(book.jobs().at("3").running, 1);
  EXPECT_EQ(book.NewJobName(), "4") << "job numbers go on from the file's";
  EXPECT_FALSE(book.HasChanges()) << "loading changes nothing to write";
}

TEST_F(StoreFileTest, OnlyTheLatestFinishedAreLoadedAndTheRestIsReadByItsId) {
  {
    auto file = OpenFile();
    RecordBook book(100, file.get());
    ASSERT_TRUE(file->Load(&book, 100).ok());
    for (uint64_t n = 1; n <= 5; ++n) {
      book.Submitted(Request(n), {}, {}, {});
      book.Outcome(Id(n), {true, true, ErrorType::kNone, 0, 1}, {}, 5);
    }
    book.Submitted(Request(6), {}, {}, {"kept"});
    Write(*file, book);
  }
  auto file = OpenFile();
  RecordBook book(2, file.get());
  ASSERT_TRUE(file->Load(&book, 2).ok());
  EXPECT_EQ(book.size(), 3u) << "the unfinished one and the latest two finished";
  EXPECT_TRUE(book.has_evicted());
  protocol::TaskRecord record;
  int64_t row = 0;
  ASSERT_TRUE(file->ReadStored(Id(1), &record, &row));
  EXPECT_EQ(record.state, TaskState::kOk);
  EXPECT_EQ(row, 1) << "rows in the order recorded";
  EXPECT_FALSE(file->ReadStored(Id(42), &record, &row));
  std::vector<TaskId> ids;
  file->IdsAfter(Id(2), 3, std::nullopt, &ids);
  EXPECT_EQ(ids, (std::vector<TaskId>{Id(3), Id(4), Id(5)}));
  EXPECT_EQ(book.ok(), 5) << "the counts cover the whole history";
}

TEST_F(StoreFileTest, PurgingFinishedRowsZeroesTheirCounts) {
  auto file = OpenFile();
  RecordBook book(100, file.get());
  ASSERT_TRUE(file->Load(&book, 100).ok());
  book.Submitted(Request(1), {}, {}, {});
  book.Outcome(Id(1), {true, true, ErrorType::kNone, 0, 1}, {}, 5);
  book.Submitted(Request(2), {}, {}, {});
  Write(*file, book);
  EXPECT_EQ(file->PurgeFinished(), 1u);
  book.ForgetFinished();
  file.reset();
  auto reopened = OpenFile();
  RecordBook loaded(100, reopened.get());
  ASSERT_TRUE(reopened->Load(&loaded, 100).ok());
  EXPECT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded.ok(), 0);
  EXPECT_EQ(reopened->synchronous_level(), 1) << "synchronous=NORMAL without power";
}

}  // namespace
}  // namespace ztask::hub
