// Functional dependencies through real processes: a C++ function that
// throws UnmetDependency and a command that exits with the unmet code are
// tried on other engines, without using a retry, and fail with
// ImpossibleDependency once every engine has answered so.
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, AFunctionUnmetOnSomeEnginesRunsWhereItCan) {
  StartCluster(3, {"--engine-program", kBin + "/test_picky_engine"});
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
  for (size_t i = 0; i < ids.size(); ++i) {
    const TaskInfo& r = (*records)[i];
    EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
    EXPECT_EQ(r.engine_id, wanted[i]);
    EXPECT_EQ(r.result, wanted[i]);
    EXPECT_LE(r.attempts, 3);
  }
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
