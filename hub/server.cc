#include "hub/server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <tuple>
#include <unordered_set>
#include <zmq.hpp>

#include "hub/activity.h"
#include "hub/registry.h"
#include "hub/result_waits.h"
#include "hub/store.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/replay_guard.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::hub {
namespace {

using protocol::Frames;
using protocol::MsgType;
using protocol::View;

using protocol::SteadyMicros;

constexpr size_t kBatch = 512;
// A monitor batch may carry 1,024 messages: a few a turn, so that queries
// and heartbeats are answered while the scheduler is busy.
constexpr size_t kMonitorBatchesPerTurn = 8;
constexpr int64_t kFlushEveryUs = 50'000;
// Messages queued for one subscriber of the notifier or event stream (about
// 300 bytes each).
constexpr int kSubscriberHwm = 2000;

}  // namespace

class HubServer::Impl {
 public:
  Impl(const HubOptions& options, protocol::ConnectionInfo info, std::unique_ptr<TaskStore> store)
      : options_(options),
        info_(std::move(info)),
        signer_(info_.key),
        store_(std::move(store)),
        registration_(context_, zmq::socket_type::router),
        query_(context_, zmq::socket_type::router),
        monitor_(context_, zmq::socket_type::router),
        notifier_(context_, zmq::socket_type::pub),
        events_(context_, zmq::socket_type::xpub),
        session_(TaskId::Random()) {}

  ~Impl() {
    for (int fd : wake_) {
      if (fd >= 0) ::close(fd);
    }
  }

