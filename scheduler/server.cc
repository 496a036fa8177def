#include "scheduler/server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "protocol/connection_file.h"
#include "protocol/replay_guard.h"
#include "protocol/security.h"
#include "protocol/wire.h"
#include "scheduler/core.h"
#include "scheduler/frame_builder.h"
#include "scheduler/journal.h"
#include "scheduler/monitor_link.h"
#include "scheduler/outbox.h"
#include "scheduler/recovery.h"

namespace ztask::scheduler {
namespace {

using protocol::Frames;
using protocol::MsgType;
using protocol::Share;
using protocol::View;

class SteadyClock final : public Clock {
 public:
  int64_t NowMicros() override { return Now(); }
  static int64_t Now() {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }
};

DependencySet ToSet(const protocol::WireDependencies& w) { return {w.ids, w.mode, w.outcome}; }

// A submitted task's request, kept until its final reply: the client's
// routing id in frames[0], then the message as it came.
struct Pending {
  Frames frames;
};

// What the hub and the engine itself have told us of one engine.
struct EngineEntry {
  int32_t id = -1;
  bool registered = false;  // the hub says so
  bool ready = false;       // its DEALER has reached us
  EngineSlot slot = kNoSlot;
};

constexpr size_t kBatch = 256;  // messages per socket per turn
// Replies from engines not linked yet, kept while a restart recovers.
constexpr size_t kMaxEarlyReplies = 100000;

}  // namespace

class SchedulerServer::Impl {
 public:
  Impl(const SchedulerOptions& options, protocol::ConnectionInfo info,
       std::unique_ptr<Scheme> scheme, std::filesystem::path profile)
      : options_(options),
        profile_(std::move(profile)),
        info_(std::move(info)),
        signer_(info_.key),
        core_(CoreOptions{options.hwm}, std::move(scheme), &clock_),
        client_(context_, zmq::socket_type::router),
        engine_(context_, zmq::socket_type::router),
        notifier_(context_, zmq::socket_type::sub),
        monitor_(context_, zmq::socket_type::dealer) {
  }

  ~Impl() {
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }

