// Queries: what the client asks of the hub (records, listings, jobs,
// engines, queue, stats, purge, engine states, shutdown) and of the
// scheduler (abort), each one request and its reply through the Waiter,
// the replies turned into the public values.
//
// Must not: keep state between calls (the hub keeps it), or read the
// scheduler's replies to tasks (replies.cc does, through the Waiter's
// hooks). Thread safety: the client's one thread, like all of Client::Impl.
#include <algorithm>
#include <unordered_map>

#include "client/client_impl.h"
#include "protocol/resources.h"

namespace ztask {

using protocol::MsgType;

Result<std::vector<TaskInfo>> Client::Impl::Fetch(const std::vector<TaskId>& ids,
                                                  bool tolerate_unknown,
                                                  std::vector<TaskId>* unknown,
                                                  std::optional<client::HeldUntil> held,
                                                  int32_t held_ms) {
  if (ids.empty()) return FetchEvery();
  protocol::TaskIdList request{ids, std::nullopt, std::nullopt};
  if (held) {
    request.wait = std::string(client::HeldUntilName(*held));
    request.wait_ms = held_ms;
  }
  auto reply = waiter_.Ask<MsgType::kResultRequest, MsgType::kResultReply>(
      hub_peer_, request, std::chrono::milliseconds(held_ms));
  if (!reply.ok()) return reply.status();
  std::unordered_map<TaskId, const protocol::TaskRecord*, TaskIdHash> by_id;
  for (const auto& r : reply->records) by_id[r.id] = &r;
  std::vector<TaskInfo> out;
  for (const TaskId& id : ids) {
    auto it = by_id.find(id);
    if (it != by_id.end()) {
      out.push_back(client::FromRecord(*it->second));
    } else if (tolerate_unknown) {
      if (unknown) unknown->push_back(id);
    } else {
      return Status::NotFound("unknown task id " + id.ToHex());
    }
  }
  return out;
}

// Every record, page by page (in id order): one reply could not hold a
// long history.
Result<std::vector<TaskInfo>> Client::Impl::FetchEvery() {
  std::vector<TaskInfo> out;
  protocol::TaskIdList request{{}, std::nullopt, kRecordsPerPage};
  while (true) {
    auto page = waiter_.Ask<MsgType::kResultRequest, MsgType::kResultReply>(hub_peer_, request);
    if (!page.ok()) return page.status();
    for (const auto& r : page->records) out.push_back(client::FromRecord(r));
    if (!page->more.value_or(false) || page->records.empty()) return out;
    request.after = page->records.back().id;
  }
}

// In parts the hub can hold (it holds 100,000 ids in all, and answers at
// once past that), one after the other within the one timeout.
Result<std::vector<TaskInfo>> Client::Impl::FetchWhen(const std::vector<TaskId>& ids,
                                                      bool finished, double timeout_s) {
  const double held = std::clamp(timeout_s, 0.0, 60.0);
  const double start = base::MonotonicSeconds();
  std::vector<TaskInfo> out;
  out.reserve(ids.size());
  for (size_t at = 0; at < ids.size(); at += kWaitAtOnce) {
    const std::vector<TaskId> part(
        ids.begin() + static_cast<std::ptrdiff_t>(at),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + kWaitAtOnce)));
    const double spent = base::MonotonicSeconds() - start;
    auto records =
        Fetch(part, false, nullptr,
              finished ? client::HeldUntil::kFinal : client::HeldUntil::kRecorded,
              static_cast<int32_t>(std::max(0.0, held - spent) * 1000));
    if (!records.ok()) return records.status();
    for (auto& r : *records) out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<TaskInfo>> Client::Impl::List(const std::string& job, TaskFilter filter) {
  std::vector<TaskInfo> out;
  protocol::TaskIdList request{{}, std::nullopt, kRecordsPerPage};
  if (!job.empty()) request.job = job;
  if (filter != TaskFilter::kAll) request.status = std::string(TaskFilterName(filter));
  while (true) {
    auto page = waiter_.Ask<MsgType::kResultRequest, MsgType::kResultReply>(hub_peer_, request);
    if (!page.ok()) return page.status();
    for (const auto& r : page->records) out.push_back(client::FromRecord(r));
    if (!page->more.value_or(false)) return out;
    if (page->next) {
      request.after = page->next;
    } else if (!page->records.empty()) {
      request.after = page->records.back().id;
    } else {
      return out;
    }
  }
}

Result<std::string> Client::Impl::NewJob() {
  protocol::JobsRequest request;
  request.command = "new";
  auto reply = waiter_.Ask<MsgType::kJobsRequest, MsgType::kJobsReply>(hub_peer_, request);
  if (!reply.ok()) return reply.status();
  if (!reply->name) return Status::Unavailable("the hub made no name for a job");
  return *reply->name;
}

Result<std::vector<JobInfo>> Client::Impl::Jobs(const std::string& name) {
  std::vector<JobInfo> out;
  protocol::JobsRequest request;
  if (!name.empty()) request.name = name;
  while (true) {
    auto reply = waiter_.Ask<MsgType::kJobsRequest, MsgType::kJobsReply>(hub_peer_, request);
    if (!reply.ok()) return reply.status();
    for (const auto& j : reply->jobs) {
      out.push_back({j.name, j.waiting, j.running, j.ok, j.failed, j.replaced,
                     client::Seconds(j.first_submit_us), client::Seconds(j.last_finish_us)});
    }
    if (!reply->more.value_or(false) || reply->jobs.empty()) return out;
    request.after = reply->jobs.back().name;
  }
}

// Replies to tasks keep coming on the scheduler's socket meanwhile: the
// Waiter hands them on.
Result<AbortResult> Client::Impl::Abort(const std::vector<TaskId>& ids) {
  auto reply = waiter_.Ask<MsgType::kAbortRequest, MsgType::kAbortReply>(
      scheduler_peer_, protocol::AbortRequest{ids});
  if (!reply.ok()) return reply.status();
  return AbortResult{reply->aborted, reply->running, reply->finished, reply->unknown};
}

Result<QueueStatus> Client::Impl::Queue() {
  auto reply =
      waiter_.Ask<MsgType::kQueueRequest, MsgType::kQueueReply>(hub_peer_, protocol::Empty{});
  if (!reply.ok()) return reply.status();
  QueueStatus out;
  out.unassigned = reply->unassigned;
  for (const auto& e : reply->engines) {
    out.engines.push_back({e.engine_id, e.running, e.queued, e.completed});
  }
  return out;
}

namespace {

double SecondsOf(int64_t us) { return static_cast<double>(us) / 1e6; }

ClusterStats StatsOf(const protocol::Bodies<MsgType::kStatsReply>::Content& reply) {
  ClusterStats out;
  out.now = SecondsOf(reply.now_us);
  out.waiting = reply.waiting;
  out.running = reply.running;
  out.ok = reply.ok;
  out.failed = reply.failed;
  out.submitted_total = reply.submitted_total;
  out.ok_total = reply.ok_total;
  out.failed_total = reply.failed_total;
  out.retries_total = reply.retries_total;
  out.hub_dropped = reply.dropped;
  out.duration_bounds = reply.bucket_bounds;
  out.duration_counts = reply.bucket_counts;
  out.duration_sum = reply.duration_sum;
  if (const auto& s = reply.scheduler) {
    out.scheduler = ClusterStats::Scheduler{s->scheme,  s->hwm,     s->clients,
                                            s->waiting, s->ready,   s->running,
                                            s->engines, s->dropped, SecondsOf(reply.scheduler_age_us), {}};
    for (const auto& e : s->engine_hwms.value_or(std::vector<protocol::EngineHwm>{})) {
      out.scheduler->engine_hwms.emplace_back(e.engine_id, e.hwm);
    }
  }
  out.feed = reply.feed;
  out.missed = reply.missed;
  for (const auto& f : reply.finished) {
    out.finished.push_back({f.id, f.engine_id, f.ok, f.error_type, f.attempts, f.label,
                            SecondsOf(f.submitted_us), SecondsOf(f.started_us),
                            SecondsOf(f.completed_us), f.dependencies});
  }
  for (const auto& c : reply.current) out.current.emplace_back(c.engine_id, c.task_id);
  for (const auto& l : reply.labels) out.labels.push_back({l.prefix, l.submitted, l.ok, l.failed});
  return out;
}

}  // namespace

Result<ClusterStats> Client::Impl::Stats(std::optional<int64_t> feed_after, int32_t limit,
                                         bool sample) {
  auto reply = waiter_.Ask<MsgType::kStatsRequest, MsgType::kStatsReply>(
      hub_peer_,
      protocol::StatsRequest{feed_after, limit, sample ? std::optional(true) : std::nullopt});
  if (!reply.ok()) return reply.status();
  return StatsOf(*reply);
}

Result<std::vector<EngineStatus>> Client::Impl::Engines() {
  auto reply =
      waiter_.Ask<MsgType::kEnginesRequest, MsgType::kEnginesReply>(hub_peer_, protocol::Empty{});
  if (!reply.ok()) return reply.status();
  std::vector<EngineStatus> out;
  for (const auto& e : reply->engines) {
    out.push_back({e.id, e.name, e.host, e.state, e.pid,
                   static_cast<double>(e.registered_us) / 1e6, e.mpi_rank,
                   e.restarts.value_or(0), e.slots.value_or(1),
                   e.resources.value_or(protocol::ResourceMap{})});
  }
  return out;
}

// Asks the hub every 20 ms: engines register by themselves, nothing tells
// this client when.
Status Client::Impl::WaitForEngines(int n, double timeout_s) {
  size_t seen = 0;
  return waiter_.Until(
      [&] {
        auto engines = Engines();
        if (!engines.ok()) return client::Turn::Done(engines.status());
        seen = static_cast<size_t>(
            std::count_if(engines->begin(), engines->end(),
                          [](const auto& e) { return e.state == EngineState::kRunning; }));
        if (static_cast<int>(seen) >= n) return client::Turn::Done();
        return client::Turn::Again(std::chrono::milliseconds(20));
      },
      client::DeadlineAfter(std::max(0.0, timeout_s)),
      [&] {
        return Status::TimedOut(std::to_string(seen) + " of " + std::to_string(n) +
                                " engines registered within " + std::to_string(timeout_s) + " s");
      },
      hub_);
}

Result<int64_t> Client::Impl::Purge(const std::vector<TaskId>& ids, bool all) {
  auto reply = waiter_.Ask<MsgType::kPurgeRequest, MsgType::kPurgeReply>(
      hub_peer_, protocol::PurgeRequest{ids, all});
  if (!reply.ok()) return reply.status();
  return reply->count;
}

Status Client::Impl::ReportEngineState(const std::string& name, EngineState state,
                                       int32_t restarts, const std::string& why) {
  auto reply = waiter_.Ask<MsgType::kEngineState, MsgType::kEngineStateReply>(
      hub_peer_, protocol::EngineStateReport{name, state, restarts, why});
  return reply.ok() ? Status::Ok() : reply.status();
}

Status Client::Impl::Shutdown() {
  auto reply = waiter_.Ask<MsgType::kShutdownRequest, MsgType::kShutdownReply>(
      hub_peer_, protocol::Empty{});
  return reply.ok() ? Status::Ok() : reply.status();
}

}  // namespace ztask
