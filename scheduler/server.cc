// The taskscheduler's loop (server.h): it owns the sockets and the core,
// wires each socket to the part that handles it, and ends every turn by
// sending what the turn decided. Each part is a file of its own:
//
//   client ROUTER   client_port.h     tasks and aborts in
//   engine ROUTER   engine_port.h     engines ready, replies in
//   notifier SUB    hub_notices.h     engines registered, draining, gone
//   monitor DEALER  hub_link.h        records out, acknowledgements and lookups in
//   (none)          action_applier.h  the core's actions, into the outboxes
//   (none)          restart_recovery.h  what an earlier scheduler left in flight
//
// It must not handle a message itself: a turn only dispatches.
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/connection_file.h"
#include "protocol/peer_routes.h"
#include "protocol/security.h"
#include "protocol/wire.h"
#include "scheduler/action_applier.h"
#include "scheduler/client_port.h"
#include "scheduler/core.h"
#include "scheduler/engine_directory.h"
#include "scheduler/engine_port.h"
#include "scheduler/frame_builder.h"
#include "scheduler/hub_link.h"
#include "scheduler/hub_notices.h"
#include "scheduler/inbound.h"
#include "scheduler/journal.h"
#include "scheduler/kept_requests.h"
#include "scheduler/outbox.h"
#include "scheduler/restart_recovery.h"
#include "scheduler/server.h"

namespace ztask::scheduler {
namespace {

using protocol::Frames;

}  // namespace

class SchedulerServer::Impl {
 public:
  Impl(const SchedulerOptions& options, protocol::ConnectionInfo info,
       std::unique_ptr<Scheme> scheme, std::filesystem::path profile)
      : options_(options),
        profile_(std::move(profile)),
        info_(std::move(info)),
        signer_(info_.key),
        core_(CoreOptions{.hwm = options.hwm,
                          .send_ahead = options.send_ahead,
                          .keep_finished = options.keep_finished,
                          .look_up_unknown =
                              !info_.hub.monitor.empty() || !options.hub_monitor.empty()},
              std::move(scheme), &clock_),
        client_(context_, zmq::socket_type::router),
        engine_(context_, zmq::socket_type::router),
        notifier_(HubContext(), zmq::socket_type::sub),
        monitor_(HubContext(), zmq::socket_type::dealer),
        stop_(options.stop != nullptr ? *options.stop : own_stop_) {}

  // Binds the routers and connects to the hub; then, after a restart, takes
  // over what an earlier scheduler left.
  Status Start();
  void Run();

  void RequestStop() {
    stop_.store(true);
    wake_.Wake();
  }

  const std::string& client_endpoint() const { return client_endpoint_; }
  const std::string& engine_endpoint() const { return engine_endpoint_; }
  ServerCounters counters() const {
    ServerCounters c = counters_;
    c.dropped = inbound_.drops().count();
    c.monitor_resent = hub_.link().resent();
    return c;
  }

 private:
  Status BindRouters();
  // Where a router asked to bind at `endpoint` binds (a Unix socket called
  // `name` in the profile, or `endpoint` itself).
  Result<std::string> BindsAt(const std::string& endpoint, const char* name) const;
  // The notifier and the monitor; the journal, and what it holds from an
  // earlier scheduler, with the monitor.
  Status ConnectHub();
  void OpenJournal();
  // The hub runs in this process (taskcontroller): its two sockets are
  // reached over inproc, in its context.
  bool in_process_hub() const { return options_.hub_context != nullptr; }
  zmq::context_t& HubContext() { return in_process_hub() ? *options_.hub_context : context_; }

  // What this turn decided leaves: first its record goes into the journal
  // (sealing the monitor batch), then the messages to engines and clients,
  // then the batch to the hub.
  void EndTurn();
  // Tasks a restart restored or took as running on an engine, of which the
  // hub has no record: noted and recorded as this scheduler's dispatches.
  void NoteTaken() {
    for (const RestartRecovery::Noted& n : recovery_.TakeNoted()) {
      hub_.RecordAssigned(n.id, n.slot, n.engine_id, n.attempt);
    }
  }
  // Tells the hub the scheduler's counts (scheme, queue depth, clients),
  // once a second, for dashboards and metrics.
  void SendStats(int64_t now_us);
  std::chrono::milliseconds PollTimeout() const;

  SchedulerOptions options_;
  std::filesystem::path profile_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  base::SystemClock clock_;
  SchedulerCore core_;

