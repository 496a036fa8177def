// The real taskscheduler process with a stand-in hub, stand-in engines and
// a raw client, all over loopback TCP.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/reactor.h"
#include "protocol/wire.h"
#include "tests/support/process.h"
#include "tests/support/standins.h"
#include "tests/support/temp_dir.h"

namespace ztask::testing {
namespace {

using protocol::MsgType;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kScheduler = std::string(ZTASK_BIN_DIR) + "/taskscheduler";

protocol::TaskSpec Echo(const std::string& label) {
  protocol::TaskSpec spec;
  spec.kind = "function";
  spec.function = "echo";
  spec.label = label;
  return spec;
}

class SchedulerProcess : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    hub_ = std::make_unique<StandInHub>(dir_.path());
    std::vector<std::string> argv = {kScheduler, "--profile-dir", dir_.path().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>(argv, dir_.path() / "scheduler.log");
    ASSERT_TRUE(WaitFor([&] { return !hub_->SchedulerEndpoints().client.empty(); }))
        << "the scheduler never wrote its endpoints:\n" << process_->Log();
    endpoints_ = hub_->SchedulerEndpoints();
    client_ = std::make_unique<RawClient>(endpoints_.client, hub_->signer());
  }

  StandInEngine& AddEngine(int32_t id) {
    engines_.push_back(std::make_unique<StandInEngine>(endpoints_.engine, hub_->signer(), id));
    engines_.back()->SendReady();
    hub_->AnnounceEngine(id, engines_.back()->uuid());
    return *engines_.back();
  }

  // Serves every engine (each answers with `ok`) until `want` replies reached
  // the client. The hub's notice is repeated while nothing flows, since a SUB
  // socket may join after the first one was sent.
  std::vector<RawClient::Reply> Serve(size_t want, bool ok = true) {
    std::vector<RawClient::Reply> replies;
    WaitFor(
        [&] {
          for (auto& e : engines_) {
            if (auto task = e->Receive(milliseconds(0))) {
              e->Reply(*task, ok, ok ? ErrorType::kNone : ErrorType::kTaskFailed, "no");
              served_by_[task->header.id] = e->id();
            }
          }
          if (auto r = client_->Receive(milliseconds(1))) replies.push_back(*r);
          if (++turns_ % 200 == 0) {
            for (auto& e : engines_) hub_->AnnounceEngine(e->id(), e->uuid());
          }
          return replies.size() >= want;
        },
        seconds(20));
    return replies;
  }

  // Waits until every engine holds one task the scheduler gave it (with
  // HWM 1, leastload gives each linked engine one), repeating the hub's
  // notices meanwhile: a SUB socket may join after the first one was sent.
  // The tasks are held, not answered.
  std::vector<ReceivedTask> HoldOneTaskOnEachEngine() {
    std::vector<std::optional<ReceivedTask>> held(engines_.size());
    WaitFor(
        [&] {
          bool all = true;
          for (size_t i = 0; i < engines_.size(); ++i) {
            if (!held[i]) held[i] = engines_[i]->Receive(milliseconds(1));
            all = all && held[i].has_value();
          }
          if (++turns_ % 20 == 0) {
            for (auto& e : engines_) hub_->AnnounceEngine(e->id(), e->uuid());
          }
          return all;
        },
        seconds(20));
    std::vector<ReceivedTask> tasks;
    for (auto& h : held) {
      if (h) tasks.push_back(*h);
    }
    return tasks;
  }

  // Submits one task at a time and serves it until every engine has
  // answered one (leastload gives the least recently used idle engine
  // each): then each engine is linked and its run time measured.
  bool EveryEngineAnsweredOne() {
    std::set<int32_t> answered;
    for (int i = 0; i < 200 && answered.size() < engines_.size(); ++i) {
      client_->Submit({}, Echo("warm " + std::to_string(i)));
      if (Serve(1).size() != 1) return false;
      for (const auto& [task, engine] : served_by_) answered.insert(engine);
    }
    served_by_.clear();
    return answered.size() == engines_.size();
  }

