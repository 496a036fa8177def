// Nothing lost: the cluster's processes killed, stopped and restarted while
// tasks run. Every test checks the invariant: each task gets
// exactly one final outcome, in the hub and at the client that waits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "protocol/connection_file.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/partition.h"
#include "tests/support/ports.h"
#include "tests/support/raw_peer.h"

namespace ztask::testing {
namespace {

// Lines of a file, counted.
std::map<std::string, int> LineCounts(const std::filesystem::path& path) {
  std::map<std::string, int> counts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) ++counts[line];
  return counts;
}

class Faults : public ClusterTest {
 protected:
  // A command task that notes each run of it in `runs` (one line per run).
  TaskOptions Noted(const std::string& runs, double seconds) {
    TaskOptions o;
    o.command = {"/bin/sh", "-c",
                 "echo $ZTASK_TASK_ID >> " + runs + "; sleep " + std::to_string(seconds)};
    return o;
  }
  // The process of engine `id`, or 0.
  pid_t EnginePid(int32_t id) {
    auto engines = client_->Engines();
    EXPECT_TRUE(engines.ok()) << engines.status().ToString();
    if (!engines.ok()) return 0;
    for (const EngineStatus& e : *engines) {
      if (e.id == id) return static_cast<pid_t>(e.pid);
    }
    return 0;
  }
  // Submits `o`, whose command first writes its engine's id to `where`,
  // and waits until it has: the task, that engine's id and its process.
  struct Started {
    TaskId id;
    int32_t engine = -1;
    pid_t pid = 0;
  };
  void SubmitUntilStarted(const TaskOptions& o, const std::string& where, Started* out) {
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_TRUE(WaitFor([&] { return !ReadFile(where).empty(); }));
    const int32_t engine = std::stoi(ReadFile(where));
    *out = {*id, engine, EnginePid(engine)};
    ASSERT_GT(out->pid, 0);
  }
  // The head node's crash: the hub and the scheduler killed together (one
  // process in the controller layout).
  void KillHubAndScheduler() {
    const pid_t hub = PidOf("taskhub", profile());
    const pid_t scheduler = PidOf("taskscheduler", profile());
    ASSERT_GT(hub, 0);
    ASSERT_GT(scheduler, 0);
    ASSERT_EQ(::kill(hub, SIGKILL), 0);
    ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  }
  // Every record final, one per id.
  std::vector<TaskInfo> FinalRecords(const std::vector<TaskId>& ids) {
    std::vector<TaskInfo> records;
    EXPECT_TRUE(WaitForFinalRecords(*client_, ids, &records));
    return records;
  }
  std::string Log(const std::string& part) {
    return ReadFile(std::filesystem::path(profile()) / "logs" / (RoleLogName(part) + ".log"));
  }
  // A task of one second with one retry (appending each attempt's engine id
  // to `ends`, if given, when it ends), and a task after it; waits until its
  // first attempt started, and says on which engine.
  struct SlowPair {
    TaskId a, b;
    int32_t first_engine = -1;
  };
  void SubmitSlowPair(const std::vector<int32_t>& targets, const std::string& ends, SlowPair* out) {
    const std::string where = (dir_.path() / "first-engine").string();
    TaskOptions slow;
    slow.command = {"/bin/sh", "-c",
                    "[ -e " + where + " ] || echo $ZTASK_ENGINE_ID > " + where + "; sleep 1" +
                        (ends.empty() ? "" : "; echo $ZTASK_ENGINE_ID >> " + ends)};
    slow.retries = 1;
    slow.targets = targets;
    auto a = client_->Submit(slow);
    ASSERT_TRUE(a.ok());
    TaskOptions after;
    after.command = {"true"};
    after.after.ids = {*a};
    auto b = client_->Submit(after);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(WaitFor([&] { return !ReadFile(where).empty(); }));
    *out = {*a, *b, std::stoi(ReadFile(where))};
  }
  // Task `a` (one retry), whose engine `lost` was lost mid-run, ran again
  // elsewhere, and `b`, after it, ran too; the loss was noticed within
  // `detected`. Returns a's record.
  TaskInfo ExpectRetriedElsewhere(const TaskId& a, const TaskId& b, int32_t lost,
                                  std::chrono::steady_clock::duration detected) {
    const std::vector<TaskInfo> records = FinalRecords({a, b});
    EXPECT_EQ(records.size(), 2u);
    if (records.size() != 2) return {};
    EXPECT_EQ(records[0].status, TaskState::kOk);
    EXPECT_EQ(records[0].attempts, 2);
    EXPECT_NE(records[0].engine_id, lost);
    EXPECT_EQ(records[1].status, TaskState::kOk) << "its dependent ran once it was done";
    // The heartbeat window is 0.6 s; with the retry's own second, well
    // under 10 s.
    EXPECT_LT(detected, std::chrono::seconds(10));
    return records[0];
  }
  // The lost engine is back: it registers again under its id and takes a
  // task sent to it, and the reply it sent for the attempt of `a` already
  // failed over (record `a_record`) changed nothing and was counted.
  void ExpectBackWithItsLateReplyIgnored(int32_t id, const TaskId& a, const TaskInfo& a_record) {
    TaskOptions there;
    there.command = {"true"};
    there.targets = {id};
    auto c = client_->Submit(there);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(client_->WaitReplies({*c}, 60).ok()) << Log("scheduler") << Log("hub");
    const std::vector<TaskInfo> last = FinalRecords({a, *c});
    ASSERT_EQ(last.size(), 2u);
    EXPECT_EQ(last[0].engine_id, a_record.engine_id) << "never delivered twice";
    EXPECT_EQ(last[0].attempts, 2);
    EXPECT_EQ(last[1].engine_id, id);
    ASSERT_EQ(RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_).code,
              0);
    running_ = false;
    const std::string log = Log("scheduler");
    const bool counted = log.find("1 late replies") != std::string::npos ||
                         log.find("not registered") != std::string::npos;
    EXPECT_TRUE(counted) << "the late reply was counted\n" << log;
  }
  void KillTheSchedulerMidChains(std::vector<std::string> flags);
};

