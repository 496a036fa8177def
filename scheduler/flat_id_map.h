// FlatIdMap: a map from task ids to small values, in one flat array with
// open addressing (linear probing over a byte of hash per slot), for the many
// entries the core keeps and never removes: a finished task costs 16 bytes
// of id, 4 of value and a byte a slot, at most 7/8 full, instead of a node allocation and a bucket
// pointer per entry. A lookup of an id that is not there (every submission
// makes one) reads bytes until an empty one, seldom past one cache line.
//
// The all-zero id marks an empty slot, so it is kept apart.
//
// Thread safety: none.
#ifndef ZTASK_SCHEDULER_FLAT_ID_MAP_H_
#define ZTASK_SCHEDULER_FLAT_ID_MAP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ztask/task_id.h"

namespace ztask::scheduler {

template <class V>
class FlatIdMap {
 public:
  size_t size() const { return size_ + (zero_ ? 1 : 0); }

  const V* find(const TaskId& id) const {
    if (id.IsZero()) return zero_ ? &*zero_ : nullptr;
    if (ids_.empty()) return nullptr;
    const uint64_t h = Mix(id);
    const uint8_t tag = Tag(h);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (control_[i] == tag && ids_[i] == id) return &values_[i];
      if (control_[i] == kEmpty) return nullptr;
    }
  }
  bool contains(const TaskId& id) const { return find(id) != nullptr; }

  // Adds id -> value; false (and no change) when id is there already.
  bool emplace(const TaskId& id, const V& value) {
    if (id.IsZero()) {
      if (zero_) return false;
      zero_ = value;
      return true;
    }
    if ((size_ + 1) * 8 > ids_.size() * 7) Grow();
    const uint64_t h = Mix(id);
    const uint8_t tag = Tag(h);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (control_[i] == tag && ids_[i] == id) return false;
      if (control_[i] == kEmpty) {
        control_[i] = tag;
        ids_[i] = id;
        values_[i] = value;
        ++size_;
        return true;
      }
    }
  }

 private:
  static constexpr uint8_t kEmpty = 0;

  // Test ids are often sequential: mix every bit into the home slot.
  static uint64_t Mix(const TaskId& id) {
    uint64_t x = id.lo ^ (id.hi * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  }
  // A byte per slot, never 0 for a full slot: probing reads these bytes (64
  // to a cache line) and looks at a key only when its byte matches.
  static uint8_t Tag(uint64_t h) { return static_cast<uint8_t>(h >> 57) | 0x80; }

  void Grow() {
    std::vector<TaskId> old_ids = std::move(ids_);
    std::vector<V> old_values = std::move(values_);
    std::vector<uint8_t> old_control = std::move(control_);
    const size_t capacity = old_ids.empty() ? 64 : old_ids.size() * 2;
    ids_.assign(capacity, TaskId{});
    values_.assign(capacity, V{});
    control_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old_ids.size(); ++i) {
      if (old_control[i] != kEmpty) emplace(old_ids[i], old_values[i]);
    }
  }

  // Three arrays, not one of structs, so a 4-byte value costs 4 bytes.
  std::vector<TaskId> ids_;
  std::vector<V> values_;
  std::vector<uint8_t> control_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::optional<V> zero_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_FLAT_ID_MAP_H_
