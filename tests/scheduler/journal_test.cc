// The scheduler's journal (journal.h): what one scheduler appends, the next
// finds, in order, across segments; a record cut short by a crash ends its
// segment; a segment goes once every batch in it is acknowledged; the
// earlier versions' single file is read and goes the same way.
#include "scheduler/journal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace ztask::scheduler {
namespace {

protocol::Frames Batch(std::vector<std::string> parts) {
  protocol::Frames frames;
  for (const std::string& p : parts) frames.push_back(protocol::Frame(p));
  return frames;
}

std::vector<std::vector<std::string>> Texts(const std::vector<protocol::Frames>& batches) {
  std::vector<std::vector<std::string>> out;
  for (const auto& batch : batches) {
    out.emplace_back();
    for (const auto& f : batch) out.back().emplace_back(protocol::View(f));
  }
  return out;
}

std::vector<std::vector<std::string>> Texts(const std::vector<Journal::Found>& found) {
  std::vector<std::vector<std::string>> out;
  for (const auto& f : found) {
    out.emplace_back();
    for (const auto& frame : f.batch) out.back().emplace_back(protocol::View(frame));
  }
  return out;
}

class JournalTest : public ::testing::Test {
 protected:
  std::unique_ptr<Journal> Open(size_t segment_bytes = Journal::kSegmentBytes) {
    auto journal = Journal::Open(path_, false, segment_bytes);
    EXPECT_TRUE(journal.ok()) << journal.status().ToString();
    return journal.ok() ? std::move(*journal) : nullptr;
  }
  // The journal's files in the directory.
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  testing::TempDir dir_;
  const std::filesystem::path path_ = dir_.path() / "scheduler.journal";
};

TEST_F(JournalTest, TheNextSchedulerFindsWhatTheLastAppended) {
  auto first = Open();
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->existed()) << "no scheduler ran in this profile before";
  EXPECT_TRUE(first->TakeFound().empty());
  ASSERT_TRUE(first->Append(Batch({"header", "a"})).ok());
  ASSERT_TRUE(first->Append(Batch({"header", "b", std::string(100000, 'x')})).ok());
  first.reset();

  auto second = Open();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->existed());
  const auto found = Texts(second->TakeFound());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], (std::vector<std::string>{"header", "a"}));
  EXPECT_EQ(found[1][2].size(), 100000u);
}

TEST_F(JournalTest, ARecordCutShortEndsItsSegmentAndLaterOnesAreRead) {
  auto first = Open();
  ASSERT_TRUE(first->Append(Batch({"whole"})).ok());
  ASSERT_TRUE(first->Append(Batch({"cut", std::string(1000, 'y')})).ok());
  const size_t whole = first->bytes();
  first.reset();
  // The crash cut the last record in its middle.
  std::filesystem::resize_file(dir_.path() / "scheduler.journal.1", whole - 500);

  auto second = Open();
  auto found = Texts(second->TakeFound());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], (std::vector<std::string>{"whole"}));
  ASSERT_TRUE(second->Append(Batch({"after"})).ok());
  second.reset();
  found = Texts(Open()->TakeFound());
  ASSERT_EQ(found.size(), 2u) << "the new record, in the next segment, is read too";
  EXPECT_EQ(found[1], (std::vector<std::string>{"after"}));
}

TEST_F(JournalTest, ASegmentGoesOnceEveryBatchInItIsAcknowledged) {
  // Segments of 100 bytes: two of these batches each.
  auto journal = Open(100);
  std::vector<int64_t> segments;
  for (int i = 0; i < 6; ++i) {
    auto segment = journal->Append(Batch({std::to_string(i), std::string(50, 'z')}));
    ASSERT_TRUE(segment.ok()) << segment.status().ToString();
    segments.push_back(*segment);
  }
  EXPECT_EQ(segments, (std::vector<int64_t>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(Files(), (std::vector<std::string>{"scheduler.journal.1", "scheduler.journal.2",
                                               "scheduler.journal.3"}));
  journal->Release(2);
  EXPECT_EQ(Files().size(), 3u) << "batch 3 is still in segment 2";
  journal->Release(2);
  journal->Release(1);
  journal->Release(1);
  EXPECT_EQ(Files(), (std::vector<std::string>{"scheduler.journal.3"}));
  journal->Release(3);
  journal->Release(3);
  EXPECT_EQ(journal->bytes(), 0u) << "the newest is emptied, and kept to append to";
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "scheduler.journal.3"), 0u);
  journal.reset();
  auto next = Open();
  EXPECT_TRUE(next->existed());
  EXPECT_TRUE(next->TakeFound().empty());
  EXPECT_EQ(Files(), (std::vector<std::string>{"scheduler.journal.4"}))
      << "an empty segment is not kept past a start";
}

