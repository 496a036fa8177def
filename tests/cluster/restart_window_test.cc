// The supervisor's restart rules (cluster/restart_window.h) and the
// launchers' choices that need no process: which launchers there are, and
// how many engines ssh hosts make.
#include "cluster/restart_window.h"

#include <gtest/gtest.h>

#include "cluster/launcher.h"
#include "cluster/util.h"

namespace ztask::cluster {
namespace {

TEST(RestartWindow, AnEngineIsGivenUpOnlyOnceTheLimitIsReachedWithinTheWindow) {
  RestartWindow w(/*max_restarts=*/3, /*window_s=*/60, /*backoff_s=*/1);
  EXPECT_FALSE(w.Exhausted(0));
  w.Restarted(0);
  w.Restarted(10);
  EXPECT_FALSE(w.Exhausted(20)) << "two restarts of three";
  w.Restarted(20);
  EXPECT_TRUE(w.Exhausted(30)) << "three within 60 s";
  EXPECT_EQ(w.Recent(30), 3u);
  EXPECT_FALSE(w.Exhausted(61)) << "the first left the window";
  EXPECT_EQ(w.Recent(61), 2u);
  EXPECT_EQ(w.Recent(200), 0u);
}

TEST(RestartWindow, AnEnginesBackOffDoublesWithEachRecentRestartUpTo30Seconds) {
  RestartWindow w(100, 1000, 0.5);
  EXPECT_DOUBLE_EQ(w.EngineBackoff(), 0.5);
  w.Restarted(1);
  EXPECT_DOUBLE_EQ(w.EngineBackoff(), 1);
  w.Restarted(2);
  EXPECT_DOUBLE_EQ(w.EngineBackoff(), 2);
  for (int i = 0; i < 40; ++i) w.Restarted(3 + i);
  EXPECT_DOUBLE_EQ(w.EngineBackoff(), RestartWindow::kMaxBackoffS);
  EXPECT_EQ(w.Recent(1500), 0u);
  EXPECT_DOUBLE_EQ(w.EngineBackoff(), 0.5) << "old restarts no longer count";
}

TEST(RestartWindow, AServerPastItsLimitWaitsLongerEachTimeButIsNeverGivenUp) {
  RestartWindow w(/*max_restarts=*/2, /*window_s=*/60, /*backoff_s=*/0);
  w.Restarted(0);
  w.Restarted(1);
  EXPECT_TRUE(w.Exhausted(2));
  w.Restarted(2);
  EXPECT_DOUBLE_EQ(w.ServerBackoff(), 0.2) << "one past the limit: at least 0.1 s, doubled";
  w.Restarted(3);
  EXPECT_DOUBLE_EQ(w.ServerBackoff(), 0.4);
  for (int i = 0; i < 20; ++i) w.Restarted(4 + i * 0.1);
  EXPECT_DOUBLE_EQ(w.ServerBackoff(), 25.6) << "doubled eight times at most";
}

TEST(Launchers, EachNameMakesItsLauncherAndNoOtherNameDoes) {
  for (const char* name : {"local", "mpi", "ssh", "slurm"}) {
    auto launcher = MakeLauncher(name);
    ASSERT_NE(launcher, nullptr) << name;
    EXPECT_EQ(launcher->name(), name);
  }
  EXPECT_EQ(MakeLauncher("pbs"), nullptr);
  EXPECT_EQ(MakeLauncher(""), nullptr);
  EXPECT_EQ(LauncherNames(), "local, mpi, ssh, slurm");
}

TEST(Launchers, OnlyLaunchersOfOneProcessPerEngineScaleOneAtATime) {
  EXPECT_TRUE(MakeLauncher("local")->scalable());
  EXPECT_TRUE(MakeLauncher("ssh")->scalable());
  EXPECT_FALSE(MakeLauncher("mpi")->scalable());
  EXPECT_FALSE(MakeLauncher("slurm")->scalable());
}

TEST(Launchers, SshHostsSayHowManyEnginesAndBadHostsAreRefused) {
  auto ssh = MakeLauncher("ssh");
  auto n = ssh->EngineCount(7, {"a:2", "b", "user@c.example:3"});
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 6);
  auto none = ssh->EngineCount(7, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 7) << "no hosts: the count asked";
  for (const char* bad : {"-oProxyCommand=x", "a:0", "a:x", "", "a b", "a;b"}) {
    auto refused = ssh->EngineCount(1, {bad});
    EXPECT_FALSE(refused.ok()) << bad;
  }
  EXPECT_EQ(*MakeLauncher("local")->EngineCount(4, {"a:9"}), 4) << "local ignores hosts";
}

TEST(Launchers, ShellQuotingKeepsAnyWordOneWord) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("a b;$(rm -rf /)"), "'a b;$(rm -rf /)'");
}

}  // namespace
}  // namespace ztask::cluster
