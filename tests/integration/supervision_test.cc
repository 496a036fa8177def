// Engines that die come back: same name, same id, no task; and an engine that
// keeps dying is given up while the rest of the cluster goes on.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <set>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

class Supervision : public ClusterTest {
 protected:
  std::optional<EngineStatus> EngineWithId(int32_t id) {
    auto engines = client_->Engines();
    if (!engines.ok()) return std::nullopt;
    for (const auto& e : *engines) {
      if (e.id == id) return e;
    }
    return std::nullopt;
  }
  // Kills engine `id` and waits until it runs again under a new pid.
  EngineStatus KillAndAwaitReturn(int32_t id) {
    auto before = EngineWithId(id);
    EXPECT_TRUE(before.has_value());
    EXPECT_EQ(::kill(static_cast<pid_t>(before->pid), SIGKILL), 0);
    std::optional<EngineStatus> after;
    EXPECT_TRUE(WaitFor([&] {
      after = EngineWithId(id);
      return after && after->state == EngineState::kRunning && after->pid != before->pid;
    }, std::chrono::seconds(30)));
    return after.value_or(EngineStatus{});
  }
};

TEST_F(Supervision, AKilledEngineComesBackWithItsIdWhileItsTaskIsRetriedElsewhere) {
  StartCluster(2, {"--restart-backoff", "0.1", "--max-restarts", "5"});
  const std::string id =
      Submit({"--retries", "1", "--", "sh", "-c", "[ $ZTASK_ATTEMPT -ge 2 ] || sleep 60"});
  std::optional<int32_t> engine;
  ASSERT_TRUE(WaitFor([&] {
    auto r = client_->Fetch({*TaskId::FromHex(id)});
    if (r.ok() && (*r)[0].status == TaskState::kRunning) engine = (*r)[0].engine_id;
    return engine.has_value();
  }));
  const EngineStatus back = KillAndAwaitReturn(*engine);
  EXPECT_EQ(back.restarts, 1);
  auto r = Wait({id});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["status"], "ok") << r[0].dump();
  EXPECT_EQ(r[0]["attempts"], 2);
  // The restarted engine takes new tasks under its old id.
  auto again = Wait({Submit({"--targets", std::to_string(*engine), "--fn", "echo", "--args", "1"})});
  EXPECT_EQ(again[0]["engine_id"], *engine);
  EXPECT_EQ(again[0]["status"], "ok");
}

TEST_F(Supervision, AnEngineThatKeepsDyingIsGivenUpAndTheRestGoOn) {
  StartCluster(2, {"--restart-backoff", "0.05", "--max-restarts", "2"});
  KillAndAwaitReturn(0);
  KillAndAwaitReturn(0);
  auto last = EngineWithId(0);
  ASSERT_TRUE(last.has_value());
  ASSERT_EQ(::kill(static_cast<pid_t>(last->pid), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    auto e = EngineWithId(0);
    return e && e->state == EngineState::kFailed;
  }, std::chrono::seconds(30)));
  // A failed engine is listed with --all (the live ones without it).
  EXPECT_EQ(Value::parse(Ctl({"engines", "--json"}).out).size(), 1u);
  Ran engines = Ctl({"engines", "--all", "--json"});
  Value list = Value::parse(engines.out);
  ASSERT_EQ(list.size(), 2u) << engines.out;
  EXPECT_EQ(list[1]["state"], "failed");
  EXPECT_EQ(list[1]["restarts"], 2);
  EXPECT_EQ(list[0]["state"], "running");
  auto r = Wait({Submit({"--fn", "echo", "--args", "\"still working\""})});
  EXPECT_EQ(r[0]["result"], "still working");
  EXPECT_EQ(r[0]["engine_id"], 1);
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, LaunchTimeoutStopsWhatItStartedAndSaysHowMany) {
  const auto never = dir_.path() / "never-registers";
  const auto pids = dir_.path() / "engine-pids";
  std::ofstream(never) << "#!/bin/sh\necho $$ >> '" << pids.string() << "'\nexec sleep 600\n";
  std::filesystem::permissions(never, std::filesystem::perms::owner_all);
  Ran started = RunProgram({kBin + "/taskcluster", "start", "-n", "2", "--profile-dir", profile(),
                            "--launch-timeout", "1", "--engine-program", never.string(),
                            "--daemonize"},
                           dir_);
  EXPECT_EQ(started.code, 2);
  EXPECT_NE(started.err.find("0 of 2 engines registered within"), std::string::npos) << started.err;
  EXPECT_NE(started.err.find((dir_.path() / "profile" / "logs").string()), std::string::npos)
      << started.err;
  // Nothing is left running: the profile is free again.
  Ran stop = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(stop.code, 2);
  EXPECT_NE(stop.err.find("no cluster is running"), std::string::npos);
  // Each engine it started wrote its pid (the command lines of taskcluster
  // itself, still exiting, name the script too: they are not looked at).
  std::istringstream engines(ReadFile(pids));
  int count = 0;
  for (pid_t pid; engines >> pid; ++count) {
    EXPECT_FALSE(cluster::ProcessRunning(pid)) << "engine " << pid << " is still running";
  }
  EXPECT_GE(count, 1) << "the engines were started";
}

