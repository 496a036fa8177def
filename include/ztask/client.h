// The client library: connect to a cluster by its profile directory, submit
// tasks and whole graphs, wait for them, read their records, abort them,
// and ask about the cluster. No ZeroMQ or msgpack type appears here.
//
//   auto client = ztask::Client::Connect(profile_dir);
//   ztask::TaskOptions first;
//   first.command = {"echo", "hello"};
//   auto a = (*client)->Submit(first);
//   ztask::TaskOptions second;
//   second.function = "echo";
//   second.args = {1, 2, 3};
//   second.after.ids = {*a};
//   auto b = (*client)->Submit(second);
//   (*client)->Wait({*a, *b}, /*timeout_s=*/30);
//   auto records = (*client)->Fetch({*a, *b});
//
// Thread safety: a Client is owned by one thread; use one per thread.
#ifndef ZTASK_CLIENT_H_
#define ZTASK_CLIENT_H_

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ztask/status.h"
#include "ztask/task.h"
#include "ztask/task_id.h"

namespace ztask {

using Value = nlohmann::json;

struct TaskOptions {
  std::vector<std::string> command;  // a command task (argv, run without a shell), or
  std::string function;              // a function task registered on the engines
  Value args;                        // the function's arguments
  DependencySet after;               // run once these have finished as required
  DependencySet follow;              // run where these ran
  std::vector<int32_t> targets;      // only on these engine ids
  double timeout = 0;                // seconds it may wait to start; 0: forever
  double time_limit = 0;             // seconds it may run; 0: no limit
  int32_t retries = 0;
  int32_t priority = 0;              // higher runs first
  // Slots of its engine it holds while it runs, and units of the engine's
  // countable resources ("gpus": 1): it goes only where all are free.
  int32_t slots = 1;
  std::map<std::string, int64_t> resources;
  std::string label;
  std::string cwd;                   // command tasks: working directory
  std::map<std::string, std::string> env;  // command tasks: added environment
  bool pass_results = false;         // function tasks: args = results of `after`
  std::string job;                   // the job it belongs to; empty: none
  std::optional<int64_t> array_index;  // commands see ZTASK_ARRAY_INDEX
  // Files on the engine for the whole of stdout and stderr (command tasks);
  // %{TASK_ID}, %{JOB} and %{ARRAY_INDEX} are replaced there. Empty: none.
  std::string stdout_path, stderr_path;
  // Submitted again in place of this failed task: the hub marks that one
  // replaced, and its job no longer counts it as failed.
  std::optional<TaskId> replaces;
};

// A task's record, as the hub keeps it.
struct TaskInfo {
  TaskId id;
  TaskState status = TaskState::kNone;  // JSON and taskctl show its name (TaskStateName)
  ErrorType error_type = ErrorType::kNone;
  std::string error_message;
  std::optional<int32_t> engine_id;
  int32_t attempts = 0;
  std::optional<double> submitted, started, completed;  // seconds since the epoch
  std::optional<int32_t> exit_code;
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;  // cut at the engine's bound
  Value result;
  std::string label;
  DependencySet after, follow;
  std::vector<int32_t> targets;
  double timeout = 0, time_limit = 0;
  int32_t retries = 0, priority = 0;
  int32_t slots = 1;
  std::map<std::string, int64_t> resources;
  std::string job;
  std::optional<int64_t> array_index;
  std::optional<TaskId> replaced_by;  // submitted again as this task
  // What it runs, as submitted, ready to submit again (with its routing).
  std::optional<TaskOptions> spec;

