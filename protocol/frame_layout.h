// The frames of a ztask message after its routing envelope, and the limits
// that go with them (docs/protocol.md, frame by frame):
//
//   0 "ZTASK3"   1 HMAC-SHA256(frames 2..)   2 header   3 parent header
//   4 routing metadata   5 content   6.. raw buffers
//
// Must not: hold code. Thread safety: constants only.
#ifndef ZTASK_PROTOCOL_FRAME_LAYOUT_H_
#define ZTASK_PROTOCOL_FRAME_LAYOUT_H_

#include <cstddef>
#include <string_view>

#include "ztask/version.h"

namespace ztask::protocol {

inline constexpr std::string_view kProtocolSignature = ZTASK_PROTOCOL_STRING;

enum Frame : size_t {
  kFrameSignature = 0,
  kFrameHmac = 1,
  kFrameHeader = 2,
  kFrameParent = 3,
  kFrameMeta = 4,
  kFrameContent = 5,
  kFirstBuffer = 6,
};
inline constexpr size_t kMinFrames = 6;
inline constexpr size_t kHmacBytes = 32;

// Frames of one message, buffers included, or of each message in a batch.
inline constexpr size_t kMaxMessageFrames = 64;
// A batch (task_batch, monitor_batch) holds many messages under one
// signature, in one frame of records after its own six (kFrameRecords):
// each message its frame count, then each frame's length and bytes. At
// most this many messages in one batch.
inline constexpr size_t kFrameRecords = kFirstBuffer;
inline constexpr size_t kBatchFrames = kMinFrames + 1;
inline constexpr size_t kMaxBatchMessages = 4096;
// A task_batch holds at most this many tasks (or replies) and, past the
// first, this many bytes: senders start a new batch beyond either.
inline constexpr size_t kMaxBatchTasks = 1024;
inline constexpr size_t kMaxBatchBytes = size_t{4} << 20;

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_FRAME_LAYOUT_H_
