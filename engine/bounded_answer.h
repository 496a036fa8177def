// Reading an answer of the Python worker that is larger than the engine
// keeps whole: one msgpack map, walked as its bytes come, each string or
// binary value of it kept up to a bound (what the task printed: the output
// limit; its result: the result limit, past which the result is dropped
// whole; anything else: a small bound), so that the engine holds about the
// limits, whatever the worker sent. What is cut is said, so that the task
// can succeed with its output marked truncated, as a command's is. Without
// I/O: the bytes come from a Source.
//
// Thread safety: none; a BoundedAnswer is used by one thread.
#ifndef ZTASK_ENGINE_BOUNDED_ANSWER_H_
#define ZTASK_ENGINE_BOUNDED_ANSWER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ztask::engine {

// Where the answer's bytes come from. Each call takes exactly `n` bytes, or
// returns false (the worker closed, or a deadline passed).
class AnswerSource {
 public:
  virtual ~AnswerSource() = default;
  virtual bool Read(char* into, size_t n) = 0;
  virtual bool Skip(size_t n) = 0;
};

struct AnswerBounds {
  size_t output = size_t{1} << 20;   // "stdout", "stderr"
  size_t result = size_t{16} << 20;  // "result": past it, dropped
  size_t other = size_t{1} << 20;    // any other string or binary
};

// What BoundedAnswer::Read made: `map` is the answer as a smaller msgpack
// map (cut values keep their first bytes; a dropped result is an empty
// binary), or empty when the answer was not a map it could walk.
struct BoundedOutcome {
  std::string map;
  bool stdout_cut = false, stderr_cut = false, result_dropped = false;
  uint64_t result_bytes = 0;  // the result's size as sent
};

class BoundedAnswer {
 public:
  BoundedAnswer(AnswerSource& in, uint64_t size, const AnswerBounds& bounds)
      : in_(in), left_(size), bounds_(bounds) {}

  // Walks the whole answer (`size` bytes, every one taken from the source,
  // so that the next answer starts where this one ends). False when the
  // source failed.
  bool Read(BoundedOutcome* out) {
    out_ = out;
    const bool walked = Map();
    if (!walked) out->map.clear();
    // A map that ended early, or bytes past it: taken, not kept.
    return failed_ ? false : SkipBytes(left_);
  }

 private:
  static constexpr int kMaxDepth = 32;
  static constexpr size_t kMaxKeyBytes = 64;

  bool Take(char* into, size_t n) {
    if (n > left_ || !in_.Read(into, n)) return Fail();
    left_ -= n;
    return true;
  }
  bool SkipBytes(uint64_t n) {
    if (n > left_) return Fail();
    while (n > 0) {
      const size_t step = static_cast<size_t>(std::min<uint64_t>(n, size_t{1} << 20));
      if (!in_.Skip(step)) return Fail();
      n -= step;
      left_ -= step;
    }
    return true;
  }
  bool Fail() {
    failed_ = true;
    return false;
  }
  bool Byte(uint8_t* b) { return Take(reinterpret_cast<char*>(b), 1); }
  // A big-endian length of `bytes` bytes, also copied to the output.
  bool Length(int bytes, uint64_t* n, bool copy) {
    char raw[8];
    if (!Take(raw, static_cast<size_t>(bytes))) return false;
    if (copy) out_->map.append(raw, static_cast<size_t>(bytes));
    *n = 0;
    for (int i = 0; i < bytes; ++i) *n = *n << 8 | static_cast<uint8_t>(raw[i]);
    return true;
  }
  void Put(uint8_t b) { out_->map.push_back(static_cast<char>(b)); }
  void Put32(uint8_t type, uint64_t n) {
    Put(type);
    for (int shift = 24; shift >= 0; shift -= 8) Put(static_cast<uint8_t>(n >> shift));
  }

