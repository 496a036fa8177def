// Inbound: what every socket of the scheduler's loop does with a message
// before its handler acts on it: verify it (signature, version, limits, the
// replay guard), bind a ROUTER connection to the session it proved, unpack
// a task_batch into messages laid out as if each came alone, and count and
// log what is dropped. And the translation of a task's routing metadata
// into the core's terms.
//
// It must not act on a message: what a message means is its socket's
// handler's (client_port.h, engine_port.h, hub_link.h, hub_notices.h).
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_INBOUND_H_
#define ZTASK_SCHEDULER_INBOUND_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "base/prefetch.h"
#include "protocol/codec.h"
#include "protocol/peer_routes.h"
#include "protocol/replay_guard.h"
#include "protocol/resources.h"
#include "protocol/wire.h"
#include "scheduler/core.h"

namespace ztask::scheduler {

// A message as views of its frames, laid out as one that came alone on a
// ROUTER: the sender's session, the signature and HMAC frames (empty for a
// message of a batch), header, parent, metadata, content, buffers. Views
// into the message received: valid while it is handled.
using Msg = std::span<const std::string_view>;

inline DependencySet ToSet(const protocol::WireDependencies& w) {
  return {w.ids, w.mode, w.outcome};
}
inline Amounts ToAmounts(const std::optional<int32_t>& slots,
                         const std::optional<protocol::ResourceMap>& resources) {
  return {slots.value_or(1), resources.value_or(protocol::ResourceMap{})};
}
// What the core needs of a task, from its routing metadata.
inline Submission ToSubmission(const TaskId& id, const protocol::RoutingMeta& meta) {
  return {id,           ToSet(meta.after), ToSet(meta.follow),
          meta.targets, meta.timeout_s,    meta.retries,
          meta.priority, ToAmounts(meta.slots, meta.resources)};
}

class Inbound {
 public:
  // REQUIRES: `signer` outlives this.
  Inbound(const protocol::Signer& signer, const protocol::Limits& limits)
      : signer_(signer), limits_(limits) {}

  void Drop(std::string_view peer, const std::string& why) { drops_.Drop(peer, why); }
  void Drop(std::string_view peer, const Status& why) { drops_.Drop(peer, why); }
  protocol::DropLog& drops() { return drops_; }
  const protocol::DropLog& drops() const { return drops_; }

  // Verifies a message whose signature frame is frames[first]; `views`
  // gets its frames from the header on.
  Result<protocol::Header> Open(const protocol::Frames& frames, size_t first,
                                std::vector<std::string_view>* views,
                                protocol::ReplayGuard* guard) {
    return protocol::OpenMessage(signer_, limits_, frames, first, guard, views);
  }

  // Verifies a message from a ROUTER socket and binds its connection to the
  // sender's session (`routes`); frames[0] then names the session instead
  // of the connection, which is what the rest of the loop keys peers by.
  Result<protocol::Header> OpenFromPeer(protocol::Frames& frames,
                                        std::vector<std::string_view>* views,
                                        protocol::ReplayGuard* guard,
                                        protocol::PeerRoutes& routes) {
    auto header = Open(frames, 1, views, guard);
    if (header.ok()) {
      routes.Prove(header->session, protocol::View(frames[0]));
      frames[0] = protocol::Frame(header->session);
    }
    return header;
  }

  // A verified task_batch (frames[0]: the sender's session): each of its
  // messages is handled as if it came alone, as `handle(header, msg)`, and
  // `ahead(header, message)` is called with the message kPrefetchAhead
  // after it, its header read and its frames from the header on (so that
  // its lookups start loading while this one is handled: a hint, for a
  // message not yet checked). Messages not of `type`, or of
  // another session than the batch's, are dropped. Returns how many were
  // handled.
  template <class Each, class Ahead>
  size_t ForEachInBatch(const protocol::Header& batch, const std::vector<std::string_view>& views,
                        protocol::Frames& frames, protocol::MsgType type, Each&& handle,
                        Ahead&& ahead);

 private:
  const protocol::Signer& signer_;
  const protocol::Limits limits_;
  // ForEachInBatch's: each message's header, and whether it read.
  std::vector<protocol::Header> headers_;
  std::vector<Status> read_;
  protocol::DropLog drops_{"taskscheduler"};
};

template <class Each, class Ahead>
size_t Inbound::ForEachInBatch(const protocol::Header& batch,
                               const std::vector<std::string_view>& views,
                               protocol::Frames& frames, protocol::MsgType type, Each&& handle,
                               Ahead&& ahead) {
  const std::string_view peer = protocol::View(frames[0]);
  auto unpacked = protocol::UnpackBatch(views);
  if (!unpacked.ok()) {
    Drop(peer, unpacked.status());
    return 0;
  }
  // Read into headers kept from batch to batch: their sessions keep their
  // storage, so that reading one allocates nothing.
  const size_t count = unpacked->size();
  if (headers_.size() < count) headers_.resize(count);
  read_.clear();
  for (size_t i = 0; i < count; ++i) {
    read_.push_back(
        protocol::DecodeHeaderInto((*unpacked)[i][protocol::kFrameHeader], &headers_[i]));
  }
  size_t handled = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i + kPrefetchAhead < count && read_[i + kPrefetchAhead].ok())
      ahead(headers_[i + kPrefetchAhead], (*unpacked)[i + kPrefetchAhead]);
    if (!read_[i].ok()) {
      Drop(peer, read_[i]);
      continue;
    }
    const protocol::Header* header = &headers_[i];
    if (header->type != type || header->session != batch.session) {
      Drop(peer, "a " + std::string(protocol::MsgTypeName(header->type)) + " of session " +
                     protocol::PrintablePeer(header->session) + " in a task_batch of " +
                     protocol::PrintablePeer(batch.session));
      continue;
    }
    handle(*header, Msg(unpacked->WithPeer(i, peer)));
    ++handled;
  }
  return handled;
}

// Messages a socket's handler takes per turn of the loop, at most; and no
// more once this many tasks or replies came (a batch holds up to 1,024):
// what a turn decides for engines and clients leaves at its end, so a turn
// stays short.
inline constexpr size_t kMessagesPerTurn = 256;
inline constexpr uint64_t kTasksPerTurn = 2048;

// Receives what `socket` has (into `frames`, reused), within the bounds
// above, and hands each message to `handle(frames)`, which returns the
// tasks or replies it held.
template <class Handle>
void DrainSocket(zmq::socket_t& socket, protocol::Frames& frames, Handle&& handle) {
  uint64_t tasks = 0;
  for (size_t i = 0; i < kMessagesPerTurn && tasks < kTasksPerTurn &&
                     protocol::TryReceive(socket, frames);
       ++i) {
    tasks += handle(frames);
  }
}

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_INBOUND_H_
