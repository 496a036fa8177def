#include "hub/server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <tuple>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/reactor.h"
#include "hub/server_impl.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::hub {
namespace {

using base::MonotonicMicros;

// A monitor batch may carry 1,024 messages: a few a turn, so that queries
// and heartbeats are answered while the scheduler is busy.
constexpr size_t kMonitorBatchesPerTurn = 8;
constexpr int64_t kFlushEveryUs = 50'000;
// From this many engines on, their socket is read in batches: heartbeats
// (2,000 a second at 10,000 engines, HubCore::HeartbeatMs) then cost the
// hub a wake-up per batch, not one each, and are answered at most
// kPaceEngineReadsUs later, nothing against a period of seconds. Smaller
// pools are answered at once.
constexpr size_t kPaceEngineReadsFrom = 1000;
constexpr int64_t kPaceEngineReadsUs = 10'000;
// Retention deletes up to StoreOptions::drop_per_turn rows this often
// (20,000 every 200 ms: 100,000 rows a second, in transactions of a few
// milliseconds), and at every tick while a turn finds more past the bound
// than it may take: an intake faster than that is still held to it.
constexpr int64_t kRetainEveryUs = 200'000;
// Messages queued for one subscriber of the notifier or event stream (about
// 300 bytes each).
constexpr int kSubscriberHwm = 2000;

}  // namespace

// Where a socket binds. On loopback every peer is on this host, and a Unix
// socket inside the profile directory (mode 0700) is both cheaper than a
// TCP connection and closed to every other account of the host
// (docs/security.md), so each socket binds one there, unless --tcp asks for
// ports (peers that dial through a tunnel or a proxy). Those that publish
// to whoever connects (the notifier, the event stream) bind one even then:
// signing proves who sent a message, not who may read it, and any account
// could connect to a port. Beyond loopback, `any` (CurveZMQ, on there by
// default, lets in only the cluster's key).
Result<std::string> HubServer::Impl::BindsAt(const std::filesystem::path& profile, const char* name,
                                             bool published, const std::string& any) const {
  if (!protocol::IsLoopback(options_.ip) || (options_.tcp && !published)) return any;
  return protocol::LocalSocketEndpoint(profile, name);
}

Result<protocol::HubEndpoints> HubServer::Impl::Start(const std::filesystem::path& profile) {
  if (!wake_.ok()) return Status::IoError("cannot make an eventfd");
  auto security = protocol::ServerSecurity::Create(context_, info_, profile, "taskhub");
  if (!security.ok()) return security.status();
  security_ = std::move(*security);
  const std::string any = "tcp://" + options_.ip + ":*";
  protocol::HubEndpoints endpoints;
  for (auto [socket, out, name] :
       {std::tuple{&registration_, &endpoints.registration, "registration"},
        {&query_, &endpoints.query, "query"},
        {&monitor_, &endpoints.monitor, "monitor"},
        {&notifier_, &endpoints.notifier, "notifier"},
        {&events_, &endpoints.events, "events"}}) {
    socket->set(zmq::sockopt::linger, 1000);
    // Subscribers of the notifier and the event stream may be anyone
    // that reaches the port, and may never read: each may hold at most
    // kSubscriberHwm messages here, past which it misses events (and
    // sees the gap in their `seq`). The ROUTERs answer only what came.
    const bool broadcast = socket == &notifier_ || socket == &events_;
    socket->set(zmq::sockopt::sndhwm, broadcast ? kSubscriberHwm : 1000000);
    socket->set(zmq::sockopt::rcvhwm, 1000000);
    socket->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(limits_.max_message_bytes));
    ZTASK_RETURN_IF_ERROR(security_->Secure(*socket, name));
  }
  ZTASK_RETURN_IF_ERROR(security_->Start());
  // A hub that restarts binds where it was: engines, the scheduler and
  // clients reconnect on their own.
  const protocol::HubEndpoints& before = info_.hub;
  bool local = false;
  for (auto [socket, out, previous, name, published] :
       {std::tuple{&registration_, &endpoints.registration, &before.registration,
                   "hub-registration.ipc", false},
        {&query_, &endpoints.query, &before.query, "hub-query.ipc", false},
        {&monitor_, &endpoints.monitor, &before.monitor, "hub-monitor.ipc", false},
        {&notifier_, &endpoints.notifier, &before.notifier, "hub-notifier.ipc", true},
        {&events_, &endpoints.events, &before.events, "hub-events.ipc", true}}) {
    auto where = BindsAt(profile, name, published, any);
    if (!where.ok()) return where.status();
    if (*where != any && !local) {
      ZTASK_RETURN_IF_ERROR(protocol::MakePrivateDirectory(profile));
      local = true;
    }
    auto bound = protocol::BindPreferring(*socket, *where, *previous);
    if (!bound.ok()) return bound.status();
    *out = *bound;
  }
  for (auto [socket, endpoint] : {std::pair{&monitor_, &options_.in_process_monitor},
                                  {&notifier_, &options_.in_process_notifier}}) {
    if (endpoint->empty()) continue;
    try {
      socket->bind(*endpoint);
    } catch (const zmq::error_t& e) {
      return Status::Unavailable("cannot bind " + *endpoint + ": " + e.what());
    }
  }
  return endpoints;
}

