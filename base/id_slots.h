// IdSlots: values by task id, each in a slot of a pooled array that never
// moves, for what a process keeps per live task and looks up several times
// in a task's life (the scheduler's tasks). A reference to a value stays
// valid until its id is erased, whatever else is added or erased
// (std::unordered_map's promise), without a node allocation per entry.
//
// A lookup costs two cache lines, as a node map's does, but divides
// nothing and follows no chain: an index of 8-byte entries (the key's hash,
// 32 bits, and its slot number), open addressing with linear probing, at
// most 7/8 full; then the slot, which holds the id beside the value.
// Erasing leaves no tombstone (the run after the hole moves back), and
// growing reads only the index.
//
// An erased slot is reset to T{} and taken again by the next insert, the
// latest freed first, while its cache lines are likely still warm: a table
// that only turns over allocates nothing. The slots stay made while any
// value lives (at the most there ever were at once), and are all given
// back when the last one is erased after a burst (past kKeepSlots).
//
// Thread safety: none.
#ifndef ZTASK_BASE_ID_SLOTS_H_
#define ZTASK_BASE_ID_SLOTS_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/prefetch.h"
#include "ztask/task_id.h"

namespace ztask {

template <class T>
class IdSlots {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Slots made so far (live and free).
  size_t slots() const { return made_; }

  T* find(const TaskId& id) {
    const size_t at = Lookup(id);
    return at == kNone ? nullptr : &Slot(SlotOf(index_[at])).value;
  }
  const T* find(const TaskId& id) const {
    const size_t at = Lookup(id);
    return at == kNone ? nullptr : &Slot(SlotOf(index_[at])).value;
  }
  bool contains(const TaskId& id) const { return Lookup(id) != kNone; }
  // Starts loading the index entry a lookup of id begins with.
  void prefetch(const TaskId& id) const {
    if (!index_.empty()) PrefetchLine(&index_[Hash(id) & mask_]);
  }
  // REQUIRES: contains(id).
  T& at(const TaskId& id) {
    T* value = find(id);
    assert(value);
    return *value;
  }

  // The value of id, a fresh T{} when it was not there.
  T& operator[](const TaskId& id) {
    if ((size_ + 1) * 8 > index_.size() * 7) Grow();
    const uint32_t h = Hash(id);
    size_t i = h & mask_;
    for (; index_[i] != kEmpty; i = (i + 1) & mask_) {
      if (HashOf(index_[i]) == h && Slot(SlotOf(index_[i])).id == id) {
        return Slot(SlotOf(index_[i])).value;
      }
    }
    const uint32_t slot = Take();
    Slot(slot).id = id;
    index_[i] = Entry(h, slot);
    ++size_;
    return Slot(slot).value;
  }

  // Removes id; its value is reset to T{}. False when it was not there.
  bool erase(const TaskId& id) {
    const size_t at = Lookup(id);
    if (at == kNone) return false;
    const uint32_t freed = SlotOf(index_[at]);
    // The entries after the hole, to the end of the run: one whose home is
    // at or before the hole (its probe passed the hole) moves into it, and
    // its place is the hole from then on.
    size_t hole = at;
    for (size_t i = (at + 1) & mask_; index_[i] != kEmpty; i = (i + 1) & mask_) {
      const size_t home = HashOf(index_[i]) & mask_;
      if (((i - home) & mask_) >= ((i - hole) & mask_)) {
        index_[hole] = index_[i];
        hole = i;
      }
    }
    index_[hole] = kEmpty;
    Slot(freed) = Held{};
    if (--size_ == 0 && made_ > kKeepSlots) {  // a burst is over: its memory goes
      index_ = {};
      mask_ = 0;
      blocks_.clear();
      free_ = {};
      made_ = 0;
      return true;
    }
    free_.push_back(freed);
    return true;
  }

 private:
  struct Held {
    TaskId id;
    T value{};
  };
  static constexpr uint32_t kBlockBits = 8;
  // Slots kept when the table empties: a trickle of tasks (one in, one
  // out) reuses its slots instead of making them anew for each task.
  static constexpr size_t kKeepSlots = 1024;
  static constexpr uint32_t kBlock = uint32_t{1} << kBlockBits;
  static constexpr uint64_t kEmpty = 0;
  static constexpr size_t kNone = ~size_t{0};

  // Every bit of the id into 32: test ids are often sequential.
  static uint32_t Hash(const TaskId& id) {
    uint64_t x = id.lo ^ (id.hi * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<uint32_t>(x ^ (x >> 29));
  }
  // An index entry: the hash above, the slot number + 1 below (0: empty).
  static uint64_t Entry(uint32_t hash, uint32_t slot) {
    return (uint64_t{hash} << 32) | (uint64_t{slot} + 1);
  }
  static uint32_t HashOf(uint64_t entry) { return static_cast<uint32_t>(entry >> 32); }
  static uint32_t SlotOf(uint64_t entry) { return static_cast<uint32_t>(entry) - 1; }

  Held& Slot(uint32_t slot) { return blocks_[slot >> kBlockBits][slot & (kBlock - 1)]; }
  const Held& Slot(uint32_t slot) const { return blocks_[slot >> kBlockBits][slot & (kBlock - 1)]; }

  size_t Lookup(const TaskId& id) const {
    if (size_ == 0) return kNone;
    const uint32_t h = Hash(id);
    for (size_t i = h & mask_; index_[i] != kEmpty; i = (i + 1) & mask_) {
      if (HashOf(index_[i]) == h && Slot(SlotOf(index_[i])).id == id) return i;
    }
    return kNone;
  }

  uint32_t Take() {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      return slot;
    }
    if (made_ % kBlock == 0) blocks_.push_back(std::make_unique<Held[]>(kBlock));
    return static_cast<uint32_t>(made_++);
  }

  // Twice the entries (64 the first time), each placed again by its hash.
  void Grow() {
    std::vector<uint64_t> old = std::move(index_);
    index_.assign(old.empty() ? 64 : old.size() * 2, kEmpty);
    mask_ = index_.size() - 1;
    for (uint64_t entry : old) {
      if (entry == kEmpty) continue;
      size_t i = HashOf(entry) & mask_;
      while (index_[i] != kEmpty) i = (i + 1) & mask_;
      index_[i] = entry;
    }
  }

  std::vector<uint64_t> index_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::vector<std::unique_ptr<Held[]>> blocks_;
  std::vector<uint32_t> free_;  // erased slots, the latest last
  size_t made_ = 0;
};

}  // namespace ztask

#endif  // ZTASK_BASE_ID_SLOTS_H_