  Status Start() {
    if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) return Status::IoError("cannot make a pipe");
    auto security = protocol::ServerSecurity::Create(context_, info_, profile_, "taskscheduler");
    if (!security.ok()) return security.status();
    security_ = std::move(*security);
    for (auto [s, name] : {std::pair{&client_, "client"}, {&engine_, "engine"}}) {
      s->set(zmq::sockopt::router_mandatory, 1);
      // A peer that reconnects under its routing id (its connection broke
      // without us noticing) takes over its old place.
      s->set(zmq::sockopt::router_handover, 1);
      s->set(zmq::sockopt::sndhwm, options_.socket_hwm);
      s->set(zmq::sockopt::rcvhwm, options_.socket_hwm);
      s->set(zmq::sockopt::linger, 1000);
      s->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.limits.max_message_bytes));
      ZTASK_RETURN_IF_ERROR(security_->Secure(*s, name));
    }
    ZTASK_RETURN_IF_ERROR(security_->Start());
    protocol::SecureClient(notifier_, info_);
    protocol::SecureClient(monitor_, info_);
    auto client =
        protocol::BindPreferring(client_, options_.client_endpoint, info_.scheduler.client);
    if (!client.ok()) return client.status();
    auto engine =
        protocol::BindPreferring(engine_, options_.engine_endpoint, info_.scheduler.engine);
    if (!engine.ok()) return engine.status();
    client_endpoint_ = *client;
    engine_endpoint_ = *engine;
    notifier_.set(zmq::sockopt::subscribe, "");
    if (!info_.hub.notifier.empty()) {
      ZTASK_RETURN_IF_ERROR(protocol::Connect(notifier_, info_.hub.notifier));
    } else {
      spdlog::warn("the connection file names no hub notifier: no engine will ever be known");
    }
    monitor_.set(zmq::sockopt::sndhwm, 1000000);
    monitor_.set(zmq::sockopt::linger, 2000);
    // Nothing is queued for a hub that is not there: the link keeps it
    // until one acknowledges it.
    monitor_.set(zmq::sockopt::immediate, 1);
    if (!info_.hub.monitor.empty()) {
      ZTASK_RETURN_IF_ERROR(protocol::Connect(monitor_, info_.hub.monitor));
      monitor_link_.set_enabled(true);
      monitor_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, monitor_);
      auto journal = Journal::Open(profile_ / "scheduler.journal");
      if (journal.ok()) {
        journal_ = std::move(*journal);
        monitor_link_.set_journal(journal_.get());
        ReplayJournal();
      } else {
        spdlog::error("{}: running without a journal, a crash may lose the latest records",
                      journal.status().message());
      }
    }
    if (!info_.hub.query.empty()) Recover();
    return Status::Ok();
  }

  void Run() {
    while (!stop_.load()) {
      zmq::pollitem_t items[] = {
          {client_.handle(), 0, ZMQ_POLLIN, 0},
          {engine_.handle(), 0, ZMQ_POLLIN, 0},
          {notifier_.handle(), 0, ZMQ_POLLIN, 0},
          {monitor_.handle(), 0,
           static_cast<short>(ZMQ_POLLIN | (monitor_link_.blocked() ? ZMQ_POLLOUT : 0)), 0},
          {nullptr, wake_[0], ZMQ_POLLIN, 0},
      };
      if (Status polled = protocol::Poll(items, std::size(items), PollTimeout()); !polled.ok()) {
        spdlog::error("{}", polled.message());
        return;
      }
      if (items[0].revents & ZMQ_POLLIN) Drain(client_, &Impl::OnClientMessage);
      if (items[1].revents & ZMQ_POLLIN) Drain(engine_, &Impl::OnEngineMessage);
      if (items[2].revents & ZMQ_POLLIN) Drain(notifier_, &Impl::OnNotifierMessage);
      if (items[3].revents & ZMQ_POLLIN) Drain(monitor_, &Impl::OnMonitorAck);
      if (monitor_watch_ && monitor_watch_->Reconnected()) monitor_link_.Reconnected();
      core_.Tick();
      EndRecoveryGrace();
      drops_.Report(SteadyClock::Now());
      DrainActions();
      EndTurn();
    }
    EndTurn();
    spdlog::info("stopping: {} tasks live, {} dropped messages, {} late replies",
                 core_.live_tasks(), drops_.count(), counters_.late_replies);
  }

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
  // What this turn decided leaves: first its record goes into the journal
  // (sealing the monitor batch), then the messages to engines and clients,
  // then the batch to the hub.
  void EndTurn() {
    std::vector<std::string> gone;
    do {  // losing an engine may fail or move tasks: their messages go too
      monitor_link_.Seal();
      for (const std::string& client : clients_out_.Flush()) {
        // Not connected (gone, or not back yet after a restart): the client
        // finds the outcome in the hub's record.
        ++counters_.undeliverable;
        spdlog::debug("could not reply to client {} (the hub keeps the record)",
                      protocol::PrintablePeer(client));
      }
      gone = engines_out_.Flush();
      for (const std::string& uuid : gone) EngineUnreachable(uuid);
    } while (!gone.empty());
    monitor_link_.Flush(SteadyClock::Now());
  }

  // Registered but not connected: treat it as lost, its tasks go elsewhere.
  void EngineUnreachable(const std::string& uuid) {
    auto it = engines_.find(uuid);
    if (it == engines_.end() || it->second.slot == kNoSlot) return;
    spdlog::warn("engine {} is unreachable; removing it", it->second.id);
    const EngineSlot slot = it->second.slot;
    it->second.slot = kNoSlot;
    it->second.ready = false;
    recovering_slots_.erase(slot);
    core_.EngineRemoved(slot);
    DrainActions();
  }

  std::chrono::milliseconds PollTimeout() const {
    if (clients_out_.blocked() || engines_out_.blocked()) return std::chrono::milliseconds(5);
    // Unacknowledged monitor batches may need sending again.
    if (monitor_link_.unacknowledged() > 0) return std::chrono::milliseconds(250);
    if (!recovered_slots_.empty()) return std::chrono::milliseconds(250);
    auto next = core_.NextDeadline();
    if (!next) return std::chrono::milliseconds(-1);
    const int64_t wait_us = *next - SteadyClock::Now();
    if (wait_us <= 0) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds((wait_us + 999) / 1000);
  }

  void Drain(zmq::socket_t& socket, void (Impl::*handle)(Frames&)) {
    protocol::Drain(socket, frames_, kBatch, [&](Frames& f) { (this->*handle)(f); });
  }

  // ---- inbound ----------------------------------------------------------

  void Drop(std::string_view peer, const std::string& why) { drops_.Drop(peer, why); }
  void Drop(std::string_view peer, const Status& why) { drops_.Drop(peer, why); }

  Result<protocol::Header> Open(const Frames& frames, size_t first,
                                std::vector<std::string_view>* views,
                                protocol::ReplayGuard* guard) {
    return protocol::OpenMessage(signer_, options_.limits, frames, first, guard, views);
  }

  void OnClientMessage(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, 1, &views, &client_guard_);
    const std::string_view peer = frames.empty() ? "" : View(frames[0]);
    if (!header.ok()) return Drop(peer, header.status());
    switch (header->type) {
      case MsgType::kTaskRequest: return OnTaskRequest(*header, views, frames);
      case MsgType::kAbortRequest: return OnAbortRequest(views, frames);
      default:
        return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                              " on the client socket");
    }
  }

  void OnTaskRequest(const protocol::Header& header, const std::vector<std::string_view>& views,
                     Frames& frames) {
    const std::string_view peer = View(frames[0]);
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]);
    if (!meta.ok()) return Drop(peer, "task_request metadata: " + meta.status().message());
    if (std::string why = OverLimit(*meta, views, peer); !why.empty()) {
      return Reject(header, frames, why);
    }
    auto [it, inserted] = pending_.try_emplace(header.id);
    if (!inserted) {
      // A client sends again what it has no reply for after it reconnects:
      // the task is here already, and its reply will come.
      if (View(it->second.frames[0]) == peer) {
        ++counters_.resubmitted;
        return;
      }
      ++counters_.duplicate_tasks;
      return Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
    }
    it->second.frames = std::move(frames);
    auto queued = queued_per_client_.find(peer);
    if (queued == queued_per_client_.end()) queued = queued_per_client_.emplace(peer, 0).first;
    ++queued->second;
    Submission submission{header.id,        ToSet(meta->after), ToSet(meta->follow),
                          meta->targets,    meta->timeout_s,    meta->retries,
                          meta->priority};
    // Monitor first, so the hub hears of the task before of its outcome.
    MonitorCopy(MsgType::kTaskSubmitted, it->second.frames);
    if (!core_.Submit(submission)) {
      Forget(it);
      ++counters_.duplicate_tasks;
      return Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
    }
    DrainActions();
  }

  // Why a task may not be taken (TaskLimits), or "".
  std::string OverLimit(const protocol::RoutingMeta& meta,
                        const std::vector<std::string_view>& views, std::string_view client) {
    const TaskLimits& limits = options_.task_limits;
    size_t bytes = 0;
    for (size_t i = protocol::kFrameContent; i < views.size(); ++i) bytes += views[i].size();
    if (bytes > limits.max_task_bytes) {
      return "the task is " + std::to_string(bytes) + " bytes, over the limit of " +
             std::to_string(limits.max_task_bytes) + " (taskscheduler --max-task-bytes)";
    }
    const size_t deps = meta.after.ids.size() + meta.follow.ids.size();
    if (deps > limits.max_dependencies) {
      return "the task has " + std::to_string(deps) + " dependencies, over the limit of " +
             std::to_string(limits.max_dependencies) + " (taskscheduler --max-dependencies)";
    }
    auto queued = queued_per_client_.find(client);
    if (queued != queued_per_client_.end() && queued->second >= limits.max_queued_per_client) {
      return "this client has " + std::to_string(queued->second) +
             " tasks waiting or running, the limit (taskscheduler --max-queued-per-client); "
             "wait for some before submitting more";
    }
    return "";
  }

  // Fails a task at once, recorded in the hub like any other outcome.
  void Reject(const protocol::Header& header, Frames& frames, const std::string& why) {
    ++counters_.rejected;
    spdlog::warn("rejected task {} of client {}: {}", header.id.ToHex(),
                 protocol::PrintablePeer(View(frames[0])), why);
    MonitorCopy(MsgType::kTaskSubmitted, frames);
    Action a{.kind = Action::Kind::kFail, .task = header.id, .error = ErrorType::kTaskRejected,
             .message = why};
    FailTask(a, frames);
  }

  // The request of a task with its final outcome, and its client's count.
  void Forget(std::unordered_map<TaskId, Pending, TaskIdHash>::iterator it) {
    auto queued = queued_per_client_.find(View(it->second.frames[0]));
    if (queued != queued_per_client_.end() && --queued->second == 0) {
      queued_per_client_.erase(queued);
    }
    pending_.erase(it);
  }

  void OnAbortRequest(const std::vector<std::string_view>& views, Frames& frames) {
    auto request = protocol::DecodeBody<protocol::AbortRequest>(views[protocol::kFrameContent]);
    if (!request.ok()) return Drop(View(frames[0]), "abort_request: " + request.status().message());
    AbortOutcome outcome = core_.Abort(request->task_ids);
    DrainActions();
    protocol::AbortReply reply{outcome.aborted, outcome.running, outcome.finished, outcome.unknown};
    Frames out;
    out.push_back(std::move(frames[0]));
    builder_.Append(out, MsgType::kAbortReply, Share(frames[1 + protocol::kFrameHeader]),
                    protocol::Frame(protocol::EncodeBody(protocol::Empty{})),
                    protocol::Frame(protocol::EncodeBody(reply)));
    SendToClient(out);
  }

  void OnEngineMessage(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, 1, &views, &engine_guard_);
    const std::string_view peer = frames.empty() ? "" : View(frames[0]);
    if (!header.ok()) return Drop(peer, header.status());
    if (header->type == MsgType::kEngineReady) {
      auto ready = protocol::DecodeBody<protocol::EngineReady>(views[protocol::kFrameContent]);
      if (!ready.ok()) return Drop(peer, "engine_ready: " + ready.status().message());
      return OnEngineReady(std::string(peer), *ready);
    }
    if (header->type != MsgType::kTaskReply) {
      return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                            " on the engine socket");
    }
    OnTaskReply(frames);
  }

  // An engine's DEALER reached us: at its start, or again after its
  // connection broke (then it says which tasks it holds).
  void OnEngineReady(const std::string& uuid, const protocol::EngineReady& ready) {
    EngineEntry& entry = engines_[uuid];
    entry.ready = true;
    // After our restart, the engine's word links it to the tasks the hub
    // recorded on its id, before the hub's notice comes.
    if (!entry.registered && recovered_slots_.count(ready.engine_id)) {
      entry.id = ready.engine_id;
      entry.registered = true;
    }
    Activate(uuid, entry);
    // A fresh engine process (no list) holds nothing of what its id had.
    if (entry.slot != kNoSlot && recovering_slots_.count(entry.slot)) {
      Reconcile(entry.slot, ready.held.value_or(std::vector<TaskId>{}));
    }
    DrainActions();
  }

  // A restored engine says what it holds: tasks restored as running there
  // that it does not hold were lost with its old connection, and tasks it
  // holds that the restored state has waiting were dispatched there after
  // the hub's last record.
  void Reconcile(EngineSlot slot, const std::vector<TaskId>& held) {
    const std::unordered_set<TaskId, TaskIdHash> holds(held.begin(), held.end());
    for (const TaskId& id : core_.RunningOn(slot)) {
      if (!holds.count(id)) core_.AttemptLost(slot, id);
    }
    for (const TaskId& id : held) {
      if (core_.Knows(id)) core_.Adopt(slot, id, INT32_MAX);
    }
    recovering_slots_.erase(slot);
    core_.EngineAccepting(slot);
    spdlog::info("engine {} is back, holding {} tasks", uuid_of_slot_[slot].substr(0, 8),
                 held.size());
  }

  // `frames` is verified: the engine's routing id, then the reply.
  void OnTaskReply(Frames& frames) {
    const std::string_view peer = View(frames[0]);
    auto entry = engines_.find(std::string(peer));
    if (entry == engines_.end() || entry->second.slot == kNoSlot) {
      if (!recovered_slots_.empty() && early_replies_.size() < kMaxEarlyReplies) {
        // After a restart, an engine may answer before it is linked again.
        early_replies_.push_back(std::move(frames));
        return;
      }
      ++counters_.unknown_engines;
      return Drop(peer, "task_reply from an engine that is not registered");
    }
    const std::vector<std::string_view> views = protocol::Views(frames, 1);
    auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
    if (!parent.ok() || !*parent) return Drop(peer, "task_reply without a parent header");
    auto meta = protocol::DecodeBody<protocol::ReplyMeta>(views[protocol::kFrameMeta]);
    if (!meta.ok()) return Drop(peer, "task_reply metadata: " + meta.status().message());
    const EngineSlot slot = entry->second.slot;
    const TaskId& id = (*parent)->id;
    if (recovering_slots_.count(slot)) core_.Adopt(slot, id, meta->attempt);
    current_reply_ = &frames;
    // An engine sends its latest replies again when it reconnects: one of
    // an earlier attempt is late, like a reply from a lost engine.
    if ((meta->attempt > 0 && meta->attempt < core_.AttemptOf(id)) ||
        core_.TaskFinished(slot, id, meta->ok, meta->error_type) ==
            SchedulerCore::Finish::kLate) {
      ++counters_.late_replies;
      spdlog::debug("ignored a late reply for task {}", id.ToHex());
    }
    DrainActions();
    current_reply_ = nullptr;
  }

  // Replies kept while their engines were not linked yet.
  void ReplayEarlyReplies() {
    std::vector<Frames> early;
    early.swap(early_replies_);
    for (Frames& frames : early) OnTaskReply(frames);
  }

  void OnMonitorAck(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, 0, &views, nullptr);
    if (!header.ok()) return Drop("hub-monitor", header.status());
    if (header->type != MsgType::kMonitorAck) {
      return Drop("hub-monitor", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
    }
    auto ack = protocol::DecodeBody<protocol::MonitorAck>(views[protocol::kFrameContent]);
    if (!ack.ok()) return Drop("hub-monitor", "monitor_ack: " + ack.status().message());
    monitor_link_.Acknowledged(ack->seqs);
  }

  void OnNotifierMessage(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, 0, &views, nullptr);
    if (!header.ok()) return Drop("hub-notifier", header.status());
    if (header->type == MsgType::kEngineRegistered) {
      auto info = protocol::DecodeBody<protocol::EngineInfo>(views[protocol::kFrameContent]);
      if (!info.ok()) return Drop("hub-notifier", "engine_registered: " + info.status().message());
      EngineEntry& entry = engines_[info->uuid];
      if (entry.registered && entry.id == info->id) return;  // heard it already
      if (entry.slot != kNoSlot) {
        core_.EngineRemoved(entry.slot);
        entry.slot = kNoSlot;
      }
      entry.id = info->id;
      entry.registered = true;
      Activate(info->uuid, entry);
    } else if (header->type == MsgType::kEngineDraining) {
      auto ref = protocol::DecodeBody<protocol::EngineRef>(views[protocol::kFrameContent]);
      if (!ref.ok()) return Drop("hub-notifier", "engine_draining: " + ref.status().message());
      auto it = engines_.find(ref->uuid);
      if (it != engines_.end() && it->second.slot != kNoSlot) {
        spdlog::info("engine {} is draining", it->second.id);
        core_.EngineDraining(it->second.slot);
      }
    } else if (header->type == MsgType::kEngineUnregistered) {
      auto ref = protocol::DecodeBody<protocol::EngineRef>(views[protocol::kFrameContent]);
      if (!ref.ok()) return Drop("hub-notifier", "engine_unregistered: " + ref.status().message());
      auto it = engines_.find(ref->uuid);
      if (it == engines_.end()) return;
      if (it->second.slot != kNoSlot) {
        spdlog::info("engine {} is gone", it->second.id);
        core_.EngineRemoved(it->second.slot);
      }
      engines_.erase(it);
    } else {
      return Drop("hub-notifier", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
    }
    DrainActions();
  }

  // An engine takes tasks once the hub registered it and it reached us.
  void Activate(const std::string& uuid, EngineEntry& entry) {
    if (!entry.registered || entry.slot != kNoSlot) return;
    if (auto r = recovered_slots_.find(entry.id); r != recovered_slots_.end()) {
      // After our restart: the engine that holds the tasks restored on its id.
      entry.slot = r->second;
      recovered_slots_.erase(r);
      if (uuid_of_slot_.size() <= entry.slot) uuid_of_slot_.resize(entry.slot + 1);
      uuid_of_slot_[entry.slot] = uuid;
      spdlog::info("engine {} is linked to the tasks restored on it", entry.id);
      ReplayEarlyReplies();
      return;
    }
    if (!entry.ready) return;
    entry.slot = core_.EngineAdded(entry.id);
    if (uuid_of_slot_.size() <= entry.slot) uuid_of_slot_.resize(entry.slot + 1);
    uuid_of_slot_[entry.slot] = uuid;
    spdlog::info("engine {} can take tasks", entry.id);
  }

  // ---- actions ----------------------------------------------------------

  void DrainActions() {
    while (true) {
      core_.TakeActions(&actions_);
      if (actions_.empty()) return;
      std::vector<Action> batch;
      batch.swap(actions_);
      for (const Action& a : batch) Handle(a);
    }
  }

  void Handle(const Action& a) {
    if (a.kind == Action::Kind::kRetire) return Retire(a);
    auto it = pending_.find(a.task);
    if (it == pending_.end()) {
      spdlog::error("no request kept for task {}: a bug", a.task.ToHex());
      return;
    }
    Frames& request = it->second.frames;
    switch (a.kind) {
      case Action::Kind::kDispatch: return Dispatch(a, request);
      case Action::Kind::kDeliver:
        Deliver(a, request);
        Forget(it);
        return;
      case Action::Kind::kFail:
        FailTask(a, request);
        Forget(it);
        return;
      case Action::Kind::kRetry: return Retried(a, request);
      case Action::Kind::kRetire: return;  // handled above
    }
  }

  // A drained engine may go: tell it, and forget it (it unregisters).
  void Retire(const Action& a) {
    const std::string uuid = uuid_of_slot_[a.slot];
    const std::string_view prefix[] = {uuid};
    const protocol::Header header = builder_.NewHeader(MsgType::kEngineRetire);
    (void)protocol::SendEncoded(engine_, prefix,
                                protocol::EncodeMessage(signer_, header, std::nullopt,
                                                        protocol::Empty{},
                                                        protocol::EngineRef{a.engine_id, uuid}));
    spdlog::info("engine {} is drained and retires", a.engine_id);
  }

  void Dispatch(const Action& a, Frames& request) {
    Frames out;
    out.reserve(request.size() + 1);
    out.push_back(protocol::Frame(uuid_of_slot_[a.slot]));
    const protocol::DispatchInfo dispatch{a.attempt, static_cast<int32_t>(core_.live_engines())};
    out.push_back(protocol::Frame(protocol::EncodeBody(dispatch)));
    for (size_t i = 1; i < request.size(); ++i) out.push_back(Share(request[i]));
    protocol::Assignment assignment{a.engine_id, a.attempt};
    builder_.AddToBatch(MsgType::kTaskAssigned, Share(request[1 + protocol::kFrameHeader]),
                        protocol::Frame(protocol::EncodeBody(assignment)),
                        protocol::Frame(protocol::EncodeBody(protocol::Empty{})));
    SealIfFull();
    engines_out_.Send(out);
  }

  void Deliver(const Action& a, Frames& request) {
    Frames& reply = *current_reply_;
    MonitorOutcome(a, /*final=*/true, Share(reply[1 + protocol::kFrameParent]),
                   Share(reply[1 + protocol::kFrameContent]), &reply);
    Frames out;
    out.reserve(reply.size());
    out.push_back(Share(request[0]));
    for (size_t i = 1; i < reply.size(); ++i) out.push_back(std::move(reply[i]));
    SendToClient(out);
  }

  void FailTask(const Action& a, Frames& request) {
    protocol::ReplyMeta meta{false, a.error, std::nullopt, a.attempt};
    if (a.engine_id >= 0) meta.engine_id = a.engine_id;
    protocol::TaskResult result;
    result.error_message = a.message;
    const std::string content = protocol::EncodeBody(result);
    MonitorOutcome(a, /*final=*/true, Share(request[1 + protocol::kFrameHeader]),
                   protocol::Frame(content), nullptr);
    Frames out;
    out.push_back(Share(request[0]));
    builder_.Append(out, MsgType::kTaskReply, Share(request[1 + protocol::kFrameHeader]),
                    protocol::Frame(protocol::EncodeBody(meta)), protocol::Frame(content));
    SendToClient(out);
  }

  void Retried(const Action& a, Frames& request) {
    if (a.from_reply) {
      Frames& reply = *current_reply_;
      MonitorOutcome(a, /*final=*/false, Share(reply[1 + protocol::kFrameParent]),
                   Share(reply[1 + protocol::kFrameContent]), &reply);
      return;
    }
    protocol::TaskResult result;
    result.error_message = a.message;
    MonitorOutcome(a, /*final=*/false, Share(request[1 + protocol::kFrameHeader]),
                   protocol::Frame(protocol::EncodeBody(result)), nullptr);
  }

  // ---- building and sending ---------------------------------------------

  // A monitor message carrying a request's parts as they came.
  void MonitorCopy(MsgType type, Frames& request) {
    builder_.AddToBatch(type, Share(request[1 + protocol::kFrameHeader]),
                        Share(request[1 + protocol::kFrameMeta]),
                        Share(request[1 + protocol::kFrameContent]),
                        FrameBuilder::ShareFrom(request, 1 + protocol::kFirstBuffer));
    SealIfFull();
  }

  void MonitorOutcome(const Action& a, bool final, zmq::message_t parent, zmq::message_t content,
                      Frames* reply) {
    protocol::OutcomeMeta meta{final, a.error == ErrorType::kNone, a.error, std::nullopt,
                               a.attempt};
    if (a.engine_id >= 0) meta.engine_id = a.engine_id;
    builder_.AddToBatch(MsgType::kTaskOutcome, std::move(parent),
                        protocol::Frame(protocol::EncodeBody(meta)), std::move(content),
                        reply ? FrameBuilder::ShareFrom(*reply, 1 + protocol::kFirstBuffer)
                              : Frames{});
    SealIfFull();
  }

  void SendToClient(Frames& out) { clients_out_.Send(out); }

  // Monitor messages go to the hub in batches, one signature each: a batch
  // is sealed when it is full and at the end of every turn of the loop.
  static constexpr size_t kBatchMessages = 1024;
  static constexpr size_t kBatchBytes = size_t{8} << 20;

  void SealIfFull() {
    if (builder_.batched() >= kBatchMessages || builder_.batched_bytes() >= kBatchBytes) {
      monitor_link_.Seal();
    }
  }

  // ---- recovery after a restart ------------------------------------------

  // Sends the hub what an earlier scheduler recorded in the journal and the
  // hub never acknowledged, and waits until it has (before asking it what
  // was in flight, so that its answer is whole).
  void ReplayJournal() {
    std::vector<Frames> found = journal_->TakeFound();
    if (found.empty()) return;
    for (Frames& batch : found) monitor_link_.Adopt(std::move(batch));
    spdlog::info("sending the hub {} monitor batches an earlier scheduler left in its journal",
                 found.size());
    const int64_t deadline =
        SteadyClock::Now() + static_cast<int64_t>(options_.recover_timeout_s * 1e6);
    while (monitor_link_.unacknowledged() > 0 && SteadyClock::Now() < deadline && !stop_.load()) {
      monitor_link_.Flush(SteadyClock::Now());
      zmq::pollitem_t item{monitor_.handle(), 0, ZMQ_POLLIN, 0};
      (void)protocol::Poll(&item, 1, std::chrono::milliseconds(100));
      Drain(monitor_, &Impl::OnMonitorAck);
    }
    if (monitor_link_.unacknowledged() > 0) {
      spdlog::error("the hub did not acknowledge the journal's batches within {} s; they stay "
                    "queued", options_.recover_timeout_s);
    }
  }

  // Restores the tasks an earlier scheduler of this cluster left unfinished,
  // as the hub recorded them. Engines that ran them get slots that take no
  // new task until they are back and say what they hold (Reconcile); those
  // not back within the grace period are lost, with their tasks' attempts.
  void Recover() {
    auto state = FetchRecovery(context_, info_, signer_,
                               static_cast<int64_t>(options_.recover_timeout_s * 1000), stop_);
    if (!state.ok()) {
      spdlog::error("starting without the tasks of an earlier scheduler: {}",
                    state.status().message());
      return;
    }
    if (state->tasks.empty()) return;
    auto slot_for = [&](std::optional<int32_t> engine_id) {
      if (!engine_id) return kNoSlot;
      auto [it, added] = recovered_slots_.try_emplace(*engine_id, kNoSlot);
      if (added) {
        it->second = core_.EngineAdded(*engine_id, /*accepting=*/false);
        recovering_slots_.insert(it->second);
      }
      return it->second;
    };
    for (const auto& f : state->finished) {
      slot_for(f.engine_id);
      core_.RestoreFinished(f.id, f.ok, f.engine_id.value_or(-1));
    }
    for (const protocol::RecoveredTask* t : DependencyOrder(*state)) Restore(*t, slot_for);
    counters_.recovered = state->tasks.size();
    recovery_deadline_us_ =
        SteadyClock::Now() + static_cast<int64_t>(options_.recover_grace_s * 1e6);
    spdlog::info("restored {} unfinished tasks; {} engines had some and have {} s to come back",
                 state->tasks.size(), recovered_slots_.size(), options_.recover_grace_s);
    DrainActions();
  }

  template <class SlotFor>
  void Restore(const protocol::RecoveredTask& t, SlotFor&& slot_for) {
    // The request as the client sent it, signed again (the scheduler holds
    // the cluster's key): header, no parent, metadata, content, buffers.
    if (t.request.size() < 3) return;
    auto meta = protocol::DecodeBody<protocol::RoutingMeta>(t.request[1]);
    if (!meta.ok()) {
      spdlog::error("task {} has a recorded request that does not decode: {}", t.id.ToHex(),
                    meta.status().message());
      return;
    }
    Frames frames;
    frames.push_back(protocol::Frame(t.client));
    frames.push_back(protocol::Frame(protocol::kProtocolSignature));
    frames.emplace_back();
    frames.push_back(protocol::Frame(t.request[0]));
    frames.push_back(protocol::Frame(protocol::EncodeParent(std::nullopt)));
    for (size_t i = 1; i < t.request.size(); ++i) frames.push_back(protocol::Frame(t.request[i]));
    protocol::SignFrames(signer_, frames, 1);
    auto [it, inserted] = pending_.try_emplace(t.id);
    if (!inserted) return;
    it->second.frames = std::move(frames);
    ++queued_per_client_[t.client];
    Submission submission{t.id,           ToSet(meta->after), ToSet(meta->follow),
                          meta->targets,  meta->timeout_s,    meta->retries,
                          meta->priority};
    submission.attempts = t.attempts;
    if (t.state == "running") submission.running_on = slot_for(t.engine_id);
    if (!core_.Submit(submission)) Forget(it);
  }

  // Engines that held restored tasks and did not come back are lost.
  void EndRecoveryGrace() {
    if (recovered_slots_.empty() || SteadyClock::Now() < recovery_deadline_us_) return;
    for (const auto& [engine_id, slot] : recovered_slots_) {
      spdlog::warn("engine {} did not come back after the restart: its tasks are lost with it",
                   engine_id);
      recovering_slots_.erase(slot);
      core_.EngineRemoved(slot);
    }
    recovered_slots_.clear();
    if (!early_replies_.empty()) {
      counters_.unknown_engines += early_replies_.size();
      spdlog::warn("dropped {} replies from engines that never registered", early_replies_.size());
      early_replies_.clear();
    }
    DrainActions();
  }

  SchedulerOptions options_;
  std::filesystem::path profile_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  SteadyClock clock_;
  SchedulerCore core_;

  zmq::context_t context_{1};
  zmq::socket_t client_, engine_, notifier_, monitor_;
  std::unique_ptr<protocol::ServerSecurity> security_;  // after the sockets: stops first
  // Looked up by the routing id's bytes, without making a string per task.
  struct PeerHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, size_t, PeerHash, std::equal_to<>> queued_per_client_;
  std::string client_endpoint_, engine_endpoint_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};

  FrameBuilder builder_{signer_};
  MonitorLink monitor_link_{monitor_, builder_};
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<protocol::ReconnectWatch> monitor_watch_;
  Outbox clients_out_{client_}, engines_out_{engine_};
  // Recovery after a restart: engine id -> slot of engines holding restored
  // tasks and not linked to a connected engine yet; slots linked but not
  // back (no engine_ready yet); replies that came before their engine was
  // linked.
  std::unordered_map<int32_t, EngineSlot> recovered_slots_;
  std::unordered_set<EngineSlot> recovering_slots_;
  std::vector<Frames> early_replies_;
  int64_t recovery_deadline_us_ = 0;
  Frames frames_;
  Frames* current_reply_ = nullptr;
  std::vector<Action> actions_;
  std::unordered_map<TaskId, Pending, TaskIdHash> pending_;
  std::unordered_map<std::string, EngineEntry> engines_;
  std::vector<std::string> uuid_of_slot_;
  protocol::DropLog drops_{"taskscheduler"};
  protocol::ReplayGuard client_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      engine_guard_{protocol::ReplayWindowOf(options_.replay_window_s)};
  ServerCounters counters_;
};

