// The whole cluster, end to end: taskcluster, taskhub, taskscheduler,
// taskengine processes, driven through taskctl and through the library.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "protocol/connection_file.h"
#include "protocol/frame_layout.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

using std::chrono::seconds;

TEST_F(ClusterTest, GraphWithAfterAndFollowThroughTaskctl) {
  StartCluster(3);
  std::ofstream(dir_.path() / "graph.json") << R"({"tasks": [
    {"name": "fetch", "command": ["sh", "-c", "echo fetched"]},
    {"name": "parse", "fn": "echo", "args": {"rows": 3}, "after": ["fetch"]},
    {"name": "local", "command": ["sh", "-c", "echo $ZTASK_ENGINE_ID"], "follow": ["fetch"]},
    {"name": "total", "fn": "sum", "args": [1, [2, 3]], "after": ["parse", "local"], "label": "t"}
  ]})";
  Ran submitted = Ctl({"submit-graph", (dir_.path() / "graph.json").string()});
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  std::map<std::string, std::string> ids;
  for (const auto& line : submitted.Lines())
    ids[line.substr(0, line.find(' '))] = line.substr(line.find(' ') + 1);
  ASSERT_EQ(ids.size(), 4u) << submitted.out;
  int code = -1;
  auto records = Wait({ids["fetch"], ids["parse"], ids["local"], ids["total"]}, &code);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(code, 0);
  for (const auto& r : records) {
    EXPECT_EQ(r["status"], "ok") << r.dump();
    for (const char* key :
         {"id", "status", "error", "engine_id", "attempts", "submitted", "started", "completed",
          "exit_code", "stdout", "stderr", "result", "label"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
  }
  EXPECT_EQ(records[0]["stdout"], "fetched\n");
  EXPECT_EQ(records[1]["result"], Value({{"rows", 3}}));
  EXPECT_EQ(records[2]["engine_id"], records[0]["engine_id"]) << "follow runs where fetch ran";
  EXPECT_EQ(records[2]["stdout"], records[0]["engine_id"].dump() + "\n");
  EXPECT_EQ(records[3]["result"], 6.0);
  EXPECT_EQ(records[3]["label"], "t");
  EXPECT_GE(records[1]["started"].get<double>(), records[0]["completed"].get<double>());
  EXPECT_GE(records[3]["started"].get<double>(), records[2]["completed"].get<double>());

  Ran dot = Ctl({"graph", "--dot"});
  EXPECT_EQ(dot.code, 0);
  EXPECT_NE(dot.out.find("\"" + ids["fetch"] + "\" -> \"" + ids["parse"] + "\""), std::string::npos)
      << dot.out;
  EXPECT_NE(dot.out.find("style=dashed"), std::string::npos);
}

TEST_F(ClusterTest, GraphWithACycleOrAnUnknownNameSubmitsNothing) {
  StartCluster(1);
  std::ofstream(dir_.path() / "cycle.json") << R"({"tasks": [
    {"name": "a", "fn": "noop", "after": ["b"]}, {"name": "b", "fn": "noop", "after": ["a"]}]})";
  Ran cycle = Ctl({"submit-graph", (dir_.path() / "cycle.json").string()});
  EXPECT_EQ(cycle.code, 2);
  EXPECT_NE(cycle.err.find("cycle through task '"), std::string::npos) << cycle.err;
  std::ofstream(dir_.path() / "unknown.json") << R"({"tasks": [
    {"name": "a", "fn": "noop", "after": ["ghost"]}]})";
  Ran unknown = Ctl({"submit-graph", (dir_.path() / "unknown.json").string()});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("'ghost'"), std::string::npos) << unknown.err;
  auto all = client_->FetchAll();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty()) << "nothing may be submitted";
}

