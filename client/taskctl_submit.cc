// taskctl submit (one task, one per engine, or an array: --array,
// --each-line, --from-json) and submit-graph: every submission belongs to
// a job, named with --job or made by the hub.
#include <cstdio>
#include <limits>

#include "client/array_spec.h"
#include "client/taskctl.h"
#include "protocol/placeholders.h"
#include "protocol/resources.h"

namespace ztask::ctl {
namespace {

struct SubmitFlags {
  std::vector<std::string> after, follow, env, resources;
  std::string function, args, after_mode = "all", after_outcome = "success",
                              follow_mode = "all", follow_outcome = "success";
  TaskOptions options;
  bool each_engine = false;
  std::string array, each_line, from_json;
  bool wait = false, progress = false;
  double wait_timeout = -1;
  // Made by Check(): the array's entries, when it is one.
  std::vector<ArrayEntry> entries;
  bool is_array = false;
};

Status FillDependencies(const std::vector<std::string>& ids, const std::string& mode,
                        const std::string& outcome, DependencySet& set) {
  auto parsed = ParseIds(ids);
  if (!parsed.ok()) return parsed.status();
  set.ids = *parsed;
  auto m = ParseDependencyMode(mode);
  auto o = ParseAcceptedOutcome(outcome);
  if (!m) return Status::InvalidArgument("mode must be all or any, not '" + mode + "'");
  if (!o) {
    return Status::InvalidArgument("outcome must be success, failure or either, not '" + outcome +
                                   "'");
  }
  set.mode = *m;
  set.outcome = *o;
  return Status::Ok();
}

// What one task asks for: what it runs, its dependencies, environment,
// slots and resources, job and output paths.
Status CheckTask(SubmitFlags& f, const std::vector<std::string>& command) {
  auto& o = f.options;
  o.command = command;
  o.function = f.function;
  if (!f.args.empty()) {
    o.args = Value::parse(f.args, nullptr, false);
    if (o.args.is_discarded()) return Status::InvalidArgument("--args is not valid JSON");
  }
  ZTASK_RETURN_IF_ERROR(FillDependencies(f.after, f.after_mode, f.after_outcome, o.after));
  ZTASK_RETURN_IF_ERROR(FillDependencies(f.follow, f.follow_mode, f.follow_outcome, o.follow));
  for (const auto& e : f.env) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--env takes NAME=VALUE, not '" + e + "'");
    }
    o.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  for (const auto& r : f.resources) {
    std::string error;
    if (!protocol::ParseResource(r, 1, &o.resources, &error)) {
      return Status::InvalidArgument("--resource: " + error);
    }
  }
  if (std::string e = protocol::AmountsError(o.slots, o.resources, 1); !e.empty()) {
    return Status::InvalidArgument("--slots: " + e);
  }
  if (o.command.empty() && o.function.empty()) {
    return Status::InvalidArgument("nothing to run: give -- CMD [ARG...] or --fn NAME");
  }
  ZTASK_RETURN_IF_ERROR(CheckJobName(o.job));
  if (!o.command.empty() && !o.function.empty()) {
    return Status::InvalidArgument("give either a command or --fn, not both");
  }
  ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stdout", o.stdout_path));
  ZTASK_RETURN_IF_ERROR(protocol::CheckPlaceholders("--stderr", o.stderr_path));
  if (!o.function.empty() && (!o.stdout_path.empty() || !o.stderr_path.empty())) {
    return Status::InvalidArgument("--stdout and --stderr are for commands, not --fn");
  }
  return Status::Ok();
}

// The entries of an array (--array, --each-line, --from-json) into
// f.entries. REQUIRES: f.is_array.
Status ReadArrayEntries(SubmitFlags& f) {
  std::optional<std::vector<int64_t>> indices;
  if (!f.array.empty()) {
    auto parsed = ParseArraySpec(f.array);
    if (!parsed.ok()) return parsed.status();
    indices = std::move(*parsed);
  }
  if (!f.each_line.empty() || !f.from_json.empty()) {
    const bool lines = !f.each_line.empty();
    auto text = ReadFile(lines ? f.each_line : f.from_json);
    if (!text.ok()) return text.status();
    auto entries = lines ? EntriesOfLines(*text) : EntriesOfJson(*text);
    if (!entries.ok()) {
      return Status::InvalidArgument((lines ? f.each_line : f.from_json) + ": " +
                                     entries.status().message());
    }
    f.entries = indices ? SelectEntries(*entries, *indices) : std::move(*entries);
    if (indices && f.entries.size() != indices->size()) {
      return Status::InvalidArgument("--array names entries past the end of the file (it has " +
                                     std::to_string(entries->size()) + ")");
    }
  } else {
    for (int64_t i : *indices) f.entries.push_back({i, std::nullopt});
  }
  if (f.entries.empty()) return Status::InvalidArgument("the array has no entries: nothing to submit");
  return Status::Ok();
}

Status Check(SubmitFlags& f, const std::vector<std::string>& command) {
  ZTASK_RETURN_IF_ERROR(CheckTask(f, command));
  if (!f.each_line.empty() && !f.from_json.empty()) {
    return Status::InvalidArgument("give --each-line or --from-json, not both");
  }
  f.is_array = !f.array.empty() || !f.each_line.empty() || !f.from_json.empty();
  if (f.is_array && f.each_engine) {
    return Status::InvalidArgument("--each-engine makes one task per engine: it takes no array");
  }
  if (f.progress && !f.wait) {
    return Status::InvalidArgument("--progress draws while waiting: give --wait too");
  }
  return f.is_array ? ReadArrayEntries(f) : Status::Ok();
}

// The tasks of an array: one per entry, each with its index, its entry in
// ZTASK_ENTRY (commands) or as its arguments (functions without --args),
// and a label LABEL/INDEX (the job's name when no label was given).
std::vector<TaskOptions> ArrayTasks(const SubmitFlags& f, const std::string& job) {
  std::vector<TaskOptions> tasks;
  tasks.reserve(f.entries.size());
  const std::string& prefix = f.options.label.empty() ? job : f.options.label;
  for (const ArrayEntry& e : f.entries) {
    TaskOptions t = f.options;
    t.job = job;
    t.array_index = e.index;
    t.label = prefix + "/" + std::to_string(e.index);
    if (e.entry) {
      if (!t.command.empty()) t.env["ZTASK_ENTRY"] = e.text();
      if (!t.function.empty() && f.args.empty()) t.args = e.value();
    } else if (!t.function.empty() && f.args.empty()) {
      t.args = e.index;
    }
    tasks.push_back(std::move(t));
  }
  return tasks;
}

// The job's name: the one given, or a new one from the hub.
Result<std::string> JobName(Client& c, const std::string& given) {
  if (!given.empty()) return given;
  return c.NewJob();
}

int SubmitArray(Client& c, SubmitFlags& f) {
  auto job = JobName(c, f.options.job);
  if (!job.ok()) return Error(job.status());
  auto ids = c.SubmitMany(ArrayTasks(f, *job));
  if (!ids.ok()) return Error(ids.status());
  if (auto recorded = AwaitRecorded(c, *ids); !recorded.ok()) return Error(recorded);
  std::printf("%zu tasks submitted in job %s\n%s\n", ids->size(), job->c_str(), job->c_str());
  std::fflush(stdout);
  if (!f.wait) return kOk;
  return WaitAndPrint(c, *job, {}, f.wait_timeout, f.progress);
}

int Submit(Client& c, SubmitFlags& f) {
  if (f.is_array) return SubmitArray(c, f);
  auto job = JobName(c, f.options.job);
  if (!job.ok()) return Error(job.status());
  f.options.job = *job;
  std::vector<TaskId> ids;
  if (f.each_engine) {
    auto submitted = c.SubmitEachEngine(f.options);
    if (!submitted.ok()) return Error(submitted.status());
    for (const auto& [engine, id] : *submitted) ids.push_back(id);
  } else {
    auto id = c.Submit(f.options);
    if (!id.ok()) return Error(id.status());
    ids.push_back(*id);
  }
  if (auto recorded = AwaitRecorded(c, ids); !recorded.ok()) return Error(recorded);
  for (const auto& id : ids) std::printf("%s\n", id.ToHex().c_str());
  std::fflush(stdout);
  if (!f.wait) return kOk;
  return WaitAndPrint(c, "", ids, f.wait_timeout, f.progress);
}

}  // namespace

