// The bodies of every message: a header, and for each message type the
// struct of its routing metadata (frame 4) and of its content (frame 5).
// Each struct lists its fields once, in Visit(); codec.h turns that list into
// msgpack and back, so adding a field is one line. Fields wrapped in
// std::optional may be absent on the wire; every other field is required.
//
// Plain values; safe to copy and share read-only across threads.
#ifndef ZTASK_PROTOCOL_MESSAGES_H_
#define ZTASK_PROTOCOL_MESSAGES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/message_type.h"
#include "ztask/task.h"
#include "ztask/task_id.h"

namespace ztask::protocol {

// An already-encoded msgpack value carried through untouched (a function's
// arguments or result). Empty means nil.
struct RawValue {
  std::string bytes;
  friend bool operator==(const RawValue&, const RawValue&) = default;
};

// An empty map, for messages that have nothing to say in a frame.
struct Empty {
  template <class S, class V>
  static void Visit(S&, V&) {}
  friend bool operator==(const Empty&, const Empty&) = default;
};

struct Header {
  TaskId id;  // message id; for a task_request, the task's id
  MsgType type = MsgType::kHeartbeat;
  std::string session;  // the sending process's session
  int64_t date_us = 0;  // when it was sent, µs since the Unix epoch

  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("type", s.type);
    v("session", s.session);
    v("date", s.date_us);
  }
  friend bool operator==(const Header&, const Header&) = default;
};

// ---- tasks --------------------------------------------------------------

struct WireDependencies {
  std::vector<TaskId> ids;
  DependencyMode mode = DependencyMode::kAll;
  AcceptedOutcome outcome = AcceptedOutcome::kSuccess;

  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("ids", s.ids);
    v("mode", s.mode);
    v("outcome", s.outcome);
  }
  friend bool operator==(const WireDependencies&, const WireDependencies&) = default;
};

// Units of countable resources by name ("gpus": 2); protocol/resources.h
// has the rules.
using ResourceMap = std::map<std::string, int64_t>;

// Frame 4 of a task_request: all the scheduler reads to route a task.
struct RoutingMeta {
  WireDependencies after;
  WireDependencies follow;
  std::vector<int32_t> targets;  // engine ids; empty: any engine
  double timeout_s = 0;          // 0: wait forever to start
  double time_limit_s = 0;       // 0: run as long as it takes
  int32_t retries = 0;
  int32_t priority = 0;  // higher runs first
  // Slots of its engine it holds while it runs (absent: 1), and units of
  // the engine's countable resources ("gpus": 2). Placed only where all are
  // free at once.
  std::optional<int32_t> slots;
  std::optional<ResourceMap> resources;

  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("after", s.after);
    v("follow", s.follow);
    v("targets", s.targets);
    v("timeout", s.timeout_s);
    v("time_limit", s.time_limit_s);
    v("retries", s.retries);
    v("priority", s.priority);
    v("slots", s.slots);
    v("resources", s.resources);
  }
  friend bool operator==(const RoutingMeta&, const RoutingMeta&) = default;
};

// What a task runs. TaskSpec carries the name (TaskKindName): "command",
// "function", "python".
enum class TaskKind : uint8_t { kCommand = 0, kFunction, kPython };
std::string_view TaskKindName(TaskKind kind);
// The inverse of TaskKindName; nullopt for an unknown name.
std::optional<TaskKind> ParseTaskKind(std::string_view name);

