// The taskscheduler process's loop (server.h), declared for the two files
// that define it: server.cc (the loop, clients, the core's actions) and
// server_engines.cc (engines, the hub's notices, recovery after a restart).
//
// Thread safety: as SchedulerServer.
#ifndef ZTASK_SCHEDULER_SERVER_IMPL_H_
#define ZTASK_SCHEDULER_SERVER_IMPL_H_

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/flat_id_map.h"
#include "base/string_hash.h"
#include "protocol/connection_file.h"
#include "protocol/peer_routes.h"
#include "protocol/replay_guard.h"
#include "protocol/resources.h"
#include "protocol/security.h"
#include "protocol/wire.h"
#include "scheduler/core.h"
#include "scheduler/frame_builder.h"
#include "scheduler/journal.h"
#include "scheduler/monitor_link.h"
#include "scheduler/outbox.h"
#include "scheduler/packed_request.h"
#include "scheduler/server.h"

namespace ztask::scheduler {

class SchedulerServer::Impl {
 public:
  using Frames = protocol::Frames;
  using MsgType = protocol::MsgType;
  // A message as views of its frames, laid out as one that came alone on a
  // ROUTER: the sender's session, the signature and HMAC frames (empty
  // for a message of a batch), header, parent, metadata, content, buffers.
  // Views into the message received: valid while it is handled.
  using Msg = std::span<const std::string_view>;

  Impl(const SchedulerOptions& options, protocol::ConnectionInfo info,
       std::unique_ptr<Scheme> scheme, std::filesystem::path profile)
      : options_(options),
        profile_(std::move(profile)),
        info_(std::move(info)),
        signer_(info_.key),
        core_(CoreOptions{.hwm = options.hwm,
                          .send_ahead = options.send_ahead,
                          .keep_finished = options.keep_finished,
                          .look_up_unknown = !info_.hub.monitor.empty()},
              std::move(scheme), &clock_),
        client_(context_, zmq::socket_type::router),
        engine_(context_, zmq::socket_type::router),
        notifier_(context_, zmq::socket_type::sub),
        monitor_(context_, zmq::socket_type::dealer) {}

  ~Impl() {
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }

  Status Start();

  void Run();

  void RequestStop() {
    stop_.store(true);
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);
  }

  const std::string& client_endpoint() const { return client_endpoint_; }
  const std::string& engine_endpoint() const { return engine_endpoint_; }
  ServerCounters counters() const {
    ServerCounters c = counters_;
    c.dropped = drops_.count();
    c.monitor_resent = monitor_link_.resent();
    return c;
  }

 private:
  class SteadyClock final : public Clock {
   public:
    int64_t NowMicros() override { return Now(); }
    static int64_t Now() { return base::MonotonicMicros(); }
  };

  // A submitted task's request, kept until its final reply: the client's
  // routing id in request[0], then the message as it came.
  struct Pending {
    PackedRequest request;
  };

  // What the hub and the engine itself have told us of one engine.
  struct EngineEntry {
    int32_t id = -1;
    bool registered = false;  // the hub says so
    bool ready = false;       // its DEALER has reached us
    bool draining = false;    // the hub said so, perhaps before it could take tasks
    EngineSlot slot = kNoSlot;
    Amounts capacity;  // as its engine_ready said
  };

  static constexpr size_t kBatch = 256;  // messages per socket per turn
  static constexpr uint64_t kTasksPerTurn = 2048;
  // Replies from engines not linked yet, kept while a restart recovers.
  static constexpr size_t kMaxEarlyReplies = 100000;

  static DependencySet ToSet(const protocol::WireDependencies& w) {
    return {w.ids, w.mode, w.outcome};
  }
  static Amounts ToAmounts(const std::optional<int32_t>& slots,
                           const std::optional<protocol::ResourceMap>& resources) {
    return {slots.value_or(1), resources.value_or(protocol::ResourceMap{})};
  }
  // What the core needs of a task, from its routing metadata.
  static Submission ToSubmission(const TaskId& id, const protocol::RoutingMeta& meta) {
    return {id,           ToSet(meta.after), ToSet(meta.follow),
            meta.targets, meta.timeout_s,    meta.retries,
            meta.priority, ToAmounts(meta.slots, meta.resources)};
  }

