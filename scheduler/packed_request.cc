#include "scheduler/packed_request.h"

#include <cstring>

namespace ztask::scheduler {

PackedRequest::PackedRequest(std::span<const std::string_view> frames) {
  const size_t count = frames.size();
  size_t bytes = 0;
  for (std::string_view f : frames) bytes += f.size();
  const size_t head = sizeof(uint32_t) * (1 + count);
  data_ = std::make_unique_for_overwrite<char[]>(head + bytes);
  auto put = [this](size_t k, uint32_t w) { std::memcpy(&data_[k * sizeof w], &w, sizeof w); };
  put(0, static_cast<uint32_t>(count));
  uint32_t end = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!frames[i].empty()) std::memcpy(&data_[head + end], frames[i].data(), frames[i].size());
    end += static_cast<uint32_t>(frames[i].size());
    put(1 + i, end);
  }
}

uint32_t PackedRequest::Word(size_t k) const {
  uint32_t w;
  std::memcpy(&w, &data_[k * sizeof w], sizeof w);
  return w;
}

std::string_view PackedRequest::operator[](size_t i) const {
  const uint32_t start = i == 0 ? 0 : Word(i);
  const size_t head = sizeof(uint32_t) * (1 + Word(0));
  return {&data_[head + start], Word(1 + i) - start};
}

void PackedRequest::From(size_t from, std::vector<std::string_view>* out) const {
  out->clear();
  for (size_t i = from; i < size(); ++i) out->push_back((*this)[i]);
}

}  // namespace ztask::scheduler
