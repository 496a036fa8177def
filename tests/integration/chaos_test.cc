// The chaos test: a random DAG of short tasks with retries runs while
// engines, the hub and the scheduler are killed at random moments (and
// restarted by taskcluster). Then, for every task: exactly one final
// record, the same outcome in the client's reply, an outcome consistent
// with its dependencies, no more runs than recorded attempts (each run
// leaves a mark), EngineError only once every retry was spent, and no
// dependent started before its `after` tasks completed. The seed is
// printed; set ZTASK_CHAOS_SEED to replay one.
#include <signal.h>

#include <atomic>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/cluster_fixture.h"

namespace ztask::testing {
namespace {

uint64_t Seed() {
  if (const char* env = std::getenv("ZTASK_CHAOS_SEED")) return std::stoull(env);
  return std::random_device{}();
}

struct Node {
  TaskId id;
  std::vector<size_t> after;  // indexes of earlier nodes
  bool fails = false;         // runs a function no engine has
};

std::string Describe(const std::vector<TaskInfo>& records, const std::vector<size_t>& deps) {
  std::string out;
  for (size_t d : deps) {
    const TaskInfo& r = records[d];
    out += "; dep " + std::to_string(d) + " " + std::string(TaskStateName(r.status)) +
           " attempts " + std::to_string(r.attempts) + " engine " + std::to_string(r.engine_id.value_or(-1)) +
           " started " + std::to_string(r.started.value_or(0)) + " completed " +
           std::to_string(r.completed.value_or(0));
  }
  return out;
}

// What the hub has of the tasks not finished, for a failure's message.
std::string Unfinished(Client* client, const std::vector<TaskId>& ids) {
  std::vector<TaskId> unknown;
  auto all = client->FetchAll();
  if (!all.ok()) return "; the hub does not answer: " + all.status().ToString();
  std::map<TaskId, TaskInfo> by_id;
  for (const auto& r : *all) by_id[r.id] = r;
  std::string out;
  size_t missing = 0, shown = 0;
  for (const TaskId& id : ids) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      ++missing;
      continue;
    }
    if (it->second.finished() || ++shown > 10) continue;
    out += "; " + id.ToHex().substr(0, 8) + " " +
           std::string(TaskStateName(it->second.status)) + " attempts " +
           std::to_string(it->second.attempts) + " engine " +
           std::to_string(it->second.engine_id.value_or(-1));
  }
  return "; " + std::to_string(missing) + " not in the hub" + out;
}

