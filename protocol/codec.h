// The codec: the only code that turns ztask messages into frames and frames
// into messages. A message after its routing envelope is
//
//   0 "ZTASK3"   1 HMAC-SHA256(frames 2..)   2 header   3 parent header
//   4 routing metadata   5 content   6.. raw buffers
//
// Decoding is split in steps so that a router (the scheduler) can verify the
// signature and read the header and metadata of a message and pass the rest
// on untouched. Nothing from the network is trusted: every decoding function
// returns an error Status for any input that is not a well-formed message,
// and never throws, aborts or reads out of bounds.
//
// The frames' layout is frame_layout.h's; the signature signer.h's.
//
// Thread safety: the free functions are reentrant.
#ifndef ZTASK_PROTOCOL_CODEC_H_
#define ZTASK_PROTOCOL_CODEC_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/frame_layout.h"
#include "protocol/messages.h"
#include "protocol/signer.h"
#include "ztask/status.h"

namespace ztask::protocol {

struct Limits {
  // Total bytes of all frames of one message. Default: 64 MiB.
  size_t max_message_bytes = size_t{64} << 20;
  // Frames of one message, buffers included. Default: 64.
  size_t max_frames = kMaxMessageFrames;
};

inline bool IsBatch(MsgType type) {
  return type == MsgType::kTaskBatch || type == MsgType::kMonitorBatch;
}

// The limits on a value a task carries (its arguments, its result): at most
// kMaxValueDepth levels of nesting (a scalar is level 1), and the unpacker's
// bounds on every message (arrays of 2^20 items, maps of 2^16 pairs, strings
// and binaries of 64 MiB, no extension types). Every process reads values
// through this codec, so every process holds the same limits; a message nests
// at most 32 levels, which leaves room for the records that carry a value.
inline constexpr size_t kMaxValueDepth = 24;

// Python function tasks (docs/python.md): their arguments and results
// are the msgpack map {"pickle": bin}, the bytes cloudpickled by the Python
// side; an exception they raised is {"ename", "evalue", "traceback"}.
// The pickled bytes of a Python task's arguments, or what is wrong.
Result<std::string> PickledPayload(std::string_view args);
std::string PickledValue(std::string_view pickled);
std::string RemoteException(std::string_view ename, std::string_view evalue,
                            std::string_view traceback);

// OK when `packed` is one msgpack value within the limits on values (or
// empty: no value); otherwise what is wrong, in words.
Status CheckValue(std::string_view packed);

// ---- encoding ---------------------------------------------------------------

// A header in its fixed layout (docs/protocol.md, "The header"): the
// layout byte, the type's code, the id, the date (64 bits, little-endian)
// and the session, its length in one byte before it.
inline constexpr uint8_t kHeaderLayout = 1;
inline constexpr size_t kHeaderFixedBytes = 27;  // all but the session
inline constexpr size_t kMaxSessionBytes = 255;
// A header's bytes, made without allocating: for the headers a process
// makes for every task. A session longer than kMaxSessionBytes is cut.
class HeaderBytes {
 public:
  HeaderBytes(const TaskId& id, MsgType type, std::string_view session, int64_t date_us);
  explicit HeaderBytes(const Header& h) : HeaderBytes(h.id, h.type, h.session, h.date_us) {}
  std::string_view view() const { return {bytes_, size_}; }