  bool Map() {
    uint8_t b = 0;
    if (!Byte(&b)) return false;
    uint64_t n = 0;
    if ((b & 0xf0) == 0x80) {
      n = b & 0x0f;
      Put(b);
    } else if (b == 0xde || b == 0xdf) {
      Put(b);
      if (!Length(b == 0xde ? 2 : 4, &n, true)) return false;
    } else {
      return false;
    }
    for (uint64_t i = 0; i < n; ++i) {
      std::string key;
      if (!Value(0, kMaxKeyBytes, kMaxKeyBytes, &key)) return false;
      size_t bound = bounds_.other;
      bool* cut = nullptr;
      if (key == "stdout" || key == "stderr") {
        bound = bounds_.output;
        cut = key == "stdout" ? &out_->stdout_cut : &out_->stderr_cut;
      } else if (key == "result") {
        bound = bounds_.result;
      }
      bool was_cut = false;
      if (!Value(1, bound, key == "result" ? 0 : bound, nullptr, &was_cut,
                 key == "result" ? &out_->result_bytes : nullptr)) {
        return false;
      }
      if (was_cut && cut) *cut = true;
      if (was_cut && key == "result") out_->result_dropped = true;
    }
    return true;
  }

  // One value, copied to the output. A string or binary longer than `bound`
  // keeps its first `keep` bytes (its header says the kept length) and sets
  // *cut; `text`, when given, gets a string's whole text (keys: short).
  bool Value(int depth, size_t bound, size_t keep, std::string* text, bool* cut = nullptr,
             uint64_t* size = nullptr) {
    if (depth > kMaxDepth) return false;
    uint8_t b = 0;
    if (!Byte(&b)) return false;
    uint64_t n = 0;
    int fixed = -1;  // bytes of payload that follow as they are
    bool is_str = false;
    uint8_t kind32 = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      fixed = 0;
    } else if ((b & 0xe0) == 0xa0) {
      n = b & 0x1f, is_str = true, kind32 = 0xdb;
    } else if (b >= 0xd9 && b <= 0xdb) {
      if (!Length(1 << (b - 0xd9), &n, false)) return false;
      is_str = true, kind32 = 0xdb;
    } else if (b >= 0xc4 && b <= 0xc6) {
      if (!Length(1 << (b - 0xc4), &n, false)) return false;
      kind32 = 0xc6;
    } else if (b == 0xca || b == 0xcb) {
      fixed = b == 0xca ? 4 : 8;
    } else if (b >= 0xcc && b <= 0xd3) {
      fixed = 1 << ((b - 0xcc) & 3);
    } else if (b >= 0xd4 && b <= 0xd8) {
      fixed = 1 + (1 << (b - 0xd4));  // fixext: type and data
    } else if (b >= 0xc7 && b <= 0xc9) {
      Put(b);
      if (!Length(1 << (b - 0xc7), &n, true) || n > bounds_.other) return false;
      return Copy(n + 1);  // its type byte and data: the worker sends none
    } else if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {
      Put(b);
      if (b != 0xdc && b != 0xdd) n = b & 0x0f;
      if ((b == 0xdc || b == 0xdd) && !Length(b == 0xdc ? 2 : 4, &n, true)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!Value(depth + 1, bounds_.other, bounds_.other, nullptr)) return false;
      }
      return true;
    } else if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) {
      Put(b);
      if (b != 0xde && b != 0xdf) n = b & 0x0f;
      if ((b == 0xde || b == 0xdf) && !Length(b == 0xde ? 2 : 4, &n, true)) return false;
      for (uint64_t i = 0; i < 2 * n; ++i) {
        if (!Value(depth + 1, bounds_.other, bounds_.other, nullptr)) return false;
      }
      return true;
    } else {
      return false;  // 0xc1: never used
    }
    if (fixed >= 0) {
      Put(b);
      return Copy(static_cast<uint64_t>(fixed));
    }
    if (size) *size = n;
    const uint64_t kept = n > bound ? std::min<uint64_t>(keep, n) : n;
    if (n > bound && cut) *cut = true;
    Put32(kind32, kept);
    const size_t at = out_->map.size();
    if (!Copy(kept) || !SkipBytes(n - kept)) return false;
    if (text && is_str) text->assign(out_->map, at, static_cast<size_t>(kept));
    return true;
  }

  bool Copy(uint64_t n) {
    const size_t at = out_->map.size();
    out_->map.resize(at + static_cast<size_t>(n));
    return n == 0 || Take(out_->map.data() + at, static_cast<size_t>(n));
  }

  AnswerSource& in_;
  uint64_t left_;
  AnswerBounds bounds_;
  BoundedOutcome* out_ = nullptr;
  bool failed_ = false;
};

}  // namespace ztask::engine

#endif  // ZTASK_ENGINE_BOUNDED_ANSWER_H_
