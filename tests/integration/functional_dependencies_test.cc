// Functional dependencies through real processes: a C++ function that
// throws UnmetDependency and a command that exits with the unmet code are
// tried on other engines, without using a retry, and fail with
// ImpossibleDependency once every engine has answered so.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, AFunctionUnmetOnSomeEnginesRunsWhereItCan) {
  // Each answer the engines give is marked: engine and attempt.
  const std::filesystem::path marks = dir_.path() / "marks";
  std::filesystem::create_directories(marks);
  ::setenv("ZTASK_TEST_MARKS", marks.c_str(), 1);
  StartCluster(3, {"--engine-program", kBin + "/test_picky_engine"});
  ::unsetenv("ZTASK_TEST_MARKS");
  ASSERT_TRUE(client_->WaitForEngines(3, 60).ok());
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  std::vector<TaskId> ids;
  std::vector<int32_t> wanted;
  for (const EngineStatus& e : *engines) {
    for (int k = 0; k < 3; ++k) {
      TaskOptions o;
      o.function = "runs_on";
      o.args = e.id;  // no retries: an unmet answer must not use one
      auto id = client_->Submit(o);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
      wanted.push_back(e.id);
    }
  }
  ASSERT_TRUE(client_->Wait(ids, 60).ok());
  auto records = client_->Fetch(ids);
  ASSERT_TRUE(records.ok());
  size_t moved = 0;  // tasks an engine answered unmet first
  for (size_t i = 0; i < ids.size(); ++i) {
    const TaskInfo& r = (*records)[i];
    EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
    EXPECT_EQ(r.engine_id, wanted[i]);
    EXPECT_EQ(r.result, wanted[i]);
    // Each engine answered it at most once (an unmet one is not asked
    // again), the last of them the one it runs on, as its recorded
    // attempt. Its attempts may count more: a task queued behind another
    // may be taken back, unstarted, for an idle engine, which counts its
    // dispatch but asks no engine (docs/architecture.md).
    std::ifstream in(marks / ids[i].ToHex());
    std::vector<std::pair<int32_t, int32_t>> answers;  // engine, attempt
    for (int32_t engine, attempt; in >> engine >> attempt;) answers.emplace_back(engine, attempt);
    ASSERT_FALSE(answers.empty()) << "task " << i << " was never answered";
    ASSERT_LE(answers.size(), 3u) << "task " << i << " was asked more than once somewhere";
    std::set<int32_t> asked;
    for (const auto& [engine, attempt] : answers) {
      EXPECT_TRUE(asked.insert(engine).second) << "engine " << engine << " asked twice";
    }
    EXPECT_EQ(answers.back().first, wanted[i]);
    EXPECT_EQ(answers.back().second, r.attempts);
    if (answers.size() > 1) ++moved;
  }
  // Spread by load, the first three alone put two where they are unmet.
  EXPECT_GE(moved, 2u);
}

TEST_F(ClusterTest, ATaskUnmetOnEveryEngineIsImpossible) {
  StartCluster(2, {"--engine-program", kBin + "/test_picky_engine"});
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  TaskOptions function;
  function.function = "runs_on";
  function.args = 99;
  function.retries = 5;
  TaskOptions command;
  command.command = {"sh", "-c", "exit \"$ZTASK_UNMET_EXIT_CODE\""};
  auto ids = client_->SubmitMany({function, command});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(client_->Wait(*ids, 60).ok());
  auto records = client_->Fetch(*ids);
  ASSERT_TRUE(records.ok());
  for (const TaskInfo& r : *records) {
    EXPECT_EQ(r.status, TaskState::kError);
    EXPECT_EQ(r.error_type, ErrorType::kImpossibleDependency);
    EXPECT_NE(r.error_message.find("unmet"), std::string::npos) << r.error_message;
    EXPECT_EQ(r.attempts, 2);  // once on each engine, no retry used
  }
  EXPECT_NE((*records)[0].error_message.find("not 99"), std::string::npos)
      << (*records)[0].error_message;
}

}  // namespace
}  // namespace ztask::testing
