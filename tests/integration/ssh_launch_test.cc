// Engines started over ssh, against an sshd this test starts on 127.0.0.1
// with throwaway keys. Only the connection file is copied to the "host".
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/ports.h"

namespace ztask::testing {
namespace {

class SshLaunch : public ClusterTest {
 protected:
  void SetUp() override {
    if (::access("/usr/sbin/sshd", X_OK) != 0) GTEST_SKIP() << "no sshd (scripts/install-deps.sh)";
    const auto keys = dir_.path();
    for (const char* key : {"host_key", "user_key"}) {
      Ran made = RunProgram({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                             (keys / key).string()}, dir_);
      ASSERT_EQ(made.code, 0) << made.err;
    }
    std::filesystem::copy_file(keys / "user_key.pub", keys / "authorized_keys");
    port_ = FreePort();
    std::ofstream(keys / "sshd_config")
        << "ListenAddress 127.0.0.1:" << port_ << "\nHostKey " << (keys / "host_key").string()
        << "\nAuthorizedKeysFile " << (keys / "authorized_keys").string()
        << "\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nStrictModes no\n"
        << "PidFile none\n";
    std::filesystem::create_directories("/run/sshd");
    sshd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/sshd", "-D", "-e", "-f", (keys / "sshd_config").string()},
        dir_.path() / "sshd.log");
    ASSERT_TRUE(WaitFor([&] { return Accepts(port_); })) << sshd_->Log();
    ssh_ = "ssh -p " + std::to_string(port_) + " -i " + (keys / "user_key").string() +
           " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes" +
           " -o LogLevel=ERROR";
  }

  int port_ = 0;
  std::string ssh_;
  std::unique_ptr<ChildProcess> sshd_;
};

TEST_F(SshLaunch, EnginesStartOnTheHostsWithOnlyTheConnectionFileCopied) {
  const auto remote = dir_.path() / "remote-profile";
  StartCluster(0, {"--launcher", "ssh", "--hosts", "127.0.0.1:2", "--ssh", ssh_,
                   "--remote-profile-dir", remote.string()});
  // The connection file, and nothing else, went to the host, private.
  const auto copied = remote / "ztask-cluster.json";
  struct stat st {};
  ASSERT_EQ(::stat(copied.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(remote), {}), 1);
  EXPECT_EQ(protocol::ReadConnectionFile(copied)->key,
            protocol::ReadConnectionFile(std::filesystem::path(profile()) / "ztask-cluster.json")
                ->key);

  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  ASSERT_EQ(engines->size(), 2u);
  std::vector<pid_t> pids;
  for (const auto& e : *engines) {
    EXPECT_EQ(e.name.rfind("127.0.0.1-ssh-", 0), 0u) << e.name;
    pids.push_back(static_cast<pid_t>(e.pid));
  }
  Ran each = Ctl({"submit", "--each-engine", "--", "sh", "-c", "echo $ZTASK_ENGINE_ID"});
  ASSERT_EQ(each.code, 0) << each.err;
  for (const auto& r : Wait(each.Lines())) EXPECT_EQ(r["status"], "ok") << r.dump();

  Ran stop = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stop.code, 0) << stop.err;
  running_ = false;
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitFor([&] { return !cluster::ProcessRunning(pid); }, std::chrono::seconds(10)))
        << "engine " << pid << " outlived its ssh connection";
  }
}

TEST_F(SshLaunch, AnUnreachableHostIsAClearError) {
  running_ = true;  // stop it in TearDown should it start after all
  std::string unreachable = ssh_;
  unreachable.replace(unreachable.find(std::to_string(port_)), std::to_string(port_).size(), "1");
  Ran started = RunProgram({kBin + "/taskcluster", "start", "--launcher", "ssh", "--hosts",
                            "127.0.0.1", "--ssh", unreachable, "--profile-dir", profile(),
                            "--daemonize"},
                           dir_);
  EXPECT_EQ(started.code, 2);
  EXPECT_NE(started.err.find("could not copy the connection file to 127.0.0.1"), std::string::npos)
      << started.err;
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

// A directory whose name holds what a shell would act on.
constexpr const char* kOddName = "odd dir 'q' \"d\" $HOME; echo PWNED";

TEST_F(SshLaunch, PathsWithSpacesQuotesDollarsAndSemicolonsReachTheHostIntact) {
  const auto odd = dir_.path() / kOddName;
  std::filesystem::create_directories(odd);
  std::filesystem::create_symlink(kBin + "/taskengine", odd / "taskengine");
  StartCluster(0, {"--launcher", "ssh", "--hosts", "127.0.0.1:2", "--ssh", ssh_,
                   "--remote-profile-dir", (odd / "profile").string(),
                   "--remote-engine-program", (odd / "taskengine").string()});
  EXPECT_TRUE(std::filesystem::exists(odd / "profile" / "ztask-cluster.json"));
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  EXPECT_EQ(engines->size(), 2u);
  Ran each = Ctl({"submit", "--each-engine", "--", "true"});
  ASSERT_EQ(each.code, 0) << each.err;
  for (const auto& r : Wait(each.Lines())) EXPECT_EQ(r["status"], "ok") << r.dump();
}

TEST_F(SshLaunch, AHostThatLooksLikeAnOptionIsRefusedBeforeSshRuns) {
  const auto mark = dir_.path() / "PWNED";
  const std::string evil = "-oProxyCommand=touch " + mark.string();
  Ran start = RunProgram({kBin + "/taskcluster", "start", "--profile-dir", profile(), "--launcher",
                          "ssh", "--hosts", evil, "--ssh", ssh_, "--daemonize"},
                         dir_);
  EXPECT_EQ(start.code, 2) << start.out;
  EXPECT_NE(start.err.find("bad host"), std::string::npos) << start.err;
  // Added to a running cluster: refused too.
  StartCluster(1);
  Ran add = RunProgram({kBin + "/taskcluster", "engines", "start", "--profile-dir", profile(),
                        "--launcher", "ssh", "--hosts", evil},
                       dir_);
  EXPECT_EQ(add.code, 2);
  EXPECT_NE(add.err.find("bad host"), std::string::npos) << add.err;
  EXPECT_FALSE(std::filesystem::exists(mark)) << "ssh ran the host as an option";
}

}  // namespace
}  // namespace ztask::testing