 private:
  char bytes_[kHeaderFixedBytes + kMaxSessionBytes];
  size_t size_;
};
std::string EncodeHeader(const Header& header);
// Empty when there is no parent.
std::string EncodeParent(const std::optional<Header>& parent);
// T is any body type named in messages.h's Bodies table.
template <class T>
std::string EncodeBody(const T& body);
// The bytes of EncodeBody(FrameList{frames}), written straight from views.
std::string EncodeFrameList(std::span<const std::string_view> frames);

// All frames of a message, signed. Buffers are appended untouched.
template <class Meta, class Content>
std::vector<std::string> EncodeMessage(const Signer& signer, const Header& header,
                                       const std::optional<Header>& parent, const Meta& meta,
                                       const Content& content,
                                       std::vector<std::string> buffers = {}) {
  std::vector<std::string> frames;
  frames.reserve(kMinFrames + buffers.size());
  frames.emplace_back(kProtocolSignature);
  frames.emplace_back();
  frames.push_back(EncodeHeader(header));
  frames.push_back(EncodeParent(parent));
  frames.push_back(EncodeBody(meta));
  frames.push_back(EncodeBody(content));
  for (auto& b : buffers) frames.push_back(std::move(b));
  std::vector<std::string_view> views(frames.begin(), frames.end());
  frames[kFrameHmac] = signer.Sign(views);
  return frames;
}

// The frames of one message inside a batch, unsigned (the batch's signature
// covers it): header, parent, metadata, content.
template <class Meta, class Content>
std::vector<std::string> EncodeInner(const Header& header, const std::optional<Header>& parent,
                                     const Meta& meta, const Content& content) {
  return {EncodeHeader(header), EncodeParent(parent), EncodeBody(meta), EncodeBody(content)};
}

// Appends one message of a batch to `records` (the batch's frame 6): the
// frame count of `frames` and `more` together, then each frame's length
// (both 4 bytes, little-endian) and its bytes. Its frames are header,
// parent, metadata, content, then buffers.
void AppendRecord(std::string& records, std::span<const std::string_view> frames,
                  std::span<const std::string_view> more = {});

// A signed task_batch holding `messages` (each EncodeInner's frames, and
// any buffers after them), with `dispatch` when it goes to an engine.
// `header`'s type must be kTaskBatch.
std::vector<std::string> EncodeBatch(
    const Signer& signer, const Header& header, const std::vector<std::vector<std::string>>& messages,
    std::optional<std::vector<DispatchInfo>> dispatch = std::nullopt);
// The same, of messages whose frames are held elsewhere.
std::vector<std::string> EncodeBatch(
    const Signer& signer, const Header& header,
    std::span<const std::span<const std::string>> messages,
    std::optional<std::vector<DispatchInfo>> dispatch = std::nullopt);

// ---- decoding ---------------------------------------------------------------

// Frame count, size limit, protocol signature and HMAC. OK means the frames
// came from a holder of the key; nothing has been decoded yet.
Status CheckFrames(const Signer& signer, const Limits& limits,
                   std::span<const std::string_view> frames);

Result<Header> DecodeHeader(std::string_view frame);
// The same into `out`, whose session keeps its storage: no allocation
// when it held one as long.
Status DecodeHeaderInto(std::string_view frame, Header* out);
// A batch has exactly kBatchFrames frames; no message more than
// kMaxMessageFrames.
Status CheckFrameCount(MsgType type, size_t frames);
Result<std::optional<Header>> DecodeParent(std::string_view frame);
// The parent's id alone, checked as DecodeParent checks it.
Result<std::optional<TaskId>> DecodeParentId(std::string_view frame);
template <class T>
Result<T> DecodeBody(std::string_view frame);
// The general reader alone (msgpack's object tree), which DecodeBody falls
// back to for what it does not read in place: for tests comparing them.
template <class T>
Result<T> DecodeBodyGeneral(std::string_view frame);

// ---- stored records -----------------------------------------------------------
// The hub's task records as rows of its database: each struct a msgpack
// array of its fields in Visit() order (absent ones nil), without the names
// a message's map repeats (a no-op's record: 452 bytes as a map, 163 so).
// Fields are therefore only ever added at the end of a stored struct's
// Visit() (TaskRecord and what it holds): a record stored earlier reads
// with the new fields at their defaults. DecodeStored also reads a record
// stored as a map (every row written before this form). Messages never
// take this form. T: TaskRecord.
template <class T>
std::string EncodeStored(const T& body);
// The same into *out (cleared first), whose storage is reused: no
// allocation once it has held a record as long.
template <class T>
void EncodeStoredInto(const T& body, std::string* out);
template <class T>
Result<T> DecodeStored(std::string_view bytes);

template <class Meta, class Content>
struct Decoded {
  Header header;
  std::optional<Header> parent;
  Meta meta;
  Content content;
  std::vector<std::string> buffers;
};

template <MsgType kType>
using DecodedOf = Decoded<typename Bodies<kType>::Meta, typename Bodies<kType>::Content>;

// Decodes every frame of a message CheckFrames accepted; the header's type
// must be kType.
template <MsgType kType>
Result<DecodedOf<kType>> DecodeChecked(std::span<const std::string_view> frames) {
  using Meta = typename Bodies<kType>::Meta;
  using Content = typename Bodies<kType>::Content;
  DecodedOf<kType> out;
  auto header = DecodeHeader(frames[kFrameHeader]);
  if (!header.ok()) return header.status();
  if (header->type != kType) {
    return Status::Malformed("expected a " + std::string(MsgTypeName(kType)) + ", got a " +
                             std::string(MsgTypeName(header->type)));
  }
  ZTASK_RETURN_IF_ERROR(CheckFrameCount(header->type, frames.size()));
  out.header = std::move(*header);
  auto parent = DecodeParent(frames[kFrameParent]);
  if (!parent.ok()) return parent.status();
  out.parent = std::move(*parent);
  auto meta = DecodeBody<Meta>(frames[kFrameMeta]);
  if (!meta.ok()) return Status::Malformed("metadata: " + meta.status().message());
  out.meta = std::move(*meta);
  auto content = DecodeBody<Content>(frames[kFrameContent]);
  if (!content.ok()) return Status::Malformed("content: " + content.status().message());
  out.content = std::move(*content);
  for (size_t i = kFirstBuffer; i < frames.size(); ++i) out.buffers.emplace_back(frames[i]);
  return out;
}

// Checks, then decodes every frame; the header's type must be kType.
template <MsgType kType>
Result<DecodedOf<kType>> DecodeMessage(const Signer& signer, const Limits& limits,
                                       std::span<const std::string_view> frames) {
  ZTASK_RETURN_IF_ERROR(CheckFrames(signer, limits, frames));
  return DecodeChecked<kType>(frames);
}

// The messages in a batch (monitor_batch or task_batch) whose frames
// (already checked) are `frames`: each laid out like a whole message
// (frames 0 and 1 empty), each of 4 to kMaxMessageFrames - 2 frames, as
// views into the records frame. With `content`, the batch's content (a
// task_batch's dispatch) is kept there.
class BatchMessages {
 public:
  using Message = std::span<std::string_view>;
  BatchMessages() = default;
  BatchMessages(BatchMessages&&) = default;  // the views stay where they are
  BatchMessages& operator=(BatchMessages&&) = default;

