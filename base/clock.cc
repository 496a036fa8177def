// The one clock (base/clock.h).
#include "base/clock.h"

#include <algorithm>
#include <atomic>

namespace ztask::base {

int64_t MonotonicMicros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t WallMicros() {
  static std::atomic<int64_t> last{0};
  using namespace std::chrono;
  const int64_t now = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  int64_t prev = last.load(std::memory_order_relaxed);
  int64_t next;
  do {
    next = std::max(now, prev + 1);
  } while (!last.compare_exchange_weak(prev, next, std::memory_order_relaxed));
  return next;
}

}  // namespace ztask::base
