// taskctl and taskcluster as people type them: global options before or
// after the subcommand or from the environment, one-line usage errors with
// exit code 2, and listings that show what is there.
#include <cstdlib>
#include <fstream>

#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

// The three ways to name the profile: before the subcommand, after it, and
// in ZTASK_PROFILE_DIR.
enum class Where { kBefore, kAfter, kEnvironment };

class CommandLine : public ClusterTest {
 protected:
  // `program subcommand args...` with the profile given as `where` says.
  Ran Run(const std::string& program, std::vector<std::string> words, Where where) {
    std::vector<std::string> argv = {kBin + "/" + program};
    if (where == Where::kBefore) argv.insert(argv.end(), {"--profile-dir", profile()});
    // After the subcommand's own words, before any `-- CMD`.
    auto dashes = std::find(words.begin(), words.end(), "--");
    if (where == Where::kAfter) {
      dashes = words.insert(dashes, {"--profile-dir", profile()});
    }
    argv.insert(argv.end(), words.begin(), words.end());
    if (where == Where::kEnvironment) ::setenv("ZTASK_PROFILE_DIR", profile().c_str(), 1);
    Ran ran = RunProgram(argv, dir_);
    ::unsetenv("ZTASK_PROFILE_DIR");
    return ran;
  }
};

TEST_F(CommandLine, EveryTaskctlSubcommandTakesTheProfileBeforeAfterOrFromTheEnvironment) {
  StartCluster(1);
  const auto graph = dir_.path() / "graph.json";
  std::ofstream(graph) << R"({"tasks": [{"name": "a", "command": ["true"]}]})";
  for (Where where : {Where::kBefore, Where::kAfter, Where::kEnvironment}) {
    SCOPED_TRACE(static_cast<int>(where));
    Ran submit = Run("taskctl", {"submit", "--label", "x", "--", "sh", "-c", "echo hi"}, where);
    ASSERT_EQ(submit.code, 0) << submit.err;
    const std::string id = submit.out.substr(0, 32);
    for (std::vector<std::string> words :
         {std::vector<std::string>{"wait", "--timeout", "30", id}, {"result", id}, {"status"},
          {"status", "--json"}, {"engines"}, {"engines", "--all", "--json"},
          {"graph", "--dot", id}, {"abort", id}, {"wait-engines", "1", "--timeout", "30"},
          {"submit-graph", graph.string()}, {"purge", id}}) {
      Ran ran = Run("taskctl", words, where);
      EXPECT_EQ(ran.code, 0) << words[0] << ": " << ran.err;
      EXPECT_EQ(ran.err, "") << words[0];
    }
    // monitor runs until it has seen an event: a task makes some.
    std::vector<std::string> monitor = {kBin + "/taskctl"};
    if (where == Where::kBefore) monitor.insert(monitor.end(), {"--profile-dir", profile()});
    monitor.insert(monitor.end(), {"monitor", "--count", "1"});
    if (where == Where::kAfter) monitor.insert(monitor.end(), {"--profile-dir", profile()});
    if (where == Where::kEnvironment) ::setenv("ZTASK_PROFILE_DIR", profile().c_str(), 1);
    cluster::ChildProcess watching(monitor, dir_.path() / "monitor.log");
    ::unsetenv("ZTASK_PROFILE_DIR");
    std::optional<int> watched;
    TaskOptions noop;
    noop.function = "noop";
    ASSERT_TRUE(WaitFor([&] {
      (void)client_->Submit(noop);
      return (watched = watching.Wait(std::chrono::milliseconds(100))).has_value();
    }, std::chrono::seconds(30))) << watching.Log();
    EXPECT_EQ(*watched, 0) << watching.Log();
  }
  for (Where where : {Where::kBefore, Where::kAfter, Where::kEnvironment}) {
    Ran status = Run("taskcluster", {"status"}, where);
    EXPECT_EQ(status.code, 0) << status.err;
    EXPECT_NE(status.out.find("engines"), std::string::npos) << status.out;
    Ran scale = Run("taskcluster", {"scale", "1", "--timeout", "60"}, where);
    EXPECT_EQ(scale.code, 0) << scale.err;
  }
  Ran shutdown = Run("taskctl", {"shutdown"}, Where::kAfter);
  EXPECT_EQ(shutdown.code, 0) << shutdown.err;
}