  // ---- the loop (server.cc) ------------------------------------------------

  // What this turn decided leaves: first its record goes into the journal
  // (sealing the monitor batch), then the messages to engines and clients,
  // then the batch to the hub.
  void EndTurn();
  // Tells the hub the scheduler's counts (scheme, queue depth, clients),
  // once a second, for dashboards and metrics.
  void SendStats(int64_t now_us);

  // Registered but not connected: treat it as lost, its tasks go elsewhere.
  void EngineUnreachable(const std::string& uuid);

  std::chrono::milliseconds PollTimeout() const;

  // Up to kBatch messages, and no more once kTasksPerTurn tasks or replies
  // came this call (a batch holds up to 1,024): what this turn decides for
  // engines and clients leaves at its end, so a turn stays short.
  void Drain(zmq::socket_t& socket, void (Impl::*handle)(Frames&)) {
    const uint64_t start = tasks_seen_;
    for (size_t i = 0; i < kBatch && tasks_seen_ - start < kTasksPerTurn &&
                       protocol::TryReceive(socket, frames_);
         ++i) {
      (this->*handle)(frames_);
    }
  }

  // ---- inbound ----------------------------------------------------------

  void Drop(std::string_view peer, const std::string& why) { drops_.Drop(peer, why); }
  void Drop(std::string_view peer, const Status& why) { drops_.Drop(peer, why); }

  Result<protocol::Header> Open(const Frames& frames, size_t first,
                                std::vector<std::string_view>* views,
                                protocol::ReplayGuard* guard) {
    return protocol::OpenMessage(signer_, limits_, frames, first, guard, views);
  }

  // Verifies a message from a ROUTER socket and binds its connection to the
  // sender's session (`routes`); frames[0] then names the session instead
  // of the connection, which is what the rest of the loop keys peers by.
  Result<protocol::Header> OpenFromPeer(Frames& frames, std::vector<std::string_view>* views,
                                        protocol::ReplayGuard* guard, protocol::PeerRoutes& routes) {
    auto header = Open(frames, 1, views, guard);
    if (header.ok()) {
      routes.Prove(header->session, protocol::View(frames[0]));
      frames[0] = protocol::Frame(header->session);
    }
    return header;
  }

  void OnClientMessage(Frames& frames);

  void OnTaskRequest(const protocol::Header& header, Msg msg);

  // A verified task_batch (frames[0]: the sender's session): each of its
  // messages is handled as if it came alone, as `handle(header, msg)`.
  // Messages not of `type`, or of another session than the batch's, are
  // dropped.
  template <class Each>
  void ForEachInBatch(const protocol::Header& batch, const std::vector<std::string_view>& views,
                      Frames& frames, MsgType type, Each&& handle);

  // Why a task may not be taken (TaskLimits), or "".
  std::string OverLimit(const protocol::RoutingMeta& meta, Msg msg, std::string_view client);

  // Fails a task at once, recorded in the hub like any other outcome.
  void Reject(const protocol::Header& header, Msg msg, const std::string& why);

  // The request of a task with its final outcome, and its client's count.
  // REQUIRES: `pending` is the entry of `id` in pending_.
  void Forget(const TaskId& id, const Pending& pending);

  void OnAbortRequest(const std::vector<std::string_view>& views, Frames& frames);

  // ---- engines, the hub's notices and acknowledgements (server_engines.cc)

  void OnEngineMessage(Frames& frames);

  // An engine's DEALER reached us: at its start, or again after its
  // connection broke (then it says which tasks it holds).
  void OnEngineReady(const std::string& uuid, const protocol::EngineReady& ready);

