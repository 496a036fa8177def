// The hub's intake of the scheduler's monitor: task_submitted, task_assigned
// and task_outcome, alone or in monitor batches, decoded and handed to the
// core (hub_core.h), which changes the records; the batches'
// acknowledgements once the store has written them. Must not: decide what a
// message does to a record or which events it makes.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "base/prefetch.h"
#include "hub/server_impl.h"

namespace ztask::hub {

void HubServer::Impl::OnMonitor(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = Open(frames, &views, monitor_guard_, limits_);
  if (!header.ok()) return Drop(View(frames[0]), header.status());
  const std::string_view peer = View(frames[0]);
  if (header->type == MsgType::kResultRequest) {
    // The scheduler asks for the outcomes of dependencies it let go of:
    // after every batch it sent before, on the same connection.
    auto request = protocol::DecodeBody<protocol::TaskIdList>(views[protocol::kFrameContent]);
    if (!request.ok()) return Drop(peer, request.status());
    return Reply(monitor_, frames[0], MsgType::kResultReply, *header, Records(*store_, *request, true));
  }
  if (header->type == MsgType::kSchedulerStats) {
    auto stats = protocol::DecodeBody<protocol::SchedulerStats>(views[protocol::kFrameContent]);
    if (!stats.ok()) return Drop(peer, stats.status());
    return core_.SchedulerStats(*stats);
  }
  if (header->type != MsgType::kMonitorBatch) {
    auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
    return OnMonitorMessage(peer, *header, views, parent.ok() && *parent ? &**parent : nullptr);
  }
  auto meta = protocol::DecodeBody<protocol::BatchMeta>(views[protocol::kFrameMeta]);
  if (!meta.ok()) return Drop(peer, "monitor_batch metadata: " + meta.status().message());
  auto messages = protocol::UnpackBatch(views);
  if (!messages.ok()) return Drop(peer, messages.status());
  // The records a batch changes are past the cache: each is looked up a
  // few messages ahead (its slot, then its record), so that the misses
  // overlap the work on the messages before it.
  // Read into headers kept from batch to batch, whose sessions keep their
  // storage: reading one allocates nothing.
  const size_t count = messages->size();
  if (parents_.size() < count) parents_.resize(count);
  parent_read_.assign(count, false);
  for (size_t i = 0; i < count; ++i) {
    const std::string_view frame = (*messages)[i][protocol::kFrameParent];
    parent_read_[i] = !frame.empty() && protocol::DecodeHeaderInto(frame, &parents_[i]).ok();
  }
  const auto parent_at = [&](size_t i) -> const protocol::Header* {
    return i < count && parent_read_[i] ? &parents_[i] : nullptr;
  };
  const auto id_at = [&](size_t i) -> const TaskId* {
    const protocol::Header* parent = parent_at(i);
    return parent ? &parent->id : nullptr;
  };
  // New tasks of an acknowledged batch are held back from the file (a task
  // that ends soon is written once, final): the scheduler keeps the batch
  // until they are written. (Without a file the store holds nothing.)
  int64_t hold_since_us = 0;
  if (meta->seq) {
    batch_us_ = std::max(batch_us_ + 1, base::MonotonicMicros());
    hold_since_us = batch_us_;
  }
  monitor_heard_ = true;
  for (size_t i = 0; i < messages->size(); ++i) {
    if (const TaskId* ahead = id_at(i + kPrefetchAhead)) store_->Prefetch(*ahead);
    if (const TaskId* ahead = id_at(i + kPrefetchAhead / 2)) store_->PrefetchRecord(*ahead);
    const auto message = (*messages)[i];
    if (Status read = protocol::DecodeHeaderInto(message[protocol::kFrameHeader], &inner_);
        !read.ok()) {
      Drop(peer, read);
      continue;
    }
    OnMonitorMessage(peer, inner_, message, parent_at(i), hold_since_us);
  }
  if (meta->seq) {
    size_t bytes = 0;
    for (const std::string_view view : views) bytes += view.size();
    NoteAck({std::string(peer), *meta->seq, hold_since_us, bytes});
  }
}

// Acknowledgements wait until the records they cover are in the database
// (SendAcks after a flush), so the scheduler keeps every batch a crash of
// the hub could lose.
void HubServer::Impl::NoteAck(PendingAck ack) {
  // Batches come in order; one sent again (the hub was slow to acknowledge
  // it, or its disk is full) may be waiting already.
  const bool again = !acks_.empty() && acks_.back().peer == ack.peer && ack.seq <= acks_.back().seq;
  if (again && std::any_of(acks_.begin(), acks_.end(), [&](const PendingAck& pending) {
        return pending.seq == ack.seq && pending.peer == ack.peer;
      })) {
    return;
  }
  acks_.push_back(std::move(ack));
  // Nothing more to wait for without a database. One that cannot be
  // written (disk full) gets no acknowledgement: the scheduler keeps the
  // batches (and slows down once it holds too many) until a write
  // succeeds, here or in the next hub.
  if (!store_->durable()) SendAcks();
}

void HubServer::Impl::SendAcks() {
  // The batches that came before the oldest record still held: every
  // record of theirs is written (held ones are released oldest first).
  const int64_t oldest_held = store_->OldestHeldUs();
  std::map<std::string, std::vector<int64_t>> due;
  std::erase_if(acks_, [&](const PendingAck& ack) {
    if (ack.arrived_us >= oldest_held) return false;
    due[ack.peer].push_back(ack.seq);
    return true;
  });
  for (auto& [peer, seqs] : due) {
    const std::string_view prefix[] = {peer};
    // Lost (the scheduler's queue full), it costs a resend: the scheduler
    // sends what stays unacknowledged again (MonitorLink::kResendAfterUs),
    // and a batch applied twice changes nothing.
    (void)protocol::SendEncoded(
        monitor_, prefix,
        protocol::EncodeMessage(signer_, NewHeader(MsgType::kMonitorAck), std::nullopt,
                                protocol::Empty{}, protocol::MonitorAck{std::move(seqs)}));
  }
}

int64_t HubServer::Impl::ReleaseHeldUntil(int64_t now_us) const {
  if (!monitor_heard_) return INT64_MAX;
  int64_t until = now_us - kHoldNewUs;
  size_t kept = 0;  // by the scheduler, newest first
  for (auto ack = acks_.rbegin(); ack != acks_.rend(); ++ack) {
    kept += ack->bytes;
    if (kept > kMaxUnacknowledgedBytes) return std::max(until, ack->arrived_us);
  }
  return until;
}

// Answers the waits that have what they asked for now.
void HubServer::Impl::Noted(const TaskId& id, bool final) {
  if (waits_.size() == 0) return;
  for (const ResultWaits::Wait& wait : waits_.Noted(id, final)) AnswerWait(wait);
}

// One task_submitted, task_assigned or task_outcome, alone or from a batch:
// decoded here, decided by the core.
void HubServer::Impl::OnMonitorMessage(std::string_view peer, const protocol::Header& header,
                                       std::span<const std::string_view> views,
                                       const protocol::Header* parent, int64_t hold_since_us) {
  if (!parent) return Drop(peer, "monitor message without parent");
  const TaskId id = parent->id;
  actions_.Clear();
  switch (header.type) {
    case MsgType::kTaskSubmitted: {
      KeptRequest request(views.subspan(protocol::kFrameParent));
      core_.Submitted(*parent,
                      protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]),
                      protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]),
                      std::move(request), hold_since_us, &actions_);
      break;
    }
    case MsgType::kTaskAssigned: {
      auto a = protocol::DecodeBody<protocol::Assignment>(views[protocol::kFrameMeta]);
      if (!a.ok()) return Drop(peer, "bad task_assigned");
      core_.Assigned(id, *a, &actions_);
      break;
    }
    case MsgType::kTaskOutcome: {
      auto meta = protocol::DecodeBody<protocol::OutcomeMeta>(views[protocol::kFrameMeta]);
      if (!meta.ok()) return Drop(peer, "task_outcome metadata: " + meta.status().message());
      core_.Outcome(id, *meta,
                    protocol::DecodeBody<protocol::TaskResult>(views[protocol::kFrameContent]),
                    &actions_);
      break;
    }
    default:
      return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header.type)));
  }
  Apply(actions_);
}

}  // namespace ztask::hub
