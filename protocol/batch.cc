// Batches: many messages under one signature, as records in one frame
// (codec.h, "batches"; docs/protocol.md).
#include <cstring>

#include "protocol/codec.h"

namespace ztask::protocol {

namespace {

void PutWord(std::string& out, size_t value) {
  const uint32_t w = static_cast<uint32_t>(value);
  const char bytes[4] = {static_cast<char>(w & 0xff), static_cast<char>((w >> 8) & 0xff),
                         static_cast<char>((w >> 16) & 0xff), static_cast<char>(w >> 24)};
  out.append(bytes, 4);
}

// Reads a 4-byte little-endian word at `at`, moving past it; false when
// fewer than 4 bytes are left.
bool TakeWord(std::string_view records, size_t& at, uint32_t& w) {
  if (records.size() - at < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(records.data() + at);
  w = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  at += 4;
  return true;
}

}  // namespace

void AppendRecord(std::string& records, std::span<const std::string_view> frames,
                  std::span<const std::string_view> more) {
  size_t bytes = 4;
  for (std::string_view f : frames) bytes += 4 + f.size();
  for (std::string_view f : more) bytes += 4 + f.size();
  records.reserve(records.size() + bytes);
  PutWord(records, frames.size() + more.size());
  for (std::string_view f : frames) {
    PutWord(records, f.size());
    records.append(f);
  }
  for (std::string_view f : more) {
    PutWord(records, f.size());
    records.append(f);
  }
}

Result<BatchMessages> UnpackBatch(std::span<const std::string_view> frames, TaskBatch* content) {
  if (frames.size() != kBatchFrames) {
    return Status::Malformed("a batch has " + std::to_string(kBatchFrames) + " frames, not " +
                             std::to_string(frames.size()));
  }
  auto batch = DecodeBody<TaskBatch>(frames[kFrameContent]);
  if (!batch.ok()) return Status::Malformed("batch: " + batch.status().message());
  const std::string_view records = frames[kFrameRecords];
  BatchMessages out;
  // Where each message starts in out.frames_ (its peer slot) and how many
  // frames it has; the spans are made once the vector holds them all.
  std::vector<std::pair<size_t, size_t>> placed;
  size_t at = 0;
  while (at < records.size()) {
    if (placed.size() == kMaxBatchMessages) {
      return Status::TooLarge("a batch of more than " + std::to_string(kMaxBatchMessages) +
                              " messages");
    }
    uint32_t count = 0;
    if (!TakeWord(records, at, count) || count < 4 || count + 2 > kMaxMessageFrames) {
      return Status::Malformed("batch: a record's frame count is not 4 to " +
                               std::to_string(kMaxMessageFrames - 2));
    }
    placed.emplace_back(out.frames_.size(), 2 + count);
    out.frames_.resize(out.frames_.size() + 3);  // the peer slot; no signature, no HMAC
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t length = 0;
      if (!TakeWord(records, at, length) || length > records.size() - at) {
        return Status::Malformed("batch: a record runs past the end of the frame");
      }
      out.frames_.push_back(records.substr(at, length));
      at += length;
    }
  }
  if (batch->dispatch && batch->dispatch->size() != placed.size()) {
    return Status::Malformed("batch: a dispatch for each task, no more, no less");
  }
  out.messages_.reserve(placed.size());
  for (const auto& [start, size] : placed) {
    out.messages_.emplace_back(out.frames_.data() + start + 1, size);
  }
  if (content) *content = std::move(*batch);
  return out;
}

std::vector<std::string> EncodeBatch(const Signer& signer, const Header& header,
                                     const std::vector<std::vector<std::string>>& messages,
                                     std::optional<std::vector<DispatchInfo>> dispatch) {
  const std::vector<std::span<const std::string>> spans(messages.begin(), messages.end());
  return EncodeBatch(signer, header, spans, std::move(dispatch));
}

std::vector<std::string> EncodeBatch(const Signer& signer, const Header& header,
                                     std::span<const std::span<const std::string>> messages,
                                     std::optional<std::vector<DispatchInfo>> dispatch) {
  std::vector<std::string> frames;
  frames.reserve(kBatchFrames);
  frames.emplace_back(kProtocolSignature);
  frames.emplace_back();
  frames.push_back(EncodeHeader(header));
  frames.push_back(EncodeParent(std::nullopt));
  frames.push_back(EncodeBody(Empty{}));
  frames.push_back(EncodeBody(TaskBatch{std::move(dispatch)}));
  std::string& records = frames.emplace_back();
  std::vector<std::string_view> views;
  for (const auto& m : messages) {
    views.assign(m.begin(), m.end());
    AppendRecord(records, views);
  }
  views.assign(frames.begin(), frames.end());
  frames[kFrameHmac] = signer.Sign(views);
  return frames;
}

}  // namespace ztask::protocol