  Result<protocol::HubEndpoints> Start(const std::filesystem::path& profile) {
    if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) return Status::IoError("cannot make a pipe");
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
    for (auto [socket, out, previous] :
         {std::tuple{&registration_, &endpoints.registration, &before.registration},
          {&query_, &endpoints.query, &before.query},
          {&monitor_, &endpoints.monitor, &before.monitor},
          {&notifier_, &endpoints.notifier, &before.notifier},
          {&events_, &endpoints.events, &before.events}}) {
      auto bound = protocol::BindPreferring(*socket, any, *previous);
      if (!bound.ok()) return bound.status();
      *out = *bound;
    }
    return endpoints;
  }

  int synchronous_level() const { return store_->synchronous_level(); }

  void Run() {
    int64_t next_tick = 0;
    while (!stop_.load()) {
      zmq::pollitem_t items[] = {
          {registration_.handle(), 0, ZMQ_POLLIN, 0}, {query_.handle(), 0, ZMQ_POLLIN, 0},
          {monitor_.handle(), 0, ZMQ_POLLIN, 0},      {events_.handle(), 0, ZMQ_POLLIN, 0},
          {nullptr, wake_[0], ZMQ_POLLIN, 0},
      };
      const int64_t now = SteadyMicros();
      const auto wait = std::chrono::milliseconds(std::max<int64_t>(0, (next_tick - now) / 1000));
      if (Status polled = protocol::Poll(items, std::size(items), wait); !polled.ok()) {
        spdlog::error("{}", polled.message());
        break;
      }
      if (items[0].revents & ZMQ_POLLIN) Drain(registration_, &Impl::OnEngineMessage);
      if (items[1].revents & ZMQ_POLLIN) Drain(query_, &Impl::OnQuery);
      if (items[2].revents & ZMQ_POLLIN) Drain(monitor_, &Impl::OnMonitor, kMonitorBatchesPerTurn);
      if (items[3].revents & ZMQ_POLLIN) OnSubscriptions();
      if (SteadyMicros() >= next_tick) {
        Tick();
        drops_.Report(SteadyMicros());
        next_tick = SteadyMicros() + std::min<int64_t>(kFlushEveryUs, options_.heartbeat_ms * 1000);
      }
    }
    FlushStore();
    spdlog::info("stopping: {} records, {} dropped messages", store_->size(), drops_.count());
  }

  void RequestStop() {
    stop_.store(true);
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);
  }

 private:
  void Drain(zmq::socket_t& socket, void (Impl::*handle)(Frames&), size_t most = kBatch) {
    protocol::Drain(socket, frames_, most, [&](Frames& f) { (this->*handle)(f); });
  }

  void Drop(std::string_view peer, const std::string& why) { drops_.Drop(peer, why); }
  void Drop(std::string_view peer, const Status& why) { drops_.Drop(peer, why); }

  // Verifies frames[1..] (after the routing id), decodes the header and
  // refuses a replay.
  Result<protocol::Header> Open(const Frames& frames, std::vector<std::string_view>* views,
                                protocol::ReplayGuard& guard, const protocol::Limits& limits) {
    if (frames.empty()) return Status::Malformed("no routing id");
    return protocol::OpenMessage(signer_, limits, frames, 1, &guard, views);
  }

  protocol::Header NewHeader(MsgType type) {
    return {TaskId{session_.hi, ++counter_}, type, "hub", protocol::NowMicros()};
  }

  template <class Content>
  void Reply(zmq::socket_t& socket, zmq::message_t& peer, MsgType type,
             const protocol::Header& request, const Content& content) {
    const std::string_view prefix[] = {View(peer)};
    (void)protocol::SendEncoded(
        socket, prefix,
        protocol::EncodeMessage(signer_, NewHeader(type), request, protocol::Empty{}, content));
  }

  template <class Content>
  void Publish(zmq::socket_t& socket, MsgType type, const Content& content) {
    (void)protocol::SendEncoded(socket, {},
                                protocol::EncodeMessage(signer_, NewHeader(type), std::nullopt,
                                                        protocol::Empty{}, content));
  }

  // The events socket is an XPUB: it hears when the first monitor subscribes
  // and when the last one leaves, so that events are made only while someone
  // listens (each costs an encoding and an HMAC).
  void OnSubscriptions() {
    zmq::message_t message;
    while (events_.recv(message, zmq::recv_flags::dontwait)) {
      if (message.size() == 0) continue;
      const bool subscribe = static_cast<const uint8_t*>(message.data())[0] == 1;
      listeners_ += subscribe ? 1 : -1;
      if (listeners_ < 0) listeners_ = 0;
    }
  }

  void Emit(protocol::Event event) {
    if (listeners_ == 0) return;
    event.at_us = protocol::NowMicros();
    event.seq = ++events_published_;
    Publish(events_, MsgType::kEvent, event);
  }

  // ---- engines ----------------------------------------------------------

  void OnEngineMessage(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, &views, registration_guard_, limits_);
    if (!header.ok()) return Drop(View(frames[0]), header.status());
    const std::string_view content = views[protocol::kFrameContent];
    switch (header->type) {
      case MsgType::kRegistrationRequest: {
        auto request = protocol::DecodeBody<protocol::RegistrationRequest>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        if (registry_.size() >= options_.max_engines && !registry_.UuidOfName(request->name)) {
          ++refused_registrations_;
          if (refused_registrations_ == 1 || refused_registrations_ % 1000 == 0) {
            spdlog::warn(
                "refused {} registrations: {} engines is the limit (taskhub "
                "--max-engines)",
                refused_registrations_, options_.max_engines);
          }
          return Reply(
              registration_, frames[0], MsgType::kRegistrationReply, *header,
              protocol::RegistrationReply{false, -1,
                                          "the hub has " + std::to_string(registry_.size()) +
                                              " engines, its limit (taskhub --max-engines)",
                                          0});
        }
        auto registered = registry_.Register(*request, SteadyMicros(), protocol::NowMicros());
        if (registered.replaced) EngineGone(*registered.replaced, "restarted");
        Reply(registration_, frames[0], MsgType::kRegistrationReply, *header,
              protocol::RegistrationReply{true, registered.id, "", options_.heartbeat_ms});
        const auto& info = registry_.alive().at(registered.id).info;
        Publish(notifier_, MsgType::kEngineRegistered, info);
        spdlog::info("engine {} registered: {} on {} (pid {})", info.id, info.name, info.host,
                     info.pid);
        protocol::Event event;
        event.kind = "engine_registered";
        event.engine_id = info.id;
        event.text = info.name;
        return Emit(std::move(event));
      }
      case MsgType::kHeartbeat: {
        auto ref = protocol::DecodeBody<protocol::EngineRef>(content);
        if (!ref.ok()) return Drop(View(frames[0]), ref.status());
        if (registry_.Touch(ref->uuid, SteadyMicros())) {
          return Reply(registration_, frames[0], MsgType::kHeartbeat, *header, *ref);
        }
        // Not (or no longer) registered: tell it to register again.
        return Reply(registration_, frames[0], MsgType::kRegistrationReply, *header,
                     protocol::RegistrationReply{false, -1, "not registered", 0});
      }
      case MsgType::kUnregistration: {
        auto ref = protocol::DecodeBody<protocol::EngineRef>(content);
        if (!ref.ok()) return Drop(View(frames[0]), ref.status());
        if (auto gone = registry_.Unregister(ref->uuid)) {
          EngineGone({gone->info.id, gone->info.uuid}, "unregistered");
        }
        return;
      }
      default:
        return Drop(View(frames[0]),
                    "unexpected " + std::string(protocol::MsgTypeName(header->type)));
    }
  }

  void EngineGone(const protocol::EngineRef& ref, const std::string& why) {
    spdlog::info("engine {} is gone: {}", ref.engine_id, why);
    activity_.EngineGone(ref.engine_id);
    Publish(notifier_, MsgType::kEngineUnregistered, ref);
    protocol::Event event;
    event.kind = "engine_unregistered";
    event.engine_id = ref.engine_id;
    event.text = why;
    Emit(std::move(event));
  }

  void Tick() {
    for (const ResultWaits::Wait& wait : waits_.Expired(SteadyMicros())) AnswerWait(wait);
    // Heartbeats that wait in the socket count: a hub slowed down by its
    // other work must not expire engines that did beat.
    Drain(registration_, &Impl::OnEngineMessage);
    const int64_t expiry = int64_t{options_.heartbeat_ms} * options_.heartbeat_misses * 1000;
    for (const auto& gone : registry_.Expire(SteadyMicros(), expiry)) {
      EngineGone({gone.info.id, gone.info.uuid}, "missed its heartbeats");
    }
    // Notices are idempotent: repeating them lets a scheduler that started
    // (or restarted) after an engine registered learn of it.
    if (SteadyMicros() >= next_announce_) {
      for (const auto& [id, record] : registry_.alive()) {
        Publish(notifier_, MsgType::kEngineRegistered, record.info);
      }
      // So are the draining ones: a scheduler that missed the notice (it
      // was restarting, or had not linked the engine yet) still retires it.
      for (const protocol::EngineInfo& e : registry_.Listing()) {
        if (e.state == EngineState::kDraining && !e.uuid.empty()) {
          Publish(notifier_, MsgType::kEngineDraining, protocol::EngineRef{e.id, e.uuid});
        }
      }
      next_announce_ = SteadyMicros() + int64_t{options_.heartbeat_ms} * 1000;
    }
    FlushStore();
  }

  void FlushStore() {
    Status s = store_->Flush();
    if (s.ok()) SendAcks();
    if (!s.ok() && !flush_failing_) {
      spdlog::error(
          "{} (records stay in memory, and are not durable until a write "
          "succeeds; retrying)",
          s.message());
      protocol::Event event;
      event.kind = "store_error";
      event.text = s.message();
      Emit(std::move(event));
    }
    if (s.ok() && flush_failing_) spdlog::info("the task database is written again");
    flush_failing_ = !s.ok();
  }

  // ---- the scheduler's monitor -------------------------------------------

  void OnMonitor(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, &views, monitor_guard_, limits_);
    if (!header.ok()) return Drop(View(frames[0]), header.status());
    const std::string_view peer = View(frames[0]);
    if (header->type == MsgType::kResultRequest) {
      // The scheduler asks for the outcomes of dependencies it let go of:
      // after every batch it sent before, on the same connection.
      auto request = protocol::DecodeBody<protocol::TaskIdList>(views[protocol::kFrameContent]);
      if (!request.ok()) return Drop(peer, request.status());
      return Reply(monitor_, frames[0], MsgType::kResultReply, *header, Records(*request, true));
    }
    if (header->type == MsgType::kSchedulerStats) {
      auto stats = protocol::DecodeBody<protocol::SchedulerStats>(views[protocol::kFrameContent]);
      if (!stats.ok()) return Drop(peer, stats.status());
      return activity_.Scheduler(*stats, SteadyMicros());
    }
    if (header->type != MsgType::kMonitorBatch) return OnMonitorMessage(peer, *header, views);
    auto meta = protocol::DecodeBody<protocol::BatchMeta>(views[protocol::kFrameMeta]);
    if (!meta.ok()) return Drop(peer, "monitor_batch metadata: " + meta.status().message());
    auto messages = protocol::UnpackBatch(views);
    if (!messages.ok()) return Drop(peer, messages.status());
    for (const auto& message : *messages) {
      auto inner = protocol::DecodeHeader(message[protocol::kFrameHeader]);
      if (!inner.ok()) {
        Drop(peer, inner.status());
        continue;
      }
      OnMonitorMessage(peer, *inner, message);
    }
    if (meta->seq) NoteAck(peer, *meta->seq);
  }

  // Acknowledgements wait until the records they cover are in the database
  // (SendAcks after a flush), so the scheduler keeps every batch a crash of
  // the hub could lose.
  void NoteAck(std::string_view peer, int64_t seq) {
    acks_[std::string(peer)].push_back(seq);
    // Nothing more to wait for without a database. One that cannot be
    // written (disk full) gets no acknowledgement: the scheduler keeps the
    // batches (and slows down once it holds too many) until a write
    // succeeds, here or in the next hub.
    if (!store_->durable()) SendAcks();
  }

  void SendAcks() {
    for (auto& [peer, seqs] : acks_) {
      const std::string_view prefix[] = {peer};
      (void)protocol::SendEncoded(
          monitor_, prefix,
          protocol::EncodeMessage(signer_, NewHeader(MsgType::kMonitorAck), std::nullopt,
                                  protocol::Empty{}, protocol::MonitorAck{std::move(seqs)}));
    }
    acks_.clear();
  }

  // Answers the waits that have what they asked for now.
  void Noted(const TaskId& id, bool final) {
    if (waits_.size() == 0) return;
    for (const ResultWaits::Wait& wait : waits_.Noted(id, final)) AnswerWait(wait);
  }

  // One task_submitted, task_assigned or task_outcome, alone or from a batch.
  void OnMonitorMessage(std::string_view peer, const protocol::Header& header,
                        const std::vector<std::string_view>& views) {
    auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
    if (!parent.ok() || !*parent) return Drop(peer, "monitor message without parent");
    const TaskId id = (*parent)->id;
    protocol::Event event;
    event.task_id = id;
    switch (header.type) {
      case MsgType::kTaskSubmitted: {
        // A task whose body cannot be read is recorded all the same (its
        // engine will answer BadTask): every task accepted has a record.
        auto meta = protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]);
        auto spec = protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]);
        if (!meta.ok() || !spec.ok()) {
          spdlog::warn("task {}: its {} cannot be read ({}): recorded without it", id.ToHex(),
                       meta.ok() ? "body" : "metadata",
                       (meta.ok() ? spec.status() : meta.status()).message());
        }
        std::vector<std::string> request;
        for (size_t i = protocol::kFrameParent; i < views.size(); ++i) {
          request.emplace_back(views[i]);
        }
        const protocol::TaskSpec& taken = spec.ok() ? *spec : protocol::TaskSpec{};
        if (!store_->Submitted(**parent, meta.ok() ? *meta : protocol::RoutingMeta{}, taken,
                               std::move(request))) {
          return;
        }
        Noted(id, false);
        activity_.Submitted(taken.label);
        event.kind = "task_submitted";
        event.text = taken.label;
        break;
      }
      case MsgType::kTaskAssigned: {
        auto a = protocol::DecodeBody<protocol::Assignment>(views[protocol::kFrameMeta]);
        if (!a.ok()) return Drop(peer, "bad task_assigned");
        if (!store_->Assigned(id, *a)) return;
        Noted(id, false);
        activity_.Assigned(a->engine_id, id);
        event.kind = "task_assigned";
        event.engine_id = a->engine_id;
        event.attempt = a->attempt;
        break;
      }
      case MsgType::kTaskOutcome: {
        auto meta = protocol::DecodeBody<protocol::OutcomeMeta>(views[protocol::kFrameMeta]);
        auto result = protocol::DecodeBody<protocol::TaskResult>(views[protocol::kFrameContent]);
        if (!meta.ok()) return Drop(peer, "task_outcome metadata: " + meta.status().message());
        if (!result.ok()) {
          // An outcome is never lost for its body: what cannot be read is
          // recorded as the task's error.
          const std::string why = result.status().message();
          spdlog::warn("task {}: its result cannot be read ({}): recorded as BadTask", id.ToHex(),
                       why);
          meta->ok = false;
          meta->error_type = ErrorType::kBadTask;
          result = protocol::TaskResult{};
          result->error_message = "the hub cannot read its result: " + why;
        }
        if (!store_->Outcome(id, *meta, *result, protocol::NowMicros())) return;
        Noted(id, meta->final);
        if (!meta->final) {
          activity_.Requeued(meta->engine_id, id, !meta->ok);
        } else {
          protocol::TaskRecord scratch;
          if (const auto* r = store_->Find(id, &scratch)) activity_.Finished(*r);
        }
        // Not final and not failed: sent ahead and not run, waiting again.
        event.kind = meta->final ? "task_finished" : meta->ok ? "task_returned" : "task_retried";
        event.engine_id = meta->engine_id;
        event.attempt = meta->attempt;
        event.status = meta->ok ? "ok" : "error";
        event.error_type = meta->error_type;
        event.text = result->error_message;
        break;
      }
      default:
        return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header.type)));
    }
    Emit(std::move(event));
  }

  // ---- client queries -----------------------------------------------------

  // A result_request with `wait`: answered now when every task is there,
  // else held (ResultWaits) until they are or its time is up.
  void AnswerWhen(std::string_view route, const protocol::Header& header,
                  protocol::TaskIdList request) {
    const auto until = ResultWaits::Parse(*request.wait);
    if (!until) return Drop(route, "result_request: wait is '" + *request.wait + "'");
    std::vector<TaskId> pending;
    protocol::TaskRecord scratch;
    for (const TaskId& id : request.task_ids) {
      const protocol::TaskRecord* r = store_->Find(id, &scratch);
      const bool there = r && (*until == ResultWaits::Until::kRecorded || IsFinal(r->state));
      if (!there) pending.push_back(id);
    }
    const int64_t wait_us =
        std::clamp<int64_t>(int64_t{request.wait_ms.value_or(0)} * 1000, 0, ResultWaits::kMaxWaitUs);
    if (!pending.empty() && wait_us > 0) {
      ResultWaits::Wait wait{std::string(route), header, request, *until,
                             SteadyMicros() + wait_us};
      if (waits_.Park(std::move(wait), pending)) return;
    }
    AnswerWait({std::string(route), header, std::move(request)});
  }

  void AnswerWait(const ResultWaits::Wait& wait) {
    const std::string_view prefix[] = {wait.route};
    (void)protocol::SendEncoded(
        query_, prefix,
        protocol::EncodeMessage(signer_, NewHeader(MsgType::kResultReply), wait.header,
                                protocol::Empty{}, Records(wait.request, false)));
  }

  void OnQuery(Frames& frames) {
    std::vector<std::string_view> views;
    auto header = Open(frames, &views, query_guard_, limits_);
    if (!header.ok()) return Drop(View(frames[0]), header.status());
    const std::string_view content = views[protocol::kFrameContent];
    switch (header->type) {
      case MsgType::kResultRequest: {
        auto request = protocol::DecodeBody<protocol::TaskIdList>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        if (request->wait && !request->task_ids.empty()) {
          return AnswerWhen(View(frames[0]), *header, std::move(*request));
        }
        return Reply(query_, frames[0], MsgType::kResultReply, *header, Records(*request, false));
      }
      case MsgType::kRecoverRequest: {
        auto request = protocol::DecodeBody<protocol::RecoverRequest>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        // What a scheduler that died had sent must be applied first (into
        // frames of its own: the query's are in use).
        Frames monitor_frames;
        protocol::Drain(monitor_, monitor_frames, SIZE_MAX, [&](Frames& f) { OnMonitor(f); });
        return Reply(query_, frames[0], MsgType::kRecoverReply, *header, Recover(*request));
      }
      case MsgType::kStatsRequest: {
        auto request = protocol::DecodeBody<protocol::StatsRequest>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        return Reply(query_, frames[0], MsgType::kStatsReply, *header, Stats(*request));
      }
      case MsgType::kJobsRequest: {
        auto request = protocol::DecodeBody<protocol::JobsRequest>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        if (request->command != "list" && request->command != "new") {
          return Drop(View(frames[0]), "a jobs_request of unknown command");
        }
        return Reply(query_, frames[0], MsgType::kJobsReply, *header, Jobs(*request));
      }
      case MsgType::kQueueRequest:
        return Reply(query_, frames[0], MsgType::kQueueReply, *header, QueueStatus());
      case MsgType::kEnginesRequest:
        return Reply(query_, frames[0], MsgType::kEnginesReply, *header,
                     protocol::EnginesReply{registry_.Listing()});
      case MsgType::kEngineState: {
        auto state = protocol::DecodeBody<protocol::EngineStateReport>(content);
        if (!state.ok()) return Drop(View(frames[0]), state.status());
        registry_.SetSupervised(*state);
        spdlog::info("engine {} is {}: {}", state->name, EngineStateName(state->state), state->text);
        // Draining: the scheduler stops giving it tasks, and retires it when
        // it has none left.
        if (state->state == EngineState::kDraining) {
          if (auto uuid = registry_.UuidOfName(state->name)) {
            Publish(notifier_, MsgType::kEngineDraining,
                    protocol::EngineRef{registry_.IdOfName(state->name), *uuid});
          }
        }
        // Its supervisor saw the process end: no need to wait for missed
        // heartbeats before its tasks go elsewhere.
        if (state->state == EngineState::kRestarting || state->state == EngineState::kFailed) {
          if (auto uuid = registry_.UuidOfName(state->name)) {
            if (auto gone = registry_.Unregister(*uuid)) {
              EngineGone({gone->info.id, gone->info.uuid}, "its supervisor saw it exit");
            }
          }
        }
        protocol::Event event;
        event.kind = "engine_state";
        event.status = EngineStateName(state->state);
        event.text = state->name + ": " + state->text;
        Emit(std::move(event));
        return Reply(query_, frames[0], MsgType::kEngineStateReply, *header,
                     protocol::Acknowledgement{});
      }
      case MsgType::kPurgeRequest: {
        auto request = protocol::DecodeBody<protocol::PurgeRequest>(content);
        if (!request.ok()) return Drop(View(frames[0]), request.status());
        const auto count = static_cast<int64_t>(store_->Purge(request->task_ids, request->all));
        return Reply(query_, frames[0], MsgType::kPurgeReply, *header, protocol::Count{count});
      }
      case MsgType::kShutdownRequest:
        spdlog::info("shutdown requested");
        Reply(query_, frames[0], MsgType::kShutdownReply, *header, protocol::Acknowledgement{});
        return RequestStop();
      default:
        return Drop(View(frames[0]),
                    "unexpected " + std::string(protocol::MsgTypeName(header->type)));
    }
  }

  // One page of the unfinished tasks, in id order, with the outcomes of the
  // finished tasks they depend on. Pages keep each reply within the codec's
  // limits whatever the history's length. (Other outcomes the scheduler
  // looks up when a task names them: finished_only is not answered.)
  protocol::RecoverReply Recover(const protocol::RecoverRequest& request) const {
    constexpr size_t kPageBytes = size_t{8} << 20;
    std::vector<TaskId> ids;
    store_->ForEachRecord([&](const TaskId& id, const protocol::TaskRecord& r) {
      if (IsFinal(r.state)) return;
      if (request.after && !(*request.after < id)) return;
      ids.push_back(id);
    });
    std::sort(ids.begin(), ids.end());
    protocol::RecoverReply reply;
    std::unordered_set<TaskId, TaskIdHash> named;
    size_t bytes = 0;
    const size_t limit = request.limit > 0 ? static_cast<size_t>(request.limit) : 1000;
    size_t taken = 0;
    for (; taken < ids.size() && reply.tasks.size() < limit && bytes < kPageBytes; ++taken) {
      protocol::TaskRecord scratch;  // unfinished records are all in memory
      const protocol::TaskRecord& r = *store_->Find(ids[taken], &scratch);
      const auto* frames = store_->RequestOf(r.id);
      if (!frames) {
        spdlog::warn("task {} has no recorded request: a restarted scheduler cannot queue it",
                     r.id.ToHex());
        continue;
      }
      for (const auto* deps : {&r.routing.after.ids, &r.routing.follow.ids}) {
        for (const TaskId& dep : *deps) {
          protocol::TaskRecord scratch;
          const auto* d = store_->Find(dep, &scratch);
          if (!d || !IsFinal(d->state) || !named.insert(dep).second) continue;
          reply.finished.push_back({dep, d->state == TaskState::kOk, d->engine_id});
        }
      }
      for (const auto& f : *frames) bytes += f.size();
      reply.tasks.push_back({r.id, r.client, r.state, r.engine_id, r.attempts, *frames});
    }
    reply.done = taken == ids.size();
    return reply;
  }

  // The records of the listed tasks (and which are unknown); with no list,
  // one page of every record in id order after request.after: at most
  // request.limit (and kMaxPage), and no more than about kPageBytes of them.
  // `lean`: without outputs and results (the scheduler needs outcomes only).
  protocol::ResultReply Records(const protocol::TaskIdList& request, bool lean) const {
    constexpr size_t kMaxPage = 100000;
    constexpr size_t kPageBytes = size_t{16} << 20;
    protocol::ResultReply reply;
    const auto add = [&](const protocol::TaskRecord& r) {
      reply.records.push_back(r);
      if (!lean) return;
      protocol::TaskRecord& kept = reply.records.back();
      kept.result = {};
      kept.stdout_text.clear();
      kept.stderr_text.clear();
      kept.error_message.clear();
      kept.spec.reset();
    };
    protocol::TaskRecord scratch;
    if (!request.task_ids.empty()) {
      for (const TaskId& id : request.task_ids) {
        if (const auto* r = store_->Find(id, &scratch)) {
          add(*r);
        } else {
          reply.unknown.push_back(id);
        }
      }
      return reply;
    }
    const size_t limit = std::min<size_t>(std::max<int32_t>(1, request.limit.value_or(kMaxPage)),
                                          kMaxPage);
    // One more than the page, to know whether there is more.
    const std::vector<TaskId> ids = store_->IdsAfter(request.after, limit + 1, request.job);
    size_t bytes = 0, taken = 0;
    for (; taken < std::min(limit, ids.size()) && (taken == 0 || bytes < kPageBytes); ++taken) {
      const protocol::TaskRecord* r = store_->Find(ids[taken], &scratch);
      if (!r) continue;  // gone since (purged)
      if (request.status && !InStatus(*r, *request.status)) continue;
      bytes += 256 + r->label.size() + r->error_message.size() + r->stdout_text.size() +
               r->stderr_text.size() + r->result.bytes.size() +
               (r->spec ? r->spec->args.bytes.size() + 64 * r->spec->argv.size() : 0);
      add(*r);
    }
    reply.more = taken < ids.size();
    if (taken > 0 && *reply.more) reply.next = ids[taken - 1];
    return reply;
  }

  // A record in a status of a listing: waiting, running, ok, or failed (an
  // error not replaced by a resubmission).
  static bool InStatus(const protocol::TaskRecord& r, std::string_view status) {
    if (status == "failed") return r.state == TaskState::kError && !r.replaced_by;
    if (status == "waiting") return r.state == TaskState::kWaiting || r.state == TaskState::kNone;
    return TaskStateName(r.state) == status;
  }

  protocol::JobsReply Jobs(const protocol::JobsRequest& request) {
    constexpr size_t kMaxPage = 10000;
    protocol::JobsReply reply;
    if (request.command == "new") {
      reply.name = store_->NewJobName();
      return reply;
    }
    const auto& jobs = store_->jobs();
    const auto present = [](const protocol::JobSummary& j) {
      return j.waiting + j.running + j.ok + j.failed + j.replaced > 0;
    };
    if (request.name) {
      if (auto it = jobs.find(*request.name); it != jobs.end() && present(it->second)) {
        reply.jobs.push_back(it->second);
      }
      return reply;
    }
    const size_t limit =
        std::min<size_t>(std::max<int32_t>(1, request.limit.value_or(kMaxPage)), kMaxPage);
    auto it = request.after ? jobs.upper_bound(*request.after) : jobs.begin();
    for (; it != jobs.end() && reply.jobs.size() < limit; ++it) {
      if (present(it->second)) reply.jobs.push_back(it->second);
    }
    reply.more = it != jobs.end();
    return reply;
  }

  protocol::StatsReply Stats(const protocol::StatsRequest& request) const {
    protocol::StatsReply reply;
    reply.now_us = protocol::NowMicros();
    reply.waiting = store_->waiting();
    reply.running = store_->running();
    reply.ok = store_->ok();
    reply.failed = store_->failed();
    reply.dropped = static_cast<int64_t>(drops_.count());
    activity_.Fill(request, SteadyMicros(), &reply);
    return reply;
  }

  protocol::QueueReply QueueStatus() const {
    std::map<int32_t, protocol::EngineQueue> by_engine;
    for (const auto& [id, record] : registry_.alive()) by_engine[id].engine_id = id;
    protocol::QueueReply reply;
    reply.unassigned = store_->waiting();
    for (const auto& [id, tally] : store_->by_engine()) {
      if (tally.running == 0 && tally.finished == 0) continue;
      auto& q = by_engine[id];
      q.engine_id = id;
      // An engine runs one task at a time; the rest it holds are queued.
      q.running = std::min<int64_t>(tally.running, 1);
      q.queued = tally.running - q.running;
      q.completed = tally.finished;
    }
    for (auto& [id, q] : by_engine) reply.engines.push_back(q);
    return reply;
  }

  HubOptions options_;
  protocol::ConnectionInfo info_;
  protocol::Signer signer_;
  protocol::Limits limits_;
  std::unique_ptr<TaskStore> store_;
  ResultWaits waits_;
  EngineRegistry registry_;
  Activity activity_;
  zmq::context_t context_{protocol::OwnBuffersContext()};  // batches wait in its queue
  zmq::socket_t registration_, query_, monitor_, notifier_, events_;
  int64_t events_published_ = 0;
  std::unique_ptr<protocol::ServerSecurity> security_;  // after the sockets: stops first
  TaskId session_;
  uint64_t counter_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  Frames frames_;
  protocol::DropLog drops_{"taskhub"};
  // The monitor's messages may wait out a hub outage in the scheduler's
  // queue, so only their order is checked, not their age.
  protocol::ReplayGuard registration_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      query_guard_{protocol::ReplayWindowOf(options_.replay_window_s)},
      monitor_guard_{protocol::ReplayWindowOf(0)};
  int64_t next_announce_ = 0;
  bool flush_failing_ = false;
  std::map<std::string, std::vector<int64_t>> acks_;  // by monitor peer, to send
  uint64_t refused_registrations_ = 0;
  int listeners_ = 0;  // subscriptions to the event stream, by topic
};

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
  store_options.progress = [](size_t read) {
    spdlog::info("converting the task database to this version's layout: {} records so far",
                 read);
  };
  auto store = TaskStore::Open(db, std::move(store_options));
  if (!store.ok()) return store.status();
  auto impl = std::make_unique<Impl>(options, info, std::move(*store));
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

}  // namespace ztask::hub
