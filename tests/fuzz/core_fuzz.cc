// Fuzz target for the scheduler core: the input is decoded, three bytes at a
// time, into a sequence of events (submissions with dependencies, engines
// coming, going and draining, replies, late and unknown replies, aborts,
// clock ticks) and the core's invariants are checked after them:
//   - every submitted task gets exactly one final action (none lost);
//   - no task is dispatched before its `after` dependencies allow it;
//   - no engine holds more than HWM tasks;
//   - once every engine is back and every running task has answered, nothing
//     is left in the core.
// A broken invariant traps, so libFuzzer (and the replay test) report it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "scheduler/core.h"
#include "scheduler/scheme.h"

namespace ztask::scheduler::fuzz {
namespace {

using FakeClock = base::ManualClock;

// Names the broken invariant's line on stderr, then traps.
#define Check(holds)                                                           \
  do {                                                                         \
    if (!(holds)) {                                                            \
      std::fprintf(stderr, "core_fuzz.cc:%d: broken: %s\n", __LINE__, #holds); \
      __builtin_trap();                                                        \
    }                                                                          \
  } while (0)

TaskId IdOf(uint64_t n) { return TaskId{0, n}; }

class Run {
 public:
  explicit Run(uint8_t config)
      : hwm_(config % 4 == 3 ? kAdaptiveHwm : config % 4),
        core_(CoreOptions{hwm_}, MakeScheme(SchemeNames()[(config / 3) % SchemeNames().size()], 7),
              &clock_) {}

  void Event(uint8_t op, uint8_t a, uint8_t b) {
    switch (op % 10) {
      case 0:
      case 1:
      case 2:
        return Submit(a, b);
      case 3:
      case 4:
        return Finish(a, b);
      case 5:
        return AddEngine();
      case 6:
        return RemoveEngine(a);
      case 7:
        return Drain(a);
      case 8:
        clock_.now_us += 100'000 * (1 + a % 8);
        core_.Tick();
        return Collect();
      default:
        return Odd(a, b);
    }
  }

  // Brings every engine back and lets every running task finish; then every
  // task must have ended exactly once, in an order its rules allow.
  void Finish() {
    for (int round = 0; round < 100000 && core_.live_tasks() > 0; ++round) {
      // Engines that left (removed or retired) come back: tasks targeted at
      // them wait for them.
      bool progressed = !gone_.empty();
      for (int32_t id : std::vector<int32_t>(std::move(gone_))) AddEngineWithId(id);
      gone_.clear();
      for (const auto& [n, where] : std::map<uint64_t, Where>(running_)) {
        if (core_.TaskFinished(where.slot, IdOf(n), true, ErrorType::kNone) ==
            SchedulerCore::Finish::kAccepted) {
          progressed = true;
        }
        Collect();
      }
      if (!progressed) break;
    }
    Check(core_.live_tasks() == 0);
    for (uint64_t n = 1; n < next_task_; ++n) Check(finals_[n] == 1);
    for (const auto& [n, deps] : after_) {
      auto dispatched = first_dispatch_.find(n);
      if (dispatched == first_dispatch_.end()) continue;
      size_t ended_before = 0;
      for (uint64_t d : deps.ids) {
        auto ended = final_at_.find(d);
        if (ended != final_at_.end() && ended->second < dispatched->second) ++ended_before;
      }
      Check(deps.all ? ended_before == deps.ids.size() : ended_before > 0);
    }
  }

 private:
  struct Where {
    EngineSlot slot;
    int32_t engine;
  };
  // Engines differ: 1 to 3 slots, and two gpus on every other one.
  static Amounts CapacityOf(int32_t engine) {
    Amounts a{1 + engine % 3, {}};
    if (engine % 2) a.resources["gpus"] = 2;
    return a;
  }
  struct Deps {
    std::set<uint64_t> ids;
    bool all;
  };

  void Submit(uint8_t a, uint8_t b) {
    Submission s;
    const uint64_t n = next_task_++;
    s.id = IdOf(n);
    std::set<uint64_t> deps;
    for (int k = 0; k < (a & 3) && n > 1; ++k)
      deps.insert(1 + (a * 31u + b * 7u + k * 13u) % (n - 1));
    if (!deps.empty()) {
      const bool all = !(b & 1);
      s.after = {{},
                 all ? DependencyMode::kAll : DependencyMode::kAny,
                 static_cast<AcceptedOutcome>((b >> 1) % 3)};
      for (uint64_t d : deps) s.after.ids.push_back(IdOf(d));
      after_[n] = {deps, all};
    }
    if (b & 8 && n > 1)
      s.follow = {{IdOf(1 + b % (n - 1))}, DependencyMode::kAll, AcceptedOutcome::kEither};
    if (b & 16) s.retries = b % 3;
    if (b & 32) s.timeout_s = 0.1 * (1 + a % 5);
    if (b & 64 && !alive_.empty()) s.targets = {alive_[a % alive_.size()].engine};
    if ((b & 128) && (a & 64)) s.after.ids.push_back(IdOf(n));  // on itself: invalid
    s.priority = static_cast<int32_t>(a % 3);
    if (a & 128) s.needs.slots = 1 + b % 3;
    if ((a & 32) && (b & 4)) s.needs.resources["gpus"] = 1 + (a & 1);
    needs_[n] = s.needs;
    Check(core_.Submit(s));
    Check(!core_.Submit(s));  // a duplicate changes nothing
    Collect();
  }

  void Finish(uint8_t a, uint8_t b) {
    if (running_.empty()) return;
    auto it = running_.begin();
    std::advance(it, a % running_.size());
    const Where where = it->second;
    if (b % 8 == 5) {  // cannot run there: another engine, or ImpossibleDependency
      Check(core_.TaskUnmet(where.slot, IdOf(it->first), "fuzzed") ==
            SchedulerCore::Finish::kAccepted);
      Collect();
      return;
    }
    Check(core_.TaskFinished(where.slot, IdOf(it->first), b % 4 != 0,
                             b % 4 != 0 ? ErrorType::kNone : ErrorType::kTaskFailed) ==
          SchedulerCore::Finish::kAccepted);
    Collect();
  }

  void AddEngine() {
    if (alive_.size() < 16) AddEngineWithId(next_engine_++);
  }

  void AddEngineWithId(int32_t id) {
    alive_.push_back({core_.EngineAdded(id, true, CapacityOf(id)), id});
    Collect();
  }

  void RemoveEngine(uint8_t a) {
    if (alive_.empty()) return;
    const size_t k = a % alive_.size();
    core_.EngineRemoved(alive_[k].slot);
    for (auto it = running_.begin(); it != running_.end();) {
      it = it->second.slot == alive_[k].slot ? running_.erase(it) : std::next(it);
    }
    gone_.push_back(alive_[k].engine);
    alive_.erase(alive_.begin() + static_cast<std::ptrdiff_t>(k));
    Collect();
  }

  void Drain(uint8_t a) {
    if (alive_.empty()) return;
    core_.EngineDraining(alive_[a % alive_.size()].slot);
    Collect();
  }

  // Replies that must change nothing, and aborts.
  void Odd(uint8_t a, uint8_t b) {
    if (b % 3 == 0) {
      (void)core_.Abort({IdOf(1 + a % next_task_)});
    } else if (!alive_.empty()) {
      const Where where = alive_[a % alive_.size()];
      const uint64_t n = b % 2 ? 1'000'000 + a : 1 + a % next_task_;
      auto running = running_.find(n);
      if (running == running_.end() || running->second.slot != where.slot) {
        Check(core_.TaskFinished(where.slot, IdOf(n), true, ErrorType::kNone) ==
              SchedulerCore::Finish::kLate);
      }
    }
    Collect();
  }

  void Apply(const Action& a) {
    const uint64_t n = a.task.lo;
    ++step_;
    switch (a.kind) {
      case Action::Kind::kDispatch:
        Check(!running_.count(n));
        running_[n] = {a.slot, a.engine_id};
        first_dispatch_.emplace(n, step_);
        break;
      case Action::Kind::kDeliver:
      case Action::Kind::kFail:
        running_.erase(n);
        ++finals_[n];
        final_at_.emplace(n, step_);
        break;
      case Action::Kind::kRetry:
      case Action::Kind::kReturned:
      case Action::Kind::kUnmet:
        running_.erase(n);
        break;
      case Action::Kind::kTakeBack:
        // The engine had started the odd ones; the even ones it gives back.
        if (n % 2 == 0) {
          Check(core_.TaskNotRun(a.slot, a.task) == SchedulerCore::Finish::kAccepted);
        }
        break;
      case Action::Kind::kRetire: {
        // The engine goes, as a retired engine unregisters.
        auto it = std::find_if(alive_.begin(), alive_.end(),
                               [&](const Where& w) { return w.slot == a.slot; });
        if (it != alive_.end()) {
          core_.EngineRemoved(it->slot);
          gone_.push_back(it->engine);
          alive_.erase(it);
        }
        break;
      }
    }
  }

  // Takes the core's actions, as the server does, until there are none: a
  // retired engine's removal may itself produce more.
  void Collect() {
    while (true) {
      core_.TakeActions(&actions_);
      if (actions_.empty()) break;
      std::vector<Action> batch;
      batch.swap(actions_);
      for (const Action& a : batch) Apply(a);
    }
    // No engine holds more slots than it has plus HWM-1 waiting, nor more
    // gpus than it has.
    std::map<EngineSlot, int64_t> gpus;
    for (const auto& [n, where] : running_) {
      auto g = needs_[n].resources.find("gpus");
      if (g != needs_[n].resources.end()) gpus[where.slot] += g->second;
    }
    for (const Where& w : alive_) {
      const Amounts cap = CapacityOf(w.engine);
      const uint32_t hwm = hwm_ == kAdaptiveHwm ? DepthGauge::kMaxDepth + 1 : hwm_;
      if (hwm > 0) Check(core_.LoadOf(w.slot) <= static_cast<uint32_t>(cap.slots) + hwm - 1);
      auto g = cap.resources.find("gpus");
      Check(gpus[w.slot] <= (g == cap.resources.end() ? 0 : g->second));
    }
  }

  uint32_t hwm_;
  FakeClock clock_;
  SchedulerCore core_;
  std::vector<Action> actions_;
  std::vector<Where> alive_;
  std::vector<int32_t> gone_;
  std::map<uint64_t, Where> running_;
  std::map<uint64_t, int> finals_;
  std::map<uint64_t, size_t> first_dispatch_, final_at_;
  std::map<uint64_t, Deps> after_;
  std::map<uint64_t, Amounts> needs_;
  uint64_t next_task_ = 1;
  int32_t next_engine_ = 1;
  size_t step_ = 0;
};

int FuzzOne(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Run run(data[0]);
  run.Event(5, 0, 0);  // one engine to start with
  for (size_t i = 1; i + 3 <= size && i < 3 * 2000; i += 3) {
    run.Event(data[i], data[i + 1], data[i + 2]);
  }
  run.Finish();
  return 0;
}

}  // namespace
}  // namespace ztask::scheduler::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ztask::scheduler::fuzz::FuzzOne(data, size);
}
