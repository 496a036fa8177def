// A task's request as it came, kept by the scheduler until the task's final
// reply (to send it again on a retry, or after an engine's loss).
//
// Small frames are copied into one allocation: a zmq::message_t costs 64
// bytes, and one over 33 bytes an allocation of its own, so a no-op's
// request kept as its seven messages cost about 1 KiB, packed about 300
// bytes. Frames of kShareFrom bytes and more (large arguments, raw buffers)
// stay the messages they came as and are shared, never copied.
//
// Thread safety: none; a value owned by one thread.
#ifndef ZTASK_SCHEDULER_PACKED_REQUEST_H_
#define ZTASK_SCHEDULER_PACKED_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "protocol/wire.h"

namespace ztask::scheduler {

class PackedRequest {
 public:
  static constexpr size_t kShareFrom = 4096;

  PackedRequest() = default;
  // Copies the small frames and shares the large ones: `frames` is unchanged.
  explicit PackedRequest(protocol::Frames& frames);

  size_t size() const { return data_ ? Count() : 0; }
  // The bytes of frame `i`, valid while this lives. REQUIRES: i < size().
  std::string_view operator[](size_t i) const;
  // A message holding frame `i`: a copy of a small frame, a second
  // reference to a large one. REQUIRES: i < size().
  zmq::message_t Message(size_t i) const;

 private:
  // data_: the frame count, then per frame its end offset in the bytes
  // (with kShared set: its index in shared_ instead), then the bytes.
  static constexpr uint32_t kShared = uint32_t{1} << 31;

  uint32_t Count() const { return Word(0); }
  uint32_t Word(size_t k) const;

  std::unique_ptr<char[]> data_;
  std::unique_ptr<zmq::message_t[]> shared_;  // null when no frame is large
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_PACKED_REQUEST_H_