TEST_F(ClusterTest, LibraryGraphMapAndMapReduce) {
  StartCluster(2);
  std::vector<GraphNode> graph(3);
  graph[0].name = "one";
  graph[0].options.function = "echo";
  graph[0].options.args = 1;
  graph[1].name = "two";
  graph[1].options.command = {"sh", "-c", "echo two"};
  graph[1].after = {"one"};
  graph[2].name = "three";
  graph[2].options.function = "noop";
  graph[2].follow = {"two"};
  auto submitted = client_->SubmitGraph(graph);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  std::vector<TaskId> ids;
  for (const auto& [name, id] : *submitted) ids.push_back(id);
  ASSERT_TRUE(client_->Wait(ids, 60).ok());
  auto records = client_->Fetch(ids);
  ASSERT_TRUE(records.ok());
  for (const auto& r : *records) EXPECT_TRUE(r.ok()) << r.ToJson().dump();

  auto mapped = client_->Map("echo", {Value(1), Value("x"), Value({1, 2})});
  ASSERT_TRUE(mapped.ok());
  ASSERT_TRUE(client_->Wait(*mapped, 60).ok());
  auto map_records = client_->Fetch(*mapped);
  ASSERT_TRUE(map_records.ok());
  EXPECT_EQ((*map_records)[1].result, "x");
  EXPECT_EQ((*map_records)[2].result, Value({1, 2}));

  std::vector<Value> inputs;
  for (int i = 1; i <= 10; ++i) inputs.push_back(i);
  auto root = client_->MapReduce("echo", "sum", inputs, 3);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  ASSERT_TRUE(client_->Wait({*root}, 60).ok());
  auto total = client_->Fetch({*root});
  ASSERT_TRUE(total.ok());
  EXPECT_EQ((*total)[0].result, 55.0) << (*total)[0].ToJson().dump();
  EXPECT_EQ((*total)[0].after.ids.size(), 2u) << "10 inputs, fan-in 3: 4 reduces, then 2, then 1";
}

TEST_F(ClusterTest, SubmitManySendsItsTasksInOrderOrNoneWhenOneIsWrong) {
  StartCluster(2, {"--hwm", "64"});
  // A chain inside one call: each task names the one before it.
  std::vector<TaskId> ids;
  std::vector<TaskOptions> tasks(2000);
  for (size_t i = 0; i < tasks.size(); ++i) {
    ids.push_back(TaskId::Random());
    tasks[i].function = "echo";
    tasks[i].args = static_cast<int>(i);
    if (i > 0) tasks[i].after.ids = {ids[i - 1]};
  }
  auto sent = client_->SubmitMany(tasks, ids);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_EQ(*sent, ids);
  ASSERT_TRUE(client_->WaitReplies(ids, 120).ok());
  ASSERT_TRUE(client_->Wait(ids, 60).ok());
  auto records = client_->Fetch(ids);
  ASSERT_TRUE(records.ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE((*records)[i].ok()) << i << ": " << (*records)[i].ToJson().dump();
    ASSERT_EQ((*records)[i].result, static_cast<int>(i));
    if (i > 0) {
      ASSERT_LE((*records)[i - 1].completed.value(), (*records)[i].started.value()) << i;
    }
  }
  // One task without a command or a function: the call fails, naming it,
  // and none of the others was sent.
  std::vector<TaskOptions> bad(3);
  bad[0].function = bad[2].function = "noop";
  auto refused = client_->SubmitMany(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("task 2 of 3"), std::string::npos)
      << refused.status().ToString();
  auto everything = client_->FetchAll();
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->size(), ids.size());
}

// A call's tasks are made first and sent in parts; a part of one task goes
// alone, as its own message, and must be dated as it leaves: dated when it
// was made, it comes after a batch dated later, and the scheduler refuses
// it as a replay (the task then never runs and its reply never comes).
TEST_F(ClusterTest, ATaskSentAloneAfterABatchOfTheSameCallIsNotRefused) {
  StartCluster(2, {"--hwm", "64"});
  // One more than a batch holds: a full batch, then the last task alone.
  std::vector<TaskOptions> tasks(protocol::kMaxBatchTasks + 1);
  for (auto& t : tasks) t.function = "noop";
  auto ids = client_->SubmitMany(tasks);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_TRUE(client_->WaitReplies(*ids, 30).ok());
  // Room for three at a time: once tasks are in flight, each reply makes
  // room for one more, and many parts of one task go alone.
  client_->set_max_in_flight(3);
  std::vector<TaskOptions> more(200);
  for (auto& t : more) t.function = "noop";
  auto more_ids = client_->SubmitMany(more);
  ASSERT_TRUE(more_ids.ok()) << more_ids.status().ToString();
  ASSERT_TRUE(client_->WaitReplies(*more_ids, 30).ok());
  ASSERT_TRUE(client_->Wait(*more_ids, 30).ok());  // the hub's records final too
  auto records = client_->Fetch(*more_ids);
  ASSERT_TRUE(records.ok());
  for (const auto& r : *records) EXPECT_TRUE(r.ok()) << r.ToJson().dump();
}