// Two chains of tasks run; the scheduler is killed mid-way, taskcluster
// starts it again, and every task runs once, in order.
void Faults::KillTheSchedulerMidChains(std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--recover-grace", "20"});
  StartCluster(2, flags);
  const std::string runs = (dir_.path() / "runs.txt").string();
  // Two chains of dependent tasks: at any moment two run and the rest wait.
  std::vector<TaskId> ids;
  for (int chain = 0; chain < 2; ++chain) {
    std::optional<TaskId> previous;
    for (int i = 0; i < 12; ++i) {
      TaskOptions o = Noted(runs, 0.25);
      if (previous) o.after.ids = {*previous};
      auto id = client_->Submit(o);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
      previous = *id;
    }
  }
  ASSERT_TRUE(WaitFor([&] { return LineCounts(runs).size() >= 4; }, std::chrono::seconds(30)));
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t again = PidOf("taskscheduler", profile());
        return again > 0 && again != scheduler;
      },
      std::chrono::seconds(20)))
      << "taskcluster restarts it";

  ASSERT_TRUE(client_->WaitReplies(ids, 90).ok()) << "every waiting client gets its replies\n"
                                                  << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords(ids);
  ASSERT_EQ(records.size(), ids.size());
  std::map<TaskId, TaskInfo> by_id;
  for (const TaskInfo& r : records) {
    EXPECT_EQ(r.status, TaskState::kOk) << r.id.ToHex() << ": " << r.error_message;
    by_id[r.id] = r;
  }
  // Each ran once: a task that had been sent to an engine (alive) was not
  // sent again.
  const auto counts = LineCounts(runs);
  for (const TaskId& id : ids) EXPECT_EQ(counts.count(id.ToHex()) ? counts.at(id.ToHex()) : 0, 1);
  // Dependents started after what they waited for completed.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 12 == 0) continue;
    EXPECT_GE(*by_id[ids[i]].started, *by_id[ids[i - 1]].completed);
  }
  EXPECT_NE(Log("scheduler").find("restored"), std::string::npos) << Log("scheduler");
  // A task submitted now may depend on one that finished before the restart.
  TaskOptions later;
  later.command = {"true"};
  later.after.ids = {ids.front()};
  auto id = client_->Submit(later);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(client_->WaitReplies({*id}, 60).ok());
  const std::vector<TaskInfo> last = FinalRecords({*id});
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].status, TaskState::kOk) << last[0].error_message;
}

TEST_F(Faults, SchedulerKilledWithTasksWaitingAndRunningPicksUpWhereItStopped) {
  KillTheSchedulerMidChains({});
}

// No task has been recorded in the hub as running when the scheduler dies:
// the new one learns from the engines which tasks they hold, and gives
// none of them to another engine.
TEST_F(Faults, SchedulerKilledBeforeAnyRunningTaskWasRecordedSendsNoneOfThemTwice) {
  KillTheSchedulerMidChains({"--record-running-after", "600"});
}

