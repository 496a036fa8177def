// A long history: a hub holding 1.1 million finished records (more than one
// reply may list) when the scheduler is killed with tasks running. The
// restarted scheduler reads the tasks in flight (not the history), and the
// tasks that ran finish; every record comes page by page; taskcluster then starts a
// cluster on that history and reports on it.
#include <signal.h>

#include <chrono>

#include "base/clock.h"
#include "hub/store.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

// Writes `count` finished records (no-ops that succeeded) into the task
// database of `profile`, as a hub would have.
void SeedFinished(const std::filesystem::path& profile, size_t count) {
  std::filesystem::create_directories(profile);
  auto store = hub::TaskStore::Open((profile / "tasks.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  protocol::TaskSpec spec;
  spec.kind = "function";
  spec.function = "noop";
  const int64_t now = base::WallMicros();
  for (size_t i = 0; i < count; ++i) {
    const protocol::Header header{TaskId::Random(), protocol::MsgType::kTaskRequest, "seed", now};
    ASSERT_TRUE((*store)->Submitted(header, {}, spec, {}));
    protocol::OutcomeMeta meta;
    meta.engine_id = 0;
    meta.attempt = 1;
    ASSERT_TRUE((*store)->Outcome(header.id, meta, {}, now));
    if (i % 100000 == 99999) {
      ASSERT_TRUE((*store)->Flush().ok());
    }
  }
  ASSERT_TRUE((*store)->Flush().ok());
}

TEST(LongHistory, ASchedulerKilledOverAMillionRecordsRecoversAndItsTasksFinish) {
#ifdef ZTASK_SANITIZED
  GTEST_SKIP() << "a million records are the point, and take minutes under a sanitizer";
#endif
  TempDir dir;
  const auto profile = dir.path() / "p";
  constexpr size_t kFinished = 1100000;
  const auto seeding = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(SeedFinished(profile, kFinished));
  std::printf("%zu finished records written in %.1f s\n", kFinished,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - seeding).count());

  auto start = [&](const std::string& program, const std::string& log) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{kBin + "/" + program, "--profile-dir", profile.string()},
        dir.path() / log);
  };
  auto hub = start("taskhub", "hub.log");
  const auto connection = protocol::ConnectionFilePath(profile);
  ASSERT_TRUE(WaitFor([&] {
    auto info = protocol::ReadConnectionFile(connection);
    return info.ok() && !info->hub.query.empty();
  }, std::chrono::seconds(120))) << hub->Log();
  auto scheduler = start("taskscheduler", "scheduler.log");
  ASSERT_TRUE(WaitFor([&] { return Client::Connect(profile).ok(); }, std::chrono::seconds(120)))
      << scheduler->Log();
  ChildProcess engine({kBin + "/taskengine", "--profile-dir", profile.string()},
                      dir.path() / "engine.log");
  auto client = Client::Connect(profile);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitForEngines(1, 60).ok());

  // Ten short tasks: one runs, nine wait, when the scheduler dies.
  std::vector<TaskId> ids;
  for (int i = 0; i < 10; ++i) {
    TaskOptions o;
    o.command = {"sleep", "0.3"};
    auto id = (*client)->Submit(o);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  ASSERT_TRUE(WaitFor([&] {
    auto records = (*client)->Fetch({ids[0]});
    return records.ok() && (*records)[0].status == TaskState::kRunning;
  }, std::chrono::seconds(60)));
  scheduler->Kill(SIGKILL);
  ASSERT_TRUE(scheduler->Wait(std::chrono::seconds(10)).has_value());
  const auto restarted = std::chrono::steady_clock::now();
  scheduler = start("taskscheduler", "scheduler-2.log");

  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(**client, ids, &records, std::chrono::seconds(180)))
      << scheduler->Log();
  for (const TaskInfo& r : records) EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
  std::printf("with %zu finished records, all 10 tasks ended %.1f s after the scheduler "
              "restarted\n",
              kFinished,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count());
  EXPECT_EQ(scheduler->Log().find("still asking"), std::string::npos) << scheduler->Log();

  // Every record, which no single reply could hold, comes page by page.
  auto every = (*client)->FetchAll();
  ASSERT_TRUE(every.ok()) << every.status().ToString();
  EXPECT_EQ(every->size(), kFinished + ids.size());

  // The same history through taskcluster: it waits while the hub loads and
  // the scheduler recovers, however long each takes while it makes progress.
  client->reset();
  scheduler.reset();
  hub.reset();
  Ran started = RunProgram({kBin + "/taskcluster", "start", "--profile-dir", profile.string(),
                            "-n", "1", "--daemonize"},
                           dir, 300);
  EXPECT_EQ(started.code, 0) << started.out << started.err;
  auto again = Client::Connect(profile);
  ASSERT_TRUE(again.ok());
  auto all = (*again)->Fetch(ids);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)[9].status, TaskState::kOk);
  Ran status = RunProgram({kBin + "/taskcluster", "status", "--profile-dir", profile.string()},
                          dir, 120);
  EXPECT_EQ(status.code, 0) << status.out << status.err;
  EXPECT_NE(status.out.find(std::to_string(kFinished + ids.size())), std::string::npos)
      << status.out;
  Ran stopped =
      RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile.string()}, dir, 120);
  EXPECT_EQ(stopped.code, 0) << stopped.out << stopped.err;
}

}  // namespace
}  // namespace ztask::testing
