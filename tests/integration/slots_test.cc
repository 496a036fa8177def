// Engines with slots and resources, through the real taskctl, taskcluster
// and taskengine against a real cluster: each task records when it ran,
// and the test checks what overlapped.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "base/clock.h"
#include "protocol/connection_file.h"
#include "protocol/resources.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/raw_peer.h"

namespace ztask::testing {
namespace {

// What each task prints: its start and end (ns), then what it was given.
const char kRecordRun[] =
    "s=$(date +%s%N); sleep 0.2; echo $s $(date +%s%N) $ZTASK_SLOTS $ZTASK_RESOURCE_GPUS "
    "$CUDA_VISIBLE_DEVICES";

struct TaskRun {
  int64_t start = 0, end = 0;
  int engine = -1;
  int slots = 0;
  std::string gpus, cuda;
};

class SlotsTest : public ClusterTest {
 protected:
  // `taskctl wait --job J`: each task's run, from its record.
  std::vector<TaskRun> RunsOf(const std::string& job) {
    Ran r = Ctl({"wait", "--job", job}, 120);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    std::vector<TaskRun> runs;
    for (const auto& line : r.Lines()) {
      Value v = Value::parse(line);
      TaskRun run;
      std::istringstream in(v["stdout"].get<std::string>());
      in >> run.start >> run.end >> run.slots >> run.gpus >> run.cuda;
      run.engine = v["engine_id"].get<int>();
      runs.push_back(run);
    }
    return runs;
  }
  void SubmitArray(const std::string& job, const std::string& range,
                   std::vector<std::string> options) {
    std::vector<std::string> args = {"submit", "--job", job, "--array", range};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "sh", "-c", kRecordRun});
    Ran r = Ctl(args);
    ASSERT_EQ(r.code, 0) << r.err;
  }
};

// The most slots held at once on each engine.
std::map<int, int> MostSlotsAtOnce(const std::vector<TaskRun>& runs) {
  std::map<int, std::vector<std::pair<int64_t, int>>> events;
  for (const TaskRun& r : runs) {
    events[r.engine].push_back({r.start, r.slots});
    events[r.engine].push_back({r.end, -r.slots});
  }
  std::map<int, int> most;
  for (auto& [engine, e] : events) {
    std::sort(e.begin(), e.end());  // at a tie the end (negative) comes first
    int held = 0;
    for (const auto& [t, d] : e) {
      held += d;
      most[engine] = std::max(most[engine], held);
    }
  }
  return most;
}

TEST_F(SlotsTest, OneAndFourSlotTasksNeverHoldMoreThanAnEnginesFourSlots) {
  StartCluster(2, {"--slots", "4"});
  SubmitArray("mix", "1-12", {});
  SubmitArray("mix", "13-15", {"--slots", "4"});
  SubmitArray("mix", "16-27", {});
  SubmitArray("mix", "28-30", {"--slots", "4"});
  const std::vector<TaskRun> runs = RunsOf("mix");
  ASSERT_EQ(runs.size(), 30u);
  int wide = 0;
  for (const TaskRun& r : runs) {
    EXPECT_TRUE(r.slots == 1 || r.slots == 4) << "ZTASK_SLOTS " << r.slots;
    wide += r.slots == 4;
  }
  EXPECT_EQ(wide, 6);
  const std::map<int, int> most = MostSlotsAtOnce(runs);
  EXPECT_EQ(most.size(), 2u) << "both engines ran tasks";
  int overlapped = 0;
  for (const auto& [engine, slots] : most) {
    EXPECT_LE(slots, 4) << "engine " << engine << " held " << slots << " slots at once";
    overlapped = std::max(overlapped, slots);
  }
  EXPECT_GE(overlapped, 2) << "the one-slot tasks ran side by side";
}