// Frame 5 of a task_request: what the engine runs. The scheduler never reads it.
struct TaskSpec {
  // A TaskKind's name. Kept as the name that came, so that a kind this
  // build does not know still reaches the engine, which fails the task with
  // "unknown task kind" (read it with ParseTaskKind).
  std::string kind;
  std::string function;
  RawValue args;
  std::vector<std::string> argv;
  std::string cwd;
  std::map<std::string, std::string> env;
  std::string label;
  // A function task that gets, as its arguments, the results of its `after`
  // dependencies (an array in their order), fetched by the engine from the
  // hub: how map_reduce's reduce steps see their inputs.
  std::optional<bool> pass_results;
  // The job it belongs to (taskctl makes one per submission when not named).
  std::optional<std::string> job = std::nullopt;
  // Its index in an array submission: ZTASK_ARRAY_INDEX, %{ARRAY_INDEX}.
  std::optional<int64_t> array_index = std::nullopt;
  // Files on the engine that get the whole of stdout and stderr, besides
  // the tails kept in the record; %{TASK_ID}, %{JOB} and %{ARRAY_INDEX}
  // are replaced by the engine.
  std::optional<std::string> stdout_path = std::nullopt;
  std::optional<std::string> stderr_path = std::nullopt;
  // Submitted again in place of this failed task (taskctl resubmit): its
  // record is marked replaced and leaves its job's failures.
  std::optional<TaskId> replaces = std::nullopt;

  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("kind", s.kind);
    v("function", s.function);
    v("args", s.args);
    v("argv", s.argv);
    v("cwd", s.cwd);
    v("env", s.env);
    v("label", s.label);
    v("pass_results", s.pass_results);
    v("job", s.job);
    v("array_index", s.array_index);
    v("stdout_path", s.stdout_path);
    v("stderr_path", s.stderr_path);
    v("replaces", s.replaces);
  }
  friend bool operator==(const TaskSpec&, const TaskSpec&) = default;
};

// Frame 4 of a task_reply: the outcome, which is all the scheduler reads.
struct ReplyMeta {
  bool ok = true;
  ErrorType error_type = ErrorType::kNone;
  std::optional<int32_t> engine_id;  // absent when the scheduler failed it
  int32_t attempt = 0;               // 1 for the first run; 0: never ran
  // Sent ahead and not run: its run_after task did not succeed on the
  // engine. The scheduler queues it again; a client never sees this.
  bool not_run = false;
  // Not run: its functional dependencies are unmet on this engine
  // (error_message says why). The scheduler sends it to another engine,
  // without using a retry; a client never sees this.
  std::optional<bool> unmet = std::nullopt;
  // Failed in a way that would repeat on any engine at any attempt (its
  // result is over the engine's limit): the scheduler does not retry it.
  std::optional<bool> no_retry = std::nullopt;
  // How long the task ran, in microseconds of the engine's monotonic
  // clock: the scheduler packs tasks far shorter than a message (leastload).
  std::optional<int64_t> run_us = std::nullopt;

  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("ok", s.ok);
    v("error_type", s.error_type);
    v("engine_id", s.engine_id);
    v("attempt", s.attempt);
    v("not_run", s.not_run);
    v("unmet", s.unmet);
    v("no_retry", s.no_retry);
    v("run_us", s.run_us);
  }
  friend bool operator==(const ReplyMeta&, const ReplyMeta&) = default;
};

// Frame 5 of a task_reply.
struct TaskResult {
  std::string error_message;
  RawValue result;
  std::optional<int32_t> exit_code;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  int64_t started_us = 0;  // 0: never started
  int64_t completed_us = 0;

  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("error_message", s.error_message);
    v("result", s.result);
    v("exit_code", s.exit_code);
    v("stdout", s.stdout_text);
    v("stderr", s.stderr_text);
    v("stdout_truncated", s.stdout_truncated);
    v("stderr_truncated", s.stderr_truncated);
    v("started", s.started_us);
    v("completed", s.completed_us);
  }
  friend bool operator==(const TaskResult&, const TaskResult&) = default;
};

struct AbortRequest {
  std::vector<TaskId> task_ids;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("task_ids", s.task_ids);
  }
  friend bool operator==(const AbortRequest&, const AbortRequest&) = default;
};

struct AbortReply {
  std::vector<TaskId> aborted;   // were waiting; now failed with TaskAborted
  std::vector<TaskId> running;   // already on an engine; not aborted
  std::vector<TaskId> finished;  // already had their final outcome
  std::vector<TaskId> unknown;   // never seen by this scheduler
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("aborted", s.aborted);
    v("running", s.running);
    v("finished", s.finished);
    v("unknown", s.unknown);
  }
  friend bool operator==(const AbortReply&, const AbortReply&) = default;
};

