// A cluster over a real network between hosts (hosts_fixture.h): a host's
// link cut while its engines run tasks, a host gone at once, and the
// client's host cut off from the scheduler's mid-submit. Every test checks
// that each task gets one final outcome, at the client and in the hub, and
// that no body runs more often than its recorded attempts.
#include <set>
#include <thread>

#include "tests/hosts/hosts_fixture.h"

namespace ztask::testing {
namespace {

class Hosts : public HostsTest {
 protected:
  // Two tasks running on east's two engines (started alone), one with
  // retries and one without; then west's engines and more tasks for them.
  struct Load {
    TaskId retried, failed;
    std::vector<TaskId> others;
    std::map<std::string, int32_t> east;  // east's engines, by name
    std::vector<TaskId> all() const {
      std::vector<TaskId> ids = {retried, failed};
      ids.insert(ids.end(), others.begin(), others.end());
      return ids;
    }
  };
  void StartLoad(Load* load) {
    StartEngines("east", 2);
    ASSERT_TRUE(client_->WaitForEngines(2, 60 * kSlow).ok()) << Log("hub");
    load->east = EngineIds();
    load->retried = Submit(Marked(4 * kSlow, 2));
    load->failed = Submit(Marked(4 * kSlow, 0));
    ASSERT_TRUE(WaitFor([&] { return !Runs(load->retried).empty() && !Runs(load->failed).empty(); },
                        std::chrono::seconds(static_cast<int>(30 * kSlow))))
        << Log("scheduler");
    StartEngines("west", 2);
    ASSERT_TRUE(client_->WaitForEngines(4, 60 * kSlow).ok()) << Log("hub");
    for (int i = 0; i < 8; ++i) load->others.push_back(Submit(Marked(0.3, i % 2)));
    ASSERT_TRUE(Ends(load->retried).empty() && Ends(load->failed).empty())
        << "east's tasks ended before east was cut off: the machine is too slow for this test";
  }
  // East's tasks: the one with retries ran again on west, the other failed
  // with EngineError; the rest ran once on west.
  std::map<TaskId, TaskInfo> ExpectEastsTasksRetriedOrFailed(const Load& load) {
    auto records = ExpectAnsweredOnce(load.all());
    std::set<int32_t> east;
    for (const auto& [name, id] : load.east) east.insert(id);
    // Nothing closed a connection: the hub found them silent.
    for (int32_t id : east) {
      EXPECT_NE(Log("hub").find("engine " + std::to_string(id) + " is gone: missed its heartbeats"),
                std::string::npos)
          << Log("hub");
    }
    const TaskInfo& retried = records[load.retried];
    EXPECT_EQ(retried.status, TaskState::kOk) << retried.error_message;
    EXPECT_EQ(retried.attempts, 2);
    EXPECT_FALSE(east.count(retried.engine_id.value_or(-1))) << "retried on west";
    const std::vector<Mark> runs = Runs(load.retried);
    EXPECT_EQ(runs.size(), 2u);
    if (!runs.empty()) {
      EXPECT_TRUE(east.count(runs.front().engine)) << "its first attempt ran on east";
    }
    const TaskInfo& failed = records[load.failed];
    EXPECT_EQ(failed.status, TaskState::kError);
    EXPECT_EQ(failed.error_type, ErrorType::kEngineError) << failed.error_message;
    EXPECT_EQ(Runs(load.failed).size(), 1u);
    for (const TaskId& id : load.others) {
      EXPECT_EQ(records[id].status, TaskState::kOk) << records[id].error_message;
      EXPECT_EQ(records[id].attempts, 1);
      EXPECT_EQ(Runs(id).size(), 1u);
      EXPECT_FALSE(east.count(records[id].engine_id.value_or(-1)));
    }
    return records;
  }
};

TEST_F(Hosts, AHostCutOffPastTheHeartbeatWindowLosesItsTasksAndRejoinsUnderItsIds) {
  Load load;
  ASSERT_NO_FATAL_FAILURE(StartLoad(&load));
  ASSERT_EQ(hosts().SetLink("east", false), "");
  ASSERT_TRUE(client_->WaitReplies(load.all(), 60 * kSlow).ok()) << Log("scheduler");
  const auto records = ExpectEastsTasksRetriedOrFailed(load);
  // Cut off, east's engines finish their attempts; the replies wait in
  // the network.
  const int32_t failed_on = Runs(load.failed).front().engine;
  ASSERT_TRUE(
      WaitFor([&] { return Ends(load.failed).size() == 1 && Ends(load.retried).size() == 2; },
              std::chrono::seconds(static_cast<int>(30 * kSlow))));
  EXPECT_EQ(Ends(load.failed).front(), failed_on);

  ASSERT_EQ(hosts().SetLink("east", true), "");
  ASSERT_NO_FATAL_FAILURE(ExpectBackUnderTheirIds(load.east));
  ASSERT_NO_FATAL_FAILURE(ExpectTheyTakeWork(load.east));
  // The late replies changed nothing, at the client or in the hub.
  const auto after = ExpectAnsweredOnce(load.all());
  for (const TaskId& id : load.all()) {
    EXPECT_EQ(after.at(id).status, records.at(id).status) << id.ToHex();
    EXPECT_EQ(after.at(id).engine_id, records.at(id).engine_id) << id.ToHex();
    EXPECT_EQ(after.at(id).attempts, records.at(id).attempts) << id.ToHex();
  }
  const std::string log = StopScheduler();
  const bool counted = (log.find(" late replies") != std::string::npos &&
                        log.find(" 0 late replies") == std::string::npos) ||
                       log.find("not registered") != std::string::npos;
  EXPECT_TRUE(counted) << "the late replies were counted\n" << log;
}

TEST_F(Hosts, AHostThatVanishesLosesItsTasksAndItsEnginesRejoinWhenItIsBack) {
  Load load;
  ASSERT_NO_FATAL_FAILURE(StartLoad(&load));
  hosts().Vanish("east");
  ASSERT_TRUE(client_->WaitReplies(load.all(), 60 * kSlow).ok()) << Log("scheduler");
  ExpectEastsTasksRetriedOrFailed(load);
  EXPECT_TRUE(Ends(load.failed).empty()) << "killed mid-run";

  // The machine is back (a new one at its address): engines under the same
  // names get their ids again and take work.
  ASSERT_EQ(hosts().Add("east"), "");
  StartEngines("east", 2);
  ASSERT_NO_FATAL_FAILURE(ExpectBackUnderTheirIds(load.east));
  ASSERT_NO_FATAL_FAILURE(ExpectTheyTakeWork(load.east));
  ExpectAnsweredOnce(load.all());
}

// Each engine holds a task beyond the one it runs (--hwm 2). Cut off, the
// engine keeps running: once its running task ends it must start none of
// what it holds, which the scheduler has meanwhile given to west.
class HostsHoldingMore : public Hosts {
 protected:
  HostsHoldingMore() { scheduler_args_ = {"--hwm", "2"}; }
};

TEST_F(HostsHoldingMore, AHostCutOffStartsNoneOfTheTasksItHeldAfterItsEnginesWereRemoved) {
  StartEngines("east", 2);
  ASSERT_TRUE(client_->WaitForEngines(2, 60 * kSlow).ok()) << Log("hub");
  const std::map<std::string, int32_t> east = EngineIds();
  std::set<int32_t> east_ids;
  for (const auto& [name, id] : east) east_ids.insert(id);
  std::vector<TaskId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Submit(Marked(3 * kSlow, 1)));
  // Two run, two wait on east's engines.
  ASSERT_TRUE(WaitFor(
      [&] {
        int started = 0;
        for (const TaskId& id : ids) started += !Runs(id).empty();
        return started == 2;
      },
      std::chrono::seconds(static_cast<int>(30 * kSlow))))
      << Log("scheduler");
  StartEngines("west", 2);
  ASSERT_TRUE(client_->WaitForEngines(4, 60 * kSlow).ok()) << Log("hub");
  std::vector<TaskId> running;
  for (const TaskId& id : ids) {
    if (!Runs(id).empty()) running.push_back(id);
  }
  ASSERT_EQ(running.size(), 2u);
  ASSERT_TRUE(Ends(running[0]).empty() && Ends(running[1]).empty())
      << "east's tasks ended before east was cut off: the machine is too slow for this test";

