// The ready tasks' order and the wide tasks' groups (ready_queue.h).
#include "scheduler/ready_queue.h"

#include <cassert>

namespace ztask::scheduler {

void ReadyQueue::Add(const Key& key, const Group* group) {
  ++count_;
  grew_ = true;
  // Most tasks come ready as they are submitted, each after all those
  // waiting: inserted with the end as the hint, such a key costs no walk
  // down the tree (a miss at each level once many wait); another one, a
  // comparison more.
  if (group == nullptr) {
    walk_.insert(walk_.end(), key);
    return;
  }
  std::set<Key>& members = groups_[{group->slots, group->units}];
  if (members.empty() || key < *members.begin()) walk_.insert(walk_.end(), key);
  members.insert(members.end(), key);
}

void ReadyQueue::Remove(const Key& key, const Group* group) {
  assert(count_ > 0);
  --count_;
  walk_.erase(key);
  if (group == nullptr) return;
  auto g = groups_.find({group->slots, group->units});
  assert(g != groups_.end());
  g->second.erase(key);
  if (g->second.empty()) {
    groups_.erase(g);
  } else {
    walk_.insert(*g->second.begin());  // the next of the group, if not there yet
  }
}

ReadyQueue::Iterator ReadyQueue::Take(Iterator at, const Group* group) {
  if (group == nullptr) {  // the common task: no lookup by key
    --count_;
    return walk_.erase(at);
  }
  const Key key = *at;
  Remove(key, group);
  return walk_.lower_bound(key);
}

}  // namespace ztask::scheduler
