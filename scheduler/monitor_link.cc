#include "scheduler/monitor_link.h"

#include <spdlog/spdlog.h>

namespace ztask::scheduler {

void MonitorLink::Adopt(protocol::Frames batch) {
  if (batch.size() < protocol::kMinFrames) return;
  const int64_t seq = next_seq_++;
  batch[protocol::kFrameMeta] = protocol::Frame(protocol::EncodeBody(protocol::BatchMeta{seq}));
  Keep(seq, std::move(batch));
}

void MonitorLink::Keep(int64_t seq, protocol::Frames batch) {
  size_t bytes = 0;
  for (const auto& f : batch) bytes += f.size();
  unacked_bytes_ += bytes;
  unacked_.emplace(seq, Batch{std::move(batch), 0, bytes});
  ++unsent_;
}

void MonitorLink::WriteAhead(const protocol::Frames& batch) {
  if (!journal_) return;
  Status written = journal_->Append(batch);
  if (!written.ok() && !journal_failing_) {
    spdlog::error("{}: a crash now would lose what the hub has not acknowledged",
                  written.message());
  }
  journal_failing_ = !written.ok();
}

void MonitorLink::Seal() {
  if (builder_.batched() == 0) return;
  const int64_t seq = next_seq_++;
  protocol::Frames batch = builder_.TakeBatch(seq);
  if (!enabled_) return;
  WriteAhead(batch);
  Keep(seq, std::move(batch));
}

void MonitorLink::Flush(int64_t now_us) {
  Seal();
  for (auto& [seq, batch] : unacked_) {
    const bool due = batch.sent_us == 0 || now_us - batch.sent_us > kResendAfterUs;
    if (!due) continue;
    if (batch.sent_us != 0) {  // silence: it may be lost, so it goes again
      ++resent_;
      ++unsent_;
      batch.sent_us = 0;
    }
    // Sealed as it leaves: the hub refuses a batch dated no later than the
    // last it took from this session, so dates must grow in sending order.
    builder_.Reseal(batch.frames);
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
    unacked_bytes_ -= it->second.bytes;
    unacked_.erase(it);
  }
  if (!journal_) return;
  if (unacked_.empty()) {
    if (journal_->bytes() > 0) (void)journal_->Rewrite({});
  } else if (journal_->bytes() > Journal::kCompactBytes && journal_->bytes() > 2 * unacked_bytes_) {
    // Rewriting costs what is kept: only once most of the file is dead.
    std::vector<const protocol::Frames*> live;
    for (const auto& [seq, batch] : unacked_) live.push_back(&batch.frames);
    (void)journal_->Rewrite(live);
  }
}

void MonitorLink::Reconnected() {
  for (auto& [seq, batch] : unacked_) {
    if (batch.sent_us == 0) continue;
    batch.sent_us = 0;
    ++unsent_;
    ++resent_;
  }
}

}  // namespace ztask::scheduler
