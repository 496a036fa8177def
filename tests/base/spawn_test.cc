#include "base/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"

namespace ztask::base {
namespace {

namespace fs = std::filesystem;

int ExitCodeOf(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  return out;
}

class SpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ztask-spawn-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SpawnTest, TheChildGetsItsArgumentsEnvironmentDirectoryAndDescriptors) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo \"$1 $ZT_SPAWN $(pwd)\"; cat", "sh", "hello"};
  options.env = std::vector<std::string>{"ZT_SPAWN=yes", "PATH=/usr/bin:/bin"};
  options.cwd = dir_.string();
  options.fds = {{1, out[1]}};
  options.null_stdin = true;  // cat ends at once
  Result<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ::close(out[1]);
  EXPECT_EQ(ReadAll(out[0]), "hello yes " + dir_.string() + "\n");
  ::close(out[0]);
  EXPECT_EQ(ExitCodeOf(*pid), 0);
}

TEST_F(SpawnTest, DescriptorsMovedOntoEachOthersNumbersArriveIntact) {
  // Our fds 3 and 4 (or whatever they are) handed over crossed: the child's
  // 4 is our first pipe and its 3 our second, whatever numbers ours have.
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo first >&4; echo second >&3"};
  options.fds = {{4, a[1]}, {3, b[1]}};
  Result<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ::close(a[1]);
  ::close(b[1]);
  EXPECT_EQ(ReadAll(a[0]), "first\n");
  EXPECT_EQ(ReadAll(b[0]), "second\n");
  EXPECT_EQ(ExitCodeOf(*pid), 0);
  ::close(a[0]);
  ::close(b[0]);
}

TEST_F(SpawnTest, AProgramThatCannotRunIsAnErrorNamingItAndLeavesNoChild) {
  SpawnOptions missing;
  missing.argv = {(dir_ / "no-such-program").string()};
  Result<pid_t> pid = Spawn(missing);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("no-such-program"), std::string::npos);
  EXPECT_NE(pid.status().message().find("No such file"), std::string::npos);

  SpawnOptions elsewhere;
  elsewhere.argv = {"/bin/true"};
  elsewhere.cwd = (dir_ / "missing-dir").string();
  pid = Spawn(elsewhere);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("missing-dir"), std::string::npos);

  EXPECT_FALSE(Spawn(SpawnOptions{}).ok()) << "nothing to run";
  // Every failed child was reaped: none is left to wait for.
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SpawnTest, TheChildLeadsItsOwnGroupUnlessAskedNotTo) {
  SpawnOptions options;
  options.argv = {"/bin/sleep", "30"};
  Result<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(::getpgid(*pid), *pid);
  ::kill(-*pid, SIGKILL);
  EXPECT_EQ(ExitCodeOf(*pid), 128 + SIGKILL);

  options.own_group = false;
  pid = Spawn(options);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(::getpgid(*pid), ::getpgid(0));
  ::kill(*pid, SIGKILL);
  EXPECT_EQ(ExitCodeOf(*pid), 128 + SIGKILL);
}

TEST_F(SpawnTest, AChildThatDiesWithItsParentEndsWhenTheSpawningThreadEnds) {
  pid_t child = -1;
  std::thread([&] {
    SpawnOptions options;
    options.argv = {"/bin/sleep", "30"};
    options.dies_with_parent = true;
    Result<pid_t> pid = Spawn(options);
    ASSERT_TRUE(pid.ok());
    child = *pid;
  }).join();
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 128 + SIGKILL);
}

// The status line `name` of /proc/self/status as the child saw it: a mask
// in hexadecimal.
uint64_t MaskLine(const std::string& status, const std::string& name) {
  const size_t at = status.find(name + ":");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::stoull(status.substr(at + name.size() + 1), nullptr, 16);
}

TEST_F(SpawnTest, TheChildStartsWithNoSignalBlockedAndNoneIgnoredThatWeIgnore) {
  // As a server is: stop signals blocked for its signal thread, SIGPIPE
  // ignored. A task it runs must not inherit either (a blocked SIGTERM
  // could not stop it; `yes | head` would never end).
  sigset_t stop, before;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &stop, &before), 0);
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &previous), 0);
  struct sigaction previous_xfsz = {};
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous_xfsz), 0);
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "exec cat /proc/self/status"};
  options.fds = {{1, out[1]}};
  Result<pid_t> pid = Spawn(options);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::sigaction(SIGPIPE, &previous, nullptr);
  ::sigaction(SIGXFSZ, &previous_xfsz, nullptr);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ::close(out[1]);
  const std::string status = ReadAll(out[0]);
  ::close(out[0]);
  EXPECT_EQ(ExitCodeOf(*pid), 0);
  EXPECT_EQ(MaskLine(status, "SigBlk"), 0u) << status;
  EXPECT_EQ(MaskLine(status, "SigIgn") & (uint64_t{1} << (SIGPIPE - 1)), 0u) << status;
  EXPECT_EQ(MaskLine(status, "SigIgn") & (uint64_t{1} << (SIGXFSZ - 1)), 0u) << status;
}

}  // namespace
}  // namespace ztask::base
