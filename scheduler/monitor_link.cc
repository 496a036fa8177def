#include "scheduler/monitor_link.h"

namespace ztask::scheduler {

void MonitorLink::Seal() {
  if (builder_.batched() == 0) return;
  const int64_t seq = next_seq_++;
  protocol::Frames batch = builder_.TakeBatch(seq);
  if (!enabled_) return;
  unacked_.emplace(seq, Batch{std::move(batch), 0});
  ++unsent_;
}

void MonitorLink::Flush(int64_t now_us) {
  Seal();
  for (auto& [seq, batch] : unacked_) {
    const bool due = batch.sent_us == 0 || now_us - batch.sent_us > kResendAfterUs;
    if (!due) continue;
    if (batch.sent_us != 0) {  // silence: it may be lost, so it goes again
      builder_.Reseal(batch.frames);
      ++resent_;
      ++unsent_;
      batch.sent_us = 0;
    }
    protocol::Frames copy = FrameBuilder::ShareFrom(batch.frames, 0);
    if (!protocol::SendFrames(socket_, copy).ok()) return;  // in order: later ones wait
    batch.sent_us = now_us;
    --unsent_;
  }
}

void MonitorLink::Acknowledged(const std::vector<int64_t>& seqs) {
  for (int64_t seq : seqs) {
    auto it = unacked_.find(seq);
    if (it == unacked_.end()) continue;
    if (it->second.sent_us == 0) --unsent_;
    unacked_.erase(it);
  }
}

void MonitorLink::Reconnected() {
  for (auto& [seq, batch] : unacked_) {
    if (batch.sent_us == 0) continue;
    builder_.Reseal(batch.frames);
    batch.sent_us = 0;
    ++unsent_;
    ++resent_;
  }
}

}  // namespace ztask::scheduler
