// Many engines through a real cluster: 1,200 engines (simulated ones, each
// with its own connections to the hub and the scheduler, speaking the real
// protocol: bench/simulated_engines.h) register, stay registered over more
// than the heartbeat's expiry (the hub reads a pool this size in batches),
// and run tasks.
#include <chrono>
#include <thread>

#include "cluster/child_process.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kEngines = 1200;
constexpr int kAll = kEngines + 1;  // and the cluster's one real engine

int Running(Client& client) {
  auto engines = client.Engines();
  if (!engines.ok()) return -1;
  int running = 0;
  for (const EngineStatus& e : *engines) running += e.state == EngineState::kRunning ? 1 : 0;
  return running;
}

TEST_F(ClusterTest, OverAThousandEnginesStayRegisteredAndRunTasks) {
  StartCluster(1);
  cluster::ChildProcess engines({kBin + "/e2e_bench", "--serve-simulated",
                                 std::to_string(kEngines), "--profile", profile()},
                                dir_.path() / "simulated.log");
  Status all = client_->WaitForEngines(kAll, 90);
  ASSERT_TRUE(all.ok()) << all.ToString() << "\n" << engines.Log();
  // Three missed periods (1 s at this size) lose an engine: watch for four.
  const auto until = steady_clock::now() + seconds(4);
  while (steady_clock::now() < until) {
    ASSERT_EQ(Running(*client_), kAll) << "an engine was lost while it beat";
    std::this_thread::sleep_for(milliseconds(200));
  }
  TaskOptions noop;
  noop.function = "noop";
  std::vector<TaskOptions> tasks(5000, noop);
  auto ids = client_->SubmitMany(tasks);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  Status replied = client_->WaitReplies(*ids, 60);
  EXPECT_TRUE(replied.ok()) << replied.ToString();
  EXPECT_EQ(Running(*client_), kAll);
}

}  // namespace
}  // namespace ztask::testing