TEST_F(ClusterTest, DependenciesOnOutcomesLetGoOfAreReadFromTheHub) {
  // The hub keeps 3 finished records in memory and the scheduler remembers
  // 3 outcomes: the first of 20 tasks is long gone from both when later
  // tasks name it.
  StartCluster(2, {"--keep-finished", "3", "--hwm", "8"});
  std::vector<TaskOptions> first(20);
  for (auto& o : first) o.function = "noop";
  auto ids = client_->SubmitMany(first);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(client_->Wait(*ids, 60).ok()) << "every record in the hub";
  const TaskId old = ids->front();
  auto old_record = client_->Fetch({old});
  ASSERT_TRUE(old_record.ok()) << old_record.status().ToString();
  ASSERT_TRUE((*old_record)[0].ok()) << "read from the hub's file";
  const TaskId ghost = TaskId::Random();

  TaskOptions after, follow, on_failure, unknown;
  after.function = follow.function = on_failure.function = unknown.function = "noop";
  after.after.ids = {old};
  follow.follow.ids = {old};
  on_failure.after = {{old}, DependencyMode::kAll, AcceptedOutcome::kFailure};
  unknown.after.ids = {ghost};
  auto later = client_->SubmitMany({after, follow, on_failure, unknown});
  ASSERT_TRUE(later.ok());
  ASSERT_TRUE(client_->Wait(*later, 60).ok());
  auto records = client_->Fetch(*later);
  ASSERT_TRUE(records.ok());
  EXPECT_TRUE((*records)[0].ok()) << (*records)[0].error_message;
  EXPECT_TRUE((*records)[1].ok()) << (*records)[1].error_message;
  EXPECT_EQ((*records)[1].engine_id, (*old_record)[0].engine_id) << "follow: where it ran";
  EXPECT_EQ((*records)[2].error_type, ErrorType::kImpossibleDependency);
  EXPECT_EQ((*records)[3].error_type, ErrorType::kInvalidDependency);
  EXPECT_NE((*records)[3].error_message.find(ghost.ToHex()), std::string::npos);
  // Every record is still listed, page by page, from memory and the file.
  auto every = client_->FetchAll();
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->size(), 24u);
}

TEST_F(ClusterTest, AReplyNeverWaitsForTheTaskAfterIt) {
  // One engine takes both tasks in one batch: a quick one, then one that
  // runs 5 s. The quick one's reply must not wait for the slow one.
  StartCluster(1, {"--hwm", "8"});
  TaskOptions quick, slow;
  quick.function = "echo";
  quick.args = 1;
  slow.function = "sleep";
  slow.args = 5;
  for (const bool command : {false, true}) {
    if (command) {
      slow = TaskOptions{};
      slow.command = {"sleep", "5"};
    }
    auto ids = client_->SubmitMany({quick, slow});
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(client_->WaitReplies({(*ids)[0]}, 30).ok());
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 3.0) << (command ? "before a command" : "before a function");
    EXPECT_FALSE(client_->Ready((*ids)[1])) << "the slow task is still running";
    ASSERT_TRUE(client_->WaitReplies({(*ids)[1]}, 30).ok());
  }
}

TEST_F(ClusterTest, EveryErrorTypeReachesTheUser) {
  StartCluster(2);
  const std::string failed = Submit({"--", "sh", "-c", "echo oops >&2; exit 3"});
  const std::string child = Submit({"--after", failed, "--fn", "noop"});
  const std::string grandchild = Submit({"--after", child, "--fn", "noop"});
  const std::string invalid = Submit({"--after", std::string(32, 'a'), "--fn", "noop"});
  const std::string timeout = Submit({"--targets", "99", "--timeout", "0.3", "--fn", "noop"});
  const std::string limited = Submit({"--time-limit", "0.3", "--", "sleep", "30"});
  const std::string waiting = Submit({"--targets", "98", "--fn", "noop"});
  Ran aborted = Ctl({"abort", waiting});
  EXPECT_EQ(aborted.code, 0) << aborted.err;
  EXPECT_EQ(aborted.out, waiting + " aborted\n");

  int code = 0;
  auto r = Wait({failed, child, grandchild, invalid, timeout, limited, waiting}, &code);
  ASSERT_EQ(r.size(), 7u);
  EXPECT_EQ(code, 1);
  auto type = [](const Value& record) { return record["error"]["type"].get<std::string>(); };
  EXPECT_EQ(type(r[0]), "TaskFailed");
  EXPECT_EQ(r[0]["exit_code"], 3);
  EXPECT_EQ(r[0]["stderr"], "oops\n");
  EXPECT_EQ(type(r[1]), "ImpossibleDependency");
  EXPECT_EQ(type(r[2]), "ImpossibleDependency") << "the cascade reaches grandchildren";
  EXPECT_EQ(type(r[3]), "InvalidDependency");
  EXPECT_EQ(type(r[4]), "TaskTimeout");
  EXPECT_EQ(type(r[5]), "TimeLimitExceeded");
  EXPECT_LT(r[5]["completed"].get<double>() - r[5]["started"].get<double>(), 10.0);
  EXPECT_EQ(type(r[6]), "TaskAborted");
  for (const auto& record : r) {
    EXPECT_FALSE(record["error"]["message"].get<std::string>().empty()) << record.dump();
  }
}