struct EngineReady {
  int32_t engine_id = 0;
  std::string uuid;
  // Sent again when the engine reconnects to a scheduler: the tasks it holds
  // (running or queued), so a restarted scheduler knows where they are.
  std::optional<std::vector<TaskId>> held;
  // What it can hold at once (taskengine --slots, --resource): absent, one
  // slot and no resources.
  std::optional<int32_t> slots;
  std::optional<ResourceMap> resources;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("uuid", s.uuid);
    v("held", s.held);
    v("slots", s.slots);
    v("resources", s.resources);
  }
  friend bool operator==(const EngineReady&, const EngineReady&) = default;
};

// The one frame the scheduler puts before a task_request it sends to an
// engine (after the routing id): what only the scheduler knows.
struct DispatchInfo {
  int32_t attempt = 1;
  int32_t engines = 0;  // engines registered with the scheduler now
  // Sent ahead: run only once this task, sent here before, succeeded here;
  // otherwise answer not_run.
  std::optional<TaskId> run_after = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("attempt", s.attempt);
    v("engines", s.engines);
    v("run_after", s.run_after);
  }
  friend bool operator==(const DispatchInfo&, const DispatchInfo&) = default;
};

// ---- engines and the hub -------------------------------------------------

struct RegistrationRequest {
  std::string uuid;  // also the engine's routing id on the scheduler
  std::string name;
  std::string host;
  int64_t pid = 0;
  std::optional<int32_t> mpi_rank;
  // The id this engine had: a hub that restarted gives it back.
  std::optional<int32_t> engine_id;
  // What it can hold at once, for listings (the scheduler hears it in
  // engine_ready). Absent: one slot, no resources.
  std::optional<int32_t> slots;
  std::optional<ResourceMap> resources;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("uuid", s.uuid);
    v("name", s.name);
    v("host", s.host);
    v("pid", s.pid);
    v("mpi_rank", s.mpi_rank);
    v("engine_id", s.engine_id);
    v("slots", s.slots);
    v("resources", s.resources);
  }
  friend bool operator==(const RegistrationRequest&, const RegistrationRequest&) = default;
};

struct RegistrationReply {
  bool ok = false;
  int32_t engine_id = -1;
  std::string error;
  int32_t heartbeat_ms = 0;  // how often to heartbeat the hub
  // Heartbeats the hub may miss before it removes the engine: an engine
  // that has not heard from the hub for this many periods stops starting
  // tasks (its fence). Absent: 3.
  std::optional<int32_t> heartbeat_misses;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("ok", s.ok);
    v("engine_id", s.engine_id);
    v("error", s.error);
    v("heartbeat_ms", s.heartbeat_ms);
    v("heartbeat_misses", s.heartbeat_misses);
  }
  friend bool operator==(const RegistrationReply&, const RegistrationReply&) = default;
};

struct EngineRef {
  int32_t engine_id = -1;
  std::string uuid;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("uuid", s.uuid);
  }
  friend bool operator==(const EngineRef&, const EngineRef&) = default;
};

// A heartbeat, and the hub's answer to it (which carries `heartbeat_ms`:
// the period to beat at now, stretched when many engines registered).
struct HeartbeatBody {
  int32_t engine_id = -1;
  std::string uuid;
  std::optional<int32_t> heartbeat_ms;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("uuid", s.uuid);
    v("heartbeat_ms", s.heartbeat_ms);
  }
  friend bool operator==(const HeartbeatBody&, const HeartbeatBody&) = default;
};

// What a supervisor says of an engine it runs, by name.
struct EngineStateReport {
  std::string name;
  EngineState state = EngineState::kStarting;
  int32_t restarts = 0;
  std::string text;  // why, for people
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("name", s.name);
    v("state", s.state);
    v("restarts", s.restarts);
    v("text", s.text);
  }
  friend bool operator==(const EngineStateReport&, const EngineStateReport&) = default;
};

// What taskcluster asks of a running cluster's supervisor.
struct ClusterRequest {
  std::string command;  // "scale", or "add" (engines with a launcher)
  int32_t engines = 0;
  std::string launcher;            // add: local, mpi, ssh or slurm
  std::vector<std::string> hosts;  // add with ssh: HOST[:COUNT]
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("command", s.command);
    v("engines", s.engines);
    v("launcher", s.launcher);
    v("hosts", s.hosts);
  }
  friend bool operator==(const ClusterRequest&, const ClusterRequest&) = default;
};

