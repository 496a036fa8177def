// The fence's decisions (engine/fence.h).
#include "engine/fence.h"

namespace ztask::engine {

void Fence::Registered(int64_t date_us, int64_t sent_us, int64_t window_us) {
  registered_date_us_ = date_us;
  window_us_.store(window_us);
  HeardFromHub(sent_us);
}

void Fence::BeatSent(int64_t date_us, int64_t sent_us) {
  beats_sent_.emplace_back(date_us, sent_us);
  if (beats_sent_.size() > kBeatsKept) beats_sent_.pop_front();
}

bool Fence::BeatAnswered(int64_t parent_date_us, int64_t now_us) {
  for (const auto& [date_us, sent_us] : beats_sent_) {
    if (date_us != parent_date_us) continue;
    const bool was_fenced = Fenced(now_us);
    HeardFromHub(sent_us);
    return was_fenced && !Fenced(now_us);
  }
  return false;
}

Fence::Refusal Fence::Refused(int64_t parent_date_us, int64_t now_us) {
  // Refusals of heartbeats sent before the latest registration may still be
  // on their way: they say nothing of this life.
  if (parent_date_us <= registered_date_us_) return Refusal::kStale;
  // Silent past the hub's window: it removed this engine, and the scheduler
  // gave its tasks to others or failed them.
  if (Fenced(now_us)) {
    removals_.fetch_add(1);
    return Refusal::kRegisterAndDrop;
  }
  return Refusal::kRegister;
}

void Fence::HeardFromHub(int64_t sent_us) {
  // Only the loop thread writes; the loop keeps the latest.
  if (sent_us > heard_us_.load()) heard_us_.store(sent_us);
}

}  // namespace ztask::engine