TEST_F(ClusterTest, EngineKilledMidTaskIsAnEngineError) {
  StartCluster(2);
  const std::string id = Submit({"--", "sleep", "60"});
  std::optional<int32_t> engine;
  ASSERT_TRUE(WaitFor([&] {
    auto r = client_->Fetch({*TaskId::FromHex(id)});
    if (r.ok() && (*r)[0].status == TaskState::kRunning) engine = (*r)[0].engine_id;
    return engine.has_value();
  }));
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  pid_t pid = 0;
  for (const auto& e : *engines) {
    if (e.id == *engine) pid = static_cast<pid_t>(e.pid);
  }
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto r = Wait({id});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["error"]["type"], "EngineError") << r[0].dump();
  // The other engine keeps working.
  auto after = Wait({Submit({"--fn", "echo", "--args", "7"})});
  EXPECT_EQ(after[0]["result"], 7);
}

TEST_F(ClusterTest, RetriesMoveAFailingTaskToAnotherEngine) {
  StartCluster(2);
  // The hub lists an engine a moment before the scheduler can use it: one
  // task on each engine first, so that both are there for the retry.
  TaskOptions warm_up;
  warm_up.function = "noop";
  auto each = client_->SubmitEachEngine(warm_up);
  ASSERT_TRUE(each.ok()) << each.status().ToString();
  ASSERT_EQ(each->size(), 2u);
  std::vector<TaskId> warmed;
  for (const auto& [engine, id] : *each) warmed.push_back(id);
  ASSERT_TRUE(client_->Wait(warmed, 60).ok());
  const std::string log = (dir_.path() / "attempts").string();
  const std::string id = Submit({"--retries", "1", "--", "sh", "-c",
                                 "echo $ZTASK_ENGINE_ID >> " + log + "; [ $ZTASK_ATTEMPT -ge 2 ]"});
  auto r = Wait({id});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["status"], "ok") << r[0].dump();
  EXPECT_EQ(r[0]["attempts"], 2);
  std::ifstream in(log);
  std::string first, second;
  in >> first >> second;
  EXPECT_NE(first, second) << "the retry should go to the engine where it had not failed";
}

// Sent ahead (HWM 8): a chain runs in order on one engine, each link once;
// the link that fails stops the rest, which never run and fail as
// impossible; with sending ahead off the outcome is the same.
// Returns how many of the links after the failure had been sent ahead (an
// attempt that came back not run).
int ExpectAChainStopsWhereALinkFails(Client& client, const std::string& dir) {
  const std::string runs = dir + "/runs";
  std::vector<TaskId> chain;
  for (int i = 0; i < 12; ++i) {
    TaskOptions link;
    link.command = {"sh", "-c",
                    "echo " + std::to_string(i) + " >> " + runs + (i == 6 ? "; exit 3" : "")};
    if (i > 0) link.after.ids = {chain.back()};
    auto id = client.Submit(link);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return -1;
    chain.push_back(*id);
  }
  EXPECT_TRUE(client.Wait(chain, 60).ok());
  auto records = client.Fetch(chain);
  EXPECT_TRUE(records.ok()) << records.status().ToString();
  if (!records.ok()) return -1;
  int sent_ahead = 0;
  for (int i = 0; i < 12; ++i) {
    const TaskInfo& r = (*records)[static_cast<size_t>(i)];
    if (i < 6) {
      EXPECT_TRUE(r.ok()) << i << ": " << r.error_message;
    } else if (i == 6) {
      EXPECT_EQ(r.error_type, ErrorType::kTaskFailed);
    } else {
      EXPECT_EQ(r.error_type, ErrorType::kImpossibleDependency) << i << ": " << r.error_message;
      EXPECT_FALSE(r.started.has_value()) << i << " never started";
      sent_ahead += r.attempts > 0;
    }
  }
  std::ifstream in(runs);
  std::vector<int> ran;
  for (int i; in >> i;) ran.push_back(i);
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5, 6})) << "in order, each once, none after 6";
  return sent_ahead;
}

