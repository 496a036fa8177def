// Client::Impl: the state behind ztask::Client (its sockets, the tasks it
// has sent and the replies it has had) and the methods the public calls
// forward to. The methods are defined by concept, each in its own file:
//   submission.cc  submitting tasks, flow control, sending again after a
//                  reconnection;
//   replies.cc     reading the scheduler's replies, and waiting for them or
//                  for the hub's records;
//   queries.cc     what is asked of the hub (records, jobs, engines, stats)
//                  and of the scheduler (abort);
//   events.cc      following the hub's event stream;
//   client.cc      connecting, and the public class's forwarding.
// Every wait goes through the one Waiter (waiter.h).
//
// Must not: be seen outside client/ (the public header keeps its pImpl and
// shows no ZeroMQ or msgpack type). Thread safety: owned by one thread,
// like the Client it serves.
#ifndef ZTASK_CLIENT_CLIENT_IMPL_H_
#define ZTASK_CLIENT_CLIENT_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/flat_id_map.h"
#include "base/recent_id_map.h"
#include "client/kept_requests.h"
#include "client/records.h"
#include "client/waiter.h"
#include "protocol/connection_file.h"
#include "protocol/signer.h"
#include "protocol/wire.h"
#include "ztask/client.h"

namespace ztask {

class Client::Impl {
 public:
  Impl(protocol::ConnectionInfo info, std::string profile);

  // submission.cc
  // Sends the tasks in order, in task_batch messages of up to
  // kMaxBatchTasks, under `ids` when given (else new ones). Every task is
  // checked first: one that is wrong fails the call and nothing is sent.
  Result<std::vector<TaskId>> SubmitMany(const std::vector<TaskOptions>& tasks,
                                         const std::vector<TaskId>* ids);
  void set_max_in_flight(size_t n) { max_in_flight_ = std::max<size_t>(1, n); }
  void set_keep_answered(size_t n) {
    submitted_.set_capacity(n);
    replied_.set_capacity(n);
  }

  // replies.cc
  // Reads the replies that came, and after a reconnection sends again what
  // a restarted scheduler never received: whatever call the program makes
  // next (a Fetch in a loop, say) heals a lost connection.
  void Notice();
  bool Ready(const TaskId& id);
  std::optional<ErrorType> ReplyOf(const TaskId& id);
  Status WaitReplies(const std::vector<TaskId>& ids, double timeout_s);
  Status Wait(const std::vector<TaskId>& ids, double timeout_s);

  // queries.cc
  // The records of `ids` (every record when empty). With `held`, the hub
  // answers once every task is recorded or final, or after `held_ms`.
  // Unknown ids are an error, or added to `unknown` with `tolerate_unknown`.
  Result<std::vector<TaskInfo>> Fetch(const std::vector<TaskId>& ids, bool tolerate_unknown,
                                      std::vector<TaskId>* unknown,
                                      std::optional<client::HeldUntil> held = std::nullopt,
                                      int32_t held_ms = 0);
  Result<std::vector<TaskInfo>> FetchWhen(const std::vector<TaskId>& ids, bool finished,
                                          double timeout_s);
  Result<std::vector<TaskInfo>> List(const std::string& job, TaskFilter filter);
  Result<std::string> NewJob();
  Result<std::vector<JobInfo>> Jobs(const std::string& name);
  Result<AbortResult> Abort(const std::vector<TaskId>& ids);
  Result<QueueStatus> Queue();
  Result<ClusterStats> Stats(std::optional<int64_t> feed_after, int32_t limit, bool sample);
  Result<std::vector<EngineStatus>> Engines();
  Status WaitForEngines(int n, double timeout_s);
  Result<int64_t> Purge(const std::vector<TaskId>& ids, bool all);
  Status ReportEngineState(const std::string& name, EngineState state, int32_t restarts,
                           const std::string& why);
  Status Shutdown();

  // events.cc
  Status Watch(const std::function<bool(const Value&)>& on_event);

 private:
  // submission.cc
  // Task `id`'s request header, dated now: a request is dated as it leaves
  // (the scheduler refuses a date no later than the last of this session),
  // so one sent later than it was made, or sent again, gets a new one.
  protocol::Header RequestHeader(const TaskId& id) const {
    return {id, protocol::MsgType::kTaskRequest, session_, base::WallMicros()};
  }
  Result<std::vector<std::string>> EncodeRequest(const TaskOptions& o, const TaskId& id);
  Status SendRequests(std::vector<std::vector<std::string>>& requests,
                      const std::vector<TaskId>& ids, size_t first, size_t end);
  Status WaitForRoom();
  Status SendToScheduler(const std::vector<std::string>& request);
  void Resync();
  void SendAgain(std::vector<TaskId> never_recorded);

  // replies.cc
  void DrainReplies();
  void NoteReplies(const protocol::Header& header, std::span<const std::string_view> views);
  // The id and outcome of a task_reply's frames; nullopt when unreadable.
  static std::optional<std::pair<TaskId, ErrorType>> ReadReply(
      std::span<const std::string_view> views);
  void Answered(const TaskId& id, ErrorType error);

  // queries.cc
  Result<std::vector<TaskInfo>> FetchEvery();

  protocol::ConnectionInfo info_;
  std::string profile_;
  protocol::Signer signer_;
  std::string session_;
  zmq::context_t context_{1};
  zmq::socket_t scheduler_, hub_;
  std::unique_ptr<protocol::ReconnectWatch> scheduler_watch_;
  client::Peer hub_peer_, scheduler_peer_;
  client::Waiter waiter_;
  // By id, the latest kKeepAnswered of them: tasks submitted; tasks with
  // their reply, and the reply's outcome (1 + its ErrorType). What is let
  // go of is in the hub's record (WaitReplies reads it there).
  static constexpr size_t kKeepAnswered = 1000000;
  RecentIdMap<uint8_t> submitted_{kKeepAnswered}, replied_{kKeepAnswered};
  // The requests of tasks with no reply yet, encoded, to send again.
  client::KeptRequests unanswered_;
  std::vector<std::pair<TaskId, ErrorType>> answers_;  // of the batch being read
  bool reconnected_ = false;
  double next_resync_ = 0;  // after a reconnection, when Notice looks again
  size_t max_in_flight_ = 1000000;
  static constexpr double kRecheckS = 1.0;
  // A scheduler that takes nothing for this long is an error to the caller.
  static constexpr double kStalledS = 600.0;
  // Records per page of a listing, and ids per held request.
  static constexpr int32_t kRecordsPerPage = 20000;
  static constexpr size_t kWaitAtOnce = 10000;
};

}  // namespace ztask

#endif  // ZTASK_CLIENT_CLIENT_IMPL_H_
