// Engines launched with Open MPI's mpiexec on this machine.
#include <signal.h>

#include <set>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

class MpiLaunch : public ClusterTest, public ::testing::WithParamInterface<int> {};

TEST_P(MpiLaunch, EnginesRegisterWithTheirRanks) {
  const int n = GetParam();
  StartCluster(n, {"--launcher", "mpi"});
  Ran engines = Ctl({"engines", "--json"});
  ASSERT_EQ(engines.code, 0) << engines.err;
  Value list = Value::parse(engines.out);
  ASSERT_EQ(static_cast<int>(list.size()), n);
  std::set<int> ranks;
  std::vector<pid_t> pids;
  for (const auto& e : list) {
    ranks.insert(e["mpi_rank"].get<int>());
    pids.push_back(e["pid"].get<pid_t>());
  }
  std::set<int> expected;
  for (int r = 0; r < n; ++r) expected.insert(r);
  EXPECT_EQ(ranks, expected);

  Ran each = Ctl({"submit", "--each-engine", "--", "sh", "-c", "echo $ZTASK_MPI_RANK"});
  ASSERT_EQ(each.code, 0) << each.err;
  std::set<std::string> seen;
  for (const auto& r : Wait(each.Lines())) seen.insert(r["stdout"].get<std::string>());
  EXPECT_EQ(static_cast<int>(seen.size()), n) << "every rank ran one task";

  Ran stop = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stop.code, 0) << stop.err;
  running_ = false;
  for (pid_t pid : pids) EXPECT_FALSE(cluster::ProcessRunning(pid)) << "engine " << pid;
}

INSTANTIATE_TEST_SUITE_P(TwoAndFour, MpiLaunch, ::testing::Values(2, 4));

TEST_F(ClusterTest, AnUnknownLauncherIsRefusedWithTheValidOnes) {
  Ran started = RunProgram({kBin + "/taskcluster", "start", "--launcher", "pbs", "--profile-dir",
                            profile()},
                           dir_);
  EXPECT_EQ(started.code, 2);
  EXPECT_NE(started.err.find("unknown launcher 'pbs'; this build has: local, mpi"),
            std::string::npos)
      << started.err;
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, EnginesStartAddsEnginesToARunningCluster) {
  StartCluster(1);
  Ran local = RunProgram({kBin + "/taskcluster", "engines", "start", "-n", "2", "--profile-dir",
                          profile()}, dir_);
  ASSERT_EQ(local.code, 0) << local.err;
  Ran mpi = RunProgram({kBin + "/taskcluster", "engines", "start", "--launcher", "mpi", "-n", "2",
                        "--profile-dir", profile()}, dir_);
  ASSERT_EQ(mpi.code, 0) << mpi.err;
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  ASSERT_EQ(engines->size(), 5u);
  std::set<std::string> names;
  int ranked = 0;
  for (const auto& e : *engines) {
    EXPECT_EQ(e.state, EngineState::kRunning);
    names.insert(e.name);
    ranked += e.mpi_rank.has_value();
  }
  EXPECT_EQ(names.size(), 5u) << "every engine its own name, so its own id";
  EXPECT_EQ(ranked, 2);
  Ran each = Ctl({"submit", "--each-engine", "--fn", "noop"});
  ASSERT_EQ(each.code, 0) << each.err;
  EXPECT_EQ(Wait(each.Lines()).size(), 5u);
}

}  // namespace
}  // namespace ztask::testing