// ---- queries -------------------------------------------------------------

struct TaskIdList {
  std::vector<TaskId> task_ids;
  // In a result_request with no ids (every record): one page, in id order,
  // of records after `after`, at most `limit` of them (and some MiB).
  std::optional<TaskId> after;
  std::optional<int32_t> limit;
  // With ids, in a result_request to the query socket: answer only once
  // each of them is "recorded" (the hub has a record) or "final" (ok or
  // error), or once `wait_ms` (at most 60,000) passed, with the records as
  // they are then. Absent: at once.
  std::optional<std::string> wait = std::nullopt;
  std::optional<int32_t> wait_ms = std::nullopt;
  // A page (no ids) of this job's records only, and of those in this
  // status only: "waiting", "running", "ok" or "failed" (an error not
  // replaced by a resubmission).
  std::optional<std::string> job = std::nullopt;
  std::optional<std::string> status = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("task_ids", s.task_ids);
    v("after", s.after);
    v("limit", s.limit);
    v("wait", s.wait);
    v("wait_ms", s.wait_ms);
    v("job", s.job);
    v("status", s.status);
  }
  friend bool operator==(const TaskIdList&, const TaskIdList&) = default;
};

// What the hub knows of one task.
struct TaskRecord {
  TaskId id;
  std::string label;
  std::string client;  // the submitting client's session
  TaskState state = TaskState::kNone;  // on the wire its name: "waiting", "running", "ok", "error"
  ErrorType error_type = ErrorType::kNone;
  std::string error_message;
  std::optional<int32_t> engine_id;
  int32_t attempts = 0;
  int64_t submitted_us = 0;
  std::optional<int64_t> started_us;
  std::optional<int64_t> completed_us;
  std::optional<int32_t> exit_code;
  std::string stdout_text;
  std::string stderr_text;
  RawValue result;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  RoutingMeta routing;  // as submitted: after, follow, targets, timeout...
  std::optional<std::string> job = std::nullopt;
  std::optional<int64_t> array_index = std::nullopt;
  // What it runs, as submitted (so that it can be submitted again).
  std::optional<TaskSpec> spec = std::nullopt;
  // The task submitted again in its place, once it failed.
  std::optional<TaskId> replaced_by = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("label", s.label);
    v("client", s.client);
    v("state", s.state);
    v("error_type", s.error_type);
    v("error_message", s.error_message);
    v("engine_id", s.engine_id);
    v("attempts", s.attempts);
    v("submitted", s.submitted_us);
    v("started", s.started_us);
    v("completed", s.completed_us);
    v("exit_code", s.exit_code);
    v("stdout", s.stdout_text);
    v("stderr", s.stderr_text);
    v("result", s.result);
    v("stdout_truncated", s.stdout_truncated);
    v("stderr_truncated", s.stderr_truncated);
    v("routing", s.routing);
    v("job", s.job);
    v("array_index", s.array_index);
    v("spec", s.spec);
    v("replaced_by", s.replaced_by);
  }
  friend bool operator==(const TaskRecord&, const TaskRecord&) = default;

  bool finished() const { return IsFinal(state); }
};

struct ResultReply {
  std::vector<TaskRecord> records;
  std::vector<TaskId> unknown;
  std::optional<bool> more;  // a page with records after it
  // With `more`: the `after` of the next page (a filtered page may hold
  // fewer records than it looked at).
  std::optional<TaskId> next = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("records", s.records);
    v("unknown", s.unknown);
    v("more", s.more);
    v("next", s.next);
  }
  friend bool operator==(const ResultReply&, const ResultReply&) = default;
};

struct EngineQueue {
  int32_t engine_id = 0;
  int64_t running = 0;
  int64_t queued = 0;
  int64_t completed = 0;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("running", s.running);
    v("queued", s.queued);
    v("completed", s.completed);
  }
  friend bool operator==(const EngineQueue&, const EngineQueue&) = default;
};

struct QueueReply {
  std::vector<EngineQueue> engines;
  int64_t unassigned = 0;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engines", s.engines);
    v("unassigned", s.unassigned);
  }
  friend bool operator==(const QueueReply&, const QueueReply&) = default;
};

