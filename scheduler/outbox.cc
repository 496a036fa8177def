#include "scheduler/outbox.h"

namespace ztask::scheduler {

Status Outbox::SendTo(std::string_view session, protocol::Frames& message) {
  const std::string* route = routes_.RouteOf(session);
  if (!route) return Status::Unavailable("no connection proved this peer");
  message[0] = protocol::Frame(*route);
  Status sent = protocol::SendFrames(socket_, message);
  if (!sent.ok() && !protocol::IsQueueFull(sent)) routes_.Forget(session);
  return sent;
}

std::vector<std::string> Outbox::Flush() {
  std::vector<std::string> gone;
  // What waited first, peer by peer, in order.
  for (auto it = by_peer_.begin(); it != by_peer_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      Status sent = SendTo(it->first, queue.front());
      if (protocol::IsQueueFull(sent)) break;
      --waiting_;
      queue.pop_front();
      if (!sent.ok()) {
        gone.push_back(it->first);
        waiting_ -= queue.size();
        queue.clear();
      }
    }
    it = queue.empty() ? by_peer_.erase(it) : std::next(it);
  }
  // Then this turn's, behind anything still waiting for the same peer.
  for (protocol::Frames& message : fresh_) {
    const std::string_view peer = protocol::View(message[0]);
    auto kept = by_peer_.find(std::string(peer));
    if (kept != by_peer_.end()) {
      kept->second.push_back(std::move(message));
      ++waiting_;
      continue;
    }
    std::string session(peer);  // message[0] becomes the route
    Status sent = SendTo(session, message);
    if (protocol::IsQueueFull(sent)) {
      by_peer_[session].push_back(std::move(message));
      ++waiting_;
    } else if (!sent.ok()) {
      gone.push_back(std::move(session));
    }
  }
  fresh_.clear();
  return gone;
}

}  // namespace ztask::scheduler
