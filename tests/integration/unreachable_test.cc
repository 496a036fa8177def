// A client whose cluster is gone says so: `taskctl wait` on a task that
// will never finish because its cluster went away gives up once the hub
// has not answered for its limit, with exit code 2, having said once that
// it waits (the Python client's futures: python/tests/test_client.py).
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST_F(ClusterTest, TaskctlWaitGivesUpOnAClusterThatIsGoneAfterItsLimit) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1));
  // One engine at HWM 1: the second task waits in the scheduler.
  Submit({"--", "sleep", "60"});
  const std::string waiting = Submit({"--", "true"});
  Ran waited;
  const auto began = std::chrono::steady_clock::now();
  std::thread waiter([&] {
    waited = RunProgram({kBin + "/taskctl", "--profile-dir", profile(), "wait", waiting,
                         "--unreachable-timeout", "8"},
                        dir_, 90);
  });
  ASSERT_TRUE(WaitFor([&] { return !PidsOf("taskctl", profile()).empty(); }));
  // The cluster goes, its task unfinished: the supervisor first (nothing
  // starts the hub again), then the hub. (A `taskcluster stop` stops the
  // engine first, which may fail the waiting task before the hub goes.)
  for (const char* program : {"taskcluster", "taskhub"}) {
    for (pid_t pid : PidsOf(program, profile())) ::kill(pid, SIGKILL);
  }
  waiter.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  for (const char* program : {"taskscheduler", "taskengine", "taskhub", "taskcluster"}) {
    for (pid_t pid : PidsOf(program, profile())) ::kill(pid, SIGKILL);
  }
  running_ = false;
  EXPECT_EQ(waited.code, 2) << waited.err;
  EXPECT_EQ(Count(waited.err, "waiting for it up to 8 s"), 1u) << waited.err;
  EXPECT_NE(waited.err.find("gave up after"), std::string::npos) << waited.err;
  EXPECT_NE(waited.err.find(profile()), std::string::npos) << waited.err;
  EXPECT_GE(seconds, 8);
  EXPECT_LT(seconds, 40);
  std::printf("taskctl wait gave up %.1f s after it began (limit 8 s)\n", seconds);
}

}  // namespace
}  // namespace ztask::testing
