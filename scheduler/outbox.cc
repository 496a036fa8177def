#include "scheduler/outbox.h"

namespace ztask::scheduler {

Status Outbox::SendTo(protocol::Frames& message) {
  const std::string* route = routes_.RouteOf(protocol::View(message[0]));
  if (!route) return Status::Unavailable("no connection proved this peer");
  zmq::message_t session = std::move(message[0]);
  message[0] = protocol::Frame(*route);
  Status sent = protocol::SendFrames(socket_, message);
  if (!sent.ok()) {
    if (!protocol::IsQueueFull(sent)) routes_.Forget(protocol::View(session));
    message[0] = std::move(session);
  }
  return sent;
}

void Outbox::Send(protocol::Frames& message) {
  if (!open_.empty()) {
    if (auto it = open_.find(protocol::View(message[0])); it != open_.end()) Seal(it);
  }
  fresh_.push_back(std::move(message));
}

void Outbox::Batch(std::string_view session, std::span<const std::string_view> message,
                   const protocol::DispatchInfo* dispatch) {
  auto it = open_.find(session);
  if (it == open_.end()) it = open_.emplace(std::string(session), Open{}).first;
  Open& open = it->second;
  protocol::AppendRecord(open.records, message);
  ++open.count;
  if (dispatch) open.dispatch.push_back(*dispatch);
  if (open.count >= protocol::kMaxBatchTasks || open.records.size() >= protocol::kMaxBatchBytes) {
    Seal(it);
  }
}

void Outbox::Seal(OpenMap::iterator it) {
  Open& open = it->second;
  std::optional<std::vector<protocol::DispatchInfo>> dispatch;
  if (!open.dispatch.empty()) dispatch = std::move(open.dispatch);
  fresh_.push_back(builder_.SealTaskBatch(it->first, std::move(open.records), std::move(dispatch)));
  open_.erase(it);
}

std::vector<std::string> Outbox::Flush() {
  while (!open_.empty()) Seal(open_.begin());
  std::vector<std::string> gone;
  // What waited first, peer by peer, in order.
  for (auto it = by_peer_.begin(); it != by_peer_.end();) {
    auto& queue = it->second;
    while (!queue.empty()) {
      Status sent = SendTo(queue.front());
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
    if (!by_peer_.empty()) {
      auto kept = by_peer_.find(std::string(protocol::View(message[0])));
      if (kept != by_peer_.end()) {
        kept->second.push_back(std::move(message));
        ++waiting_;
        continue;
      }
    }
    Status sent = SendTo(message);  // frames[0] names the peer again if not sent
    if (protocol::IsQueueFull(sent)) {
      by_peer_[std::string(protocol::View(message[0]))].push_back(std::move(message));
      ++waiting_;
    } else if (!sent.ok()) {
      gone.emplace_back(protocol::View(message[0]));
    }
  }
  fresh_.clear();
  return gone;
}

}  // namespace ztask::scheduler
