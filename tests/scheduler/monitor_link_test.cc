// MonitorLink (monitor_link.h): each batch reaches the hub at least once,
// goes again only when the hub fell silent or the connection was made
// again, and costs nothing per turn while it waits for its acknowledgement.
#include "scheduler/monitor_link.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/support/temp_dir.h"

namespace ztask::scheduler {
namespace {

class MonitorLinkTest : public ::testing::Test {
 protected:
  MonitorLinkTest() {
    hub_.bind("inproc://hub");
    link_socket_.connect("inproc://hub");
    link_.set_enabled(true);
  }
  // One monitor message in a batch of its own, sealed.
  void Batch() {
    builder_.AddToBatch(protocol::MsgType::kTaskSubmitted, "", "meta", "content");
    link_.Seal();
  }
  // The numbers of the batches the hub received, in order.
  std::vector<int64_t> Received() {
    std::vector<int64_t> seqs;
    protocol::Frames frames;
    while (protocol::TryReceive(hub_, frames)) {
      const auto views = protocol::Views(frames, 1);  // after the routing id
      EXPECT_TRUE(protocol::CheckFrames(signer_, {}, views).ok()) << "each batch is signed";
      auto meta = protocol::DecodeBody<protocol::BatchMeta>(views[protocol::kFrameMeta]);
      EXPECT_TRUE(meta.ok());
      if (meta.ok() && meta->seq) seqs.push_back(*meta->seq);
    }
    return seqs;
  }

