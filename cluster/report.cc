#include "cluster/report.h"

#include <algorithm>
#include <cstdio>

namespace ztask::cluster {

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
  if (last_finished > all_registered && all_registered > 0) {
    std::snprintf(text, sizeof text, "from all engines registered to the last task finished: %.3f s\n",
                  last_finished - all_registered);
    report += text;
  }
  return report;
}

}  // namespace ztask::cluster
