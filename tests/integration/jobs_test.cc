// Arrays, jobs, listing, waiting with progress, aborting, resubmitting and
// output files, through the real taskctl against a real cluster.
#include <fstream>
#include <set>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

// A sweep of shell commands: each costs a fork and an exec, which
// ThreadSanitizer slows most (a runner thread forks, and every wake-up
// between the engine's threads is watched).
#if defined(ZTASK_THREAD_SANITIZED)
constexpr int kSweep = 500;
#elif defined(ZTASK_SANITIZED)
constexpr int kSweep = 2000;
#else
constexpr int kSweep = 10000;
#endif

std::vector<Value> JsonLines(const Ran& r) {
  std::vector<Value> out;
  for (const auto& line : r.Lines()) out.push_back(Value::parse(line));
  return out;
}

class JobsTest : public ClusterTest {
 protected:
  // The one job `taskctl jobs NAME --json` shows.
  Value Job(const std::string& name) {
    Ran r = Ctl({"jobs", "--json", name});
    EXPECT_EQ(r.code, 0) << r.err;
    auto lines = JsonLines(r);
    EXPECT_EQ(lines.size(), 1u) << r.out;
    return lines.empty() ? Value() : lines[0];
  }
  // `taskctl submit` of an array: the job's name, its last line.
  std::string SubmitArray(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    Ran r = Ctl(args, 120);
    EXPECT_EQ(r.code, 0) << r.err;
    auto lines = r.Lines();
    EXPECT_FALSE(lines.empty());
    return lines.empty() ? "" : lines.back();
  }
};

TEST_F(JobsTest, AnArrayRunsOneTaskPerIndexAndEachSeesItsIndex) {
  StartCluster(2);
  const std::string job =
      SubmitArray({"--array", "1-9:4,20,3", "--", "sh", "-c", "echo $ZTASK_ARRAY_INDEX $ZTASK_JOB"});
  ASSERT_FALSE(job.empty());
  Ran waited = Ctl({"wait", "--job", job});
  ASSERT_EQ(waited.code, 0) << waited.err;
  EXPECT_TRUE(waited.err.empty()) << "nothing but the records when not a terminal: " << waited.err;
  auto records = JsonLines(waited);
  ASSERT_EQ(records.size(), 5u) << waited.out;
  const std::vector<int> want = {1, 3, 5, 9, 20};  // in array order
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["array_index"], want[i]);
    EXPECT_EQ(records[i]["job"], job);
    EXPECT_EQ(records[i]["stdout"], std::to_string(want[i]) + " " + job + "\n");
    EXPECT_EQ(records[i]["label"], job + "/" + std::to_string(want[i]));
  }
  Value j = Job(job);
  EXPECT_EQ(j["total"], 5);
  EXPECT_EQ(j["ok"], 5);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_TRUE(j["first_submit"].is_number());
  EXPECT_TRUE(j["last_finish"].is_number());

  // A single task still prints its id; --job adds it to the job.
  const std::string id = Submit({"--job", job, "--", "true"});
  ASSERT_EQ(Wait({id}).size(), 1u);
  EXPECT_EQ(Job(job)["total"], 6);
  // Another submission without --job is a job of its own.
  const std::string other = SubmitArray({"--array", "0", "--", "true"});
  EXPECT_NE(other, job);
  Ran table = Ctl({"jobs"});
  EXPECT_EQ(table.code, 0);
  EXPECT_NE(table.out.find(job), std::string::npos);
  EXPECT_NE(table.out.find("first submit"), std::string::npos) << table.out;
}