  zmq::context_t context_{1};
  zmq::socket_t hub_{context_, zmq::socket_type::router};
  zmq::socket_t link_socket_{context_, zmq::socket_type::dealer};
  protocol::Signer signer_{"key"};
  FrameBuilder builder_{signer_};
  MonitorLink link_{link_socket_, builder_};
  int64_t now_ = 1'000'000;
};

TEST_F(MonitorLinkTest, EachBatchGoesOnceWhileTheHubAcknowledges) {
  for (int i = 0; i < 3; ++i) Batch();
  link_.Flush(now_);
  EXPECT_EQ(Received(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(link_.unacknowledged(), 3u);
  // The hub is far behind, but says something now and then: nothing twice.
  for (int i = 0; i < 10; ++i) {
    now_ += MonitorLink::kResendAfterUs / 2;
    link_.Acknowledged({}, now_);
    link_.Flush(now_);
  }
  EXPECT_TRUE(Received().empty());
  EXPECT_EQ(link_.resent(), 0u);
  link_.Acknowledged({1, 3}, now_);
  EXPECT_EQ(link_.unacknowledged(), 1u);
}

// A journal written by an earlier version holds batches with one frame per
// message frame: they go to the hub in today's layout, every message kept.
TEST_F(MonitorLinkTest, AnEarlierVersionsBatchGoesInTodaysLayout) {
  protocol::Frames earlier;
  for (std::string_view f : {"ZTASK2", "", "header", "\xc0", "\x81\xa3seq\x07",
                             "\x81\xa6"
                             "frames\x92\x04\x05",
                             "h1", "p1", "m1", "c1", "h2", "p2", "m2", "c2", "buffer"}) {
    earlier.push_back(protocol::Frame(f));
  }
  link_.Adopt({std::move(earlier), -1});
  link_.Flush(now_, /*now=*/true);
  protocol::Frames frames;
  ASSERT_TRUE(protocol::TryReceive(hub_, frames));
  const auto views = protocol::Views(frames, 1);
  ASSERT_EQ(views.size(), protocol::kBatchFrames);
  EXPECT_TRUE(protocol::CheckFrames(signer_, {}, views).ok());
  auto messages = protocol::UnpackBatch(views);
  ASSERT_TRUE(messages.ok()) << messages.status().ToString();
  ASSERT_EQ(messages->size(), 2u);
  EXPECT_EQ((*messages)[0][protocol::kFrameContent], "c1");
  EXPECT_EQ((*messages)[1][protocol::kFirstBuffer], "buffer");
  // Not one: nothing is sent.
  protocol::Frames broken;
  for (int i = 0; i < 8; ++i) broken.push_back(protocol::Frame("x"));
  link_.Adopt({std::move(broken), -1});
  link_.Flush(now_, true);
  EXPECT_FALSE(protocol::TryReceive(hub_, frames));
}

TEST_F(MonitorLinkTest, ASilentHubGetsEverythingUnacknowledgedAgain) {
  Batch();
  Batch();
  link_.Flush(now_);
  EXPECT_EQ(Received().size(), 2u);
  link_.Acknowledged({1}, now_);
  now_ += MonitorLink::kResendAfterUs - 1;
  link_.Flush(now_);
  EXPECT_TRUE(Received().empty()) << "not silent long enough yet";
  now_ += 2;
  link_.Flush(now_);
  EXPECT_EQ(Received(), (std::vector<int64_t>{2}));
  EXPECT_EQ(link_.resent(), 1u);
  // Once more only after another silence.
  link_.Flush(now_ + 1);
  EXPECT_TRUE(Received().empty());
}

TEST_F(MonitorLinkTest, AReconnectionSendsEverythingUnacknowledgedAgainInOrder) {
  for (int i = 0; i < 4; ++i) Batch();
  link_.Flush(now_);
  EXPECT_EQ(Received().size(), 4u);
  link_.Acknowledged({2}, now_);
  link_.Reconnected();
  Batch();
  link_.Flush(now_ + MonitorLink::kHoldUs);
  EXPECT_EQ(Received(), (std::vector<int64_t>{1, 3, 4, 5}));
  EXPECT_EQ(link_.resent(), 3u);
}

TEST_F(MonitorLinkTest, ALightlyLoadedSchedulerWakesTheHubAtMostOncePerHold) {
  Batch();
  link_.Flush(now_);
  EXPECT_EQ(Received(), (std::vector<int64_t>{1})) << "nothing went for a while: at once";
  Batch();
  link_.Flush(now_ + 10);
  Batch();
  link_.Flush(now_ + 20);
  EXPECT_TRUE(Received().empty()) << "held: the last send was 10 us ago";
  ASSERT_TRUE(link_.NextSendUs().has_value());
  EXPECT_EQ(*link_.NextSendUs(), now_ + MonitorLink::kHoldUs);
  EXPECT_FALSE(link_.blocked()) << "held is not blocked: no need to poll for output";
  link_.Flush(now_ + MonitorLink::kHoldUs);
  EXPECT_EQ(Received(), (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(link_.NextSendUs().has_value());
  // Enough waiting batches go at once, however recent the last send.
  now_ += MonitorLink::kHoldUs;
  for (size_t i = 0; i < MonitorLink::kHoldBatches; ++i) Batch();
  link_.Flush(now_ + 1);
  EXPECT_EQ(Received().size(), MonitorLink::kHoldBatches);
}

TEST_F(MonitorLinkTest, WithAJournalEveryBatchIsWrittenBeforeItGoesAndForgottenOnceAcknowledged) {
  testing::TempDir dir;
  auto journal = Journal::Open(dir.path() / "journal");
  ASSERT_TRUE(journal.ok());
  link_.set_journal(journal->get());
  Batch();
  Batch();
  EXPECT_GT((*journal)->bytes(), 0u) << "written when sealed, before any send";
  link_.Flush(now_);
  link_.Acknowledged({1}, now_);
  EXPECT_GT((*journal)->bytes(), 0u) << "batch 2 is not acknowledged yet";
  link_.Acknowledged({2}, now_);
  EXPECT_EQ((*journal)->bytes(), 0u);
}

TEST_F(MonitorLinkTest, ABatchTheJournalCouldNotTakeIsWrittenBeforeTheNext) {
  testing::TempDir dir;
  const auto where = dir.path() / "profile";
  const auto away = dir.path() / "away";
  std::filesystem::create_directory(where);
  {
    // Segments of a byte: each append begins a new file.
    auto journal = Journal::Open(where / "journal", false, 1);
    ASSERT_TRUE(journal.ok());
    link_.set_journal(journal->get());
    Batch();
    // The directory is gone (a file where it was): the next append fails.
    std::filesystem::rename(where, away);
    std::ofstream(where.string()) << "not a directory";
    Batch();
    std::filesystem::remove(where);
    std::filesystem::rename(away, where);
    Batch();  // the one that failed goes first, then this one
    link_.set_journal(nullptr);
  }
  auto next = Journal::Open(where / "journal");
  ASSERT_TRUE(next.ok());
  std::vector<int64_t> seqs;
  for (const auto& found : (*next)->TakeFound()) {
    auto meta = protocol::DecodeBody<protocol::BatchMeta>(
        protocol::View(found.batch[protocol::kFrameMeta]));
    ASSERT_TRUE(meta.ok());
    seqs.push_back(meta->seq.value_or(-1));
  }
  EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 3})) << "every batch, none lost to the failure";
}

TEST_F(MonitorLinkTest, ABatchAnEarlierSchedulerLeftLeavesTheJournalOnceAcknowledged) {
  testing::TempDir dir;
  {
    auto first = Journal::Open(dir.path() / "journal");
    ASSERT_TRUE(first.ok());
    link_.set_journal(first->get());
    Batch();  // written to its journal, then this scheduler is gone
    link_.set_journal(nullptr);
    link_.Acknowledged({1}, now_);
  }
  auto journal = Journal::Open(dir.path() / "journal");
  ASSERT_TRUE(journal.ok());
  link_.set_journal(journal->get());
  auto found = (*journal)->TakeFound();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ((*journal)->segments(), 2u) << "the earlier scheduler's, and this one's";
  link_.Adopt(std::move(found[0]));
  link_.Flush(now_, /*now=*/true);
  EXPECT_EQ(Received(), (std::vector<int64_t>{2}));
  link_.Acknowledged({2}, now_);
  EXPECT_EQ((*journal)->segments(), 1u) << "the earlier scheduler's file is gone";
  EXPECT_EQ((*journal)->bytes(), 0u);
}

// Dispatch notes (dispatch_log.h) go into the journal with the batch of
// their turn, in one record of their own, and stay until every dispatch in
// them is covered by batches the hub acknowledged.
TEST_F(MonitorLinkTest, DispatchNotesGoWithTheBatchAndStayUntilCoveredAndAcknowledged) {
  testing::TempDir dir;
  auto journal = Journal::Open(dir.path() / "journal");
  ASSERT_TRUE(journal.ok());
  link_.set_journal(journal->get());
  ASSERT_TRUE(link_.noting());
  const TaskId a = TaskId::Random();
  link_.dispatches().Add(a, 7, 1, /*serial=*/1);
  Batch();  // batch 1, with the note before it
  EXPECT_FALSE(link_.dispatches().waiting());
  EXPECT_EQ(link_.dispatches().kept(), 1u);
  link_.Flush(now_, /*now=*/true);
  link_.Acknowledged({1}, now_);
  EXPECT_GT((*journal)->bytes(), 0u) << "the note is not covered yet";
  link_.CoverDispatches(0);  // dispatch 1 not looked at yet
  EXPECT_EQ(link_.dispatches().kept(), 1u);
  link_.CoverDispatches(1);  // covered by batch 1, acknowledged already
  EXPECT_EQ(link_.dispatches().kept(), 0u);
  EXPECT_EQ((*journal)->bytes(), 0u);
}

TEST_F(MonitorLinkTest, DispatchNotesAreReadByTheNextSchedulerAndLeaveOnceItsOwnAreWritten) {
  testing::TempDir dir;
  const TaskId a = TaskId::Random();
  const TaskId b = TaskId::Random();
  {
    auto journal = Journal::Open(dir.path() / "journal");
    ASSERT_TRUE(journal.ok());
    link_.set_journal(journal->get());
    link_.dispatches().Add(a, 3, 1, 1);
    link_.dispatches().Add(b, 4, 1, 2);
    link_.WriteDispatches();             // no batch this turn: alone
    link_.dispatches().Add(a, 5, 2, 3);  // a retry, elsewhere
    Batch();
    EXPECT_EQ(link_.dispatches().kept(), 2u);
    link_.Flush(now_, /*now=*/true);
    link_.Acknowledged({1}, now_);
    link_.CoverDispatches(2);  // the first record only
    EXPECT_EQ(link_.dispatches().kept(), 1u);
    link_.set_journal(nullptr);  // then this scheduler is gone
  }
  // The next scheduler.
  MonitorLink next(link_socket_, builder_);
  next.set_enabled(true);
  auto journal = Journal::Open(dir.path() / "journal");
  ASSERT_TRUE(journal.ok());
  next.set_journal(journal->get());
  DispatchNotes notes;
  size_t batches = 0;
  for (Journal::Found& found : (*journal)->TakeFound()) {
    if (DispatchLog::IsRecord(found.batch)) {
      EXPECT_TRUE(DispatchLog::Read(found.batch, notes));
    } else {
      ++batches;
    }
    next.Adopt(std::move(found));
  }
  EXPECT_EQ(batches, 1u);
  ASSERT_EQ(notes.count(a), 1u);
  EXPECT_EQ(notes.at(a).engine_id, 5) << "the latest attempt";
  EXPECT_EQ(notes.at(a).attempt, 2);
  // The earlier scheduler's notes stay while the tasks are restored...
  EXPECT_EQ(next.dispatches().kept(), 2u);
  next.CoverDispatches(0);
  next.Flush(now_, /*now=*/true);
  next.Acknowledged({1}, now_);
  EXPECT_EQ(next.dispatches().kept(), 2u) << "restoring has not ended";
  // ... and until this one has written its own notes of those it restored
  // as running, and the batches sealed by then are acknowledged.
  next.dispatches().Add(a, 5, 2, 1);
  next.dispatches().HandOver();
  next.CoverDispatches(0);
  EXPECT_EQ(next.dispatches().kept(), 2u) << "its own not written yet";
  next.WriteDispatches();
  next.CoverDispatches(1);
  EXPECT_EQ(next.dispatches().kept(), 0u);
  EXPECT_EQ((*journal)->bytes(), 0u);
  EXPECT_EQ((*journal)->segments(), 1u) << "the earlier scheduler's file is gone";
}

TEST(DispatchLogTest, TheLatestAttemptOfATaskWinsAndARecordCutShortIsRefused) {
  DispatchLog log;
  const TaskId a = TaskId::Random();
  log.Add(a, 2, 3, 1);
  log.Add(a, 1, 2, 2);  // an earlier attempt noted later: not the latest
  protocol::Frames record = log.Record();
  ASSERT_TRUE(DispatchLog::IsRecord(record));
  DispatchNotes notes;
  ASSERT_TRUE(DispatchLog::Read(record, notes));
  EXPECT_EQ(notes.at(a).engine_id, 2);
  EXPECT_EQ(notes.at(a).attempt, 3);
  const std::string cut = record[1].to_string().substr(0, DispatchLog::kNoteBytes + 5);
  record[1] = protocol::Frame(cut);
  DispatchNotes none;
  EXPECT_FALSE(DispatchLog::Read(record, none));
  EXPECT_TRUE(none.empty());
  // A monitor batch is no record of notes.
  protocol::Frames batch(protocol::kBatchFrames);
  EXPECT_FALSE(DispatchLog::IsRecord(batch));
}

// Notes this scheduler could not write leave the earlier scheduler's in
// the journal for good: they still say where those tasks went.
TEST(DispatchLogTest, AnEarlierSchedulersNotesStayWhenTheirReplacementCannotBeWritten) {
  testing::TempDir dir;
  auto journal = Journal::Open(dir.path() / "journal");
  ASSERT_TRUE(journal.ok());
  DispatchLog log;
  log.Adopt(3);
  log.Add(TaskId::Random(), 1, 1, 1);
  log.HandOver();
  log.Written(-1);  // the append failed
  log.Add(TaskId::Random(), 1, 1, 2);
  log.Written(4);
  log.Cover(2, 1);
  log.AcknowledgedThrough(1, **journal);
  EXPECT_EQ(log.kept(), 1u) << "the adopted record, kept for good";
  // With nothing of its own to write, they go at once.
  DispatchLog other;
  other.Adopt(3);
  other.Cover(0, 1);
  other.AcknowledgedThrough(1, **journal);
  EXPECT_EQ(other.kept(), 1u) << "not handed over yet";
  other.HandOver();
  other.Cover(0, 1);
  other.AcknowledgedThrough(1, **journal);
  EXPECT_EQ(other.kept(), 0u);
}

}  // namespace
}  // namespace ztask::scheduler