TEST_F(ClusterTest, AChainSentAheadRunsInOrderAndStopsWhereALinkFails) {
  StartCluster(2, {"--hwm", "8"});
  EXPECT_GT(ExpectAChainStopsWhereALinkFails(*client_, dir_.path().string()), 0)
      << "links behind the failure went ahead to its engine and came back not run";
}

TEST_F(ClusterTest, WithoutSendingAheadAChainStopsWhereALinkFailsAlike) {
  StartCluster(2, {"--hwm", "8", "--send-ahead", "false"});
  EXPECT_EQ(ExpectAChainStopsWhereALinkFails(*client_, dir_.path().string()), 0);
}

TEST_F(ClusterTest, ASecondProcessFetchesResultsAfterTheFirstExited) {
  StartCluster(1);
  const std::string id = Submit({"--label", "kept", "--", "echo", "for later"});
  ASSERT_TRUE(client_->Wait({*TaskId::FromHex(id)}, 60).ok());
  Ran result = Ctl({"result", id});
  ASSERT_EQ(result.code, 0) << result.err;
  Value record = Value::parse(result.out);
  EXPECT_EQ(record["stdout"], "for later\n");
  EXPECT_EQ(record["label"], "kept");
}

// A process that did not submit a task waits for it with one request: the
// hub answers when the record is there (or final), not when asked again.
TEST_F(ClusterTest, FetchWhenIsAnsweredOnceTheTasksAreThere) {
  StartCluster(1);
  auto other = Client::Connect(profile());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  // The gate: the task waits on it, so the test decides when it finishes.
  const std::string gate = (dir_.path() / "gate").string();
  const std::string id =
      Submit({"--", "sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.01; done; echo out"});
  const TaskId task = *TaskId::FromHex(id);
  auto recorded = (*other)->FetchWhen({task}, /*finished=*/false, 30);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_NE((*recorded)[0].status, TaskState::kOk);
  // Not finished within its time: answered then, unfinished.
  const auto start = std::chrono::steady_clock::now();
  auto early = (*other)->FetchWhen({task}, /*finished=*/true, 0.3);
  ASSERT_TRUE(early.ok());
  EXPECT_NE((*early)[0].status, TaskState::kOk);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  std::thread open([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(gate) << "go";
  });
  auto finished = (*other)->FetchWhen({task}, /*finished=*/true, 30);
  open.join();
  ASSERT_TRUE(finished.ok()) << finished.status().ToString();
  EXPECT_EQ((*finished)[0].status, TaskState::kOk);
  EXPECT_EQ((*finished)[0].stdout_text, "out\n");
  // An id no one submitted: not found once the time is up.
  auto unknown = (*other)->FetchWhen({TaskId::New()}, false, 0.2);
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
}

// Another process waits for more tasks than the hub holds in one waiting
// request: it waits for them part by part, and sees every one finished.
TEST_F(ClusterTest, WaitingForManyTasksFromAnotherProcessSeesThemAllFinish) {
  StartCluster(2, {"--hwm", "64"});
  TaskOptions noop;
  noop.function = "noop";
  std::vector<TaskOptions> tasks(25000, noop);
  auto ids = client_->SubmitMany(tasks);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  auto other = Client::Connect(profile());
  ASSERT_TRUE(other.ok());
  const Status waited = (*other)->Wait(*ids, 120);
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  auto records = (*other)->Fetch(*ids);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  for (const TaskInfo& r : *records) ASSERT_EQ(r.status, TaskState::kOk) << r.id.ToHex();
}

TEST_F(ClusterTest, StatusAndEnginesDescribeTheCluster) {
  StartCluster(2);
  Ran engines = Ctl({"engines", "--json"});
  ASSERT_EQ(engines.code, 0);
  Value list = Value::parse(engines.out);
  ASSERT_EQ(list.size(), 2u);
  for (const auto& e : list) {
    for (const char* key : {"id", "name", "host", "pid", "state", "registered"}) {
      EXPECT_TRUE(e.contains(key)) << key;
    }
  }
  Wait({Submit({"--fn", "noop"})});
  Ran status = Ctl({"status", "--json"});
  ASSERT_EQ(status.code, 0);
  Value s = Value::parse(status.out);
  EXPECT_EQ(s["unassigned"], 0);
  int64_t completed = 0;
  for (const auto& e : s["engines"]) completed += e["completed"].get<int64_t>();
  EXPECT_EQ(completed, 1);
}