struct EngineInfo {
  int32_t id = 0;
  std::string uuid;
  std::string name;
  std::string host;
  int64_t pid = 0;
  EngineState state = EngineState::kRunning;
  int64_t registered_us = 0;
  std::optional<int32_t> mpi_rank;
  std::optional<int32_t> restarts;  // how often its supervisor restarted it
  std::optional<int32_t> slots;     // as it registered
  std::optional<ResourceMap> resources;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("uuid", s.uuid);
    v("name", s.name);
    v("host", s.host);
    v("pid", s.pid);
    v("state", s.state);
    v("registered", s.registered_us);
    v("mpi_rank", s.mpi_rank);
    v("restarts", s.restarts);
    v("slots", s.slots);
    v("resources", s.resources);
  }
  friend bool operator==(const EngineInfo&, const EngineInfo&) = default;
};

struct EnginesReply {
  std::vector<EngineInfo> engines;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engines", s.engines);
  }
  friend bool operator==(const EnginesReply&, const EnginesReply&) = default;
};

struct PurgeRequest {
  std::vector<TaskId> task_ids;
  bool all = false;  // every finished record
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("task_ids", s.task_ids);
    v("all", s.all);
  }
  friend bool operator==(const PurgeRequest&, const PurgeRequest&) = default;
};

struct Count {
  int64_t count = 0;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("count", s.count);
  }
  friend bool operator==(const Count&, const Count&) = default;
};

struct Acknowledgement {
  bool ok = true;
  std::string error;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("ok", s.ok);
    v("error", s.error);
  }
  friend bool operator==(const Acknowledgement&, const Acknowledgement&) = default;
};

// ---- scheduler -> hub monitor ----------------------------------------------

// A monitor batch's metadata: its number in the sending scheduler's session.
// The hub acknowledges each once its records are durable (MonitorAck).
struct BatchMeta {
  std::optional<int64_t> seq;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("seq", s.seq);
  }
  friend bool operator==(const BatchMeta&, const BatchMeta&) = default;
};

struct MonitorAck {
  std::vector<int64_t> seqs;  // these batches are recorded
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("seqs", s.seqs);
  }
  friend bool operator==(const MonitorAck&, const MonitorAck&) = default;
};

// A restarted scheduler asks the hub, page by page, for the tasks that have
// no final outcome yet.
struct RecoverRequest {
  std::optional<TaskId> after;  // the last id of the previous page
  int32_t limit = 0;            // most tasks in the reply
  // Asked by earlier schedulers for every finished outcome; ignored now
  // (outcomes are looked up when a task names them). Kept so that the
  // request's encoding does not change.
  std::optional<bool> finished_only;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("after", s.after);
    v("limit", s.limit);
    v("finished_only", s.finished_only);
  }
  friend bool operator==(const RecoverRequest&, const RecoverRequest&) = default;
};

// One unfinished task as the hub recorded it, with its request as the
// scheduler first saw it: header, routing metadata, content, buffers.
struct RecoveredTask {
  TaskId id;
  std::string client;  // the client's routing id (its session)
  TaskState state = TaskState::kNone;  // waiting or running
  std::optional<int32_t> engine_id;
  int32_t attempts = 0;
  std::vector<std::string> request;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("client", s.client);
    v("state", s.state);
    v("engine_id", s.engine_id);
    v("attempts", s.attempts);
    v("request", s.request);
  }
  friend bool operator==(const RecoveredTask&, const RecoveredTask&) = default;
};

// Frames kept as one value (the hub's copy of a request in its database).
struct FrameList {
  std::vector<std::string> frames;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("frames", s.frames);
  }
  friend bool operator==(const FrameList&, const FrameList&) = default;
};

// The outcome of a finished task that an unfinished one depends on.
struct FinishedTask {
  TaskId id;
  bool ok = false;
  std::optional<int32_t> engine_id;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("ok", s.ok);
    v("engine_id", s.engine_id);
  }
  friend bool operator==(const FinishedTask&, const FinishedTask&) = default;
};