Result<std::unique_ptr<SchedulerServer>> SchedulerServer::Create(const SchedulerOptions& options) {
  uint64_t seed = options.seed;
  if (seed == 0) seed = TaskId::Random().lo | 1;
  auto scheme = MakeScheme(options.scheme, seed);
  if (!scheme) {
    std::string names;
    for (const auto& n : SchemeNames()) names += (names.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("unknown scheme '" + options.scheme +
                                   "'; valid schemes: " + names);
  }
  const auto profile =
      options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  const auto path = protocol::ConnectionFilePath(profile);
  auto info = protocol::ReadConnectionFile(path);
  if (!info.ok()) return info.status();
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, options.insecure, path));
  auto impl = std::make_unique<Impl>(options, *info, std::move(scheme), profile);
  ZTASK_RETURN_IF_ERROR(impl->Start());
  const std::string client = impl->client_endpoint(), engine = impl->engine_endpoint();
  ZTASK_RETURN_IF_ERROR(protocol::UpdateConnectionFile(
      path, *info, [&](protocol::ConnectionInfo& c) { c.scheduler = {client, engine}; }));
  return std::unique_ptr<SchedulerServer>(new SchedulerServer(std::move(impl)));
}

SchedulerServer::SchedulerServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SchedulerServer::~SchedulerServer() = default;
void SchedulerServer::Run() { impl_->Run(); }
void SchedulerServer::RequestStop() { impl_->RequestStop(); }
const std::string& SchedulerServer::client_endpoint() const { return impl_->client_endpoint(); }
const std::string& SchedulerServer::engine_endpoint() const { return impl_->engine_endpoint(); }
ServerCounters SchedulerServer::counters() const { return impl_->counters(); }

}  // namespace ztask::scheduler
