// RecentIdMap: a FlatIdMap that keeps only the latest `capacity` ids added,
// letting go of the oldest first, for what a long-lived process remembers
// per task (outcomes, replies) without growing with the history. Adding an
// id already there changes nothing, and does not make it younger.
//
// Thread safety: none.
#ifndef ZTASK_BASE_RECENT_ID_MAP_H_
#define ZTASK_BASE_RECENT_ID_MAP_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>

#include "base/flat_id_map.h"

namespace ztask {

template <class V>
class RecentIdMap {
 public:
  explicit RecentIdMap(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

  const V* find(const TaskId& id) const { return map_.find(id); }
  bool contains(const TaskId& id) const { return map_.contains(id); }
  void prefetch(const TaskId& id) const { map_.prefetch(id); }
  size_t size() const { return map_.size(); }
  size_t capacity() const { return capacity_; }
  // Whether an id was ever let go of.
  bool forgot() const { return forgot_; }

  // Adds id -> value unless id is there; returns whether it was added.
  bool try_emplace(const TaskId& id, V value) {
    if (!map_.try_emplace(id, std::move(value)).second) return false;
    order_.push_back(id);
    Trim();
    return true;
  }
  void set_capacity(size_t capacity) {
    capacity_ = std::max<size_t>(1, capacity);
    Trim();
  }

 private:
  void Trim() {
    while (order_.size() > capacity_) {
      map_.erase(order_.front());
      order_.pop_front();
      forgot_ = true;
    }
  }

  size_t capacity_;
  FlatIdMap<V> map_;
  std::deque<TaskId> order_;  // oldest first
  bool forgot_ = false;
};

}  // namespace ztask

#endif  // ZTASK_BASE_RECENT_ID_MAP_H_
