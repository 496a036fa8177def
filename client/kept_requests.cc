#include "client/kept_requests.h"

#include <algorithm>
#include <utility>

#include "protocol/codec.h"

namespace ztask::client {

void KeptRequests::Keep(std::vector<std::string> message, std::span<const TaskId> ids) {
  const uint64_t number = first_message_ + messages_.size();
  uint32_t kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (places_.emplace(ids[i], Place{number, static_cast<uint32_t>(i)})) ++kept;
  }
  messages_.push_back(
      {kept ? std::move(message) : std::vector<std::string>{}, kept, ids.size() > 1});
  DropAnswered();
}

bool KeptRequests::Forget(const TaskId& id) {
  const Place* place = places_.find(id);
  if (!place) return false;
  Message& message = messages_[place->message - first_message_];
  if (--message.unanswered == 0) {
    if (unpacked_message_ == place->message) unpacked_message_ = kNone;
    message.frames = {};
  }
  places_.erase(id);
  DropAnswered();
  return true;
}

// Numbers stay: only the oldest messages go, once all theirs are answered.
void KeptRequests::DropAnswered() {
  while (!messages_.empty() && messages_.front().unanswered == 0) {
    messages_.pop_front();
    ++first_message_;
  }
}

std::vector<TaskId> KeptRequests::Ids() const {
  std::vector<TaskId> ids;
  ids.reserve(places_.size());
  places_.for_each([&](const TaskId& id, const Place&) { ids.push_back(id); });
  return ids;
}

void KeptRequests::SortAsSent(std::vector<TaskId>& ids) const {
  auto order = [&](const TaskId& id) {
    const Place* p = places_.find(id);
    return std::pair{p->message, p->index};
  };
  std::sort(ids.begin(), ids.end(),
            [&](const TaskId& a, const TaskId& b) { return order(a) < order(b); });
}

std::vector<std::string_view> KeptRequests::Request(const TaskId& id) {
  const Place* place = places_.find(id);
  if (!place) return {};
  const Message& message = messages_[place->message - first_message_];
  const std::vector<std::string_view> frames(message.frames.begin(), message.frames.end());
  if (!message.batch) return {frames.begin() + protocol::kFrameHeader, frames.end()};
  // A resend goes in the order sent: one batch unpacked serves its requests.
  if (unpacked_message_ != place->message) {
    auto unpacked = protocol::UnpackBatch(frames);
    if (!unpacked.ok()) return {};  // it was made here: cannot happen
    unpacked_ = std::move(*unpacked);
    unpacked_message_ = place->message;
  }
  if (place->index >= unpacked_.size()) return {};
  const auto request = unpacked_[place->index];
  return {request.begin() + protocol::kFrameHeader, request.end()};
}

}  // namespace ztask::client
