#include "cluster/report.h"

#include <algorithm>
#include <cstdio>

namespace ztask::cluster {

Result<std::string> RunReport(Client& client) {
  auto engines = client.Engines();
  if (!engines.ok()) return engines.status();
  auto records = client.FetchAll();
  if (!records.ok()) return records.status();
  int running = 0, failed = 0, restarts = 0;
  double all_registered = 0;
  for (const auto& e : *engines) {
    if (e.state == "running") ++running;
    if (e.state == "failed") ++failed;
    restarts += e.restarts;
    all_registered = std::max(all_registered, e.registered);
  }
  int ok = 0, errors = 0, unfinished = 0;
  double last_finished = 0;
  for (const auto& r : *records) {
    if (r.ok()) {
      ++ok;
    } else if (r.finished()) {
      ++errors;
    } else {
      ++unfinished;
    }
    if (r.completed) last_finished = std::max(last_finished, *r.completed);
  }
  char text[512];
  int n = std::snprintf(text, sizeof text,
                        "engines: %zu started (%d running, %d failed), %d restarts\n"
                        "tasks: %d ok, %d failed, %d unfinished\n",
                        engines->size() + static_cast<size_t>(restarts), running, failed, restarts,
                        ok, errors, unfinished);
  std::string report(text, static_cast<size_t>(n));
  if (last_finished > all_registered && all_registered > 0) {
    std::snprintf(text, sizeof text, "from all engines registered to the last task finished: %.3f s\n",
                  last_finished - all_registered);
    report += text;
  }
  return report;
}

}  // namespace ztask::cluster