TEST_F(ClusterTest, UserErrorsAreOneLineWithExitTwo) {
  Ran none = Ctl({"status"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("taskcluster start"), std::string::npos) << none.err;
  StartCluster(1);
  Ran bad_id = Ctl({"wait", "xyz"});
  EXPECT_EQ(bad_id.code, 2);
  EXPECT_NE(bad_id.err.find("'xyz'"), std::string::npos);
  Ran unknown = Ctl({"wait", std::string(32, 'b')});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown task id"), std::string::npos);
  Ran nothing = Ctl({"submit"});
  EXPECT_EQ(nothing.code, 2);
  Ran timeout = Ctl({"wait", "--timeout", "0.2", Submit({"--", "sleep", "5"})});
  EXPECT_EQ(timeout.code, 3);
  for (const Ran* r : {&none, &bad_id, &unknown, &nothing, &timeout}) {
    EXPECT_EQ(std::count(r->err.begin(), r->err.end(), '\n'), 1) << r->err;
  }
  Ran second =
      RunProgram({kBin + "/taskcluster", "start", "-n", "1", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(second.code, 2);
  EXPECT_NE(second.err.find("already running"), std::string::npos) << second.err;
}

TEST_F(ClusterTest, AnEngineGivenWrongFlagsSaysSoInOneLineWithExitTwo) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--pyton", "x"}, {"--python"}, {"--max-result-bytes", "lots"}}) {
    std::vector<std::string> argv = {kBin + "/taskengine"};
    argv.insert(argv.end(), args.begin(), args.end());
    Ran r = RunProgram(argv, dir_);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("taskengine --help"), std::string::npos) << r.err;
  }
  Ran help = RunProgram({kBin + "/taskengine", "--help"}, dir_);
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--python"), std::string::npos);
}

TEST_F(ClusterTest, StopLeavesNoProcessBehind) {
  StartCluster(2);
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  Ran stop = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  ASSERT_EQ(stop.code, 0) << stop.err;
  running_ = false;
  for (const auto& e : *engines) {
    EXPECT_FALSE(cluster::ProcessRunning(static_cast<pid_t>(e.pid))) << "engine " << e.id;
  }
  Ran again = RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_);
  EXPECT_EQ(again.code, 2);
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, CommandsGetTheirDirectoryAndEnvironmentAndUnknownFunctionsFail) {
  StartCluster(1);
  const std::string cmd = Submit({"--cwd", dir_.path().string(), "--env", "GREETING=hi there", "--",
                                  "sh", "-c", "pwd; echo \"$GREETING\""});
  const std::string fn = Submit({"--fn", "no_such_function"});
  int code = 0;
  auto r = Wait({cmd, fn}, &code);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["stdout"], dir_.path().string() + "\nhi there\n");
  EXPECT_EQ(r[1]["error"]["type"], "TaskFailed");
  EXPECT_NE(r[1]["error"]["message"].get<std::string>().find("no_such_function"),
            std::string::npos);
  EXPECT_EQ(code, 1);
}

TEST_F(ClusterTest, MonitorFollowsTheEventStream) {
  StartCluster(1);
  ChildProcess monitor(
      {kBin + "/taskctl", "--profile-dir", profile(), "monitor", "--json", "--count", "3"},
      dir_.path() / "monitor.log");
  // Events are published, not queued: submit until the subscriber sees them.
  ASSERT_TRUE(WaitFor(
      [&] {
        Submit({"--fn", "noop"});
        return monitor.Wait(std::chrono::milliseconds(100)).has_value();
      },
      std::chrono::seconds(30)));
  EXPECT_EQ(*monitor.Poll(), 0);
  std::istringstream lines(monitor.Log());
  int events = 0;
  for (std::string line; std::getline(lines, line);) {
    Value event = Value::parse(line);
    EXPECT_TRUE(event["kind"].get<std::string>().rfind("task_", 0) == 0) << line;
    ++events;
  }
  EXPECT_EQ(events, 3);
}

TEST_F(ClusterTest, PurgeForgetsFinishedRecords) {
  StartCluster(1);
  const std::string id = Submit({"--fn", "noop"});
  Wait({id});
  Ran purged = Ctl({"purge", id});
  EXPECT_EQ(purged.code, 0) << purged.err;
  EXPECT_EQ(purged.out, "1 records purged\n");
  Ran result = Ctl({"result", id});
  EXPECT_EQ(result.code, 2);
  EXPECT_NE(result.err.find("unknown task id"), std::string::npos);
}

