// FlatIdMap: a map from task ids to values, in one flat array with open
// addressing (linear probing over a byte of hash per slot), for the many
// entries a process keeps by task id: a slot costs 16 bytes of id, the value
// and a byte, at most 7/8 full, instead of a node allocation and a bucket
// pointer per entry. A lookup reads bytes until its own or an empty one,
// seldom past one cache line, then one id: where std::unordered_map divides
// by a prime and follows a pointer to a node for each key it compares.
//
// Erasing leaves no tombstone: the entries after the erased one in its run
// move back into the hole where their probe passes it, so a table that
// only turns over (a window of the latest ids) is never rebuilt, and never
// holds its old and new arrays at once, which an allocator keeps as a step
// of resident memory. Values move when the table grows and when an entry
// is erased: a pointer to one lasts until the next insert or erase. The
// all-zero id marks an empty slot, so it is kept apart.
//
// Thread safety: none.
#ifndef ZTASK_BASE_FLAT_ID_MAP_H_
#define ZTASK_BASE_FLAT_ID_MAP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/prefetch.h"
#include "ztask/task_id.h"

namespace ztask {

template <class V>
class FlatIdMap {
  static_assert(!std::is_same_v<V, bool>, "std::vector<bool> packs bits: use uint8_t");

 public:
  size_t size() const { return size_ + (zero_ ? 1 : 0); }
  bool empty() const { return size() == 0; }
  // Slots in the table (a power of two, or 0 before the first insert).
  size_t capacity() const { return ids_.size(); }

  V* find(const TaskId& id) { return const_cast<V*>(std::as_const(*this).find(id)); }
  const V* find(const TaskId& id) const {
    if (id.IsZero()) return zero_ ? &*zero_ : nullptr;
    const size_t slot = Lookup(id);
    return slot == kNone ? nullptr : &values_[slot];
  }
  bool contains(const TaskId& id) const { return find(id) != nullptr; }
  // Starts loading the cache lines a lookup of id begins with (its home
  // slot's byte, id and value), so that the lookups of a batch, each a
  // miss in a table past the cache, overlap instead of waiting in turn.
  void prefetch(const TaskId& id) const {
    if (ids_.empty()) return;
    const size_t home = Mix(id) & mask_;
    PrefetchLine(&control_[home]);
    PrefetchLine(&ids_[home]);
    PrefetchLine(&values_[home]);
  }

  // Adds id -> V(args...) unless id is there: the value, and whether it was
  // added. The pointer lasts until the next insert or erase.
  template <class... Args>
  std::pair<V*, bool> try_emplace(const TaskId& id, Args&&... args) {
    if (id.IsZero()) {
      if (zero_) return {&*zero_, false};
      zero_.emplace(std::forward<Args>(args)...);
      return {&*zero_, true};
    }
    if ((size_ + 1) * 8 > ids_.size() * 7) Grow();
    const uint64_t h = Mix(id);
    const uint8_t tag = Tag(h);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (control_[i] == tag && ids_[i] == id) return {&values_[i], false};
      if (control_[i] == kEmpty) {
        control_[i] = tag;
        ids_[i] = id;
        values_[i] = V(std::forward<Args>(args)...);
        ++size_;
        return {&values_[i], true};
      }
    }
  }
  // Adds id -> value; false (and no change) when id is there already.
  bool emplace(const TaskId& id, V value) { return try_emplace(id, std::move(value)).second; }

  // Removes id and its value; false when it was not there.
  bool erase(const TaskId& id) {
    if (id.IsZero()) {
      const bool had = zero_.has_value();
      zero_.reset();
      return had;
    }
    const size_t slot = Lookup(id);
    if (slot == kNone) return false;
    // The entries after the hole, to the end of the run: one whose home
    // slot is at or before the hole (its probe passed the hole) moves into
    // it, and its slot is the hole from then on.
    size_t hole = slot;
    for (size_t i = (slot + 1) & mask_; control_[i] != kEmpty; i = (i + 1) & mask_) {
      const size_t home = Mix(ids_[i]) & mask_;
      if (((i - home) & mask_) >= ((i - hole) & mask_)) {
        control_[hole] = control_[i];
        ids_[hole] = ids_[i];
        values_[hole] = std::move(values_[i]);
        hole = i;
      }
    }
    control_[hole] = kEmpty;
    ids_[hole] = TaskId{};
    values_[hole] = V{};
    --size_;
    return true;
  }

  // Calls f(id, value) for every entry, in no order. f must not insert or
  // erase.
  template <class F>
  void for_each(F&& f) const {
    if (zero_) f(TaskId{}, *zero_);
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (control_[i] & kFull) f(ids_[i], values_[i]);
    }
  }
  template <class F>
  void for_each(F&& f) {
    if (zero_) f(TaskId{}, *zero_);
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (control_[i] & kFull) f(std::as_const(ids_[i]), values_[i]);
    }
  }

 private:
  static constexpr uint8_t kEmpty = 0, kFull = 0x80;
  static constexpr size_t kNone = ~size_t{0};


  // Test ids are often sequential: mix every bit into the home slot.
  static uint64_t Mix(const TaskId& id) {
    uint64_t x = id.lo ^ (id.hi * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  }
  // A byte per slot, kFull set for a full slot: probing reads these bytes
  // (64 to a cache line) and looks at a key only when its byte matches.
  static uint8_t Tag(uint64_t h) { return static_cast<uint8_t>(h >> 57) | kFull; }

  // The slot of a nonzero id, or kNone.
  size_t Lookup(const TaskId& id) const {
    if (ids_.empty()) return kNone;
    const uint64_t h = Mix(id);
    const uint8_t tag = Tag(h);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (control_[i] == tag && ids_[i] == id) return i;
      if (control_[i] == kEmpty) return kNone;
    }
  }

  // Twice the slots (64 the first time), every entry placed again.
  void Grow() {
    std::vector<TaskId> old_ids = std::move(ids_);
    std::vector<V> old_values = std::move(values_);
    std::vector<uint8_t> old_control = std::move(control_);
    const size_t capacity = old_ids.empty() ? 64 : old_ids.size() * 2;
    ids_.assign(capacity, TaskId{});
    values_.clear();
    values_.resize(capacity);
    control_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old_ids.size(); ++i) {
      if (old_control[i] & kFull) try_emplace(old_ids[i], std::move(old_values[i]));
    }
  }

  // Three arrays, not one of structs, so a 4-byte value costs 4 bytes.
  std::vector<TaskId> ids_;
  std::vector<V> values_;
  std::vector<uint8_t> control_;
  size_t mask_ = 0;
  size_t size_ = 0;  // live entries
  std::optional<V> zero_;
};

}  // namespace ztask

#endif  // ZTASK_BASE_FLAT_ID_MAP_H_
