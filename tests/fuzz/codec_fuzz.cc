// Fuzz target for the codec. The input is a list of frames, each a 2-byte
// little-endian length and its bytes, after a first byte whose low bit says
// whether to re-sign the frames with the key (so decoding is reached past the
// HMAC check). Every decoder of every message type must return a Status on
// every input: never crash, throw, or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/codec.h"
#include "tests/fuzz/codec_fuzz.h"

namespace ztask::protocol::fuzz {
namespace {

const Signer& FuzzSigner() {
  static const Signer signer("fuzz key");
  return signer;
}

template <MsgType kType>
void DecodeAs(std::span<const std::string_view> views) {
  auto decoded = DecodeMessage<kType>(FuzzSigner(), Limits{}, views);
  if (decoded.ok()) {
    // What decodes must encode again and decode to the same.
    using B = Bodies<kType>;
    auto again = EncodeBody<typename B::Content>(decoded->content);
    auto back = DecodeBody<typename B::Content>(again);
    if (!back.ok() || !(*back == decoded->content)) __builtin_trap();
  }
}

}  // namespace

std::vector<std::string> SplitFrames(const uint8_t* data, size_t size, bool* resign) {
  std::vector<std::string> frames;
  if (size == 0) return frames;
  *resign = data[0] & 1;
  size_t at = 1;
  while (at + 2 <= size && frames.size() < 16) {
    size_t length = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    length = std::min(length, size - at);
    frames.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  return frames;
}

std::string JoinFrames(const std::vector<std::string>& frames, bool resign) {
  std::string out(1, resign ? '\x01' : '\x00');
  for (const auto& f : frames) {
    out += static_cast<char>(f.size() & 0xff);
    out += static_cast<char>((f.size() >> 8) & 0xff);
    out += f;
  }
  return out;
}

int FuzzOne(const uint8_t* data, size_t size) {
  bool resign = false;
  std::vector<std::string> frames = SplitFrames(data, size, &resign);
  std::vector<std::string_view> views(frames.begin(), frames.end());
  if (resign && frames.size() >= kMinFrames) {
    frames[kFrameHmac] = FuzzSigner().Sign(views);
    views.assign(frames.begin(), frames.end());
  }
#define ZTASK_FUZZ_TYPE(name, code, text, meta, content) DecodeAs<MsgType::name>(views);
  ZTASK_MESSAGE_TYPES(ZTASK_FUZZ_TYPE)
#undef ZTASK_FUZZ_TYPE
  if (frames.size() >= kMinFrames) (void)UnpackBatch(views);
  for (const auto& f : frames) {
    (void)DecodeHeader(f);
    (void)DecodeParent(f);
    (void)DecodeBody<RoutingMeta>(f);
    (void)DecodeBody<ResultReply>(f);
  }
  return 0;
}

}  // namespace ztask::protocol::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ztask::protocol::fuzz::FuzzOne(data, size);
}
