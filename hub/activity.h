// Activity: what the hub tells dashboards and metrics, kept as the monitor's
// messages are applied: totals since the hub started, a histogram of task
// durations, the task each engine runs, and a feed of the latest finished
// tasks that a reader follows by position. Each change costs a few
// operations; a reader's question costs what it is answered, at most
// kMaxPage entries (and, for a sample, a look at each entry it covers for
// failures), so however often dashboards ask, the hub's work per task stays
// the same.
//
// Thread safety: owned by the hub's loop thread.
#ifndef ZTASK_HUB_ACTIVITY_H_
#define ZTASK_HUB_ACTIVITY_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/messages.h"

namespace ztask::hub {

class Activity {
 public:
  // Finished tasks kept in the feed, and the most a reader gets at once.
  static constexpr size_t kFeedSize = 65536;
  static constexpr size_t kMaxPage = 20000;

  Activity();

  static constexpr size_t kMaxLabels = 256;

  void Submitted(const std::string& label) {
    ++submitted_total_;
    ++CountOf(label).submitted;
  }
  void Assigned(int32_t engine_id, const TaskId& id) { current_[engine_id] = id; }
  // An attempt that ended without being final: failed and queued again
  // (`retried`), or sent back unrun.
  void Requeued(std::optional<int32_t> engine_id, const TaskId& id, bool retried);
  // `record` has just become final.
  void Finished(const protocol::TaskRecord& record);
  void EngineGone(int32_t engine_id) { current_.erase(engine_id); }
  void Scheduler(const protocol::SchedulerStats& stats, int64_t now_us) {
    scheduler_ = stats;
    scheduler_at_us_ = now_us;
  }

  // Fills what the activity knows: totals, histogram, scheduler, feed,
  // current tasks (the record counts are the store's).
  void Fill(const protocol::StatsRequest& request, int64_t now_us,
            protocol::StatsReply* reply) const;

 private:
  int64_t submitted_total_ = 0, ok_total_ = 0, failed_total_ = 0, retries_total_ = 0;
  std::vector<double> bounds_;
  std::vector<int64_t> buckets_;  // one more than bounds_
  double duration_sum_ = 0;
  std::optional<protocol::SchedulerStats> scheduler_;
  int64_t scheduler_at_us_ = 0;
  // Into `out`, at most `limit` of the feed from `start` on, in its order:
  // every failure (the newest `limit` of them), then the rest evenly spaced.
  template <class At>
  void Sample(int64_t start, int64_t limit, const At& at,
              std::vector<protocol::FeedEntry>* out) const;
  std::deque<protocol::FeedEntry> feed_;  // positions feed_end_ - size + 1 .. feed_end_
  int64_t feed_end_ = 0;
  std::unordered_map<int32_t, TaskId> current_;
  // The count of a label's prefix ("(none)" without one; "(other)" past
  // kMaxLabels prefixes).
  protocol::LabelCount& CountOf(const std::string& label);
  std::unordered_map<std::string, protocol::LabelCount> labels_;
};

}  // namespace ztask::hub

#endif  // ZTASK_HUB_ACTIVITY_H_