  bool finished() const { return IsFinal(status); }
  bool ok() const { return status == TaskState::kOk; }
  // The JSON object `taskctl wait` and `taskctl result` print.
  Value ToJson() const;
};

// Which records a listing (Client::List) keeps, by their status. The hub
// is asked by name (TaskFilterName): "waiting", "running", "ok", or
// "failed" (an error not replaced by a resubmission); kAll asks no filter.
enum class TaskFilter : uint8_t { kAll = 0, kWaiting, kRunning, kOk, kFailed };

std::string_view TaskFilterName(TaskFilter filter);
// The inverse of TaskFilterName; nullopt for an unknown name (and for "",
// which kAll stands for).
std::optional<TaskFilter> ParseTaskFilter(std::string_view name);

struct EngineStatus {
  int32_t id = 0;
  std::string name, host;
  EngineState state = EngineState::kRunning;
  int64_t pid = 0;
  double registered = 0;  // seconds since the epoch
  std::optional<int32_t> mpi_rank;
  int32_t restarts = 0;   // times its supervisor restarted it
  int32_t slots = 1;      // tasks it runs at once
  std::map<std::string, int64_t> resources;  // units it has, by name
};

struct QueueStatus {
  struct PerEngine {
    int32_t id = 0;
    int64_t running = 0, queued = 0, completed = 0;
  };
  std::vector<PerEngine> engines;
  int64_t unassigned = 0;
};

// What the hub and the scheduler count, for dashboards and metrics
// (Client::Stats).
struct ClusterStats {
  double now = 0;  // the hub's clock, seconds since the epoch
  // Records the hub holds, by state (finished ones over the whole history).
  int64_t waiting = 0, running = 0, ok = 0, failed = 0;
  // Since the hub started.
  int64_t submitted_total = 0, ok_total = 0, failed_total = 0, retries_total = 0;
  int64_t hub_dropped = 0;  // messages the hub dropped
  // Durations of the tasks finished since the hub started: counts per
  // bucket of at most duration_bounds[i] seconds, the last one longer.
  std::vector<double> duration_bounds;
  std::vector<int64_t> duration_counts;
  double duration_sum = 0;
  struct Scheduler {
    std::string scheme;
    int32_t hwm = 0;  // 0: no limit; -1: the default, learned per engine
    int64_t clients = 0, waiting = 0, ready = 0, running = 0, engines = 0, dropped = 0;
    double age_s = 0;  // how long ago it sent them (once a second)
    // With the learned HWM: each engine's now (engine id, HWM), by id.
    std::vector<std::pair<int32_t, int32_t>> engine_hwms;
  };
  std::optional<Scheduler> scheduler;  // none yet, or no scheduler
  // The hub's feed of finished tasks: the position of its newest entry,
  // those asked for (oldest first), and how many of those after the
  // position asked were left out (too old, beyond the limit, or not in the
  // sample).
  struct Finished {
    TaskId id;
    std::optional<int32_t> engine_id;
    bool ok = false;
    ErrorType error_type = ErrorType::kNone;
    int32_t attempts = 0;
    std::string label;
    double submitted = 0, started = 0, completed = 0;  // 0: unknown
    int32_t dependencies = 0;
  };
  int64_t feed = 0;
  std::vector<Finished> finished;
  int64_t missed = 0;
  std::vector<std::pair<int32_t, TaskId>> current;  // (engine, task it runs)
  // Since the hub started, by label prefix (the label up to its first '/'
  // or ':'; "(none)", and "(other)" past 256 prefixes).
  struct Label {
    std::string prefix;
    int64_t submitted = 0, ok = 0, failed = 0;
  };
  std::vector<Label> labels;
};

// What the hub counts of one job (JobSummary on the wire).
struct JobInfo {
  std::string name;
  int64_t waiting = 0, running = 0, ok = 0, failed = 0;
  int64_t replaced = 0;  // failed tasks submitted again (not in `failed`)
  std::optional<double> first_submit, last_finish;  // seconds since the epoch
  int64_t total() const { return waiting + running + ok + failed; }
  bool done() const { return waiting == 0 && running == 0; }
  Value ToJson() const;
};

struct AbortResult {
  std::vector<TaskId> aborted, running, finished, unknown;
};

// One node of a graph: its options, and its dependencies by node name.
struct GraphNode {
  std::string name;
  TaskOptions options;
  std::vector<std::string> after, follow;
};

// Parses {"tasks": [{"name": ..., "command": [...] or "fn": ..., "args": ...,
// "after": [names], "follow": [names], and any option by its taskctl name}]}.
Result<std::vector<GraphNode>> ParseGraph(const std::string& json_text);
// Node names in an order where every node comes after what it depends on;
// an error naming the node for a cycle, an unknown or a repeated name.
Result<std::vector<size_t>> TopologicalOrder(const std::vector<GraphNode>& graph);

class Client {
 public:
  // Reads <profile_dir>/ztask-cluster.json (or the connection file itself,
  // when given its path) and connects. Errors say what to do (no cluster
  // running, no scheduler yet...).
  static Result<std::unique_ptr<Client>> Connect(const std::filesystem::path& profile_dir);
  ~Client();

