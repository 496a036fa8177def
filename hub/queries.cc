// The hub's answers to queries: records and results (now, or once they are
// there), recovery pages for a restarted scheduler, stats, jobs, queues,
// engines, supervisors' reports, purges and shutdown.
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
  (void)protocol::SendEncoded(
      query_, prefix,
      protocol::EncodeMessage(signer_, NewHeader(MsgType::kResultReply), wait.header,
                              protocol::Empty{}, Records(wait.request, false)));
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
    case MsgType::kQueueRequest: return Answer(query, MsgType::kQueueReply, QueueStatus());
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
  Answer(query, MsgType::kResultReply, Records(*request, false));
}

void HubServer::Impl::OnRecoverRequest(const Query& query) {
  auto request = Read<protocol::RecoverRequest>(query);
  if (!request) return;
  // What a scheduler that died had sent must be applied first (into frames
  // of its own: the query's are in use).
  Frames monitor_frames;
  protocol::Drain(monitor_, monitor_frames, SIZE_MAX, [&](Frames& f) { OnMonitor(f); });
  Answer(query, MsgType::kRecoverReply, Recover(*request));
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
  Answer(query, MsgType::kJobsReply, Jobs(*request));
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

// One page of the unfinished tasks, in id order, with the outcomes of the
// finished tasks they depend on. Pages keep each reply within the codec's
// limits whatever the history's length. (Other outcomes the scheduler
// looks up when a task names them: finished_only is not answered.)
protocol::RecoverReply HubServer::Impl::Recover(const protocol::RecoverRequest& request) const {
  constexpr size_t kPageBytes = size_t{8} << 20;
  std::vector<TaskId> ids;
  store_->ForEachRecord([&](const TaskId& id, const protocol::TaskRecord& r) {
    if (IsFinal(r.state)) return;
    if (request.after && !(*request.after < id)) return;
    ids.push_back(id);
  });
  std::sort(ids.begin(), ids.end());
  protocol::RecoverReply reply;
  std::unordered_set<TaskId, TaskIdHash> named;
  size_t bytes = 0;
  const size_t limit = request.limit > 0 ? static_cast<size_t>(request.limit) : 1000;
  size_t taken = 0;
  for (; taken < ids.size() && reply.tasks.size() < limit && bytes < kPageBytes; ++taken) {
    protocol::TaskRecord scratch;  // unfinished records are all in memory
    const protocol::TaskRecord& r = *store_->Find(ids[taken], &scratch);
    const auto* frames = store_->RequestOf(r.id);
    if (!frames) {
      spdlog::warn("task {} has no recorded request: a restarted scheduler cannot queue it",
                   r.id.ToHex());
      continue;
    }
    for (const auto* deps : {&r.routing.after.ids, &r.routing.follow.ids}) {
      for (const TaskId& dep : *deps) {
        protocol::TaskRecord scratch;
        const auto* d = store_->Find(dep, &scratch);
        if (!d || !IsFinal(d->state) || !named.insert(dep).second) continue;
        reply.finished.push_back({dep, d->state == TaskState::kOk, d->engine_id});
      }
    }
    for (const auto& f : *frames) bytes += f.size();
    reply.tasks.push_back({r.id, r.client, r.state, r.engine_id, r.attempts, *frames});
  }
  reply.done = taken == ids.size();
  return reply;
}

// The records of the listed tasks (and which are unknown); with no list,
// one page of every record in id order after request.after: at most
// request.limit (and kMaxPage), and no more than about kPageBytes of them.
// `lean`: without outputs and results (the scheduler needs outcomes only).
protocol::ResultReply HubServer::Impl::Records(const protocol::TaskIdList& request,
                                               bool lean) const {
  constexpr size_t kMaxPage = 100000;
  constexpr size_t kPageBytes = size_t{16} << 20;
  protocol::ResultReply reply;
  const auto add = [&](const protocol::TaskRecord& r) {
    reply.records.push_back(r);
    if (!lean) return;
    protocol::TaskRecord& kept = reply.records.back();
    kept.result = {};
    kept.stdout_text.clear();
    kept.stderr_text.clear();
    kept.error_message.clear();
    kept.spec.reset();
  };
  protocol::TaskRecord scratch;
  if (!request.task_ids.empty()) {
    for (const TaskId& id : request.task_ids) {
      if (const auto* r = store_->Find(id, &scratch)) {
        add(*r);
      } else {
        reply.unknown.push_back(id);
      }
    }
    return reply;
  }
  const size_t limit =
      std::min<size_t>(std::max<int32_t>(1, request.limit.value_or(kMaxPage)), kMaxPage);
  // One more than the page, to know whether there is more.
  const std::vector<TaskId> ids = store_->IdsAfter(request.after, limit + 1, request.job);
  size_t bytes = 0, taken = 0;
  for (; taken < std::min(limit, ids.size()) && (taken == 0 || bytes < kPageBytes); ++taken) {
    const protocol::TaskRecord* r = store_->Find(ids[taken], &scratch);
    if (!r) continue;  // gone since (purged)
    if (request.status && !InStatus(*r, *request.status)) continue;
    bytes += 256 + r->label.size() + r->error_message.size() + r->stdout_text.size() +
             r->stderr_text.size() + r->result.bytes.size() +
             (r->spec ? r->spec->args.bytes.size() + 64 * r->spec->argv.size() : 0);
    add(*r);
  }
  reply.more = taken < ids.size();
  if (taken > 0 && *reply.more) reply.next = ids[taken - 1];
  return reply;
}

// A record in a status of a listing: waiting, running, ok, or failed (an
// error not replaced by a resubmission).
bool HubServer::Impl::InStatus(const protocol::TaskRecord& r, std::string_view status) {
  if (status == "failed") return r.state == TaskState::kError && !r.replaced_by;
  if (status == "waiting") return r.state == TaskState::kWaiting || r.state == TaskState::kNone;
  return TaskStateName(r.state) == status;
}

protocol::JobsReply HubServer::Impl::Jobs(const protocol::JobsRequest& request) {
  constexpr size_t kMaxPage = 10000;
  protocol::JobsReply reply;
  if (request.command == "new") {
    reply.name = store_->NewJobName();
    return reply;
  }
  const auto& jobs = store_->jobs();
  const auto present = [](const protocol::JobSummary& j) {
    return j.waiting + j.running + j.ok + j.failed + j.replaced > 0;
  };
  if (request.name) {
    if (auto it = jobs.find(*request.name); it != jobs.end() && present(it->second)) {
      reply.jobs.push_back(it->second);
    }
    return reply;
  }
  const size_t limit =
      std::min<size_t>(std::max<int32_t>(1, request.limit.value_or(kMaxPage)), kMaxPage);
  auto it = request.after ? jobs.upper_bound(*request.after) : jobs.begin();
  for (; it != jobs.end() && reply.jobs.size() < limit; ++it) {
    if (present(it->second)) reply.jobs.push_back(it->second);
  }
  reply.more = it != jobs.end();
  return reply;
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

protocol::QueueReply HubServer::Impl::QueueStatus() const {
  std::map<int32_t, protocol::EngineQueue> by_engine;
  for (const auto& [id, record] : core_.registry().alive()) by_engine[id].engine_id = id;
  protocol::QueueReply reply;
  reply.unassigned = store_->waiting();
  for (const auto& [id, tally] : store_->by_engine()) {
    if (tally.running == 0 && tally.finished == 0) continue;
    auto& q = by_engine[id];
    q.engine_id = id;
    // An engine runs one task at a time; the rest it holds are queued.
    q.running = std::min<int64_t>(tally.running, 1);
    q.queued = tally.running - q.running;
    q.completed = tally.finished;
  }
  for (auto& [id, q] : by_engine) reply.engines.push_back(q);
  return reply;
}

}  // namespace ztask::hub