// After `taskctl shutdown`: taskcluster ends too (a stop finds no cluster).
class Shutdown : public ClusterTest {
 protected:
  void ExpectTheSupervisorGone() {
    EXPECT_TRUE(WaitFor(
        [&] {
          return RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_)
                     .code == 2;
        },
        std::chrono::seconds(20)))
        << "the supervisor should be gone too";
    running_ = false;
  }
  // The hub and the scheduler, each in a process of its own; no controller.
  std::vector<pid_t> SeparateServers() {
    std::vector<pid_t> servers = ProcessesRunning("taskhub", profile());
    const std::vector<pid_t> scheduler = ProcessesRunning("taskscheduler", profile());
    EXPECT_EQ(servers.size(), 1u);
    EXPECT_EQ(scheduler.size(), 1u);
    EXPECT_TRUE(ProcessesRunning("taskcontroller", profile()).empty());
    servers.insert(servers.end(), scheduler.begin(), scheduler.end());
    return servers;
  }
  // A task and one after it that fails are answered; `taskctl shutdown`
  // then ends the servers and the supervisor.
  void ExpectTasksServedAndAShutdownEnds(const std::vector<pid_t>& servers) {
    const std::string first = Submit({"--", "true"});
    const std::string second = Submit({"--after", first, "--", "sh", "-c", "exit 3"});
    int code = 0;
    const std::vector<Value> records = Wait({first, second}, &code);
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0]["status"], "ok");
    EXPECT_EQ(records[1]["status"], "error");
    EXPECT_EQ(Ctl({"shutdown"}).code, 0);
    for (pid_t server : servers) {
      EXPECT_TRUE(
          WaitFor([&] { return !cluster::ProcessRunning(server); }, std::chrono::seconds(20)));
    }
    ExpectTheSupervisorGone();
  }
};

TEST_F(Shutdown, StopsTheWholeCluster) {
  StartCluster(1);
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok() && engines->size() == 1);
  const pid_t engine = static_cast<pid_t>((*engines)[0].pid);
  EXPECT_EQ(Ctl({"shutdown"}).code, 0);
  EXPECT_TRUE(WaitFor([&] { return !cluster::ProcessRunning(engine); }, std::chrono::seconds(20)));
  ExpectTheSupervisorGone();
}

// taskcluster start, as typed without --layout: the hub and the scheduler
// in one process, which serves tasks and ends with the cluster.
TEST_F(Shutdown, TheDefaultLayoutServesFromOneProcessAndShutsDownWhole) {
  Ran started = RunProgram(
      {kBin + "/taskcluster", "start", "--profile-dir", profile(), "--daemonize", "-n", "1"}, dir_);
  ASSERT_EQ(started.code, 0) << started.out << started.err;
  running_ = true;
  const std::vector<pid_t> controller = ProcessesRunning("taskcontroller", profile());
  ASSERT_EQ(controller.size(), 1u);
  EXPECT_TRUE(ProcessesRunning("taskhub", profile()).empty());
  EXPECT_TRUE(ProcessesRunning("taskscheduler", profile()).empty());
  EXPECT_EQ(started.out.find("processes of their own"), std::string::npos) << started.out;
  ExpectTasksServedAndAShutdownEnds(controller);
}

// Under an open-file limit too low for a connection from each engine to
// both the hub and the scheduler in one process (256 for its own files, 2
// an engine), the default runs them in two and says why.
TEST_F(Shutdown, TheDefaultLayoutIsTwoProcessesWhereOneCouldNotHoldTheEngines) {
  Ran started =
      RunProgram({"/bin/sh", "-c", "ulimit -n 259 && exec \"$0\" \"$@\"", kBin + "/taskcluster",
                  "start", "--profile-dir", profile(), "--daemonize", "-n", "2"},
                 dir_);
  ASSERT_EQ(started.code, 0) << started.out << started.err;
  running_ = true;
  EXPECT_NE(started.out.find("processes of their own: 2 engines need more open files than one "
                             "process may have (259"),
            std::string::npos)
      << started.out;
  const std::vector<pid_t> servers = SeparateServers();
  ASSERT_EQ(servers.size(), 2u);
  ExpectTasksServedAndAShutdownEnds(servers);
}

TEST_F(Shutdown, TheSeparateLayoutServesFromTwoProcessesAndShutsDownBoth) {
  StartCluster(1, {"--layout", "separate"});
  const std::vector<pid_t> servers = SeparateServers();
  ASSERT_EQ(servers.size(), 2u);
  ExpectTasksServedAndAShutdownEnds(servers);
}

