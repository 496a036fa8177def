// The Slurm launcher: the batch script it writes, and a real submission to a
// one-node Slurm (munged, slurmctld and slurmd) this test starts itself.
#include <unistd.h>

#include <fstream>
#include <random>

#include "tests/support/cluster_fixture.h"
#include "tests/support/ports.h"

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, SlurmDryRunShowsTheBatchScriptAndStartsNothing) {
  Ran dry = RunProgram({kBin + "/taskcluster", "start", "--launcher", "slurm", "-n", "6",
                        "--profile-dir", profile(), "--slurm-args=--partition=short",
                        "--dry-run"},
                       dir_);
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.out.rfind("#!/bin/bash\n", 0), 0u) << dry.out;
  const std::vector<std::string> lines = {
      "#SBATCH --ntasks=6\n", "#SBATCH --partition=short\n",
      "exec srun '" + kBin + "/taskengine' --profile-dir '" + profile() + "'\n"};
  for (const std::string& line : lines) {
    EXPECT_NE(dry.out.find(line), std::string::npos) << line << " in:\n" << dry.out;
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(profile()) / "ztask-cluster.json"))
      << "a dry run starts nothing";
}

class SlurmLaunch : public ClusterTest {
 protected:
  void SetUp() override {
    for (const char* program : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"}) {
      if (::access(program, X_OK) != 0) GTEST_SKIP() << program << " missing (install-deps)";
    }
    const auto d = dir_.path();
    // munged wants the path to its socket open to everyone, its key private.
    std::filesystem::permissions(d, std::filesystem::perms::all & ~std::filesystem::perms::others_write & ~std::filesystem::perms::group_write);
    for (const char* sub : {"sock", "key", "state", "spool"}) std::filesystem::create_directories(d / sub);
    std::filesystem::permissions(d / "key", std::filesystem::perms::owner_all);
    {
      std::ofstream key(d / "key" / "munge.key", std::ios::binary);
      std::mt19937_64 rng(std::random_device{}());
      for (int i = 0; i < 128; ++i) key.put(static_cast<char>(rng()));
    }
    std::filesystem::permissions(d / "key" / "munge.key", std::filesystem::perms::owner_read);
    const std::string socket = (d / "sock" / "socket").string();
    munged_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/munged", "-F", "--key-file=" + (d / "key" / "munge.key").string(),
                                 "--socket=" + socket, "--pid-file=" + (d / "key" / "pid").string(),
                                 "--log-file=" + (d / "key" / "log").string(),
                                 "--seed-file=" + (d / "key" / "seed").string()},
        d / "munged.log");
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(socket); })) << munged_->Log();
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string short_host(host);
    short_host = short_host.substr(0, short_host.find('.'));
    const auto conf = d / "slurm.conf";
    std::ofstream(conf) << "ClusterName=ztask\nSlurmctldHost=" << short_host
                        << "\nSlurmUser=root\nSlurmdUser=root\nSlurmctldPort=" << FreePort()
                        << "\nSlurmdPort=" << FreePort() << "\nAuthType=auth/munge\nAuthInfo=socket="
                        << socket << "\nCredType=cred/munge\nStateSaveLocation=" << (d / "state").string()
                        << "\nSlurmdSpoolDir=" << (d / "spool").string()
                        << "\nSlurmctldPidFile=" << (d / "ctld.pid").string()
                        << "\nSlurmdPidFile=" << (d / "slurmd.pid").string()
                        << "\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                        << "JobAcctGatherType=jobacct_gather/none\nSchedulerType=sched/builtin\n"
                        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
                        << "ReturnToService=2\nMpiDefault=none\nNodeName=" << short_host
                        << " CPUs=2 State=UNKNOWN\nPartitionName=debug Nodes=" << short_host
                        << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n";
    ::setenv("SLURM_CONF", conf.c_str(), 1);
    ctld_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-f", conf.string()}, d / "ctld.log");
    slurmd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-f", conf.string()}, d / "slurmd.log");
    ASSERT_TRUE(WaitFor([&] {
      return RunProgram({"/usr/bin/sinfo", "-h", "-o", "%t"}, dir_).out.find("idle") == 0;
    }, std::chrono::seconds(30))) << ctld_->Log() << slurmd_->Log();
  }
  void TearDown() override {
    ClusterTest::TearDown();
    ::unsetenv("SLURM_CONF");
  }
  std::unique_ptr<ChildProcess> munged_, ctld_, slurmd_;
};