TEST_F(JournalTest, TheEarlierVersionsFileIsReadFirstAndGoesOnceAcknowledged) {
  {
    auto earlier = Open();
    ASSERT_TRUE(earlier->Append(Batch({"old"})).ok());
  }
  // One file, PATH, as versions before segments wrote it (the same records).
  std::filesystem::rename(dir_.path() / "scheduler.journal.1", path_);
  auto journal = Open();
  ASSERT_TRUE(journal->Append(Batch({"new"})).ok());
  auto found = journal->TakeFound();
  ASSERT_EQ(Texts(found), (std::vector<std::vector<std::string>>{{"old"}}));
  EXPECT_EQ(found[0].segment, 0);
  journal.reset();
  journal = Open();
  found = journal->TakeFound();
  ASSERT_EQ(Texts(found), (std::vector<std::vector<std::string>>{{"old"}, {"new"}}))
      << "the earlier file first";
  for (const auto& f : found) journal->Release(f.segment);
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_EQ(journal->segments(), 1u);
}

TEST_F(JournalTest, AFileWhoseNumberIsNotOneTheJournalMakesIsLeftAlone) {
  {
    auto first = Open();
    ASSERT_TRUE(first->Append(Batch({"a"})).ok());
  }
  // "01" names 1 as well: read twice, or deleted for segment 1, it would
  // repeat or lose batches.
  std::filesystem::copy_file(dir_.path() / "scheduler.journal.1",
                             dir_.path() / "scheduler.journal.01");
  auto journal = Open();
  auto found = journal->TakeFound();
  ASSERT_EQ(Texts(found), (std::vector<std::vector<std::string>>{{"a"}}));
  journal->Release(found[0].segment);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "scheduler.journal.1"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "scheduler.journal.01"));
}

TEST_F(JournalTest, AnUnwritableDirectoryIsAClearError) {
  auto journal = Journal::Open(dir_.path() / "no-such-dir" / "scheduler.journal");
  ASSERT_FALSE(journal.ok());
  EXPECT_NE(journal.status().message().find("cannot open the journal"), std::string::npos)
      << journal.status().message();
}

TEST_F(JournalTest, AnAppendThatFailsPartWayBeginsANewSegment) {
  // In a child: its file size limit lets the third batch in only in part
  // (EFBIG, the signal ignored); with the limit lifted the fourth goes on.
  const std::string payload(4096, 'p');
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    auto journal = Journal::Open(path_);
    if (!journal.ok()) ::_exit(3);
    for (int i = 0; i < 2; ++i) {
      if (!(*journal)->Append(Batch({std::to_string(i), payload})).ok()) ::_exit(4);
    }
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    const rlimit low{(*journal)->bytes() + 100, limit.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &low);
    if ((*journal)->Append(Batch({"2", payload})).ok()) ::_exit(5);
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto fourth = (*journal)->Append(Batch({"3", payload}));
    if (!fourth.ok() || *fourth != 2) ::_exit(6);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const auto found = Texts(Open()->TakeFound());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0][0], "0");
  EXPECT_EQ(found[1][0], "1");
  EXPECT_EQ(found[2][0], "3") << "after the record cut short, in the next segment";
}

// A full disk: the journal's next segment is /dev/full (a link to it,
// which the journal's own directory may hold), whose writes fail with
// ENOSPC. The batch goes to the spill directory instead, the next segment
// is begun at home again, and the next scheduler finds all of them in
// order; a spilled segment goes once acknowledged.
TEST_F(JournalTest, ABatchTheDiskRefusesIsSpilledAndFoundByTheNextScheduler) {
  const std::filesystem::path spill = dir_.path() / "spill";
  auto open = [&] {
    auto journal = Journal::Open(path_, false, 16, spill);
    EXPECT_TRUE(journal.ok()) << journal.status().ToString();
    return journal.ok() ? std::move(*journal) : nullptr;
  };
  auto first = open();
  ASSERT_TRUE(first);
  auto before = first->Append(Batch({"a", "before"}));  // segment 1, full
  ASSERT_TRUE(before.ok() && *before == 1);
  EXPECT_FALSE(std::filesystem::exists(spill)) << "made only when needed";
  std::filesystem::create_symlink("/dev/full", dir_.path() / "scheduler.journal.2");
  auto spilled = first->Append(Batch({"b", "refused"}));
  ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
  EXPECT_TRUE(first->spilling());
  EXPECT_EQ(first->spilled_segments(), 1u);
  EXPECT_TRUE(std::filesystem::exists(spill / ("scheduler.journal." + std::to_string(*spilled))));
  auto after = first->Append(Batch({"c", "after"}));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(first->spilling()) << "the next segment is begun at home";
  EXPECT_TRUE(std::filesystem::exists(path_.string() + "." + std::to_string(*after)));
  first.reset();  // killed: nothing acknowledged
  ASSERT_TRUE(std::filesystem::exists(spill)) << "a spill directory that holds a batch stays";

  auto second = open();
  ASSERT_TRUE(second);
  std::vector<Journal::Found> found = second->TakeFound();
  const auto texts = Texts(found);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_EQ(texts[0][0], "a");
  EXPECT_EQ(texts[1][0], "b") << "the spilled batch, in its place";
  EXPECT_EQ(texts[2][0], "c");
  for (const auto& f : found) second->Release(f.segment);
  EXPECT_EQ(second->spilled_segments(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(spill)) << "the spilled segment goes once acknowledged";
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(spill)) << "an empty spill directory goes with the journal";
}

