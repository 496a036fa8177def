// The hub's intake of the scheduler's monitor: task_submitted, task_assigned
// and task_outcome, alone or in monitor batches, into the store; the
// batches' acknowledgements once the store has written them.
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "hub/server_impl.h"

namespace ztask::hub {

using base::MonotonicMicros;

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
    return Reply(monitor_, frames[0], MsgType::kResultReply, *header, Records(*request, true));
  }
  if (header->type == MsgType::kSchedulerStats) {
    auto stats = protocol::DecodeBody<protocol::SchedulerStats>(views[protocol::kFrameContent]);
    if (!stats.ok()) return Drop(peer, stats.status());
    return activity_.Scheduler(*stats, base::MonotonicMicros());
  }
  if (header->type != MsgType::kMonitorBatch) return OnMonitorMessage(peer, *header, views);
  auto meta = protocol::DecodeBody<protocol::BatchMeta>(views[protocol::kFrameMeta]);
  if (!meta.ok()) return Drop(peer, "monitor_batch metadata: " + meta.status().message());
  auto messages = protocol::UnpackBatch(views);
  if (!messages.ok()) return Drop(peer, messages.status());
  for (const auto& message : *messages) {
    auto inner = protocol::DecodeHeader(message[protocol::kFrameHeader]);
    if (!inner.ok()) {
      Drop(peer, inner.status());
      continue;
    }
    OnMonitorMessage(peer, *inner, message);
  }
  if (meta->seq) NoteAck(peer, *meta->seq);
}

// Acknowledgements wait until the records they cover are in the database
// (SendAcks after a flush), so the scheduler keeps every batch a crash of
// the hub could lose.
void HubServer::Impl::NoteAck(std::string_view peer, int64_t seq) {
  acks_[std::string(peer)].push_back(seq);
  // Nothing more to wait for without a database. One that cannot be
  // written (disk full) gets no acknowledgement: the scheduler keeps the
  // batches (and slows down once it holds too many) until a write
  // succeeds, here or in the next hub.
  if (!store_->durable()) SendAcks();
}

void HubServer::Impl::SendAcks() {
  for (auto& [peer, seqs] : acks_) {
    const std::string_view prefix[] = {peer};
    (void)protocol::SendEncoded(
        monitor_, prefix,
        protocol::EncodeMessage(signer_, NewHeader(MsgType::kMonitorAck), std::nullopt,
                                protocol::Empty{}, protocol::MonitorAck{std::move(seqs)}));
  }
  acks_.clear();
}

// Answers the waits that have what they asked for now.
void HubServer::Impl::Noted(const TaskId& id, bool final) {
  if (waits_.size() == 0) return;
  for (const ResultWaits::Wait& wait : waits_.Noted(id, final)) AnswerWait(wait);
}

// One task_submitted, task_assigned or task_outcome, alone or from a batch.
void HubServer::Impl::OnMonitorMessage(std::string_view peer, const protocol::Header& header,
                                       const std::vector<std::string_view>& views) {
  auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
  if (!parent.ok() || !*parent) return Drop(peer, "monitor message without parent");
  const TaskId id = (*parent)->id;
  protocol::Event event;
  event.task_id = id;
  switch (header.type) {
    case MsgType::kTaskSubmitted: {
      // A task whose body cannot be read is recorded all the same (its
      // engine will answer BadTask): every task accepted has a record.
      auto meta = protocol::DecodeBody<protocol::RoutingMeta>(views[protocol::kFrameMeta]);
      auto spec = protocol::DecodeBody<protocol::TaskSpec>(views[protocol::kFrameContent]);
      if (!meta.ok() || !spec.ok()) {
        spdlog::warn("task {}: its {} cannot be read ({}): recorded without it", id.ToHex(),
                     meta.ok() ? "body" : "metadata",
                     (meta.ok() ? spec.status() : meta.status()).message());
      }
      std::vector<std::string> request;
      for (size_t i = protocol::kFrameParent; i < views.size(); ++i) {
        request.emplace_back(views[i]);
      }
      const protocol::TaskSpec& taken = spec.ok() ? *spec : protocol::TaskSpec{};
      if (!store_->Submitted(**parent, meta.ok() ? *meta : protocol::RoutingMeta{}, taken,
                             std::move(request))) {
        return;
      }
      Noted(id, false);
      activity_.Submitted(taken.label);
      event.kind = "task_submitted";
      event.text = taken.label;
      break;
    }
    case MsgType::kTaskAssigned: {
      auto a = protocol::DecodeBody<protocol::Assignment>(views[protocol::kFrameMeta]);
      if (!a.ok()) return Drop(peer, "bad task_assigned");
      if (!store_->Assigned(id, *a)) return;
      Noted(id, false);
      activity_.Assigned(a->engine_id, id);
      event.kind = "task_assigned";
      event.engine_id = a->engine_id;
      event.attempt = a->attempt;
      break;
    }
    case MsgType::kTaskOutcome: {
      auto meta = protocol::DecodeBody<protocol::OutcomeMeta>(views[protocol::kFrameMeta]);
      auto result = protocol::DecodeBody<protocol::TaskResult>(views[protocol::kFrameContent]);
      if (!meta.ok()) return Drop(peer, "task_outcome metadata: " + meta.status().message());
      if (!result.ok()) {
        // An outcome is never lost for its body: what cannot be read is
        // recorded as the task's error.
        const std::string why = result.status().message();
        spdlog::warn("task {}: its result cannot be read ({}): recorded as BadTask", id.ToHex(),
                     why);
        meta->ok = false;
        meta->error_type = ErrorType::kBadTask;
        result = protocol::TaskResult{};
        result->error_message = "the hub cannot read its result: " + why;
      }
      if (!store_->Outcome(id, *meta, *result, base::WallMicros())) return;
      Noted(id, meta->final);
      if (!meta->final) {
        activity_.Requeued(meta->engine_id, id, !meta->ok);
      } else {
        protocol::TaskRecord scratch;
        if (const auto* r = store_->Find(id, &scratch)) activity_.Finished(*r);
      }
      // Not final and not failed: sent ahead and not run, waiting again.
      event.kind = meta->final ? "task_finished" : meta->ok ? "task_returned" : "task_retried";
      event.engine_id = meta->engine_id;
      event.attempt = meta->attempt;
      event.status = meta->ok ? "ok" : "error";
      event.error_type = meta->error_type;
      event.text = result->error_message;
      break;
    }
    default:
      return Drop(peer, "unexpected " + std::string(protocol::MsgTypeName(header.type)));
  }
  Emit(std::move(event));
}

}  // namespace ztask::hub