void HubServer::Impl::Run() {
  base::Reactor reactor;
  reactor.Add(
      registration_,
      [this] { return MonotonicMicros() >= engine_reads_due_us_ ? short{ZMQ_POLLIN} : short{0}; },
      [this](short) {
        Drain(registration_, &Impl::OnEngineMessage);
        if (core_.registry().alive().size() >= kPaceEngineReadsFrom) {
          engine_reads_due_us_ = MonotonicMicros() + kPaceEngineReadsUs;
        }
      });
  // The records that came first: a question asked in the same turn is
  // answered with them (a client that has its reply, then asks about it).
  reactor.Add(monitor_, [this] { Drain(monitor_, &Impl::OnMonitor, kMonitorBatchesPerTurn); });
  reactor.Add(query_, [this] { Drain(query_, &Impl::OnQuery); });
  reactor.Add(events_, [this] { OnSubscriptions(); });
  reactor.Add(wake_.fd(), [] {});  // RequestStop: stop_ is set
  int64_t next_tick = 0;
  while (!stop_.load()) {
    const int64_t now = base::MonotonicMicros();
    const int64_t until = engine_reads_due_us_ > now ? std::min(next_tick, engine_reads_due_us_)
                                                     : next_tick;
    const auto wait = std::chrono::microseconds(std::max<int64_t>(0, until - now));
    if (Status turned = reactor.Turn(wait); !turned.ok()) {
      spdlog::error("{}", turned.message());
      break;
    }
    if (base::MonotonicMicros() >= next_tick) {
      Tick();
      drops_.Report(base::MonotonicMicros());
      next_tick = base::MonotonicMicros() + std::min<int64_t>(kFlushEveryUs, options_.heartbeat_ms * 1000);
    }
  }
  FlushStore();
  spdlog::info("stopping: {} records, {} dropped messages", store_->size(), drops_.count());
}

void HubServer::Impl::RequestStop() {
  stop_.store(true);
  wake_.Wake();
}

// The events socket is an XPUB: it hears when the first monitor subscribes
// and when the last one leaves, so that events are made only while someone
// listens (each costs an encoding and an HMAC).
void HubServer::Impl::OnSubscriptions() {
  zmq::message_t message;
  while (events_.recv(message, zmq::recv_flags::dontwait)) {
    if (message.size() == 0) continue;
    const bool subscribe = static_cast<const uint8_t*>(message.data())[0] == 1;
    listeners_ += subscribe ? 1 : -1;
    if (listeners_ < 0) listeners_ = 0;
  }
  core_.SetListening(listeners_ > 0);
}

void HubServer::Impl::Apply(const HubActions& actions, zmq::message_t* peer,
                            const protocol::Header* request) {
  if (peer && request) {
    if (actions.registration_reply) {
      Reply(registration_, *peer, MsgType::kRegistrationReply, *request,
            *actions.registration_reply);
    }
    if (actions.heartbeat) Reply(registration_, *peer, MsgType::kHeartbeat, *request, *actions.heartbeat);
  }
  for (const Notice& notice : actions.notices) {
    if (notice.type == MsgType::kEngineRegistered) {
      Publish(notifier_, notice.type, notice.info);
    } else {
      Publish(notifier_, notice.type, notice.ref);
    }
  }
  for (const protocol::Event& event : actions.events) {
    if (listeners_ > 0) Publish(events_, MsgType::kEvent, event);
  }
  for (const auto& [id, final] : actions.noted) Noted(id, final);
  for (const LogLine& line : actions.log) {
    switch (line.level) {
      case LogLine::Level::kInfo: spdlog::info("{}", line.text); break;
      case LogLine::Level::kWarning: spdlog::warn("{}", line.text); break;
      case LogLine::Level::kError: spdlog::error("{}", line.text); break;
    }
  }
}

void HubServer::Impl::OnEngineMessage(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = Open(frames, &views, registration_guard_, limits_);
  if (!header.ok()) return Drop(View(frames[0]), header.status());
  const std::string_view content = views[protocol::kFrameContent];
  actions_.Clear();
  switch (header->type) {
    case MsgType::kRegistrationRequest: {
      auto request = protocol::DecodeBody<protocol::RegistrationRequest>(content);
      if (!request.ok()) return Drop(View(frames[0]), request.status());
      core_.Register(*request, &actions_);
      break;
    }
    case MsgType::kHeartbeat: {
      auto beat = protocol::DecodeBody<protocol::HeartbeatBody>(content);
      if (!beat.ok()) return Drop(View(frames[0]), beat.status());
      core_.Heartbeat({beat->engine_id, std::move(beat->uuid)}, &actions_);
      break;
    }
    case MsgType::kUnregistration: {
      auto ref = protocol::DecodeBody<protocol::EngineRef>(content);
      if (!ref.ok()) return Drop(View(frames[0]), ref.status());
      core_.Unregister(*ref, &actions_);
      break;
    }
    default:
      return Drop(View(frames[0]),
                  "unexpected " + std::string(protocol::MsgTypeName(header->type)));
  }
  Apply(actions_, &frames[0], &*header);
}

