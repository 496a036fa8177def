// Stand-ins for the processes around the scheduler, speaking the real wire
// protocol over real sockets: a hub (its notifier and monitor sockets and the
// connection file), engines that receive tasks and answer them, and a client
// that submits raw task requests. Used by the scheduler's process tests
// (tests/integration/scheduler_process_test.cc), which drive the real
// taskscheduler and watch every message it sends: what it tells the hub,
// what each engine holds, and what a peer sending garbage or another
// session's tasks gets.
//
// Thread safety: each object is owned by one thread.
#ifndef ZTASK_TESTS_SUPPORT_STANDINS_H_
#define ZTASK_TESTS_SUPPORT_STANDINS_H_

#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/connection_file.h"

namespace ztask::testing {

using std::chrono::milliseconds;

zmq::context_t& SharedContext();

// One monitor message, decoded.
struct MonitorMessage {
  protocol::MsgType type;
  TaskId task;
  std::optional<int32_t> engine_id;
  int32_t attempt = 0;
  bool final = false;
  bool ok = false;
  ErrorType error = ErrorType::kNone;
};

class StandInHub {
 public:
  // Binds on loopback and writes the connection file into `profile_dir`.
  explicit StandInHub(const std::filesystem::path& profile_dir);

  const protocol::Signer& signer() const { return signer_; }
  const std::filesystem::path& connection_file() const { return path_; }
  // The scheduler's endpoints, once it has written them (empty before).
  protocol::SchedulerEndpoints SchedulerEndpoints() const;

  void AnnounceEngine(int32_t id, const std::string& uuid);
  void RetireEngine(int32_t id, const std::string& uuid);
  // Publishes engine_draining: the engine is to take no new task.
  void DrainEngine(int32_t id, const std::string& uuid);
  // Receives monitor messages for up to `wait`; returns how many came.
  // Answers the scheduler's lookups of dependencies: none is known.
  size_t PumpMonitor(milliseconds wait);
  size_t lookups() const { return lookups_; }
  const std::vector<MonitorMessage>& monitor() const { return monitor_; }
  size_t bad_monitor_messages() const { return bad_monitor_; }

 private:
  // One message of a monitor batch; false when it does not decode.
  bool AddMonitorMessage(std::span<const std::string_view> views);

  std::filesystem::path path_;
  protocol::Signer signer_;
  zmq::socket_t notifier_, monitor_socket_;
  std::vector<MonitorMessage> monitor_;
  size_t bad_monitor_ = 0;
  size_t lookups_ = 0;
};

struct ReceivedTask {
  protocol::Header header;
  std::string header_frame;  // as it came, to be the reply's parent
  protocol::RoutingMeta meta;
  protocol::TaskSpec spec;
  protocol::DispatchInfo dispatch;
};

class StandInEngine {
 public:
  StandInEngine(const std::string& endpoint, const protocol::Signer& signer, int32_t id);

  int32_t id() const { return id_; }
  const std::string& uuid() const { return uuid_; }
  // Tells the scheduler this engine's socket is connected.
  void SendReady();
  std::optional<ReceivedTask> Receive(milliseconds wait);
  void Reply(const ReceivedTask& task, bool ok, ErrorType error = ErrorType::kNone,
             std::string message = {}, protocol::RawValue result = {});
  // Answers every task `ok`, all in one task_batch.
  void ReplyAll(const std::vector<ReceivedTask>& tasks);
  // The run time its replies say (ReplyMeta::run_us); none by default.
  void SayRunUs(std::optional<int64_t> run_us) { run_us_ = run_us; }
  // Messages (batches) received from the scheduler so far.
  size_t messages() const { return messages_; }
  zmq::socket_t& socket() { return socket_; }

 private:
  protocol::Signer signer_;
  int32_t id_;
  std::string uuid_;
  zmq::socket_t socket_;
  // Tasks of a batch received and not returned by Receive yet.
  std::deque<ReceivedTask> received_;
  size_t messages_ = 0;
  std::optional<int64_t> run_us_;
};

class RawClient {
 public:
  RawClient(const std::string& endpoint, const protocol::Signer& signer);

  struct Reply {
    TaskId task;
    protocol::ReplyMeta meta;
    protocol::TaskResult result;
  };

  TaskId Submit(const protocol::RoutingMeta& meta, const protocol::TaskSpec& spec,
                TaskId id = TaskId::Random());
  // Sends these tasks (id, spec) in one task_batch; the task at `foreign`
  // (if any) claims another session than the batch's.
  void SubmitBatch(const std::vector<std::pair<TaskId, protocol::TaskSpec>>& tasks,
                   std::optional<size_t> foreign = std::nullopt);
  // Messages received from the scheduler so far.
  size_t messages() const { return messages_; }
  std::optional<Reply> Receive(milliseconds wait);
  std::optional<protocol::AbortReply> Abort(const std::vector<TaskId>& ids, milliseconds wait);
  void SendRaw(const std::vector<std::string>& frames);
  zmq::socket_t& socket() { return socket_; }

 private:
  // Receives one message of either kind; task replies queue in replies_.
  bool ReceiveOne(milliseconds wait, std::optional<protocol::AbortReply>* abort);

  protocol::Signer signer_;
  std::string session_;
  zmq::socket_t socket_;
  std::deque<Reply> replies_;
  size_t messages_ = 0;
};

}  // namespace ztask::testing

#endif  // ZTASK_TESTS_SUPPORT_STANDINS_H_