TEST_F(CommandLine, TaskclusterStartAndStopTakeTheProfileAfterTheSubcommandOrFromTheEnvironment) {
  Ran started = Run("taskcluster", {"start", "-n", "1", "--daemonize"}, Where::kEnvironment);
  ASSERT_EQ(started.code, 0) << started.err;
  running_ = true;
  EXPECT_NE(started.out.find(profile()), std::string::npos) << started.out;
  Ran stopped = Run("taskcluster", {"stop"}, Where::kAfter);
  EXPECT_EQ(stopped.code, 0) << stopped.err;
  running_ = !(stopped.code == 0);
  Ran again = Run("taskcluster", {"start", "-n", "1", "--daemonize"}, Where::kBefore);
  ASSERT_EQ(again.code, 0) << again.err;
  running_ = true;
}

// IPython's --profile NAME: the profile directory ~/.ztask/profile_NAME, for
// taskcluster and taskctl alike, before or after the subcommand.
TEST_F(CommandLine, AProfileNameStandsForItsDirectoryUnderHome) {
  const std::filesystem::path home = dir_.path() / "home";
  std::filesystem::create_directories(home);
  const char* was = std::getenv("HOME");
  const std::string saved = was != nullptr ? was : "";
  ::setenv("HOME", home.c_str(), 1);
  const std::filesystem::path named = home / ".ztask" / "profile_sweep";
  struct Restore {
    std::filesystem::path named;
    std::string saved;
    TempDir* dir;
    ~Restore() {
      RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", named.string()}, *dir);
      ::setenv("HOME", saved.c_str(), 1);
    }
  } restore{named, saved, &dir_};
  const std::string ctl = kBin + "/taskctl", cluster = kBin + "/taskcluster";
  Ran started =
      RunProgram({cluster, "start", "--profile", "sweep", "-n", "1", "--daemonize"}, dir_);
  ASSERT_EQ(started.code, 0) << started.err;
  EXPECT_TRUE(std::filesystem::exists(protocol::ConnectionFilePath(named)));
  Ran submit = RunProgram({ctl, "--profile", "sweep", "submit", "--", "true"}, dir_);
  ASSERT_EQ(submit.code, 0) << submit.err;
  Ran wait = RunProgram(
      {ctl, "wait", submit.out.substr(0, 32), "--timeout", "30", "--profile", "sweep"}, dir_);
  EXPECT_EQ(wait.code, 0) << wait.err;
  Ran other = RunProgram({ctl, "status", "--profile", "other"}, dir_);
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.err.find((home / ".ztask" / "profile_other").string()), std::string::npos)
      << other.err;
  Ran stopped = RunProgram({cluster, "stop", "--profile", "sweep"}, dir_);
  EXPECT_EQ(stopped.code, 0) << stopped.err;
  EXPECT_NE(RunProgram({cluster, "status", "--profile", "sweep"}, dir_).code, 0);
}

// A usage error: exit code 2, nothing on stdout, one line on stderr naming
// the program, and never a trace or an abort.
void ExpectUsageError(const Ran& ran, const std::string& mentions) {
  EXPECT_EQ(ran.code, 2) << ran.out << ran.err;
  EXPECT_EQ(ran.out, "");
  ASSERT_FALSE(ran.err.empty());
  EXPECT_EQ(std::count(ran.err.begin(), ran.err.end(), '\n'), 1) << ran.err;
  EXPECT_EQ(ran.err.back(), '\n');
  EXPECT_NE(ran.err.find(mentions), std::string::npos) << ran.err;
  EXPECT_EQ(ran.err.find("terminate"), std::string::npos) << ran.err;
}

