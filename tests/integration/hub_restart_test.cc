// Records survive a hub killed outright (SQLite, and what the scheduler
// keeps until the hub says it is written), with each process started by
// hand.
#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

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

// The hub holds a new task's record back from its file (to write a task
// that ends soon once); the scheduler keeps the batch that carried it until
// the hub has written it. A hub killed while tasks stream in, none of them
// able to run, loses none of their records.
TEST(HubRestart, RecordsHeldBackFromTheFileSurviveAKilledHub) {
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  auto hub = std::make_unique<ChildProcess>(
      std::vector<std::string>{kBin + "/taskhub", "--profile-dir", profile},
      dir.path() / "hub.log");
  const auto connection = dir.path() / "p" / "ztask-cluster.json";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(connection); }));
  ChildProcess scheduler({kBin + "/taskscheduler", "--profile-dir", profile},
                         dir.path() / "scheduler.log");
  ASSERT_TRUE(WaitFor([&] { return Client::Connect(profile).ok(); })) << scheduler.Log();

  // No engine: every task waits, and its record changes no more once made.
  std::mutex mutex;
  std::vector<TaskId> ids;
  std::atomic<bool> stop{false};
  std::thread submitter([&] {
    auto client = Client::Connect(profile);
    if (!client.ok()) return;
    TaskOptions options;
    options.command = {"true"};
    const std::vector<TaskOptions> tasks(50, options);
    while (!stop.load()) {
      auto sent = (*client)->SubmitMany(tasks);
      if (!sent.ok()) break;
      {
        const std::lock_guard<std::mutex> lock(mutex);
        ids.insert(ids.end(), sent->begin(), sent->end());
      }
      // Paced, so that batches keep coming to the hub when it is killed.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto submitted = [&] {
    const std::lock_guard<std::mutex> lock(mutex);
    return ids.size();
  };
  ASSERT_TRUE(WaitFor([&] { return submitted() >= 10000; }, std::chrono::seconds(60)))
      << submitted() << " submitted\n"
      << hub->Log();
  hub->Kill(SIGKILL);
  stop.store(true);
  submitter.join();
  ASSERT_TRUE(hub->Wait(std::chrono::seconds(10)).has_value());
  hub = std::make_unique<ChildProcess>(
      std::vector<std::string>{kBin + "/taskhub", "--profile-dir", profile},
      dir.path() / "hub2.log");

  std::unique_ptr<Client> reader;
  ASSERT_TRUE(WaitFor([&] {
    auto again = Client::Connect(profile);
    if (!again.ok()) return false;
    reader = std::move(*again);
    return true;
  })) << hub->Log();
  auto records = reader->FetchWhen(ids, /*finished=*/false, 30);
  ASSERT_TRUE(records.ok()) << records.status().ToString() << "\n" << hub->Log();
  ASSERT_EQ(records->size(), ids.size());
  for (const TaskInfo& r : *records) {
    ASSERT_EQ(r.status, TaskState::kWaiting) << r.id.ToHex();
  }
}

}  // namespace
}  // namespace ztask::testing