// The engine running a task the hub never recorded as running is the last
// to come back to a restarted scheduler: the other engine, back first, does
// not get that task, which runs once, where it ran.
TEST_F(Faults, AfterASchedulerRestartATaskGoesToNoEngineBeforeItsOwnSaysWhatItHolds) {
  StartCluster(2, {"--record-running-after", "600", "--recover-grace", "20"});
  const std::string runs = (dir_.path() / "runs.txt").string();
  const std::string where = (dir_.path() / "where").string();
  TaskOptions o;
  o.command = {
      "/bin/sh", "-c",
      "echo $ZTASK_TASK_ID >> " + runs + "; echo $ZTASK_ENGINE_ID > " + where + "; sleep 3"};
  Started started;
  ASSERT_NO_FATAL_FAILURE(SubmitUntilStarted(o, where, &started));

  // Its engine stops (well within the heartbeat window), the scheduler dies.
  ASSERT_EQ(::kill(started.pid, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{started.pid};
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  // The new scheduler hears the other engine first (or, wrongly, has it
  // run the task a second time).
  ASSERT_TRUE(WaitFor(
      [&] {
        return Log("scheduler").find("is back, holding 0 tasks") != std::string::npos ||
               LineCounts(runs)[started.id.ToHex()] > 1;
      },
      std::chrono::seconds(20)))
      << Log("scheduler");
  ::kill(started.pid, SIGCONT);

  ASSERT_TRUE(client_->WaitReplies({started.id}, 60).ok()) << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords({started.id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, TaskState::kOk) << records[0].error_message;
  EXPECT_EQ(records[0].engine_id, started.engine);
  EXPECT_EQ(LineCounts(runs)[started.id.ToHex()], 1) << "run once\n" << Log("scheduler");
}

// A task dispatched and not yet recorded in the hub as running (that comes
// only after --record-running-after), whose engine dies with the
// scheduler: the new scheduler finds in its journal where the task went,
// and counts that attempt lost with its engine. The task runs again as its
// second attempt, never twice as its first.
TEST_F(Faults, ATaskWhoseEngineDiesWithTheSchedulerBeforeItWasRecordedCountsThatAttempt) {
  StartCluster(2, {"--record-running-after", "600", "--recover-grace", "6"});
  const std::string runs = (dir_.path() / "runs.txt").string();
  const std::string where = (dir_.path() / "where").string();
  TaskOptions o;
  o.command = {"/bin/sh", "-c",
               "echo $ZTASK_TASK_ID >> " + runs + "; [ -e " + where +
                   " ] || echo $ZTASK_ENGINE_ID > " + where + "; sleep 2"};
  o.retries = 1;
  Started started;
  ASSERT_NO_FATAL_FAILURE(SubmitUntilStarted(o, where, &started));
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  ASSERT_EQ(::kill(started.pid, SIGKILL), 0);

  ASSERT_TRUE(client_->WaitReplies({started.id}, 60).ok()) << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords({started.id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, TaskState::kOk) << records[0].error_message;
  EXPECT_EQ(LineCounts(runs)[started.id.ToHex()], 2) << Log("scheduler");
  EXPECT_EQ(records[0].attempts, 2) << "each run a recorded attempt\n" << Log("scheduler");
  EXPECT_NE(Log("scheduler").find("(1 dispatched after the hub's latest record of them)"),
            std::string::npos)
      << Log("scheduler");
}

// The head node's crash: hub and scheduler die together and come back. The
// new hub cannot yet name every engine, so the new scheduler gives no task
// to any engine before it can and they are back, or the grace period ends:
// the task running, which the hub never recorded as running, runs once.
TEST_F(Faults, HubAndSchedulerKilledTogetherRunNoTaskTwice) {
  StartCluster(2, {"--record-running-after", "600", "--recover-grace", "6"});
  const std::string runs = (dir_.path() / "runs.txt").string();
  std::vector<TaskId> ids;
  for (int i = 0; i < 2; ++i) {
    auto id = client_->Submit(Noted(runs, 4));
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  ASSERT_TRUE(WaitFor([&] { return LineCounts(runs).size() == 2; }));
  ASSERT_NO_FATAL_FAILURE(KillHubAndScheduler());
  ASSERT_TRUE(client_->WaitReplies(ids, 90).ok()) << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords(ids);
  ASSERT_EQ(records.size(), ids.size());
  const auto counts = LineCounts(runs);
  for (const TaskInfo& r : records) {
    EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
    EXPECT_EQ(counts.at(r.id.ToHex()), 1) << "run once\n" << Log("scheduler");
  }
}

// The head node's crash with a long grace period: the new hub cannot name
// the engines at once, and the new scheduler asks it again each second;
// once it can (after two heartbeat windows), new tasks wait only for
// the engines not back yet, not for the whole grace period.
TEST_F(Faults, AfterTheHubRestartsTooNewTasksWaitOnlyUntilItCanNameTheEngines) {
  StartCluster(2, {"--recover-grace", "60"});
  const std::string runs = (dir_.path() / "runs.txt").string();
  auto running = client_->Submit(Noted(runs, 3));
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return LineCounts(runs).size() == 1; }));
  ASSERT_NO_FATAL_FAILURE(KillHubAndScheduler());
  const auto start = std::chrono::steady_clock::now();
  TaskOptions quick;
  quick.command = {"true"};
  auto id = client_->Submit(quick);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE(client_->WaitReplies({*id, *running}, 55).ok()) << Log("scheduler");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << Log("scheduler");
  EXPECT_NE(Log("scheduler").find("the hub names 2 engines"), std::string::npos)
      << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords({*running, *id});
  ASSERT_EQ(records.size(), 2u);
  for (const TaskInfo& r : records) EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
  EXPECT_EQ(LineCounts(runs)[running->ToHex()], 1) << "run once\n" << Log("scheduler");
}

// An engine the hub lists dies while the restarted scheduler waits for the
// engines to come back: the hub's word that it is gone ends the wait for
// it, long before the grace period would.
TEST_F(Faults, AnEngineGoneDuringARestartIsNotWaitedFor) {
  // The hub loses an engine 5 s after its last heartbeat. Its subject is a
  // scheduler restarted while its hub lives on: the separate layout's (in
  // the controller's, the hub restarts too and cannot name the engines at
  // once: AfterTheHubRestartsTooNewTasksWaitOnlyUntilItCanNameTheEngines).
  StartCluster(2, {"--layout", "separate", "--recover-grace", "60", "--heartbeat-misses", "5"});
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  ASSERT_EQ(engines->size(), 2u);
  const EngineStatus paused = (*engines)[0];
  // A task held for the engine that will pause: unfinished at the restart.
  const std::string runs = (dir_.path() / "runs.txt").string();
  TaskOptions there = Noted(runs, 30);
  there.targets = {paused.id};
  auto held = client_->Submit(there);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(WaitFor([&] { return LineCounts(runs).size() == 1; }));
  // The engine stops answering (still listed by the hub for 5 s) and the
  // scheduler dies; the new one waits for the engine until the hub says
  // it is gone, not for the whole grace period.
  ASSERT_EQ(::kill(static_cast<pid_t>(paused.pid), SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{static_cast<pid_t>(paused.pid)};
  const pid_t scheduler = PidOf("taskscheduler", profile());
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(::kill(scheduler, SIGKILL), 0);
  const auto start = std::chrono::steady_clock::now();
  TaskOptions quick;
  quick.command = {"true"};
  auto id = client_->Submit(quick);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(client_->WaitReplies({*id}, 55).ok()) << Log("scheduler");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << Log("scheduler");
  EXPECT_NE(Log("scheduler").find("2 engines have 60 s"), std::string::npos)
      << "the paused engine was waited for\n"
      << Log("scheduler");
}

TEST_F(Faults, HubKilledWhileTasksFlowLosesNoRecordAndEnginesKeepTheirIds) {
  StartCluster(2);
  auto engines_before = client_->Engines();
  ASSERT_TRUE(engines_before.ok());
  std::set<std::pair<std::string, int32_t>> before;
  for (const auto& e : *engines_before) before.insert({e.name, e.id});

  TaskOptions first;
  first.command = {"echo", "before the kill"};
  auto early = client_->Submit(first);
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(client_->Wait({*early}, 30).ok());

  std::vector<TaskId> ids = {*early};
  const pid_t hub = PidOf("taskhub", profile());
  ASSERT_GT(hub, 0);
  for (int i = 0; i < 300; ++i) {
    TaskOptions o;
    o.function = "sleep";
    o.args = 0.005;
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
    if (i == 100) {
      ASSERT_EQ(::kill(hub, SIGKILL), 0);
    }
  }
  ASSERT_TRUE(client_->WaitReplies(ids, 90).ok()) << "the scheduler kept routing";
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t again = PidOf("taskhub", profile());
        return again > 0 && again != hub;
      },
      std::chrono::seconds(20)));
  const std::vector<TaskInfo> records = FinalRecords(ids);
  if (records.size() != ids.size()) {
    auto all = client_->FetchAll();
    std::set<TaskId> known;
    for (const auto& r : *all) known.insert(r.id);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!known.count(ids[i])) ADD_FAILURE() << "missing: task " << i;
    }
  }
  ASSERT_EQ(records.size(), ids.size())
      << "no record is missing; the hub has " << client_->FetchAll()->size() << "\n"
      << Log("hub") << Log("scheduler");
  for (const TaskInfo& r : records) EXPECT_EQ(r.status, TaskState::kOk) << r.error_message;
  EXPECT_EQ(records[0].stdout_text, "before the kill\n") << "written before the kill, intact";

  std::set<std::pair<std::string, int32_t>> after;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto engines = client_->Engines();
        if (!engines.ok()) return false;
        after.clear();
        for (const auto& e : *engines) {
          if (e.state == EngineState::kRunning) after.insert({e.name, e.id});
        }
        return after.size() == before.size();
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(after, before) << "engines registered again under the same ids";
}

