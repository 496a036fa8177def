// Random event sequences against the core, checking the invariants every
// rule rests on: each task gets exactly one final action; no task is
// dispatched before its `after` dependencies ended as required; an engine
// never holds more than HWM tasks; nothing is left behind. With sending
// ahead, the fake engines run their tasks in the order sent, as real ones
// do, and answer "not run" where a real one would: then no task *runs*
// before its dependencies ended as required.
#include <random>
#include <set>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Invariants : public CoreTest, public ::testing::WithParamInterface<uint64_t> {
 protected:
  // Finishes task n on its engine as a real engine would: a task sent ahead
  // runs only after the task it was sent behind ended there, and only if
  // that succeeded; otherwise it is answered "not run". Returns false when
  // it cannot run yet (what it was sent behind is still running there).
  bool RunOnEngine(uint64_t n, bool success) {
    const Action& sent = dispatch_of_.at(n);
    if (!sent.run_after.IsZero()) {
      const uint64_t before = sent.run_after.lo;
      auto it = outcome_on_.find({sent.engine_id, before});
      if (it == outcome_on_.end()) return false;
      if (!it->second) {
        if (NotRun(n) == SchedulerCore::Finish::kAccepted) outcome_on_[{sent.engine_id, n}] = false;
        return true;
      }
    }
    ran_at_[n] = log_.size();
    if (FinishOn(sent.engine_id, n, success) == SchedulerCore::Finish::kAccepted) {
      outcome_on_[{sent.engine_id, n}] = success;
    }
    return true;
  }
  // Since the last call: the latest dispatch of every task.
  void NoteDispatches() {
    for (; noted_ < log_.size(); ++noted_) {
      if (log_[noted_].kind == Action::Kind::kDispatch) {
        dispatch_of_[log_[noted_].task.lo] = log_[noted_];
        outcome_on_.erase({log_[noted_].engine_id, log_[noted_].task.lo});
      }
    }
  }
  std::map<uint64_t, Action> dispatch_of_;
  std::map<std::pair<int32_t, uint64_t>, bool> outcome_on_;  // (engine, task): succeeded
  std::map<uint64_t, size_t> ran_at_;                        // log index of its last run
  size_t noted_ = 0;
};