TEST_F(SlotsTest, EachTaskIsGivenItsOwnGpusAndOneThatFitsNowhereFailsAtOnce) {
  StartCluster(1, {"--slots", "4", "--resource", "gpus=2"});
  SubmitArray("gpu", "1-6", {"--resource", "gpus=1"});
  SubmitArray("gpu", "7", {"--resource", "gpus=2"});
  const std::vector<TaskRun> runs = RunsOf("gpu");
  ASSERT_EQ(runs.size(), 7u);
  std::map<std::string, std::vector<TaskRun>> by_gpu;
  for (const TaskRun& r : runs) {
    EXPECT_EQ(r.gpus, r.cuda) << "CUDA_VISIBLE_DEVICES is ZTASK_RESOURCE_GPUS";
    if (r.gpus == "0,1") {
      by_gpu["0"].push_back(r);
      by_gpu["1"].push_back(r);
    } else {
      EXPECT_TRUE(r.gpus == "0" || r.gpus == "1") << r.gpus;
      by_gpu[r.gpus].push_back(r);
    }
  }
  for (auto& [gpu, held] : by_gpu) {
    std::sort(held.begin(), held.end(), [](const TaskRun& a, const TaskRun& b) { return a.start < b.start; });
    for (size_t i = 1; i < held.size(); ++i) {
      EXPECT_LE(held[i - 1].end, held[i].start) << "two tasks held gpu " << gpu << " at once";
    }
  }
  EXPECT_EQ(by_gpu.size(), 2u) << "both units were used";

  Ran r = Ctl({"submit", "--wait", "--resource", "gpus=3", "--", "true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("\"Unsatisfiable\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs gpus=3, the largest engine has 2"), std::string::npos) << r.out;
  r = Ctl({"submit", "--wait", "--slots", "5", "--", "true"});
  EXPECT_NE(r.out.find("needs 5 slots, the largest engine has 4"), std::string::npos) << r.out;

  // A graph's tasks ask the same way.
  const std::string graph = (dir_.path() / "graph.json").string();
  std::ofstream(graph) << R"({"tasks": [{"name": "wide", "slots": 3, "resources": {"gpus": 2},
      "command": ["sh", "-c", "echo $ZTASK_SLOTS $CUDA_VISIBLE_DEVICES"]}]})";
  r = Ctl({"submit-graph", graph});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string id = r.out.substr(r.out.find(' ') + 1, 32);
  EXPECT_EQ(Wait({id})[0]["stdout"], "3 0,1\n");
  std::ofstream(graph) << R"({"tasks": [{"name": "bad", "slots": 0, "command": ["true"]}]})";
  r = Ctl({"submit-graph", graph});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("task 'bad': slots must be from 1"), std::string::npos) << r.err;
}

TEST_F(SlotsTest, AnEngineStartedByHandSaysWhatItHasAndGetsTheTasksThatNeedIt) {
  StartCluster(1);
  cluster::ChildProcess engine({kBin + "/taskengine", "--profile-dir", profile(), "--slots", "2",
                                "--resource", "gpus=1", "--name", "gpu-node"},
                               dir_.path() / "engine.log");
  std::vector<EngineStatus> engines;
  ASSERT_TRUE(WaitFor([&] {
    auto listed = client_->Engines();
    if (listed.ok()) engines = *listed;
    return listed.ok() && engines.size() == 2;
  }));
  int gpu_engine = -1;
  for (const auto& e : engines) {
    if (e.name != "gpu-node") continue;
    gpu_engine = e.id;
    EXPECT_EQ(e.slots, 2);
    EXPECT_EQ(e.resources, (std::map<std::string, int64_t>{{"gpus", 1}}));
  }
  Ran listed = Ctl({"engines"});
  EXPECT_NE(listed.out.find("gpus=1"), std::string::npos) << listed.out;
  listed = Ctl({"engines", "--json"});
  EXPECT_NE(listed.out.find("\"slots\":2"), std::string::npos) << listed.out;
  // Submitted now, it may reach the scheduler before the engine did: it
  // waits for an engine that could hold it, or fails saying why.
  ASSERT_TRUE(WaitFor([&] {
    Ran r = Ctl({"submit", "--wait", "--resource", "gpus=1", "--", "sh", "-c",
                 "echo $ZTASK_RESOURCE_GPUS"});
    return r.code == 0 && r.out.find("\"stdout\":\"0\\n\"") != std::string::npos &&
           r.out.find("\"engine_id\":" + std::to_string(gpu_engine)) != std::string::npos;
  }));
  engine.Stop();
}

