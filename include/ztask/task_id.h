// TaskId: the 128-bit identity of a task (and of any message), chosen at
// random by whoever creates it, so a client can name a task as a dependency
// a microsecond after submitting it without asking anyone. Printed as 32
// lowercase hex digits.
//
// Thread safety: a plain value. TaskId::Random() is safe from any thread.
#ifndef ZTASK_TASK_ID_H_
#define ZTASK_TASK_ID_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ztask/status.h"

namespace ztask {

struct TaskId {
  uint64_t hi = 0;
  uint64_t lo = 0;

  // A fresh id from the operating system's random source (libsodium), drawn
  // in blocks of 256; a forked child draws its own.
  static TaskId Random();
  // A fresh id for a task: the time in milliseconds since the Unix epoch
  // in its first 48 bits, 80 random bits after. As unlikely to collide as
  // Random() (80 random bits within one millisecond), and ids made later
  // sort later, so that an index of ids (the hub's) grows at its end
  // instead of everywhere at once.
  static TaskId New();
  // Parses exactly 32 hex digits (either case); anything else is an error
  // naming what was wrong.
  static Result<TaskId> FromHex(std::string_view hex);
  // Reads 16 big-endian bytes. REQUIRES: bytes.size() == 16.
  static TaskId FromBytes(std::string_view bytes);

  std::string ToHex() const;
  // 16 big-endian bytes: the wire form.
  std::string ToBytes() const;
  void ToBytes(char out[16]) const;
  bool IsZero() const { return hi == 0 && lo == 0; }

  friend bool operator==(const TaskId&, const TaskId&) = default;
  friend auto operator<=>(const TaskId&, const TaskId&) = default;
};

struct TaskIdHash {
  // Ids are random, so folding the halves is a good hash.
  size_t operator()(const TaskId& id) const noexcept {
    return static_cast<size_t>(id.lo ^ (id.hi * 0x9E3779B97F4A7C15ull));
  }
};

}  // namespace ztask

template <>
struct std::hash<ztask::TaskId> : ztask::TaskIdHash {};

#endif  // ZTASK_TASK_ID_H_
