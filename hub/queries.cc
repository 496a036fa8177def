// The hub's queries: one handler per type, each reading the query, asking
// the part that answers it (answers.h, the core, the store) and sending the
// reply: records and results (now, or once they are there), recovery pages
// for a restarted scheduler, stats, jobs, queues, engines, supervisors'
// reports, purges and shutdown. Must not: build an answer's content itself.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <unordered_set>

#include "base/clock.h"
#include "hub/server_impl.h"

namespace ztask::hub {

using base::MonotonicMicros;

// A result_request with `wait`: answered now when every task is there,
// else held (ResultWaits) until they are or its time is up.
void HubServer::Impl::AnswerWhen(std::string_view route, const protocol::Header& header,
                                 protocol::TaskIdList request) {
  const auto until = ResultWaits::Parse(*request.wait);
  if (!until) return Drop(route, "result_request: wait is '" + *request.wait + "'");
  std::vector<TaskId> pending;
  protocol::TaskRecord scratch;
  for (const TaskId& id : request.task_ids) {
    const protocol::TaskRecord* r = store_->Find(id, &scratch);
    const bool there = r && (*until == ResultWaits::Until::kRecorded || IsFinal(r->state));
    if (!there) pending.push_back(id);
  }
  const int64_t wait_us =
      std::clamp<int64_t>(int64_t{request.wait_ms.value_or(0)} * 1000, 0, ResultWaits::kMaxWaitUs);
  if (!pending.empty() && wait_us > 0) {
    ResultWaits::Wait wait{std::string(route), header, request, *until, base::MonotonicMicros() + wait_us};
    if (waits_.Park(std::move(wait), pending)) return;
  }
  AnswerWait({std::string(route), header, std::move(request)});
}

void HubServer::Impl::AnswerWait(const ResultWaits::Wait& wait) {
  const std::string_view prefix[] = {wait.route};
  // A client that does not read its answers (its queue full) misses this
  // one: its request times out on its side with an error, or is asked
  // again; the hub keeps nothing for it.
  (void)protocol::SendEncoded(
      query_, prefix,
      protocol::EncodeMessage(signer_, NewHeader(MsgType::kResultReply), wait.header,
                              protocol::Empty{}, Records(*store_, wait.request, false)));
}

void HubServer::Impl::OnQuery(Frames& frames) {
  std::vector<std::string_view> views;
  auto header = Open(frames, &views, query_guard_, limits_);
  if (!header.ok()) return Drop(View(frames[0]), header.status());
  const Query query{frames[0], *header, views[protocol::kFrameContent]};
  switch (header->type) {
    case MsgType::kResultRequest: return OnResultRequest(query);
    case MsgType::kRecoverRequest: return OnRecoverRequest(query);
    case MsgType::kStatsRequest: return OnStatsRequest(query);
    case MsgType::kJobsRequest: return OnJobsRequest(query);
    case MsgType::kQueueRequest: return Answer(query, MsgType::kQueueReply, QueueStatus(*store_, core_.registry()));
    case MsgType::kEnginesRequest:
      return Answer(query, MsgType::kEnginesReply,
                    protocol::EnginesReply{core_.registry().Listing()});
    case MsgType::kEngineState: return OnEngineState(query);
    case MsgType::kPurgeRequest: return OnPurgeRequest(query);
    case MsgType::kShutdownRequest: return OnShutdownRequest(query);
    default:
      return Drop(View(frames[0]),
                  "unexpected " + std::string(protocol::MsgTypeName(header->type)));
  }
}

void HubServer::Impl::OnResultRequest(const Query& query) {
  auto request = Read<protocol::TaskIdList>(query);
  if (!request) return;
  if (request->wait && !request->task_ids.empty()) {
    return AnswerWhen(View(query.peer), query.header, std::move(*request));
  }
  Answer(query, MsgType::kResultReply, Records(*store_, *request, false));
}

void HubServer::Impl::OnRecoverRequest(const Query& query) {
  auto request = Read<protocol::RecoverRequest>(query);
  if (!request) return;
  // What a scheduler that died had sent must be applied first (into frames
  // of its own: the query's are in use).
  Frames monitor_frames;
  protocol::Drain(monitor_, monitor_frames, SIZE_MAX, [&](Frames& f) { OnMonitor(f); });
  std::vector<TaskId> without_request;
  protocol::RecoverReply reply = Recover(*store_, *request, &without_request);
  // Engines left without a hub register again once two heartbeats go
  // unanswered: before twice the window they are lost in, this hub (just
  // started) may not know them all, and says nothing rather than a part.
  const int64_t window_us = int64_t{core_.HeartbeatMs()} * 1000 * options_.heartbeat_misses;
  // (A hub with no earlier life is the first of its cluster.)
  if (!earlier_life_ || base::MonotonicMicros() - started_us_ >= 2 * window_us) {
    reply.engines.emplace();
    for (const auto& [id, engine] : core_.registry().alive()) reply.engines->push_back(id);
  }
  Answer(query, MsgType::kRecoverReply, reply);
  for (const TaskId& id : without_request) {
    spdlog::warn("task {} has no recorded request: a restarted scheduler cannot queue it",
                 id.ToHex());
  }
}

void HubServer::Impl::OnStatsRequest(const Query& query) {
  if (auto request = Read<protocol::StatsRequest>(query)) {
    Answer(query, MsgType::kStatsReply, Stats(*request));
  }
}

void HubServer::Impl::OnJobsRequest(const Query& query) {
  auto request = Read<protocol::JobsRequest>(query);
  if (!request) return;
  if (request->command != "list" && request->command != "new") {
    return Drop(View(query.peer), "a jobs_request of unknown command");
  }
  Answer(query, MsgType::kJobsReply, Jobs(*store_, *request));
}

void HubServer::Impl::OnEngineState(const Query& query) {
  auto report = Read<protocol::EngineStateReport>(query);
  if (!report) return;
  actions_.Clear();
  core_.EngineReported(*report, &actions_);
  Apply(actions_);
  Answer(query, MsgType::kEngineStateReply, protocol::Acknowledgement{});
}

void HubServer::Impl::OnPurgeRequest(const Query& query) {
  if (auto request = Read<protocol::PurgeRequest>(query)) {
    const auto count = static_cast<int64_t>(store_->Purge(request->task_ids, request->all));
    Answer(query, MsgType::kPurgeReply, protocol::Count{count});
  }
}

void HubServer::Impl::OnShutdownRequest(const Query& query) {
  spdlog::info("shutdown requested");
  Answer(query, MsgType::kShutdownReply, protocol::Acknowledgement{});
  RequestStop();
}

protocol::StatsReply HubServer::Impl::Stats(const protocol::StatsRequest& request) const {
  protocol::StatsReply reply;
  reply.now_us = base::WallMicros();
  reply.waiting = store_->waiting();
  reply.running = store_->running();
  reply.ok = store_->ok();
  reply.failed = store_->failed();
  reply.dropped = static_cast<int64_t>(drops_.count());
  core_.activity().Fill(request, base::MonotonicMicros(), &reply);
  return reply;
}

}  // namespace ztask::hub