TEST_F(SlotsTest, WrongSlotsAndResourcesAreOneLineErrors) {
  struct Case {
    std::vector<std::string> argv;
    std::string says;
  };
  const std::string p = profile();
  const std::vector<Case> cases = {
      {{kBin + "/taskengine", "--profile-dir", p, "--slots", "0"}, "slots must be from 1"},
      {{kBin + "/taskengine", "--profile-dir", p, "--resource", "gpus"}, "NAME=COUNT"},
      {{kBin + "/taskengine", "--profile-dir", p, "--resource", "gpus=2", "--resource", "gpus=1"},
       "given twice"},
      {{kBin + "/taskcluster", "start", "--profile-dir", p, "--resource", "GPUS=1"}, "lower-case"},
      {{kBin + "/taskcluster", "start", "--profile-dir", p, "--slots", "-3"}, "--slots"},
      {{kBin + "/taskctl", "--profile-dir", p, "submit", "--slots", "0", "--", "true"},
       "slots must be from 1"},
      {{kBin + "/taskctl", "--profile-dir", p, "submit", "--resource", "gpus=0", "--", "true"},
       "from 1"},
      {{kBin + "/taskctl", "--profile-dir", p, "submit", "--resource", "slots=2", "--", "true"},
       "use --slots"},
  };
  for (const Case& c : cases) {
    Ran r = RunProgram(c.argv, dir_);
    EXPECT_EQ(r.code, 2) << c.argv[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Another client, not taskctl, asks for what no rule allows: each task is
// refused with a record that says why, and the cluster goes on.
TEST_F(SlotsTest, ATaskAskingWhatNoRuleAllowsIsRejectedWithARecord) {
  StartCluster(1, {"--slots", "2"});
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const protocol::Signer signer(info->key);
  RawPeer peer(info->scheduler.client);
  protocol::ResourceMap many;
  for (int i = 0; i < 20; ++i) many["r" + std::to_string(i)] = 1;
  struct Case {
    std::optional<int32_t> slots;
    std::optional<protocol::ResourceMap> resources;
    std::string says;
  };
  const std::vector<Case> cases = {
      {0, std::nullopt, "slots must be from 1"},
      {-5, std::nullopt, "slots must be from 1"},
      {1 << 30, std::nullopt, "slots must be from 1"},
      {std::nullopt, protocol::ResourceMap{{"GPU!", 1}}, "lower-case"},
      {std::nullopt, protocol::ResourceMap{{"gpus", int64_t{1} << 40}}, "count must be"},
      {std::nullopt, protocol::ResourceMap{{"gpus", -1}}, "count must be"},
      {std::nullopt, many, "at most 16"},
  };
  std::vector<TaskId> ids;
  for (const Case& c : cases) {
    protocol::TaskSpec spec;
    spec.kind = "command";
    spec.argv = {"true"};
    protocol::RoutingMeta meta;
    meta.slots = c.slots;
    meta.resources = c.resources;
    ids.push_back(TaskId::Random());
    peer.Send(protocol::EncodeMessage(
        signer, {ids.back(), protocol::MsgType::kTaskRequest, "another", base::WallMicros()},
        std::nullopt, meta, spec));
  }
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records));
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(records[i].error_type, ErrorType::kTaskRejected) << i;
    EXPECT_NE(records[i].error_message.find(cases[i].says), std::string::npos)
        << i << ": " << records[i].error_message;
  }
  EXPECT_EQ(Wait({Submit({"--slots", "2", "--", "true"})})[0]["status"], "ok");
}

}  // namespace
}  // namespace ztask::testing
