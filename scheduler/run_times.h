// RunTimes: how long each engine's tasks run, as the engines measure them
// (ReplyMeta::run_us), and the pack that follows for leastload: how many
// of an engine's tasks count as one unit of its load.
//
// A message to an engine and its answer cost tens of microseconds of CPU
// on each side, whatever they carry. Tasks that run in a few microseconds
// (no-ops, lookups, tiny functions) cost far more to send one by one than
// to run: given to 10,000 idle engines one each, every task travels alone.
// So leastload counts an engine's load in packs of about kPackUs of its
// work: tasks it runs in much less than that share one unit, and a pack
// open to the tasks that came with its first is filled before an idle
// engine is given one. Such a task waits behind at most a pack's worth of
// work (~kPackUs, less than one round trip) when the tasks are as short
// as those measured; tasks as long as kPackUs or longer, or of unknown
// length, count one each: leastload as it always was.
//
// Engines not heard from yet take the pool's estimate (the latest measure
// of any engine), so a pool of fresh engines packs as soon as one answers;
// an engine whose replies do not say counts one a task. Only tasks that
// succeeded are measured (a failure may end early). A pack is open only to
// tasks that come together, in the turn that began it (SchedulerCore::
// EndTurn): later tasks count it as a whole pack however little it holds,
// so a task that comes alone goes to an idle engine, not behind a long one.
//
// Timings only: no tasks, no bookings, no clock. Thread safety: owned by
// the core's thread.
#ifndef ZTASK_SCHEDULER_RUN_TIMES_H_
#define ZTASK_SCHEDULER_RUN_TIMES_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "scheduler/scheme.h"

namespace ztask::scheduler {

class RunTimes {
 public:
  // The work one unit of load stands for.
  static constexpr int64_t kPackUs = 100;
  // The largest pack (as --hwm 64 queues).
  static constexpr uint32_t kMaxPack = 64;
  // Each measure moves an engine's mean by this fraction (1/8).
  static constexpr double kWeight = 1.0 / 8;

  // A new engine life: nothing measured on it.
  void Added(EngineSlot slot) {
    if (engines_.size() <= slot) engines_.resize(slot + 1);
    engines_[slot] = Mean{};
  }
  // The engine ran a task well, for `run_us` by its own measure, or did not
  // say (negative: an engine that does not measure counts one a task).
  // Returns its pack.
  uint32_t Ran(EngineSlot slot, int64_t run_us) {
    Mean& m = engines_[slot];
    m.silent = run_us < 0;
    if (m.silent) return 1;
    const auto us = static_cast<double>(run_us);
    m.us = m.measured ? m.us + (us - m.us) * kWeight : us;
    m.measured = true;
    pool_ = m;
    return PackFor(m.us);
  }
  // The engine's pack now: 1 for one that does not say, else its own
  // measure's, else the pool's (an engine not heard from yet), else 1.
  uint32_t PackOf(EngineSlot slot) const {
    if (slot >= engines_.size()) return 1;
    const Mean& own = engines_[slot];
    if (own.silent) return 1;
    const Mean& m = own.measured ? own : pool_;
    return m.measured ? PackFor(m.us) : 1;
  }

  static uint32_t PackFor(double mean_us) {
    if (mean_us >= static_cast<double>(kPackUs)) return 1;
    return static_cast<uint32_t>(
        std::min<double>(kMaxPack, static_cast<double>(kPackUs) / std::max(1.0, mean_us)));
  }

 private:
  struct Mean {
    double us = 0;
    bool measured = false;
    bool silent = false;  // its latest reply did not say
  };
  std::vector<Mean> engines_;  // by slot
  Mean pool_;                  // the latest engine's
};

}  // namespace ztask::scheduler

#endif  // ZTASK_SCHEDULER_RUN_TIMES_H_
