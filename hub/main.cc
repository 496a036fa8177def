// taskhub: the registry of engines, the record of every task, queries and the
// event stream. See server.h.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <spdlog/spdlog.h>

#include "base/open_files.h"
#include "base/usage.h"
#include "cluster/passed_flags.h"
#include "hub/server.h"

int main(int argc, char** argv) {
  // What it writes (records, journal, logs) holds commands, environments and
  // outputs: for its user only, whoever started it.
  ::umask(077);
  ztask::hub::HubOptions options;
  std::string log_level = "info";
  CLI::App app{"taskhub: engine registry, task records, queries and events of a ztask cluster"};
  app.add_option("--profile-dir", options.profile_dir,
                 "profile directory holding the connection file (default ~/.ztask/profile_default)");
  app.add_option("--db", options.db, "task records: a SQLite file, or :memory: (default PROFILE/tasks.db)");
  app.add_option("--ip", options.ip, "address to bind every socket to")->capture_default_str();
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
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  ztask::AddStandardFlags(app, "taskhub");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskhub");
  }
  ztask::InstallStopSignals();
  // Past a file size limit (a quota), a write fails with EFBIG, which the
  // store reports, instead of killing the hub.
  ::signal(SIGXFSZ, SIG_IGN);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskhub %l: %v");
  // Each engine's connection holds a descriptor here.
  if (const uint64_t files = ztask::base::RaiseOpenFileLimit(); files < options.max_engines + 256) {
    spdlog::info("about {} engines can connect: the open-file limit is {} (ulimit -n)",
                 files > 256 ? files - 256 : 0, files);
  }
  auto server = ztask::hub::HubServer::Create(options);
  if (!server.ok()) {
    std::fprintf(stderr, "taskhub: %s\n", server.status().message().c_str());
    return 2;
  }
  const ztask::ScopedStopTarget stop_target(server->get());
  (*server)->Run();
  return 0;
}