TEST_F(ClusterTest, EachEngineGetsItsOwnTaskAndWaitEnginesWaits) {
  StartCluster(3);
  Ran waited = Ctl({"wait-engines", "3", "--timeout", "10"});
  EXPECT_EQ(waited.code, 0) << waited.err;
  Ran too_many = Ctl({"wait-engines", "4", "--timeout", "0.3"});
  EXPECT_EQ(too_many.code, 3);
  EXPECT_NE(too_many.err.find("3 of 4 engines"), std::string::npos) << too_many.err;
  Ran each = Ctl({"submit", "--each-engine", "--", "sh", "-c", "echo $ZTASK_ENGINE_ID"});
  ASSERT_EQ(each.code, 0) << each.err;
  auto ids = each.Lines();
  ASSERT_EQ(ids.size(), 3u);
  std::set<std::string> outputs;
  for (const auto& r : Wait(ids)) {
    EXPECT_EQ(r["stdout"], r["engine_id"].dump() + "\n");
    outputs.insert(r["stdout"].get<std::string>());
  }
  EXPECT_EQ(outputs.size(), 3u) << "one task on each engine";
  Ran status = RunProgram({kBin + "/taskcluster", "status", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find("engines: 3 started (3 running, 0 failed), 0 restarts"),
            std::string::npos) << status.out;
  EXPECT_NE(status.out.find("tasks: 3 ok, 0 failed, 0 unfinished"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("to the last task finished"), std::string::npos) << status.out;
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

// A profile whose path holds a space: its Unix sockets (and the control
// socket's address, read back by `taskcluster scale`) hold it too.
TEST_F(ClusterTest, AProfileWithASpaceInItsPathRunsAndScales) {
  profile_name_ = "my profile";
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  Ran up = RunProgram({kBin + "/taskcluster", "scale", "2", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(up.code, 0) << up.err;
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  auto records = Wait({Submit({"--", "true"})});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
}

TEST_F(ClusterTest, ScalingUpAndDownUnderLoadLosesNothing) {
  StartCluster(2);
  std::vector<TaskId> ids;
  auto submit = [&](int n) {
    for (int i = 0; i < n; ++i) {
      TaskOptions options;
      options.function = "sleep";
      options.args = 0.02;
      auto id = client_->Submit(options);
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
    }
  };
  submit(60);
  Ran up = RunProgram({kBin + "/taskcluster", "scale", "4", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(up.code, 0) << up.err;
  // The load goes on until the engines added take work: the scheduler
  // links an engine a moment after the hub lists it, longer on a slow
  // machine, and one told to drain before that takes none.
  std::set<int32_t> engines_used;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (engines_used.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    const size_t from = ids.size();
    submit(20);
    const std::vector<TaskId> batch(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    ASSERT_TRUE(client_->Wait(batch, 60).ok());
    auto done = client_->Fetch(batch);
    ASSERT_TRUE(done.ok());
    for (const auto& r : *done) {
      if (r.engine_id) engines_used.insert(*r.engine_id);
    }
  }
  ASSERT_EQ(engines_used.size(), 4u) << "the engines added took work";
  submit(60);
  Ran down = RunProgram({kBin + "/taskcluster", "scale", "1", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(down.code, 0) << down.err;
  submit(20);
  ASSERT_TRUE(client_->Wait(ids, 120).ok());
  auto records = client_->Fetch(ids);
  ASSERT_TRUE(records.ok());
  for (const auto& r : *records) {
    EXPECT_TRUE(r.ok()) << r.ToJson().dump();
    EXPECT_EQ(r.attempts, 1) << "a shrink must not fail a task over";
  }
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  EXPECT_EQ(std::count_if(engines->begin(), engines->end(),
                          [](const auto& e) { return e.state == EngineState::kRunning; }), 1);
  EXPECT_EQ(std::count_if(engines->begin(), engines->end(),
                          [](const auto& e) { return e.state == EngineState::kStopped; }), 3);
  Ran mpi = RunProgram({kBin + "/taskcluster", "scale", "0", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(mpi.code, 2) << "at least one engine";
}

}  // namespace
}  // namespace ztask::testing
