// The supervisor's restart limits and back-offs (cluster/restart_window.h).
#include "cluster/restart_window.h"

#include <algorithm>
#include <cstdint>

namespace ztask::cluster {

size_t RestartWindow::Recent(double now) {
  std::erase_if(recent_, [&](double t) { return now - t > window_s_; });
  return recent_.size();
}

double RestartWindow::EngineBackoff() const {
  const size_t doublings = std::min<size_t>(recent_.size(), 30);
  return std::min(kMaxBackoffS, backoff_s_ * static_cast<double>(uint64_t{1} << doublings));
}

double RestartWindow::ServerBackoff() const {
  const size_t beyond =
      recent_.size() > static_cast<size_t>(max_restarts_) ? recent_.size() - max_restarts_ : 0;
  return std::min(kMaxBackoffS, std::max(0.1, backoff_s_) *
                                    static_cast<double>(uint64_t{1} << std::min<size_t>(beyond, 8)));
}

}  // namespace ztask::cluster