struct RecoverReply {
  std::vector<RecoveredTask> tasks;  // in id order
  std::vector<FinishedTask> finished;
  bool done = false;  // no page after this one
  // The ids of the engines registered now: any may hold a task dispatched
  // after the hub's latest record of it. Absent when the hub cannot tell
  // yet (it started too recently for every engine to have registered
  // again), and from earlier hubs.
  std::optional<std::vector<int32_t>> engines = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("tasks", s.tasks);
    v("finished", s.finished);
    v("done", s.done);
    v("engines", s.engines);
  }
  friend bool operator==(const RecoverReply&, const RecoverReply&) = default;
};

// monitor_batch's content: nothing. The scheduler's monitor messages, many
// in one, are the records of the batch's frame 6 (codec.h).
struct MonitorBatch {
  template <class S, class V>
  static void Visit(S&, V&) {}
  friend bool operator==(const MonitorBatch&, const MonitorBatch&) = default;
};

// task_batch's content: many task_requests (or many task_replies) in one
// message, under its one signature; the messages themselves are the
// records of its frame 6 (codec.h). From the scheduler to an engine,
// `dispatch[i]` is the i-th task's dispatch (attempt, engines, run_after).
struct TaskBatch {
  std::optional<std::vector<DispatchInfo>> dispatch = std::nullopt;

  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("dispatch", s.dispatch);
  }
  friend bool operator==(const TaskBatch&, const TaskBatch&) = default;
};

// task_assigned's metadata: the attempt that just went to an engine.
struct Assignment {
  int32_t engine_id = 0;
  int32_t attempt = 1;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("attempt", s.attempt);
  }
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// task_outcome's metadata: one attempt ended; `final` says whether the task
// did (false: it was queued again for a retry).
struct OutcomeMeta {
  bool final = true;
  bool ok = true;
  ErrorType error_type = ErrorType::kNone;
  std::optional<int32_t> engine_id;
  int32_t attempt = 0;
  static constexpr bool kDefaultsLeftOut = true;  // codec.cc
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("final", s.final);
    v("ok", s.ok);
    v("error_type", s.error_type);
    v("engine_id", s.engine_id);
    v("attempt", s.attempt);
  }
  friend bool operator==(const OutcomeMeta&, const OutcomeMeta&) = default;
};

// ---- hub -> monitors event stream ------------------------------------------

// What an event tells. The wire carries the name (EventKindName):
// "engine_registered", "engine_unregistered", "engine_state",
// "task_submitted", "task_assigned", "task_finished", "task_returned" (sent
// ahead and not run: waiting again), "task_retried", "store_error".
enum class EventKind : uint8_t {
  kEngineRegistered = 0,
  kEngineUnregistered,
  kEngineState,
  kTaskSubmitted,
  kTaskAssigned,
  kTaskFinished,
  kTaskReturned,
  kTaskRetried,
  kStoreError,
};
std::string_view EventKindName(EventKind kind);
// The inverse of EventKindName; nullopt for an unknown name.
std::optional<EventKind> ParseEventKind(std::string_view name);

// An event's status: a task attempt's outcome ("ok", "error") or, for
// engine_state, the engine's state (EngineStateName); "" (kNone) for
// events without one. The wire carries the name (EventStatusName).
enum class EventStatus : uint8_t {
  kNone = 0,
  kOk,
  kError,
  kStarting,  // from here on in EngineState's order
  kRunning,
  kRestarting,
  kDraining,
  kFailed,
  kStopped,
};
std::string_view EventStatusName(EventStatus status);
// The inverse of EventStatusName; nullopt for an unknown name.
std::optional<EventStatus> ParseEventStatus(std::string_view name);
constexpr EventStatus EventStatusOf(EngineState state) {
  return static_cast<EventStatus>(static_cast<uint8_t>(EventStatus::kStarting) +
                                  static_cast<uint8_t>(state));
}
constexpr EventStatus EventStatusOf(bool ok) { return ok ? EventStatus::kOk : EventStatus::kError; }

