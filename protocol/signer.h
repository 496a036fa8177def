// The cluster key's signature on every message: who holds the key may send,
// who does not is dropped (docs/security.md).
//
// Must not: decode anything (codec.h does, after Verify). Thread safety: a
// Signer is immutable after construction and may be shared.
#ifndef ZTASK_PROTOCOL_SIGNER_H_
#define ZTASK_PROTOCOL_SIGNER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "protocol/frame_layout.h"

namespace ztask::protocol {

// Signs and verifies with the cluster's key: HMAC-SHA256 (RFC 2104) over
// OpenSSL's SHA-256, which uses the CPU's SHA instructions where there are
// any. The key's inner and outer pads are hashed once, here, not per message.
class Signer {
 public:
  // An empty key makes an unsigned cluster: Sign() yields an empty frame and
  // Verify() accepts only an empty frame.
  explicit Signer(std::string key = {});

  bool enabled() const { return pads_ != nullptr; }
  // The HMAC of frames[kFrameHeader..]: 32 raw bytes, or "" when unsigned.
  // REQUIRES: frames.size() >= kMinFrames.
  std::string Sign(std::span<const std::string_view> frames) const;
  // True when frames[kFrameHmac] is the HMAC of the frames after it.
  // Compares in constant time. REQUIRES: frames.size() >= kMinFrames.
  bool Verify(std::span<const std::string_view> frames) const;

  struct Pads;  // SHA-256 states after the key's inner and outer pads

 private:
  void Mac(std::span<const std::string_view> frames, unsigned char out[32]) const;

  std::shared_ptr<const Pads> pads_;  // null when unsigned
};

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_SIGNER_H_
