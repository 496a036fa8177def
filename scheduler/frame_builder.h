// FrameBuilder: the messages the scheduler writes itself (replies it makes,
// monitor messages, retire notices), signed, with its own headers. Monitor
// messages are gathered into batches, one signature each. Frames taken
// from the messages it forwards are copied as they are, never re-encoded.
//
// Thread safety: owned by the scheduler's loop thread.
#ifndef ZTASK_SCHEDULER_FRAME_BUILDER_H_
#define ZTASK_SCHEDULER_FRAME_BUILDER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "protocol/codec.h"
#include "protocol/wire.h"

namespace ztask::scheduler {

class FrameBuilder {
 public:
  // REQUIRES: signer outlives the builder.
  explicit FrameBuilder(const protocol::Signer& signer);

  // A header of ours: a fresh message id in this process's session.
  protocol::Header NewHeader(protocol::MsgType type);
  // Appends a whole signed message to `out` (after any routing ids already
  // in it): a new header of `type`, then these frames, then `buffers`.
  void Append(protocol::Frames& out, protocol::MsgType type, zmq::message_t parent,
              zmq::message_t meta, zmq::message_t content, protocol::Frames buffers = {});
  // A task_batch to `session` (frames[0]) holding `records` (the
  // messages, as protocol::AppendRecord lays them out), with `dispatch`
  // for an engine; signed.
  protocol::Frames SealTaskBatch(std::string_view session, std::string records,
                                 std::optional<std::vector<protocol::DispatchInfo>> dispatch);
  // Shares of frames[from..].
  static protocol::Frames ShareFrom(protocol::Frames& frames, size_t from);

  // Adds a message (unsigned: the batch's signature covers it) to the
  // monitor batch being built.
  // Its frames are copied.
  void AddToBatch(protocol::MsgType type, std::string_view parent, std::string_view meta,
                  std::string_view content, std::span<const std::string_view> buffers = {});
  size_t batched() const { return batched_; }
  size_t batched_bytes() const { return records_.size(); }
  // The batch as one monitor_batch message numbered `seq`, not signed yet
  // (Reseal it to send it); the next batch starts empty.
  // REQUIRES: batched() > 0.
  protocol::Frames TakeBatch(int64_t seq);
  // A message of ours made ready to be sent again: a fresh header (the
  // receiver refuses dates not later than the last it saw), signed again.
  void Reseal(protocol::Frames& message);

 private:
  TaskId NextId();
  // NewHeader's bytes, made without allocating.
  protocol::HeaderBytes NewHeaderBytes(protocol::MsgType type);

  const protocol::Signer& signer_;
  TaskId session_;
  std::string session_hex_;
  uint64_t counter_ = 0;
  std::string records_;  // the monitor batch being built
  size_t batched_ = 0;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_FRAME_BUILDER_H_
