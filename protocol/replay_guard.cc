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
  if (sessions_.size() >= options_.max_sessions) {
    Forget(now_us);
    // Every session remembered is still inside the window: forgetting one
    // would let its messages be replayed, so the newcomer waits instead.
    if (sessions_.size() >= options_.max_sessions) {
      return Status::PermissionDenied(
          "too many sessions within the replay window (" + std::to_string(sessions_.size()) +
          "); a new one is let in once one has been idle for the window");
    }
  }
  sessions_.emplace(header.session, header.date_us);
  return Status::Ok();
}

// Drops the sessions idle past the window: their messages are refused by
// date alone. Without a window nothing can be forgotten safely.
void ReplayGuard::Forget(int64_t now_us) {
  if (options_.window_us <= 0) return;
  std::erase_if(sessions_, [&](const auto& s) { return s.second < now_us - options_.window_us; });
}

}  // namespace ztask::protocol
