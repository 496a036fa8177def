// The event stream: the hub's lifecycle events, followed on a SUB socket of
// their own and handed to the caller as JSON objects until it says stop.
//
// Must not: ask the hub or the scheduler anything (queries.cc does), or
// decide anything about an event (the caller does; the names pass through
// as the hub wrote them). Thread safety: the client's one thread, which
// owns the SUB socket for the length of the call.
#include "base/reactor.h"
#include "client/client_impl.h"
#include "protocol/codec.h"
#include "protocol/security.h"

namespace ztask {
namespace {

Value EventJson(const protocol::Event& e) {
  return {{"seq", e.seq ? Value(*e.seq) : Value(nullptr)},
          {"kind", std::string(protocol::EventKindName(e.kind))},
          {"task_id", e.task_id ? Value(e.task_id->ToHex()) : Value(nullptr)},
          {"engine_id", e.engine_id ? Value(*e.engine_id) : Value(nullptr)},
          {"attempt", e.attempt ? Value(*e.attempt) : Value(nullptr)},
          {"status", e.status == protocol::EventStatus::kNone
                         ? Value(nullptr)
                         : Value(std::string(protocol::EventStatusName(e.status)))},
          {"error_type", e.error_type == ErrorType::kNone
                             ? Value(nullptr)
                             : Value(std::string(ErrorTypeName(e.error_type)))},
          {"text", e.text},
          {"at", static_cast<double>(e.at_us) / 1e6}};
}

}  // namespace

Status Client::Impl::Watch(const std::function<bool(const Value&)>& on_event) {
  zmq::socket_t events(context_, zmq::socket_type::sub);
  events.set(zmq::sockopt::subscribe, "");
  events.set(zmq::sockopt::linger, 0);
  protocol::SecureClient(events, info_);
  events.connect(info_.hub.events);
  protocol::Frames frames;
  while (true) {
    base::WaitReady(events, ZMQ_POLLIN, std::chrono::milliseconds(200));
    while (protocol::TryReceive(events, frames)) {
      auto event =
          protocol::DecodeMessage<protocol::MsgType::kEvent>(signer_, {}, protocol::Views(frames));
      if (!event.ok()) continue;
      if (!on_event(EventJson(event->content))) return Status::Ok();
    }
  }
}

}  // namespace ztask
