#include "scheduler/monitor_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ztask::scheduler {

void MonitorLink::Adopt(protocol::Frames batch) {
  if (batch.size() < protocol::kMinFrames) return;
  if (batch.size() != protocol::kBatchFrames) {
    // Written by an earlier version, one frame per message frame.
    auto records = protocol::RecordsOfEarlierBatch(protocol::Views(batch));
    if (!records) {
      spdlog::error("the journal holds a monitor batch that is not one; it is not sent");
      return;
    }
    batch.resize(protocol::kMinFrames);
    batch[protocol::kFrameContent] =
        protocol::Frame(protocol::EncodeBody(protocol::MonitorBatch{}));
    batch.push_back(protocol::FrameOf(std::move(*records)));
  }
  const int64_t seq = next_seq_++;
  batch[protocol::kFrameMeta] = protocol::Frame(protocol::EncodeBody(protocol::BatchMeta{seq}));
  Keep(seq, std::move(batch));
}

void MonitorLink::Keep(int64_t seq, protocol::Frames batch) {
  size_t bytes = 0;
  for (const auto& f : batch) bytes += f.size() + sizeof(zmq_msg_t);
  unacked_bytes_ += bytes;
  unacked_.emplace(seq, Batch{std::move(batch), 0, bytes});
  to_send_.push_back(seq);
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

void MonitorLink::Flush(int64_t now_us, bool now) {
  Seal();
  if (!unacked_.empty()) {
    // The oldest unacknowledged batch, and nothing heard since it went.
    const Batch& oldest = unacked_.begin()->second;
    if (oldest.sent_us != 0 && now_us - std::max(oldest.sent_us, last_ack_us_) > kResendAfterUs) {
      SendAllAgain();
    }
  }
  if (!now && !socket_full_ && to_send_.size() < kHoldBatches && now_us - last_send_us_ < kHoldUs) {
    return;
  }
  while (!to_send_.empty()) {
    auto it = unacked_.find(to_send_.front());
    if (it == unacked_.end() || it->second.sent_us != 0) {  // acknowledged, or sent
      to_send_.pop_front();
      continue;
    }
    Batch& batch = it->second;
    // Sealed as it leaves: the hub refuses a batch dated no later than the
    // last it took from this session, so dates must grow in sending order.
    builder_.Reseal(batch.frames);
    protocol::Frames copy = FrameBuilder::ShareFrom(batch.frames, 0);
    socket_full_ = !protocol::SendFrames(socket_, copy).ok();
    if (socket_full_) return;  // in order: later ones wait
    batch.sent_us = now_us;
    last_send_us_ = now_us;
    to_send_.pop_front();
  }
}

std::optional<int64_t> MonitorLink::NextSendUs() const {
  if (to_send_.empty() || socket_full_) return std::nullopt;
  return last_send_us_ + kHoldUs;
}

void MonitorLink::SendAllAgain() {
  to_send_.clear();
  for (auto& [seq, batch] : unacked_) {
    if (batch.sent_us != 0) ++resent_;
    batch.sent_us = 0;
    to_send_.push_back(seq);
  }
}

void MonitorLink::Acknowledged(const std::vector<int64_t>& seqs, int64_t now_us) {
  last_ack_us_ = now_us;
  for (int64_t seq : seqs) {
    auto it = unacked_.find(seq);
    if (it == unacked_.end()) continue;
    unacked_bytes_ -= it->second.bytes;
    unacked_.erase(it);  // its place in to_send_, if any, is skipped
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

void MonitorLink::Reconnected() { SendAllAgain(); }

}  // namespace ztask::scheduler
