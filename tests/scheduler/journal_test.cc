// The scheduler's journal (journal.h): what one scheduler appends, the next
// finds; a record cut short by a crash ends the file; a rewrite keeps only
// what it is given, and a rewrite cut short keeps the old journal whole.
#include "scheduler/journal.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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

class JournalTest : public ::testing::Test {
 protected:
  std::unique_ptr<Journal> Open() {
    auto journal = Journal::Open(dir_.path() / "scheduler.journal");
    EXPECT_TRUE(journal.ok()) << journal.status().ToString();
    return journal.ok() ? std::move(*journal) : nullptr;
  }
  testing::TempDir dir_;
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

TEST_F(JournalTest, ARecordCutShortEndsTheFileAndIsWrittenOver) {
  auto first = Open();
  ASSERT_TRUE(first->Append(Batch({"whole"})).ok());
  ASSERT_TRUE(first->Append(Batch({"cut", std::string(1000, 'y')})).ok());
  const size_t whole = first->bytes();
  first.reset();
  // The crash cut the last record in its middle.
  std::filesystem::resize_file(dir_.path() / "scheduler.journal", whole - 500);

  auto second = Open();
  auto found = Texts(second->TakeFound());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], (std::vector<std::string>{"whole"}));
  ASSERT_TRUE(second->Append(Batch({"after"})).ok());
  second.reset();
  found = Texts(Open()->TakeFound());
  ASSERT_EQ(found.size(), 2u) << "the new record follows the last whole one";
  EXPECT_EQ(found[1], (std::vector<std::string>{"after"}));
}

TEST_F(JournalTest, ARewriteKeepsOnlyTheBatchesGiven) {
  auto journal = Open();
  const protocol::Frames a = Batch({"a"}), b = Batch({"b"}), c = Batch({"c"});
  for (const auto* batch : {&a, &b, &c}) ASSERT_TRUE(journal->Append(*batch).ok());
  ASSERT_TRUE(journal->Rewrite({&b}).ok());
  journal.reset();
  EXPECT_EQ(Texts(Open()->TakeFound()), (std::vector<std::vector<std::string>>{{"b"}}));
  journal = Open();
  ASSERT_TRUE(journal->Rewrite({}).ok());
  EXPECT_EQ(journal->bytes(), 0u);
  journal.reset();
  EXPECT_TRUE(Open()->TakeFound().empty());
}

TEST_F(JournalTest, AnUnwritableDirectoryIsAClearError) {
  auto journal = Journal::Open(dir_.path() / "no-such-dir" / "scheduler.journal");
  ASSERT_FALSE(journal.ok());
  EXPECT_NE(journal.status().message().find("cannot open the journal"), std::string::npos)
      << journal.status().message();
}

class JournalCrash : public JournalTest, public ::testing::WithParamInterface<bool> {};

// With and without syncing to disk (durability power or process).
TEST_P(JournalCrash, ACrashMidRewriteLeavesTheOldJournalWhole) {
  const std::string payload(4096, 'p');
  std::vector<protocol::Frames> batches;
  for (int i = 0; i < 64; ++i) batches.push_back(Batch({std::to_string(i), payload}));
  // A child appends every batch, then rewrites the journal with the last
  // 48 and is killed by the kernel part way (SIGXFSZ: its file size limit
  // is a third of the journal), as a crash would.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto journal = Journal::Open(dir_.path() / "scheduler.journal", GetParam());
    if (!journal.ok()) ::_exit(3);
    for (const auto& batch : batches) {
      if (!(*journal)->Append(batch).ok()) ::_exit(4);
    }
    const rlimit limit{(*journal)->bytes() / 3, (*journal)->bytes() / 3};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::vector<const protocol::Frames*> live;
    for (size_t i = 16; i < batches.size(); ++i) live.push_back(&batches[i]);
    (void)(*journal)->Rewrite(live);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the rewrite was cut short by the kernel: " << status;
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  auto next = Open();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(Texts(next->TakeFound()), Texts(batches)) << "every batch, none cut";
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "scheduler.journal.new"));
}

INSTANTIATE_TEST_SUITE_P(SyncedOrNot, JournalCrash, ::testing::Bool());

TEST_F(JournalTest, ARewriteThatFailsKeepsTheJournalAsItWas) {
  auto journal = Open();
  ASSERT_NE(journal, nullptr);
  std::vector<protocol::Frames> batches;
  batches.push_back(Batch({"a"}));
  batches.push_back(Batch({"b"}));
  for (const auto& batch : batches) ASSERT_TRUE(journal->Append(batch).ok());
  // The new file cannot be made where a directory stands.
  std::filesystem::create_directory(dir_.path() / "scheduler.journal.new");
  std::vector<const protocol::Frames*> live = {&batches[1]};
  EXPECT_FALSE(journal->Rewrite(live).ok());
  ASSERT_TRUE(journal->Append(Batch({"c"})).ok()) << "appends go on to the old file";
  std::filesystem::remove(dir_.path() / "scheduler.journal.new");
  journal.reset();
  EXPECT_EQ(Texts(Open()->TakeFound()),
            (std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"c"}}));
}

}  // namespace
}  // namespace ztask::scheduler
