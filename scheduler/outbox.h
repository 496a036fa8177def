// Outbox: what the scheduler sends to the peers of a ROUTER socket. Messages
// are queued during a turn of the loop and leave at its end (Flush), after
// the monitor batch that records them is in the journal (journal.h): nothing
// reaches an engine or a client that a crash could make the hub forget.
//
// A message a peer's queue will not take now (its high-water mark is
// reached: a client that does not read its replies, a busy engine) waits
// here; ZeroMQ's ROUTER would drop it, or with ROUTER_MANDATORY refuse it.
// Each peer's messages keep their order and go as soon as it has room.
//
// Messages name their peer by session (frames[0]); the box sends each on the
// connection that proved that session (PeerRoutes), and on no other.
//
// Tasks and replies are batched: everything a turn adds for one peer
// leaves as one task_batch (or several, past kMaxBatchTasks or
// kMaxBatchBytes), one signature for all; a message queued whole for a
// peer goes after what was batched for it before.
//
// Thread safety: owned by the thread that owns the socket.
#ifndef ZTASK_SCHEDULER_OUTBOX_H_
#define ZTASK_SCHEDULER_OUTBOX_H_

#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "base/string_hash.h"
#include "protocol/peer_routes.h"
#include "protocol/wire.h"
#include "scheduler/frame_builder.h"

namespace ztask::scheduler {

class Outbox {
 public:
  // REQUIRES: `socket` is a ROUTER with ROUTER_MANDATORY, outliving the box;
  // so does `routes`.
  // REQUIRES: `builder` outlives the box.
  Outbox(zmq::socket_t& socket, protocol::PeerRoutes& routes, FrameBuilder& builder)
      : socket_(socket), routes_(routes), builder_(builder) {}

  // Queues `message` whole (frames[0] is the peer's session; moved from),
  // after what was batched for the peer so far.
  void Send(protocol::Frames& message);
  // Adds a task_request or task_reply to the peer's batch: `message` is its
  // header, parent, metadata, content and buffers (copied); `dispatch` only
  // for an engine.
  void Batch(std::string_view session, std::span<const std::string_view> message,
             const protocol::DispatchInfo* dispatch = nullptr);
  // Seals the batches, then sends what waits, as far as the peers' queues
  // take it. Returns the peers that are not connected (or never proved a
  // connection); their messages are dropped.
  std::vector<std::string> Flush();

  // Whether messages wait for a peer with no room.
  bool blocked() const { return waiting_ > 0; }

 private:
  // Sends `message` (frames[0] names its session) on that session's route;
  // when it is not sent, frames[0] names the session again.
  Status SendTo(protocol::Frames& message);

  // The batch being filled for one peer.
  struct Open {
    std::string records;  // protocol::AppendRecord's layout
    size_t count = 0;
    std::vector<protocol::DispatchInfo> dispatch;
  };
  using OpenMap = std::unordered_map<std::string, Open, protocol::StringHash, std::equal_to<>>;
  // The peer's batch becomes a message in fresh_; it is erased.
  void Seal(OpenMap::iterator it);

  zmq::socket_t& socket_;
  protocol::PeerRoutes& routes_;
  FrameBuilder& builder_;
  OpenMap open_;
  std::vector<protocol::Frames> fresh_;
  std::unordered_map<std::string, std::deque<protocol::Frames>> by_peer_;
  size_t waiting_ = 0;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_OUTBOX_H_
