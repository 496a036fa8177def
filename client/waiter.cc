// The client's one wait loop (waiter.h).
#include "client/waiter.h"

#include <algorithm>

#include "base/reactor.h"

namespace ztask::client {

Status Waiter::Until(const std::function<Turn()>& turn, const base::Deadline& deadline,
                     const std::function<Status()>& expired, zmq::socket_t& socket,
                     short events) {
  while (true) {
    if (hooks_.notice) hooks_.notice();
    Turn found = turn();
    if (found.end) return *found.end;
    if (deadline.expired()) return expired();
    // One millisecond past what is left, so that the next turn finds the
    // deadline passed rather than a few microseconds to go.
    const auto left = deadline.remaining() + std::chrono::milliseconds(1);
    base::WaitReady(socket, events, std::min(found.pause, left));
  }
}

Status Waiter::Unreachable(const Peer& peer) const {
  return Status::Unavailable("the " + peer.name + " at " + peer.endpoint +
                             " does not answer: is the cluster in " + profile_ +
                             " running? (start one with: taskcluster start)");
}

}  // namespace ztask::client