  // Sends the task and returns its id (the id is chosen here). Returns at
  // once, unless this client already has max_in_flight tasks with no reply:
  // then it waits for replies first, so a client faster than the cluster is
  // slowed, never refused by the scheduler's per-client limit.
  Result<TaskId> Submit(const TaskOptions& options);
  // Sends many tasks at once, in as few messages as their number and size
  // allow (batches of up to 1,024 tasks, one signature each), in order, so
  // a task may depend on one before it. Every task is checked before any is
  // sent. Returns their ids, in order.
  Result<std::vector<TaskId>> SubmitMany(const std::vector<TaskOptions>& tasks);
  // The same under ids chosen by the caller (TaskId::New()), so that a
  // task may name one of the same call as a dependency.
  // REQUIRES: ids.size() == tasks.size(), ids new.
  Result<std::vector<TaskId>> SubmitMany(const std::vector<TaskOptions>& tasks,
                                         const std::vector<TaskId>& ids);
  // Most tasks of this client without a reply at once. Default: 1,000,000
  // (under the scheduler's default per-client limit).
  void set_max_in_flight(size_t n);
  // Replies remembered (Ready, ReplyOf), the latest: older tasks are read
  // from the hub (Fetch, Wait; WaitReplies does so itself). Default:
  // 1,000,000, about 40 MB.
  void set_keep_answered(size_t n);
  // Validates the whole graph first (nothing is sent when it is not a DAG or
  // names an unknown node), then submits it in topological order. Returns
  // (name, id) in that order.
  Result<std::vector<std::pair<std::string, TaskId>>> SubmitGraph(
      const std::vector<GraphNode>& graph);
  // One task per running engine, each targeted at its engine (a set-up step
  // on every node). Returns (engine id, task id) pairs.
  Result<std::vector<std::pair<int32_t, TaskId>>> SubmitEachEngine(const TaskOptions& options);
  // One task of `function` per input.
  Result<std::vector<TaskId>> Map(const std::string& function, const std::vector<Value>& inputs,
                                  const TaskOptions& base = {});
  // Maps, then reduces the results in a tree: each reduce task runs `after`
  // at most `fan_in` inputs and gets their results as an array. Returns the
  // root's id. REQUIRES: fan_in >= 2.
  Result<TaskId> MapReduce(const std::string& map_function, const std::string& reduce_function,
                           const std::vector<Value>& inputs, int fan_in,
                           const TaskOptions& base = {});

  // Blocks until every listed task has finished (kTimedOut when timeout_s
  // passes first; negative: no limit). Ids the cluster does not know are an
  // error naming them.
  Status Wait(const std::vector<TaskId>& ids, double timeout_s = -1);
  // True once the scheduler replied to this client for the task (among the
  // latest set_keep_answered replies).
  bool Ready(const TaskId& id);
  // The final outcome the reply said (ErrorType::kNone: it succeeded), or
  // nullopt before the reply. A reply always agrees with the hub's record.
  std::optional<ErrorType> ReplyOf(const TaskId& id);
  // Blocks until the scheduler has replied to this client for every listed
  // task (kTimedOut when timeout_s passes first). Faster than Wait(), which
  // reads the hub's records, but only for tasks this client submitted.
  Status WaitReplies(const std::vector<TaskId>& ids, double timeout_s);
  // The hub's records, in the order asked; unknown ids are an error.
  Result<std::vector<TaskInfo>> Fetch(const std::vector<TaskId>& ids);
  // Like Fetch, but the hub answers once every listed task has a record
  // (`finished` false) or has finished (`finished` true), or after
  // `timeout_s` (at most 60): then a task still unknown is kNotFound, and
  // one unfinished is returned as it is. No polling: one request per
  // 10,000 ids, one after the other, within the one timeout.
  Result<std::vector<TaskInfo>> FetchWhen(const std::vector<TaskId>& ids, bool finished,
                                          double timeout_s);
  // Every record the hub holds.
  Result<std::vector<TaskInfo>> FetchAll();
  // The records of a job (empty: of every task), in id order, of those
  // `filter` keeps only. Read page by page.
  Result<std::vector<TaskInfo>> List(const std::string& job,
                                     TaskFilter filter = TaskFilter::kAll);
  // A name for a new job, from the hub (the next number).
  Result<std::string> NewJob();
  // Every job the hub counts, by name; or the named one only (none when
  // it has no task).
  Result<std::vector<JobInfo>> Jobs(const std::string& name = "");
  Result<AbortResult> Abort(const std::vector<TaskId>& ids);
  Result<QueueStatus> Queue();
  // Counts, durations and the scheduler's own counts; with `feed_after`,
  // also the newest `limit` (at most 20,000) tasks finished after that
  // position of the hub's feed (0: from its start); with `sample`, when
  // more than `limit` finished after it, a sample of them: every failure
  // first, the rest evenly spaced (`missed` counts the others).
  Result<ClusterStats> Stats(std::optional<int64_t> feed_after = std::nullopt, int32_t limit = 1000,
                             bool sample = false);
  Result<std::vector<EngineStatus>> Engines();
  // Blocks until at least n engines are registered and running.
  Status WaitForEngines(int n, double timeout_s);
  // Removes finished records from the hub (the listed ones, or all of them
  // with `all`); returns how many went. Unfinished tasks are kept.
  Result<int64_t> Purge(const std::vector<TaskId>& ids, bool all);
  // For supervisors: tells the hub the state of an engine they run
  // (starting, restarting, draining, failed, stopped), shown by Engines().
  Status ReportEngineState(const std::string& name, EngineState state, int32_t restarts,
                           const std::string& why);
  // Stops the hub, and with it the cluster's supervisor.
  Status Shutdown();
  // Follows the hub's event stream, calling `on_event` with each event as a
  // JSON object (kind, task_id, engine_id, attempt, status, error_type, text,
  // at) until it returns false.
  Status Watch(const std::function<bool(const Value& event)>& on_event);

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztask

#endif  // ZTASK_CLIENT_H_
