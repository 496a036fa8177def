#include <cassert>
#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "base/reactor.h"
#include "scheduler/server_impl.h"

namespace ztask::scheduler {
namespace {

using protocol::Frames;
using protocol::MsgType;
using protocol::Share;
using protocol::View;

}  // namespace

Status SchedulerServer::Impl::Start() {
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) return Status::IoError("cannot make a pipe");
  auto security = protocol::ServerSecurity::Create(context_, info_, profile_, "taskscheduler");
  if (!security.ok()) return security.status();
  security_ = std::move(*security);
  for (auto [s, name] : {std::pair{&client_, "client"}, {&engine_, "engine"}}) {
    s->set(zmq::sockopt::router_mandatory, 1);
    // No handover: peers do not choose routing ids, and a session moves to
    // a new connection only by a signed message on it (PeerRoutes).
    s->set(zmq::sockopt::sndhwm, options_.socket_hwm);
    s->set(zmq::sockopt::rcvhwm, options_.socket_hwm);
    s->set(zmq::sockopt::linger, 1000);
    s->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.limits.max_message_bytes));
    ZTASK_RETURN_IF_ERROR(security_->Secure(*s, name));
  }
  ZTASK_RETURN_IF_ERROR(security_->Start());
  protocol::SecureClient(notifier_, info_);
  protocol::SecureClient(monitor_, info_);
  auto client = protocol::BindPreferring(client_, options_.client_endpoint, info_.scheduler.client);
  if (!client.ok()) return client.status();
  auto engine = protocol::BindPreferring(engine_, options_.engine_endpoint, info_.scheduler.engine);
  if (!engine.ok()) return engine.status();
  client_endpoint_ = *client;
  engine_endpoint_ = *engine;
  notifier_.set(zmq::sockopt::subscribe, "");
  if (!info_.hub.notifier.empty()) {
    ZTASK_RETURN_IF_ERROR(protocol::Connect(notifier_, info_.hub.notifier));
  } else {
    spdlog::warn(
        "the connection file names no hub notifier: no engine will ever be "
        "known");
  }
  monitor_.set(zmq::sockopt::sndhwm, 1000000);
  monitor_.set(zmq::sockopt::linger, 2000);
  // Nothing is queued for a hub that is not there: the link keeps it
  // until one acknowledges it.
  monitor_.set(zmq::sockopt::immediate, 1);
  if (!info_.hub.monitor.empty()) {
    ZTASK_RETURN_IF_ERROR(protocol::Connect(monitor_, info_.hub.monitor));
    monitor_link_.set_enabled(true);
    next_stats_us_ = SteadyClock::Now();
    monitor_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, monitor_);
    auto journal =
        Journal::Open(profile_ / "scheduler.journal", options_.durability == "power");
    if (journal.ok()) {
      journal_ = std::move(*journal);
      monitor_link_.set_journal(journal_.get());
      spdlog::info("journal {}: {}", (profile_ / "scheduler.journal").string(),
                   options_.durability == "power" ? "synced to disk once per turn (durability power)"
                                                  : "written to the kernel (durability process)");
      ReplayJournal();
    } else {
      spdlog::error("{}: running without a journal, a crash may lose the latest records",
                    journal.status().message());
    }
  }
  if (!info_.hub.query.empty()) Recover();
  return Status::Ok();
}

void SchedulerServer::Impl::Run() {
  base::Reactor reactor;
  // While the hub is far behind (or away), new tasks wait in the clients'
  // queues rather than here: what the hub has not acknowledged is kept in
  // memory until it does.
  reactor.Add(
      client_,
      [this] {
        const bool hub_behind = monitor_link_.unacknowledged_bytes() > kMaxUnacknowledgedBytes;
        return static_cast<short>(hub_behind ? 0 : ZMQ_POLLIN);
      },
      [this](short) { Drain(client_, &Impl::OnClientMessage); });
  reactor.Add(engine_, [this] { Drain(engine_, &Impl::OnEngineMessage); });
  reactor.Add(notifier_, [this] { Drain(notifier_, &Impl::OnNotifierMessage); });
  reactor.Add(
      monitor_,
      [this] { return static_cast<short>(ZMQ_POLLIN | (monitor_link_.blocked() ? ZMQ_POLLOUT : 0)); },
      [this](short ready) {
        if (ready & ZMQ_POLLIN) Drain(monitor_, &Impl::OnMonitorReply);
      });
  reactor.Add(wake_[0], [] {});  // RequestStop: stop_ is set
  while (!stop_.load()) {
    if (Status turned = reactor.Turn(PollTimeout()); !turned.ok()) {
      spdlog::error("{}", turned.message());
      return;
    }
    if (monitor_watch_ && monitor_watch_->Reconnected()) monitor_link_.Reconnected();
    core_.Tick();
    EndRecoveryGrace();
    drops_.Report(SteadyClock::Now());
    DrainActions();
    EndTurn();
  }
  EndTurn();
  spdlog::info("stopping: {} tasks live, {} dropped messages, {} late replies", core_.live_tasks(),
               drops_.count(), counters_.late_replies);
}

