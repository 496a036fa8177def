// Records and names at the client's boundary (records.h), and the JSON
// that taskctl prints of the public values (TaskInfo, JobInfo). No I/O.
#include "client/records.h"

#include <array>

#include "protocol/resources.h"

namespace ztask {
namespace {

// The value of the enum E whose name in `names` (indexed by value, from
// `first`) is `name`.
template <class E, size_t N>
std::optional<E> ValueNamed(const std::array<std::string_view, N>& names, std::string_view name,
                            size_t first = 0) {
  for (size_t i = first; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

constexpr std::array<std::string_view, 5> kFilterNames = {"", "waiting", "running", "ok",
                                                          "failed"};
constexpr std::array<std::string_view, 2> kHeldNames = {"recorded", "final"};

Value Number(const std::optional<double>& d) { return d ? Value(*d) : Value(nullptr); }

// What it runs, as submitted, with the routing of its record.
TaskOptions SpecOf(const protocol::TaskSpec& spec, const TaskInfo& info) {
  TaskOptions o;
  o.command = spec.argv;
  if (client::ParseTaskKind(spec.kind) != client::TaskKind::kCommand) o.function = spec.function;
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
  return o;
}

}  // namespace

std::string_view TaskFilterName(TaskFilter filter) {
  return kFilterNames[static_cast<size_t>(filter)];
}

std::optional<TaskFilter> ParseTaskFilter(std::string_view name) {
  return ValueNamed<TaskFilter>(kFilterNames, name, /*first=*/1);  // kAll has no name
}

Value TaskInfo::ToJson() const {
  Value error = nullptr;
  if (status == TaskState::kError) {
    error = {{"type", std::string(ErrorTypeName(error_type))}, {"message", error_message}};
  }
  return {
      {"id", id.ToHex()},
      {"status", std::string(TaskStateName(status))},
      {"error", error},
      {"engine_id", engine_id ? Value(*engine_id) : Value(nullptr)},
      {"attempts", attempts},
      {"submitted", Number(submitted)},
      {"started", Number(started)},
      {"completed", Number(completed)},
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
  return {{"name", name},         {"total", total()},   {"waiting", waiting},
          {"running", running},   {"ok", ok},           {"failed", failed},
          {"replaced", replaced}, {"first_submit", Number(first_submit)},
          {"last_finish", Number(last_finish)}};
}

namespace client {

std::string_view HeldUntilName(HeldUntil until) { return kHeldNames[static_cast<size_t>(until)]; }

std::optional<HeldUntil> ParseHeldUntil(std::string_view name) {
  return ValueNamed<HeldUntil>(kHeldNames, name);
}

std::optional<double> Seconds(std::optional<int64_t> us) {
  if (!us || *us == 0) return std::nullopt;
  return static_cast<double>(*us) / 1e6;
}

DependencySet FromWire(const protocol::WireDependencies& w) { return {w.ids, w.mode, w.outcome}; }
protocol::WireDependencies ToWire(const DependencySet& d) { return {d.ids, d.mode, d.outcome}; }

TaskInfo FromRecord(const protocol::TaskRecord& r) {
  TaskInfo info;
  info.id = r.id;
  info.status = r.state;
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
  if (r.spec) info.spec = SpecOf(*r.spec, info);
  return info;
}

}  // namespace client
}  // namespace ztask
