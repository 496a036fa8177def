// A cluster spread over hosts on one machine (virtual_hosts.h): taskhub and
// taskscheduler on "server", bound to its address, so CurveZMQ is on as it
// is by default beyond loopback; engines on "east" and "west", each host
// with a profile directory of its own holding only a copy of the connection
// file, as on separate machines; the test itself, and its client, on
// "client". Every task the tests run marks each run of its body in a file
// named by its id, in a directory every host sees.
#ifndef ZTASK_TESTS_HOSTS_HOSTS_FIXTURE_H_
#define ZTASK_TESTS_HOSTS_HOSTS_FIXTURE_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protocol/connection_file.h"
#include "tests/hosts/virtual_hosts.h"
#include "tests/support/cluster_fixture.h"

namespace ztask::testing {

// Every process is several times slower under a sanitizer: a longer
// heartbeat window keeps a slow engine from being taken for a lost one.
#ifdef ZTASK_SANITIZED
inline constexpr const char* kHeartbeatMs = "1000";
inline constexpr double kSlow = 3;
#else
inline constexpr const char* kHeartbeatMs = "250";
inline constexpr double kSlow = 1;
#endif
inline constexpr const char* kHeartbeatMisses = "4";

// One run of a task's body, as it marked it: "ENGINE ATTEMPT".
struct Mark {
  int32_t engine = -1;
  int attempt = 0;
};

class HostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = VirtualHosts::Unavailable(); !why.empty()) {
      GTEST_SKIP() << "no hosts on this machine: " << why;
    }
    hosts_ = std::make_unique<VirtualHosts>();
    for (const char* host : {"server", "east", "west", "client"}) {
      if (std::string failed = hosts_->Add(host); !failed.empty()) {
        GTEST_SKIP() << "no hosts on this machine: " << failed;
      }
    }
    std::filesystem::create_directories(runs_dir());
    std::filesystem::create_directories(logs_dir());
    ASSERT_TRUE(hosts_->Enter("client")) << "cannot move onto the client's host";
    ASSERT_NO_FATAL_FAILURE(StartServer());
  }

  void TearDown() override {
    client_.reset();
    if (hosts_) hosts_->Leave();
    // Signalled together, then each reaped (a process cut off lingers on
    // its sockets for a while).
    for (auto& [name, engine] : engines_) engine->Kill(SIGTERM);
    if (scheduler_) scheduler_->Kill(SIGTERM);
    if (hub_) hub_->Kill(SIGTERM);
    engines_.clear();
    scheduler_.reset();
    hub_.reset();
    hosts_.reset();  // kills what is left on every host and removes them
  }

  std::string profile() const { return (dir_.path() / "server").string(); }
  std::filesystem::path profile_of(const std::string& host) const { return dir_.path() / host; }
  std::filesystem::path runs_dir() const { return dir_.path() / "runs"; }
  std::filesystem::path logs_dir() const { return dir_.path() / "logs"; }
  std::string Log(const std::string& name) const { return ReadFile(logs_dir() / (name + ".log")); }

  // Hub and scheduler on "server"; the connection file copied to the
  // other hosts; the client connected from "client".
  void StartServer() {
    const std::string ip = hosts_->Address("server");
    hub_ = Start("server", "hub",
                 {kBin + "/taskhub", "--profile-dir", profile(), "--ip", ip, "--heartbeat-ms",
                  kHeartbeatMs, "--heartbeat-misses", kHeartbeatMisses});
    ASSERT_NO_FATAL_FAILURE(
        WaitForEndpoint(*hub_, "hub", [](const auto& i) { return i.hub.registration; }));
    std::vector<std::string> scheduler = {kBin + "/taskscheduler", "--profile-dir", profile(),
                                          "--ip", ip};
    scheduler.insert(scheduler.end(), scheduler_args_.begin(), scheduler_args_.end());
    scheduler_ = Start("server", "scheduler", scheduler);
    ASSERT_NO_FATAL_FAILURE(WaitForEndpoint(*scheduler_, "scheduler",
                                            [](const auto& i) { return i.scheduler.engine; }));
    auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    ASSERT_TRUE(info->curve.enabled()) << "CurveZMQ is on by default beyond loopback";
    for (const std::string& endpoint : {info->hub.registration, info->hub.query,
                                        info->scheduler.client, info->scheduler.engine}) {
      ASSERT_EQ(endpoint.rfind("tcp://" + ip + ":", 0), 0u) << endpoint;
    }
    for (const char* host : {"east", "west", "client"}) {
      const auto path = protocol::ConnectionFilePath(profile_of(host));
      ASSERT_TRUE(protocol::WriteConnectionFile(path, *info).ok());
    }
    auto client = Client::Connect(profile_of("client"));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // Engines HOST-0 .. HOST-(n-1) on `host`.
  void StartEngines(const std::string& host, int n) {
    for (int i = 0; i < n; ++i) {
      const std::string name = host + "-" + std::to_string(i);
      engines_[name] =
          Start(host, name,
                {kBin + "/taskengine", "--profile-dir", profile_of(host).string(), "--name", name});
    }
  }

  // The ids of the running engines, by name.
  std::map<std::string, int32_t> EngineIds() {
    std::map<std::string, int32_t> ids;
    auto engines = client_->Engines();
    if (!engines.ok()) return ids;
    for (const EngineStatus& e : *engines) {
      if (e.state == EngineState::kRunning) ids[e.name] = e.id;
    }
    return ids;
  }

  // A command task of `seconds` that marks each run of it (its engine and
  // attempt) in runs/ID as it starts, and in runs/ID.end as it ends.
  TaskOptions Marked(double seconds, int retries) const {
    const std::string mark = (runs_dir() / "$ZTASK_TASK_ID").string();
    TaskOptions o;
    o.command = {"/bin/sh", "-c",
                 "echo \"$ZTASK_ENGINE_ID $ZTASK_ATTEMPT\" >> " + mark + "; sleep " +
                     std::to_string(seconds) + "; echo \"$ZTASK_ENGINE_ID\" >> " + mark + ".end"};
    o.retries = retries;
    return o;
  }
  TaskId Submit(const TaskOptions& options) {
    auto id = client_->Submit(options);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : TaskId{};
  }

  // The runs of a task's body so far, and the engines where one ended.
  std::vector<Mark> Runs(const TaskId& id) const {
    std::vector<Mark> runs;
    std::ifstream in(runs_dir() / id.ToHex());
    for (Mark r; in >> r.engine >> r.attempt;) runs.push_back(r);
    return runs;
  }
  std::vector<int32_t> Ends(const TaskId& id) const {
    std::vector<int32_t> ends;
    std::ifstream in(runs_dir() / (id.ToHex() + ".end"));
    for (int32_t e; in >> e;) ends.push_back(e);
    return ends;
  }

  // Every task has its final record and its reply, the reply says what the
  // record says, and no body ran more often than its recorded attempts.
  std::map<TaskId, TaskInfo> ExpectAnsweredOnce(const std::vector<TaskId>& ids) {
    std::map<TaskId, TaskInfo> by_id;
    std::vector<TaskInfo> records;
    EXPECT_TRUE(WaitForFinalRecords(*client_, ids, &records)) << Log("scheduler");
    for (const TaskInfo& r : records) {
      by_id[r.id] = r;
      EXPECT_EQ(client_->ReplyOf(r.id), std::optional<ErrorType>(r.error_type)) << r.id.ToHex();
      const std::vector<Mark> runs = Runs(r.id);
      EXPECT_LE(static_cast<int>(runs.size()), r.attempts)
          << r.id.ToHex() << ": ran more often than its attempts";
      if (r.ok()) {
        EXPECT_FALSE(runs.empty()) << r.id.ToHex() << ": ok, but its body never ran";
        if (!runs.empty()) {
          EXPECT_EQ(runs.back().engine, r.engine_id.value_or(-1)) << r.id.ToHex();
        }
      }
    }
    return by_id;
  }

  // Waits until the engines named are running under the ids they had.
  void ExpectBackUnderTheirIds(const std::map<std::string, int32_t>& before) {
    std::map<std::string, int32_t> now;
    const bool back = WaitFor(
        [&] {
          now = EngineIds();
          for (const auto& [name, id] : before) {
            if (!now.count(name) || now.at(name) != id) return false;
          }
          return true;
        },
        std::chrono::seconds(static_cast<int>(60 * kSlow)));
    for (const auto& [name, id] : before) {
      EXPECT_EQ(now.count(name) ? now.at(name) : -1, id) << name << " rejoined under its id";
    }
    ASSERT_TRUE(back) << Log("hub");
  }

  // A task sent only to each of these engines runs there.
  void ExpectTheyTakeWork(const std::map<std::string, int32_t>& engines) {
    std::vector<TaskId> ids;
    std::vector<int32_t> where;
    for (const auto& [name, id] : engines) {
      TaskOptions o = Marked(0, 0);
      o.targets = {id};
      ids.push_back(Submit(o));
      where.push_back(id);
    }
    ASSERT_TRUE(client_->WaitReplies(ids, 60 * kSlow).ok()) << Log("scheduler");
    auto records = ExpectAnsweredOnce(ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(records[ids[i]].status, TaskState::kOk) << records[ids[i]].error_message;
      EXPECT_EQ(records[ids[i]].engine_id, where[i]);
    }
  }

  // Stops the scheduler (SIGTERM): its log then says how many late replies
  // it ignored.
  std::string StopScheduler() {
    scheduler_->Stop(std::chrono::seconds(10));
    return Log("scheduler");
  }

  VirtualHosts& hosts() { return *hosts_; }

  TempDir dir_;
  std::unique_ptr<Client> client_;
  std::vector<std::string> scheduler_args_;  // set before SetUp to add some

 private:
  std::unique_ptr<ChildProcess> Start(const std::string& host, const std::string& name,
                                      const std::vector<std::string>& argv) {
    return std::make_unique<ChildProcess>(hosts_->On(host, argv), logs_dir() / (name + ".log"));
  }
  template <class Endpoint>
  void WaitForEndpoint(ChildProcess& process, const std::string& name, Endpoint endpoint) {
    const bool bound = WaitFor(
        [&] {
          if (process.Poll()) return true;
          auto info = protocol::ReadConnectionFile(protocol::ConnectionFilePath(profile()));
          return info.ok() && !endpoint(*info).empty();
        },
        std::chrono::seconds(30));
    ASSERT_FALSE(process.Poll().has_value()) << name << " exited: " << Log(name);
    ASSERT_TRUE(bound) << name << " did not bind: " << Log(name);
  }

  std::unique_ptr<VirtualHosts> hosts_;  // declared first of these: removed last
  std::unique_ptr<ChildProcess> hub_, scheduler_;
  std::map<std::string, std::unique_ptr<ChildProcess>> engines_;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_HOSTS_HOSTS_FIXTURE_H_