  // A restored engine says what it holds: tasks restored as running there
  // that it does not hold were lost with its old connection, and tasks it
  // holds that the restored state has waiting were dispatched there after
  // the hub's last record.
  void Reconcile(EngineSlot slot, const std::vector<TaskId>& held);

  // `msg` is verified: the engine's session, then the reply.
  void OnTaskReply(Msg msg);

  // Replies kept while their engines were not linked yet.
  void ReplayEarlyReplies();

  // The hub's acknowledgements, and its answers to lookups.
  void OnMonitorReply(Frames& frames);
  // Asks the hub about the dependencies the core does not know (over the
  // monitor connection, after the batches sent before), and again those
  // unanswered for kLookupAgainUs.
  void SendLookups();
  void OnLookupReply(const std::vector<std::string_view>& views);

  void OnNotifierMessage(Frames& frames);

  // An engine takes tasks once the hub registered it and it reached us.
  void Activate(const std::string& uuid, EngineEntry& entry);

  // ---- actions (server.cc) ------------------------------------------------

  // Carries out what the core asked. `reply`: the engine's reply being
  // handled, whose frames a delivery or a retry passes on; empty otherwise.
  void DrainActions(Msg reply = {});

  void Handle(const Action& a, Msg reply);

  // A drained engine may go: tell it, and forget it (it unregisters).
  void Retire(const Action& a);

  void Dispatch(const Action& a, const PackedRequest& request);

  // REQUIRES: `reply` is the engine's reply that finished the task.
  void Deliver(const Action& a, const PackedRequest& request, Msg reply);

  void FailTask(const Action& a, const PackedRequest& request);

  void Retried(const Action& a, const PackedRequest& request, Msg reply);
  void Returned(const Action& a, const PackedRequest& request);
  static std::string UnmetReason(Msg reply);

  // ---- building and sending ---------------------------------------------

  // A monitor message carrying a request's parts as they came.
  void MonitorCopy(MsgType type, Msg request);

  // `buffers`: the reply's, when the outcome is an engine's reply.
  void MonitorOutcome(const Action& a, bool final, std::string_view parent,
                      std::string_view content, Msg buffers = {});

  void SendToClient(Frames& out) { clients_out_.Send(out); }
  // A reply for `client` (header, parent, metadata, content, buffers).
  void ReplyToClient(std::string_view client, Msg reply) { clients_out_.Batch(client, reply); }

  // Monitor messages go to the hub in batches, one signature each: a batch
  // is sealed when it is full and at the end of every turn of the loop.
  static constexpr size_t kBatchMessages = 1024;
  // Past this much unacknowledged by the hub, no new task is taken.
  static constexpr size_t kMaxUnacknowledgedBytes = size_t{64} << 20;
  static constexpr size_t kBatchBytes = size_t{8} << 20;

  void SealIfFull() {
    if (builder_.batched() >= kBatchMessages || builder_.batched_bytes() >= kBatchBytes) {
      monitor_link_.Seal();
    }
  }

  // ---- recovery after a restart (server_engines.cc) ----------------------

  // Sends the hub what an earlier scheduler recorded in the journal and the
  // hub never acknowledged, and waits until it has (before asking it what
  // was in flight, so that its answer is whole).
  void ReplayJournal();

  // Restores the tasks an earlier scheduler of this cluster left unfinished,
  // as the hub recorded them. Engines that ran them get slots that take no
  // new task until they are back and say what they hold (Reconcile); those
  // not back within the grace period are lost, with their tasks' attempts.
  void Recover();

  // The slot of an engine id the restored state names: one that holds its
  // tasks and takes none until the engine is back.
  EngineSlot RecoveredSlot(std::optional<int32_t> engine_id);

  void Restore(const protocol::RecoveredTask& t);

  // Engines that held restored tasks and did not come back are lost.
  void EndRecoveryGrace();

