// The engine's ledger (engine/ledger.h).
#include "engine/ledger.h"

#include <utility>

namespace ztask::engine {

Ledger::Ledger(size_t keep_replies, size_t keep_bytes, size_t batch_replies, size_t batch_bytes)
    : keep_replies_(keep_replies),
      keep_bytes_(keep_bytes),
      batch_replies_(batch_replies),
      batch_bytes_(batch_bytes) {}

Ledger::Arrival Ledger::Arrive(const TaskId& id, int32_t attempt, int64_t now_us) {
  if (queued_.contains(id)) return Arrival::kDuplicate;
  if (const Kept* kept = KeptFor(id); kept && kept->attempt >= attempt) {
    Queue(*kept, now_us);
    return Arrival::kAnswered;
  }
  queued_.emplace(id, 1);
  return Arrival::kQueued;
}

bool Ledger::MayRun(const std::optional<TaskId>& run_after) const {
  if (!run_after) return true;
  const Kept* before = KeptFor(*run_after);
  return before != nullptr && before->ok;
}

void Ledger::Reply(const TaskId& id, int32_t attempt, bool ran_ok, std::vector<std::string> frames,
                   int64_t now_us) {
  Kept kept{id, attempt, ran_ok, std::make_shared<const std::vector<std::string>>(std::move(frames)),
            0};
  for (const auto& f : *kept.frames) kept.bytes += f.size();
  Queue(kept, now_us);
  kept_bytes_ += kept.bytes;
  kept_.push_back(std::move(kept));
  *kept_by_id_.try_emplace(kept_.back().id).first = &kept_.back();
  while (kept_.size() > 1 && (kept_.size() > keep_replies_ || kept_bytes_ > keep_bytes_)) {
    const Kept& oldest = kept_.front();
    if (const Kept** latest = kept_by_id_.find(oldest.id); latest && *latest == &oldest) {
      kept_by_id_.erase(oldest.id);
    }
    kept_bytes_ -= oldest.bytes;
    kept_.pop_front();
  }
}

size_t Ledger::ResendAll(int64_t now_us) {
  for (const Kept& kept : kept_) Queue(kept, now_us);
  return kept_.size();
}

bool Ledger::FlushDue(int64_t now_us) const {
  if (unsent_.empty()) return false;
  return unsent_.size() >= kFlushReplies ||
         now_us - unsent_since_us_ >= kFlushAfterUs;
}

std::vector<Ledger::Frames> Ledger::TakeUnsent() {
  std::vector<Frames> batch;
  size_t bytes = 0;
  while (!unsent_.empty() && batch.size() < batch_replies_) {
    auto& [frames, reply_bytes] = unsent_.front();
    if (!batch.empty() && bytes + reply_bytes > batch_bytes_) break;
    bytes += reply_bytes;
    batch.push_back(std::move(frames));
    unsent_.pop_front();
  }
  unsent_bytes_ -= bytes;
  return batch;
}

const Ledger::Kept* Ledger::KeptFor(const TaskId& id) const {
  const Kept* const* kept = kept_by_id_.find(id);
  return kept ? *kept : nullptr;
}

void Ledger::Queue(const Kept& kept, int64_t now_us) {
  if (unsent_.empty()) unsent_since_us_ = now_us;
  unsent_bytes_ += kept.bytes;
  unsent_.emplace_back(kept.frames, kept.bytes);
}

}  // namespace ztask::engine
