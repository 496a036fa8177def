#include "hub/flags.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "base/open_files.h"
#include "base/usage.h"
#include "cluster/passed_flags.h"

namespace ztask::hub {

void AddHubFlags(CLI::App& app, HubFlags& flags) {
  HubOptions& options = flags.options;
  AddProfileFlags(app, &options.profile_dir, "profile directory holding the connection file");
  app.add_option("--db", options.db,
                 "task records: a SQLite file, or :memory: (default PROFILE/tasks.db)");
  app.add_option("--ip", options.ip, "address to bind every socket to")->capture_default_str();
  app.add_flag("--tcp", options.tcp,
               "on loopback, bind TCP ports instead of Unix sockets in the profile (for peers "
               "that dial through a tunnel)");
  using ztask::cluster::AddPassedFlag;
  AddPassedFlag(app, "--durability", options.durability)->capture_default_str();
  AddPassedFlag(app, "--heartbeat-ms", options.heartbeat_ms)->capture_default_str();
  AddPassedFlag(app, "--heartbeat-misses", options.heartbeat_misses)->capture_default_str();
  // With --db :memory: every record stays in memory.
  AddPassedFlag(app, "--keep-finished", options.keep_finished)->capture_default_str();
  AddPassedFlag(app, "--max-finished-records", options.max_finished_records)->capture_default_str();
  AddPassedFlag(app, "--drop-finished-after", options.drop_finished_after_s)->capture_default_str();
  app.add_option("--max-engines", options.max_engines, "engines registered at once")
      ->capture_default_str();
  AddPassedFlag(app, "--replay-window", options.replay_window_s)->capture_default_str();
  app.add_flag("--insecure", options.insecure,
               "run without a key: anyone who can reach the ports can run commands");
  app.add_flag("--curve", options.curve,
               "encrypt every connection with CurveZMQ (when this hub makes the connection "
               "file; by default when --ip is not loopback)");
  app.add_flag("--no-encryption", options.no_encryption,
               "no CurveZMQ even when --ip is beyond loopback (warns)");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
}

void PrepareHubProcess(const HubOptions& options, uint64_t per_engine) {
  ::signal(SIGXFSZ, SIG_IGN);
  const uint64_t files = base::RaiseOpenFileLimit();
  if (base::EnginesWithin(files, per_engine) < options.max_engines) {
    spdlog::info("about {} engines can connect: the open-file limit is {} (ulimit -n)",
                 base::EnginesWithin(files, per_engine), files);
  }
}

}  // namespace ztask::hub
