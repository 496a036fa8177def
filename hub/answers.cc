// The hub's answers to queries, built from the records and the registry
// (answers.h). Must not: send, receive, log or change what it reads
// (but for the job name NewJobName gives).
#include "hub/answers.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace ztask::hub {

protocol::RecoverReply Recover(const TaskStore& store, const protocol::RecoverRequest& request,
                               std::vector<TaskId>* without_request) {
  constexpr size_t kPageBytes = size_t{8} << 20;
  std::vector<TaskId> ids;
  store.ForEachUnfinished([&](const TaskId& id, const protocol::TaskRecord&) {
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
    const protocol::TaskRecord& r = *store.Find(ids[taken], &scratch);
    const KeptRequest* request = store.RequestOf(r.id);
    if (!request) {
      without_request->push_back(r.id);
      continue;
    }
    for (const auto* deps : {&r.routing.after.ids, &r.routing.follow.ids}) {
      for (const TaskId& dep : *deps) {
        protocol::TaskRecord scratch;
        const auto* d = store.Find(dep, &scratch);
        if (!d || !IsFinal(d->state) || !named.insert(dep).second) continue;
        reply.finished.push_back({dep, d->state == TaskState::kOk, d->engine_id});
      }
    }
    bytes += request->stored().size();
    reply.tasks.push_back({r.id, r.client, r.state, r.engine_id, r.attempts, request->frames()});
  }
  reply.done = taken == ids.size();
  return reply;
}

protocol::ResultReply Records(const TaskStore& store, const protocol::TaskIdList& request,
                              bool lean) {
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
      if (const auto* r = store.Find(id, &scratch)) {
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
  const std::vector<TaskId> ids = store.IdsAfter(request.after, limit + 1, request.job);
  size_t bytes = 0, taken = 0;
  for (; taken < std::min(limit, ids.size()) && (taken == 0 || bytes < kPageBytes); ++taken) {
    const protocol::TaskRecord* r = store.Find(ids[taken], &scratch);
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

bool InStatus(const protocol::TaskRecord& r, std::string_view status) {
  if (status == "failed") return r.state == TaskState::kError && !r.replaced_by;
  if (status == "waiting") return r.state == TaskState::kWaiting || r.state == TaskState::kNone;
  return TaskStateName(r.state) == status;
}

protocol::JobsReply Jobs(TaskStore& store, const protocol::JobsRequest& request) {
  constexpr size_t kMaxPage = 10000;
  protocol::JobsReply reply;
  if (request.command == "new") {
    reply.name = store.NewJobName();
    return reply;
  }
  const auto& jobs = store.jobs();
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

protocol::QueueReply QueueStatus(const TaskStore& store, const EngineRegistry& registry) {
  std::map<int32_t, protocol::EngineQueue> by_engine;
  for (const auto& [id, record] : registry.alive()) by_engine[id].engine_id = id;
  protocol::QueueReply reply;
  reply.unassigned = store.waiting();
  for (const auto& [id, tally] : store.by_engine()) {
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
