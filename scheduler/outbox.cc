#include "scheduler/outbox.h"

#include <spdlog/spdlog.h>

namespace ztask::scheduler {

Status Outbox::Send(protocol::Frames& message) {
  std::string peer(protocol::View(message[0]));
  if (auto it = by_peer_.find(peer); it != by_peer_.end()) {
    it->second.push_back(std::move(message));
    ++waiting_;
    return Status::Ok();
  }
  Status sent = protocol::SendFrames(socket_, message);
  if (!protocol::IsQueueFull(sent)) return sent;
  by_peer_[peer].push_back(std::move(message));
  ++waiting_;
  return Status::Ok();
}

void Outbox::Flush() {
  for (auto it = by_peer_.begin(); it != by_peer_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      Status sent = protocol::SendFrames(socket_, queue.front());
      if (protocol::IsQueueFull(sent)) break;
      if (!sent.ok()) {
        dropped_ += queue.size();
        waiting_ -= queue.size();
        spdlog::warn("dropped {} messages waiting for {}: {}", queue.size(),
                     protocol::PrintablePeer(it->first), sent.message());
        queue.clear();
        break;
      }
      queue.pop_front();
      --waiting_;
    }
    it = queue.empty() ? by_peer_.erase(it) : std::next(it);
  }
}

}  // namespace ztask::scheduler
