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

namespace ztask::testing {
namespace {

constexpr size_t kTasks = 3000000;
constexpr size_t kChunk = 50000;
constexpr size_t kSampleEvery = 250000;

TEST_F(ClusterTest, ThreeMillionNoOpsLeaveEveryProcessFlatAfterTheFirstMillion) {
#ifdef ZTASK_SANITIZED
  GTEST_SKIP() << "millions of tasks are the point, and take too long under a sanitizer";
#endif
  StartCluster(2, {"--hwm", "64"});
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  const std::vector<pid_t> engines = PidsOf("taskengine", profile());
  ASSERT_EQ(engines.size(), 2u);
  const pid_t hub = PidOf("taskhub", profile());
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(hub, 0);
  ASSERT_GT(scheduler, 0);
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  auto engines_rss = [&] {
    int64_t most = 0;
    for (pid_t e : engines) most = std::max(most, StatusBytes(e, "VmRSS"));
    return most;
  };
  struct Sample {
    size_t tasks;
    int64_t hub, scheduler, engine, client;
  };
  std::vector<Sample> curve;
  std::printf("%10s %10s %10s %10s %10s   (resident MiB; engine: the larger)\n", "tasks", "hub",
              "scheduler", "engine", "client");
  const auto start = std::chrono::steady_clock::now();
  std::vector<TaskOptions> chunk(kChunk);
  for (auto& o : chunk) o.function = "noop";
  std::vector<TaskId> previous;
  TaskId oldest;
  for (size_t done = 0; done < kTasks; done += kChunk) {
    // One chunk in flight while the one before is answered.
    auto ids = client_->SubmitMany(chunk);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    if (!previous.empty()) {
      ASSERT_TRUE(client_->WaitReplies(previous, 300).ok()) << done;
    }
    if (done == 0) oldest = ids->front();
    previous = std::move(*ids);
    if ((done + kChunk) % kSampleEvery == 0) {
      curve.push_back({done + kChunk, StatusBytes(hub, "VmRSS"), StatusBytes(scheduler, "VmRSS"),
                       engines_rss(), StatusBytes(::getpid(), "VmRSS")});
      const Sample& s = curve.back();
      std::printf("%10zu %10.1f %10.1f %10.1f %10.1f\n", s.tasks, mib(s.hub), mib(s.scheduler),
                  mib(s.engine), mib(s.client));
      std::fflush(stdout);
    }
  }
  ASSERT_TRUE(client_->WaitReplies(previous, 300).ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%zu no-ops in %.1f s (%.0f/s)\n", kTasks, seconds, kTasks / seconds);
  ASSERT_EQ(PidOf("taskhub", profile()), hub) << "nothing restarted on the way";
  ASSERT_EQ(PidOf("taskscheduler", profile()), scheduler);

  // Flat: from the first million to the end, each process grows by less than
  // a fifth of what it held at the first million and 48 MiB (the
  // allocator's steps: a table rehashed in place is briefly there twice).
  // Remembering every record would grow the hub by about 1.5 KiB a task, 3
  // GB here. The exact bounds of what the scheduler and the client keep
  // (40 bytes a task, too little to tell from the allocator's steps here)
  // are tested where they are made: Lookups.OnlyTheLatestOutcomesAreKept,
  // RecentIdMap.*.
  const Sample* at_million = nullptr;
  for (const Sample& s : curve) {
    if (s.tasks == 1000000) at_million = &s;
  }
  ASSERT_NE(at_million, nullptr);
  const Sample& last = curve.back();
  for (auto [name, then, now] :
       {std::tuple{"hub", at_million->hub, last.hub},
        {"scheduler", at_million->scheduler, last.scheduler},
        {"engine", at_million->engine, last.engine},
        {"client", at_million->client, last.client}}) {
    EXPECT_LT(now - then, then / 5 + (int64_t{48} << 20))
        << name << " grew from " << mib(then) << " MiB at 1,000,000 tasks to " << mib(now)
        << " MiB at " << kTasks;
  }

  // A hub killed now restarts on 3 million records: it reads what is kept,
  // not the history.
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(hub, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t again = PidOf("taskhub", profile());
        if (again <= 0 || again == hub) return false;
        auto record = client_->Fetch({previous.back()});
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
