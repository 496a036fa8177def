#include "scheduler/monitor_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>

namespace ztask::scheduler {

void MonitorLink::Adopt(Journal::Found found) {
  protocol::Frames& batch = found.batch;
  if (DispatchLog::IsRecord(batch)) {
    dispatches_.Adopt(found.segment);
    return;
  }
  if (batch.size() < protocol::kMinFrames) {
    if (journal_) journal_->Release(found.segment);
    return;
  }
  if (batch.size() != protocol::kBatchFrames) {
    // Written by an earlier version, one frame per message frame.
    auto records = protocol::RecordsOfEarlierBatch(protocol::Views(batch));
    if (!records) {
      spdlog::error("the journal holds a monitor batch that is not one; it is not sent");
      if (journal_) journal_->Release(found.segment);
      return;
    }
    batch.resize(protocol::kMinFrames);
    batch[protocol::kFrameContent] =
        protocol::Frame(protocol::EncodeBody(protocol::MonitorBatch{}));
    batch.push_back(protocol::FrameOf(std::move(*records)));
  }
  const int64_t seq = next_seq_++;
  batch[protocol::kFrameMeta] = protocol::Frame(protocol::EncodeBody(protocol::BatchMeta{seq}));
  Keep(seq, std::move(batch), found.segment);
}

void MonitorLink::Keep(int64_t seq, protocol::Frames batch, int64_t segment) {
  size_t bytes = 0;
  for (const auto& f : batch) bytes += f.size() + sizeof(zmq_msg_t);
  unacked_bytes_ += bytes;
  unacked_.emplace(seq, Batch{std::move(batch), 0, bytes, segment});
  to_send_.push_back(seq);
}

Result<int64_t> MonitorLink::AppendWithNotes(const protocol::Frames* batch) {
  const bool noting = dispatches_.waiting();
  protocol::Frames notes;
  const protocol::Frames* records[2];
  size_t count = 0;
  if (noting) {
    notes = dispatches_.Record();
    records[count++] = &notes;
  }
  if (batch) records[count++] = batch;
  auto segment = journal_->Append(std::span(records, count));
  if (noting) dispatches_.Written(segment.ok() ? *segment : -1);
  return segment;
}

int64_t MonitorLink::WriteAhead(const protocol::Frames& batch) {
  auto segment = AppendWithNotes(&batch);
  if (segment.ok()) {
    if (journal_->spilling() != journal_spilling_) {
      journal_spilling_ = !journal_spilling_;
      if (journal_spilling_) {
        spdlog::warn(
            "the journal's directory refuses writes (a full disk?): its batches go to {} until "
            "it takes them again",
            journal_->spill_directory().string());
      } else {
        spdlog::info("the journal is written in its own directory again");
      }
    }
    return *segment;
  }
  if (!journal_failing_) {
    spdlog::error(
        "{}: a crash now would lose what the hub has not acknowledged (written again "
        "once the journal can be)",
        segment.status().message());
  }
  journal_failing_ = true;
  return -1;
}

// The batches an append failed for go first, in order, until one fails.
bool MonitorLink::JournalAgain() {
  while (!unjournaled_.empty()) {
    auto it = unacked_.find(unjournaled_.front());
    if (it != unacked_.end()) {  // else acknowledged meanwhile: nothing to keep
      const int64_t segment = WriteAhead(it->second.frames);
      if (segment < 0) return false;
      it->second.segment = segment;
    }
    unjournaled_.pop_front();
  }
  return true;
}

void MonitorLink::Seal() {
  if (builder_.batched() == 0) return;
  const int64_t seq = next_seq_++;
  protocol::Frames batch = builder_.TakeBatch(seq);
  if (!enabled_) return;
  int64_t segment = -1;
  if (journal_) {
    if (JournalAgain()) segment = WriteAhead(batch);
    if (segment < 0) {
      unjournaled_.push_back(seq);
    } else if (journal_failing_) {
      spdlog::info("the journal is written again, with every batch it missed");
      journal_failing_ = false;
    }
  }
  Keep(seq, std::move(batch), segment);
}

void MonitorLink::WriteDispatches() {
  if (!journal_ || !dispatches_.waiting()) return;
  auto segment = AppendWithNotes(nullptr);
  if (!segment.ok() && !journal_failing_) {
    spdlog::error("{}: a crash now may run a task dispatched now again under the same attempt",
                  segment.status().message());
  }
}

void MonitorLink::CoverDispatches(int64_t serial) {
  if (!journal_ || dispatches_.kept() == 0) return;
  dispatches_.Cover(serial, next_seq_ - 1);
  dispatches_.AcknowledgedThrough(AcknowledgedThrough(), *journal_);
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
    if (journal_) journal_->Release(it->second.segment);
    unacked_.erase(it);  // its place in to_send_, if any, is skipped
  }
  if (journal_) dispatches_.AcknowledgedThrough(AcknowledgedThrough(), *journal_);
}

void MonitorLink::Reconnected() { SendAllAgain(); }

}  // namespace ztask::scheduler
