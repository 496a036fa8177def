#include "scheduler/packed_request.h"

#include <cstring>

namespace ztask::scheduler {

PackedRequest::PackedRequest(protocol::Frames& frames) {
  const size_t count = frames.size();
  size_t bytes = 0, large = 0;
  for (const zmq::message_t& f : frames) {
    if (f.size() >= kShareFrom) {
      ++large;
    } else {
      bytes += f.size();
    }
  }
  const size_t head = sizeof(uint32_t) * (1 + count);
  data_ = std::make_unique_for_overwrite<char[]>(head + bytes);
  if (large > 0) shared_ = std::make_unique<zmq::message_t[]>(large);
  auto put = [this](size_t k, uint32_t w) { std::memcpy(&data_[k * sizeof w], &w, sizeof w); };
  put(0, static_cast<uint32_t>(count));
  uint32_t end = 0, next_shared = 0;
  for (size_t i = 0; i < count; ++i) {
    zmq::message_t& f = frames[i];
    if (f.size() >= kShareFrom) {
      shared_[next_shared] = protocol::Share(f);
      put(1 + i, kShared | next_shared++);
      continue;
    }
    if (f.size() > 0) std::memcpy(&data_[head + end], f.data(), f.size());
    end += static_cast<uint32_t>(f.size());
    put(1 + i, end);
  }
}

uint32_t PackedRequest::Word(size_t k) const {
  uint32_t w;
  std::memcpy(&w, &data_[k * sizeof w], sizeof w);
  return w;
}

std::string_view PackedRequest::operator[](size_t i) const {
  const uint32_t w = Word(1 + i);
  if (w & kShared) return protocol::View(shared_[w & ~kShared]);
  // The end of the last small frame before this one is where it starts.
  uint32_t start = 0;
  for (size_t k = i; k > 0; --k) {
    if (const uint32_t before = Word(k); !(before & kShared)) {
      start = before;
      break;
    }
  }
  const size_t head = sizeof(uint32_t) * (1 + Count());
  return {&data_[head + start], w - start};
}

zmq::message_t PackedRequest::Message(size_t i) const {
  const uint32_t w = Word(1 + i);
  if (w & kShared) return protocol::Share(shared_[w & ~kShared]);
  return protocol::Frame((*this)[i]);
}

}  // namespace ztask::scheduler