TEST_F(Faults, AHungEngineIsLostWithinTheHeartbeatWindowAndItsLateReplyIsIgnored) {
  // SIGSTOP: the engine neither heartbeats nor closes its sockets, as when
  // its node is cut off; SIGCONT brings it back, as when the network does.
  StartCluster(2, {"--heartbeat-ms", "200", "--heartbeat-misses", "3"});
  SlowPair pair;
  ASSERT_NO_FATAL_FAILURE(SubmitSlowPair({}, "", &pair));
  const int32_t hung_id = pair.first_engine;
  const pid_t hung = EnginePid(hung_id);
  ASSERT_GT(hung, 0);
  ASSERT_EQ(::kill(hung, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->WaitReplies({pair.a, pair.b}, 60).ok()) << "retried on the other engine";
  const auto detected = std::chrono::steady_clock::now() - stopped_at;
  ASSERT_EQ(::kill(hung, SIGCONT), 0);
  const TaskInfo record = ExpectRetriedElsewhere(pair.a, pair.b, hung_id, detected);
  // Back: its late reply for the attempt already failed over changes nothing.
  ExpectBackWithItsLateReplyIgnored(hung_id, pair.a, record);
}

// A pause of a whole role (SIGSTOP: no reads, no sends, no closed
// connections, as in a long stall of its host) while a client goes on
// submitting tasks and the other roles go on sending to it, past what its
// sockets hold. When it goes on (SIGCONT) every task runs once, is answered
// and is recorded once, and no engine is lost.
class Paused : public Faults {
 protected:
  // Submits `count` tasks, each noting its runs in runs_; once a quarter of
  // them have run, the role `program` stops for `pause` while the rest are
  // submitted. Then waits for every reply and checks the invariant.
  void SubmitAcrossAPauseOf(const std::string& program, std::chrono::milliseconds pause,
                            int count) {
    auto engines_before = client_->Engines();
    ASSERT_TRUE(engines_before.ok());
    const pid_t paused = PidOf(program, profile());
    ASSERT_GT(paused, 0);
    std::atomic<bool> stopped{false};
    std::thread pauser([&] {
      WaitFor([&] { return static_cast<int>(LineCounts(runs_).size()) >= count / 4; },
              std::chrono::seconds(60));
      stopped.store(::kill(paused, SIGSTOP) == 0);
      std::this_thread::sleep_for(pause);  // the pause itself
      ::kill(paused, SIGCONT);
    });
    std::vector<TaskId> ids;
    for (int i = 0; i < count; ++i) {
      auto id = client_->Submit(Noted(runs_, 0.005));
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
    }
    pauser.join();
    ASSERT_TRUE(stopped.load());
    const size_t run_before = LineCounts(runs_).size();
    EXPECT_LT(run_before, ids.size()) << "the pause came while tasks were still to run";
    ASSERT_TRUE(client_->WaitReplies(ids, 120).ok()) << Log("scheduler") << Log("hub");
    EXPECT_EQ(PidOf(program, profile()), paused) << "it went on; it was not restarted";

    const std::vector<TaskInfo> records = FinalRecords(ids);
    ASSERT_EQ(records.size(), ids.size()) << "one final record each";
    for (const TaskInfo& r : records) {
      EXPECT_EQ(r.status, TaskState::kOk) << r.id.ToHex() << ": " << r.error_message;
      EXPECT_EQ(r.attempts, 1) << r.id.ToHex();
    }
    const auto counts = LineCounts(runs_);
    for (const TaskId& id : ids) {
      EXPECT_EQ(counts.count(id.ToHex()) ? counts.at(id.ToHex()) : 0, 1) << id.ToHex();
    }
    auto engines_after = client_->Engines();
    ASSERT_TRUE(engines_after.ok());
    std::set<std::pair<std::string, int32_t>> before, after;
    for (const auto& e : *engines_before) before.insert({e.name, e.id});
    for (const auto& e : *engines_after) {
      if (e.state == EngineState::kRunning) after.insert({e.name, e.id});
    }
    EXPECT_EQ(after, before) << "no engine was lost or registered again";
    EXPECT_EQ(Log("hub").find("is gone"), std::string::npos) << Log("hub");
  }
  std::string runs_ = (dir_.path() / "runs.txt").string();
};

TEST_F(Paused, ASchedulerPausedPastItsSocketsLimitLosesNothing) {
  // Its sockets take 20 messages a peer: the client's tasks and the
  // engines' replies wait in the senders' queues (and the client's
  // resends, sent while no reply comes, with them).
  StartCluster(2, {"--socket-hwm", "20"});
  SubmitAcrossAPauseOf("taskscheduler", std::chrono::milliseconds(3000), 400);
}

TEST_F(Paused, AHubPausedPastTheHeartbeatWindowLosesNothing) {
  // 3 s: past the engines' heartbeat window (0.6 s: they start nothing
  // until the hub answers again) and past the scheduler's wait for the
  // hub's acknowledgements (2 s: its records go again, and are kept once).
  // The heartbeats that waited in the hub's socket count when it goes on.
  StartCluster(2, {"--heartbeat-ms", "200", "--heartbeat-misses", "3"});
  SubmitAcrossAPauseOf("taskhub", std::chrono::milliseconds(3000), 400);
}

TEST_F(Faults, AnEngineStoppedPastTheSchedulersSocketLimitRunsNoneOfWhatWaitedForIt) {
  // The scheduler's sockets take 20 messages a peer: the tasks it gives
  // the stopped engine past those wait in the scheduler. The engine is
  // lost; its tasks run on the other one. When it goes on, nothing that
  // waited for it (in its socket or in the scheduler) runs there again.
  StartCluster(
      2, {"--socket-hwm", "20", "--hwm", "64", "--heartbeat-ms", "200", "--heartbeat-misses", "3"});
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  ASSERT_EQ(engines->size(), 2u);
  const int32_t stopped_id = engines->front().id;
  const pid_t stopped = static_cast<pid_t>(engines->front().pid);
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  const std::string runs = (dir_.path() / "runs.txt").string();
  std::vector<TaskId> ids;
  for (int i = 0; i < 200; ++i) {
    TaskOptions o = Noted(runs, 0);
    o.retries = 1;
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  ASSERT_TRUE(client_->WaitReplies(ids, 120).ok()) << Log("scheduler") << Log("hub");
  ASSERT_EQ(::kill(stopped, SIGCONT), 0);
  // Back: it registers again under its id and runs a task sent to it.
  TaskOptions there;
  there.command = {"true"};
  there.targets = {stopped_id};
  auto last = client_->Submit(there);
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(client_->WaitReplies({*last}, 60).ok()) << Log("scheduler");
  const std::vector<TaskInfo> records = FinalRecords(ids);
  ASSERT_EQ(records.size(), ids.size());
  for (const TaskInfo& r : records) {
    EXPECT_EQ(r.status, TaskState::kOk) << r.id.ToHex() << ": " << r.error_message;
    EXPECT_NE(r.engine_id, stopped_id) << r.id.ToHex();
  }
  int retried = 0;
  for (const TaskInfo& r : records) retried += r.attempts == 2;
  EXPECT_GT(retried, 20) << "it was given more tasks than its socket takes messages";
  const auto counts = LineCounts(runs);
  for (const TaskId& id : ids) {
    EXPECT_EQ(counts.count(id.ToHex()) ? counts.at(id.ToHex()) : 0, 1) << id.ToHex();
  }
}

// An engine started by the test, every connection of it through a
// Partition: its own profile directory holds the cluster's connection file
// with the hub's and the scheduler's endpoints replaced by the partitions'.
struct PartitionedEngine {
  PartitionedEngine(const std::string& profile, const std::filesystem::path& dir,
                    const std::string& name) {
    auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok()) return;
    for (std::string* endpoint :
         {&info->hub.registration, &info->scheduler.engine, &info->hub.query}) {
      cuts.push_back(std::make_unique<Partition>(*endpoint));
      *endpoint = cuts.back()->endpoint();
    }
    const auto own = dir / name;
    std::filesystem::create_directories(own);
    EXPECT_TRUE(protocol::WriteConnectionFile(protocol::ConnectionFilePath(own), *info).ok());
    process = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBin + "/taskengine", "--profile-dir", own.string(), "--name",
                                 name},
        dir / (name + ".log"));
  }
  void Cut() {
    for (auto& c : cuts) c->Cut();
  }
  void Heal() {
    for (auto& c : cuts) c->Heal();
  }
  std::vector<std::unique_ptr<Partition>> cuts;
  std::unique_ptr<ChildProcess> process;
};

