// taskctl: submit tasks and graphs, wait for them, read their records, and
// ask about the cluster. Exit status: 0 all ok, 1 a task failed, 2 a usage
// error, an unknown id or an unreachable cluster, 3 a timeout.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "ztask/client.h"

namespace {

using ztask::Value;

constexpr int kOk = 0, kFailed = 1, kUsage = 2, kTimedOut = 3;

int Error(const std::string& message, int code = kUsage) {
  std::fprintf(stderr, "taskctl: %s\n", message.c_str());
  return code;
}

int Error(const ztask::Status& status) {
  return Error(status.message(),
               status.code() == ztask::Status::Code::kTimedOut ? kTimedOut : kUsage);
}

ztask::Result<std::vector<ztask::TaskId>> ParseIds(const std::vector<std::string>& texts) {
  std::vector<ztask::TaskId> ids;
  for (const auto& text : texts) {
    auto id = ztask::TaskId::FromHex(text);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  return ids;
}

struct SubmitFlags {
  std::vector<std::string> command, after, follow, env;
  std::string function, args, after_mode = "all", after_outcome = "success",
                              follow_mode = "all", follow_outcome = "success";
  ztask::TaskOptions options;
};

ztask::Status FillDependencies(const std::vector<std::string>& ids, const std::string& mode,
                               const std::string& outcome, ztask::DependencySet& set) {
  auto parsed = ParseIds(ids);
  if (!parsed.ok()) return parsed.status();
  set.ids = *parsed;
  auto m = ztask::ParseDependencyMode(mode);
  auto o = ztask::ParseAcceptedOutcome(outcome);
  if (!m) return ztask::Status::InvalidArgument("mode must be all or any, not '" + mode + "'");
  if (!o) {
    return ztask::Status::InvalidArgument("outcome must be success, failure or either, not '" +
                                          outcome + "'");
  }
  set.mode = *m;
  set.outcome = *o;
  return ztask::Status::Ok();
}

ztask::Status BuildOptions(SubmitFlags& f) {
  auto& o = f.options;
  o.command = f.command;
  o.function = f.function;
  if (!f.args.empty()) {
    o.args = Value::parse(f.args, nullptr, false);
    if (o.args.is_discarded()) return ztask::Status::InvalidArgument("--args is not valid JSON");
  }
  ZTASK_RETURN_IF_ERROR(FillDependencies(f.after, f.after_mode, f.after_outcome, o.after));
  ZTASK_RETURN_IF_ERROR(FillDependencies(f.follow, f.follow_mode, f.follow_outcome, o.follow));
  for (const auto& e : f.env) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return ztask::Status::InvalidArgument("--env takes NAME=VALUE, not '" + e + "'");
    }
    o.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  if (o.command.empty() && o.function.empty()) {
    return ztask::Status::InvalidArgument("nothing to run: give -- CMD [ARG...] or --fn NAME");
  }
  if (!o.command.empty() && !o.function.empty()) {
    return ztask::Status::InvalidArgument("give either a command or --fn, not both");
  }
  return ztask::Status::Ok();
}

// Waits (10 s at most) until the hub has the records, so an id printed by
// submit can be waited for at once by any process, and a cluster that does
// not take the task is an error rather than an id that leads nowhere.
ztask::Status AwaitRecorded(ztask::Client& client, const std::vector<ztask::TaskId>& ids) {
  auto records = client.FetchWhen(ids, /*finished=*/false, 10);
  if (records.ok()) return ztask::Status::Ok();
  if (records.status().code() != ztask::Status::Code::kNotFound) return records.status();
  return ztask::Status::Unavailable(
      "the cluster did not record the task within 10 s: is its scheduler running?");
}

int PrintRecords(const std::vector<ztask::TaskInfo>& records) {
  int failed = 0;
  for (const auto& r : records) {
    std::printf("%s\n", r.ToJson().dump().c_str());
    if (r.status == "error") ++failed;
  }
  std::fflush(stdout);
  if (failed) {
    return Error(std::to_string(failed) + " of " + std::to_string(records.size()) +
                     " tasks failed",
                 kFailed);
  }
  return kOk;
}

// A DOT string: quotes and backslashes escaped.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
std::string Quote(const std::string& s) { return "\"" + Escape(s) + "\""; }

void PrintDot(const std::vector<ztask::TaskInfo>& records) {
  std::printf("digraph ztask {\n  node [shape=box];\n");
  for (const auto& r : records) {
    const std::string label =
        Escape(r.label.empty() ? r.id.ToHex().substr(0, 8) : r.label) + "\\n" + r.status;
    const char* color = r.status == "ok" ? "darkgreen" : r.status == "error" ? "red" : "gray40";
    std::printf("  %s [label=\"%s\", color=%s];\n", Quote(r.id.ToHex()).c_str(), label.c_str(),
                color);
    for (const auto& dep : r.after.ids) {
      std::printf("  %s -> %s;\n", Quote(dep.ToHex()).c_str(), Quote(r.id.ToHex()).c_str());
    }
    for (const auto& dep : r.follow.ids) {
      std::printf("  %s -> %s [style=dashed, label=\"follow\"];\n", Quote(dep.ToHex()).c_str(),
                  Quote(r.id.ToHex()).c_str());
    }
  }
  std::printf("}\n");
}

// States of engines that are or will be there; `taskctl engines --all`
// also lists those stopped (scaled down) and failed (given up).
bool Live(const std::string& state) { return state != "stopped" && state != "failed"; }

int Run(int argc, char** argv) {
  CLI::App app{"taskctl: submit ztask tasks, wait for them, and ask about the cluster"};
  app.require_subcommand(1);
  // Global options are read before or after the subcommand, as people type
  // them (`taskctl status --profile-dir DIR`): subcommands made after this
  // hand what they do not know to the app.
  app.fallthrough();
  std::string profile;
  app.add_option("--profile-dir", profile, "the cluster's profile directory")
      ->envname("ZTASK_PROFILE_DIR");

  SubmitFlags flags;
  auto* submit = app.add_subcommand("submit", "submit one task; prints its id");
  submit->footer("The command to run goes after --: taskctl submit [options] -- CMD [ARG...]");
  submit->add_option("--fn", flags.function, "a function registered on the engines");
  submit->add_option("--args", flags.args, "the function's arguments, as JSON");
  // Repeatable options take one value each time (ids may be comma-separated).
  auto one_each = [](CLI::Option* o) {
    o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  one_each(submit->add_option("--after", flags.after, "ids this runs after")->delimiter(','));
  submit->add_option("--after-mode", flags.after_mode, "all or any");
  submit->add_option("--after-outcome", flags.after_outcome, "success, failure or either");
  one_each(submit->add_option("--follow", flags.follow, "ids this runs where they ran")
               ->delimiter(','));
  submit->add_option("--follow-mode", flags.follow_mode, "all or any");
  submit->add_option("--follow-outcome", flags.follow_outcome, "success, failure or either");
  one_each(submit->add_option("--targets", flags.options.targets, "engine ids it may run on")
               ->delimiter(','));
  submit->add_option("--timeout", flags.options.timeout, "seconds it may wait to start");
  submit->add_option("--time-limit", flags.options.time_limit, "seconds it may run");
  submit->add_option("--retries", flags.options.retries, "times to retry on failure");
  submit->add_option("--priority", flags.options.priority, "higher runs first");
  submit->add_option("--label", flags.options.label, "a name for people");
  submit->add_option("--cwd", flags.options.cwd, "working directory of the command");
  one_each(submit->add_option("--env", flags.env, "NAME=VALUE for the command (repeatable)"));
  bool each_engine = false;
  submit->add_flag("--each-engine", each_engine,
                   "one task per running engine, each on its engine; prints one id per line");

  std::vector<std::string> ids;
  double timeout = -1;
  auto* wait = app.add_subcommand("wait", "wait for tasks; prints their records as JSON lines");
  wait->add_option("--timeout", timeout, "give up after this many seconds (exit 3)");
  wait->add_option("ids", ids, "task ids")->required();
  auto* result = app.add_subcommand("result", "print the hub's records of tasks as JSON lines");
  result->add_option("ids", ids, "task ids")->required();
  bool json = false;
  auto* status = app.add_subcommand("status", "tasks running, queued and done per engine");
  status->add_flag("--json", json, "print JSON");
  bool all_engines = false;
  auto* engines = app.add_subcommand("engines", "the live engines (starting, running, draining)");
  engines->add_flag("--json", json, "print JSON");
  engines->add_flag("--all", all_engines, "also the stopped and failed ones");
  auto* abort = app.add_subcommand("abort", "abort tasks that have not started");
  abort->add_option("ids", ids, "task ids")->required();
  int count = -1;
  auto* monitor = app.add_subcommand("monitor", "follow the cluster's event stream");
  monitor->add_flag("--json", json, "print JSON lines");
  monitor->add_option("--count", count, "stop after this many events");
  std::string graph_file;
  auto* submit_graph = app.add_subcommand("submit-graph", "submit a JSON graph; prints name id");
  submit_graph->add_option("file", graph_file, "the graph (JSON)")->required();
  bool dot = false;
  auto* graph = app.add_subcommand("graph", "the recorded tasks and their dependencies");
  graph->add_flag("--dot", dot, "as Graphviz DOT")->required();
  graph->add_option("ids", ids, "task ids (default: every record)");
  bool purge_all = false;
  auto* purge = app.add_subcommand("purge", "forget the records of finished tasks");
  purge->add_flag("--all", purge_all, "every finished task");
  purge->add_option("ids", ids, "task ids");
  int want_engines = 0;
  double engines_timeout = 60;
  auto* wait_engines = app.add_subcommand("wait-engines", "wait until N engines are registered");
  wait_engines->add_option("n", want_engines, "how many")->required()->check(CLI::PositiveNumber);
  wait_engines->add_option("--timeout", engines_timeout, "give up after this many seconds (exit 3)");
  auto* shutdown = app.add_subcommand("shutdown", "stop the cluster");

  // Everything after the first `--` is the command, verbatim: split it off
  // before the parser, which would otherwise read its dashes as options.
  int parsed_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      flags.command.assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      break;
    }
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Error(std::string(e.what()) + " (see taskctl --help)");
  }

