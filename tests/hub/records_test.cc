// The records in memory (hub/records.h) alone: no file, no SQLite. A fake
// source stands for the file where records let go of are read back.
#include "hub/records.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "protocol/codec.h"

namespace ztask::hub {
namespace {

TaskId Id(uint64_t n) { return TaskId{7, n}; }

protocol::Header Request(uint64_t n) {
  return {Id(n), protocol::MsgType::kTaskRequest, "client-1", 1'000'000};
}

protocol::OutcomeMeta Final(bool ok, int32_t engine, int32_t attempt = 1) {
  return {true, ok, ok ? ErrorType::kNone : ErrorType::kTaskFailed, engine, attempt};
}

// What a file would hold: records by id, with their rows.
class FakeSource final : public RecordSource {
 public:
  bool ReadStored(const TaskId& id, protocol::TaskRecord* record, int64_t* row) const override {
    ++reads;
    auto it = rows.find(id);
    if (it == rows.end()) return false;
    *record = it->second.first;
    *row = it->second.second;
    return true;
  }
  std::map<TaskId, std::pair<protocol::TaskRecord, int64_t>> rows;
  mutable int reads = 0;
};

// Plays the file's part in a write: gives each new record the next row and
// keeps what it wrote.
void Write(RecordBook& book, FakeSource& source, int64_t* next_row) {
  RecordBook::Written written;
  for (RecordBook::Entry* e : book.dirty()) {
    const int64_t row = e->row == 0 ? ++*next_row : e->row;
    if (e->row == 0) written.rows.emplace_back(e, row);
    source.rows[e->record.id] = {e->record, row};
    if (e->record.finished()) written.finished.emplace_back(e, protocol::EncodeStored(e->record));
  }
  book.Committed(written);
}

TEST(Records, AnEntryHoldsItsRecordAndItsRequestUntilItEnds) {
  RecordBook book(100, nullptr);
  protocol::TaskSpec spec;
  spec.label = "x";
  spec.job = "7";
  ASSERT_TRUE(book.Submitted(Request(1), {}, spec, {"header", "meta", "content"}));
  ASSERT_EQ(book.dirty().size(), 1u);
  const RecordBook::Entry& e = *book.dirty()[0];
  EXPECT_EQ(e.record.state, TaskState::kWaiting);
  EXPECT_EQ(e.record.label, "x");
  EXPECT_EQ(e.record.client, "client-1");
  EXPECT_TRUE(e.has_request);
  EXPECT_TRUE(e.request_changed) << "a new request is to be written";
  EXPECT_EQ(e.row, 0) << "not written yet";
  ASSERT_NE(book.RequestOf(Id(1)), nullptr);

  ASSERT_TRUE(book.Assigned(Id(1), {3, 1}));
  EXPECT_EQ(book.dirty().size(), 1u) << "each changed entry listed once";
  ASSERT_TRUE(book.Outcome(Id(1), Final(true, 3), {}, 5));
  EXPECT_EQ(book.RequestOf(Id(1)), nullptr) << "a finished task's request is let go";
  protocol::TaskRecord scratch;
  const protocol::TaskRecord* r = book.Find(Id(1), &scratch);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, TaskState::kOk);
  EXPECT_EQ(r->completed_us, 5) << "dated when the result carries no date";
  EXPECT_EQ(book.ok(), 1);
  EXPECT_EQ(book.jobs().at("7").ok, 1);
  EXPECT_TRUE(book.jobs_changed().contains("7"));
  EXPECT_TRUE(book.tally_changed().contains(3));
  EXPECT_TRUE(book.outcomes_changed());
  book.Clean();
  EXPECT_FALSE(book.HasChanges());
}

TEST(Records, RepeatedAndOldMessagesChangeNothing) {
  RecordBook book(100, nullptr);
  ASSERT_TRUE(book.Submitted(Request(1), {}, {}, {"r"}));
  ASSERT_TRUE(book.Assigned(Id(1), {2, 1}));
  EXPECT_FALSE(book.Assigned(Id(1), {2, 1})) << "the same assignment twice";
  ASSERT_TRUE(book.Outcome(Id(1), Final(false, 2), {}, 5));
  book.Clean();
  EXPECT_FALSE(book.Submitted(Request(1), {}, {}, {"r"}));
  EXPECT_FALSE(book.Assigned(Id(1), {2, 2}));
  EXPECT_FALSE(book.Outcome(Id(1), Final(true, 2), {}, 9));
  EXPECT_FALSE(book.HasChanges()) << "a final record never goes back";
  EXPECT_EQ(book.failed(), 1);
  EXPECT_EQ(book.ok(), 0);
}

TEST(Records, AHeldRecordIsWrittenOnlyOnceItChangesOrIsReleased) {
  RecordBook book(100, nullptr);
  ASSERT_TRUE(book.Submitted(Request(1), {}, {}, {"r1"}, 100));
  ASSERT_TRUE(book.Submitted(Request(2), {}, {}, {"r2"}, 200));
  ASSERT_TRUE(book.Submitted(Request(3), {}, {}, {"r3"}, 300));
  EXPECT_TRUE(book.dirty().empty()) << "held back, not to be written";
  EXPECT_EQ(book.held(), 3u);
  EXPECT_EQ(book.OldestHeldUs(), 100);
  protocol::TaskRecord scratch;
  ASSERT_NE(book.Find(Id(2), &scratch), nullptr) << "held, and answered all the same";
  ASSERT_NE(book.RequestOf(Id(2)), nullptr);
  EXPECT_EQ(book.waiting(), 3);

  // The first ends while held: one write, of its final record.
  ASSERT_TRUE(book.Assigned(Id(1), {4, 1}));
  ASSERT_TRUE(book.Outcome(Id(1), Final(true, 4), {}, 5));
  ASSERT_EQ(book.dirty().size(), 1u);
  EXPECT_EQ(book.dirty()[0]->record.id, Id(1));
  EXPECT_EQ(book.dirty()[0]->record.state, TaskState::kOk);
  EXPECT_EQ(book.held(), 2u);
  book.Clean();

  // Released by the time it came: the second, not the third.
  book.ReleaseHeld(250);
  ASSERT_EQ(book.dirty().size(), 1u);
  EXPECT_EQ(book.dirty()[0]->record.id, Id(2));
  EXPECT_EQ(book.dirty()[0]->record.state, TaskState::kWaiting);
  EXPECT_EQ(book.held(), 1u);
  EXPECT_EQ(book.OldestHeldUs(), 300);
  book.Clean();
  book.ReleaseHeld(INT64_MAX);
  ASSERT_EQ(book.dirty().size(), 1u);
  EXPECT_EQ(book.dirty()[0]->record.id, Id(3));
  EXPECT_EQ(book.held(), 0u);
  EXPECT_EQ(book.OldestHeldUs(), INT64_MAX);
}

TEST(Records, OnlyANewRecordIsHeld) {
  RecordBook book(100, nullptr);
  // An outcome that came before its submission (a resent batch): the
  // record exists, so the submission is a change to write.
  ASSERT_TRUE(book.Outcome(Id(1), {false, false, ErrorType::kTaskFailed, 1, 1}, {}, 5));
  book.Clean();
  ASSERT_TRUE(book.Submitted(Request(1), {}, {}, {"r"}, 100));
  EXPECT_EQ(book.dirty().size(), 1u);
  EXPECT_EQ(book.held(), 0u);
  // Held, then submitted again (the batch resent): written now.
  ASSERT_TRUE(book.Submitted(Request(2), {}, {}, {"r"}, 200));
  EXPECT_EQ(book.held(), 1u);
  ASSERT_TRUE(book.Submitted(Request(2), {}, {}, {"r"}, 300));
  EXPECT_EQ(book.held(), 0u);
  EXPECT_EQ(book.dirty().size(), 2u);
  // Without a time, never held.
  ASSERT_TRUE(book.Submitted(Request(3), {}, {}, {"r"}));
  EXPECT_EQ(book.dirty().size(), 3u);
  EXPECT_EQ(book.held(), 0u);
}

TEST(Records, CountsFollowEveryChange) {
  RecordBook book(100, nullptr);
  for (uint64_t n = 1; n <= 3; ++n) book.Submitted(Request(n), {}, {}, {});
  EXPECT_EQ(book.waiting(), 3);
  book.Assigned(Id(1), {0, 1});
  book.Assigned(Id(2), {0, 1});
  EXPECT_EQ(book.waiting(), 1);
  EXPECT_EQ(book.running(), 2);
  EXPECT_EQ(book.by_engine().at(0).running, 2);
  book.Outcome(Id(1), Final(true, 0), {}, 5);
  EXPECT_EQ(book.by_engine().at(0).running, 1);
  EXPECT_EQ(book.by_engine().at(0).finished, 1);
  EXPECT_EQ(book.Purge({Id(1), Id(2)}, false), 1u) << "only finished records are purged";
  EXPECT_EQ(book.by_engine().at(0).finished, 0);
  EXPECT_EQ(book.ok(), 0);
  EXPECT_EQ(book.size(), 2u);
}

TEST(Records, AResubmissionMarksTheFailedTaskReplaced) {
  RecordBook book(100, nullptr);
  protocol::TaskSpec spec;
  spec.job = "j";
  book.Submitted(Request(1), {}, spec, {});
  book.Outcome(Id(1), Final(false, 0), {}, 5);
  EXPECT_EQ(book.jobs().at("j").failed, 1);
  spec.replaces = Id(1);
  book.Submitted(Request(2), {}, spec, {});
  EXPECT_EQ(book.jobs().at("j").failed, 0);
  EXPECT_EQ(book.jobs().at("j").replaced, 1);
  EXPECT_EQ(book.jobs().at("j").waiting, 1);
  protocol::TaskRecord scratch;
  EXPECT_EQ(book.Find(Id(1), &scratch)->replaced_by, Id(2));
}

TEST(Records, WrittenFinishedRecordsBeyondWhatIsKeptAreReadBackFromTheSource) {
  FakeSource source;
  RecordBook book(2, &source);
  int64_t next_row = 0;
  for (uint64_t n = 1; n <= 5; ++n) {
    book.Submitted(Request(n), {}, {}, {});
    book.Outcome(Id(n), Final(true, 0), {}, 5);
  }
  EXPECT_EQ(book.size(), 5u) << "nothing written: nothing let go";
  Write(book, source, &next_row);
  EXPECT_EQ(book.size(), 2u) << "the latest two finished stay";
  EXPECT_TRUE(book.has_evicted());
  EXPECT_EQ(source.rows.at(Id(1)).second, 1) << "rows in the order recorded";
  protocol::TaskRecord scratch;
  const protocol::TaskRecord* old = book.Find(Id(1), &scratch);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old, &scratch) << "read from the source";
  EXPECT_EQ(old->state, TaskState::kOk);
  const int reads = source.reads;
  EXPECT_EQ(book.Find(Id(99), &scratch), nullptr);
  EXPECT_EQ(source.reads, reads) << "an id above every stored one is not looked up";
  EXPECT_FALSE(book.Outcome(Id(1), Final(false, 0), {}, 9))
      << "a record let go of comes back to be checked: still final";
  EXPECT_FALSE(book.HasChanges());
}