void AddSubmit(CLI::App& app, Subcommands& out, const std::vector<std::string>* command) {
  auto f = std::make_shared<SubmitFlags>();
  auto* sub = app.add_subcommand(
      "submit", "submit one task (prints its id) or an array of them (prints its job's name last)");
  sub->footer(
      "The command to run goes after --: taskctl submit [options] -- CMD [ARG...]\n"
      "Arrays: --array 1-100, 1-100:10, 1,5,9-12 (ZTASK_ARRAY_INDEX); --each-line FILE and\n"
      "--from-json FILE (a JSON array) make one task per line or element (ZTASK_ENTRY; a\n"
      "function without --args gets the element, or the index, as its arguments).\n"
      "Output paths may hold %{TASK_ID}, %{JOB} and %{ARRAY_INDEX}.");
  sub->add_option("--fn", f->function, "a function registered on the engines");
  sub->add_option("--args", f->args, "the function's arguments, as JSON");
  // Repeatable options take one value each time (ids may be comma-separated).
  auto one_each = [](CLI::Option* o) {
    o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  auto& o = f->options;
  one_each(sub->add_option("--after", f->after, "ids this runs after")->delimiter(','));
  sub->add_option("--after-mode", f->after_mode, "all or any");
  sub->add_option("--after-outcome", f->after_outcome, "success, failure or either");
  one_each(sub->add_option("--follow", f->follow, "ids this runs where they ran")->delimiter(','));
  sub->add_option("--follow-mode", f->follow_mode, "all or any");
  sub->add_option("--follow-outcome", f->follow_outcome, "success, failure or either");
  one_each(sub->add_option("--targets", o.targets, "engine ids it may run on")->delimiter(','));
  sub->add_option("--timeout", o.timeout, "seconds it may wait to start");
  sub->add_option("--time-limit", o.time_limit, "seconds it may run");
  sub->add_option("--retries", o.retries, "times to retry on failure");
  sub->add_option("--priority", o.priority, "higher runs first");
  sub->add_option("--slots", o.slots, "slots of its engine it holds while it runs (default 1)");
  one_each(sub->add_option("--resource", f->resources,
                           "NAME=COUNT units of an engine's resource it holds (gpus=1; "
                           "repeatable)"));
  sub->add_option("--label", o.label, "a name for people");
  sub->add_option("--cwd", o.cwd, "working directory of the command");
  one_each(sub->add_option("--env", f->env, "NAME=VALUE for the command (repeatable)"));
  sub->add_option("--job", o.job, "the job's name (adds to it when it exists; default: a new one)");
  sub->add_option("--stdout", o.stdout_path, "a file on the engine for the whole of stdout");
  sub->add_option("--stderr", o.stderr_path, "a file on the engine for the whole of stderr");
  sub->add_option("--array", f->array, "one task per index: FIRST-LAST[:STEP][,MORE...]");
  sub->add_option("--each-line", f->each_line, "one task per line of FILE (ZTASK_ENTRY)");
  sub->add_option("--from-json", f->from_json, "one task per element of FILE's JSON array");
  sub->add_flag("--each-engine", f->each_engine,
                "one task per running engine, each on its engine; prints one id per line");
  sub->add_flag("--wait", f->wait, "then wait for the tasks and print their records");
  sub->add_flag("--progress", f->progress, "with --wait: a progress bar on a terminal");
  sub->add_option("--wait-timeout", f->wait_timeout, "with --wait: give up after this many s (exit 3)");
  out.push_back({sub, [f, command] { return Check(*f, *command); },
                 [f](Client& c) { return Submit(c, *f); }});
}

void AddSubmitGraph(CLI::App& app, Subcommands& out) {
  struct Flags {
    std::string file, job;
    std::vector<GraphNode> nodes;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("submit-graph", "submit a JSON graph; prints name id");
  sub->add_option("file", f->file, "the graph (JSON)")->required();
  sub->add_option("--job", f->job, "the job's name (default: a new one)");
  out.push_back({sub,
                 [f] {
                   ZTASK_RETURN_IF_ERROR(CheckJobName(f->job));
                   auto text = ReadFile(f->file);
                   if (!text.ok()) return text.status();
                   auto parsed = ParseGraph(*text);
                   if (!parsed.ok()) {
                     return Status::InvalidArgument(f->file + ": " + parsed.status().message());
                   }
                   if (auto order = TopologicalOrder(*parsed); !order.ok()) {
                     return Status::InvalidArgument(f->file + ": " + order.status().message() +
                                                    "; nothing was submitted");
                   }
                   f->nodes = std::move(*parsed);
                   return Status::Ok();
                 },
                 [f](Client& c) {
                   auto job = JobName(c, f->job);
                   if (!job.ok()) return Error(job.status());
                   for (auto& node : f->nodes) node.options.job = *job;
                   auto submitted = c.SubmitGraph(f->nodes);
                   if (!submitted.ok()) return Error(submitted.status());
                   std::vector<TaskId> all;
                   for (const auto& [name, id] : *submitted) all.push_back(id);
                   if (auto recorded = AwaitRecorded(c, all); !recorded.ok()) {
                     return Error(recorded);
                   }
                   for (const auto& [name, id] : *submitted) {
                     std::printf("%s %s\n", name.c_str(), id.ToHex().c_str());
                   }
                   return kOk;
                 }});
}

}  // namespace ztask::ctl
