// soak: a long stream of no-ops through a running cluster, with a look at
// every process's memory, the hub's database and the throughput every so
// many tasks, written as CSV. bench/soak.sh starts the cluster, runs this
// and draws the figure (bench/plot_soak.py).
//
// usage: soak --profile DIR --engines N --db PATH --csv PATH
//             [--tasks N] [--sample-every N] [--chunk N]
//
// Columns: tasks, seconds, tasks_per_s (since the row before), the
// resident bytes of hub, scheduler, the largest engine and this client,
// the database's bytes (file and WAL) and its rows.
#include <cstdio>
#include <string>

#include "tests/support/noop_stream.h"
#include "tests/support/task_db.h"

namespace {

using ztask::testing::StreamSample;

int Fail(const std::string& what) {
  std::fprintf(stderr, "soak: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile, db, csv_path;
  size_t engines = 0;
  ztask::testing::NoOpRun run;
  run.tasks = 10000000;
  run.sample_every = 1000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--profile") profile = value;
    else if (flag == "--db") db = value;
    else if (flag == "--csv") csv_path = value;
    else if (flag == "--engines") engines = std::stoul(value);
    else if (flag == "--tasks") run.tasks = std::stoul(value);
    else if (flag == "--sample-every") run.sample_every = std::stoul(value);
    else if (flag == "--chunk") run.chunk = std::stoul(value);
    else return Fail("unknown flag " + flag);
  }
  run.profile = profile;
  if (profile.empty() || db.empty() || csv_path.empty() || engines == 0) {
    return Fail("usage: soak --profile DIR --engines N --db PATH --csv PATH [--tasks N] "
                "[--sample-every N] [--chunk N]");
  }
  if (run.chunk == 0 || run.sample_every % run.chunk != 0) {
    return Fail("--sample-every must be a multiple of --chunk");
  }
  ztask::testing::ClusterPids pids;
  if (std::string why; !pids.Find(profile, engines, &why)) return Fail("no cluster: " + why);
  auto client = ztask::Client::Connect(profile);
  if (!client.ok()) return Fail(client.status().ToString());
  if (auto up = (*client)->WaitForEngines(static_cast<int>(engines), 60); !up.ok()) {
    return Fail(up.ToString());
  }
  FILE* csv = std::fopen(csv_path.c_str(), "w");
  if (!csv) return Fail("cannot write " + csv_path);
  std::fprintf(csv, "tasks,seconds,tasks_per_s,hub_rss,scheduler_rss,engine_rss,client_rss,"
                    "db_bytes,db_rows\n");
  std::printf("%10s %8s %9s %8s %8s %8s %8s %9s %9s\n", "tasks", "seconds", "tasks/s", "hub",
              "sched", "engine", "client", "db MiB", "rows");
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  ztask::TaskId first, last;
  const ztask::Status ran = ztask::testing::RunNoOps(
      **client, run, pids,
      [&](const StreamSample& s) {
        const int64_t db_bytes = ztask::testing::TaskDbBytes(db);
        const int64_t rows = ztask::testing::TaskRowsIn(db);
        std::fprintf(csv, "%zu,%.2f,%.0f,%ld,%ld,%ld,%ld,%ld,%ld\n", s.tasks, s.seconds,
                     s.tasks_per_s, s.hub, s.scheduler, s.engine, s.client, db_bytes, rows);
        std::fflush(csv);
        std::printf("%10zu %8.1f %9.0f %8.1f %8.1f %8.1f %8.1f %9.1f %9ld\n", s.tasks, s.seconds,
                    s.tasks_per_s, mib(s.hub), mib(s.scheduler), mib(s.engine), mib(s.client),
                    mib(db_bytes), rows);
        std::fflush(stdout);
      },
      &first, &last);
  std::fclose(csv);
  if (!ran.ok()) return Fail(ran.ToString());
  return 0;
}
