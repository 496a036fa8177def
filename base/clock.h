// The one clock of every ztask process. Monotonic time (MonotonicMicros and
// the helpers over it) is for deadlines, intervals and timeouts inside a
// process; wall time (WallMicros) is only for what leaves the process with a
// date on it (message headers, records). Nothing else in the tree reads a
// std::chrono clock: code whose time a test must move (the scheduler's,
// the hub's and the engine's cores) takes a Clock, the system's in the
// programs and a ManualClock in tests.
//
// Must not: sleep, block or allocate. Thread safety: every function may be
// called from any thread.
#ifndef ZTASK_BASE_CLOCK_H_
#define ZTASK_BASE_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace ztask::base {

// Microseconds on the monotonic clock (an arbitrary origin; never steps).
int64_t MonotonicMicros();
inline int64_t MonotonicMillis() { return MonotonicMicros() / 1000; }
inline double MonotonicSeconds() { return static_cast<double>(MonotonicMicros()) / 1e6; }
// A duration in seconds (a flag's value) as microseconds, within [0, 100
// years]: a larger one, or infinity, is that long, and no clock reading
// plus it overflows.
inline int64_t DurationMicros(double seconds) {
  constexpr double kMaxSeconds = 100.0 * 365 * 24 * 3600;
  if (!(seconds > 0)) return 0;  // negative, zero or NaN
  if (seconds > kMaxSeconds) seconds = kMaxSeconds;
  return static_cast<int64_t>(seconds * 1e6);
}

// The monotonic clock as std::chrono time points, for what takes one
// (a condition variable's wait_until, durations printed by benchmarks).
using MonotonicClock = std::chrono::steady_clock;
inline MonotonicClock::time_point MonotonicNow() { return MonotonicClock::now(); }

// Microseconds since the Unix epoch, strictly increasing within the process
// even when the system clock steps back, so that a receiver can refuse a
// replayed message by its date (protocol/replay_guard.h).
int64_t WallMicros();

// The time as a core is given it: the monotonic clock for its intervals and
// deadlines, the wall clock for the dates of what it sends and records.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t MonotonicMicros() = 0;
  virtual int64_t WallMicros() = 0;
};

// The functions above, as a Clock.
class SystemClock final : public Clock {
 public:
  int64_t MonotonicMicros() override { return base::MonotonicMicros(); }
  int64_t WallMicros() override { return base::WallMicros(); }
};

// A clock that moves only when told (tests, benchmarks of a core): its wall
// time is a fixed date plus its monotonic time.
class ManualClock final : public Clock {
 public:
  static constexpr int64_t kWallOrigin = 1'700'000'000'000'000;
  int64_t MonotonicMicros() override { return now_us; }
  int64_t WallMicros() override { return kWallOrigin + now_us; }
  void AdvanceMicros(int64_t us) { now_us += us; }
  void AdvanceSeconds(double seconds) { now_us += static_cast<int64_t>(seconds * 1e6); }
  int64_t now_us = 1'000'000;
};

// A point on the monotonic clock by which something must be done.
class Deadline {
 public:
  // `timeout` from now; a negative timeout never expires.
  explicit Deadline(std::chrono::microseconds timeout)
      : at_us_(timeout.count() < 0 ? kNever : MonotonicMicros() + timeout.count()) {}
  static Deadline AtMicros(int64_t at_us) { return Deadline(at_us); }
  static Deadline Never() { return Deadline(kNever); }

  bool expired() const { return at_us_ != kNever && MonotonicMicros() >= at_us_; }
  bool never() const { return at_us_ == kNever; }
  int64_t at_us() const { return at_us_; }
  // What is left, at least 0; a large value when it never expires.
  std::chrono::milliseconds remaining() const {
    if (at_us_ == kNever) return std::chrono::hours(24);
    const int64_t left = at_us_ - MonotonicMicros();
    return std::chrono::milliseconds(left <= 0 ? 0 : (left + 999) / 1000);
  }

 private:
  static constexpr int64_t kNever = INT64_MAX;
  explicit Deadline(int64_t at_us) : at_us_(at_us) {}
  int64_t at_us_;
};

// Checks `condition` about every millisecond until it holds or `timeout`
// passes; returns whether it held. For waits on another process's state
// (a pid that exits, a file that appears), where nothing can be polled.
template <class F>
bool WaitUntil(F&& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const Deadline deadline(timeout);
  while (!condition()) {
    if (deadline.expired()) return false;
    struct timespec ts = {0, 1'000'000};
    nanosleep(&ts, nullptr);
  }
  return true;
}

}  // namespace ztask::base

#endif  // ZTASK_BASE_CLOCK_H_
