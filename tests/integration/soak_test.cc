// A million no-ops through one cluster whose hub keeps at most 100,000
// finished records (--max-finished-records): the database stops growing
// once the bound is reached and every process's resident memory is flat in
// the second half. The ten-million version is bench/soak.sh
// (docs/performance.md, "A long run"); both run the same loop
// (tests/support/noop_stream.h).
#include <cstdio>

#include "tests/support/cluster_fixture.h"
#include "tests/support/noop_stream.h"
#include "tests/support/task_db.h"

namespace ztask::testing {
namespace {

constexpr size_t kBound = 100000;

TEST_F(ClusterTest, AMillionNoOpsUnderACountBoundKeepTheDatabaseAndEveryProcessFlat) {
#ifdef ZTASK_SANITIZED
  GTEST_SKIP() << "a million tasks are the point, and take too long under a sanitizer";
#endif
  StartCluster(2, {"--hwm", "64", "--max-finished-records", std::to_string(kBound)});
  ASSERT_TRUE(client_->WaitForEngines(2, 60).ok());
  ClusterPids pids;
  std::string why;
  ASSERT_TRUE(pids.Find(profile(), 2, &why)) << why;
  const std::string db = profile() + "/tasks.db";
  NoOpRun run;
  run.tasks = 1000000;
  run.sample_every = 100000;
  run.profile = profile();
  std::vector<StreamSample> samples;
  std::vector<int64_t> db_bytes;
  std::printf("%8s %8s %8s %8s %8s %8s %8s %8s\n", "tasks", "tasks/s", "hub", "sched", "engine",
              "client", "db MiB", "rows");
  TaskId first, last;
  const Status ran = RunNoOps(*client_, run, pids, [&](const StreamSample& s) {
    samples.push_back(s);
    db_bytes.push_back(TaskDbBytes(db));
    auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
    std::printf("%8zu %8.0f %8.1f %8.1f %8.1f %8.1f %8.1f %8ld\n", s.tasks, s.tasks_per_s,
                mib(s.hub), mib(s.scheduler), mib(s.engine), mib(s.client), mib(db_bytes.back()),
                TaskRowsIn(db));
    std::fflush(stdout);
  }, &first, &last);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_GE(samples.size(), 10u);

  // The replies came from the scheduler; the hub records the same tasks a
  // little later. Once it has the last one, the bound holds when the last
  // deletions ran: the newest records stay.
  ASSERT_TRUE(client_->Wait({last}, 60).ok()) << "the hub never recorded the last task";
  ASSERT_TRUE(WaitFor([&] { return TaskRowsIn(db) == static_cast<int64_t>(kBound); },
                      std::chrono::seconds(30)))
      << TaskRowsIn(db) << " rows";
  auto oldest = client_->Fetch({first});
  EXPECT_FALSE(oldest.ok()) << "the first record is gone";
  auto newest = client_->Fetch({last});
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  // The file reuses the pages of deleted rows: past the half it grows by
  // no more than the WAL's checkpoint interval (32 MiB).
  const size_t half = samples.size() / 2 - 1;
  EXPECT_LE(db_bytes.back(), db_bytes[half] + (int64_t{32} << 20))
      << "the database grew from " << db_bytes[half] << " to " << db_bytes.back() << " bytes";
  // Flat from the half to the end, within what the allocator's steps make
  // (as in retention_test): the scheduler remembers the latest million
  // outcomes (40 bytes each) and so still grows a little here, and what it
  // keeps for the hub is bounded, not flat (kSchedulerKeepsForTheHub).
  why.clear();
  EXPECT_FALSE(
      Grew(samples[half], samples.back(), 0.2, int64_t{48} << 20, &why, kSchedulerKeepsForTheHub))
      << why;
}

}  // namespace
}  // namespace ztask::testing