TEST_F(JobsTest, EachLineAndFromJsonGiveEveryTaskItsEntry) {
  StartCluster(2);
  std::ofstream(dir_.path() / "lines.txt") << "alpha\nbeta gamma\r\n\n'quoted' $HOME\n";
  const std::string lines = SubmitArray({"--job", "words", "--each-line",
                                         (dir_.path() / "lines.txt").string(), "--", "sh", "-c",
                                         "printf '%s|%s' \"$ZTASK_ARRAY_INDEX\" \"$ZTASK_ENTRY\""});
  EXPECT_EQ(lines, "words");
  Ran waited = Ctl({"wait", "--job", "words"});
  ASSERT_EQ(waited.code, 0) << waited.err;
  std::vector<std::string> outs;
  for (const auto& r : JsonLines(waited)) outs.push_back(r["stdout"]);
  EXPECT_EQ(outs, (std::vector<std::string>{"0|alpha", "1|beta gamma", "2|", "3|'quoted' $HOME"}));

  // --array picks lines by number.
  const std::string picked = SubmitArray({"--array", "1,3", "--each-line",
                                          (dir_.path() / "lines.txt").string(), "--", "sh", "-c",
                                          "printf %s \"$ZTASK_ENTRY\""});
  outs.clear();
  for (const auto& r : JsonLines(Ctl({"wait", "--job", picked}))) outs.push_back(r["stdout"]);
  EXPECT_EQ(outs, (std::vector<std::string>{"beta gamma", "'quoted' $HOME"}));

  std::ofstream(dir_.path() / "items.json") << R"([{"a": 1}, "s", [1, 2], 7])";
  const std::string json = SubmitArray({"--from-json", (dir_.path() / "items.json").string(), "--",
                                        "sh", "-c", "printf %s \"$ZTASK_ENTRY\""});
  outs.clear();
  for (const auto& r : JsonLines(Ctl({"wait", "--job", json}))) outs.push_back(r["stdout"]);
  EXPECT_EQ(outs, (std::vector<std::string>{R"({"a":1})", R"("s")", "[1,2]", "7"}));
  // A function without --args gets its element as its arguments.
  const std::string fn =
      SubmitArray({"--fn", "echo", "--from-json", (dir_.path() / "items.json").string()});
  std::vector<Value> results;
  for (const auto& r : JsonLines(Ctl({"wait", "--job", fn}))) results.push_back(r["result"]);
  EXPECT_EQ(results, (std::vector<Value>{{{"a", 1}}, "s", {1, 2}, 7}));
}

TEST_F(JobsTest, ASweepWithFailuresIsListedResubmittedAndEndsAllOk) {
  StartCluster(2);
  // Every hundredth index fails until the marker file is there.
  const std::string marker = (dir_.path() / "fixed").string();
  const std::string job = SubmitArray(
      {"--job", "sweep", "--array", "0-" + std::to_string(kSweep - 1), "--", "sh", "-c",
       "[ $((ZTASK_ARRAY_INDEX % 100)) -ne 0 ] || [ -e " + marker + " ]"});
  ASSERT_EQ(job, "sweep");
  Ran waited = Ctl({"wait", "--job", "sweep"}, 600);
  EXPECT_EQ(waited.code, 1) << waited.err;
  EXPECT_EQ(JsonLines(waited).size(), static_cast<size_t>(kSweep));
  Value j = Job("sweep");
  EXPECT_EQ(j["total"], kSweep);
  EXPECT_EQ(j["failed"], kSweep / 100);
  EXPECT_EQ(j["ok"], kSweep - kSweep / 100);

  Ran failed = Ctl({"list", "--job", "sweep", "--status", "failed", "--json"});
  ASSERT_EQ(failed.code, 0) << failed.err;
  auto failures = JsonLines(failed);
  ASSERT_EQ(failures.size(), static_cast<size_t>(kSweep / 100));
  std::set<std::string> failed_ids;
  for (const auto& r : failures) {
    EXPECT_EQ(r["array_index"].get<int>() % 100, 0) << r.dump();
    EXPECT_EQ(r["error"]["type"], "TaskFailed");
    failed_ids.insert(r["id"]);
  }
  Ran table = Ctl({"list", "--job", "sweep", "--status", "failed"});
  EXPECT_EQ(table.Lines().size(), failures.size() + 1) << "a header and one row each";

  std::ofstream(marker) << "";
  Ran again = Ctl({"resubmit", "--job", "sweep", "--status", "failed"});
  ASSERT_EQ(again.code, 0) << again.err;
  ASSERT_EQ(again.Lines().size(), failures.size()) << again.out;
  for (const auto& line : again.Lines()) {
    // NEW replaces OLD
    ASSERT_EQ(line.size(), 32u + 10 + 32) << line;
    EXPECT_EQ(line.substr(32, 10), " replaces ");
    EXPECT_TRUE(failed_ids.count(line.substr(42))) << line;
  }
  Ran rewaited = Ctl({"wait", "--job", "sweep"}, 600);
  EXPECT_EQ(rewaited.code, 0) << rewaited.err;
  auto finals = JsonLines(rewaited);
  EXPECT_EQ(finals.size(), static_cast<size_t>(kSweep)) << "the replaced ones are not shown";
  std::set<int> indices;
  for (const auto& r : finals) {
    EXPECT_EQ(r["status"], "ok");
    indices.insert(r["array_index"].get<int>());
  }
  EXPECT_EQ(indices.size(), static_cast<size_t>(kSweep)) << "every index once";
  j = Job("sweep");
  EXPECT_EQ(j["total"], kSweep);
  EXPECT_EQ(j["ok"], kSweep);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["replaced"], kSweep / 100);
  EXPECT_TRUE(JsonLines(Ctl({"list", "--job", "sweep", "--status", "failed", "--json"})).empty());
  // Nothing left to submit again.
  Ran nothing = Ctl({"resubmit", "--job", "sweep"});
  EXPECT_EQ(nothing.code, 0);
  EXPECT_TRUE(nothing.out.empty()) << nothing.out;
}