TEST_F(Faults, AnEngineCutOffByTheNetworkIsLostAndItsRepliesAfterwardAreIgnored) {
  // The engine goes on running while cut off: it finishes the task and
  // sends the reply, which waits in the network until it heals. Ports
  // (--tcp), for the network between to be cut.
  ASSERT_NO_FATAL_FAILURE(
      StartCluster(1, {"--heartbeat-ms", "200", "--heartbeat-misses", "3", "--tcp"}));
  PartitionedEngine first(profile(), dir_.path(), "first"),
      second(profile(), dir_.path(), "second");
  ASSERT_TRUE(client_->WaitForEngines(3, 60).ok());
  // The cluster's own engine is not cut off: the tasks go to ours.
  std::vector<int32_t> ours;
  auto engines = client_->Engines();
  ASSERT_TRUE(engines.ok());
  for (const auto& e : *engines) {
    if (e.name == "first" || e.name == "second") ours.push_back(e.id);
  }
  ASSERT_EQ(ours.size(), 2u);
  const std::string ends = (dir_.path() / "ends.txt").string();
  SlowPair pair;
  ASSERT_NO_FATAL_FAILURE(SubmitSlowPair(ours, ends, &pair));
  const int32_t cut_id = pair.first_engine;
  PartitionedEngine* cut = nullptr;
  for (const auto& e : *engines) {
    if (e.id == cut_id && e.name == "first") cut = &first;
    if (e.id == cut_id && e.name == "second") cut = &second;
  }
  ASSERT_NE(cut, nullptr) << "engine " << cut_id << " is not one of ours: " << [&] {
    std::string all;
    for (const auto& e : *engines) all += std::to_string(e.id) + " " + e.name + "; ";
    return all;
  }();
  cut->Cut();
  const auto cut_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->WaitReplies({pair.a, pair.b}, 60).ok()) << "retried on the other engine";
  const auto detected = std::chrono::steady_clock::now() - cut_at;
  const TaskInfo record = ExpectRetriedElsewhere(pair.a, pair.b, cut_id, detected);
  // Still cut off, the engine finished its attempt (its reply waits in
  // the network): both attempts ended.
  ASSERT_TRUE(WaitFor([&] { return LineCounts(ends).count(std::to_string(cut_id)) == 1; }))
      << ReadFile(ends);

  cut->Heal();
  // Back: the reply it sent while cut off changes nothing.
  ExpectBackWithItsLateReplyIgnored(cut_id, pair.a, record);
}