  size_t size() const { return messages_.size(); }
  bool empty() const { return messages_.empty(); }
  Message operator[](size_t i) const { return messages_[i]; }
  auto begin() const { return messages_.begin(); }
  auto end() const { return messages_.end(); }
  // Message i with `peer` before it, as a ROUTER socket receives one: a
  // slot before each message is kept for it.
  Message WithPeer(size_t i, std::string_view peer) {
    std::string_view* first = messages_[i].data() - 1;
    *first = peer;
    return {first, messages_[i].size() + 1};
  }

 private:
  friend Result<BatchMessages> UnpackBatch(std::span<const std::string_view>, TaskBatch*);
  // All the batch's messages, each after its slot for a peer: one
  // allocation for the batch, none for a message.
  std::vector<std::string_view> frames_;
  std::vector<Message> messages_;
};
Result<BatchMessages> UnpackBatch(std::span<const std::string_view> frames,
                                  TaskBatch* content = nullptr);

// The records of a batch laid out as earlier versions made it (each
// message's frames as frames of the batch after its six, their counts in
// the content's `frames`), as a scheduler's journal may still hold one:
// nullopt when `frames` is not such a batch.
std::optional<std::string> RecordsOfEarlierBatch(std::span<const std::string_view> frames);

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_CODEC_H_
