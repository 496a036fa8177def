// A full disk and a crash lose nothing: with the whole profile on a full
// filesystem, a hub killed and restarted starts again (it rewrites nothing
// that has not changed), the supervisor keeps the cluster, and once space
// is back every record is written (docs/reliability.md).
// FullDisk needs root (it mounts a small tmpfs as the profile); it is
// skipped otherwise.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

class FullDisk : public ClusterTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
    std::filesystem::create_directories(profile());
    if (::mount("tmpfs", profile().c_str(), "tmpfs", 0, "size=48m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    ClusterTest::TearDown();
    if (mounted_) ::umount2(profile().c_str(), MNT_DETACH);
  }

  // Fills the profile's filesystem to the last byte.
  void Fill() {
    const auto path = std::filesystem::path(profile()) / "filler";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::string block(1 << 16, 'x');
    size_t size = block.size();
    while (size > 0) {
      if (::write(fd, block.data(), size) < 0) size /= 2;
    }
    ::close(fd);
  }

  std::vector<TaskId> NoOps(int n) {
    std::vector<TaskOptions> tasks(static_cast<size_t>(n));
    for (auto& t : tasks) t.function = "noop";
    auto ids = client_->SubmitMany(tasks);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    if (!ids.ok()) return {};
    EXPECT_TRUE(client_->WaitReplies(*ids, 120).ok());
    return *ids;
  }

  bool mounted_ = false;
};

TEST_F(FullDisk, AHubKilledOnAFullDiskComesBackAndEveryRecordIsWrittenOnceSpaceIsBack) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(2, {"--hwm", "64"}));
  std::vector<TaskId> ids = NoOps(1000);
  ASSERT_NO_FATAL_FAILURE(Fill());
  // Run while nothing can be written: the hub holds them, the scheduler
  // keeps them unacknowledged.
  std::vector<TaskId> held = NoOps(1000);
  ids.insert(ids.end(), held.begin(), held.end());
  const pid_t hub = PidOf("taskhub", profile());
  ASSERT_GT(hub, 0);
  ASSERT_EQ(::kill(hub, SIGKILL), 0);
  // A new hub answers, and the cluster goes on, the disk still full.
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t now = PidOf("taskhub", profile());
        return now > 0 && now != hub && client_->Engines().ok();
      },
      std::chrono::seconds(60)))
      << ReadFile(std::filesystem::path(profile()) / "logs" / "hub.log");
  std::vector<TaskId> after = NoOps(100);
  ids.insert(ids.end(), after.begin(), after.end());
  EXPECT_GT(PidOf("taskcluster", profile()), 0) << "the supervisor kept the cluster";
  // Space back: every record is written. A clean stop, then a new cluster
  // on the same database, which has only what was written.
  std::filesystem::remove(std::filesystem::path(profile()) / "filler");
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records, std::chrono::seconds(60)));
  client_.reset();
  Ran stopped = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stopped.code, 0) << stopped.err;
  running_ = false;
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records, std::chrono::seconds(60)));
  size_t ok = 0;
  for (const TaskInfo& r : records) ok += r.ok();
  EXPECT_EQ(ok, ids.size()) << "every record written, once";
  std::printf("%zu tasks, %zu of them run on a full disk around a hub killed there: %zu records "
              "ok on disk\n",
              ids.size(), held.size() + after.size(), ok);
}

// The supervisor never stops a cluster while a role may hold what is not
// written: a hub that cannot start (here its database is a directory) is
// started again, less and less often, the cluster kept and the reason
// said, until it can.
TEST_F(ClusterTest, AHubThatCannotStartIsStartedAgainAndTheClusterIsKept) {
  ASSERT_NO_FATAL_FAILURE(
      StartCluster(1, {"--max-restarts", "2", "--restart-backoff", "0.2"}));
  const auto db = std::filesystem::path(profile()) / "tasks.db";
  const auto away = std::filesystem::path(profile()) / "tasks.db.away";
  std::filesystem::rename(db, away);
  std::filesystem::create_directory(db);
  const pid_t hub = PidOf("taskhub", profile());
  ASSERT_GT(hub, 0);
  ASSERT_EQ(::kill(hub, SIGKILL), 0);
  const auto cluster_log = std::filesystem::path(profile()) / "logs" / "cluster.log";
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(cluster_log).find("the cluster is kept") != std::string::npos; },
      std::chrono::seconds(60)))
      << ReadFile(cluster_log);
  EXPECT_GT(PidOf("taskcluster", profile()), 0) << ReadFile(cluster_log);
  if (TestLayout() == "separate") {  // else the scheduler is the hub's process
    EXPECT_GT(PidOf("taskscheduler", profile()), 0) << ReadFile(cluster_log);
  }
  // It can again: the next start takes, and the cluster works.
  std::filesystem::remove(db);
  std::filesystem::rename(away, db);
  ASSERT_TRUE(WaitFor([&] { return client_->Engines().ok(); }, std::chrono::seconds(60)))
      << ReadFile(cluster_log);
  auto records = Wait({Submit({"--fn", "noop"})});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
}

}  // namespace
}  // namespace ztask::testing