// What this turn decided leaves: first its record goes into the journal
// (sealing the monitor batch), then the messages to engines and clients,
// then the batch to the hub.
void SchedulerServer::Impl::EndTurn() {
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
  if (core_.lookups_pending() > 0) SendLookups();
  if (next_stats_us_ != 0 && SteadyClock::Now() >= next_stats_us_) SendStats(SteadyClock::Now());
}

void SchedulerServer::Impl::SendStats(int64_t now_us) {
  next_stats_us_ = now_us + kStatsEveryUs;
  protocol::SchedulerStats stats;
  stats.scheme = options_.scheme;
  stats.hwm = static_cast<int32_t>(options_.hwm);
  stats.clients = static_cast<int64_t>(client_routes_.size());
  stats.ready = static_cast<int64_t>(core_.ready_tasks());
  stats.waiting = static_cast<int64_t>(core_.unassigned_tasks() - core_.ready_tasks());
  stats.running = static_cast<int64_t>(core_.live_tasks() - core_.unassigned_tasks());
  stats.engines = static_cast<int64_t>(core_.live_engines());
  stats.dropped = static_cast<int64_t>(drops_.count());
  const protocol::Header header{TaskId::Random(), MsgType::kSchedulerStats, lookup_session_,
                                base::WallMicros()};
  // The hub away: the next second's stats replace these.
  (void)protocol::SendEncoded(monitor_, {},
                              protocol::EncodeMessage(signer_, header, std::nullopt,
                                                      protocol::Empty{}, stats));
}