void HubServer::Impl::Tick() {
  for (const ResultWaits::Wait& wait : waits_.Expired(base::MonotonicMicros())) AnswerWait(wait);
  // Heartbeats that wait in the socket count: a hub slowed down by its
  // other work must not expire engines that did beat.
  Drain(registration_, &Impl::OnEngineMessage);
  actions_.Clear();
  core_.Tick(&actions_);
  Apply(actions_);
  FlushStore(ReleaseHeldUntil(base::MonotonicMicros()));
  monitor_heard_ = false;
  Retain();
}

void HubServer::Impl::Retain() {
  const int64_t now = base::MonotonicMicros();
  if (!store_->retains() || now < next_retain_us_) return;
  next_retain_us_ = now + kRetainEveryUs;
  auto dropped = store_->DropFinished(base::WallMicros());
  if (!dropped.ok()) {
    if (!retain_failing_) spdlog::error("retention: {}", dropped.status().message());
    retain_failing_ = true;
    return;
  }
  if (retain_failing_) spdlog::info("retention: deleting finished records again");
  retain_failing_ = false;
  if (*dropped >= store_->drop_per_turn()) next_retain_us_ = now;  // behind: again next tick
  if (*dropped > 0) spdlog::debug("retention: {} finished records deleted", *dropped);
}

void HubServer::Impl::FlushStore(int64_t release_until_us) {
  Status s = store_->Flush(release_until_us);
  if (auto failed = store_->TakeCheckpointError()) {
    spdlog::warn("{} (its write-ahead log grows until one succeeds; trying again)", *failed);
  }
  if (s.ok()) SendAcks();
  actions_.Clear();
  core_.Flushed(s, &actions_);
  Apply(actions_);
}

Result<std::unique_ptr<HubServer>> HubServer::Create(const HubOptions& options) {
  const auto profile =
      options.profile_dir.empty() ? protocol::DefaultProfileDir() : options.profile_dir;
  const auto path = protocol::ConnectionFilePath(profile);
  protocol::ConnectionInfo initial;
  std::error_code ec;
  if (options.insecure) {
    initial.signature_scheme = protocol::kSchemeNone;
  } else {
    initial.key = protocol::GenerateKey();
  }
  const bool fresh = !std::filesystem::exists(path, ec);
  if (fresh && protocol::CurveWanted(options.ip, options.curve, options.no_encryption, "taskhub")) {
    ZTASK_RETURN_IF_ERROR(protocol::EnableCurve(profile, initial));
  }
  protocol::ConnectionInfo info = initial;
  if (!fresh) {
    auto read = protocol::ReadConnectionFile(path);
    if (!read.ok()) return read.status();
    info = *read;
  }
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(info, options.insecure, path));
  const std::string db = options.db.empty() ? (profile / "tasks.db").string() : options.db;
  if (options.db.empty()) ZTASK_RETURN_IF_ERROR(protocol::MakePrivateDirectory(profile));
  StoreOptions store_options;
  store_options.power = options.durability == "power";
  store_options.keep_finished = options.keep_finished;
  store_options.max_finished_records = options.max_finished_records;
  store_options.drop_finished_after_s = options.drop_finished_after_s;
  store_options.progress = [](size_t read) {
    spdlog::info("converting the task database to this version's layout: {} records so far",
                 read);
  };
  // A database that was there: this hub has an earlier life, whose engines
  // may still run (Impl::earlier_life_).
  std::error_code ignored;
  const bool earlier_life = db != ":memory:" && std::filesystem::exists(db, ignored);
  auto store = TaskStore::Open(db, std::move(store_options));
  if (!store.ok()) return store.status();
  auto impl = std::make_unique<Impl>(options, info, std::move(*store));
  impl->set_earlier_life(earlier_life);
  auto endpoints = impl->Start(profile);
  if (!endpoints.ok()) return endpoints.status();
  ZTASK_RETURN_IF_ERROR(protocol::UpdateConnectionFile(
      path, info, [&](protocol::ConnectionInfo& c) { c.hub = *endpoints; }));
  spdlog::info("hub ready: engines register at {}, clients query at {}, records in {} ({})",
               endpoints->registration, endpoints->query, db,
               impl->synchronous_level() == 2 ? "every commit synced to disk: durability power"
                                              : "durability process");
  return std::unique_ptr<HubServer>(new HubServer(std::move(impl)));
}

HubServer::HubServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HubServer::~HubServer() = default;
void HubServer::Run() { impl_->Run(); }
void HubServer::RequestStop() { impl_->RequestStop(); }
zmq::context_t& HubServer::context() { return impl_->context(); }

}  // namespace ztask::hub
