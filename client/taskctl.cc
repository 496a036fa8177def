// taskctl: submit tasks, arrays and graphs in jobs, wait for them, read
// their records, and ask about the cluster. Each subcommand is one Add*
// function (taskctl.h): here the shared pieces, the subcommands that ask
// about the cluster, and main.
#include "client/taskctl.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/usage.h"

namespace ztask::ctl {

int Error(const std::string& message, int code) {
  std::fprintf(stderr, "taskctl: %s\n", message.c_str());
  return code;
}

int Error(const Status& status) {
  return Error(status.message(), status.code() == Status::Code::kTimedOut ? kTimedOut : kUsage);
}

Result<std::vector<TaskId>> ParseIds(const std::vector<std::string>& texts) {
  std::vector<TaskId> ids;
  for (const auto& text : texts) {
    auto id = TaskId::FromHex(text);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  return ids;
}

int PrintRecords(const std::vector<TaskInfo>& records) {
  int failed = 0;
  for (const auto& r : records) {
    std::printf("%s\n", r.ToJson().dump().c_str());
    if (r.status == TaskState::kError) ++failed;
  }
  std::fflush(stdout);
  if (failed) {
    return Error(std::to_string(failed) + " of " + std::to_string(records.size()) +
                     " tasks failed",
                 kFailed);
  }
  return kOk;
}

Status AwaitRecorded(Client& client, const std::vector<TaskId>& ids) {
  if (ids.empty()) return Status::Ok();
  auto records = client.FetchWhen({ids.back()}, /*finished=*/false, 10);
  if (records.ok()) return Status::Ok();
  if (records.status().code() != Status::Code::kNotFound) return records.status();
  return Status::Unavailable(
      "the cluster did not record the task within 10 s: is its scheduler running?");
}

Status CheckJobName(const std::string& name) {
  const bool plain = name.size() <= 128 && std::none_of(name.begin(), name.end(), [](char c) {
                       return static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
                     });
  if (plain) return Status::Ok();
  return Status::InvalidArgument(
      "--job takes a name of at most 128 characters without spaces or control characters");
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// The ids given, parsed before connecting.
struct IdArgs {
  std::vector<std::string> texts;
  std::vector<TaskId> ids;
  Status Parse() {
    auto parsed = ParseIds(texts);
    if (!parsed.ok()) return parsed.status();
    ids = std::move(*parsed);
    return Status::Ok();
  }
};

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

void PrintDot(const std::vector<TaskInfo>& records) {
  std::printf("digraph ztask {\n  node [shape=box];\n");
  for (const auto& r : records) {
    const std::string label =
        Escape(r.label.empty() ? r.id.ToHex().substr(0, 8) : r.label) + "\\n" +
        std::string(TaskStateName(r.status));
    const char* color = r.status == TaskState::kOk      ? "darkgreen"
                        : r.status == TaskState::kError ? "red"
                                                        : "gray40";
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

}  // namespace

void AddResult(CLI::App& app, Subcommands& out) {
  auto ids = std::make_shared<IdArgs>();
  auto* sub = app.add_subcommand("result", "print the hub's records of tasks as JSON lines");
  sub->add_option("ids", ids->texts, "task ids")->required();
  out.push_back({sub, [ids] { return ids->Parse(); }, [ids](Client& c) {
                   auto records = c.Fetch(ids->ids);
                   return records.ok() ? PrintRecords(*records) : Error(records.status());
                 }});
}

void AddStatus(CLI::App& app, Subcommands& out) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("status", "tasks running, queued and done per engine");
  sub->add_flag("--json", *json, "print JSON");
  out.push_back({sub, nullptr, [json](Client& c) {
                   auto q = c.Queue();
                   if (!q.ok()) return Error(q.status());
                   Value v = {{"engines", Value::array()}, {"unassigned", q->unassigned}};
                   for (const auto& e : q->engines) {
                     v["engines"].push_back({{"id", e.id},
                                             {"running", e.running},
                                             {"queued", e.queued},
                                             {"completed", e.completed}});
                   }
                   if (*json) {
                     std::printf("%s\n", v.dump().c_str());
                     return kOk;
                   }
                   std::printf("%-8s %8s %8s %10s\n", "engine", "running", "queued", "completed");
                   for (const auto& e : q->engines) {
                     std::printf("%-8d %8lld %8lld %10lld\n", e.id,
                                 static_cast<long long>(e.running),
                                 static_cast<long long>(e.queued),
                                 static_cast<long long>(e.completed));
                   }
                   std::printf("unassigned: %lld\n", static_cast<long long>(q->unassigned));
                   return kOk;
                 }});
}

void AddEngines(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool json = false, all = false;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("engines", "the live engines (starting, running, draining)");
  sub->add_flag("--json", f->json, "print JSON");
  sub->add_flag("--all", f->all, "also the stopped and failed ones");
  out.push_back({sub, nullptr, [f](Client& c) {
                   auto list = c.Engines();
                   if (!list.ok()) return Error(list.status());
                   if (!f->all) std::erase_if(*list, [](const auto& e) { return IsGone(e.state); });
                   if (f->json) {
                     Value v = Value::array();
                     for (const auto& e : *list) {
                       Value item = {{"id", e.id},       {"name", e.name},
                                     {"host", e.host},   {"pid", e.pid},
                                     {"state", EngineStateName(e.state)}, {"registered", e.registered}};
                       if (e.mpi_rank) item["mpi_rank"] = *e.mpi_rank;
                       item["restarts"] = e.restarts;
                       item["slots"] = e.slots;
                       item["resources"] = e.resources;
                       v.push_back(item);
                     }
                     std::printf("%s\n", v.dump().c_str());
                     return kOk;
                   }
                   std::printf("%-4s %-24s %-16s %-8s %-10s %-5s %s\n", "id", "name", "host",
                               "pid", "state", "slots", "resources");
                   for (const auto& e : *list) {
                     std::string resources;
                     for (const auto& [name, units] : e.resources) {
                       resources += (resources.empty() ? "" : ",") + name + "=" +
                                    std::to_string(units);
                     }
                     std::printf("%-4d %-24s %-16s %-8lld %-10s %-5d %s\n", e.id, e.name.c_str(),
                                 e.host.c_str(), static_cast<long long>(e.pid), std::string(EngineStateName(e.state)).c_str(),
                                 e.slots, resources.c_str());
                   }
                   return kOk;
                 }});
}

void AddMonitor(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool json = false;
    int count = -1;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("monitor", "follow the cluster's event stream");
  sub->add_flag("--json", f->json, "print JSON lines");
  sub->add_option("--count", f->count, "stop after this many events");
  out.push_back({sub, nullptr, [f](Client& c) {
                   int seen = 0;
                   int64_t last_seq = 0;
                   Status s = c.Watch([&](const Value& event) {
                     // The hub drops events for a monitor that reads too slowly: say so.
                     if (event["seq"].is_number_integer()) {
                       const int64_t seq = event["seq"].get<int64_t>();
                       if (last_seq > 0 && seq > last_seq + 1) {
                         std::fprintf(stderr,
                                      "taskctl: missed %lld events (this monitor read too slowly)\n",
                                      static_cast<long long>(seq - last_seq - 1));
                       }
                       last_seq = seq;
                     }
                     if (f->json) {
                       std::printf("%s\n", event.dump().c_str());
                     } else {
                       auto text = [&](const char* key) {
                         return event[key].is_null() ? std::string()
                                : event[key].is_string() ? event[key].get<std::string>()
                                                         : event[key].dump();
                       };
                       std::printf("%-20s task %s engine %s %s %s\n", text("kind").c_str(),
                                   event["task_id"].is_null() ? "-" : text("task_id").c_str(),
                                   event["engine_id"].is_null() ? "-" : text("engine_id").c_str(),
                                   text("status").c_str(), text("text").c_str());
                     }
                     std::fflush(stdout);
                     return f->count < 0 || ++seen < f->count;
                   });
                   return s.ok() ? kOk : Error(s);
                 }});
}

void AddGraph(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool dot = false;
    IdArgs ids;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("graph", "the recorded tasks and their dependencies");
  sub->add_flag("--dot", f->dot, "as Graphviz DOT")->required();
  sub->add_option("ids", f->ids.texts, "task ids (default: every record)");
  out.push_back({sub, [f] { return f->ids.Parse(); }, [f](Client& c) {
                   auto records = f->ids.ids.empty() ? c.FetchAll() : c.Fetch(f->ids.ids);
                   if (!records.ok()) return Error(records.status());
                   PrintDot(*records);
                   return kOk;
                 }});
}

void AddPurge(CLI::App& app, Subcommands& out) {
  struct Flags {
    bool all = false;
    IdArgs ids;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("purge", "forget the records of finished tasks");
  sub->add_flag("--all", f->all, "every finished task");
  sub->add_option("ids", f->ids.texts, "task ids");
  out.push_back({sub,
                 [f] {
                   ZTASK_RETURN_IF_ERROR(f->ids.Parse());
                   if (!f->all && f->ids.ids.empty()) {
                     return Status::InvalidArgument("purge needs task ids or --all");
                   }
                   return Status::Ok();
                 },
                 [f](Client& c) {
                   auto count = c.Purge(f->ids.ids, f->all);
                   if (!count.ok()) return Error(count.status());
                   std::printf("%lld records purged\n", static_cast<long long>(*count));
                   return kOk;
                 }});
}

void AddWaitEngines(CLI::App& app, Subcommands& out) {
  struct Flags {
    int n = 0;
    double timeout = 60;
  };
  auto f = std::make_shared<Flags>();
  auto* sub = app.add_subcommand("wait-engines", "wait until N engines are registered");
  sub->add_option("n", f->n, "how many")->required()->check(ztask::kPositiveNumber);
  sub->add_option("--timeout", f->timeout, "give up after this many seconds (exit 3)");
  out.push_back({sub, nullptr, [f](Client& c) {
                   Status s = c.WaitForEngines(f->n, f->timeout);
                   return s.ok() ? kOk : Error(s);
                 }});
}

void AddShutdown(CLI::App& app, Subcommands& out) {
  auto* sub = app.add_subcommand("shutdown", "stop the cluster");
  out.push_back({sub, nullptr, [](Client& c) {
                   Status s = c.Shutdown();
                   return s.ok() ? kOk : Error(s);
                 }});
}

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"taskctl: submit ztask tasks, arrays and graphs in jobs, wait for them, and ask "
               "about the cluster"};
  app.require_subcommand(1);
  // Global options are read before or after the subcommand, as people type
  // them (`taskctl status --profile-dir DIR`): subcommands made after this
  // hand what they do not know to the app.
  app.fallthrough();
  std::string profile;
  AddProfileFlags(app, &profile, "the cluster's profile directory");

  // Everything after the first `--` is the command, verbatim: split it off
  // before the parser, which would otherwise read its dashes as options.
  std::vector<std::string> command;
  int parsed_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      command.assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      break;
    }
  }
  Subcommands subcommands;
  AddSubmit(app, subcommands, &command);
  AddSubmitGraph(app, subcommands);
  AddWait(app, subcommands);
  AddJobs(app, subcommands);
  AddList(app, subcommands);
  AddAbort(app, subcommands);
  AddResubmit(app, subcommands);
  AddResult(app, subcommands);
  AddStatus(app, subcommands);
  AddEngines(app, subcommands);
  AddMonitor(app, subcommands);
  AddGraph(app, subcommands);
  AddPurge(app, subcommands);
  AddWaitEngines(app, subcommands);
  AddShutdown(app, subcommands);
  AddStandardFlags(app, "taskctl");
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // help, version, completion
    return Error(UsageMessage(app, e) + " (see taskctl --help)");
  }
  for (const Subcommand& sub : subcommands) {
    if (!sub.app->parsed()) continue;
    // What needs no cluster is checked before connecting.
    if (sub.check) {
      if (Status s = sub.check(); !s.ok()) return Error(s);
    }
    auto client = Client::Connect(profile);
    if (!client.ok()) return Error(client.status());
    return sub.run(**client);
  }
  return kUsage;
}

}  // namespace
}  // namespace ztask::ctl

int main(int argc, char** argv) {
  // Whatever goes wrong reaches the user as one line, never a trace.
  try {
    return ztask::ctl::Run(argc, argv);
  } catch (const std::exception& e) {
    return ztask::ctl::Error(std::string("internal error: ") + e.what());
  }
}
