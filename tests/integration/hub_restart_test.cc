// Records survive a hub killed outright (SQLite, and what the scheduler
// keeps until the hub says it is written), with each process started by
// hand.
#include <signal.h>

#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

TEST(HubRestart, RecordsSurviveAKilledHubAndAreServedAgain) {
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  auto hub = std::make_unique<ChildProcess>(
      std::vector<std::string>{kBin + "/taskhub", "--profile-dir", profile}, dir.path() / "hub.log");
  auto connection = [&] { return dir.path() / "p" / "ztask-cluster.json"; };
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(connection()); }));
  ChildProcess scheduler({kBin + "/taskscheduler", "--profile-dir", profile},
                         dir.path() / "scheduler.log");
  ASSERT_TRUE(WaitFor([&] { return Client::Connect(profile).ok(); })) << scheduler.Log();
  ChildProcess engine({kBin + "/taskengine", "--profile-dir", profile}, dir.path() / "engine.log");
  auto client = Client::Connect(profile);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitForEngines(1, 30).ok());
  TaskOptions options;
  options.command = {"echo", "durable"};
  auto id = (*client)->Submit(options);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*client)->Wait({*id}, 60).ok());

  const std::string old_query = protocol::ReadConnectionFile(connection())->hub.query;
  // No chance to flush or close anything: the record may still be only in
  // its memory.
  hub->Kill(SIGKILL);
  ASSERT_TRUE(hub->Wait(std::chrono::seconds(10)).has_value());
  hub = std::make_unique<ChildProcess>(
      std::vector<std::string>{kBin + "/taskhub", "--profile-dir", profile},
      dir.path() / "hub2.log");
  // The new hub binds where the old one was, so its peers reconnect.
  ASSERT_TRUE(WaitFor([&] {
    auto info = protocol::ReadConnectionFile(connection());
    return info.ok() && info->hub.query == old_query;
  })) << hub->Log();
  // The record the old hub had in memory only comes back with the batch the
  // scheduler sends again (it was never acknowledged): a moment after the
  // new hub answers.
  std::optional<TaskInfo> record;
  ASSERT_TRUE(WaitFor([&] {
    auto fetched = (*client)->Fetch({*id});  // the same client: its socket reconnected
    if (fetched.ok()) record = (*fetched)[0];
    return record.has_value() && record->finished();
  }, std::chrono::seconds(20))) << hub->Log();
  EXPECT_EQ(record->status, TaskState::kOk);
  record.reset();
  ASSERT_TRUE(WaitFor([&] {
    auto again = Client::Connect(profile);
    if (!again.ok()) return false;
    auto fetched = (*again)->Fetch({*id});
    if (fetched.ok()) record = (*fetched)[0];
    return record.has_value() && record->finished();
  }, std::chrono::seconds(20))) << hub->Log();
  EXPECT_EQ(record->status, TaskState::kOk);
  EXPECT_EQ(record->stdout_text, "durable\n");
}

}  // namespace
}  // namespace ztask::testing