TEST_F(Faults, AClientKilledMidStreamLeavesNoTaskHanging) {
  StartCluster(2);
  // The client submitting is killed while it streams tasks (some after
  // others): what reached the cluster runs once and ends; what it had not
  // sent yet (at most its 50 in flight) is simply not there.
  const std::string marks = (dir_.path() / "runs").string();
  const auto out = dir_.path() / "submitter.log";
  ChildProcess submitter({kBin + "/test_submitter", profile(), "100000", marks}, out);
  auto printed = [&] {
    std::vector<TaskId> ids;
    std::istringstream lines(ReadFile(out));
    for (std::string line; std::getline(lines, line);) {
      if (auto id = TaskId::FromHex(line); id.ok()) ids.push_back(*id);
    }
    return ids;
  };
  ASSERT_TRUE(WaitFor([&] { return printed().size() >= 300; }, std::chrono::seconds(60)))
      << ReadFile(out);
  submitter.Kill(SIGKILL);
  ASSERT_TRUE(submitter.Wait(std::chrono::seconds(10)).has_value());
  const std::vector<TaskId> ids = printed();

  // Every task the hub has ends, and runs once.
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitFor([&] {
    auto all = client_->FetchAll();
    if (!all.ok()) return false;
    records = *all;
    return std::all_of(records.begin(), records.end(),
                       [](const TaskInfo& r) { return r.finished(); });
  }, std::chrono::seconds(60))) << "a task of the dead client hangs";
  std::map<std::string, int> runs;
  std::istringstream lines(ReadFile(marks));
  for (std::string line; std::getline(lines, line);) ++runs[line];
  std::set<TaskId> recorded;
  for (const TaskInfo& r : records) {
    recorded.insert(r.id);
    EXPECT_EQ(r.status, TaskState::kOk) << r.id.ToHex() << ": " << r.error_message;
    EXPECT_EQ(r.attempts, 1);
    EXPECT_EQ(runs[r.id.ToHex()], 1) << r.id.ToHex();
  }
  size_t missing = 0;
  for (const TaskId& id : ids) missing += !recorded.count(id);
  EXPECT_LE(missing, 50u) << "only what was still in the dead client's queue is missing";
  EXPECT_GE(recorded.size() + 50, ids.size());
  EXPECT_EQ(runs.size(), recorded.size()) << "nothing ran that the hub has no record of";
  // And the cluster serves the next client.
  const std::string next = Submit({"--", "true"});
  const std::vector<Value> after = Wait({next});
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["status"], "ok");
}

TEST_F(Faults, AClientFarFasterThanTheEnginesIsSlowedNotRefused) {
  // Small limits, to meet them with a few thousand tasks: the scheduler
  // takes 100 tasks per client, and its sockets hold 20 messages per peer.
  StartCluster(2, {"--max-queued-per-client", "100", "--socket-hwm", "20"});
  client_->set_max_in_flight(100);
  auto other = Client::Connect(profile());
  ASSERT_TRUE(other.ok());
  std::vector<TaskId> ids;
  for (int i = 0; i < 3000; ++i) {
    TaskOptions o;
    o.function = "sleep";
    o.args = 0.0005;
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
    if (i % 1000 == 999) {
      // Status queries are answered while the cluster is loaded.
      auto queue = (*other)->Queue();
      ASSERT_TRUE(queue.ok()) << queue.status().ToString();
    }
  }
  ASSERT_TRUE(client_->WaitReplies(ids, 120).ok());
  const std::vector<TaskInfo> records = FinalRecords(ids);
  ASSERT_EQ(records.size(), ids.size());
  size_t ok = 0;
  for (const TaskInfo& r : records) ok += r.status == TaskState::kOk;
  EXPECT_EQ(ok, ids.size()) << "none refused (TaskRejected), none dropped";
}

TEST_F(Faults, AClientWhoseLinkFlapsAtItsLimitLosesNothingAndIsNotRejected) {
  // The client may have 100 tasks in the scheduler, and has 100 in flight:
  // after its link breaks, what it sends again is at the limit already.
  // HWM 1: nothing queues on an engine, so none is taken back for an idle
  // one (which would count a dispatch in its attempts): one attempt each
  // says that nothing the client sent again ran again.
  // Ports (--tcp), for the link to be cut in between.
  StartCluster(2, {"--max-queued-per-client", "100", "--hwm", "1", "--tcp"});
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  Partition link(info->scheduler.client);
  info->scheduler.client = link.endpoint();
  const auto own = dir_.path() / "flapping";
  std::filesystem::create_directories(own);
  ASSERT_TRUE(protocol::WriteConnectionFile(protocol::ConnectionFilePath(own), *info).ok());
  auto client = Client::Connect(own);
  ASSERT_TRUE(client.ok());
  (*client)->set_max_in_flight(100);

  std::atomic<int> submitted{0};
  std::thread flapper([&] {
    for (const int at : {1000, 2000}) {
      while (submitted.load() < at) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      link.Cut();
      link.Break();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the outage itself
      link.Heal();
    }
  });
  std::vector<TaskId> ids;
  for (int i = 0; i < 3000; ++i) {
    TaskOptions o;
    o.function = "sleep";
    o.args = 0.0005;
    auto id = (*client)->Submit(o);
    if (!id.ok()) break;
    ids.push_back(*id);
    submitted.store(i + 1);
  }
  submitted.store(3000);
  flapper.join();
  ASSERT_EQ(ids.size(), 3000u);
  ASSERT_TRUE((*client)->WaitReplies(ids, 120).ok());
  const std::vector<TaskInfo> records = FinalRecords(ids);
  ASSERT_EQ(records.size(), ids.size());
  size_t rejected = 0, not_ok = 0;
  for (const TaskInfo& r : records) {
    rejected += r.error_type == ErrorType::kTaskRejected;
    not_ok += r.status != TaskState::kOk;
    EXPECT_EQ(r.attempts, 1) << r.id.ToHex();
  }
  EXPECT_EQ(rejected, 0u) << "a task sent again is not a new task over the limit";
  EXPECT_EQ(not_ok, 0u);
  // The client's view and the hub's agree: its own answers are the records.
  auto mine = (*client)->Fetch(ids);
  ASSERT_TRUE(mine.ok());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*mine)[i].status, records[i].status);
}

