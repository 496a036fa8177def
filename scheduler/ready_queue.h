// ReadyQueue: the tasks whose dependencies are met and that wait for an
// engine, in the order the core places them: higher priority first, then
// the order they were submitted. It holds keys only; the tasks stay in the
// core, which walks the queue (begin/end) in Pump and takes what it places.
//
// Wide tasks (more than one slot, or units of a resource) that may go to any
// engine wait in the group of those asking the same slots and units, and
// only the first of each group is walked: where it cannot go, none of the
// others can, so thousands waiting for GPUs cost a placement round nothing.
// Adding never removes a key from the walk (a group's newcomer that comes
// before its first joins the walk beside it), so a walk in progress is never
// left holding an erased element; only Take and Remove remove.
//
// It must not know tasks, engines or the clock: what a task needs is given
// to it as plain values.
//
// Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_READY_QUEUE_H_
#define ZTASK_SCHEDULER_READY_QUEUE_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ztask/task_id.h"

namespace ztask::scheduler {

class ReadyQueue {
 public:
  struct Key {
    int64_t neg_priority;  // higher priority: smaller, first
    uint64_t seq;          // submission order among equals
    TaskId id;
    bool operator<(const Key& o) const {
      return neg_priority != o.neg_priority ? neg_priority < o.neg_priority : seq < o.seq;
    }
  };
  // Units of each resource (by the core's resource index), none zero.
  using Units = std::vector<std::pair<uint16_t, int64_t>>;
  // What a grouped task asks: its slots and units. Null: not grouped.
  struct Group {
    uint32_t slots;
    const Units& units;
  };
  using Iterator = std::set<Key>::const_iterator;

  // Adds a task not in the queue. REQUIRES: its key is unique (by seq).
  void Add(const Key& key, const Group* group);
  // Removes a task added with the same key and group; the next of its group
  // joins the walk. REQUIRES: it is in the queue.
  void Remove(const Key& key, const Group* group);
  // Removes the task at `at` (added with `group`) during a walk; returns
  // where the walk goes on, the next of its group included when that one
  // comes after it.
  Iterator Take(Iterator at, const Group* group);

  // The walk: the keys of ungrouped tasks and of each group's first, in order.
  Iterator begin() const { return walk_.begin(); }
  Iterator end() const { return walk_.end(); }
  // Every task in the queue, grouped ones included.
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Whether a task was added since ClearGrew: a walk that placed tasks may
  // have passed over newcomers, and walks again.
  bool grew() const { return grew_; }
  void ClearGrew() { grew_ = false; }

 private:
  using GroupKey = std::pair<uint32_t, Units>;

  std::set<Key> walk_;
  std::map<GroupKey, std::set<Key>> groups_;
  size_t count_ = 0;
  bool grew_ = false;
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_READY_QUEUE_H_