  // Waiting requests are kept: without it, 100,000 waiting no-ops held 9 KiB each.
  zmq::context_t context_{protocol::OwnBuffersContext()};  // before the sockets
  zmq::socket_t client_, engine_, notifier_, monitor_;
  std::unique_ptr<protocol::ServerSecurity> security_;  // after the sockets: stops first
  std::string client_endpoint_, engine_endpoint_;
  base::Wakeup wake_;  // RequestStop, from the signal thread
  std::atomic<bool> own_stop_{false};
  std::atomic<bool>& stop_;  // SchedulerOptions::stop, or own_stop_

  ServerCounters counters_;
  FrameBuilder builder_{signer_};
  Inbound inbound_{signer_, options_.limits};
  HubLink hub_{monitor_, builder_, signer_, inbound_, core_, counters_};
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<protocol::ReconnectWatch> monitor_watch_;
  static constexpr int64_t kStatsEveryUs = 1'000'000;
  int64_t next_stats_us_ = 0;  // 0: never (no hub)
  // Which connection speaks for each client session and engine uuid: only
  // one that delivered a verified message of it (peer_routes.h).
  protocol::PeerRoutes client_routes_, engine_routes_;
  Outbox clients_out_{client_, client_routes_, builder_},
      engines_out_{engine_, engine_routes_, builder_};
  KeptRequests requests_;
  EngineDirectory engines_;
  ActionApplier actions_{core_,    requests_, engines_,
                         hub_,     builder_,  signer_,
                         ActionTargets{clients_out_, engines_out_, engine_, engine_routes_}};
  RestartRecovery recovery_{core_, requests_, actions_, signer_, counters_};
  ClientPort clients_{inbound_,
                      core_,
                      requests_,
                      actions_,
                      hub_,
                      builder_,
                      clients_out_,
                      client_routes_,
                      protocol::ReplayWindowOf(options_.replay_window_s),
                      options_.task_limits,
                      counters_};
  EnginePort engine_port_{inbound_,      core_,
                          engines_,      recovery_,
                          actions_,      engine_routes_,
                          protocol::ReplayWindowOf(options_.replay_window_s),
                          counters_};
  HubNotices notices_{inbound_, core_, engines_, engine_port_, actions_};
  Frames frames_;  // each message received, in turn
};

Status SchedulerServer::Impl::Start() {
  if (!wake_.ok()) return Status::IoError("cannot make an eventfd");
  ZTASK_RETURN_IF_ERROR(BindRouters());
  ZTASK_RETURN_IF_ERROR(ConnectHub());
  if (!info_.hub.query.empty()) {
    const DispatchNotes dispatched = hub_.TakeFoundDispatches();
    const RecoverySource source{context_,
                                info_,
                                options_.recover_timeout_s,
                                options_.recover_grace_s,
                                journal_ && journal_->existed(),
                                dispatched};
    recovery_.Recover(source, stop_);
    // Noted again as this scheduler's; the notes of the earlier one are
    // released once these are written. Stopped while recovering, they stay.
    NoteTaken();
    if (!stop_.load()) hub_.link().dispatches().HandOver();
  }
  return Status::Ok();
}

// Any free port on loopback: every peer is on this host, and a Unix socket
// inside the profile directory (mode 0700) is cheaper than a TCP connection
// and closed to every other account of the host (docs/security.md). A port
// asked for by number, or --tcp (peers that dial through a tunnel), binds
// the port.
Result<std::string> SchedulerServer::Impl::BindsAt(const std::string& endpoint,
                                                   const char* name) const {
  constexpr std::string_view kTcp = "tcp://";
  if (options_.tcp || !endpoint.starts_with(kTcp) || !endpoint.ends_with(":*")) return endpoint;
  const std::string_view host =
      std::string_view(endpoint).substr(kTcp.size(), endpoint.size() - kTcp.size() - 2);
  if (!protocol::IsLoopback(host)) return endpoint;
  return protocol::LocalSocketEndpoint(profile_, name);
}

Status SchedulerServer::Impl::BindRouters() {
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
  if (!in_process_hub()) {
    protocol::SecureClient(notifier_, info_);
    protocol::SecureClient(monitor_, info_);
  }
  auto client_at = BindsAt(options_.client_endpoint, "scheduler-client.ipc");
  if (!client_at.ok()) return client_at.status();
  auto client = protocol::BindPreferring(client_, *client_at, info_.scheduler.client);
  if (!client.ok()) return client.status();
  auto engine_at = BindsAt(options_.engine_endpoint, "scheduler-engine.ipc");
  if (!engine_at.ok()) return engine_at.status();
  auto engine = protocol::BindPreferring(engine_, *engine_at, info_.scheduler.engine);
  if (!engine.ok()) return engine.status();
  client_endpoint_ = *client;
  engine_endpoint_ = *engine;
  return Status::Ok();
}

Status SchedulerServer::Impl::ConnectHub() {
  notifier_.set(zmq::sockopt::subscribe, "");
  const std::string& notifier = in_process_hub() ? options_.hub_notifier : info_.hub.notifier;
  const std::string& monitor = in_process_hub() ? options_.hub_monitor : info_.hub.monitor;
  if (!notifier.empty()) {
    ZTASK_RETURN_IF_ERROR(protocol::Connect(notifier_, notifier));
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
  if (monitor.empty()) return Status::Ok();
  ZTASK_RETURN_IF_ERROR(protocol::Connect(monitor_, monitor));
  hub_.link().set_enabled(true);
  hub_.set_record_running_after(base::DurationMicros(options_.record_running_after_s));
  next_stats_us_ = base::MonotonicMicros();
  // A hub in this process never restarts without the scheduler.
  if (!in_process_hub()) {
    monitor_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, monitor_);
  }
  OpenJournal();
  return Status::Ok();
}

namespace {

// Where the journal spills when its disk is full: this account's
// /dev/shm/ztask-UID (memory), named by the profile; made, and checked to
// be this account's alone, only when needed.
std::filesystem::path SpillDirectory(const std::filesystem::path& profile) {
  return std::filesystem::path("/dev/shm/ztask-" + std::to_string(::getuid())) /
         protocol::ProfileTag(profile);
}

}  // namespace

void SchedulerServer::Impl::OpenJournal() {
  const std::filesystem::path path = profile_ / "scheduler.journal";
  const bool power = options_.durability == "power";
  auto journal = Journal::Open(path, power, Journal::kSegmentBytes, SpillDirectory(profile_));
  if (!journal.ok()) {
    spdlog::error("{}: running without a journal, a crash may lose the latest records",
                  journal.status().message());
    return;
  }
  journal_ = std::move(*journal);
  hub_.link().set_journal(journal_.get());
  spdlog::info("journal {}: {}", path.string(),
               power ? "synced to disk once per turn (durability power)"
                     : "written to the kernel (durability process)");
  hub_.ReplayJournal(*journal_, options_.recover_timeout_s, stop_);
}

void SchedulerServer::Impl::Run() {
  base::Reactor reactor;
  // While the hub is far behind (or away), new tasks wait in the clients'
  // queues rather than here: what the hub has not acknowledged is kept in
  // memory until it does.
  reactor.Add(
      client_, [this] { return static_cast<short>(hub_.far_behind() ? 0 : ZMQ_POLLIN); },
      [this](short) {
        DrainSocket(client_, frames_, [this](Frames& f) { return clients_.OnMessage(f); });
      });
  reactor.Add(engine_, [this] {
    DrainSocket(engine_, frames_, [this](Frames& f) { return engine_port_.OnMessage(f); });
  });
  reactor.Add(notifier_, [this] {
    DrainSocket(notifier_, frames_, [this](Frames& f) { return notices_.OnMessage(f); });
  });
  reactor.Add(
      monitor_,
      [this] { return static_cast<short>(ZMQ_POLLIN | (hub_.link().blocked() ? ZMQ_POLLOUT : 0)); },
      [this](short ready) {
        if (!(ready & ZMQ_POLLIN)) return;
        DrainSocket(monitor_, frames_, [this](Frames& f) { return hub_.OnMessage(f); });
      });
  reactor.Add(wake_.fd(), [] {});  // RequestStop: stop_ is set
  while (!stop_.load()) {
    if (Status turned = reactor.Turn(PollTimeout()); !turned.ok()) {
      spdlog::error("{}", turned.message());
      return;
    }
    if (monitor_watch_ && monitor_watch_->Reconnected()) hub_.link().Reconnected();
    core_.Tick();
    if (recovery_.waiting()) {
      recovery_.AskEnginesIfDue(base::MonotonicMicros(), stop_);
      recovery_.EndGraceIfDue(base::MonotonicMicros());
    }
    NoteTaken();
    inbound_.drops().Report(base::MonotonicMicros());
    actions_.ApplyAll(ActionApplier::kNoReply);
    EndTurn();
  }
  EndTurn();
  spdlog::info("stopping: {} tasks live, {} dropped messages, {} late replies", core_.live_tasks(),
               inbound_.drops().count(), counters_.late_replies);
}

void SchedulerServer::Impl::EndTurn() {
  const int64_t now = base::MonotonicMicros();
  std::vector<std::string> gone;
  do {  // losing an engine may fail or move tasks: their messages go too
    hub_.RecordLongAssignments(now);
    // What this turn decided is in the journal before it leaves.
    hub_.link().Seal();
    hub_.link().WriteDispatches();
    for (const std::string& client : clients_out_.Flush()) {
      // Not connected (gone, or not back yet after a restart): the client
      // finds the outcome in the hub's record.
      ++counters_.undeliverable;
      spdlog::debug("could not reply to client {} (the hub keeps the record)",
                    protocol::PrintablePeer(client));
    }
    gone = engines_out_.Flush();
    for (const std::string& uuid : gone) engine_port_.Unreachable(uuid);
  } while (!gone.empty());
  hub_.link().Flush(base::MonotonicMicros());
  hub_.CoverDispatches();
  if (core_.lookups_pending() > 0) hub_.SendLookups(core_.TakeLookups(), base::MonotonicMicros());
  if (next_stats_us_ != 0 && base::MonotonicMicros() >= next_stats_us_) SendStats(base::MonotonicMicros());
  core_.EndTurn();
}

void SchedulerServer::Impl::SendStats(int64_t now_us) {
  next_stats_us_ = now_us + kStatsEveryUs;
  protocol::SchedulerStats stats;
  stats.scheme = options_.scheme;
  const bool learned = options_.hwm == kAdaptiveHwm;
  stats.hwm = learned ? -1 : static_cast<int32_t>(options_.hwm);
  if (learned) {
    stats.engine_hwms.emplace();
    for (const auto& [engine_id, slot] : core_.engines()) {
      if (stats.engine_hwms->size() == protocol::SchedulerStats::kMaxEngineHwms) break;
      stats.engine_hwms->push_back({engine_id, static_cast<int32_t>(core_.HwmOf(slot))});
    }
    std::sort(stats.engine_hwms->begin(), stats.engine_hwms->end(),
              [](const auto& a, const auto& b) { return a.engine_id < b.engine_id; });
  }
  stats.clients = static_cast<int64_t>(client_routes_.size());
  stats.ready = static_cast<int64_t>(core_.ready_tasks());
  stats.waiting = static_cast<int64_t>(core_.unassigned_tasks() - core_.ready_tasks());
  stats.running = static_cast<int64_t>(core_.live_tasks() - core_.unassigned_tasks());
  stats.engines = static_cast<int64_t>(core_.live_engines());
  stats.dropped = static_cast<int64_t>(inbound_.drops().count());
  hub_.SendStats(stats);
}

std::chrono::milliseconds SchedulerServer::Impl::PollTimeout() const {
  if (clients_out_.blocked() || engines_out_.blocked()) return std::chrono::milliseconds(5);
  const int64_t now = base::MonotonicMicros();
  std::optional<int64_t> next = core_.NextDeadline();
  auto no_later_than = [&next](std::optional<int64_t> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  no_later_than(hub_.link().NextSendUs());
  no_later_than(hub_.NextAssignmentUs());
  if (next_stats_us_ != 0) no_later_than(next_stats_us_);
  if (hub_.asking()) no_later_than(now + 100'000);  // sent again if unanswered
  // Unacknowledged monitor batches may need sending again; engines given
  // a grace may need their tasks back.
  if (hub_.link().unacknowledged() > 0 || recovery_.waiting()) no_later_than(now + 250'000);
  if (!next) return std::chrono::milliseconds(-1);
  const int64_t wait_us = *next - now;
  if (wait_us <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds((wait_us + 999) / 1000);
}

namespace {

// The scheme the options name, or an error naming those there are.
Result<std::unique_ptr<Scheme>> SchemeOf(const SchedulerOptions& options) {
  uint64_t seed = options.seed;
  if (seed == 0) seed = TaskId::Random().lo | 1;
  auto scheme = MakeScheme(options.scheme, seed);
  if (scheme) return scheme;
  std::string names;
  for (const auto& n : SchemeNames()) names += (names.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown scheme '" + options.scheme +
                                 "'; valid schemes: " + names);
}

}  // namespace

Result<std::unique_ptr<SchedulerServer>> SchedulerServer::Create(const SchedulerOptions& options) {
  auto scheme = SchemeOf(options);
  if (!scheme.ok()) return scheme.status();
  // The connection file: read (and refused without a key unless
  // --insecure) before anything binds, written with the endpoints after.
  const auto profile =
      options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  const auto path = protocol::ConnectionFilePath(profile);
  auto info = protocol::ReadConnectionFile(path);
  if (!info.ok()) return info.status();
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, options.insecure, path));
  auto impl = std::make_unique<Impl>(options, *info, std::move(*scheme), profile);
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
