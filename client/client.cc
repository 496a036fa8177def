#include "ztask/client.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <unordered_set>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/flat_id_map.h"
#include "base/reactor.h"
#include "base/recent_id_map.h"
#include "protocol/codec.h"
#include "protocol/connection_file.h"
#include "protocol/placeholders.h"
#include "protocol/request.h"
#include "protocol/resources.h"
#include "protocol/security.h"
#include "protocol/wire.h"

namespace ztask {
namespace {

using protocol::Frames;
using protocol::MsgType;

std::optional<double> Seconds(std::optional<int64_t> us) {
  if (!us || *us == 0) return std::nullopt;
  return static_cast<double>(*us) / 1e6;
}

DependencySet FromWire(const protocol::WireDependencies& w) { return {w.ids, w.mode, w.outcome}; }
protocol::WireDependencies ToWire(const DependencySet& d) { return {d.ids, d.mode, d.outcome}; }

TaskInfo FromRecord(const protocol::TaskRecord& r) {
  TaskInfo info;
  info.id = r.id;
  info.status = TaskStateName(r.state);
  info.error_type = r.error_type;
  info.error_message = r.error_message;
  info.engine_id = r.engine_id;
  info.attempts = r.attempts;
  info.submitted = Seconds(r.submitted_us);
  info.started = Seconds(r.started_us);
  info.completed = Seconds(r.completed_us);
  info.exit_code = r.exit_code;
  info.stdout_text = r.stdout_text;
  info.stderr_text = r.stderr_text;
  info.stdout_truncated = r.stdout_truncated;
  info.stderr_truncated = r.stderr_truncated;
  if (!r.result.bytes.empty()) {
    info.result = Value::from_msgpack(r.result.bytes, true, false);
    if (info.result.is_discarded()) info.result = nullptr;
  }
  info.label = r.label;
  info.after = FromWire(r.routing.after);
  info.follow = FromWire(r.routing.follow);
  info.targets = r.routing.targets;
  info.timeout = r.routing.timeout_s;
  info.time_limit = r.routing.time_limit_s;
  info.retries = r.routing.retries;
  info.priority = r.routing.priority;
  info.slots = r.routing.slots.value_or(1);
  info.resources = r.routing.resources.value_or(protocol::ResourceMap{});
  info.job = r.job.value_or("");
  info.array_index = r.array_index;
  info.replaced_by = r.replaced_by;
  if (r.spec) {
    TaskOptions o;
    const protocol::TaskSpec& spec = *r.spec;
    o.command = spec.argv;
    if (spec.kind != "command") o.function = spec.function;
    if (!spec.args.bytes.empty()) {
      o.args = Value::from_msgpack(spec.args.bytes, true, false);
      if (o.args.is_discarded()) o.args = nullptr;
    }
    o.after = info.after;
    o.follow = info.follow;
    o.targets = info.targets;
    o.timeout = info.timeout;
    o.time_limit = info.time_limit;
    o.retries = info.retries;
    o.priority = info.priority;
    o.slots = info.slots;
    o.resources = info.resources;
    o.label = spec.label;
    o.cwd = spec.cwd;
    o.env = spec.env;
    o.pass_results = spec.pass_results.value_or(false);
    o.job = spec.job.value_or("");
    o.array_index = spec.array_index;
    o.stdout_path = spec.stdout_path.value_or("");
    o.stderr_path = spec.stderr_path.value_or("");
    info.spec = std::move(o);
  }
  return info;
}


}  // namespace

Value TaskInfo::ToJson() const {
  auto number = [](const std::optional<double>& d) { return d ? Value(*d) : Value(nullptr); };
  Value error = nullptr;
  if (status == "error") {
    error = {{"type", std::string(ErrorTypeName(error_type))}, {"message", error_message}};
  }
  return {
      {"id", id.ToHex()},
      {"status", status},
      {"error", error},
      {"engine_id", engine_id ? Value(*engine_id) : Value(nullptr)},
      {"attempts", attempts},
      {"submitted", number(submitted)},
      {"started", number(started)},
      {"completed", number(completed)},
      {"exit_code", exit_code ? Value(*exit_code) : Value(nullptr)},
      {"stdout", stdout_text},
      {"stderr", stderr_text},
      {"result", result},
      {"label", label},
      {"job", job.empty() ? Value(nullptr) : Value(job)},
      {"array_index", array_index ? Value(*array_index) : Value(nullptr)},
      {"replaced_by", replaced_by ? Value(replaced_by->ToHex()) : Value(nullptr)},
  };
}

Value JobInfo::ToJson() const {
  auto number = [](const std::optional<double>& d) { return d ? Value(*d) : Value(nullptr); };
  return {{"name", name},         {"total", total()},   {"waiting", waiting},
          {"running", running},   {"ok", ok},           {"failed", failed},
          {"replaced", replaced}, {"first_submit", number(first_submit)},
          {"last_finish", number(last_finish)}};
}

class Client::Impl {
 public:
  Impl(protocol::ConnectionInfo info, std::string profile)
      : info_(std::move(info)),
        profile_(std::move(profile)),
        signer_(info_.key),
        session_(TaskId::Random().ToHex()),
        scheduler_(context_, zmq::socket_type::dealer),
        hub_(context_, zmq::socket_type::dealer) {
    for (auto* s : {&scheduler_, &hub_}) {
      s->set(zmq::sockopt::linger, 1000);  // time to send what is queued at exit
      s->set(zmq::sockopt::sndhwm, 1000000);
      protocol::SecureClient(*s, info_);
    }
    // No routing id of our own: the scheduler replies on the connection
    // that last carried a signed message of this session (a restarted
    // scheduler learns it from the unanswered tasks sent again).
    scheduler_.connect(info_.scheduler.client);
    scheduler_watch_ = std::make_unique<protocol::ReconnectWatch>(context_, scheduler_);
    hub_.connect(info_.hub.query);
  }