TEST_F(SlurmLaunch, EnginesRunAsASlurmJobCancelledOnStop) {
  StartCluster(2, {"--launcher", "slurm"});
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  ASSERT_EQ(engines->size(), 2u);
  std::vector<pid_t> pids;
  for (const auto& e : *engines) {
    EXPECT_NE(e.name.find("-slurm-"), std::string::npos) << e.name;
    EXPECT_TRUE(e.mpi_rank.has_value()) << "the SLURM_PROCID is its rank";
    pids.push_back(static_cast<pid_t>(e.pid));
  }
  Ran each = Ctl({"submit", "--each-engine", "--", "sh", "-c", "echo $ZTASK_MPI_RANK"});
  ASSERT_EQ(each.code, 0) << each.err;
  for (const auto& r : Wait(each.Lines())) EXPECT_EQ(r["status"], "ok") << r.dump();
  Ran queued = RunProgram({"/usr/bin/squeue", "-h", "-o", "%j"}, dir_);
  EXPECT_NE(queued.out.find("ztask-engines"), std::string::npos) << queued.out << queued.err;

  Ran stop = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stop.code, 0) << stop.err;
  running_ = false;
  EXPECT_TRUE(WaitFor([&] {
    return RunProgram({"/usr/bin/squeue", "-h", "-o", "%j"}, dir_).out.empty();
  }, std::chrono::seconds(30))) << "the job is cancelled";
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitFor([&] { return !cluster::ProcessRunning(pid); }, std::chrono::seconds(10)));
  }
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, TheBatchScriptQuotesEveryWordOfTheEngineCommand) {
  // An engine program and profile whose paths a shell would split and run.
  const auto odd = dir_.path() / "odd dir 'q' $HOME; echo PWNED";
  std::filesystem::create_directories(odd);
  std::filesystem::create_symlink(kBin + "/taskengine", odd / "taskengine");
  const std::string profile_dir = (odd / "profile").string();
  Ran dry = RunProgram({kBin + "/taskcluster", "start", "--launcher", "slurm", "-n", "2",
                        "--profile-dir", profile_dir, "--engine-program",
                        (odd / "taskengine").string(), "--max-output-bytes", "100",
                        "--dry-run"},
                       dir_);
  ASSERT_EQ(dry.code, 0) << dry.err;
  // Run the script with an srun that prints its arguments, one per line.
  const auto bin = dir_.path() / "fake-bin";
  std::filesystem::create_directories(bin);
  std::ofstream(bin / "srun") << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n";
  std::filesystem::permissions(bin / "srun", std::filesystem::perms::owner_all);
  std::ofstream(dir_.path() / "script.sh") << dry.out;
  Ran ran = RunProgram({"/usr/bin/env", "PATH=" + bin.string() + ":/usr/bin:/bin", "/bin/bash",
                        (dir_.path() / "script.sh").string()},
                       dir_);
  ASSERT_EQ(ran.code, 0) << ran.err;
  const std::vector<std::string> expected = {(odd / "taskengine").string(), "--profile-dir",
                                             profile_dir, "--max-output-bytes", "100"};
  EXPECT_EQ(ran.Lines(), expected) << dry.out;
}

TEST_F(ClusterTest, ASlurmOptionWithALineBreakIsRefused) {
  Ran dry = RunProgram({kBin + "/taskcluster", "start", "--launcher", "slurm", "--profile-dir",
                        profile(), "--slurm-args=--partition=x\nrm -rf /", "--dry-run"},
                       dir_);
  EXPECT_EQ(dry.code, 2);
  EXPECT_NE(dry.err.find("line break"), std::string::npos) << dry.err;
}

}  // namespace
}  // namespace ztask::testing