  // With HWM 64, three engines whose replies say their tasks ran `run_us`:
  // once each has answered one, the engines' ids forty tasks sent together
  // (one task_batch) went to (empty when the engines never all answered).
  std::map<int32_t, int> FortyOnThreeEnginesThatSayTheyRan(int64_t run_us) {
    Start({"--hwm", "64"});
    for (int32_t id = 0; id < 3; ++id) AddEngine(id).SayRunUs(run_us);
    if (!EveryEngineAnsweredOne()) {
      ADD_FAILURE() << "the engines never all answered\n" << process_->Log();
      return {};
    }
    std::vector<std::pair<TaskId, protocol::TaskSpec>> batch;
    for (int i = 0; i < 40; ++i)
      batch.emplace_back(TaskId::Random(), Echo("task " + std::to_string(i)));
    client_->SubmitBatch(batch);
    return Dispatched(40);
  }

  // The engines' ids `n` tasks went to, received and not answered.
  std::map<int32_t, int> Dispatched(size_t n) {
    std::map<int32_t, int> on;
    std::vector<std::vector<ReceivedTask>> held(engines_.size());
    size_t got = 0;
    WaitFor(
        [&] {
          for (size_t i = 0; i < engines_.size(); ++i) {
            while (auto task = engines_[i]->Receive(milliseconds(0))) {
              held[i].push_back(*task);
              ++on[engines_[i]->id()];
              ++got;
            }
          }
          return got >= n;
        },
        seconds(20));
    for (size_t i = 0; i < engines_.size(); ++i) engines_[i]->ReplyAll(held[i]);
    return on;
  }

  // Receives monitor messages until `done` holds of them.
  template <class F>
  bool MonitorUntil(F&& done) {
    return WaitFor(
        [&] {
          hub_->PumpMonitor(milliseconds(5));
          return done(hub_->monitor());
        },
        seconds(10));
  }

  TempDir dir_;
  std::unique_ptr<StandInHub> hub_;
  std::unique_ptr<ChildProcess> process_;
  protocol::SchedulerEndpoints endpoints_;
  std::unique_ptr<RawClient> client_;
  std::vector<std::unique_ptr<StandInEngine>> engines_;
  std::map<TaskId, int32_t> served_by_;
  uint64_t turns_ = 0;
};

TEST_F(SchedulerProcess, RoutesTasksToEnginesAndEveryReplyBackToTheClient) {
  Start({"--hwm", "1"});
  AddEngine(0);
  AddEngine(1);
  std::set<TaskId> submitted;
  for (int i = 0; i < 2; ++i) submitted.insert(client_->Submit({}, Echo("t" + std::to_string(i))));
  auto held = HoldOneTaskOnEachEngine();
  ASSERT_EQ(held.size(), 2u) << "both engines are linked and each takes a task\n" << process_->Log();
  for (size_t i = 0; i < held.size(); ++i) {
    engines_[i]->Reply(held[i], true);
    served_by_[held[i].header.id] = engines_[i]->id();
  }
  for (int i = 2; i < 20; ++i) submitted.insert(client_->Submit({}, Echo("t" + std::to_string(i))));
  auto replies = Serve(20);
  ASSERT_EQ(replies.size(), 20u) << process_->Log();
  std::set<TaskId> replied;
  for (const auto& r : replies) {
    EXPECT_TRUE(r.meta.ok);
    replied.insert(r.task);
  }
  EXPECT_EQ(replied, submitted);
  std::set<int32_t> engines_used;
  for (const auto& [task, engine] : served_by_) engines_used.insert(engine);
  EXPECT_EQ(engines_used, (std::set<int32_t>{0, 1})) << "leastload spreads the work";
}

// Leastload counts tasks the engines say ran far shorter than a message in
// packs: forty such tasks sent together fill one engine's pack rather
// than travel one by one to three engines; tasks as long as a message
// count one each and spread.
TEST_F(SchedulerProcess, LeastLoadPacksTasksTheEnginesSayRanFarShorterThanAMessage) {
  const std::map<int32_t, int> on = FortyOnThreeEnginesThatSayTheyRan(2);
  ASSERT_EQ(on.size(), 1u) << "a pack of 50 holds all 40";
  EXPECT_EQ(on.begin()->second, 40);
}

TEST_F(SchedulerProcess, LeastLoadSpreadsTasksTheEnginesSayRanAsLongAsAMessage) {
  const std::map<int32_t, int> on = FortyOnThreeEnginesThatSayTheyRan(5000);
  ASSERT_EQ(on.size(), 3u);
  for (const auto& [engine, tasks] : on) EXPECT_GE(tasks, 13) << "engine " << engine;
}

// The hub may say an engine drains before the scheduler could give it
// tasks (its notice or its ready still to come): it takes none, and is let
// go as soon as it is linked.
TEST_F(SchedulerProcess, AnEngineToldToDrainBeforeItCouldTakeTasksTakesNoneAndIsRetired) {
  Start({"--hwm", "4"});
  AddEngine(0);
  client_->Submit({}, Echo("first"));
  ASSERT_EQ(Serve(1).size(), 1u) << "the notifier reaches the scheduler";
  StandInEngine late(endpoints_.engine, hub_->signer(), 1);
  hub_->DrainEngine(1, late.uuid());
  late.SendReady();
  hub_->AnnounceEngine(1, late.uuid());
  for (int i = 0; i < 20; ++i) client_->Submit({}, Echo("t"));
  ASSERT_EQ(Serve(20).size(), 20u) << "a task given to the late engine would never end\n"
                                    << process_->Log();
  for (const auto& [task, engine] : served_by_) EXPECT_EQ(engine, 0);
  base::WaitReady(late.socket(), ZMQ_POLLIN, std::chrono::seconds(10));
  protocol::Frames frames;
  ASSERT_TRUE(protocol::TryReceive(late.socket(), frames)) << "told to go";
  ASSERT_GE(frames.size(), protocol::kMinFrames);
  auto header = protocol::DecodeHeader(protocol::View(frames[protocol::kFrameHeader]));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->type, MsgType::kEngineRetire);
}