TEST_F(Faults, ATaskSentAgainAtTheClientsLimitIsNotRejected) {
  // The client may have one task in the scheduler; it sends its one task
  // again, as a client does after a reconnection when the hub has no record
  // of it yet. That is the same task, not a second one over the limit.
  StartCluster(1, {"--max-queued-per-client", "1"});
  auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
  ASSERT_TRUE(info.ok());
  const protocol::Signer signer(info->key);
  RawPeer peer(info->scheduler.client);
  const TaskId id = TaskId::Random();
  const std::string marks = (dir_.path() / "runs").string();
  const std::vector<std::string> argv = {"/bin/sh", "-c", "echo run >> " + marks + "; sleep 1"};
  peer.Send(CommandRequest(signer, "limited", id, argv));
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(marks).empty(); })) << "it runs";
  peer.Send(CommandRequest(signer, "limited", id, argv));  // a later date: not a replay
  const std::vector<TaskInfo> records = FinalRecords({id});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, TaskState::kOk) << ErrorTypeName(records[0].error_type) << ": "
                                     << records[0].error_message;
  EXPECT_EQ(ReadFile(marks), "run\n");
  // The first reply the client gets is the real one (a rejection would
  // have come at once, before it).
  protocol::Frames reply;
  ASSERT_TRUE(peer.Receive(reply, 10000));
  auto decoded = RepliesIn(signer, reply);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_TRUE(decoded->front().meta.ok) << ErrorTypeName(decoded->front().meta.error_type);
}

// A listening socket at a server's address, as another program's would be:
// a TCP port on loopback, or the path of a Unix socket (what a killed
// server left there removed first).
class PortSquatter {
 public:
  explicit PortSquatter(const std::string& endpoint) {
    constexpr std::string_view kIpc = "ipc://";
    if (endpoint.starts_with(kIpc)) {
      path_ = endpoint.substr(kIpc.size());
      sockaddr_un address{};
      address.sun_family = AF_UNIX;
      std::memcpy(address.sun_path, path_.data(),
                  std::min(path_.size(), sizeof address.sun_path - 1));
      ::unlink(path_.c_str());
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
               ::listen(fd_, 4) == 0;
      return;
    }
    sockaddr_in address = LoopbackAddressOf(endpoint);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
             ::listen(fd_, 4) == 0;
  }
  ~PortSquatter() { Leave(); }
  bool bound() const { return bound_; }
  void Leave() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string path_;
  bool bound_ = false;
};

// A stop signal that comes while a server starts ends it, though it waits
// for something that will not come.
class StopWhileStarting : public ClusterTest {
 protected:
  // A profile of a cluster that ran and stopped: a restart recovers.
  void LeaveAProfile(const std::string& layout) {
    StartCluster(1, {"--layout", layout});
    ASSERT_EQ(Submit({"--", "true"}).size(), 32u);
    ASSERT_EQ(RunProgram({kBin + "/taskcluster", "stop", "--profile-dir", profile()}, dir_).code, 0);
    running_ = false;
  }
};

TEST_F(StopWhileStarting, ASchedulerWaitingForItsHubEndsOnAStopSignal) {
  LeaveAProfile("separate");
  // Its hub is gone: the restarted scheduler waits for it (to take what
  // its journal holds, or to say what was in flight), and asks again.
  ChildProcess scheduler({kBin + "/taskscheduler", "--profile-dir", profile()},
                         dir_.path() / "alone.log");
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = scheduler.Log();
        return log.find("waiting for the hub") != std::string::npos ||
               log.find("left in its journal") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << scheduler.Log();
  scheduler.Kill(SIGTERM);
  const std::optional<int> code = scheduler.Wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value()) << "still waiting for the hub\n" << scheduler.Log();
  EXPECT_EQ(*code, 0) << scheduler.Log();
}

