// Three million no-ops through one cluster with the default retention: the
// resident memory of every process (hub, scheduler, engines, and the client
// submitting) stops growing after the first million, and a hub killed at
// the end is back answering queries within a bounded time, whatever the
// length of its history. Prints the memory curve.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tests/support/cluster_fixture.h"
#include "tests/support/noop_stream.h"

namespace ztask::testing {
namespace {

constexpr size_t kTasks = 3000000;
constexpr size_t kSampleEvery = 250000;

TEST_F(ClusterTest, ThreeMillionNoOpsLeaveEveryProcessFlatAfterTheFirstMillion) {
#ifdef ZTASK_SANITIZED
  GTEST_SKIP() << "millions of tasks are the point, and take too long under a sanitizer";
#endif
  StartCluster(2, {"--hwm", "64"});
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  ClusterPids pids;
  std::string why;
  ASSERT_TRUE(pids.Find(profile(), 2, &why)) << why;
  const pid_t hub = pids.hub;
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  std::printf("%10s %10s %10s %10s %10s   (resident MiB; engine: the larger)\n", "tasks", "hub",
              "scheduler", "engine", "client");
  NoOpRun run;
  run.tasks = kTasks;
  run.sample_every = kSampleEvery;
  run.profile = profile();
  std::vector<StreamSample> curve;
  TaskId oldest, newest;
  const Status ran = RunNoOps(*client_, run, pids, [&](const StreamSample& s) {
    curve.push_back(s);
    std::printf("%10zu %10.1f %10.1f %10.1f %10.1f\n", s.tasks, mib(s.hub), mib(s.scheduler),
                mib(s.engine), mib(s.client));
    std::fflush(stdout);
  }, &oldest, &newest);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  std::printf("%zu no-ops in %.1f s (%.0f/s)\n", kTasks, curve.back().seconds,
              kTasks / curve.back().seconds);
  ASSERT_EQ(PidOf("taskhub", profile()), hub) << "nothing restarted on the way";
  ASSERT_EQ(PidOf("taskscheduler", profile()), pids.scheduler);

  // Flat: from the first million to the end, each process grows by less than
  // a fifth of what it held at the first million and 48 MiB (the
  // allocator's steps: a table rehashed in place is briefly there twice).
  // Remembering every record would grow the hub by about 1.5 KiB a task, 3
  // GB here. The exact bounds of what the scheduler and the client keep
  // (40 bytes a task, too little to tell from the allocator's steps here)
  // are tested where they are made: Lookups.OnlyTheLatestOutcomesAreKept,
  // RecentIdMap.*.
  const StreamSample* at_million = nullptr;
  for (const StreamSample& s : curve) {
    if (s.tasks == 1000000) at_million = &s;
  }
  ASSERT_NE(at_million, nullptr);
  // What the scheduler keeps for the hub is bounded, not flat.
  EXPECT_FALSE(
      Grew(*at_million, curve.back(), 0.2, int64_t{48} << 20, &why, kSchedulerKeepsForTheHub))
      << why;

  // A hub killed now restarts on 3 million records: it reads what is kept,
  // not the history.
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(hub, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t again = PidOf("taskhub", profile());
        if (again <= 0 || again == hub) return false;
        auto record = client_->Fetch({newest});
        return record.ok() && !record->empty() && (*record)[0].ok();
      },
      std::chrono::seconds(60)))
      << "the restarted hub answers";
  const double restart =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("the hub, killed with %zu records, answered again %.2f s later\n", kTasks, restart);
  EXPECT_LT(restart, 20.0);
  const pid_t restarted = PidOf("taskhub", profile());
  std::printf("its resident memory after the restart: %.1f MiB\n",
              mib(StatusBytes(restarted, "VmRSS")));
  auto first = client_->Fetch({oldest});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)[0].ok()) << "the first task's record, from the file";
}

}  // namespace
}  // namespace ztask::testing
