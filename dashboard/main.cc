// taskdash: the web dashboard and Prometheus metrics of a ztask cluster, a
// process of its own that asks the hub (see server.h).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <spdlog/spdlog.h>
#include <thread>

#include "base/signals.h"
#include "base/usage.h"
#include "dashboard/server.h"
#include "protocol/connection_file.h"

int main(int argc, char** argv) {
  ::umask(077);  // the URL file holds the token
  ztask::dashboard::DashOptions options;
  std::string profile, log_level = "warn";
  CLI::App app{"taskdash: web dashboard and /metrics of a ztask cluster"};
  ztask::AddProfileFlags(app, &profile, "the cluster's profile directory");
  app.add_option("--ip", options.ip,
                 "address to serve on (every request needs the token, on loopback too)")
      ->capture_default_str();
  app.add_option("--port", options.port, "port to serve on (0: any free one)")
      ->capture_default_str()
      ->check(ztask::WholeNumberIn(0, 65535));
  app.add_option("--token", options.token,
                 "token every request must carry (default: a random one, in the printed URL)");
  app.add_option("--token-file", options.token_file, "read the token from this file's first line")
      ->excludes("--token");
  app.add_flag("--metrics-without-token", options.metrics_without_token,
               "serve /metrics to whoever asks, without the token (for a scraper that cannot "
               "send one; other accounts of this host can then read the cluster's counts)");
  app.add_option("--interval-ms", options.interval_ms, "how often to ask the hub and update pages")
      ->capture_default_str()
      ->check(ztask::WholeNumberIn(50, 60000));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  ztask::AddStandardFlags(app, "taskdash");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ztask::UsageExit(app, e, "taskdash");
  }
  ztask::InstallStopSignals();
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e taskdash %l: %v");
  options.profile_dir = profile.empty() ? ztask::protocol::DefaultProfileDir()
                                        : std::filesystem::path(profile);
  auto server = ztask::dashboard::DashServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "taskdash: %s\n", server.status().message().c_str());
    return 2;
  }
  const std::string url = (*server)->url();
  // Where taskcluster and scripts find it (mode 0600: it may hold the token).
  const auto url_file = std::filesystem::is_directory(options.profile_dir)
                            ? options.profile_dir / "taskdash.url"
                            : options.profile_dir.parent_path() / "taskdash.url";
  std::ofstream(url_file) << url << "\n";
  std::printf("taskdash: serving %s\n", url.c_str());
  std::fflush(stdout);
  while (!ztask::StopRequested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*server)->Stop();
  std::error_code ignored;
  std::filesystem::remove(url_file, ignored);
  return 0;
}