  SchedulerOptions options_;
  const protocol::Limits limits_ = options_.limits;
  std::filesystem::path profile_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  SteadyClock clock_;
  SchedulerCore core_;

  // Waiting requests are kept: without it, 100,000 waiting no-ops held 9 KiB each.
  zmq::context_t context_{protocol::OwnBuffersContext()};  // before the sockets
  zmq::socket_t client_, engine_, notifier_, monitor_;
  std::unique_ptr<protocol::ServerSecurity> security_;  // after the sockets: stops first
  // Looked up by the routing id's bytes, without making a string per task.
  std::unordered_map<std::string, size_t, protocol::StringHash, std::equal_to<>> queued_per_client_;
  std::string client_endpoint_, engine_endpoint_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};

  FrameBuilder builder_{signer_};
  MonitorLink monitor_link_{monitor_, builder_};
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<protocol::ReconnectWatch> monitor_watch_;
  // Lookups sent and not answered, by request id: the ids, and when sent.
  struct LookupAsked {
    std::vector<TaskId> ids;
    int64_t sent_us = 0;  // 0: not sent yet (the socket would not take it)
  };
  std::map<TaskId, LookupAsked> lookups_asked_;
  static constexpr int64_t kLookupAgainUs = 2'000'000;
  static constexpr size_t kIdsPerLookup = 1000;
  const std::string lookup_session_ = TaskId::Random().ToHex();
  static constexpr int64_t kStatsEveryUs = 1'000'000;
  int64_t next_stats_us_ = 0;  // 0: never (no hub)
  // Which connection speaks for each client session and engine uuid: only
  // one that delivered a verified message of it (peer_routes.h).
  protocol::PeerRoutes client_routes_, engine_routes_;
  Outbox clients_out_{client_, client_routes_, builder_},
      engines_out_{engine_, engine_routes_, builder_};
  // Recovery after a restart: engine id -> slot of engines holding restored
  // tasks and not linked to a connected engine yet; slots linked but not
  // back (no engine_ready yet); replies that came before their engine was
  // linked.
  std::unordered_map<int32_t, EngineSlot> recovered_slots_;
  std::unordered_set<EngineSlot> recovering_slots_;
  std::vector<std::vector<std::string>> early_replies_;  // copies of the messages
  int64_t recovery_deadline_us_ = 0;
  Frames frames_;
  std::vector<Action> actions_;
  FlatIdMap<Pending> pending_;
  std::unordered_map<std::string, EngineEntry> engines_;
  std::vector<std::string> uuid_of_slot_;
  protocol::DropLog drops_{"taskscheduler"};
  protocol::ReplayGuard client_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      engine_guard_{protocol::ReplayWindowOf(options_.replay_window_s)};
  ServerCounters counters_;
  uint64_t tasks_seen_ = 0;  // task requests and replies handled, for Drain
};

template <class Each>
void SchedulerServer::Impl::ForEachInBatch(const protocol::Header& batch,
                                           const std::vector<std::string_view>& views,
                                           Frames& frames, MsgType type, Each&& handle) {
  const std::string_view peer = protocol::View(frames[0]);
  auto unpacked = protocol::UnpackBatch(views);
  if (!unpacked.ok()) return Drop(peer, unpacked.status());
  for (std::vector<std::string_view>& message : *unpacked) {
    auto header = protocol::DecodeHeader(message[protocol::kFrameHeader]);
    if (!header.ok()) {
      Drop(peer, header.status());
      continue;
    }
    if (header->type != type || header->session != batch.session) {
      Drop(peer, "a " + std::string(protocol::MsgTypeName(header->type)) + " of session " +
                     protocol::PrintablePeer(header->session) + " in a task_batch of " +
                     protocol::PrintablePeer(batch.session));
      continue;
    }
    message.insert(message.begin(), peer);
    handle(*header, Msg(message));
  }
}

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_SERVER_IMPL_H_
