// What a peer without the key can do to a signed cluster: read engines' ids
// on the notifier and claim them as routing ids, subscribe and never read.
// And the files a cluster leaves: its user's only.
#include <signal.h>
#include <sys/stat.h>

#include <set>
#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/wire.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

// Messages that reached a socket of the intruder's, read without waiting.
size_t Received(zmq::socket_t& socket) {
  size_t count = 0;
  protocol::Frames frames;
  while (protocol::TryReceive(socket, frames)) ++count;
  return count;
}

TEST_F(ClusterTest, AKeylessPeerThatClaimsEnginesIdsReceivesNoTaskAndEveryTaskFinishes) {
  StartCluster(2);
  // The intruder knows the endpoints (any port scan finds them), not the key.
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  zmq::context_t context(1);
  // 1. The notifier: every notice names an engine's uuid in clear.
  zmq::socket_t notices(context, zmq::socket_type::sub);
  notices.set(zmq::sockopt::subscribe, "");
  notices.set(zmq::sockopt::linger, 0);
  notices.connect(info->hub.notifier);
  std::set<std::string> uuids;
  ASSERT_TRUE(WaitFor([&] {
    protocol::Frames frames;
    while (protocol::TryReceive(notices, frames)) {
      if (frames.size() <= protocol::kFrameContent) continue;
      auto engine = protocol::DecodeBody<protocol::EngineInfo>(
          protocol::View(frames[protocol::kFrameContent]));
      if (engine.ok()) uuids.insert(engine->uuid);
    }
    return uuids.size() >= 2;
  }, std::chrono::seconds(30))) << "the notifier named " << uuids.size() << " engines";

  // 2. One DEALER per uuid on the scheduler's engine endpoint, each with the
  // uuid as its routing id, each saying something unsigned as an engine would.
  std::vector<std::unique_ptr<zmq::socket_t>> intruders;
  for (const std::string& uuid : uuids) {
    auto s = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
    s->set(zmq::sockopt::routing_id, uuid);
    s->set(zmq::sockopt::linger, 0);
    s->connect(info->scheduler.engine);
    protocol::Frames hello;
    for (const char* f : {"ztask/2", "", "engine_ready", "", "", ""}) hello.push_back(protocol::Frame(f));
    (void)protocol::SendFrames(*s, hello);
    intruders.push_back(std::move(s));
  }

  // 3. Tasks carrying a secret: each runs on a real engine, once.
  auto run_secrets = [&](int count) {
    std::vector<TaskId> ids;
    for (int i = 0; i < count; ++i) {
      TaskOptions secret;
      secret.command = {"sh", "-c", "echo SECRET=hunter2"};
      auto id = client_->Submit(secret);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
    }
    Ran typed = Ctl({"submit", "--", "sh", "-c", "echo SECRET=hunter2"});
    if (typed.code == 0 && typed.out.size() >= 32) {
      auto id = TaskId::FromHex(typed.out.substr(0, 32));
      if (id.ok()) ids.push_back(*id);
    }
    std::vector<TaskInfo> records;
    ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records, std::chrono::seconds(60)))
        << "a task went to the intruder and never ended";
    for (const TaskInfo& r : records) {
      EXPECT_EQ(r.status, TaskState::kOk) << r.ToJson().dump();
      EXPECT_EQ(r.attempts, 1) << r.ToJson().dump();
    }
  };
  ASSERT_NO_FATAL_FAILURE(run_secrets(20));
  for (auto& s : intruders) EXPECT_EQ(Received(*s), 0u) << "the intruder received work";

  // 4. The scheduler restarts: the intruders, already connected, race the
  // engines to the new one under the engines' uuids. They still get nothing.
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    const pid_t now = PidOf("taskscheduler", profile());
    return now > 0 && now != scheduler;
  }, std::chrono::seconds(30)));
  ASSERT_NO_FATAL_FAILURE(run_secrets(20));
  for (auto& s : intruders) EXPECT_EQ(Received(*s), 0u) << "the intruder received work";
}

// The mode bits of `path`, or -1 when it does not exist.
int ModeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

// Every file the hub and the scheduler keep in `profile`, and the profile.
void ExpectPrivate(const std::filesystem::path& profile) {
  EXPECT_EQ(ModeOf(profile), 0700);
  for (const char* name :
       {"ztask-cluster.json", "tasks.db", "tasks.db-wal", "tasks.db-shm", "scheduler.journal.1"}) {
    EXPECT_EQ(ModeOf(profile / name), 0600) << name;
  }
}