TEST_P(Invariants, RandomWorkloadKeepsEveryRule) {
  const uint64_t seed = GetParam();
  std::mt19937_64 rng(seed);
  const std::string scheme = SchemeNames()[seed % SchemeNames().size()];
  const uint32_t hwm = static_cast<uint32_t>(seed % 3);  // 0, 1 or 2
  const bool send_ahead = seed % 2 == 0;
  Make(hwm, scheme, send_ahead);
  SCOPED_TRACE("seed " + std::to_string(seed) + " scheme " + scheme +
               (send_ahead ? ", sending ahead" : ""));

  int32_t next_engine = 1;
  std::vector<int32_t> alive;
  std::vector<int32_t> removed;
  std::map<uint64_t, std::pair<std::vector<uint64_t>, DependencyMode>> after_of;
  uint64_t next_task = 1;
  auto add_engine = [&] {
    AddEngine(next_engine);
    alive.push_back(next_engine++);
  };
  add_engine();

  for (int step = 0; step < 3000; ++step) {
    const int dice = static_cast<int>(rng() % 100);
    if (dice < 45) {
      TaskSpec spec(next_task);
      std::vector<uint64_t> deps;
      for (int k = 0; k < 3 && next_task > 1; ++k) {
        if (rng() % 2) deps.push_back(1 + rng() % (next_task - 1));
      }
      if (send_ahead && next_task > 1 && rng() % 2) {  // chains: what goes ahead
        deps = {next_task - 1 - rng() % std::min<uint64_t>(next_task - 1, 3)};
        spec.After(deps);
        after_of[next_task] = {deps, DependencyMode::kAll};
      } else if (!deps.empty()) {
        const auto mode = rng() % 2 ? DependencyMode::kAll : DependencyMode::kAny;
        spec.After(deps, mode, static_cast<AcceptedOutcome>(rng() % 3));
        after_of[next_task] = {deps, mode};
      }
      if (rng() % 4 == 0) spec.Retries(static_cast<int32_t>(rng() % 3));
      if (rng() % 8 == 0) spec.Timeout(0.5 + static_cast<double>(rng() % 10) / 10);
      if (rng() % 10 == 0 && !alive.empty()) spec.Targets({alive[rng() % alive.size()]});
      Submit(spec);
      ++next_task;
    } else if (dice < 85) {
      // Finish something running.
      std::vector<uint64_t> running;
      for (const auto& [n, e] : running_on_) {
        if (!finals_.count(n) && std::count(alive.begin(), alive.end(), e)) running.push_back(n);
      }
      NoteDispatches();
      if (!running.empty()) {
        uint64_t n = running[rng() % running.size()];
        RunOnEngine(n, rng() % 4 != 0);
      }
    } else if (dice < 90) {
      add_engine();
    } else if (dice < 94 && alive.size() > 1) {
      size_t k = rng() % alive.size();
      RemoveEngine(alive[k]);
      removed.push_back(alive[k]);
      alive.erase(alive.begin() + static_cast<long>(k));
    } else if (dice < 97) {
      Tick(0.3);
    } else {
      Abort({1 + rng() % next_task});
    }
    for (int32_t e : alive) {
      if (hwm > 0) {
        ASSERT_LE(core().LoadOf(slots_[e]), hwm);
      }
    }
  }
  // Drain: engines that left come back (targeted tasks wait for them), then
  // every running task finishes until nothing is left.
  for (int32_t e : removed) {
    AddEngine(e);
    alive.push_back(e);
  }
  for (int round = 0; round < 100000 && core().live_tasks() > 0; ++round) {
    bool progressed = false;
    NoteDispatches();
    for (const auto& [n, e] : std::map<uint64_t, int32_t>(running_on_)) {
      if (finals_.count(n) || !core().Knows(Id(n))) continue;
      if (!std::count(alive.begin(), alive.end(), e)) continue;
      const size_t before = log_.size();
      if (RunOnEngine(n, true) && log_.size() > before) progressed = true;
      NoteDispatches();
    }
    ASSERT_TRUE(progressed || core().live_tasks() == 0)
        << core().live_tasks() << " tasks are stuck with every engine idle";
  }
  ASSERT_EQ(core().live_tasks(), 0u);
  for (uint64_t n = 1; n < next_task; ++n) ASSERT_EQ(FinalCount(n), 1) << "task " << n;

  // No task was dispatched (sent ahead: run) before its after-dependencies
  // had a final action.
  std::map<uint64_t, size_t> final_at, first_dispatch_at;
  for (size_t i = 0; i < log_.size(); ++i) {
    const Action& a = log_[i];
    const uint64_t n = a.task.lo;
    if ((a.kind == Action::Kind::kDeliver || a.kind == Action::Kind::kFail) && !final_at.count(n)) {
      final_at[n] = i;
    }
    if (a.kind == Action::Kind::kDispatch && a.run_after.IsZero() && !first_dispatch_at.count(n)) {
      first_dispatch_at[n] = i;
    }
  }
  for (const auto& [n, at] : ran_at_) {  // a run after a dispatch ahead
    if (!first_dispatch_at.count(n) || at < first_dispatch_at[n]) first_dispatch_at[n] = at;
  }
  for (const auto& [n, deps_mode] : after_of) {
    const auto& [deps, mode] = deps_mode;
    if (!first_dispatch_at.count(n)) continue;
    std::set<uint64_t> unique(deps.begin(), deps.end());
    size_t finished_deps = 0;
    for (uint64_t d : unique) {
      if (final_at.count(d) && final_at[d] < first_dispatch_at[n]) ++finished_deps;
    }
    if (mode == DependencyMode::kAll) {
      EXPECT_EQ(finished_deps, unique.size()) << "task " << n << " ran before all its deps";
    } else {
      EXPECT_GT(finished_deps, 0u) << "task " << n << " ran before any of its deps";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, Invariants, ::testing::Range<uint64_t>(1, 41));

}  // namespace
}  // namespace ztask::scheduler
