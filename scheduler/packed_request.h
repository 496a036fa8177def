// A task's request as it came, kept by the scheduler until the task's final
// reply (to send it again on a retry, or after an engine's loss).
//
// Its frames are copied into one allocation: a zmq::message_t costs 64
// bytes, and one over 33 bytes an allocation of its own, so a no-op's
// request kept as its seven messages cost about 1 KiB, packed about 300
// bytes. Requests come inside batches (one frame holding many tasks), so
// there is no message of a task's own to share.
//
// Thread safety: none; a value owned by one thread.
#ifndef ZTASK_SCHEDULER_PACKED_REQUEST_H_
#define ZTASK_SCHEDULER_PACKED_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace ztask::scheduler {

class PackedRequest {
 public:
  PackedRequest() = default;
  // Copies `frames`.
  explicit PackedRequest(std::span<const std::string_view> frames);

  size_t size() const { return data_ ? Word(0) : 0; }
  // The bytes of frame `i`, valid while this lives. REQUIRES: i < size().
  std::string_view operator[](size_t i) const;
  // Frames [from, size()), into *out (cleared first: a vector kept by the
  // caller costs no allocation a task). REQUIRES: from <= size().
  void From(size_t from, std::vector<std::string_view>* out) const;

 private:
  // data_: the frame count, then per frame its end offset in the bytes,
  // then the bytes.
  uint32_t Word(size_t k) const;

  std::unique_ptr<char[]> data_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_PACKED_REQUEST_H_