TEST(TaskclusterForeground, StopsEverythingOnInterrupt) {
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  ChildProcess cluster({kBin + "/taskcluster", "start", "-n", "2", "--profile-dir", profile},
                       dir.path() / "cluster.log");
  std::vector<EngineStatus> engines;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto client = Client::Connect(profile);
        if (!client.ok()) return false;
        auto list = (*client)->Engines();
        if (list.ok()) engines = *list;
        return engines.size() == 2;
      },
      std::chrono::seconds(30)))
      << cluster.Log();
  cluster.Kill(SIGINT);
  ASSERT_EQ(cluster.Wait(std::chrono::seconds(30)), 0) << cluster.Log();
  EXPECT_NE(cluster.Log().find("cluster ready: 2 engines"), std::string::npos) << cluster.Log();
  EXPECT_NE(cluster.Log().find("engines: 2 started (2 running, 0 failed), 0 restarts\n"
                               "tasks: 0 ok, 0 failed, 0 unfinished"),
            std::string::npos)
      << "the run report at stop:\n"
      << cluster.Log();
  for (const auto& e : engines) EXPECT_FALSE(cluster::ProcessRunning(static_cast<pid_t>(e.pid)));
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, RecordsKeepRoutingAndBoundedOutputWithItsFlag) {
  StartCluster(1);
  TaskOptions big;
  big.command = {"head", "-c", "3000000", "/dev/zero"};
  big.retries = 2;
  big.priority = 5;
  big.time_limit = 30;
  big.targets = {0};
  auto id = client_->Submit(big);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(client_->Wait({*id}, 60).ok());
  // The connection file itself works as well as its profile directory.
  auto by_file = Client::Connect(std::filesystem::path(profile()) / "ztask-cluster.json");
  ASSERT_TRUE(by_file.ok()) << by_file.status().ToString();
  auto records = (*by_file)->Fetch({*id});
  ASSERT_TRUE(records.ok());
  const TaskInfo& r = (*records)[0];
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_FALSE(r.stderr_truncated);
  EXPECT_EQ(r.stdout_text.size(), size_t{1} << 20) << "the engine's default bound";
  EXPECT_EQ(r.retries, 2);
  EXPECT_EQ(r.priority, 5);
  EXPECT_EQ(r.time_limit, 30);
  EXPECT_EQ(r.targets, (std::vector<int32_t>{0}));
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST_F(ClusterTest, LocationIsWhatTheConnectionFileTellsOthersToDial) {
  StartCluster(1, {"--location", "localhost"});
  auto info = protocol::ReadConnectionFile(std::filesystem::path(profile()) / "ztask-cluster.json");
  ASSERT_TRUE(info.ok());
  for (const std::string& e : {info->hub.registration, info->hub.query, info->scheduler.client,
                               info->scheduler.engine}) {
    EXPECT_EQ(e.rfind("tcp://localhost:", 0), 0u) << e;
  }
  // What the hub publishes to whoever connects is, on loopback, a Unix
  // socket in the profile, which no other account reaches (docs/security.md).
  for (const std::string& e : {info->hub.events, info->hub.notifier}) {
    EXPECT_EQ(e.rfind("ipc://" + std::filesystem::absolute(profile()).string() + "/", 0), 0u) << e;
  }
  auto r = Wait({Submit({"--fn", "echo", "--args", "\"dialled by name\""})});
  EXPECT_EQ(r[0]["result"], "dialled by name");
}

}  // namespace
}  // namespace ztask::testing

namespace ztask::testing {
namespace {

TEST(EngineProcess, AStopWhileWaitingForTheHubIsCleanNotACrash) {
  TempDir dir;
  // A listener that accepts TCP but never speaks ZeroMQ: the engine waits.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string silent = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  protocol::ConnectionInfo info;
  info.key = protocol::GenerateKey();
  info.hub.registration = info.hub.query = silent;
  info.scheduler.client = info.scheduler.engine = silent;
  ASSERT_TRUE(protocol::WriteConnectionFile(dir.path() / "ztask-cluster.json", info).ok());
  ChildProcess engine({kBin + "/taskengine", "--profile-dir", dir.path().string()},
                      dir.path() / "engine.log");
  pollfd pending{listener, POLLIN, 0};
  ASSERT_EQ(::poll(&pending, 1, 10000), 1) << "the engine never dialled the hub";
  engine.Kill(SIGTERM);
  EXPECT_EQ(engine.Wait(std::chrono::seconds(20)), 2) << engine.Log();
  EXPECT_NE(engine.Log().find("taskengine: the hub at " + silent + " did not answer"),
            std::string::npos)
      << engine.Log();
  ::close(listener);
}

}  // namespace
}  // namespace ztask::testing
