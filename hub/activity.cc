#include "hub/activity.h"

#include <algorithm>
#include <map>

namespace ztask::hub {

Activity::Activity()
    : bounds_{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 7200},
      buckets_(bounds_.size() + 1, 0) {}

void Activity::Requeued(std::optional<int32_t> engine_id, const TaskId& id, bool retried) {
  if (retried) ++retries_total_;
  if (!engine_id) return;
  auto it = current_.find(*engine_id);
  if (it != current_.end() && it->second == id) current_.erase(it);
}

protocol::LabelCount& Activity::CountOf(const std::string& label) {
  std::string_view prefix = label;
  prefix = prefix.substr(0, std::min(prefix.find_first_of("/:"), size_t{64}));
  if (prefix.empty()) prefix = "(none)";
  auto it = labels_.find(std::string(prefix));
  if (it != labels_.end()) return it->second;
  if (labels_.size() >= kMaxLabels) prefix = "(other)";
  protocol::LabelCount& count = labels_[std::string(prefix)];
  count.prefix = prefix;
  return count;
}

void Activity::Finished(const protocol::TaskRecord& r) {
  const bool ok = r.state == TaskState::kOk;
  ++(ok ? ok_total_ : failed_total_);
  ++(ok ? CountOf(r.label).ok : CountOf(r.label).failed);
  if (r.engine_id) {
    auto it = current_.find(*r.engine_id);
    if (it != current_.end() && it->second == r.id) current_.erase(it);
  }
  const int64_t started = r.started_us.value_or(0), completed = r.completed_us.value_or(0);
  if (started > 0 && completed >= started) {
    const double seconds = static_cast<double>(completed - started) / 1e6;
    const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
    ++buckets_[static_cast<size_t>(bucket)];
    duration_sum_ += seconds;
  }
  protocol::FeedEntry e;
  e.id = r.id;
  e.engine_id = r.engine_id;
  e.ok = ok;
  e.error_type = r.error_type;
  e.attempts = r.attempts;
  e.label = r.label;
  e.submitted_us = r.submitted_us;
  e.started_us = started;
  e.completed_us = completed;
  e.dependencies = static_cast<int32_t>(r.routing.after.ids.size() + r.routing.follow.ids.size());
  if (feed_.size() == kFeedSize) feed_.pop_front();
  feed_.push_back(std::move(e));
  ++feed_end_;
}

void Activity::Fill(const protocol::StatsRequest& request, int64_t now_us,
                    protocol::StatsReply* reply) const {
  reply->submitted_total = submitted_total_;
  reply->ok_total = ok_total_;
  reply->failed_total = failed_total_;
  reply->retries_total = retries_total_;
  reply->bucket_bounds = bounds_;
  reply->bucket_counts = buckets_;
  reply->duration_sum = duration_sum_;
  reply->scheduler = scheduler_;
  if (scheduler_) reply->scheduler_age_us = now_us - scheduler_at_us_;
  std::map<int32_t, TaskId> sorted(current_.begin(), current_.end());
  for (const auto& [engine, id] : sorted) reply->current.push_back({engine, id});
  for (const auto& [prefix, count] : labels_) reply->labels.push_back(count);
  std::sort(reply->labels.begin(), reply->labels.end(),
            [](const auto& a, const auto& b) { return a.prefix < b.prefix; });
  reply->feed = feed_end_;
  if (!request.after) return;
  // A position past the end is a reader of an earlier hub: it gets the feed
  // from the start of this one's.
  const int64_t after = std::clamp<int64_t>(*request.after, 0, feed_end_);
  const int64_t first_kept = feed_end_ - static_cast<int64_t>(feed_.size()) + 1;
  const int64_t limit = std::clamp<int64_t>(request.limit.value_or(1000), 0, kMaxPage);
  const int64_t start = std::max(after + 1, first_kept);
  const auto at = [&](int64_t pos) -> const protocol::FeedEntry& {
    return feed_[static_cast<size_t>(pos - first_kept)];
  };
  if (request.sample.value_or(false) && feed_end_ - start + 1 > limit) {
    Sample(start, limit, at, &reply->finished);
  } else {
    for (int64_t pos = std::max(start, feed_end_ - limit + 1); pos <= feed_end_; ++pos) {
      reply->finished.push_back(at(pos));
    }
  }
  reply->missed = feed_end_ - after - static_cast<int64_t>(reply->finished.size());
}

template <class At>
void Activity::Sample(int64_t start, int64_t limit, const At& at,
                      std::vector<protocol::FeedEntry>* out) const {
  const int64_t n = feed_end_ - start + 1;
  // The failures, the newest of them when there are more than `limit`.
  std::vector<int64_t> failures;
  for (int64_t pos = feed_end_; pos >= start && static_cast<int64_t>(failures.size()) < limit;
       --pos) {
    if (!at(pos).ok) failures.push_back(pos);
  }
  std::reverse(failures.begin(), failures.end());
  // The rest evenly spaced over the range, its newest last; a pick that
  // lands on a failure is that failure, already taken.
  const int64_t left = limit - static_cast<int64_t>(failures.size());
  auto failure = failures.begin();
  for (int64_t k = 0; k < left; ++k) {
    const int64_t pick = start + (k + 1) * n / left - 1;
    for (; failure != failures.end() && *failure <= pick; ++failure) out->push_back(at(*failure));
    if (at(pick).ok) out->push_back(at(pick));
  }
  for (; failure != failures.end(); ++failure) out->push_back(at(*failure));
}

}  // namespace ztask::hub
