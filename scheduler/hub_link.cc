// The monitor DEALER: records, acknowledgements, lookups, stats (hub_link.h).
#include "scheduler/hub_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/reactor.h"

namespace ztask::scheduler {
namespace {

using protocol::MsgType;

}  // namespace

void HubLink::RecordCopy(MsgType type, Msg request) {
  builder_.AddToBatch(type, request[1 + protocol::kFrameHeader], request[1 + protocol::kFrameMeta],
                      request[1 + protocol::kFrameContent],
                      request.subspan(1 + protocol::kFirstBuffer));
  SealIfFull();
}

void HubLink::RecordAssigned(const TaskId& id, EngineSlot slot, int32_t engine_id,
                             int32_t attempt) {
  if (assigned_.size() >= compact_at_) {
    std::erase_if(assigned_,
                  [&](const Dispatched& d) { return !core_.RunsAs(d.id, d.slot, d.attempt); });
    compact_at_ = std::max(kCompactAssignedFrom, 2 * assigned_.size());
  }
  const int64_t serial = next_serial_++;
  assigned_.push_back(
      {id, base::MonotonicMicros() + assigned_after_us_, slot, engine_id, attempt, serial});
  if (link_.noting()) link_.dispatches().Add(id, engine_id, attempt, serial);
}

void HubLink::RecordLongAssignments(int64_t now_us) {
  static const std::string kEmpty = protocol::EncodeBody(protocol::Empty{});
  while (!assigned_.empty() && assigned_.front().due_us <= now_us) {
    const Dispatched& d = assigned_.front();
    if (core_.RunsAs(d.id, d.slot, d.attempt)) {
      // The hub reads the task's id from the parent; a header of that id
      // alone says it.
      protocol::Header parent;
      parent.id = d.id;
      parent.type = MsgType::kTaskRequest;
      builder_.AddToBatch(MsgType::kTaskAssigned, protocol::EncodeHeader(parent),
                          protocol::EncodeBody(protocol::Assignment{d.engine_id, d.attempt}),
                          kEmpty);
      SealIfFull();
    }
    assigned_.pop_front();
  }
}

void HubLink::RecordOutcome(const Action& a, bool final, std::string_view parent,
                            std::string_view content, Msg buffers) {
  protocol::OutcomeMeta meta{final, a.error == ErrorType::kNone, a.error, std::nullopt, a.attempt};
  if (a.engine_id >= 0) meta.engine_id = a.engine_id;
  builder_.AddToBatch(MsgType::kTaskOutcome, parent, protocol::EncodeBody(meta), content, buffers);
  SealIfFull();
}

size_t HubLink::OnMessage(protocol::Frames& frames) {
  std::vector<std::string_view> views;
  auto header = inbound_.Open(frames, 0, &views, nullptr);
  if (!header.ok()) {
    inbound_.Drop("hub-monitor", header.status());
  } else if (header->type == MsgType::kResultReply) {
    OnLookupReply(views);
  } else if (header->type != MsgType::kMonitorAck) {
    inbound_.Drop("hub-monitor", "unexpected " + std::string(protocol::MsgTypeName(header->type)));
  } else if (auto ack = protocol::DecodeBody<protocol::MonitorAck>(views[protocol::kFrameContent]);
             !ack.ok()) {
    inbound_.Drop("hub-monitor", "monitor_ack: " + ack.status().message());
  } else {
    link_.Acknowledged(ack->seqs, base::MonotonicMicros());
  }
  return 0;
}

void HubLink::SendLookups(std::vector<TaskId> unknown, int64_t now) {
  for (size_t i = 0; i < unknown.size(); i += kIdsPerLookup) {
    const size_t end = std::min(unknown.size(), i + kIdsPerLookup);
    lookups_asked_[TaskId::Random()].ids.assign(
        unknown.begin() + static_cast<std::ptrdiff_t>(i),
        unknown.begin() + static_cast<std::ptrdiff_t>(end));
    counters_.lookups += end - i;
  }
  bool flushed = false;
  for (auto& [request_id, lookup] : lookups_asked_) {
    if (lookup.sent_us != 0 && now - lookup.sent_us < kLookupAgainUs) continue;
    if (!flushed) {
      // What the hub records of these tasks goes before the question.
      link_.Flush(now, /*now=*/true);
      flushed = true;
    }
    const protocol::Header header{request_id, MsgType::kResultRequest, session_,
                                  base::WallMicros()};
    const Status sent = protocol::SendEncoded(
        socket_, {},
        protocol::EncodeMessage(signer_, header, std::nullopt, protocol::Empty{},
                                protocol::TaskIdList{lookup.ids, std::nullopt, std::nullopt}));
    if (!sent.ok()) return;  // the hub is away: asked again at the next turn
    if (lookup.sent_us != 0) {
      spdlog::info("asking the hub again about {} dependencies it has not answered for",
                   lookup.ids.size());
    }
    lookup.sent_us = now;
  }
}

void HubLink::OnLookupReply(const std::vector<std::string_view>& views) {
  auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
  if (!parent.ok() || !*parent) return inbound_.Drop("hub-monitor", "result_reply without a request");
  auto reply = protocol::DecodeBody<protocol::ResultReply>(views[protocol::kFrameContent]);
  if (!reply.ok()) return inbound_.Drop("hub-monitor", "result_reply: " + reply.status().message());
  auto asked = lookups_asked_.find((*parent)->id);
  if (asked == lookups_asked_.end()) return;  // answered already (asked twice)
  lookups_asked_.erase(asked);
  for (const protocol::TaskRecord& r : reply->records) {
    if (IsFinal(r.state)) {
      core_.LookedUp(r.id, Lookup::kFinished, r.state == TaskState::kOk, r.engine_id.value_or(-1));
    } else {
      core_.LookedUp(r.id, Lookup::kUnfinished);
    }
  }
  for (const TaskId& id : reply->unknown) core_.LookedUp(id, Lookup::kUnknown);
}

void HubLink::SendStats(const protocol::SchedulerStats& stats) {
  const protocol::Header header{TaskId::Random(), MsgType::kSchedulerStats, session_,
                                base::WallMicros()};
  // Every second; one the hub's queue will not take is replaced by the next.
  (void)protocol::SendEncoded(socket_, {},
                              protocol::EncodeMessage(signer_, header, std::nullopt,
                                                      protocol::Empty{}, stats));
}

void HubLink::ReplayJournal(Journal& journal, double timeout_s, const std::atomic<bool>& stop) {
  std::vector<Journal::Found> found = journal.TakeFound();
  size_t batches = 0;
  for (Journal::Found& record : found) {
    if (DispatchLog::IsRecord(record.batch)) {
      if (!DispatchLog::Read(record.batch, found_dispatches_)) {
        spdlog::error("the journal holds notes of dispatches that do not hold together");
      }
    } else {
      ++batches;
    }
    link_.Adopt(std::move(record));
  }
  if (!found_dispatches_.empty()) {
    spdlog::info("the journal notes {} tasks dispatched by an earlier scheduler",
                 found_dispatches_.size());
  }
  if (batches == 0) return;
  spdlog::info("sending the hub {} monitor batches an earlier scheduler left in its journal",
               batches);
  const int64_t deadline = base::MonotonicMicros() + base::DurationMicros(timeout_s);
  protocol::Frames frames;
  while (link_.unacknowledged() > 0 && base::MonotonicMicros() < deadline && !stop.load()) {
    link_.Flush(base::MonotonicMicros());
    base::WaitReady(socket_, ZMQ_POLLIN, std::chrono::milliseconds(100));
    DrainSocket(socket_, frames, [this](protocol::Frames& f) { return OnMessage(f); });
  }
  if (link_.unacknowledged() > 0) {
    spdlog::error("the hub did not acknowledge the journal's batches within {} s; they stay queued",
                  timeout_s);
  }
}

}  // namespace ztask::scheduler
