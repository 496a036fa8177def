// taskscheduler: routes tasks from clients to engines. See server.h.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/open_files.h"
#include "base/signals.h"
#include "base/usage.h"
#include "scheduler/flags.h"
#include "scheduler/server.h"

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  ztask::scheduler::SchedulerFlags flags;
  CLI::App app{"taskscheduler: routes ztask tasks from clients to engines"};
  ztask::scheduler::AddSchedulerFlags(app, flags);
  ztask::AddStandardFlags(app, "taskscheduler");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskscheduler");
  }
  ztask::scheduler::ApplySchedulerFlags(flags);
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskscheduler %l: %v");
  // Each engine's connection holds a descriptor here.
  ztask::base::RaiseOpenFileLimit();
  // Reads the connection file, binds, records the endpoints in the file
  // (after a restart: once the hub said what was in flight), and serves
  // until a stop signal, which ends a wait for the hub too.
  ztask::StopFlag stop;
  flags.options.stop = stop.flag();
  auto server = [&] {
    const ztask::ScopedStopTarget stop_while_starting(&stop);
    return ztask::scheduler::SchedulerServer::Create(flags.options);
  }();
  if (!server.ok()) {
    std::fprintf(stderr, "taskscheduler: %s\n", server.status().message().c_str());
    return ztask::StopRequested() ? 0 : 2;
  }
  const ztask::ScopedStopTarget stop_target(server->get());
  ztask::scheduler::LogServing(flags.options, **server);
  (*server)->Run();
  return 0;
}