struct Event {
  EventKind kind = EventKind::kEngineRegistered;
  std::optional<TaskId> task_id;
  std::optional<int32_t> engine_id;
  std::optional<int32_t> attempt;
  EventStatus status = EventStatus::kNone;
  ErrorType error_type = ErrorType::kNone;
  std::string text;
  int64_t at_us = 0;
  // The hub's count of events published, from 1 at its start: a subscriber
  // that sees it jump missed events (the hub drops them for one that reads
  // too slowly); one that sees it fall saw the hub restart.
  std::optional<int64_t> seq;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("seq", s.seq);
    v("kind", s.kind);
    v("task_id", s.task_id);
    v("engine_id", s.engine_id);
    v("attempt", s.attempt);
    v("status", s.status);
    v("error_type", s.error_type);
    v("text", s.text);
    v("at", s.at_us);
  }
  friend bool operator==(const Event&, const Event&) = default;
};

// ---- stats (dashboards and metrics) -----------------------------------------

// The scheduler's own view, sent to the hub every second on the monitor
// socket (not acknowledged: the next one replaces it).
// One engine's HWM as the scheduler has it now.
struct EngineHwm {
  int32_t engine_id = 0;
  int32_t hwm = 0;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("hwm", s.hwm);
  }
  friend bool operator==(const EngineHwm&, const EngineHwm&) = default;
};

struct SchedulerStats {
  std::string scheme;
  int32_t hwm = 0;  // 0: no limit; -1: the default, learned per engine (engine_hwms)
  int64_t clients = 0;   // client connections it knows
  int64_t waiting = 0;   // tasks whose dependencies are not met yet
  int64_t ready = 0;     // tasks that could run, waiting for an engine
  int64_t running = 0;   // tasks sent to engines
  int64_t engines = 0;   // engines it can give tasks
  int64_t dropped = 0;   // messages it dropped since it started
  // With the learned HWM (-1): each engine's now, at most kMaxEngineHwms.
  std::optional<std::vector<EngineHwm>> engine_hwms;
  static constexpr size_t kMaxEngineHwms = 1000;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("scheme", s.scheme);
    v("hwm", s.hwm);
    v("clients", s.clients);
    v("waiting", s.waiting);
    v("ready", s.ready);
    v("running", s.running);
    v("engines", s.engines);
    v("dropped", s.dropped);
    v("engine_hwms", s.engine_hwms);
  }
  friend bool operator==(const SchedulerStats&, const SchedulerStats&) = default;
};

struct StatsRequest {
  // The finished tasks after this position of the hub's feed (absent: none
  // of them, counts only), the newest `limit` of them (at most 20,000);
  // with `sample`, when more than `limit` finished after it, a sample of
  // them instead: every failure first (the newest `limit`), the rest evenly
  // spaced.
  std::optional<int64_t> after;
  std::optional<int32_t> limit;
  std::optional<bool> sample;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("after", s.after);
    v("limit", s.limit);
    v("sample", s.sample);
  }
  friend bool operator==(const StatsRequest&, const StatsRequest&) = default;
};

// One finished task in the hub's feed.
struct FeedEntry {
  TaskId id;
  std::optional<int32_t> engine_id;
  bool ok = false;
  ErrorType error_type = ErrorType::kNone;
  int32_t attempts = 0;
  std::string label;
  int64_t submitted_us = 0, started_us = 0, completed_us = 0;
  int32_t dependencies = 0;  // after and follow ids it named
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("id", s.id);
    v("engine_id", s.engine_id);
    v("ok", s.ok);
    v("error_type", s.error_type);
    v("attempts", s.attempts);
    v("label", s.label);
    v("submitted", s.submitted_us);
    v("started", s.started_us);
    v("completed", s.completed_us);
    v("dependencies", s.dependencies);
  }
  friend bool operator==(const FeedEntry&, const FeedEntry&) = default;
};

// Tasks by label prefix (the label up to its first '/' or ':').
struct LabelCount {
  std::string prefix;
  int64_t submitted = 0, ok = 0, failed = 0;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("prefix", s.prefix);
    v("submitted", s.submitted);
    v("ok", s.ok);
    v("failed", s.failed);
  }
  friend bool operator==(const LabelCount&, const LabelCount&) = default;
};

struct EngineTask {
  int32_t engine_id = 0;
  TaskId task_id;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("engine_id", s.engine_id);
    v("task_id", s.task_id);
  }
  friend bool operator==(const EngineTask&, const EngineTask&) = default;
};

