// The default HWM, learned per engine, and the take-back rule, through real
// processes: a cluster started with no --hwm.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

using std::chrono::seconds;

// Lines in a file (0 when it does not exist).
int LinesIn(const std::filesystem::path& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Polls `taskcluster status` (the scheduler reports once a second) until
// its report satisfies `holds`; *report is the last one read.
template <class F>
bool StatusUntil(const std::string& profile, const TempDir& dir, F&& holds, std::string* report,
                 seconds timeout = seconds(20)) {
  return base::WaitUntil(
      [&] {
        *report = RunProgram({kBin + "/taskcluster", "status", "--profile-dir", profile}, dir).out;
        return holds(*report);
      },
      timeout);
}

// With no --hwm, fast tasks give each engine a deep queue; then a long task
// with short ones behind it: those queued behind it are taken back and run
// on the engine that ran dry, each once, long before the long one ends.
TEST_F(ClusterTest, TasksQueuedBehindALongOneRunOnTheIdleEngineEachOnce) {
  StartCluster(2);
  Client& c = *client_;
  TaskOptions noop;
  noop.function = "noop";

  // The status shows each engine's HWM, learned deeper than one on no-ops.
  // (On a loaded machine one engine may run nearly all of a round, and
  // learns nothing of the other: more rounds give it some.)
  const std::regex learned_line(
      R"(routing: leastload, HWM auto \(engine 0: (\d+), engine 1: (\d+)\))");
  std::string report;
  std::smatch hwms;
  bool learned = false;
  for (int round = 0; round < 4 && !learned; ++round) {
    auto fast = c.SubmitMany(std::vector<TaskOptions>(400, noop));
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ASSERT_TRUE(c.WaitReplies(*fast, 60).ok());
    learned = StatusUntil(
        profile(), dir_,
        [&](const std::string& r) {
          return std::regex_search(r, hwms, learned_line) && std::stoi(hwms[1]) > 1 &&
                 std::stoi(hwms[2]) > 1;
        },
        &report, seconds(5));
  }
  EXPECT_TRUE(learned) << report;

  TaskOptions long_task;
  long_task.command = {"sleep", "20"};
  auto long_id = c.Submit(long_task);
  ASSERT_TRUE(long_id.ok());
  // Each short one appends a line to its own file: the lines count its runs.
  // More than the other engine may hold (its HWM is at most 64), so that
  // some go behind the long task: leastload may give the other engine all
  // it has room for, those measured short coming together.
  const std::filesystem::path runs = dir_.path() / "runs";
  std::filesystem::create_directories(runs);
  std::vector<TaskOptions> shorts(120);
  for (size_t i = 0; i < shorts.size(); ++i) {
    shorts[i].command = {"sh", "-c",
                         "echo ran >> " + (runs / std::to_string(i)).string() + "; sleep 0.01"};
  }
  const auto submitted = base::MonotonicNow();
  auto short_ids = c.SubmitMany(shorts);
  ASSERT_TRUE(short_ids.ok()) << short_ids.status().ToString();
  ASSERT_TRUE(c.WaitReplies(*short_ids, 60).ok());
  const double took = std::chrono::duration<double>(base::MonotonicNow() - submitted).count();
  EXPECT_LT(took, 15) << "none waited for the long task to end";

  // A reply reaches the client a moment before its record reaches the hub.
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(c, *short_ids, &records));
  auto long_record = c.Fetch({*long_id});
  ASSERT_TRUE(long_record.ok());
  ASSERT_EQ(long_record->size(), 1u);
  EXPECT_FALSE((*long_record)[0].finished()) << "the long task still runs";
  const std::optional<int32_t> long_engine = (*long_record)[0].engine_id;
  int moved = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const TaskInfo& r = records[i];
    EXPECT_TRUE(r.ok()) << r.error_message;
    EXPECT_EQ(LinesIn(runs / std::to_string(i)), 1) << "task " << i << " ran once";
    EXPECT_NE(r.engine_id, long_engine) << "task " << i << " ran beside the long one";
    if (r.attempts > 1) ++moved;
  }
  EXPECT_GT(moved, 0) << "some were queued behind the long task and taken back";
  ASSERT_TRUE(c.Abort({*long_id}).ok());
}

// --hwm N keeps its meaning: the status says so, with no per-engine list.
TEST_F(ClusterTest, AnExplicitHwmIsWhatTheStatusShows) {
  StartCluster(1, {"--hwm", "8"});
  std::string report;
  const bool shown = StatusUntil(
      profile(), dir_,
      [](const std::string& r) {
        return r.find("routing: leastload, HWM 8\n") != std::string::npos;
      },
      &report);
  EXPECT_TRUE(shown) << report;
}

}  // namespace
}  // namespace ztask::testing
