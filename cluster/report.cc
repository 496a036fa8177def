#include "cluster/report.h"

#include <algorithm>
#include <cstdio>

namespace ztask::cluster {

namespace {

// "routing: leastload, HWM auto (engine 0: 64, engine 1: 1)": with the
// learned HWM, what each engine has now (the first ones, with many).
std::string RoutingLine(const ClusterStats::Scheduler& s) {
  constexpr size_t kListed = 16;
  std::string line = "routing: " + s.scheme + ", HWM ";
  if (s.hwm >= 0) return line + (s.hwm == 0 ? "unlimited" : std::to_string(s.hwm)) + "\n";
  line += "auto";
  for (size_t i = 0; i < s.engine_hwms.size() && i < kListed; ++i) {
    line += (i == 0 ? " (engine " : ", engine ") + std::to_string(s.engine_hwms[i].first) +
            ": " + std::to_string(s.engine_hwms[i].second);
  }
  if (s.engine_hwms.size() > kListed) {
    line += ", and " + std::to_string(s.engine_hwms.size() - kListed) + " more";
  }
  return line + (s.engine_hwms.empty() ? "\n" : ")\n");
}

}  // namespace

Result<std::string> RunReport(Client& client) {
  auto engines = client.Engines();
  if (!engines.ok()) return engines.status();
  // Counts the hub keeps, not its records (a long history would take
  // seconds to read), and the newest task finished since it started.
  auto stats = client.Stats(/*feed_after=*/0, /*limit=*/1);
  if (!stats.ok()) return stats.status();
  int running = 0, failed = 0, restarts = 0;
  double all_registered = 0;
  for (const auto& e : *engines) {
    if (e.state == EngineState::kRunning) ++running;
    if (e.state == EngineState::kFailed) ++failed;
    restarts += e.restarts;
    all_registered = std::max(all_registered, e.registered);
  }
  const double last_finished = stats->finished.empty() ? 0 : stats->finished.back().completed;
  char text[512];
  int n = std::snprintf(text, sizeof text,
                        "engines: %zu started (%d running, %d failed), %d restarts\n"
                        "tasks: %lld ok, %lld failed, %lld unfinished\n",
                        engines->size() + static_cast<size_t>(restarts), running, failed, restarts,
                        static_cast<long long>(stats->ok), static_cast<long long>(stats->failed),
                        static_cast<long long>(stats->waiting + stats->running));
  std::string report(text, static_cast<size_t>(n));
  if (stats->scheduler) report += RoutingLine(*stats->scheduler);
  if (last_finished > all_registered && all_registered > 0) {
    std::snprintf(text, sizeof text, "from all engines registered to the last task finished: %.3f s\n",
                  last_finished - all_registered);
    report += text;
  }
  return report;
}

}  // namespace ztask::cluster
