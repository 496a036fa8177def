// Registration and heartbeats with the hub (engine/hub_link.h).
#include "engine/hub_link.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "base/clock.h"
#include "protocol/codec.h"
#include "protocol/request.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask::engine {
namespace {

using protocol::MsgType;

std::string Hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

HubLink::HubLink(const RunnerSetup& setup, EngineCore& core, const std::atomic<bool>& stop)
    : setup_(setup), core_(core), stop_(stop), hub_(*setup.context, zmq::socket_type::dealer) {}

Status HubLink::Connect() {
  hub_.set(zmq::sockopt::linger, 2000);
  protocol::SecureClient(hub_, *setup_.info);
  ZTASK_RETURN_IF_ERROR(protocol::Connect(hub_, setup_.info->hub.registration));
  return Register();
}

Status HubLink::Register() {
  const EngineOptions& options = *setup_.options;
  protocol::RegistrationRequest request{setup_.uuid, options.name, Hostname(),  ::getpid(),
                                        std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  request.mpi_rank = setup_.mpi_rank;
  if (options.slots != 1) request.slots = options.slots;
  if (!options.resources.empty()) request.resources = options.resources;
  // A restarted hub gives it back.
  if (core_.engine_id() >= 0) request.engine_id = core_.engine_id();
  // Only the answer to this request: refusals of earlier heartbeats may
  // still be on their way.
  const protocol::Header sent{TaskId::Random(), MsgType::kRegistrationRequest, setup_.uuid,
                              base::WallMicros()};
  const int64_t sent_us = base::MonotonicMicros();
  protocol::AskOptions ask;
  ask.timeout = std::chrono::milliseconds(options.register_timeout_ms);
  ask.stop = &stop_;
  auto reply =
      protocol::Ask<MsgType::kRegistrationReply>(hub_, *setup_.signer, sent, request, ask);
  if (!reply.ok()) {
    return Status::TimedOut("the hub at " + setup_.info->hub.registration +
                            " did not answer within " +
                            std::to_string(options.register_timeout_ms) + " ms");
  }
  if (!reply->content.ok) return Status::Unavailable("the hub refused: " + reply->content.error);
  core_.set_engine_id(reply->content.engine_id);
  heartbeat_ms_ = reply->content.heartbeat_ms > 0 ? reply->content.heartbeat_ms : 1000;
  heartbeat_misses_ = std::max(1, reply->content.heartbeat_misses.value_or(3));
  core_.fence().Registered(sent.date_us, sent_us,
                           int64_t{heartbeat_ms_} * heartbeat_misses_ * 1000);
  spdlog::info("registered as engine {} ({})", core_.engine_id(), options.name);
  return Status::Ok();
}

void HubLink::Beat() {
  const protocol::Header header{TaskId::Random(), MsgType::kHeartbeat, setup_.uuid,
                                base::WallMicros()};
  const int64_t sent_us = base::MonotonicMicros();
  // Harmless when the hub's queue will not take it: a heartbeat missed is
  // what the hub's count of misses is for, the next goes one interval
  // later, and the fence counts only from beats the hub answered.
  (void)protocol::SendEncoded(
      hub_, {},
      protocol::EncodeMessage(
          *setup_.signer, header, std::nullopt, protocol::Empty{},
          protocol::HeartbeatBody{core_.engine_id(), setup_.uuid, std::nullopt}));
  core_.fence().BeatSent(header.date_us, sent_us);
  last_beat_us_ = sent_us;
}

void HubLink::Unregister() {
  const protocol::Header header{TaskId::Random(), MsgType::kUnregistration, setup_.uuid,
                                base::WallMicros()};
  // Best effort as the engine exits: without it the hub removes the engine
  // once its heartbeats stop.
  (void)protocol::SendEncoded(
      hub_, {},
      protocol::EncodeMessage(*setup_.signer, header, std::nullopt, protocol::Empty{},
                              protocol::EngineRef{core_.engine_id(), setup_.uuid}));
}

void HubLink::OnReadable(const std::function<void()>& registered_again) {
  protocol::Frames frames;
  while (protocol::TryReceive(hub_, frames)) {
    auto views = protocol::Views(frames);
    if (!protocol::CheckFrames(*setup_.signer, {}, views).ok()) continue;
    auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
    if (header.ok() && header->type == MsgType::kHeartbeat) {
      OnHeartbeatAnswer(views);
      continue;
    }
    auto reply = protocol::DecodeMessage<MsgType::kRegistrationReply>(*setup_.signer, {}, views);
    // The hub lost us (it restarted, or we were silent too long): it refuses
    // a heartbeat.
    if (reply.ok() && !reply->content.ok && reply->parent &&
        reply->parent->type == MsgType::kHeartbeat) {
      OnRefusal(reply->parent->date_us, registered_again);
    }
  }
}

void HubLink::OnHeartbeatAnswer(const std::vector<std::string_view>& views) {
  auto answer = protocol::DecodeChecked<MsgType::kHeartbeat>(views);
  if (!answer.ok() || !answer->parent) return;
  if (core_.fence().BeatAnswered(answer->parent->date_us, base::MonotonicMicros())) {
    spdlog::info("the hub answers again; starting tasks again");
  }
  // Many engines registered after this one: the hub stretched the period
  // (it never shortens it while it runs). The fence's window grows with it,
  // as the hub's wait for a silent engine did; but not for an answer from
  // before a registration made again, which a restarted hub may have
  // answered with a shorter period and a shorter wait.
  const int32_t told = answer->content.heartbeat_ms.value_or(heartbeat_ms_);
  if (told > heartbeat_ms_ && core_.fence().SinceRegistration(answer->parent->date_us)) {
    heartbeat_ms_ = told;
    core_.fence().SetWindow(int64_t{heartbeat_ms_} * heartbeat_misses_ * 1000);
    spdlog::info("the hub asks for a heartbeat every {} ms", heartbeat_ms_);
  }
}

void HubLink::OnRefusal(int64_t parent_date_us, const std::function<void()>& registered_again) {
  switch (core_.fence().Refused(parent_date_us, base::MonotonicMicros())) {
    case Fence::Refusal::kStale:
      return;
    case Fence::Refusal::kRegisterAndDrop:
      // What it holds is dropped, not run (the scheduler link's Resume),
      // once it is registered again.
      spdlog::warn("the hub removed this engine while it was not heard from; registering "
                   "again, and the tasks it holds go back unstarted");
      break;
    case Fence::Refusal::kRegister:
      spdlog::warn("the hub no longer knows this engine; registering again");
      break;
  }
  // The scheduler heard that this engine was gone: it is ready again.
  if (Register().ok()) registered_again();
}

}  // namespace ztask::engine