  // What needs no cluster is checked before connecting.
  std::vector<ztask::GraphNode> nodes;
  if (submit->parsed()) {
    if (auto s = BuildOptions(flags); !s.ok()) return Error(s);
  }
  if (submit_graph->parsed()) {
    std::ifstream in(graph_file);
    if (!in) return Error("cannot read " + graph_file);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = ztask::ParseGraph(text.str());
    if (!parsed.ok()) return Error(graph_file + ": " + parsed.status().message());
    if (auto order = ztask::TopologicalOrder(*parsed); !order.ok()) {
      return Error(graph_file + ": " + order.status().message() + "; nothing was submitted");
    }
    nodes = std::move(*parsed);
  }
  auto parsed_ids = ParseIds(ids);
  if (!parsed_ids.ok()) return Error(parsed_ids.status());

  auto client = ztask::Client::Connect(profile);
  if (!client.ok()) return Error(client.status());
  ztask::Client& c = **client;

  if (submit->parsed() && each_engine) {
    auto submitted = c.SubmitEachEngine(flags.options);
    if (!submitted.ok()) return Error(submitted.status());
    std::vector<ztask::TaskId> all;
    for (const auto& [engine, id] : *submitted) all.push_back(id);
    if (auto recorded = AwaitRecorded(c, all); !recorded.ok()) return Error(recorded);
    for (const auto& id : all) std::printf("%s\n", id.ToHex().c_str());
    return kOk;
  }
  if (submit->parsed()) {
    auto id = c.Submit(flags.options);
    if (!id.ok()) return Error(id.status());
    if (auto recorded = AwaitRecorded(c, {*id}); !recorded.ok()) return Error(recorded);
    std::printf("%s\n", id->ToHex().c_str());
    return kOk;
  }
  if (submit_graph->parsed()) {
    auto submitted = c.SubmitGraph(nodes);
    if (!submitted.ok()) return Error(submitted.status());
    std::vector<ztask::TaskId> all;
    for (const auto& [name, id] : *submitted) all.push_back(id);
    if (auto recorded = AwaitRecorded(c, all); !recorded.ok()) return Error(recorded);
    for (const auto& [name, id] : *submitted) std::printf("%s %s\n", name.c_str(), id.ToHex().c_str());
    return kOk;
  }
  if (wait->parsed()) {
    ztask::Status waited = c.Wait(*parsed_ids, timeout);
    if (!waited.ok() && waited.code() != ztask::Status::Code::kTimedOut) return Error(waited);
    auto records = c.Fetch(*parsed_ids);
    if (!records.ok()) return Error(records.status());
    const int code = PrintRecords(*records);
    return waited.ok() ? code : Error(waited);
  }
  if (result->parsed()) {
    auto records = c.Fetch(*parsed_ids);
    if (!records.ok()) return Error(records.status());
    return PrintRecords(*records);
  }
  if (status->parsed()) {
    auto q = c.Queue();
    if (!q.ok()) return Error(q.status());
    Value out = {{"engines", Value::array()}, {"unassigned", q->unassigned}};
    for (const auto& e : q->engines) {
      out["engines"].push_back(
          {{"id", e.id}, {"running", e.running}, {"queued", e.queued}, {"completed", e.completed}});
    }
    if (json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%-8s %8s %8s %10s\n", "engine", "running", "queued", "completed");
      for (const auto& e : q->engines) {
        std::printf("%-8d %8lld %8lld %10lld\n", e.id, static_cast<long long>(e.running),
                    static_cast<long long>(e.queued), static_cast<long long>(e.completed));
      }
      std::printf("unassigned: %lld\n", static_cast<long long>(q->unassigned));
    }
    return kOk;
  }
  if (engines->parsed()) {
    auto list = c.Engines();
    if (!list.ok()) return Error(list.status());
    if (!all_engines) std::erase_if(*list, [](const auto& e) { return !Live(e.state); });
    Value out = Value::array();
    for (const auto& e : *list) {
      Value item = {{"id", e.id},       {"name", e.name},   {"host", e.host},
                    {"pid", e.pid},     {"state", e.state}, {"registered", e.registered}};
      if (e.mpi_rank) item["mpi_rank"] = *e.mpi_rank;
      item["restarts"] = e.restarts;
      out.push_back(item);
    }
    if (json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("%-4s %-24s %-16s %-8s %s\n", "id", "name", "host", "pid", "state");
      for (const auto& e : *list) {
        std::printf("%-4d %-24s %-16s %-8lld %s\n", e.id, e.name.c_str(), e.host.c_str(),
                    static_cast<long long>(e.pid), e.state.c_str());
      }
    }
    return kOk;
  }
  if (abort->parsed()) {
    auto r = c.Abort(*parsed_ids);
    if (!r.ok()) return Error(r.status());
    for (const auto& id : r->aborted) std::printf("%s aborted\n", id.ToHex().c_str());
    for (const auto& id : r->running) std::printf("%s running (not aborted)\n", id.ToHex().c_str());
    for (const auto& id : r->finished) std::printf("%s finished (not aborted)\n", id.ToHex().c_str());
    if (!r->unknown.empty()) return Error("unknown task id " + r->unknown[0].ToHex());
    return kOk;
  }
  if (monitor->parsed()) {
    int seen = 0;
    int64_t last_seq = 0;
    ztask::Status s = c.Watch([&](const Value& event) {
      // The hub drops events for a monitor that reads too slowly: say so.
      if (event["seq"].is_number_integer()) {
        const int64_t seq = event["seq"].get<int64_t>();
        if (last_seq > 0 && seq > last_seq + 1) {
          std::fprintf(stderr, "taskctl: missed %lld events (this monitor read too slowly)\n",
                       static_cast<long long>(seq - last_seq - 1));
        }
        last_seq = seq;
      }
      if (json) {
        std::printf("%s\n", event.dump().c_str());
      } else {
        std::printf("%-20s task %s engine %s %s %s\n", event["kind"].get<std::string>().c_str(),
                    event["task_id"].is_null() ? "-" : event["task_id"].get<std::string>().c_str(),
                    event["engine_id"].is_null() ? "-" : event["engine_id"].dump().c_str(),
                    event["status"].is_null() ? "" : event["status"].get<std::string>().c_str(),
                    event["text"].get<std::string>().c_str());
      }
      std::fflush(stdout);
      return count < 0 || ++seen < count;
    });
    return s.ok() ? kOk : Error(s);
  }
  if (graph->parsed()) {
    auto records = parsed_ids->empty() ? c.FetchAll() : c.Fetch(*parsed_ids);
    if (!records.ok()) return Error(records.status());
    PrintDot(*records);
    return kOk;
  }
  if (wait_engines->parsed()) {
    ztask::Status s = c.WaitForEngines(want_engines, engines_timeout);
    return s.ok() ? kOk : Error(s);
  }
  if (purge->parsed()) {
    if (!purge_all && parsed_ids->empty()) return Error("purge needs task ids or --all");
    auto count = c.Purge(*parsed_ids, purge_all);
    if (!count.ok()) return Error(count.status());
    std::printf("%lld records purged\n", static_cast<long long>(*count));
    return kOk;
  }
  if (shutdown->parsed()) {
    ztask::Status s = c.Shutdown();
    return s.ok() ? kOk : Error(s);
  }
  return kUsage;
}
}  // namespace

int main(int argc, char** argv) {
  // Whatever goes wrong reaches the user as one line, never a trace.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    return Error(std::string("internal error: ") + e.what());
  }
}