  Result<TaskId> Submit(const TaskOptions& o) {
    auto ids = SubmitMany({o}, nullptr);
    if (!ids.ok()) return ids.status();
    return ids->front();
  }

  // Sends the tasks in order, in task_batch messages of up to
  // kMaxBatchTasks, under `ids` when given (else new ones). Every task is
  // checked first: one that is wrong fails the call and nothing is sent.
  Result<std::vector<TaskId>> SubmitMany(const std::vector<TaskOptions>& tasks,
                                         const std::vector<TaskId>* ids) {
    std::vector<std::vector<std::string>> requests;
    requests.reserve(tasks.size());
    std::vector<TaskId> out;
    out.reserve(tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      const TaskId id = ids ? (*ids)[i] : TaskId::New();
      auto request = EncodeRequest(tasks[i], id);
      if (!request.ok()) {
        if (tasks.size() == 1) return request.status();
        return Status::InvalidArgument("task " + std::to_string(i + 1) + " of " +
                                       std::to_string(tasks.size()) + ": " +
                                       request.status().message());
      }
      requests.push_back(std::move(*request));
      out.push_back(id);
    }
    size_t first = 0, bytes = 0;  // the batch being gathered: requests[first..i)
    for (size_t i = 0; i < requests.size(); ++i) {
      if (unanswered_.size() + (i - first) >= max_in_flight_) {
        // No room for more without replies: what is gathered goes first.
        ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, i));
        first = i;
        bytes = 0;
        ZTASK_RETURN_IF_ERROR(WaitForRoom());
      }
      for (const auto& f : requests[i]) bytes += f.size();
      if (i + 1 - first >= protocol::kMaxBatchTasks || bytes >= protocol::kMaxBatchBytes) {
        ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, i + 1));
        first = i + 1;
        bytes = 0;
      }
    }
    ZTASK_RETURN_IF_ERROR(SendRequests(requests, out, first, requests.size()));
    return out;
  }

  void set_max_in_flight(size_t n) { max_in_flight_ = std::max<size_t>(1, n); }
  void set_keep_answered(size_t n) {
    submitted_.set_capacity(n);
    replied_.set_capacity(n);
  }

  // Reads the replies that came, and after a reconnection sends again what
  // a restarted scheduler never received: whatever call the program makes
  // next (a Fetch in a loop, say) heals a lost connection.
  void Notice() {
    DrainReplies();
    if (reconnected_ && base::MonotonicSeconds() >= next_notice_check_) {
      Resync();  // the hub may have been away at the reconnection too
      next_notice_check_ = base::MonotonicSeconds() + kRecheckS;
    }
  }

  bool Ready(const TaskId& id) {
    DrainReplies();
    return replied_.contains(id);
  }

  std::optional<ErrorType> ReplyOf(const TaskId& id) {
    DrainReplies();
    const uint8_t* replied = replied_.find(id);
    if (!replied) return std::nullopt;
    return static_cast<ErrorType>(*replied - 1);
  }

  Status WaitReplies(const std::vector<TaskId>& ids, double timeout_s) {
    const double deadline = base::MonotonicSeconds() + timeout_s;
    // A task with neither a reply remembered nor one to come (answered long
    // ago, or submitted elsewhere) is waited for in the hub's record.
    std::vector<TaskId> elsewhere;
    for (const TaskId& id : ids) {
      if (!replied_.contains(id) && !unanswered_.contains(id)) elsewhere.push_back(id);
    }
    if (!elsewhere.empty()) ZTASK_RETURN_IF_ERROR(Wait(elsewhere, timeout_s));
    double next_check = base::MonotonicSeconds() + kRecheckS;
    for (const TaskId& id : ids) {
      while (!replied_.contains(id) && unanswered_.contains(id)) {
        const double left = deadline - base::MonotonicSeconds();
        if (left <= 0) {
          return Status::TimedOut("no reply within " + std::to_string(timeout_s) + " s");
        }
        WaitForReplyOrSleep(static_cast<int>(std::min(left * 1000, 100.0)) + 1);
        DrainReplies();
        // After a reconnection, a reply the scheduler sent while this client
        // was not connected is only in the hub's record: look there too.
        if (reconnected_ && base::MonotonicSeconds() >= next_check) {
          Resync();
          next_check = base::MonotonicSeconds() + kRecheckS;
        }
      }
    }
    return Status::Ok();
  }

  // With `wait` ("recorded" or "final"), the hub answers once every task
  // is, or after `wait_ms`.
  Result<std::vector<TaskInfo>> Fetch(const std::vector<TaskId>& ids, bool tolerate_unknown,
                                      std::vector<TaskId>* unknown,
                                      std::optional<std::string> wait = std::nullopt,
                                      int32_t wait_ms = 0) {
    if (ids.empty()) return FetchEvery();
    protocol::TaskIdList request{ids, std::nullopt, std::nullopt};
    if (wait) {
      request.wait = std::move(wait);
      request.wait_ms = wait_ms;
    }
    auto reply = Ask<MsgType::kResultRequest, MsgType::kResultReply>(request, wait_ms / 1000.0);
    if (!reply.ok()) return reply.status();
    std::unordered_map<TaskId, const protocol::TaskRecord*, TaskIdHash> by_id;
    for (const auto& r : reply->records) by_id[r.id] = &r;
    std::vector<TaskInfo> out;
    for (const TaskId& id : ids) {
      auto it = by_id.find(id);
      if (it != by_id.end()) {
        out.push_back(FromRecord(*it->second));
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
  Result<std::vector<TaskInfo>> FetchEvery() {
    std::vector<TaskInfo> out;
    protocol::TaskIdList request{{}, std::nullopt, kRecordsPerPage};
    while (true) {
      auto page = Ask<MsgType::kResultRequest, MsgType::kResultReply>(request);
      if (!page.ok()) return page.status();
      for (const auto& r : page->records) out.push_back(FromRecord(r));
      if (!page->more.value_or(false) || page->records.empty()) return out;
      request.after = page->records.back().id;
    }
  }
  static constexpr int32_t kRecordsPerPage = 20000;
  static constexpr size_t kWaitAtOnce = 10000;

  Result<std::vector<TaskInfo>> List(const std::string& job, const std::string& status) {
    std::vector<TaskInfo> out;
    protocol::TaskIdList request{{}, std::nullopt, kRecordsPerPage};
    if (!job.empty()) request.job = job;
    if (!status.empty()) request.status = status;
    while (true) {
      auto page = Ask<MsgType::kResultRequest, MsgType::kResultReply>(request);
      if (!page.ok()) return page.status();
      for (const auto& r : page->records) out.push_back(FromRecord(r));
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

  Result<std::string> NewJob() {
    protocol::JobsRequest request;
    request.command = "new";
    auto reply = Ask<MsgType::kJobsRequest, MsgType::kJobsReply>(request);
    if (!reply.ok()) return reply.status();
    if (!reply->name) return Status::Unavailable("the hub made no name for a job");
    return *reply->name;
  }

  Result<std::vector<JobInfo>> Jobs(const std::string& name) {
    std::vector<JobInfo> out;
    protocol::JobsRequest request;
    if (!name.empty()) request.name = name;
    while (true) {
      auto reply = Ask<MsgType::kJobsRequest, MsgType::kJobsReply>(request);
      if (!reply.ok()) return reply.status();
      for (const auto& j : reply->jobs) {
        out.push_back({j.name, j.waiting, j.running, j.ok, j.failed, j.replaced,
                       Seconds(j.first_submit_us), Seconds(j.last_finish_us)});
      }
      if (!reply->more.value_or(false) || reply->jobs.empty()) return out;
      request.after = reply->jobs.back().name;
    }
  }

  Status Wait(const std::vector<TaskId>& ids, double timeout_s) {
    const double start = base::MonotonicSeconds();
    // A task just submitted (here or by another process) may not have
    // reached the hub yet: an id is unknown for good once the hub has
    // recorded or finished none of the awaited tasks for this long (a hub
    // that is behind, still taking them in, is not a reason to give up).
    constexpr double kGrace = 3.0;
    std::set<TaskId> pending(ids.begin(), ids.end());
    double progress_at = start;
    size_t last_unknown = SIZE_MAX, last_pending = pending.size();
    int backoff_ms = 1;
    while (true) {
      DrainReplies();
      // Every one must finish: the first kWaitAtOnce are waited for, then
      // the next, so that the hub holds a bounded request.
      std::vector<TaskId> ask;
      for (auto it = pending.begin(); it != pending.end() && ask.size() < kWaitAtOnce; ++it) {
        ask.push_back(*it);
      }
      std::vector<TaskId> unknown;
      // The hub answers when they are all final, or after a second at
      // most: no polling, and unknown ids and the timeout are looked at
      // again each second.
      const double left = timeout_s < 0 ? 1.0 : timeout_s - (base::MonotonicSeconds() - start);
      const int32_t wait_ms = static_cast<int32_t>(std::clamp(left, 0.0, 1.0) * 1000);
      const double asked = base::MonotonicSeconds();
      auto records = Fetch(ask, true, &unknown, "final", wait_ms);
      if (!records.ok()) return records.status();
      // A hub that could not hold the request (it holds at most so many)
      // answered at once: do not ask again at once.
      if (base::MonotonicSeconds() - asked < wait_ms / 2000.0) {
        WaitForReplyOrSleep(backoff_ms);
        backoff_ms = std::min(backoff_ms * 2, 50);
      } else {
        backoff_ms = 1;
      }
      for (const auto& r : *records) {
        if (r.finished()) pending.erase(r.id);
      }
      if (pending.empty()) return Status::Ok();
      if (unknown.size() < last_unknown || pending.size() < last_pending) progress_at = base::MonotonicSeconds();
      last_unknown = unknown.size();
      last_pending = pending.size();
      const double waited = base::MonotonicSeconds() - start;
      for (const TaskId& id : unknown) {
        if (base::MonotonicSeconds() - progress_at > kGrace && !submitted_.contains(id)) {
          return Status::NotFound("unknown task id " + id.ToHex());
        }
      }
      if (timeout_s >= 0 && waited > timeout_s) {
        return Status::TimedOut(std::to_string(pending.size()) + " of " +
                                std::to_string(ids.size()) + " tasks had not finished after " +
                                std::to_string(timeout_s) + " s");
      }
    }
  }

  Result<AbortResult> Abort(const std::vector<TaskId>& ids) {
    protocol::Header header{TaskId::Random(), MsgType::kAbortRequest, session_,
                            base::WallMicros()};
    protocol::AskOptions options;
    options.timeout = std::chrono::seconds(10);
    // Replies to tasks keep coming on the same socket meanwhile.
    options.on_other = [this](const protocol::Header& h, std::span<const std::string_view> views) {
      NoteReplies(h, {views.begin(), views.end()});
    };
    auto reply = protocol::Ask<MsgType::kAbortReply>(scheduler_, signer_, header,
                                                     protocol::AbortRequest{ids}, options);
    if (!reply.ok()) {
      if (reply.status().code() != Status::Code::kTimedOut) return reply.status();
      return Unreachable("scheduler", info_.scheduler.client);
    }
    const auto& c = reply->content;
    return AbortResult{c.aborted, c.running, c.finished, c.unknown};
  }

  Result<QueueStatus> Queue() {
    auto reply = Ask<MsgType::kQueueRequest, MsgType::kQueueReply>(protocol::Empty{});
    if (!reply.ok()) return reply.status();
    QueueStatus out;
    out.unassigned = reply->unassigned;
    for (const auto& e : reply->engines) {
      out.engines.push_back({e.engine_id, e.running, e.queued, e.completed});
    }
    return out;
  }

  Result<ClusterStats> Stats(std::optional<int64_t> feed_after, int32_t limit) {
    auto reply = Ask<MsgType::kStatsRequest, MsgType::kStatsReply>(
        protocol::StatsRequest{feed_after, limit});
    if (!reply.ok()) return reply.status();
    const auto seconds = [](int64_t us) { return static_cast<double>(us) / 1e6; };
    ClusterStats out;
    out.now = seconds(reply->now_us);
    out.waiting = reply->waiting;
    out.running = reply->running;
    out.ok = reply->ok;
    out.failed = reply->failed;
    out.submitted_total = reply->submitted_total;
    out.ok_total = reply->ok_total;
    out.failed_total = reply->failed_total;
    out.retries_total = reply->retries_total;
    out.hub_dropped = reply->dropped;
    out.duration_bounds = reply->bucket_bounds;
    out.duration_counts = reply->bucket_counts;
    out.duration_sum = reply->duration_sum;
    if (const auto& s = reply->scheduler) {
      out.scheduler = ClusterStats::Scheduler{s->scheme,  s->hwm,     s->clients,
                                              s->waiting, s->ready,   s->running,
                                              s->engines, s->dropped, seconds(reply->scheduler_age_us)};
    }
    out.feed = reply->feed;
    out.missed = reply->missed;
    for (const auto& f : reply->finished) {
      out.finished.push_back({f.id, f.engine_id, f.ok, f.error_type, f.attempts, f.label,
                              seconds(f.submitted_us), seconds(f.started_us),
                              seconds(f.completed_us), f.dependencies});
    }
    for (const auto& c : reply->current) out.current.emplace_back(c.engine_id, c.task_id);
    for (const auto& l : reply->labels) out.labels.push_back({l.prefix, l.submitted, l.ok, l.failed});
    return out;
  }

  Result<std::vector<EngineStatus>> Engines() {
    auto reply = Ask<MsgType::kEnginesRequest, MsgType::kEnginesReply>(protocol::Empty{});
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

  Status Watch(const std::function<bool(const Value&)>& on_event) {
    zmq::socket_t events(context_, zmq::socket_type::sub);
    events.set(zmq::sockopt::subscribe, "");
    events.set(zmq::sockopt::linger, 0);
    protocol::SecureClient(events, info_);
    events.connect(info_.hub.events);
    Frames frames;
    while (true) {
      base::WaitReady(events, ZMQ_POLLIN, std::chrono::milliseconds(200));
      while (protocol::TryReceive(events, frames)) {
        auto event = protocol::DecodeMessage<MsgType::kEvent>(signer_, {}, protocol::Views(frames));
        if (!event.ok()) continue;
        const auto& e = event->content;
        Value json = {{"seq", e.seq ? Value(*e.seq) : Value(nullptr)},
                      {"kind", e.kind},
                      {"task_id", e.task_id ? Value(e.task_id->ToHex()) : Value(nullptr)},
                      {"engine_id", e.engine_id ? Value(*e.engine_id) : Value(nullptr)},
                      {"attempt", e.attempt ? Value(*e.attempt) : Value(nullptr)},
                      {"status", e.status.empty() ? Value(nullptr) : Value(e.status)},
                      {"error_type", e.error_type == ErrorType::kNone
                                         ? Value(nullptr)
                                         : Value(std::string(ErrorTypeName(e.error_type)))},
                      {"text", e.text},
                      {"at", static_cast<double>(e.at_us) / 1e6}};
        if (!on_event(json)) return Status::Ok();
      }
    }
  }

  Result<int64_t> Purge(const std::vector<TaskId>& ids, bool all) {
    auto reply =
        Ask<MsgType::kPurgeRequest, MsgType::kPurgeReply>(protocol::PurgeRequest{ids, all});
    if (!reply.ok()) return reply.status();
    return reply->count;
  }

  Status ReportEngineState(const protocol::EngineStateReport& state) {
    auto reply = Ask<MsgType::kEngineState, MsgType::kEngineStateReply>(state);
    return reply.ok() ? Status::Ok() : reply.status();
  }

  Status Shutdown() {
    auto reply = Ask<MsgType::kShutdownRequest, MsgType::kShutdownReply>(protocol::Empty{});
    return reply.ok() ? Status::Ok() : reply.status();
  }

 private:
  // A task_request's frames (signature, an empty HMAC, header, parent,
  // metadata, content), or what is wrong with the task.
  Result<std::vector<std::string>> EncodeRequest(const TaskOptions& o, const TaskId& id) {
    protocol::TaskSpec spec;
    if (!o.command.empty() && !o.function.empty()) {
      return Status::InvalidArgument("a task is a command or a function, not both");
    }
    if (o.command.empty() && o.function.empty()) {
      return Status::InvalidArgument("a task needs a command or a function");
    }
    spec.kind = o.command.empty() ? "function" : "command";
    spec.function = o.function;
    spec.argv = o.command;
    if (!o.args.is_null()) {
      std::vector<uint8_t> packed = Value::to_msgpack(o.args);
      spec.args.bytes.assign(packed.begin(), packed.end());
      // What the engine and the hub could not read is refused here, at once.
      if (Status s = protocol::CheckValue(spec.args.bytes); !s.ok()) {
        return Status::InvalidArgument("the task's arguments break the limits on values: " +
                                       s.message());
      }
    }
    spec.cwd = o.cwd;
    spec.env = o.env;
    spec.label = o.label;
    if (o.pass_results) spec.pass_results = true;
    if (!o.job.empty()) spec.job = o.job;
    spec.array_index = o.array_index;
    if (std::string e = protocol::AmountsError(o.slots, o.resources, 0); !e.empty()) {
      return Status::InvalidArgument("a task's " + e);
    }
    ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stdout", o.stdout_path));
    ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stderr", o.stderr_path));
    if (!o.stdout_path.empty()) spec.stdout_path = o.stdout_path;
    if (!o.stderr_path.empty()) spec.stderr_path = o.stderr_path;
    spec.replaces = o.replaces;
    // Slots and resources absent when the defaults: a plain task's metadata
    // stays as it was.
    protocol::RoutingMeta meta{ToWire(o.after),
                               ToWire(o.follow),
                               o.targets,
                               o.timeout,
                               o.time_limit,
                               o.retries,
                               o.priority,
                               o.slots != 1 ? std::optional<int32_t>(o.slots) : std::nullopt,
                               o.resources.empty() ? std::nullopt
                                                   : std::optional(o.resources)};
    const protocol::Header header{id, MsgType::kTaskRequest, session_, base::WallMicros()};
    std::vector<std::string> frames{std::string(protocol::kProtocolSignature), std::string()};
    for (auto& f : protocol::EncodeInner(header, std::nullopt, meta, spec)) {
      frames.push_back(std::move(f));
    }
    return frames;
  }

  // Sends requests[first..end): one alone as a task_request, more as one
  // task_batch; they count as unanswered from then on.
  Status SendRequests(std::vector<std::vector<std::string>>& requests,
                      const std::vector<TaskId>& ids, size_t first, size_t end) {
    if (first == end) return Status::Ok();
    if (end - first == 1) {
      std::vector<std::string>& request = requests[first];
      std::vector<std::string_view> views(request.begin(), request.end());
      request[protocol::kFrameHmac] = signer_.Sign(views);
      ZTASK_RETURN_IF_ERROR(SendToScheduler(request));
    } else {
      std::vector<std::vector<std::string>> inner;
      inner.reserve(end - first);
      for (size_t i = first; i < end; ++i) {
        inner.emplace_back(requests[i].begin() + protocol::kFrameHeader, requests[i].end());
      }
      const protocol::Header header{TaskId::Random(), MsgType::kTaskBatch, session_,
                                    base::WallMicros()};
      ZTASK_RETURN_IF_ERROR(SendToScheduler(protocol::EncodeBatch(signer_, header, inner)));
    }
    for (size_t i = first; i < end; ++i) {
      submitted_.try_emplace(ids[i], 1);
      unanswered_.emplace(ids[i], std::pair{next_submission_++, std::move(requests[i])});
    }
    return Status::Ok();
  }

  // Flow control: at most max_in_flight_ tasks without a reply.
  Status WaitForRoom() {
    double next_check = base::MonotonicSeconds() + kRecheckS;
    const double give_up = base::MonotonicSeconds() + kStalledS;
    while (true) {
      DrainReplies();
      if (unanswered_.size() < max_in_flight_) return Status::Ok();
      if (base::MonotonicSeconds() > give_up) {
        return Status::Unavailable("no reply from the scheduler at " + info_.scheduler.client +
                                   " for " + std::to_string(static_cast<int>(kStalledS)) +
                                   " s with " + std::to_string(unanswered_.size()) +
                                   " tasks in flight");
      }
      WaitForReplyOrSleep(100);
      if (reconnected_ && base::MonotonicSeconds() >= next_check) {
        Resync();
        next_check = base::MonotonicSeconds() + kRecheckS;
      }
    }
  }

  // A full send queue (the scheduler reads slower than this client writes)
  // is waited out, not an error.
  Status SendToScheduler(const std::vector<std::string>& request) {
    const double give_up = base::MonotonicSeconds() + kStalledS;
    while (true) {
      Status sent = protocol::SendEncoded(scheduler_, {}, request);
      if (sent.ok()) return sent;
      if (!protocol::IsQueueFull(sent) || base::MonotonicSeconds() > give_up) {
        return Status::Unavailable("cannot send to the scheduler at " + info_.scheduler.client +
                                   ": " + sent.message());
      }
      DrainReplies();
      base::WaitReady(scheduler_, ZMQ_POLLOUT, std::chrono::milliseconds(100));
    }
  }

  Status Unreachable(const std::string& who, const std::string& where) {
    return Status::Unavailable("the " + who + " at " + where +
                               " does not answer: is the cluster in " + profile_ +
                               " running? (start one with: taskcluster start)");
  }

  // One request to the hub and its reply, matched by parent id.
  // `held_s`: how long the hub may hold the request before it answers.
  template <MsgType kRequest, MsgType kReply, class Content>
  Result<typename protocol::Bodies<kReply>::Content> Ask(const Content& content,
                                                         double held_s = 0) {
    protocol::Header header{TaskId::Random(), kRequest, session_, base::WallMicros()};
    protocol::AskOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>((5 + held_s) * 1000));
    auto reply = protocol::Ask<kReply>(hub_, signer_, header, content, options);
    if (!reply.ok()) {
      if (reply.status().code() != Status::Code::kTimedOut) return reply.status();
      return Unreachable("hub", info_.hub.query);
    }
    return std::move(reply->content);
  }

  // A verified task_reply, or a task_batch of them.
  void NoteReplies(const protocol::Header& header, const std::vector<std::string_view>& views) {
    if (header.type == MsgType::kTaskReply) return NoteReply(views);
    if (header.type != MsgType::kTaskBatch) return;
    auto replies = protocol::UnpackBatch(views);
    if (!replies.ok()) return;
    for (const auto& reply : *replies) NoteReply(reply);
  }

  void NoteReply(const std::vector<std::string_view>& views) {
    auto parent = protocol::DecodeParent(views[protocol::kFrameParent]);
    auto meta = protocol::DecodeBody<protocol::ReplyMeta>(views[protocol::kFrameMeta]);
    if (!parent.ok() || !*parent || !meta.ok()) return;
    Answered((*parent)->id, meta->ok ? ErrorType::kNone : meta->error_type);
  }

  // A reply may come twice (from the scheduler and from the hub after a
  // reconnection): it counts once.
  void Answered(const TaskId& id, ErrorType error) {
    replied_.try_emplace(id, static_cast<uint8_t>(static_cast<uint8_t>(error) + 1));
    unanswered_.erase(id);
    // Nothing is left that a reconnection could have lost a reply of.
    if (unanswered_.empty()) reconnected_ = false;
  }

  void DrainReplies() {
    if (scheduler_watch_->Reconnected()) {
      reconnected_ = true;
      Resync();
    }
    Frames frames;
    while (protocol::TryReceive(scheduler_, frames)) {
      auto views = protocol::Views(frames);
      if (!protocol::CheckFrames(signer_, protocol::Limits{}, views).ok()) continue;
      auto header = protocol::DecodeHeader(views[protocol::kFrameHeader]);
      if (header.ok()) NoteReplies(*header, views);
    }
  }

  // The connection to the scheduler was made again (it restarted, or the
  // network came back). For each task with no reply yet, the hub says
  // whether it finished (its record is the reply), is known (a restarted
  // scheduler restored it from the hub and will reply), or was never
  // recorded: that one the scheduler may never have had, so it goes again,
  // under the same id (a scheduler that has it ignores it).
  void Resync() {
    if (unanswered_.empty()) return;
    std::vector<TaskId> all;
    all.reserve(unanswered_.size());
    unanswered_.for_each([&](const TaskId& id, const auto&) { all.push_back(id); });
    std::vector<TaskId> unknown;
    constexpr size_t kPerQuery = 10000;
    for (size_t at = 0; at < all.size(); at += kPerQuery) {
      const std::vector<TaskId> ids(
          all.begin() + static_cast<std::ptrdiff_t>(at),
          all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + kPerQuery)));
      auto records = Fetch(ids, true, &unknown);
      if (!records.ok()) return;  // the hub is away too: the next check asks again
      for (const TaskInfo& r : *records) {
        if (r.finished()) Answered(r.id, r.status == "ok" ? ErrorType::kNone : r.error_type);
      }
    }
    // In the order they were first sent: a task comes after those it
    // depends on, which may be among them.
    std::erase_if(unknown, [&](const TaskId& id) { return !unanswered_.contains(id); });
    std::sort(unknown.begin(), unknown.end(), [&](const TaskId& a, const TaskId& b) {
      return unanswered_.find(a)->first < unanswered_.find(b)->first;
    });
    for (const TaskId& id : unknown) {
      std::vector<std::string>& frames = unanswered_.find(id)->second;
      auto header = protocol::DecodeHeader(frames[protocol::kFrameHeader]);
      if (!header.ok()) continue;
      header->date_us = base::WallMicros();  // the scheduler refuses older dates
      frames[protocol::kFrameHeader] = protocol::EncodeHeader(*header);
      std::vector<std::string_view> views(frames.begin(), frames.end());
      frames[protocol::kFrameHmac] = signer_.Sign(views);
      (void)protocol::SendEncoded(scheduler_, {}, frames);
    }
  }

  void WaitForReplyOrSleep(int ms) {
    base::WaitReady(scheduler_, ZMQ_POLLIN, std::chrono::milliseconds(ms));
  }

  protocol::ConnectionInfo info_;
  std::string profile_;
  protocol::Signer signer_;
  std::string session_;
  zmq::context_t context_{1};
  zmq::socket_t scheduler_, hub_;
  std::unique_ptr<protocol::ReconnectWatch> scheduler_watch_;
  // By id, the latest kKeepAnswered of them: tasks submitted; tasks with
  // their reply, and the reply's outcome (1 + its ErrorType). What is let
  // go of is in the hub's record (WaitReplies reads it there).
  static constexpr size_t kKeepAnswered = 1000000;
  RecentIdMap<uint8_t> submitted_{kKeepAnswered}, replied_{kKeepAnswered};
  // The requests of tasks with no reply yet, encoded, to send again.
  // (submission number, frames) by id.
  FlatIdMap<std::pair<uint64_t, std::vector<std::string>>> unanswered_;
  uint64_t next_submission_ = 0;
  bool reconnected_ = false;
  double next_notice_check_ = 0;
  size_t max_in_flight_ = 1000000;
  static constexpr double kRecheckS = 1.0;
  // A scheduler that takes nothing for this long is an error to the caller.
  static constexpr double kStalledS = 600.0;
};

Result<std::unique_ptr<Client>> Client::Connect(const std::filesystem::path& profile_dir) {
  std::error_code ec;
  const bool is_file = std::filesystem::is_regular_file(profile_dir, ec);
  const auto profile = profile_dir.empty() ? protocol::DefaultProfileDir()
                       : is_file           ? profile_dir.parent_path()
                                           : profile_dir;
  const auto path = is_file ? profile_dir : protocol::ConnectionFilePath(profile);
  auto info = protocol::ReadConnectionFile(path);
  if (!info.ok()) {
    if (info.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("no cluster is running with profile " + profile.string() +
                              ": start one with: taskcluster start --profile-dir " +
                              profile.string());
    }
    return info.status();
  }
  ZTASK_RETURN_IF_ERROR(protocol::CheckAuthenticated(*info, /*allow_insecure=*/true, path));
  if (info->hub.query.empty() || info->scheduler.client.empty()) {
    return Status::Unavailable("the cluster in " + profile.string() +
                               " has not finished starting (no hub or scheduler endpoint yet)");
  }
  try {
    return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(*info, profile.string())));
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("cannot connect: ") + e.what());
  }
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
Result<TaskId> Client::Submit(const TaskOptions& options) { return impl_->Submit(options); }
Result<std::vector<TaskId>> Client::SubmitMany(const std::vector<TaskOptions>& tasks) {
  return impl_->SubmitMany(tasks, nullptr);
}
Result<std::vector<TaskId>> Client::SubmitMany(const std::vector<TaskOptions>& tasks,
                                               const std::vector<TaskId>& ids) {
  if (ids.size() != tasks.size()) {
    return Status::InvalidArgument("SubmitMany needs one id for each task");
  }
  return impl_->SubmitMany(tasks, &ids);
}
bool Client::Ready(const TaskId& id) { return impl_->Ready(id); }
std::optional<ErrorType> Client::ReplyOf(const TaskId& id) { return impl_->ReplyOf(id); }
void Client::set_max_in_flight(size_t n) { impl_->set_max_in_flight(n); }
void Client::set_keep_answered(size_t n) { impl_->set_keep_answered(n); }
Status Client::WaitReplies(const std::vector<TaskId>& ids, double timeout_s) {
  return impl_->WaitReplies(ids, timeout_s);
}
Status Client::Wait(const std::vector<TaskId>& ids, double timeout_s) {
  return impl_->Wait(ids, timeout_s);
}
Result<std::vector<TaskInfo>> Client::Fetch(const std::vector<TaskId>& ids) {
  if (ids.empty()) return std::vector<TaskInfo>{};
  impl_->Notice();
  return impl_->Fetch(ids, false, nullptr);
}
Result<std::vector<TaskInfo>> Client::FetchWhen(const std::vector<TaskId>& ids, bool finished,
                                                double timeout_s) {
  if (ids.empty()) return std::vector<TaskInfo>{};
  impl_->Notice();
  // In parts the hub can hold (it holds 100,000 ids in all, and answers at
  // once past that), one after the other within the one timeout.
  constexpr size_t kPart = 10000;
  const double held = std::clamp(timeout_s, 0.0, 60.0);
  const double start = base::MonotonicSeconds();
  std::vector<TaskInfo> out;
  out.reserve(ids.size());
  for (size_t at = 0; at < ids.size(); at += kPart) {
    const std::vector<TaskId> part(ids.begin() + static_cast<std::ptrdiff_t>(at),
                                   ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + kPart)));
    const double spent = base::MonotonicSeconds() - start;
    auto records = impl_->Fetch(part, false, nullptr, finished ? "final" : "recorded",
                                static_cast<int32_t>(std::max(0.0, held - spent) * 1000));
    if (!records.ok()) return records.status();
    for (auto& r : *records) out.push_back(std::move(r));
  }
  return out;
}
Result<std::vector<TaskInfo>> Client::List(const std::string& job, const std::string& status) {
  impl_->Notice();
  return impl_->List(job, status);
}
Result<std::string> Client::NewJob() { return impl_->NewJob(); }
Result<std::vector<JobInfo>> Client::Jobs(const std::string& name) { return impl_->Jobs(name); }
Result<std::vector<TaskInfo>> Client::FetchAll() {
  impl_->Notice();
  return impl_->Fetch({}, true, nullptr);
}
Result<AbortResult> Client::Abort(const std::vector<TaskId>& ids) { return impl_->Abort(ids); }
Result<QueueStatus> Client::Queue() { return impl_->Queue(); }
Result<ClusterStats> Client::Stats(std::optional<int64_t> feed_after, int32_t limit) {
  return impl_->Stats(feed_after, limit);
}
Result<std::vector<EngineStatus>> Client::Engines() { return impl_->Engines(); }
Status Client::Shutdown() { return impl_->Shutdown(); }
Status Client::ReportEngineState(const std::string& name, EngineState state,
                                 int32_t restarts, const std::string& why) {
  return impl_->ReportEngineState({name, state, restarts, why});
}
Result<int64_t> Client::Purge(const std::vector<TaskId>& ids, bool all) {
  return impl_->Purge(ids, all);
}
Status Client::Watch(const std::function<bool(const Value&)>& on_event) {
  return impl_->Watch(on_event);
}

Status Client::WaitForEngines(int n, double timeout_s) {
  const double deadline = base::MonotonicSeconds() + timeout_s;
  size_t seen = 0;
  while (true) {
    auto engines = Engines();
    if (!engines.ok()) return engines.status();
    seen = static_cast<size_t>(std::count_if(engines->begin(), engines->end(),
                                             [](const auto& e) { return e.state == EngineState::kRunning; }));
    if (static_cast<int>(seen) >= n) return Status::Ok();
    if (base::MonotonicSeconds() > deadline) {
      return Status::TimedOut(std::to_string(seen) + " of " + std::to_string(n) +
                              " engines registered within " + std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ztask
