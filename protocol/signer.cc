// HMAC-SHA256 (RFC 2104) over OpenSSL's SHA-256: the key's pads are hashed
// once, when the Signer is made, and copied for each message.
#include "protocol/signer.h"

#include <openssl/evp.h>
#include <sodium.h>

#include <cstring>
#include <exception>
#include <utility>

namespace ztask::protocol {
namespace {

// A SHA-256 context, freed with it.
struct MdCtx {
  MdCtx() : ctx(EVP_MD_CTX_new()) {
    if (!ctx) std::terminate();
  }
  ~MdCtx() { EVP_MD_CTX_free(ctx); }
  MdCtx(const MdCtx&) = delete;
  MdCtx& operator=(const MdCtx&) = delete;
  EVP_MD_CTX* ctx;
};

void Check(int ok) {
  if (ok != 1) std::terminate();  // SHA-256 itself failing: nothing is safe
}

}  // namespace

struct Signer::Pads {
  MdCtx inner, outer;
};

Signer::Signer(std::string key) {
  if (sodium_init() < 0) std::terminate();  // no randomness, no security
  if (key.empty()) return;
  constexpr size_t kBlock = 64;
  unsigned char block[kBlock] = {};
  if (key.size() > kBlock) {
    unsigned int n = 0;
    Check(EVP_Digest(key.data(), key.size(), block, &n, EVP_sha256(), nullptr));
  } else {
    std::memcpy(block, key.data(), key.size());
  }
  auto pads = std::make_shared<Pads>();
  unsigned char pad[kBlock];
  for (auto [ctx, byte] : {std::pair{pads->inner.ctx, 0x36}, {pads->outer.ctx, 0x5c}}) {
    for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ static_cast<unsigned char>(byte);
    Check(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr));
    Check(EVP_DigestUpdate(ctx, pad, kBlock));
  }
  sodium_memzero(block, sizeof block);
  sodium_memzero(pad, sizeof pad);
  pads_ = std::move(pads);
}

void Signer::Mac(std::span<const std::string_view> frames, unsigned char out[kHmacBytes]) const {
  thread_local MdCtx scratch;
  EVP_MD_CTX* ctx = scratch.ctx;
  Check(EVP_MD_CTX_copy_ex(ctx, pads_->inner.ctx));
  for (size_t i = kFrameHeader; i < frames.size(); ++i) {
    // Each frame's length goes in first, so bytes cannot move between
    // frames without changing the HMAC.
    unsigned char length[8];
    const uint64_t n = frames[i].size();
    for (int b = 0; b < 8; ++b) length[b] = static_cast<unsigned char>(n >> (8 * b));
    Check(EVP_DigestUpdate(ctx, length, sizeof length));
    Check(EVP_DigestUpdate(ctx, frames[i].data(), frames[i].size()));
  }
  unsigned char inner[kHmacBytes];
  unsigned int size = 0;
  Check(EVP_DigestFinal_ex(ctx, inner, &size));
  Check(EVP_MD_CTX_copy_ex(ctx, pads_->outer.ctx));
  Check(EVP_DigestUpdate(ctx, inner, sizeof inner));
  Check(EVP_DigestFinal_ex(ctx, out, &size));
}

std::string Signer::Sign(std::span<const std::string_view> frames) const {
  if (!enabled()) return {};
  unsigned char mac[kHmacBytes];
  Mac(frames, mac);
  return std::string(reinterpret_cast<const char*>(mac), kHmacBytes);
}

bool Signer::Verify(std::span<const std::string_view> frames) const {
  const std::string_view given = frames[kFrameHmac];
  if (!enabled()) return given.empty();
  if (given.size() != kHmacBytes) return false;
  unsigned char mac[kHmacBytes];
  Mac(frames, mac);
  return sodium_memcmp(mac, given.data(), kHmacBytes) == 0;
}

}  // namespace ztask::protocol
