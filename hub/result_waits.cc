#include "hub/result_waits.h"

#include <algorithm>
#include <limits>

namespace ztask::hub {

std::optional<ResultWaits::Until> ResultWaits::Parse(std::string_view word) {
  if (word == "recorded") return Until::kRecorded;
  if (word == "final") return Until::kFinal;
  return std::nullopt;
}

bool ResultWaits::Park(Wait wait, const std::vector<TaskId>& pending) {
  if (held_.size() >= kMaxWaits || ids_ + pending.size() > kMaxIds) return false;
  const uint64_t key = next_key_++;
  for (const TaskId& id : pending) by_id_[id].push_back(key);
  ids_ += pending.size();
  by_deadline_.emplace(wait.deadline_us, key);
  held_.emplace(key, Held{std::move(wait), pending.size()});
  return true;
}

std::vector<ResultWaits::Wait> ResultWaits::Noted(const TaskId& id, bool final) {
  std::vector<Wait> ready;
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return ready;
  std::vector<uint64_t>& keys = it->second;
  std::vector<uint64_t> done;
  // A wait for "final" stays until the final outcome; any message records.
  std::erase_if(keys, [&](uint64_t key) {
    auto held = held_.find(key);
    if (held == held_.end()) return true;  // released already
    if (held->second.wait.until == Until::kFinal && !final) return false;
    --ids_;
    if (--held->second.remaining == 0) done.push_back(key);
    return true;
  });
  if (keys.empty()) by_id_.erase(it);
  for (uint64_t key : done) ready.push_back(Release(key));
  return ready;
}

std::vector<ResultWaits::Wait> ResultWaits::Expired(int64_t now_us) {
  std::vector<Wait> out;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now_us) {
    const uint64_t key = by_deadline_.begin()->second;
    if (held_.count(key)) {
      out.push_back(Release(key));
    } else {
      by_deadline_.erase(by_deadline_.begin());
    }
  }
  return out;
}

int64_t ResultWaits::NextDeadline() const {
  return by_deadline_.empty() ? std::numeric_limits<int64_t>::max() : by_deadline_.begin()->first;
}

ResultWaits::Wait ResultWaits::Release(uint64_t key) {
  auto held = held_.find(key);
  Wait wait = std::move(held->second.wait);
  ids_ -= held->second.remaining;
  // Its ids still waited for: out of the index (each at most once).
  if (held->second.remaining > 0) {
    for (const TaskId& id : wait.request.task_ids) {
      auto it = by_id_.find(id);
      if (it == by_id_.end()) continue;
      std::erase(it->second, key);
      if (it->second.empty()) by_id_.erase(it);
    }
  }
  for (auto d = by_deadline_.lower_bound(wait.deadline_us);
       d != by_deadline_.end() && d->first == wait.deadline_us; ++d) {
    if (d->second == key) {
      by_deadline_.erase(d);
      break;
    }
  }
  held_.erase(held);
  return wait;
}

}  // namespace ztask::hub