std::chrono::milliseconds SchedulerServer::Impl::PollTimeout() const {
  if (clients_out_.blocked() || engines_out_.blocked()) return std::chrono::milliseconds(5);
  const int64_t now = SteadyClock::Now();
  std::optional<int64_t> next = core_.NextDeadline();
  auto no_later_than = [&next](std::optional<int64_t> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  no_later_than(monitor_link_.NextSendUs());
  if (next_stats_us_ != 0) no_later_than(next_stats_us_);
  if (!lookups_asked_.empty()) no_later_than(now + 100'000);  // sent again if unanswered
  // Unacknowledged monitor batches may need sending again; engines given
  // a grace may need their tasks back.
  if (monitor_link_.unacknowledged() > 0 || !recovered_slots_.empty()) no_later_than(now + 250'000);
  if (!next) return std::chrono::milliseconds(-1);
  const int64_t wait_us = *next - now;
  if (wait_us <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds((wait_us + 999) / 1000);
}

void SchedulerServer::Impl::OnClientMessage(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = OpenFromPeer(frames, &views, &client_guard_, client_routes_);
  const std::string_view peer = frames.empty() ? "" : View(frames[0]);
  if (!header.ok()) return Drop(peer, header.status());
  switch (header->type) {
    case MsgType::kTaskRequest:
      return OnTaskRequest(*header, protocol::Views(frames));
    case MsgType::kTaskBatch:
      return ForEachInBatch(*header, views, frames, MsgType::kTaskRequest,
                            [&](const protocol::Header& task, Msg request) {
                              OnTaskRequest(task, request);
                            });
    case MsgType::kAbortRequest:
      return OnAbortRequest(views, frames);
    default:
      return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header->type)) +
                            " on the client socket");
  }
}

void SchedulerServer::Impl::OnTaskRequest(const protocol::Header& header, Msg msg) {
  ++tasks_seen_;
  const std::string_view peer = msg[0];
  auto meta = protocol::DecodeBody<protocol::RoutingMeta>(msg[1 + protocol::kFrameMeta]);
  if (!meta.ok()) return Drop(peer, "task_request metadata: " + meta.status().message());
  // Duplicates first: a task sent again is not a new task, and must not be
  // rejected for a limit it already counts towards.
  if (const Pending* known = pending_.find(header.id)) {
    // A client sends again what it has no reply for after it reconnects:
    // the task is here already, and its reply will come.
    if (known->request[0] == peer) {
      ++counters_.resubmitted;
      return;
    }
    ++counters_.duplicate_tasks;
    return Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
  }
  if (core_.HasFinished(header.id)) {
    // Finished here already (a client sending again what it had no reply
    // for finds its outcome in the hub).
    ++counters_.duplicate_tasks;
    return Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
  }
  if (std::string why = OverLimit(*meta, msg, peer); !why.empty()) {
    return Reject(header, msg, why);
  }
  auto pending = pending_.try_emplace(header.id).first;
  // Monitor first, so the hub hears of the task before of its outcome.
  MonitorCopy(MsgType::kTaskSubmitted, msg);
  pending->request = PackedRequest(msg);
  auto queued = queued_per_client_.find(peer);
  if (queued == queued_per_client_.end()) queued = queued_per_client_.emplace(peer, 0).first;
  ++queued->second;
  if (!core_.Submit(ToSubmission(header.id, *meta))) {
    // Finished here already (a client sending again what it had no reply
    // for finds its outcome in the hub).
    ++counters_.duplicate_tasks;
    Drop(peer, "task " + header.id.ToHex() + " was submitted twice");
    return Forget(header.id, *pending);
  }
  DrainActions();
}

// Why a task may not be taken (TaskLimits), or "".
std::string SchedulerServer::Impl::OverLimit(const protocol::RoutingMeta& meta, Msg msg,
                                             std::string_view client) {
  const TaskLimits& limits = options_.task_limits;
  size_t bytes = 0;
  for (size_t i = 1 + protocol::kFrameContent; i < msg.size(); ++i) bytes += msg[i].size();
  if (bytes > limits.max_task_bytes) {
    return "the task is " + std::to_string(bytes) + " bytes, over the limit of " +
           std::to_string(limits.max_task_bytes) + " (taskscheduler --max-task-bytes)";
  }
  if (std::string e = protocol::AmountsError(meta.slots, meta.resources, 0); !e.empty()) {
    return "the task asks for " + e;
  }
  const size_t deps = meta.after.ids.size() + meta.follow.ids.size();
  if (deps > limits.max_dependencies) {
    return "the task has " + std::to_string(deps) + " dependencies, over the limit of " +
           std::to_string(limits.max_dependencies) + " (taskscheduler --max-dependencies)";
  }
  auto queued = queued_per_client_.find(client);
  if (queued != queued_per_client_.end() && queued->second >= limits.max_queued_per_client) {
    return "this client has " + std::to_string(queued->second) +
           " tasks waiting or running, the limit (taskscheduler "
           "--max-queued-per-client); "
           "wait for some before submitting more";
  }
  return "";
}

// Fails a task at once, recorded in the hub like any other outcome.
void SchedulerServer::Impl::Reject(const protocol::Header& header, Msg msg,
                                   const std::string& why) {
  ++counters_.rejected;
  spdlog::warn("rejected task {} of client {}: {}", header.id.ToHex(),
               protocol::PrintablePeer(msg[0]), why);
  MonitorCopy(MsgType::kTaskSubmitted, msg);
  Action a{.kind = Action::Kind::kFail,
           .task = header.id,
           .error = ErrorType::kTaskRejected,
           .message = why};
  FailTask(a, PackedRequest(msg));
}

// The request of a task with its final outcome, and its client's count.
void SchedulerServer::Impl::Forget(const TaskId& id, const Pending& pending) {
  auto queued = queued_per_client_.find(pending.request[0]);
  if (queued != queued_per_client_.end() && --queued->second == 0) {
    queued_per_client_.erase(queued);
  }
  pending_.erase(id);
}

void SchedulerServer::Impl::OnAbortRequest(const std::vector<std::string_view>& views,
                                           Frames& frames) {
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

void SchedulerServer::Impl::DrainActions(Msg reply) {
  while (true) {
    core_.TakeActions(&actions_);
    if (actions_.empty()) return;
    std::vector<Action> batch;
    batch.swap(actions_);
    for (const Action& a : batch) Handle(a, reply);
  }
}

void SchedulerServer::Impl::Handle(const Action& a, Msg reply) {
  if (a.kind == Action::Kind::kRetire) return Retire(a);
  const Pending* pending = pending_.find(a.task);
  if (!pending) {
    spdlog::error("no request kept for task {}: a bug", a.task.ToHex());
    return;
  }
  const PackedRequest& request = pending->request;
  switch (a.kind) {
    case Action::Kind::kDispatch:
      return Dispatch(a, request);
    case Action::Kind::kDeliver:
      Deliver(a, request, reply);
      return Forget(a.task, *pending);
    case Action::Kind::kFail:
      FailTask(a, request);
      return Forget(a.task, *pending);
    case Action::Kind::kRetry:
      return Retried(a, request, reply);
    case Action::Kind::kReturned:
    case Action::Kind::kUnmet:
      return Returned(a, request);
    case Action::Kind::kRetire:
      return;  // handled above
  }
}

void SchedulerServer::Impl::Dispatch(const Action& a, const PackedRequest& request) {
  // The request as the client sent it, from its header on: the batch's
  // signature covers it.
  static const std::string kEmpty = protocol::EncodeBody(protocol::Empty{});
  protocol::DispatchInfo dispatch{a.attempt, static_cast<int32_t>(core_.live_engines())};
  if (!a.run_after.IsZero()) dispatch.run_after = a.run_after;
  builder_.AddToBatch(MsgType::kTaskAssigned, request[1 + protocol::kFrameHeader],
                      protocol::EncodeBody(protocol::Assignment{a.engine_id, a.attempt}), kEmpty);
  SealIfFull();
  engines_out_.Batch(uuid_of_slot_[a.slot], request.From(1 + protocol::kFrameHeader), &dispatch);
}

void SchedulerServer::Impl::Deliver(const Action& a, const PackedRequest& request, Msg reply) {
  assert(!reply.empty());  // only an engine's reply finishes a task well
  MonitorOutcome(a, /*final=*/true, reply[1 + protocol::kFrameParent],
                 reply[1 + protocol::kFrameContent], reply.subspan(1 + protocol::kFirstBuffer));
  ReplyToClient(request[0], reply.subspan(1 + protocol::kFrameHeader));
}

void SchedulerServer::Impl::FailTask(const Action& a, const PackedRequest& request) {
  protocol::ReplyMeta meta{false, a.error, std::nullopt, a.attempt};
  if (a.engine_id >= 0) meta.engine_id = a.engine_id;
  protocol::TaskResult result;
  result.error_message = a.message;
  const std::string content = protocol::EncodeBody(result);
  const std::string_view parent = request[1 + protocol::kFrameHeader];
  MonitorOutcome(a, /*final=*/true, parent, content);
  const std::string header = protocol::EncodeHeader(builder_.NewHeader(MsgType::kTaskReply));
  const std::string encoded_meta = protocol::EncodeBody(meta);
  const std::string_view out[] = {header, parent, encoded_meta, content};
  ReplyToClient(request[0], out);
}

void SchedulerServer::Impl::Retried(const Action& a, const PackedRequest& request, Msg reply) {
  if (a.from_reply) {
    assert(!reply.empty());
    MonitorOutcome(a, /*final=*/false, reply[1 + protocol::kFrameParent],
                   reply[1 + protocol::kFrameContent], reply.subspan(1 + protocol::kFirstBuffer));
    return;
  }
  protocol::TaskResult result;
  result.error_message = a.message;
  MonitorOutcome(a, /*final=*/false, request[1 + protocol::kFrameHeader],
                 protocol::EncodeBody(result));
}

// Sent ahead and not run: the hub records the task as waiting again.
void SchedulerServer::Impl::Returned(const Action& a, const PackedRequest& request) {
  protocol::TaskResult result;
  result.error_message =
      a.kind == Action::Kind::kUnmet
          ? "engine " + std::to_string(a.engine_id) + " cannot run it: " + a.message
          : "sent ahead to engine " + std::to_string(a.engine_id) +
                ", not run there: its dependency did not succeed there";
  MonitorOutcome(a, /*final=*/false, request[1 + protocol::kFrameHeader],
                 protocol::EncodeBody(result));
}

// A monitor message carrying a request's parts as they came.
void SchedulerServer::Impl::MonitorCopy(MsgType type, Msg request) {
  builder_.AddToBatch(type, request[1 + protocol::kFrameHeader], request[1 + protocol::kFrameMeta],
                      request[1 + protocol::kFrameContent],
                      request.subspan(1 + protocol::kFirstBuffer));
  SealIfFull();
}

void SchedulerServer::Impl::MonitorOutcome(const Action& a, bool final, std::string_view parent,
                                           std::string_view content, Msg buffers) {
  protocol::OutcomeMeta meta{final, a.error == ErrorType::kNone, a.error, std::nullopt, a.attempt};
  if (a.engine_id >= 0) meta.engine_id = a.engine_id;
  builder_.AddToBatch(MsgType::kTaskOutcome, parent, protocol::EncodeBody(meta), content, buffers);
  SealIfFull();
}

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
  ZTASK_RETURN_IF_ERROR(
      protocol::UpdateConnectionFile(path, *info, [&](protocol::ConnectionInfo& c) {
        c.scheduler = {client, engine};
      }));
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