TEST_F(CommandLine, UsageErrorsAreOneLineWithExitCodeTwo) {
  const std::string ctl = kBin + "/taskctl", cluster = kBin + "/taskcluster";
  const std::string missing = (dir_.path() / "nowhere").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{ctl}, "subcommand"},
      {{ctl, "--bogus", "status"}, "--bogus"},
      {{ctl, "status", "--bogus"}, "--bogus"},
      {{ctl, "wait-engines", "many", "--profile-dir", missing}, "many"},
      {{ctl, "wait-engines", "--profile-dir", missing}, "n"},
      {{ctl, "submit", "--profile-dir", missing}, "nothing to run"},
      {{ctl, "submit", "--retries", "x", "--", "true"}, "--retries"},
      {{ctl, "wait", "not-an-id", "--profile-dir", missing}, "not-an-id"},
      {{ctl, "status", "--profile-dir", missing}, "no cluster is running"},
      {{ctl, "submit", "--env", "NOEQUALS", "--", "true"}, "--env"},
      {{cluster}, "subcommand"},
      {{cluster, "start", "--hwm", "-1", "--profile-dir", missing}, "--hwm"},
      {{cluster, "stop", "--bogus"}, "--bogus"},
      {{cluster, "status", "--profile-dir", missing}, "no cluster is running"},
      {{cluster, "scale", "--profile-dir", missing}, "engines"},
      {{cluster, "start", "--keep-finished", "0", "--profile-dir", missing}, "--keep-finished"},
      {{kBin + "/taskhub", "--keep-finished", "0", "--profile-dir", missing}, "--keep-finished"},
      {{kBin + "/taskscheduler", "--bogus", "--profile-dir", missing}, "--bogus"},
      {{cluster, "start", "--layout", "one", "--profile-dir", missing}, "--layout"},
      {{kBin + "/taskcontroller", "--bogus", "--profile-dir", missing}, "--bogus"},
      {{kBin + "/taskcontroller", "--hwm", "x", "--profile-dir", missing}, "--hwm"},
      {{kBin + "/taskcontroller", "--keep-finished", "0", "--profile-dir", missing},
       "--keep-finished"},
      {{kBin + "/taskcontroller", "--scheme", "nope", "--profile-dir", missing}, "nope"},
      {{kBin + "/taskcontroller", "stray", "--profile-dir", missing}, "stray"},
      {{cluster, "status", "--profile", "a/b"}, "'a/b' is not a profile name"},
      {{ctl, "status", "--profile", "x", "--profile-dir", missing}, "excludes"},
      {{kBin + "/taskengine", "--profile", ".."}, "is not a profile name"},
      // A daemon that refuses a flag taskcluster passes on: what it said.
      {{cluster, "start", "--scheme", "bogus", "--profile-dir", missing},
       "exited with code 2 while starting: task"},
      {{cluster, "start", "--scheme", "bogus", "--profile-dir", missing}, "unknown scheme 'bogus'"},
  };
  for (const auto& [argv, mentions] : cases) {
    SCOPED_TRACE(argv.size() > 1 ? argv[1] + " " + (argv.size() > 2 ? argv[2] : "") : argv[0]);
    ExpectUsageError(RunProgram(argv, dir_), mentions);
  }
}

