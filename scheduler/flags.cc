#include "scheduler/flags.h"

#include <spdlog/spdlog.h>

#include "base/usage.h"
#include "cluster/passed_flags.h"
#include "scheduler/scheme.h"

namespace ztask::scheduler {
namespace {

// Where the scheduler's sockets are, and how it routes.
void AddRoutingFlags(CLI::App& app, SchedulerFlags& flags) {
  SchedulerOptions& options = flags.options;
  app.add_option("--scheme", options.scheme, "how to choose an engine: " + SchemeList())
      ->capture_default_str();
  app.add_option("--hwm", flags.hwm,
                 "most tasks outstanding per engine; 0: no limit; auto: learned per engine, "
                 "deep while tasks finish fast, 1 for long ones (tasks queued behind a long "
                 "one are taken back for idle engines)")
      ->check(kHwmValue)
      ->capture_default_str();
  using cluster::AddPassedFlag;
  // A task naming an outcome older than --keep-finished waits while the hub
  // is asked.
  AddPassedFlag(app, "--keep-finished", options.keep_finished)->capture_default_str();
  AddPassedFlag(app, "--send-ahead", options.send_ahead)->capture_default_str();
  AddProfileFlags(app, &options.profile_dir, "profile directory holding the connection file");
  app.add_option("--client-endpoint", options.client_endpoint, "where clients connect")
      ->capture_default_str();
  app.add_option("--engine-endpoint", options.engine_endpoint, "where engines connect")
      ->capture_default_str();
  app.add_option("--ip", flags.ip, "bind both endpoints on this address, any free port");
  app.add_flag("--tcp", options.tcp,
               "on loopback, bind TCP ports instead of Unix sockets in the profile (for peers "
               "that dial through a tunnel)");
}

// What peers may send, and what survives a crash or a restart.
void AddLimitFlags(CLI::App& app, SchedulerOptions& options) {
  using cluster::AddPassedFlag;
  app.add_option("--max-message-bytes", options.limits.max_message_bytes,
                 "largest message accepted")
      ->capture_default_str();
  AddPassedFlag(app, "--max-task-bytes", options.task_limits.max_task_bytes)->capture_default_str();
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
      ->check(kNonNegativeNumber);
  AddPassedFlag(app, "--record-running-after", options.record_running_after_s)
      ->capture_default_str();
  AddPassedFlag(app, "--recover-grace", options.recover_grace_s)->capture_default_str();
  AddPassedFlag(app, "--socket-hwm", options.socket_hwm)->capture_default_str();
  AddPassedFlag(app, "--durability", options.durability)->capture_default_str();
}

}  // namespace

std::string SchemeList() {
  std::string schemes;
  for (const auto& n : SchemeNames()) {
    schemes += (schemes.empty() ? "" : ", ") + n;
  }
  return schemes;
}

void AddSchedulerFlags(CLI::App& app, SchedulerFlags& flags) {
  AddRoutingFlags(app, flags);
  AddLimitFlags(app, flags.options);
  app.add_option("--seed", flags.options.seed, "seed of the sampling schemes; 0: random");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
}

void ApplySchedulerFlags(SchedulerFlags& flags) {
  flags.options.hwm =
      flags.hwm == "auto" ? kAdaptiveHwm : static_cast<uint32_t>(std::stoul(flags.hwm));
  if (!flags.ip.empty()) {
    flags.options.client_endpoint = "tcp://" + flags.ip + ":*";
    flags.options.engine_endpoint = "tcp://" + flags.ip + ":*";
  }
}

void LogServing(const SchedulerOptions& options, const SchedulerServer& server) {
  spdlog::info("scheme {}, hwm {}; clients at {}, engines at {}", options.scheme,
               options.hwm == kAdaptiveHwm ? std::string("auto") : std::to_string(options.hwm),
               server.client_endpoint(), server.engine_endpoint());
}

}  // namespace ztask::scheduler
