// The ready tasks' order and the wide tasks' groups (ready_queue.h).
#include "scheduler/ready_queue.h"

#include <cassert>

namespace ztask::scheduler {

void ReadyQueue::Add(const Key& key, const Group* group) {
  ++count_;
  grew_ = true;
  if (group == nullptr) {
    walk_.insert(key);
    return;
  }
  std::set<Key>& members = groups_[{group->slots, group->units}];
  if (members.empty() || key < *members.begin()) walk_.insert(key);
  members.insert(key);
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
