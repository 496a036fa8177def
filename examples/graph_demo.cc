// The example run: starts the real taskscheduler on this machine with a
// stand-in hub and stand-in engines (in this process, over loopback TCP),
// submits a small graph with after/follow dependencies, prints every
// outcome, and stops everything it started.
//
// usage: graph_demo [--engines N] [--scheduler PATH]
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/standins.h"
#include "tests/support/temp_dir.h"

using namespace ztask;
using testing::StandInEngine;

namespace {

struct Node {
  const char* name;
  const char* function;  // "fail" makes the stand-in engine report a failure
  std::vector<const char*> after, follow;
  AcceptedOutcome after_outcome = AcceptedOutcome::kSuccess;
};

// fetch-a, fetch-b -> merge -> render (on merge's engine) -> report;
// a step that fails, a clean-up that runs only on its failure, and a step
// that needed its success.
const std::vector<Node> kGraph = {
    {"fetch-a", "work", {}, {}},
    {"fetch-b", "work", {}, {}},
    {"merge", "work", {"fetch-a", "fetch-b"}, {}},
    {"render", "work", {}, {"merge"}},
    {"report", "work", {"render"}, {}},
    {"flaky-step", "fail", {}, {}},
    {"clean-up", "work", {"flaky-step"}, {}, AcceptedOutcome::kFailure},
    {"publish", "work", {"flaky-step"}, {}},
};

std::string Self() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
}

}  // namespace

int main(int argc, char** argv) {
  int engines = 3;
  std::string scheduler =
(std::filesystem::path(Self()).parent_path() / "taskscheduler").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--engines") == 0) engines = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--scheduler") == 0) scheduler = argv[i + 1];
  }
  if (engines < 1) {
    std::fprintf(stderr, "graph_demo: --engines must be at least 1\n");
    return 2;
  }

  testing::TempDir profile;
  testing::StandInHub hub(profile.path());
  testing::ChildProcess process({scheduler, "--profile-dir", profile.path().string()},
                                profile.path() / "taskscheduler.log");
  if (!testing::WaitFor([&] { return !hub.SchedulerEndpoints().client.empty(); })) {
    std::fprintf(stderr, "graph_demo: the scheduler did not start:\n%s\n", process.Log().c_str());
    return 1;
  }
  const auto endpoints = hub.SchedulerEndpoints();
  std::printf("taskscheduler (pid %d) routes clients at %s to engines at %s\n", process.pid(),
              endpoints.client.c_str(), endpoints.engine.c_str());

  std::vector<std::unique_ptr<StandInEngine>> pool;
  for (int i = 0; i < engines; ++i) {
    pool.push_back(std::make_unique<StandInEngine>(endpoints.engine, hub.signer(), i));
    pool.back()->SendReady();
    hub.AnnounceEngine(i, pool.back()->uuid());
  }

  testing::RawClient client(endpoints.client, hub.signer());
  std::map<std::string, TaskId> ids;
  std::map<TaskId, std::string> names;
  for (const Node& node : kGraph) {
    protocol::RoutingMeta meta;
    for (const char* a : node.after) meta.after.ids.push_back(ids.at(a));
    meta.after.outcome = node.after_outcome;
    for (const char* f : node.follow) meta.follow.ids.push_back(ids.at(f));
    protocol::TaskSpec spec;
    spec.kind = "function";
    spec.function = node.function;
    spec.label = node.name;
    ids[node.name] = client.Submit(meta, spec);
    names[ids[node.name]] = node.name;
  }

  std::map<TaskId, int32_t> ran_on;
  std::vector<testing::RawClient::Reply> replies;
  uint64_t turns = 0;
  const bool done = testing::WaitFor([&] {
    for (auto& engine : pool) {
      if (auto task = engine->Receive(std::chrono::milliseconds(0))) {
        const bool ok = task->spec.function != "fail";
        engine->Reply(*task, ok, ok ? ErrorType::kNone : ErrorType::kTaskFailed,
                      ok ? "" : "it failed, as this step does");
        ran_on[task->header.id] = engine->id();
      }
    }
    if (auto r = client.Receive(std::chrono::milliseconds(1))) replies.push_back(*r);
    if (++turns % 200 == 0) {  // a SUB may join after the first notice
      for (auto& e : pool) hub.AnnounceEngine(e->id(), e->uuid());
    }
    return replies.size() == kGraph.size();
  }, std::chrono::seconds(30));

  std::printf("\n%-12s %-7s %-7s %s\n", "task", "status", "engine", "error");
  for (const auto& r : replies) {
    std::string engine = r.meta.engine_id ? std::to_string(*r.meta.engine_id) : "-";
    std::printf("%-12s %-7s %-7s %s%s%s\n", names[r.task].c_str(), r.meta.ok ? "ok" : "error",
                engine.c_str(), std::string(ErrorTypeName(r.meta.error_type)).c_str(),
                r.meta.ok ? "" : ": ", r.result.error_message.c_str());
  }
  hub.PumpMonitor(std::chrono::milliseconds(200));
  std::printf("\nthe hub stand-in received %zu monitor messages; stopping the scheduler\n",
              hub.monitor().size());
  const int code = process.Stop();
  if (!done) {
    std::fprintf(stderr, "graph_demo: only %zu of %zu tasks finished\n", replies.size(),
                 kGraph.size());
    return 1;
  }
  return code == 0 ? 0 : 1;
}