TEST_F(SchedulerProcess, TellsTheHubOfEverySubmissionAssignmentAndOutcome) {
  // Every dispatch recorded at once (at the end of its turn).
  Start({"--hwm", "1", "--record-running-after", "0"});
  AddEngine(0);
  AddEngine(1);
  for (int i = 0; i < 10; ++i) client_->Submit({}, Echo("m"));
  ASSERT_EQ(Serve(10).size(), 10u);
  auto finals = [](const std::vector<MonitorMessage>& m) {
    return std::count_if(m.begin(), m.end(), [](auto& x) { return x.final; });
  };
  ASSERT_TRUE(MonitorUntil([&](const auto& m) { return finals(m) == 10; }));
  std::map<TaskId, std::vector<MsgType>> by_task;
  // HWM 1: on each engine, an assignment is always followed by its outcome
  // before the next assignment. The monitor stream keeps the scheduler's order.
  std::map<int32_t, int> outstanding;
  for (const auto& m : hub_->monitor()) {
    by_task[m.task].push_back(m.type);
    if (m.type == MsgType::kTaskAssigned) {
      EXPECT_EQ(++outstanding[*m.engine_id], 1) << "engine " << *m.engine_id << " over HWM";
      EXPECT_EQ(m.attempt, 1);
    }
    if (m.type == MsgType::kTaskOutcome) --outstanding[*m.engine_id];
  }
  EXPECT_EQ(by_task.size(), 10u);
  for (const auto& [task, types] : by_task) {
    EXPECT_EQ(types, (std::vector<MsgType>{MsgType::kTaskSubmitted, MsgType::kTaskAssigned,
                                           MsgType::kTaskOutcome}));
  }
  EXPECT_EQ(hub_->bad_monitor_messages(), 0u);
}

TEST_F(SchedulerProcess, ATaskThatEndsBeforeItsAssignmentIsDueCostsTheHubTwoRecords) {
  Start({"--record-running-after", "60"});
  AddEngine(0);
  AddEngine(1);
  std::set<TaskId> ids;
  for (int i = 0; i < 10; ++i) ids.insert(client_->Submit({}, Echo("m")));
  ASSERT_EQ(Serve(10).size(), 10u);
  auto finals = [](const std::vector<MonitorMessage>& m) {
    return std::count_if(m.begin(), m.end(), [](auto& x) { return x.final; });
  };
  ASSERT_TRUE(MonitorUntil([&](const auto& m) { return finals(m) == 10; }));
  std::map<TaskId, std::vector<MsgType>> by_task;
  for (const auto& m : hub_->monitor()) {
    by_task[m.task].push_back(m.type);
    if (m.type != MsgType::kTaskOutcome) continue;
    // The outcome says where it ran, and which attempt.
    ASSERT_TRUE(m.engine_id.has_value());
    EXPECT_TRUE(*m.engine_id == 0 || *m.engine_id == 1) << *m.engine_id;
    EXPECT_EQ(m.attempt, 1);
    EXPECT_TRUE(m.ok);
  }
  EXPECT_EQ(by_task.size(), 10u);
  for (const auto& [task, types] : by_task) {
    EXPECT_TRUE(ids.count(task));
    EXPECT_EQ(types, (std::vector<MsgType>{MsgType::kTaskSubmitted, MsgType::kTaskOutcome}));
  }
}