TEST_F(StopWhileStarting, AControllerStoppedAtAnyMomentOfItsStartEnds) {
  LeaveAProfile("controller");
  // The signal lands before, during or after the scheduler's recovery
  // (whose hub, in the same process, stops with the signal).
  for (int delay_ms = 0; delay_ms < 40; delay_ms += 2) {
    SCOPED_TRACE("signal after " + std::to_string(delay_ms) + " ms");
    ChildProcess controller({kBin + "/taskcontroller", "--profile-dir", profile()},
                            dir_.path() / ("controller-" + std::to_string(delay_ms) + ".log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    controller.Kill(SIGTERM);
    const std::optional<int> code = controller.Wait(std::chrono::seconds(10));
    ASSERT_TRUE(code.has_value()) << "it did not end\n" << controller.Log();
    // 128 + SIGTERM: the signal came before the program took signals.
    EXPECT_TRUE(*code == 0 || *code == 128 + SIGTERM) << *code << "\n" << controller.Log();
  }
}

// Each process started by hand, so that the test can take its address
// between a kill and the restart: ports (`tcp`), or the Unix sockets a
// cluster on loopback binds, which libzmq would take from whoever listens
// there.
void RestartWhileTheAddressIsTaken(bool tcp) {
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  const auto connection = protocol::ConnectionFilePath(profile);
  auto start = [&](const std::string& program, const std::string& log) {
    std::vector<std::string> argv = {kBin + "/" + program, "--profile-dir", profile};
    if (tcp) argv.push_back("--tcp");
    return std::make_unique<ChildProcess>(argv, dir.path() / log);
  };
  std::unique_ptr<ChildProcess> servers[2];
  servers[0] = start("taskhub", "hub-0.log");
  ASSERT_TRUE(WaitFor([&] {
    auto info = protocol::ReadConnectionFile(connection);
    return info.ok() && !info->hub.query.empty();
  }));
  servers[1] = start("taskscheduler", "scheduler-0.log");
  ASSERT_TRUE(WaitFor([&] { return Client::Connect(profile).ok(); })) << servers[1]->Log();
  ChildProcess engine({kBin + "/taskengine", "--profile-dir", profile}, dir.path() / "engine.log");
  auto client = Client::Connect(profile);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitForEngines(1, 30).ok());
  const auto info = protocol::ReadConnectionFile(connection);
  ASSERT_TRUE(info.ok());

  struct Victim {
    size_t index;
    std::string program, endpoint;
  };
  int restart = 0;
  for (const Victim& victim : {Victim{1, "taskscheduler", info->scheduler.client},
                               Victim{0, "taskhub", info->hub.query}}) {
    SCOPED_TRACE(victim.program);
    ++restart;
    servers[victim.index]->Kill(SIGKILL);
    ASSERT_TRUE(servers[victim.index]->Wait(std::chrono::seconds(10)).has_value());
    PortSquatter squatter(victim.endpoint);
    ASSERT_TRUE(squatter.bound()) << "the port was free to take: " << victim.endpoint;
    servers[victim.index] = start(victim.program, victim.program + "-" + std::to_string(restart));
    // Submitted while the port is taken: it waits in the client.
    TaskOptions during;
    during.command = {"true"};
    auto id = (*client)->Submit(during);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(WaitFor([&] {
      return servers[victim.index]->Log().find(victim.endpoint + " is taken") != std::string::npos;
    }, std::chrono::seconds(30))) << servers[victim.index]->Log();
    squatter.Leave();
    ASSERT_TRUE((*client)->Wait({*id}, 60).ok()) << servers[victim.index]->Log();
    auto records = (*client)->Fetch({*id});
    ASSERT_TRUE(records.ok());
    EXPECT_EQ((*records)[0].status, TaskState::kOk);
    EXPECT_NE(servers[victim.index]->Log().find("bound " + victim.endpoint + " again"),
              std::string::npos);
    auto now = protocol::ReadConnectionFile(connection);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->scheduler.client, info->scheduler.client) << "the same port, known to all";
    EXPECT_EQ(now->hub.query, info->hub.query);
  }
}

TEST(PortTaken, ARestartedServerWhosePortIsTakenWaitsForItAndTheClusterCarriesOn) {
  RestartWhileTheAddressIsTaken(/*tcp=*/true);
}

TEST(PortTaken, ARestartedServerWhoseUnixSocketIsTakenWaitsForItAndTheClusterCarriesOn) {
  RestartWhileTheAddressIsTaken(/*tcp=*/false);
}

TEST(HubDisk, AnUnwritableDatabaseIsLoggedAndLosesNothingWhenTheHubDies) {
  // A file size limit makes the database's writes fail (EFBIG), as a full
  // disk or a quota would.
  TempDir dir;
  const std::string profile = (dir.path() / "p").string();
  ChildProcess hub(
      {"/usr/bin/prlimit", "--fsize=300000", kBin + "/taskhub", "--profile-dir", profile},
      dir.path() / "hub.log");
  const auto connection = dir.path() / "p" / "ztask-cluster.json";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(connection); }));
  ASSERT_TRUE(WaitFor([&] {
    auto info = protocol::ReadConnectionFile(connection);
    return info.ok() && !info->hub.query.empty();
  }));
  ChildProcess scheduler({kBin + "/taskscheduler", "--profile-dir", profile},
                         dir.path() / "scheduler.log");
  ASSERT_TRUE(WaitFor([&] { return Client::Connect(profile).ok(); })) << scheduler.Log();
  ChildProcess engine({kBin + "/taskengine", "--profile-dir", profile}, dir.path() / "engine.log");
  auto client = Client::Connect(profile);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitForEngines(1, 30).ok());
  std::vector<TaskId> ids;
  for (int i = 0; i < 60; ++i) {
    TaskOptions o;
    o.command = {"/bin/sh", "-c", "head -c 20000 /dev/zero | tr '\\0' x"};
    auto id = (*client)->Submit(o);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  ASSERT_TRUE((*client)->WaitReplies(ids, 60).ok()) << "tasks go on";
  ASSERT_TRUE(WaitFor([&] {
    return hub.Log().find("cannot write task records") != std::string::npos ||
           hub.Log().find("cannot commit task records") != std::string::npos;
  })) << hub.Log();
  EXPECT_EQ(hub.Poll(), std::nullopt) << "the hub is still running";
  // The records it holds in memory are served (the outcomes reach it a
  // moment after the replies reach the client).
  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(**client, ids, &records, std::chrono::seconds(10)));
  for (const TaskInfo& r : records) {
    EXPECT_EQ(r.status, TaskState::kOk);
    EXPECT_EQ(r.stdout_text.size(), 20000u);
  }

  // Those records were never written, so never acknowledged: the scheduler
  // still holds them. The hub dies; one that can write takes its place.
  hub.Kill(SIGKILL);
  ASSERT_TRUE(hub.Wait(std::chrono::seconds(10)).has_value());
  ChildProcess writable({kBin + "/taskhub", "--profile-dir", profile}, dir.path() / "hub2.log");
  records.clear();
  ASSERT_TRUE(WaitForFinalRecords(**client, ids, &records, std::chrono::seconds(30)))
      << writable.Log() << scheduler.Log();
  for (const TaskInfo& r : records) {
    EXPECT_EQ(r.status, TaskState::kOk);
    EXPECT_EQ(r.stdout_text.size(), 20000u);
  }
  // And they are on disk now: a third hub reads them from the database.
  ASSERT_EQ(writable.Stop(), 0);
  scheduler.Kill(SIGKILL);
  ChildProcess reader({kBin + "/taskhub", "--profile-dir", profile}, dir.path() / "hub3.log");
  records.clear();
  ASSERT_TRUE(WaitForFinalRecords(**client, ids, &records, std::chrono::seconds(30)))
      << reader.Log();
  EXPECT_EQ(records.size(), ids.size());
}

}  // namespace
}  // namespace ztask::testing
