// ReplayGuard: refuses a signed message that was captured and sent again.
//
// Every process stamps its headers with a date that strictly increases
// within the process (base::WallMicros), and sends each socket's messages in the
// order it stamps them. A bound socket therefore sees each session's dates
// strictly increase; a message whose date is not after the last one of its
// session is a replay and is refused. A session is forgotten only once it
// has been idle past the window, when its messages are refused by date: a
// message must be dated within `window_us` of the receiver's clock. When
// `max_sessions` are inside the window, a new session is refused (logged)
// until one ages out: never is a live session forgotten.
// Hosts of one cluster must therefore agree on the time within the window
// (5 minutes by default; NTP gives milliseconds).
//
// Thread safety: none; one guard per socket, owned by the socket's thread.
#ifndef ZTASK_PROTOCOL_REPLAY_GUARD_H_
#define ZTASK_PROTOCOL_REPLAY_GUARD_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "protocol/messages.h"
#include "ztask/status.h"

namespace ztask::protocol {

struct ReplayOptions {
  // Largest difference between a message's date and the receiver's clock.
  // 0 turns the clock check off (for a socket whose messages may be held back
  // by an outage, such as the scheduler's monitor); ordering is still checked.
  int64_t window_us = int64_t{300} * 1'000'000;
  // Sessions remembered; beyond it new sessions are refused until one has
  // been idle past the window. Each costs about 100 bytes.
  size_t max_sessions = 262144;
};

// A window of `seconds` (0: order only).
inline ReplayOptions ReplayWindowOf(double seconds) {
  return {.window_us = static_cast<int64_t>(seconds * 1e6)};
}

class ReplayGuard {
 public:
  explicit ReplayGuard(ReplayOptions options = {}) : options_(options) {}

  // OK for a fresh message; kPermissionDenied names why it is refused.
  Status Admit(const Header& header, int64_t now_us);

  size_t sessions() const { return sessions_.size(); }

 private:
  void Forget(int64_t now_us);

  ReplayOptions options_;
  std::unordered_map<std::string, int64_t> sessions_;  // session -> last date
};

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_REPLAY_GUARD_H_
