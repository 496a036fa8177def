// taskscheduler: routes tasks from clients to engines. See server.h.
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/signals.h"
#include "base/usage.h"
#include "scheduler/scheme.h"
#include "scheduler/server.h"
#include "cluster/passed_flags.h"

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  ztask::scheduler::SchedulerOptions options;
  std::string ip;
  std::string log_level = "info";
  std::string schemes;
  for (const auto& n : ztask::scheduler::SchemeNames())
    schemes += (schemes.empty() ? "" : ", ") + n;

  CLI::App app{"taskscheduler: routes ztask tasks from clients to engines"};
  app.add_option("--scheme", options.scheme, "how to choose an engine: " + schemes)
      ->capture_default_str();
  app.add_option("--hwm", options.hwm, "most tasks outstanding per engine; 0: no limit")
      ->capture_default_str();
  using ztask::cluster::AddPassedFlag;
  // A task naming an outcome older than --keep-finished waits while the hub
  // is asked.
  AddPassedFlag(app, "--keep-finished", options.keep_finished)->capture_default_str();
  AddPassedFlag(app, "--send-ahead", options.send_ahead)->capture_default_str();
  app.add_option(
      "--profile-dir", options.profile_dir,
      "profile directory holding the connection file (default ~/.ztask/profile_default)");
  app.add_option("--client-endpoint", options.client_endpoint, "where clients connect")
      ->capture_default_str();
  app.add_option("--engine-endpoint", options.engine_endpoint, "where engines connect")
      ->capture_default_str();
  app.add_option("--ip", ip, "bind both endpoints on this address, any free port");
  app.add_option("--max-message-bytes", options.limits.max_message_bytes,
                 "largest message accepted")
      ->capture_default_str();
  AddPassedFlag(app, "--max-task-bytes", options.task_limits.max_task_bytes)
      ->capture_default_str();
  AddPassedFlag(app, "--max-dependencies", options.task_limits.max_dependencies)
      ->capture_default_str();
  AddPassedFlag(app, "--max-queued-per-client", options.task_limits.max_queued_per_client)
      ->capture_default_str();
  app.add_flag("--insecure", options.insecure, "accept a connection file without a key");
  AddPassedFlag(app, "--replay-window", options.replay_window_s)->capture_default_str();
  app.add_option("--recover-timeout", options.recover_timeout_s,
                 "at start, seconds without a word from the hub (which says which tasks were "
                 "in flight) before each error in the log; the scheduler keeps asking")
      ->capture_default_str()
      ->check(ztask::kNonNegativeNumber);
  AddPassedFlag(app, "--recover-grace", options.recover_grace_s)->capture_default_str();
  AddPassedFlag(app, "--socket-hwm", options.socket_hwm)->capture_default_str();
  AddPassedFlag(app, "--durability", options.durability)->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the sampling schemes; 0: random");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  ztask::AddStandardFlags(app, "taskscheduler");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskscheduler");
  }
  if (!ip.empty()) {
    options.client_endpoint = "tcp://" + ip + ":*";
    options.engine_endpoint = "tcp://" + ip + ":*";
  }
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskscheduler %l: %v");

  auto server = ztask::scheduler::SchedulerServer::Create(options);
  if (!server.ok()) {
    std::fprintf(stderr, "taskscheduler: %s\n", server.status().message().c_str());
    return 2;
  }
  ztask::SetStopTarget(server->get());
  spdlog::info("scheme {}, hwm {}; clients at {}, engines at {}", options.scheme, options.hwm,
               (*server)->client_endpoint(), (*server)->engine_endpoint());
  (*server)->Run();
  ztask::SetStopTarget(nullptr);
  return 0;
}