  ASSERT_EQ(hosts().SetLink("east", false), "");
  ASSERT_TRUE(client_->WaitReplies(ids, 60 * kSlow).ok()) << Log("scheduler");
  // Cut off, east's engines finish what they ran, and start nothing more.
  ASSERT_TRUE(WaitFor([&] { return Ends(running[0]).size() == 2 && Ends(running[1]).size() == 2; },
                      std::chrono::seconds(static_cast<int>(30 * kSlow))));
  ASSERT_EQ(hosts().SetLink("east", true), "");
  ASSERT_NO_FATAL_FAILURE(ExpectBackUnderTheirIds(east));
  ASSERT_NO_FATAL_FAILURE(ExpectTheyTakeWork(east));

  auto records = ExpectAnsweredOnce(ids);
  int on_east = 0;
  for (const TaskId& id : ids) {
    EXPECT_EQ(records[id].status, TaskState::kOk) << records[id].error_message;
    EXPECT_EQ(records[id].attempts, 2) << "its attempt on east was lost";
    EXPECT_FALSE(east_ids.count(records[id].engine_id.value_or(-1)));
    for (const Mark& run : Runs(id)) on_east += east_ids.count(run.engine);
  }
  EXPECT_EQ(on_east, 2) << "only the two running at the cut ran on east";
  for (const auto& [name, id] : east) {
    EXPECT_NE(Log(name).find("dropped 1 tasks held while the hub had removed this engine"),
              std::string::npos)
        << Log(name);
  }
}

TEST_F(Hosts, AClientCutOffFromTheSchedulerMidSubmitResumesAndEveryTaskRunsOnce) {
  StartEngines("east", 2);
  StartEngines("west", 2);
  ASSERT_TRUE(client_->WaitForEngines(4, 60 * kSlow).ok()) << Log("hub");
  const int n = 90;
  std::vector<TaskId> ids;
  std::chrono::steady_clock::time_point cut_at;
  for (int i = 0; i < n; ++i) {
    if (i == n / 3) {
      ASSERT_EQ(hosts().SetLink("client", false), "");
      cut_at = std::chrono::steady_clock::now();
    }
    ids.push_back(Submit(Marked(0.05, 0)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a stream, not one batch
  }
  // The cut lasts 20 s: its length is the fault, not a wait for a condition.
  std::this_thread::sleep_until(cut_at + std::chrono::seconds(20));
  ASSERT_EQ(hosts().SetLink("client", true), "");
  const auto healed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->WaitReplies(ids, 60 * kSlow).ok()) << "the client resumes\n"
                                                          << Log("scheduler");
  // For the reader (not checked): how long after the link came back.
  std::printf("every reply in %.1f s after the link was up again\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - healed_at).count());
  auto records = ExpectAnsweredOnce(ids);
  for (const TaskId& id : ids) {
    EXPECT_EQ(records[id].status, TaskState::kOk) << records[id].error_message;
    EXPECT_EQ(records[id].attempts, 1);
    EXPECT_EQ(Runs(id).size(), 1u) << id.ToHex() << " ran exactly once";
  }
}

}  // namespace
}  // namespace ztask::testing