TEST_F(SchedulerProcess, ATaskStillRunningWhenItsAssignmentIsDueIsRecordedAsAssigned) {
  Start({"--record-running-after", "0.2"});
  AddEngine(0);
  // No dispatch before the submission: the record is due 0.2 s after it
  // at the earliest (the engine may hear of the task well after).
  const auto submitted = std::chrono::steady_clock::now();
  const TaskId id = client_->Submit({}, Echo("long"));
  std::optional<ReceivedTask> held;
  ASSERT_TRUE(WaitFor([&] {
    if (turns_++ % 200 == 0) hub_->AnnounceEngine(0, engines_[0]->uuid());
    held = engines_[0]->Receive(milliseconds(1));
    return held.has_value();
  }));
  auto assigned = [&](const std::vector<MonitorMessage>& m) {
    return std::find_if(m.begin(), m.end(), [&](const MonitorMessage& x) {
             return x.type == MsgType::kTaskAssigned && x.task == id;
           }) != m.end();
  };
  ASSERT_TRUE(MonitorUntil(assigned));
  // Not before it was due.
  EXPECT_GE(std::chrono::steady_clock::now() - submitted, milliseconds(200));
  const auto& m = hub_->monitor();
  auto it = std::find_if(m.begin(), m.end(),
                         [&](const MonitorMessage& x) { return x.type == MsgType::kTaskAssigned; });
  EXPECT_EQ(it->task, id);
  EXPECT_EQ(it->engine_id, 0);
  EXPECT_EQ(it->attempt, 1);
  engines_[0]->Reply(*held, true);
  ASSERT_TRUE(MonitorUntil([&](const auto& all) {
    return std::any_of(all.begin(), all.end(), [](auto& x) { return x.final; });
  }));
  std::vector<MsgType> types;
  for (const auto& x : hub_->monitor()) types.push_back(x.type);
  EXPECT_EQ(types, (std::vector<MsgType>{MsgType::kTaskSubmitted, MsgType::kTaskAssigned,
                                         MsgType::kTaskOutcome}));
}

TEST_F(SchedulerProcess, HwmThreeKeepsAtMostThreeOnAnEngine) {
  Start({"--hwm", "3"});
  AddEngine(0);
  std::vector<TaskId> ids;
  for (int i = 0; i < 9; ++i) ids.push_back(client_->Submit({}, Echo("h")));
  std::vector<ReceivedTask> held;
  ASSERT_TRUE(WaitFor([&] {
    if (auto t = engines_[0]->Receive(milliseconds(1))) held.push_back(*t);
    if (turns_++ % 200 == 0) hub_->AnnounceEngine(0, engines_[0]->uuid());
    return held.size() == 3;
  }));
  // The scheduler now holds six; the monitor says only three were assigned
  // (the assignments' batch may come a moment after the tasks).
  auto count = [](const auto& m, MsgType type) {
    return std::count_if(m.begin(), m.end(), [&](auto& x) { return x.type == type; });
  };
  ASSERT_TRUE(MonitorUntil([&](const auto& m) {
    return count(m, MsgType::kTaskSubmitted) == 9 && count(m, MsgType::kTaskAssigned) >= 3;
  }));
  EXPECT_FALSE(engines_[0]->Receive(milliseconds(50)).has_value()) << "no fourth task";
  EXPECT_EQ(count(hub_->monitor(), MsgType::kTaskAssigned), 3);
  for (const auto& t : held) engines_[0]->Reply(t, true);
  EXPECT_EQ(Serve(9).size(), 9u);  // the three answered above, then six more
}

