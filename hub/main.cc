// taskhub: the registry of engines, the record of every task, queries and the
// event stream. See server.h.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/usage.h"
#include "hub/flags.h"
#include "hub/server.h"

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  ztask::hub::HubFlags flags;
  CLI::App app{"taskhub: engine registry, task records, queries and events of a ztask cluster"};
  ztask::hub::AddHubFlags(app, flags);
  ztask::AddStandardFlags(app, "taskhub");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskhub");
  }
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskhub %l: %v");
  ztask::hub::PrepareHubProcess(flags.options);
  auto server = ztask::hub::HubServer::Create(flags.options);
  if (!server.ok()) {
    std::fprintf(stderr, "taskhub: %s\n", server.status().message().c_str());
    return 2;
  }
  const ztask::ScopedStopTarget stop_target(server->get());
  (*server)->Run();
  return 0;
}
