// FlatIdMap: a map from task ids to small values, in one flat array with
// open addressing (linear probing), for the many entries the core keeps and
// never removes: a finished task costs 24 bytes a slot, at most 7/8 full,
// instead of a node allocation and a bucket pointer per entry.
//
// The all-zero id marks an empty slot, so it is kept apart.
//
// Thread safety: none.
#ifndef ZTASK_SCHEDULER_FLAT_ID_MAP_H_
#define ZTASK_SCHEDULER_FLAT_ID_MAP_H_

#include <cstddef>
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
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return &slots_[i].value;
      if (slots_[i].id.IsZero()) return nullptr;
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
    if ((size_ + 1) * 8 > slots_.size() * 7) Grow();
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return false;
      if (slots_[i].id.IsZero()) {
        slots_[i] = {id, value};
        ++size_;
        return true;
      }
    }
  }

 private:
  struct Slot {
    TaskId id;
    V value{};
  };

  size_t Home(const TaskId& id) const { return TaskIdHash{}(id) & mask_; }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (!s.id.IsZero()) emplace(s.id, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::optional<V> zero_;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_FLAT_ID_MAP_H_
