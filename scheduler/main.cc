// taskscheduler: routes tasks from clients to engines. See server.h.
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "base/open_files.h"
#include "base/signals.h"
#include "base/usage.h"
#include "cluster/passed_flags.h"
#include "scheduler/scheme.h"
#include "scheduler/server.h"

namespace {

using ztask::scheduler::SchedulerOptions;

// What the command line says: the server's options and what only main uses.
struct Flags {
  SchedulerOptions options;
  std::string ip;
  std::string log_level = "info";
  std::string hwm = "auto";
};

std::string SchemeList() {
  std::string schemes;
  for (const auto& n : ztask::scheduler::SchemeNames()) {
    schemes += (schemes.empty() ? "" : ", ") + n;
  }
  return schemes;
}

// Where the scheduler's sockets are, and how it routes.
void AddRoutingFlags(CLI::App& app, Flags& flags) {
  SchedulerOptions& options = flags.options;
  app.add_option("--scheme", options.scheme, "how to choose an engine: " + SchemeList())
      ->capture_default_str();
  app.add_option("--hwm", flags.hwm,
                 "most tasks outstanding per engine; 0: no limit; auto: learned per engine, "
                 "deep while tasks finish fast, 1 for long ones (tasks queued behind a long "
                 "one are taken back for idle engines)")
      ->check(ztask::kHwmValue)
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
  app.add_option("--ip", flags.ip, "bind both endpoints on this address, any free port");
}

// What peers may send, and what survives a crash or a restart.
void AddLimitFlags(CLI::App& app, SchedulerOptions& options) {
  using ztask::cluster::AddPassedFlag;
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
  AddPassedFlag(app, "--record-running-after", options.record_running_after_s)
      ->capture_default_str();
  AddPassedFlag(app, "--recover-grace", options.recover_grace_s)->capture_default_str();
  AddPassedFlag(app, "--socket-hwm", options.socket_hwm)->capture_default_str();
  AddPassedFlag(app, "--durability", options.durability)->capture_default_str();
}

// The flags, or the exit code when the command line asks for none of the
// work (--help, --version) or is wrong.
std::optional<int> ParseFlags(int argc, char** argv, Flags& flags) {
  CLI::App app{"taskscheduler: routes ztask tasks from clients to engines"};
  AddRoutingFlags(app, flags);
  AddLimitFlags(app, flags.options);
  app.add_option("--seed", flags.options.seed, "seed of the sampling schemes; 0: random");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  ztask::AddStandardFlags(app, "taskscheduler");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskscheduler");
  }
  flags.options.hwm = flags.hwm == "auto" ? ztask::scheduler::kAdaptiveHwm
                                          : static_cast<uint32_t>(std::stoul(flags.hwm));
  if (!flags.ip.empty()) {
    flags.options.client_endpoint = "tcp://" + flags.ip + ":*";
    flags.options.engine_endpoint = "tcp://" + flags.ip + ":*";
  }
  return std::nullopt;
}

// Reads the connection file, binds, records the endpoints in the file, and
// serves until a stop signal. Returns the exit code.
int Serve(const SchedulerOptions& options) {
  auto server = ztask::scheduler::SchedulerServer::Create(options);
  if (!server.ok()) {
    std::fprintf(stderr, "taskscheduler: %s\n", server.status().message().c_str());
    return 2;
  }
  const ztask::ScopedStopTarget stop_target(server->get());
  spdlog::info("scheme {}, hwm {}; clients at {}, engines at {}", options.scheme,
               options.hwm == ztask::scheduler::kAdaptiveHwm ? std::string("auto")
                                                            : std::to_string(options.hwm),
               (*server)->client_endpoint(), (*server)->engine_endpoint());
  (*server)->Run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  Flags flags;
  if (std::optional<int> exit_code = ParseFlags(argc, argv, flags)) return *exit_code;
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskscheduler %l: %v");
  // Each engine's connection holds a descriptor here.
  ztask::base::RaiseOpenFileLimit();
  return Serve(flags.options);
}
