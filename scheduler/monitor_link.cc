#include "scheduler/monitor_link.h"

namespace ztask::scheduler {

void MonitorLink::Seal() {
  if (builder_.batched() == 0) return;
  const int64_t seq = next_seq_++;
  protocol::Frames batch = builder_.TakeBatch(seq);
  if (enabled_) unacked_.push_back({seq, std::move(batch)});
}

void MonitorLink::Flush(int64_t now_us) {
  Seal();
  if (unacked_.empty()) return;
  if (waiting_since_us_ == 0) waiting_since_us_ = now_us;
  if (sent_ == unacked_.size() && now_us - waiting_since_us_ > kResendAfterUs) {
    // Silence: whatever was sent may be lost. Send it all again, in order.
    sent_ = 0;
    waiting_since_us_ = now_us;
    resent_ += unacked_.size();
    for (Batch& b : unacked_) builder_.Reseal(b.frames);
  }
  while (sent_ < unacked_.size()) {
    protocol::Frames copy = FrameBuilder::ShareFrom(unacked_[sent_].frames, 0);
    if (!protocol::SendFrames(socket_, copy).ok()) return;
    ++sent_;
  }
}

void MonitorLink::Acknowledged(int64_t seq, int64_t now_us) {
  while (!unacked_.empty() && unacked_.front().seq <= seq) {
    unacked_.pop_front();
    if (sent_ > 0) --sent_;
  }
  waiting_since_us_ = unacked_.empty() ? 0 : now_us;
}

}  // namespace ztask::scheduler