TEST_F(ClusterTest, TheProfileAndEveryFileInItAreTheUsersOnly) {
  const mode_t before = ::umask(022);  // what most users have
  StartCluster(1);
  ::umask(before);
  Ran ran = Ctl({"submit", "--", "true"});
  ASSERT_EQ(ran.code, 0) << ran.err;
  ExpectPrivate(profile());
  EXPECT_EQ(ModeOf(std::filesystem::path(profile()) / "cluster.control"), 0600);
  size_t logs = 0;
  for (const auto& log : std::filesystem::directory_iterator(std::filesystem::path(profile()) / "logs")) {
    EXPECT_EQ(ModeOf(log.path()), 0600) << log.path();
    ++logs;
  }
  EXPECT_GE(logs, 3u) << "hub, scheduler and engine logs";
}

TEST_F(ClusterTest, AHubAndSchedulerStartedAloneKeepTheirFilesPrivate) {
  const std::filesystem::path alone = dir_.path() / "alone";
  const mode_t before = ::umask(022);
  cluster::ChildProcess hub({kBin + "/taskhub", "--profile-dir", alone.string()},
                            dir_.path() / "hub.log");
  auto has = [&](bool scheduler) {
    auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(alone));
    return info.ok() && !(scheduler ? info->scheduler.client : info->hub.monitor).empty();
  };
  ASSERT_TRUE(WaitFor([&] { return has(false); }, std::chrono::seconds(30))) << hub.Log();
  cluster::ChildProcess scheduler({kBin + "/taskscheduler", "--profile-dir", alone.string()},
                                  dir_.path() / "scheduler.log");
  ::umask(before);
  ASSERT_TRUE(WaitFor([&] { return has(true); }, std::chrono::seconds(30))) << scheduler.Log();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(alone / "scheduler.journal.1"); }));
  ExpectPrivate(alone);
}

TEST_F(ClusterTest, SubscribersThatNeverReadCannotGrowTheHub) {
#ifdef ZTASK_THREAD_SANITIZED
  GTEST_SKIP() << "too slow under ThreadSanitizer: every message costs it a report in libzmq";
#endif
#ifdef ZTASK_SANITIZED
  constexpr size_t kTasks = 5000;
#else
  constexpr size_t kTasks = 100000;
#endif
  StartCluster(2, {"--hwm", "64"});
  client_->set_max_in_flight(20000);
  const pid_t hub = PidOf("taskhub", profile());
  ASSERT_GT(hub, 0);
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  TaskOptions noop;
  noop.function = "noop";
  // The hub's growth and the rate over kTasks no-ops.
  auto run = [&](int64_t* growth, double* rate) {
    const int64_t rss = StatusBytes(hub, "VmRSS");
    const auto start = std::chrono::steady_clock::now();
    std::vector<TaskId> ids;
    for (size_t i = 0; i < kTasks; ++i) {
      auto id = client_->Submit(noop);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
    }
    ASSERT_TRUE(client_->WaitReplies(ids, 300).ok());
    *rate = static_cast<double>(kTasks) /
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *growth = StatusBytes(hub, "VmRSS") - rss;
  };
  int64_t alone = 0, watched = 0;
  double alone_rate = 0, watched_rate = 0;
  ASSERT_NO_FATAL_FAILURE(run(&alone, &alone_rate));

  zmq::context_t context(1);
  std::vector<std::unique_ptr<zmq::socket_t>> idle;
  for (int i = 0; i < 20; ++i) {
    for (const std::string* endpoint : {&info->hub.events, &info->hub.notifier}) {
      auto s = std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub);
      s->set(zmq::sockopt::subscribe, "");
      s->set(zmq::sockopt::rcvhwm, 1);
      s->set(zmq::sockopt::rcvbuf, 4096);
      s->set(zmq::sockopt::linger, 0);
      s->connect(*endpoint);
      idle.push_back(std::move(s));
    }
  }
  ASSERT_NO_FATAL_FAILURE(run(&watched, &watched_rate));
  std::printf("hub growth over %zu no-ops: %lld KiB alone, %lld KiB with 20 idle subscribers; "
              "rate %.0f/s alone, %.0f/s with them (%.2fx)\n",
              kTasks, static_cast<long long>(alone / 1024), static_cast<long long>(watched / 1024),
              alone_rate, watched_rate, watched_rate / alone_rate);
  // Each subscriber may hold kSubscriberHwm (2,000) events of about 300
  // bytes queued in the hub; unbounded, 20 would hold every event of every
  // task (three each: over a gigabyte here).
#ifndef ZTASK_SANITIZED  // the sanitizer's own memory is most of it there
  EXPECT_LT(watched, alone + (int64_t{64} << 20));
#endif
}

}  // namespace
}  // namespace ztask::testing
