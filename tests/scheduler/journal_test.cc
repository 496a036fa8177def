// The scheduler's journal (journal.h): what one scheduler appends, the next
// finds; a record cut short by a crash ends the file; a rewrite keeps only
// what it is given.
#include "scheduler/journal.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ztask::scheduler
