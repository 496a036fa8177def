// The hub's retention bound (taskcluster start --max-finished-records),
// end to end: the oldest finished records go from the database and every
// query answers them as unknown, a new task naming one fails with
// InvalidDependency, a record a waiting task depends on stays, and without
// the flag every record stays.
#include <fstream>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

// `n` no-ops submitted at once and answered.
std::vector<TaskId> NoOps(Client& client, size_t n) {
  std::vector<TaskOptions> tasks(n);
  for (auto& t : tasks) t.function = "noop";
  auto ids = client.SubmitMany(tasks);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  if (!ids.ok()) return {};
  EXPECT_TRUE(client.WaitReplies(*ids, 60).ok());
  return *ids;
}

bool Unknown(Client& client, const TaskId& id) {
  auto fetched = client.Fetch({id});
  return !fetched.ok() && fetched.status().code() == Status::Code::kNotFound;
}

size_t Listed(Client& client) {
  auto all = client.List("");
  return all.ok() ? all->size() : 0;
}

TEST_F(ClusterTest, CountBoundDropsTheOldestRecordsAndADependencyOnOneFails) {
  // The scheduler remembers one outcome: a dependency is looked up in the hub.
  StartCluster(1, {"--max-finished-records", "50", "--keep-finished", "1"});
  ASSERT_TRUE(client_->WaitForEngines(1, 60).ok());
  const std::vector<TaskId> ids = NoOps(*client_, 300);
  ASSERT_EQ(ids.size(), 300u);
  ASSERT_TRUE(WaitFor([&] { return Listed(*client_) == 50; }, std::chrono::seconds(30)))
      << Listed(*client_) << " records listed";
  for (size_t i : {size_t{0}, size_t{100}, size_t{249}}) {
    EXPECT_TRUE(Unknown(*client_, ids[i])) << i;
  }
  std::vector<TaskId> kept(ids.end() - 50, ids.end());
  auto records = client_->Fetch(kept);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  for (const TaskInfo& r : *records) EXPECT_EQ(r.status, TaskState::kOk);

  Ran result = Ctl({"result", ids.front().ToHex()});
  EXPECT_NE(result.code, 0);
  EXPECT_NE(result.err.find("unknown task id " + ids.front().ToHex()), std::string::npos)
      << result.err;

  TaskOptions late;
  late.function = "noop";
  late.after.ids = {ids.front()};
  auto dependent = client_->SubmitMany({late});
  ASSERT_TRUE(dependent.ok());
  std::vector<TaskInfo> final_records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, *dependent, &final_records));
  EXPECT_EQ(final_records[0].error_type, ErrorType::kInvalidDependency);
  EXPECT_NE(final_records[0].error_message.find("retention"), std::string::npos)
      << final_records[0].error_message;
}

TEST_F(ClusterTest, ARecordAWaitingTaskDependsOnStaysPastTheBound) {
  StartCluster(2, {"--max-finished-records", "20", "--keep-finished", "1"});
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  const std::vector<TaskId> first = NoOps(*client_, 1);
  ASSERT_EQ(first.size(), 1u);
  // The gate: the slow task runs until the test opens it, so the waiting
  // task waits for as long as the test looks.
  const std::string gate = (dir_.path() / "gate").string();
  TaskOptions slow;
  slow.command = {"sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.01; done"};
  auto slow_id = client_->SubmitMany({slow});
  ASSERT_TRUE(slow_id.ok());
  TaskOptions waiting;
  waiting.function = "noop";
  waiting.after.ids = {first[0], slow_id->front()};
  auto waiting_id = client_->SubmitMany({waiting});
  ASSERT_TRUE(waiting_id.ok());
  const std::vector<TaskId> later = NoOps(*client_, 100);
  ASSERT_EQ(later.size(), 100u);
  // The bound has passed over the first task: older no-ops are gone.
  ASSERT_TRUE(WaitFor([&] { return Unknown(*client_, later.front()); }, std::chrono::seconds(30)));
  EXPECT_FALSE(Unknown(*client_, first[0])) << "a waiting task depends on it";
  std::ofstream(gate) << "go";
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, *waiting_id, &records));
  EXPECT_EQ(records[0].status, TaskState::kOk) << records[0].error_message;
}

// Refused by taskcluster before anything starts, with the hub's words.
TEST_F(ClusterTest, ARetentionBoundWithoutADatabaseFileIsOneLineAndExitCodeTwo) {
  for (const char* flag : {"--max-finished-records", "--drop-finished-after"}) {
    const Ran ran = RunProgram({kBin + "/taskcluster", "start", "--profile-dir", profile(), "-n",
                                "1", flag, "5", "--db", ":memory:"},
                               dir_);
    EXPECT_EQ(ran.code, 2) << flag << ": " << ran.err;
    EXPECT_EQ(ran.err, "taskcluster: a bound on the finished records needs a database file, "
                       "not :memory:\n")
        << flag;
  }
  const Ran zero = RunProgram({kBin + "/taskcluster", "start", "--profile-dir", profile(), "-n",
                               "1", "--daemonize", "--max-finished-records", "0", "--db",
                               ":memory:"},
                              dir_);
  EXPECT_EQ(zero.code, 0) << "0 is no bound: " << zero.err;
  RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
}

TEST_F(ClusterTest, WithoutABoundEveryFinishedRecordStays) {
  StartCluster(1);
  ASSERT_TRUE(client_->WaitForEngines(1, 60).ok());
  const std::vector<TaskId> ids = NoOps(*client_, 300);
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records));
  EXPECT_EQ(Listed(*client_), 300u);
  EXPECT_FALSE(Unknown(*client_, ids.front()));
}

}  // namespace
}  // namespace ztask::testing
