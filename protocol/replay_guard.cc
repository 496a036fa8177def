#include "protocol/replay_guard.h"

#include <algorithm>
#include <vector>

namespace ztask::protocol {

Status ReplayGuard::Admit(const Header& header, int64_t now_us) {
  if (options_.window_us > 0) {
    const int64_t skew = header.date_us - now_us;
    if (skew > options_.window_us || skew < -options_.window_us) {
      return Status::PermissionDenied(
          "message dated " + std::to_string(skew / 1'000'000) +
          " s from this host's clock (more than the replay window; are the clocks in step?)");
    }
  }
  auto it = sessions_.find(header.session);
  if (it != sessions_.end()) {
    if (header.date_us <= it->second) {
      return Status::PermissionDenied("replayed message: not after the last one of session " +
                                      header.session.substr(0, 32));
    }
    it->second = header.date_us;
    return Status::Ok();
  }
  if (sessions_.size() >= options_.max_sessions) Forget(now_us);
  sessions_.emplace(header.session, header.date_us);
  return Status::Ok();
}

// Drops the sessions idle past the window; when that frees too little, the
// older half.
void ReplayGuard::Forget(int64_t now_us) {
  if (options_.window_us > 0) {
    std::erase_if(sessions_, [&](const auto& s) { return s.second < now_us - options_.window_us; });
  }
  if (sessions_.size() < options_.max_sessions) return;
  std::vector<int64_t> dates;
  dates.reserve(sessions_.size());
  for (const auto& s : sessions_) dates.push_back(s.second);
  auto middle = dates.begin() + static_cast<std::ptrdiff_t>(dates.size() / 2);
  std::nth_element(dates.begin(), middle, dates.end());
  const int64_t cut = *middle;
  std::erase_if(sessions_, [&](const auto& s) { return s.second <= cut; });
}

}  // namespace ztask::protocol
