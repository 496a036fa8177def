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
// Thread safety: owned by the thread that owns the socket.
#ifndef ZTASK_SCHEDULER_OUTBOX_H_
#define ZTASK_SCHEDULER_OUTBOX_H_

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "protocol/peer_routes.h"
#include "protocol/wire.h"

namespace ztask::scheduler {

class Outbox {
 public:
  // REQUIRES: `socket` is a ROUTER with ROUTER_MANDATORY, outliving the box;
  // so does `routes`.
  Outbox(zmq::socket_t& socket, protocol::PeerRoutes& routes) : socket_(socket), routes_(routes) {}

  // Queues `message` (frames[0] is the peer's session; moved from).
  void Send(protocol::Frames& message) { fresh_.push_back(std::move(message)); }
  // Sends what waits, as far as the peers' queues take it. Returns the
  // peers that are not connected (or never proved a connection); their
  // messages are dropped.
  std::vector<std::string> Flush();

  // Whether messages wait for a peer with no room.
  bool blocked() const { return waiting_ > 0; }

 private:
  // Sends `message` (frames[0] names its session) on that session's route;
  // when it is not sent, frames[0] names the session again.
  Status SendTo(protocol::Frames& message);

  zmq::socket_t& socket_;
  protocol::PeerRoutes& routes_;
  std::vector<protocol::Frames> fresh_;
  std::unordered_map<std::string, std::deque<protocol::Frames>> by_peer_;
  size_t waiting_ = 0;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_OUTBOX_H_