TEST_F(SchedulerProcess, SchedulerMadeErrorsReachTheClientAsReplies) {
  Start();
  protocol::RoutingMeta meta;
  const TaskId ghost = TaskId::Random();
  meta.after.ids = {ghost};
  const TaskId id = client_->Submit(meta, Echo("orphan"));
  // The scheduler asks the hub about an id it does not know before it
  // calls it unknown.
  std::optional<RawClient::Reply> reply;
  ASSERT_TRUE(WaitFor([&] {
    hub_->PumpMonitor(milliseconds(1));
    reply = client_->Receive(milliseconds(5));
    return reply.has_value();
  })) << process_->Log();
  EXPECT_EQ(hub_->lookups(), 1u);
  EXPECT_EQ(reply->task, id);
  EXPECT_FALSE(reply->meta.ok);
  EXPECT_EQ(reply->meta.error_type, ErrorType::kInvalidDependency);
  EXPECT_NE(reply->result.error_message.find(ghost.ToHex()), std::string::npos);
  EXPECT_NE(reply->result.error_message.find(id.ToHex()), std::string::npos);
}

TEST_F(SchedulerProcess, EngineGoneMidTaskFailsItWithEngineErrorAndCascades) {
  Start();
  StandInEngine& engine = AddEngine(0);
  const TaskId first = client_->Submit({}, Echo("doomed"));
  protocol::RoutingMeta after;
  after.after.ids = {first};
  const TaskId second = client_->Submit(after, Echo("child"));
  std::optional<ReceivedTask> task;
  ASSERT_TRUE(WaitFor([&] {
    task = engine.Receive(milliseconds(2));
    if (!task && turns_++ % 100 == 0) hub_->AnnounceEngine(0, engine.uuid());
    return task.has_value();
  }));
  hub_->RetireEngine(0, engine.uuid());
  std::map<TaskId, RawClient::Reply> replies;
  ASSERT_TRUE(WaitFor([&] {
    if (auto r = client_->Receive(milliseconds(5))) replies[r->task] = *r;
    return replies.size() == 2;
  })) << process_->Log();
  EXPECT_EQ(replies[first].meta.error_type, ErrorType::kEngineError);
  EXPECT_EQ(replies[second].meta.error_type, ErrorType::kImpossibleDependency);
  // The engine's late answer is ignored: no third reply ever comes.
  engine.Reply(*task, true);
  const TaskId probe = TaskId::Random();
  auto abort = client_->Abort({probe}, seconds(10));
  ASSERT_TRUE(abort.has_value());
  EXPECT_EQ(abort->unknown, (std::vector<TaskId>{probe}));
  EXPECT_FALSE(client_->Receive(milliseconds(0)).has_value());
}

TEST_F(SchedulerProcess, AbortFailsWaitingTasksAndReportsRunningOnes) {
  Start();
  StandInEngine& engine = AddEngine(0);
  const TaskId running = client_->Submit({}, Echo("running"));
  std::optional<ReceivedTask> task;
  ASSERT_TRUE(WaitFor([&] {
    task = engine.Receive(milliseconds(2));
    if (!task && turns_++ % 100 == 0) hub_->AnnounceEngine(0, engine.uuid());
    return task.has_value();
  }));
  const TaskId waiting = client_->Submit({}, Echo("waiting"));
  auto abort = client_->Abort({waiting, running}, seconds(10));
  ASSERT_TRUE(abort.has_value());
  EXPECT_EQ(abort->aborted, (std::vector<TaskId>{waiting}));
  EXPECT_EQ(abort->running, (std::vector<TaskId>{running}));
  auto reply = client_->Receive(seconds(10));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->task, waiting);
  EXPECT_EQ(reply->meta.error_type, ErrorType::kTaskAborted);
}

TEST_F(SchedulerProcess, GarbageIsDroppedLoggedAndServingGoesOn) {
  Start();
  AddEngine(0);
  client_->SendRaw({"not", "a", "message"});
  client_->SendRaw({"ZTASK3", "bad-hmac", "h", "p", "m", "c"});
  auto unsigned_frames = protocol::EncodeMessage(
      protocol::Signer("wrong key"),
      protocol::Header{TaskId::Random(), MsgType::kTaskRequest, "x", 0}, std::nullopt,
      protocol::RoutingMeta{}, Echo("forged"));
  client_->SendRaw(unsigned_frames);
  // The engine socket gets garbage too.
  engines_[0]->socket().send(zmq::str_buffer("garbage"), zmq::send_flags::none);
  const TaskId good = client_->Submit({}, Echo("good"));
  auto replies = Serve(1);
  ASSERT_EQ(replies.size(), 1u) << process_->Log();
  EXPECT_EQ(replies[0].task, good) << "the forged task must never run";
  EXPECT_EQ(served_by_.size(), 1u);
  EXPECT_TRUE(process_->Poll() == std::nullopt) << "the scheduler must stay up";
  EXPECT_TRUE(WaitFor([&] { return process_->Log().find("dropped a message") != std::string::npos; }));
}

