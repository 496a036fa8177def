// DepthGauge: the default HWM, learned per engine. With no --hwm, an engine
// holds more tasks than it runs only while what it runs finishes fast: the
// gauge measures, per engine life (slot), the time between the replies of a
// busy engine (its service time per task, its slots working in parallel
// included) and keeps enough queued there to cover kHideUs of work, the
// round trip a queue hides, and no more: fast tasks (no-ops) get a deep
// queue, as --hwm 64 gives; tasks of a few ms to kShortUs one task queued
// (a round trip per task would cost them a few percent); longer ones none,
// as --hwm 1, so that no task waits long behind another while an engine
// could run it.
//
// It also says when an engine is stuck: busy and silent for much longer
// than its tasks take (a long task at the head of its queue), so that what
// waits behind it may be taken back and given to an idle engine (the
// core's take-back rule, core.h).
//
// It owns timings only: no tasks, no engines' bookings, no clock (times are
// given). Thread safety: owned by the core's thread.
#ifndef ZTASK_SCHEDULER_DEPTH_GAUGE_H_
#define ZTASK_SCHEDULER_DEPTH_GAUGE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "scheduler/scheme.h"

namespace ztask::scheduler {

class DepthGauge {
 public:
  // Work kept queued on an engine beyond what it runs, in microseconds of
  // its measured service time: a round trip through a busy scheduler, and
  // the engine's batching of replies, with room to spare.
  static constexpr int64_t kHideUs = 5000;
  // Tasks taking longer than this (on average, on that engine) get no queue.
  static constexpr int64_t kShortUs = 50000;
  // The deepest queue: as --hwm 64.
  static constexpr uint32_t kMaxDepth = 63;
  // An engine silent this long while it holds queued tasks (and at least
  // kStuckFactor times its usual time per task) is stuck.
  static constexpr int64_t kStuckFloorUs = 10000;
  static constexpr int64_t kStuckFactor = 8;
  // Each measurement moves the mean by this fraction (1/16): replies come
  // in batches, so single gaps are noisy while their mean is not.
  static constexpr double kWeight = 1.0 / 16;

  // A new engine life: nothing known, no queue until it has answered.
  void Added(EngineSlot slot) {
    if (gauges_.size() <= slot) gauges_.resize(slot + 1);
    gauges_[slot] = Gauge{};
  }
  // A task went to the engine; `was_idle`: it held nothing before.
  void Dispatched(EngineSlot slot, bool was_idle, int64_t now_us) {
    Gauge& g = gauges_[slot];
    if (was_idle) g.busy_since_us = now_us;
  }
  // The engine answered a task it ran (not "not run"): one measurement.
  // Returns the depth it may hold now.
  uint32_t Finished(EngineSlot slot, int64_t now_us) {
    Gauge& g = gauges_[slot];
    if (QuietSince(g) == 0) {  // never seen busy: nothing to measure from
      g.last_finish_us = now_us;
      return g.depth;
    }
    const double gap = static_cast<double>(std::max<int64_t>(1, now_us - QuietSince(g)));
    g.mean_us = g.measured ? g.mean_us + (gap - g.mean_us) * kWeight : gap;
    g.measured = true;
    g.last_finish_us = now_us;
    g.stalled = false;
    g.depth = g.mean_us > kShortUs ? 0
                                   : static_cast<uint32_t>(std::min<double>(
                                         kMaxDepth, std::ceil(kHideUs / g.mean_us)));
    return g.depth;
  }
  // What waited on the engine was taken back: it holds no queue until it
  // answers again.
  void Stalled(EngineSlot slot) {
    gauges_[slot].stalled = true;
    gauges_[slot].depth = 0;
  }
  // Busy with queued tasks and silent far longer than its tasks take.
  // REQUIRES: the engine holds tasks (the caller's to know).
  bool Stuck(EngineSlot slot, int64_t now_us) const {
    const Gauge& g = gauges_[slot];
    if (g.stalled) return false;  // taken back from already
    const int64_t usual = g.measured ? static_cast<int64_t>(g.mean_us) * kStuckFactor : 0;
    return now_us - QuietSince(g) > std::max(kStuckFloorUs, usual);
  }
  uint32_t depth(EngineSlot slot) const { return slot < gauges_.size() ? gauges_[slot].depth : 0; }
  // The measured time per task, 0 before the first answer.
  int64_t mean_us(EngineSlot slot) const {
    return slot < gauges_.size() ? static_cast<int64_t>(gauges_[slot].mean_us) : 0;
  }

 private:
  struct Gauge {
    int64_t busy_since_us = 0;   // when it last went from idle to busy
    int64_t last_finish_us = 0;  // its latest answer
    double mean_us = 0;
    uint32_t depth = 0;
    bool measured = false;
    bool stalled = false;
  };
  // Since when a busy engine has answered nothing.
  static int64_t QuietSince(const Gauge& g) { return std::max(g.busy_since_us, g.last_finish_us); }

  std::vector<Gauge> gauges_;  // by slot
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_DEPTH_GAUGE_H_