TEST_F(ClusterTest, ChaosLosesNothingAndKeepsEveryDependencyInOrder) {
  const uint64_t seed = Seed();
  std::printf("chaos seed %llu (replay: ZTASK_CHAOS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  // One engine task at a time, or several: then tasks go ahead to the
  // engine of their last dependency, and come back when it fails or dies.
  const std::string hwm = seed % 2 ? "1" : "4";
  std::printf("hwm %s\n", hwm.c_str());
  ASSERT_NO_FATAL_FAILURE(
      StartCluster(3, {"--heartbeat-ms", "200", "--heartbeat-misses", "3", "--recover-grace", "3",
                       "--max-restarts", "100000", "--restart-backoff", "0.05", "--hwm", hwm}));

#ifdef ZTASK_SANITIZED
  constexpr size_t kTasks = 600;
  constexpr auto kChaosFor = std::chrono::seconds(20);
#else
  constexpr size_t kTasks = 3000;
  constexpr auto kChaosFor = std::chrono::seconds(40);
#endif
  std::vector<Node> dag(kTasks);
  for (size_t i = 0; i < kTasks; ++i) {
    dag[i].fails = random() % 50 == 0;
    const size_t deps = i == 0 ? 0 : random() % 3;
    for (size_t d = 0; d < deps; ++d) {
      // Mostly recent tasks: chains and fans that stay in flight.
      const size_t back = 1 + random() % std::min<size_t>(i, 40);
      dag[i].after.push_back(i - back);
    }
  }
  std::atomic<bool> done{false};
  std::map<std::string, int> faults;
  std::thread chaos([&] {
    std::mt19937_64 r(seed ^ 0x5eed);
    const auto until = std::chrono::steady_clock::now() + kChaosFor;
    while (!done.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300 + r() % 900));
      const int pick = static_cast<int>(r() % 10);
      const std::string victim = pick < 6 ? "taskengine" : pick < 8 ? "taskhub" : "taskscheduler";
      std::vector<pid_t> pids;
      if (victim == "taskengine") {
        pids = PidsOf(victim, profile());
      } else if (pid_t pid = PidOf(victim, profile()); pid > 0) {
        pids.push_back(pid);
      }
      if (pids.empty()) continue;
      if (::kill(pids[r() % pids.size()], SIGKILL) == 0) ++faults[victim];
    }
  });

  // Each run appends its task's id: a line is written whole (O_APPEND).
  const std::string marks = (dir_.path() / "runs").string();
  constexpr int kRetries = 3;
  std::vector<TaskId> ids;
  for (Node& node : dag) {
    TaskOptions o;
    if (node.fails) {
      o.function = "no-such-function";
    } else {
      o.command = {"/bin/sh", "-c", "echo $ZTASK_TASK_ID >> " + marks + "; sleep 0.005"};
    }
    o.retries = kRetries;
    for (size_t d : node.after) o.after.ids.push_back(dag[d].id);
    auto id = client_->Submit(o);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    node.id = *id;
    ids.push_back(*id);
  }
  const Status replies = client_->WaitReplies(ids, 150);
  done.store(true);
  chaos.join();
  ASSERT_TRUE(replies.ok()) << "seed " << seed << ": " << replies.ToString()
                            << Unfinished(client_.get(), ids);

  std::vector<TaskInfo> records;
  ASSERT_TRUE(WaitForFinalRecords(*client_, ids, &records, std::chrono::seconds(40)))
      << "seed " << seed << Unfinished(client_.get(), ids);
  ASSERT_EQ(records.size(), kTasks);
  std::map<std::string, int> runs;
  {
    std::istringstream lines(ReadFile(marks));
    for (std::string line; std::getline(lines, line);) ++runs[line];
  }
  size_t retries = 0, failed = 0, ran_twice = 0;
  for (size_t i = 0; i < kTasks; ++i) {
    const TaskInfo& t = records[i];
    ASSERT_EQ(t.id, dag[i].id);
    const std::string where = "seed " + std::to_string(seed) + " task " + std::to_string(i);
    // The client heard what the hub recorded.
    const std::optional<ErrorType> reply = client_->ReplyOf(t.id);
    ASSERT_TRUE(reply.has_value()) << where;
    EXPECT_EQ(*reply, t.status == TaskState::kOk ? ErrorType::kNone : t.error_type)
        << where << ": replied " << ErrorTypeName(*reply) << ", recorded "
        << TaskStateName(t.status) << " " << ErrorTypeName(t.error_type);
    const int ran = runs[t.id.ToHex()];
    EXPECT_LE(ran, t.attempts) << where << " ran more often than its recorded attempts";
    ran_twice += ran > 1;
    retries += t.attempts > 1 ? static_cast<size_t>(t.attempts - 1) : 0;
    bool deps_ok = true;
    double latest_dep = 0;
    for (size_t d : dag[i].after) {
      deps_ok = deps_ok && records[d].status == TaskState::kOk;
      if (records[d].completed) latest_dep = std::max(latest_dep, *records[d].completed);
    }
    if (t.status != TaskState::kOk) ++failed;
    if (!deps_ok) {
      EXPECT_EQ(t.status, TaskState::kError) << where;
      EXPECT_EQ(t.error_type, ErrorType::kImpossibleDependency)
          << where << ": " << ErrorTypeName(t.error_type) << ": " << t.error_message
          << Describe(records, dag[i].after);
      EXPECT_EQ(ran, 0) << where << " ran though a dependency failed";
      continue;
    }
    if (dag[i].fails) {
      EXPECT_EQ(t.status, TaskState::kError) << where;
      // Its last attempt failed, or its engine died under it.
      EXPECT_TRUE(t.error_type == ErrorType::kTaskFailed ||
                  (t.error_type == ErrorType::kEngineError && t.attempts == kRetries + 1))
          << where << ": " << ErrorTypeName(t.error_type) << ": " << t.error_message;
      continue;
    }
    // Ran: ok, unless its engines died under every one of its attempts.
    if (t.status != TaskState::kOk) {
      EXPECT_EQ(t.error_type, ErrorType::kEngineError)
          << where << ": " << ErrorTypeName(t.error_type) << ": " << t.error_message
          << "; attempts " << t.attempts << Describe(records, dag[i].after);
      EXPECT_EQ(t.attempts, kRetries + 1) << where << " failed with retries left";
      continue;
    }
    EXPECT_GE(ran, 1) << where << " succeeded without running";
    ASSERT_TRUE(t.started.has_value());
    EXPECT_GE(*t.started, latest_dep)
        << where << " started before its after tasks completed, by "
        << (latest_dep - *t.started) * 1e6 << " us; attempts " << t.attempts << " on engine "
        << t.engine_id.value_or(-1) << Describe(records, dag[i].after);
  }
  std::printf(
      "chaos: %zu tasks, faults injected: %d engines, %d hubs, %d schedulers; "
      "%zu retries, %zu tasks ran more than once (each a recorded attempt), "
      "%zu failed as expected or cascaded; none lost\n",
      kTasks, faults["taskengine"], faults["taskhub"], faults["taskscheduler"], retries, ran_twice,
      failed);
  EXPECT_GT(faults["taskengine"] + faults["taskhub"] + faults["taskscheduler"], 0)
      << "the run was too short to inject a fault";
}

}  // namespace
}  // namespace ztask::testing