TEST_F(SchedulerProcess, TasksSentTogetherTravelTogetherOnEveryHop) {
  Start({"--hwm", "0"});
  StandInEngine& engine = AddEngine(0);
  client_->Submit({}, Echo("first"));
  ASSERT_EQ(Serve(1).size(), 1u) << process_->Log();  // the engine takes tasks now
  const size_t engine_before = engine.messages(), client_before = client_->messages();
  std::vector<std::pair<TaskId, protocol::TaskSpec>> batch;
  std::set<TaskId> sent;
  for (int i = 0; i < 5; ++i) {
    batch.emplace_back(TaskId::Random(), Echo("b" + std::to_string(i)));
    sent.insert(batch.back().first);
  }
  client_->SubmitBatch(batch);
  std::vector<ReceivedTask> tasks;
  ASSERT_TRUE(WaitFor([&] {
    while (auto task = engine.Receive(milliseconds(1))) tasks.push_back(*task);
    return tasks.size() >= 5;
  })) << process_->Log();
  EXPECT_EQ(tasks.size(), 5u);
  EXPECT_EQ(engine.messages() - engine_before, 1u) << "one batch to the engine";
  engine.ReplyAll(tasks);
  std::set<TaskId> replied;
  ASSERT_TRUE(WaitFor([&] {
    while (auto r = client_->Receive(milliseconds(1))) {
      EXPECT_TRUE(r->meta.ok);
      replied.insert(r->task);
    }
    return replied.size() >= 5;
  })) << process_->Log();
  EXPECT_EQ(replied, sent);
  EXPECT_EQ(client_->messages() - client_before, 1u) << "one batch of replies to the client";
}

TEST_F(SchedulerProcess, ATaskOfAnotherSessionInABatchIsDroppedAndTheOthersRun) {
  Start({"--hwm", "0"});
  AddEngine(0);
  std::vector<std::pair<TaskId, protocol::TaskSpec>> batch;
  for (int i = 0; i < 3; ++i) batch.emplace_back(TaskId::Random(), Echo("s"));
  client_->SubmitBatch(batch, /*foreign=*/1);
  auto replies = Serve(2);
  ASSERT_EQ(replies.size(), 2u) << process_->Log();
  const std::set<TaskId> replied = {replies[0].task, replies[1].task};
  EXPECT_EQ(replied, (std::set<TaskId>{batch[0].first, batch[2].first}));
  EXPECT_TRUE(WaitFor([&] {
    return process_->Log().find("of session someone-else in a task_batch") != std::string::npos;
  })) << process_->Log();
}

TEST_F(SchedulerProcess, StartsWithEverySchemeAndRefusesAnUnknownOne) {
  for (const char* scheme : {"leastload", "lru", "twobin", "weighted", "random"}) {
    TempDir dir;
    StandInHub hub(dir.path());
    ChildProcess p({kScheduler, "--profile-dir", dir.path().string(), "--scheme", scheme},
                   dir.path() / "log");
    EXPECT_TRUE(WaitFor([&] { return !hub.SchedulerEndpoints().client.empty(); }))
        << scheme << ": " << p.Log();
    EXPECT_EQ(p.Stop(), 0) << scheme;
  }
  TempDir dir;
  StandInHub hub(dir.path());
  ChildProcess bad({kScheduler, "--profile-dir", dir.path().string(), "--scheme", "fastest"},
                   dir.path() / "log");
  EXPECT_EQ(bad.Wait(seconds(10)), 2);
  EXPECT_NE(bad.Log().find("unknown scheme 'fastest'; valid schemes: leastload, lru, twobin, "
                           "weighted, random"),
            std::string::npos)
      << bad.Log();
}

TEST_F(SchedulerProcess, WithoutAConnectionFileItSaysWhatToDo) {
  ChildProcess p({kScheduler, "--profile-dir", (dir_.path() / "empty").string()},
                 dir_.path() / "log");
  EXPECT_EQ(p.Wait(seconds(10)), 2);
  EXPECT_NE(p.Log().find("no connection file"), std::string::npos) << p.Log();
}

}  // namespace
}  // namespace ztask::testing