TEST_F(CommandLine, ANumberOutOfItsRangeSaysWhatIsWanted) {
  const std::string missing = (dir_.path() / "nowhere").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kBin + "/taskcluster", "scale", "-1", "--profile-dir", missing}, "-1 is not more than 0"},
      {{kBin + "/taskctl", "wait-engines", "0", "--profile-dir", missing}, "0 is not more than 0"},
      {{kBin + "/taskscheduler", "--replay-window", "x", "--profile-dir", missing},
       "'x' is not a number"},
      {{kBin + "/taskhub", "--replay-window", "-3", "--profile-dir", missing},
       "-3 is not 0 or more"},
      {{kBin + "/taskcluster", "start", "-n", "abc", "--profile-dir", missing},
       "--engines: 'abc' is not a whole number from 1 to 100000"},
      {{kBin + "/taskcluster", "start", "--heartbeat-ms", "5", "--profile-dir", missing},
       "'5' is not a whole number from 10 to 600000"},
      {{kBin + "/taskdash", "--port", "x", "--profile-dir", missing},
       "'x' is not a whole number from 0 to 65535"},
      {{kBin + "/taskctl", "submit", "--retries", "1.5", "--profile-dir", missing, "--", "true"},
       "--retries: '1.5' is not a whole number"},
      {{kBin + "/taskctl", "wait", "--timeout", "soon", "--profile-dir", missing},
       "--timeout: 'soon' is not a number"},
  };
  for (const auto& [argv, mentions] : cases) {
    SCOPED_TRACE(argv[1] + " " + argv[2]);
    const Ran ran = RunProgram(argv, dir_);
    ExpectUsageError(ran, mentions);
    // Not a range up to the largest double, nor CLI11's own words.
    EXPECT_EQ(ran.err.find("1797693"), std::string::npos) << ran.err;
    EXPECT_EQ(ran.err.find("not in range"), std::string::npos) << ran.err;
    EXPECT_EQ(ran.err.find("Could not convert"), std::string::npos) << ran.err;
  }
}

TEST_F(CommandLine, EnginesListsTheLiveOnesAndAllAddsTheStopped) {
  StartCluster(1);
  ASSERT_EQ(Ctl({"engines", "--json"}).code, 0);
  for (const char* n : {"4", "1"}) {
    Ran scaled = RunProgram({kBin + "/taskcluster", "scale", n, "--profile-dir", profile()}, dir_);
    ASSERT_EQ(scaled.code, 0) << scaled.err;
  }
  Ran live = Ctl({"engines", "--json"});
  ASSERT_EQ(live.code, 0) << live.err;
  Value listed = Value::parse(live.out);
  ASSERT_EQ(listed.size(), 1u) << live.out;
  EXPECT_EQ(listed[0]["state"], "running");
  Ran all = Ctl({"engines", "--all", "--json"});
  Value everything = Value::parse(all.out);
  ASSERT_EQ(everything.size(), 4u) << all.out;
  EXPECT_EQ(std::count_if(everything.begin(), everything.end(),
                          [](const Value& e) { return e["state"] == "stopped"; }),
            3);
  Ran table = Ctl({"engines"});
  EXPECT_EQ(table.Lines().size(), 2u) << "a heading and one engine:\n" << table.out;
}

TEST_F(ClusterTest, DurabilityPowerReachesTheHubAndTheSchedulerAndTasksRun) {
  Ran wrong = RunProgram({kBin + "/taskcluster", "start", "--profile-dir", profile(),
                          "--durability", "disk"},
                         dir_);
  EXPECT_EQ(wrong.code, 2) << wrong.err;
  EXPECT_EQ(wrong.err.find('\n'), wrong.err.size() - 1) << "one line: " << wrong.err;
  EXPECT_NE(wrong.err.find("--durability"), std::string::npos) << wrong.err;

  StartCluster(1, {"--durability", "power"});
  const std::string id = Submit({"--", "echo", "kept"});
  const std::vector<Value> records = Wait({id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "ok");
  const std::string hub = PartLog(profile(), "hub");
  EXPECT_NE(hub.find("every commit synced to disk: durability power"), std::string::npos) << hub;
  const std::string scheduler = PartLog(profile(), "scheduler");
  EXPECT_NE(scheduler.find("synced to disk once per turn"), std::string::npos) << scheduler;
}

}  // namespace
}  // namespace ztask::testing