TEST_F(JobsTest, ResubmittingAFailedChainRunsItAgainInOrder) {
  StartCluster(1);
  const std::string marker = (dir_.path() / "fixed").string();
  const std::string first =
      Submit({"--job", "chain", "--", "sh", "-c", "[ -e " + marker + " ]"});
  const std::string second = Submit({"--job", "chain", "--after", first, "--", "echo", "two"});
  int code = 0;
  auto records = Wait({first, second}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(records[1]["error"]["type"], "ImpossibleDependency");
  std::ofstream(marker) << "";
  Ran again = Ctl({"resubmit", "--job", "chain", "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  auto lines = JsonLines(again);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["replaces"], first) << "dependencies first";
  EXPECT_EQ(lines[1]["replaces"], second);
  auto rerun = Wait({lines[0]["id"], lines[1]["id"]}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(rerun[1]["stdout"], "two\n");
  Ran full = Ctl({"list", "--job", "chain"});
  EXPECT_EQ(std::count(full.out.begin(), full.out.end(), '\n'), 5) << full.out;
  EXPECT_NE(full.out.find("replaced"), std::string::npos) << full.out;
}

TEST_F(JobsTest, AbortingAJobStopsWhatHasNotStartedAndWaitEndsWithTheFailures) {
  StartCluster(1);
  const std::string job = SubmitArray({"--array", "1-6", "--", "sleep", "0.5"});
  ASSERT_TRUE(WaitFor([&] { return Job(job)["running"] == 1; }, std::chrono::seconds(30)));
  Ran aborted = Ctl({"abort", "--job", job});
  ASSERT_EQ(aborted.code, 0) << aborted.err;
  EXPECT_NE(aborted.out.find("of job " + job + " aborted"), std::string::npos) << aborted.out;
  Ran waited = Ctl({"wait", "--job", job});
  EXPECT_EQ(waited.code, 1);
  int ok = 0, aborted_count = 0;
  for (const auto& r : JsonLines(waited)) {
    if (r["status"] == "ok") ++ok;
    if (!r["error"].is_null() && r["error"]["type"] == "TaskAborted") ++aborted_count;
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(aborted_count, 4) << waited.out;
  EXPECT_EQ(ok + aborted_count, 6);
  Value j = Job(job);
  EXPECT_EQ(j["failed"], aborted_count);
}

TEST_F(JobsTest, OutputsGoWholeToFilesNamedByPlaceholders) {
  StartCluster(1);
  const std::string out = (dir_.path() / "out" / "%{JOB}" / "%{ARRAY_INDEX}.log").string();
  const std::string err = (dir_.path() / "err-%{TASK_ID}.txt").string();
  // 1.5 MiB of stdout: more than the record keeps (1 MiB).
  const std::string job = SubmitArray(
      {"--job", "big", "--array", "1-2", "--stdout", out, "--stderr", err, "--", "sh", "-c",
       "head -c 1572864 /dev/zero | tr '\\0' x; echo oops $ZTASK_ARRAY_INDEX >&2"});
  Ran waited = Ctl({"wait", "--job", "big"});
  ASSERT_EQ(waited.code, 0) << waited.err;
  for (const auto& r : JsonLines(waited)) {
    const std::string index = std::to_string(r["array_index"].get<int>());
    const auto file = dir_.path() / "out" / "big" / (index + ".log");
    EXPECT_EQ(std::filesystem::file_size(file), 1572864u) << file;
    EXPECT_TRUE(r.contains("stdout"));
    EXPECT_EQ(ReadFile(dir_.path() / ("err-" + r["id"].get<std::string>() + ".txt")),
              "oops " + index + "\n");
    EXPECT_EQ(r["stderr"], "oops " + index + "\n") << "the record keeps its tail too";
  }
  auto records = client_->List("big");
  ASSERT_TRUE(records.ok());
  for (const auto& r : *records) EXPECT_TRUE(r.stdout_truncated);
  // A file that cannot be written fails the task with a clear error.
  const std::string id = Submit({"--stdout", "/proc/forbidden/x", "--", "true"});
  auto failed = Wait({id});
  EXPECT_EQ(failed[0]["error"]["type"], "TaskFailed");
  EXPECT_NE(failed[0]["error"]["message"].get<std::string>().find("/proc/forbidden/x"),
            std::string::npos);
}

TEST_F(JobsTest, ProgressIsDrawnOnATerminalOnly) {
  StartCluster(2);
  // `script` gives taskctl a terminal.
  const std::string typescript = (dir_.path() / "typescript").string();
  Ran drawn = RunProgram({"script", "-qec",
                          kBin + "/taskctl --profile-dir " + profile() +
                              " submit --array 1-200 --wait --progress -- true > " +
                              (dir_.path() / "records").string(),
                          typescript},
                         dir_, 120);
  ASSERT_EQ(drawn.code, 0) << drawn.err;
  const std::string screen = ReadFile(typescript);
  EXPECT_NE(screen.find("200/200 100%"), std::string::npos) << screen;
  EXPECT_NE(screen.find("ok 200"), std::string::npos) << screen;
  auto lines = RunProgram({"cat", (dir_.path() / "records").string()}, dir_).Lines();
  EXPECT_EQ(lines.size(), 202u) << "the count, the job and 200 records";
  // Not a terminal: the records, nothing else.
  Ran plain = Ctl({"submit", "--array", "1-20", "--wait", "--progress", "--", "true"});
  EXPECT_EQ(plain.code, 0);
  EXPECT_TRUE(plain.err.empty()) << plain.err;
  EXPECT_EQ(plain.Lines().size(), 22u);
  // Waiting on ids draws too.
  const std::string id = Submit({"--", "true"});
  Ran ids = RunProgram({"script", "-qec",
                        kBin + "/taskctl --profile-dir " + profile() + " wait --progress " + id,
                        typescript},
                       dir_, 60);
  EXPECT_EQ(ids.code, 0);
  EXPECT_NE(ReadFile(typescript).find("1/1 100%"), std::string::npos);
}

TEST_F(JobsTest, MistakesAreOneLineWithExitTwoAndSubmitNothing) {
  StartCluster(1);
  std::ofstream(dir_.path() / "bad.json") << R"({"not": "an array"})";
  std::ofstream(dir_.path() / "lines.txt") << "a\nb\n";
  const std::vector<std::vector<std::string>> mistakes = {
      {"submit", "--array", "5-1", "--", "true"},
      {"submit", "--array", "1-3:0", "--", "true"},
      {"submit", "--array", "a-b", "--", "true"},
      {"submit", "--array", "1,,2", "--", "true"},
      {"submit", "--array", "0-99999999", "--", "true"},
      {"submit", "--each-line", (dir_.path() / "missing.txt").string(), "--", "true"},
      {"submit", "--from-json", (dir_.path() / "bad.json").string(), "--", "true"},
      {"submit", "--each-line", (dir_.path() / "lines.txt").string(), "--from-json",
       (dir_.path() / "bad.json").string(), "--", "true"},
      {"submit", "--array", "5", "--each-line", (dir_.path() / "lines.txt").string(), "--", "true"},
      {"submit", "--progress", "--", "true"},
      {"submit", "--stdout", "out-%{TASKID}", "--", "true"},
      {"submit", "--array", "1-3", "--each-engine", "--", "true"},
      {"submit", "--job", "two words", "--", "true"},
      {"submit", "--job", std::string(129, 'j'), "--", "true"},
      {"submit-graph", "--job", "a\nb", (dir_.path() / "bad.json").string()},
      {"wait"},
      {"wait", "--job", "nosuch"},
      {"wait", "--job", "x", std::string(32, 'a')},
      {"list", "--status", "broken"},
      {"list", "--job", "nosuch"},
      {"abort", "--job", "nosuch"},
      {"resubmit"},
      {"resubmit", "--job", "nosuch"},
      {"resubmit", "--job", "x", "--status", "ok"},
      {"jobs", "nosuch"},
  };
  for (const auto& args : mistakes) {
    Ran r = Ctl(args);
    std::string typed;
    for (const auto& a : args) typed += a + " ";
    EXPECT_EQ(r.code, 2) << typed << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << typed << r.err;
    EXPECT_TRUE(r.out.empty()) << typed << r.out;
  }
  auto all = client_->FetchAll();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty()) << "nothing was submitted";
  Ran jobs = Ctl({"jobs", "--json"});
  EXPECT_TRUE(jobs.out.empty()) << jobs.out;
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

// The hub holds waiting requests for 100,000 ids in all and answers at
// once past that: a client asks in parts, and still waits for every one.
TEST_F(ClusterTest, FetchWhenWaitsForMoreTasksThanTheHubHoldsAtOnce) {
#ifdef ZTASK_SANITIZED
  constexpr int kTasks = 15000;
#else
  constexpr int kTasks = 120000;
#endif
  StartCluster(2, {"--hwm", "64"});
  std::vector<TaskOptions> tasks(kTasks);
  for (auto& t : tasks) t.function = "noop";
  auto ids = client_->SubmitMany(tasks);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  auto records = client_->FetchWhen(*ids, /*finished=*/true, 60);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), static_cast<size_t>(kTasks));
  size_t finished = 0;
  for (const auto& r : *records) finished += r.finished() ? 1 : 0;
  EXPECT_EQ(finished, static_cast<size_t>(kTasks));
}

}  // namespace
}  // namespace ztask::testing