// The spill directory is in a shared place: one that others may enter (or
// another account's) is neither read nor written.
TEST_F(JournalTest, ASpillDirectoryOthersMayEnterIsNeitherReadNorWritten) {
  const std::filesystem::path spill = dir_.path() / "spill";
  std::filesystem::create_directory(spill);
  {
    auto planted = Journal::Open(dir_.path() / "elsewhere.journal");
    ASSERT_TRUE(planted.ok());
    ASSERT_TRUE((*planted)->Append(Batch({"planted"})).ok());
  }
  std::filesystem::copy_file(dir_.path() / "elsewhere.journal.1", spill / "scheduler.journal.7");
  ::chmod(spill.c_str(), 0755);
  auto journal = Journal::Open(path_, false, 16, spill);
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  EXPECT_TRUE(Texts((*journal)->TakeFound()).empty()) << "a batch planted there is not read";
  ASSERT_TRUE((*journal)->Append(Batch({"a", "before"})).ok());
  std::filesystem::create_symlink("/dev/full", dir_.path() / "scheduler.journal.2");
  EXPECT_FALSE((*journal)->Append(Batch({"b", "refused"})).ok()) << "nor written to";
  EXPECT_EQ((*journal)->spilled_segments(), 0u);
}

TEST_F(JournalTest, WithoutASpillDirectoryABatchTheDiskRefusesIsAnError) {
  auto journal = Open(16);
  ASSERT_TRUE(journal->Append(Batch({"a", "before"})).ok());
  std::filesystem::create_symlink("/dev/full", dir_.path() / "scheduler.journal.2");
  auto refused = journal->Append(Batch({"b", "refused"}));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("No space left"), std::string::npos)
      << refused.status().message();
}

class JournalCrash : public JournalTest, public ::testing::WithParamInterface<bool> {};

// With and without syncing to disk (durability power or process).
TEST_P(JournalCrash, ACrashMidAppendLosesNoWholeBatch) {
  const std::string payload(4096, 'p');
  std::vector<protocol::Frames> batches;
  for (int i = 0; i < 64; ++i) batches.push_back(Batch({std::to_string(i), payload}));
  // A child appends to segments of 64 KiB and is killed by the kernel
  // part way through a record of the fourth segment (SIGXFSZ: its file
  // size limit, set then, is within a segment), as a crash would.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto journal = Journal::Open(path_, GetParam(), 64 << 10);
    if (!journal.ok()) ::_exit(3);
    const rlimit limit{30000, 30000};  // within a segment, in a record's middle
    for (const auto& batch : batches) {
      if (static_cast<int64_t>((*journal)->bytes()) > (3 << 16)) ::setrlimit(RLIMIT_FSIZE, &limit);
      if (!(*journal)->Append(batch).ok()) ::_exit(4);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the append was cut short by the kernel: " << status;
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  auto next = Open();
  ASSERT_NE(next, nullptr);
  const auto found = Texts(next->TakeFound());
  ASSERT_GE(found.size(), 48u);
  ASSERT_LT(found.size(), batches.size());
  const auto all = Texts(batches);
  EXPECT_EQ(found, std::vector<std::vector<std::string>>(all.begin(), all.begin() + found.size()))
      << "every batch before the cut, whole, in order";
}

INSTANTIATE_TEST_SUITE_P(SyncedOrNot, JournalCrash, ::testing::Bool());

}  // namespace
}  // namespace ztask::scheduler