// A finished record, once written, is kept as the file stores it (packed),
// and reads, lists, purges and changes as it did whole.
TEST(Records, AWrittenFinishedRecordIsKeptPackedAndReadsAsItWas) {
  FakeSource source;
  RecordBook book(100, &source);
  int64_t next_row = 0;
  protocol::TaskSpec spec;
  spec.job = "j";
  spec.label = "a label";
  protocol::TaskResult result;
  result.stdout_text = "out";
  for (uint64_t n = 1; n <= 3; ++n) {
    book.Submitted(Request(n), {}, spec, {"r"});
    book.Assigned(Id(n), {4, 1});
    book.Outcome(Id(n), Final(n != 2, 4), result, 5);
  }
  book.Submitted(Request(4), {}, spec, {"r"});  // unfinished: stays whole
  Write(book, source, &next_row);
  ASSERT_EQ(book.size(), 4u);
  protocol::TaskRecord scratch;
  for (uint64_t n = 1; n <= 3; ++n) {
    const protocol::TaskRecord* r = book.Find(Id(n), &scratch);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r, &scratch) << "unpacked into the scratch record";
    EXPECT_EQ(*r, source.rows.at(Id(n)).first) << "as it was written";
    EXPECT_EQ(r->stdout_text, "out");
    EXPECT_EQ(r->label, "a label");
  }
  EXPECT_NE(book.Find(Id(4), &scratch), &scratch) << "an unfinished record is whole";
  EXPECT_EQ(source.reads, 0) << "read from memory, not from the file";
  EXPECT_EQ(book.IdsAfter(std::nullopt, 10, std::string("j")),
            (std::vector<TaskId>{Id(1), Id(2), Id(3), Id(4)}))
      << "a packed record keeps its job";
  EXPECT_TRUE(book.IdsAfter(std::nullopt, 10, std::string("k")).empty());
  EXPECT_FALSE(book.Outcome(Id(1), Final(false, 0), {}, 9)) << "still final";
  EXPECT_FALSE(book.Assigned(Id(1), {0, 2}));
  EXPECT_FALSE(book.HasChanges());
  // A resubmission of the failed one changes it: whole again, then written.
  spec.replaces = Id(2);
  book.Submitted(Request(5), {}, spec, {"r"});
  EXPECT_EQ(book.jobs().at("j").replaced, 1);
  EXPECT_EQ(book.jobs().at("j").failed, 0);
  EXPECT_EQ(book.Find(Id(2), &scratch)->replaced_by, Id(5));
  Write(book, source, &next_row);
  EXPECT_EQ(source.rows.at(Id(2)).first.replaced_by, Id(5));
  EXPECT_EQ(book.Find(Id(2), &scratch)->replaced_by, Id(5)) << "packed again, replaced";
  // A purge uncounts a packed record as it counted it whole.
  EXPECT_EQ(book.by_engine().at(4).finished, 3);
  EXPECT_EQ(book.Purge({Id(1), Id(3)}, false), 2u);
  EXPECT_EQ(book.by_engine().at(4).finished, 1);
  EXPECT_EQ(book.ok(), 0);
  EXPECT_EQ(book.jobs().at("j").ok, 0);
  EXPECT_EQ(book.Find(Id(1), &scratch), nullptr);
}

TEST(Records, IdsAfterListsWhatTheFileDoesNotOnceRecordsWereLetGo) {
  FakeSource source;
  RecordBook book(0, &source);
  int64_t next_row = 0;
  book.Submitted(Request(1), {}, {}, {});
  book.Outcome(Id(1), Final(true, 0), {}, 5);
  book.Submitted(Request(3), {}, {}, {});
  Write(book, source, &next_row);
  book.Submitted(Request(2), {}, {}, {});
  ASSERT_TRUE(book.has_evicted());
  EXPECT_EQ(book.IdsAfter(std::nullopt, 10, std::nullopt), (std::vector<TaskId>{Id(2)}))
      << "written ones are listed by the file";
  RecordBook whole(100, nullptr);
  for (uint64_t n : {3, 1, 2}) whole.Submitted(Request(n), {}, {}, {});
  EXPECT_EQ(whole.IdsAfter(Id(1), 10, std::nullopt), (std::vector<TaskId>{Id(2), Id(3)}));
  EXPECT_EQ(whole.IdsAfter(std::nullopt, 2, std::nullopt), (std::vector<TaskId>{Id(1), Id(2)}));
}

}  // namespace
}  // namespace ztask::hub