struct StatsReply {
  int64_t now_us = 0;
  // The records held, by state (finished ones over the whole history).
  int64_t waiting = 0, running = 0, ok = 0, failed = 0;
  // Since the hub started.
  int64_t submitted_total = 0, ok_total = 0, failed_total = 0, retries_total = 0;
  int64_t dropped = 0;  // messages the hub dropped
  // Durations (started to completed) of the tasks finished since the hub
  // started: counts per bucket of `bucket_bounds` seconds (the last bucket,
  // one more than the bounds, is everything longer), and their sum.
  std::vector<double> bucket_bounds;
  std::vector<int64_t> bucket_counts;
  double duration_sum = 0;
  // The scheduler's latest stats, and how old they are.
  std::optional<SchedulerStats> scheduler;
  int64_t scheduler_age_us = 0;
  // The feed: the position of its newest entry, the entries asked for
  // (oldest first), and how many after `after` were left out (too old to
  // be kept, or beyond the limit).
  int64_t feed = 0;
  std::vector<FeedEntry> finished;
  int64_t missed = 0;
  // The task each engine was given last, while it runs.
  std::vector<EngineTask> current;
  // Since the hub started, by label prefix (at most 256 prefixes; the
  // rest count under "(other)").
  std::vector<LabelCount> labels;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("now", s.now_us);
    v("waiting", s.waiting);
    v("running", s.running);
    v("ok", s.ok);
    v("failed", s.failed);
    v("submitted_total", s.submitted_total);
    v("ok_total", s.ok_total);
    v("failed_total", s.failed_total);
    v("retries_total", s.retries_total);
    v("dropped", s.dropped);
    v("bucket_bounds", s.bucket_bounds);
    v("bucket_counts", s.bucket_counts);
    v("duration_sum", s.duration_sum);
    v("scheduler", s.scheduler);
    v("scheduler_age", s.scheduler_age_us);
    v("feed", s.feed);
    v("finished", s.finished);
    v("missed", s.missed);
    v("current", s.current);
    v("labels", s.labels);
  }
  friend bool operator==(const StatsReply&, const StatsReply&) = default;
};

// ---- jobs ------------------------------------------------------------------

// What the hub counts of one job. A task replaced by a resubmission counts
// in `replaced` only.
struct JobSummary {
  std::string name;
  int64_t waiting = 0, running = 0, ok = 0, failed = 0, replaced = 0;
  int64_t first_submit_us = 0;  // 0: none yet
  int64_t last_finish_us = 0;   // 0: none finished yet
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("name", s.name);
    v("waiting", s.waiting);
    v("running", s.running);
    v("ok", s.ok);
    v("failed", s.failed);
    v("replaced", s.replaced);
    v("first_submit", s.first_submit_us);
    v("last_finish", s.last_finish_us);
  }
  friend bool operator==(const JobSummary&, const JobSummary&) = default;
};

struct JobsRequest {
  // "list": the jobs (`name` only, or a page of them in name order after
  // `after`, at most `limit`); "new": a fresh name for a job (the next
  // number), nothing else.
  std::string command = "list";
  std::optional<std::string> name = std::nullopt;
  std::optional<std::string> after = std::nullopt;
  std::optional<int32_t> limit = std::nullopt;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("command", s.command);
    v("name", s.name);
    v("after", s.after);
    v("limit", s.limit);
  }
  friend bool operator==(const JobsRequest&, const JobsRequest&) = default;
};

struct JobsReply {
  std::vector<JobSummary> jobs;
  std::optional<std::string> name = std::nullopt;  // "new": the name made
  std::optional<bool> more = std::nullopt;         // a page with jobs after it
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("jobs", s.jobs);
    v("name", s.name);
    v("more", s.more);
  }
  friend bool operator==(const JobsReply&, const JobsReply&) = default;
};

// ---- the bodies of each type -----------------------------------------------

template <MsgType T>
struct Bodies;
#define ZTASK_BODIES(type, code, name, meta, content) \
  template <>                                         \
  struct Bodies<MsgType::type> {                      \
    using Meta = meta;                                \
    using Content = content;                          \
  };
ZTASK_MESSAGE_TYPES(ZTASK_BODIES)
#undef ZTASK_BODIES

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_MESSAGES_H_
