// Ask: one request to a peer and the reply to it, within a time limit.
//
// Every process asks something of another now and then (a client of the
// hub, an engine registering, the scheduler recovering, taskcluster of a
// running cluster's supervisor): it sends a signed request on a DEALER
// socket and waits for the reply whose parent header is that request's,
// skipping what is not it (replies to earlier requests, other traffic), for
// at most a given time and no longer than a stop flag allows. This is that
// loop, once.
//
// Thread safety: the socket is used by the calling thread only.
#ifndef ZTASK_PROTOCOL_REQUEST_H_
#define ZTASK_PROTOCOL_REQUEST_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/reactor.h"
#include "protocol/codec.h"
#include "protocol/wire.h"

namespace ztask::protocol {

struct AskOptions {
  std::chrono::milliseconds timeout{5000};
  // Checked at least every 100 ms: once set, the wait ends.
  const std::atomic<bool>* stop = nullptr;
  Limits limits{};
  // Each verified message that is not of the reply's type (other traffic on
  // the same socket, such as task replies on a client's scheduler socket).
  std::function<void(const Header&, std::span<const std::string_view>)> on_other;
  // Each verified message of the reply's type that cannot be decoded.
  std::function<void(const Status&)> on_unreadable;
};

// Waits for the reply to the request whose header id is `id`. TimedOut when
// the time ran out, Unavailable when `stop` was set first. Messages that
// fail their check are dropped.
template <MsgType kReply>
Result<DecodedOf<kReply>> AwaitReply(zmq::socket_t& socket, const Signer& signer, const TaskId& id,
                                     const AskOptions& options) {
  const int64_t deadline =
      base::MonotonicMicros() +
      std::chrono::duration_cast<std::chrono::microseconds>(options.timeout).count();
  Frames frames;
  for (;;) {
    while (TryReceive(socket, frames)) {
      const auto views = Views(frames);
      if (!CheckFrames(signer, options.limits, views).ok()) continue;
      auto header = DecodeHeader(views[kFrameHeader]);
      if (!header.ok()) continue;
      if (header->type != kReply) {
        if (options.on_other) options.on_other(*header, views);
        continue;
      }
      auto reply = DecodeChecked<kReply>(views);
      if (!reply.ok()) {
        if (options.on_unreadable) options.on_unreadable(reply.status());
        continue;
      }
      if (reply->parent && reply->parent->id == id) return reply;
    }
    const int64_t left_us = deadline - base::MonotonicMicros();
    if (left_us <= 0) {
      return Status::TimedOut("no " + std::string(MsgTypeName(kReply)) + " within " +
                              std::to_string(options.timeout.count()) + " ms");
    }
    if (options.stop && options.stop->load()) return Status::Unavailable("stopped while waiting");
    base::WaitReady(socket, ZMQ_POLLIN,
                    std::chrono::milliseconds(std::clamp<int64_t>(left_us / 1000 + 1, 1, 100)));
  }
}

// Sends `content` under `header` (signed, no parent, empty metadata), then
// AwaitReply. A request that cannot be queued (no peer, a full queue) is
// Unavailable at once.
template <MsgType kReply, class Content>
Result<DecodedOf<kReply>> Ask(zmq::socket_t& socket, const Signer& signer, const Header& header,
                              const Content& content, const AskOptions& options = {}) {
  Status sent =
      SendEncoded(socket, {}, EncodeMessage(signer, header, std::nullopt, Empty{}, content));
  if (!sent.ok()) return Status::Unavailable("cannot send the request: " + sent.message());
  return AwaitReply<kReply>(socket, signer, header.id, options);
}

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_REQUEST_H_
