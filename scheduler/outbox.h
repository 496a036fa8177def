// Outbox: messages for the peers of a ROUTER socket that its queue would
// not take now (a peer's high-water mark is reached: a client that does not
// read its replies, a busy engine). ZeroMQ's ROUTER drops what is over the
// mark, or with ROUTER_MANDATORY refuses it; nothing here is dropped. Each
// peer's messages wait in order and go as soon as its queue has room.
//
// Thread safety: owned by the thread that owns the socket.
#ifndef ZTASK_SCHEDULER_OUTBOX_H_
#define ZTASK_SCHEDULER_OUTBOX_H_

#include <deque>
#include <string>
#include <unordered_map>
#include <zmq.hpp>

#include "protocol/wire.h"

namespace ztask::scheduler {

class Outbox {
 public:
  // REQUIRES: `socket` is a ROUTER with ROUTER_MANDATORY, outliving the box.
  explicit Outbox(zmq::socket_t& socket) : socket_(socket) {}

  // Sends `message` (frames[0] is the peer's routing id) now, or after what
  // waits for the same peer. Errors other than a full queue (the peer is not
  // connected) are returned, and the message is not kept.
  Status Send(protocol::Frames& message);
  // Sends what waits, as far as the queues take it. Messages to peers that
  // went away are dropped and counted.
  void Flush();

  bool empty() const { return waiting_ == 0; }
  size_t waiting() const { return waiting_; }
  uint64_t dropped() const { return dropped_; }

 private:
  zmq::socket_t& socket_;
  std::unordered_map<std::string, std::deque<protocol::Frames>> by_peer_;
  size_t waiting_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_OUTBOX_H_
