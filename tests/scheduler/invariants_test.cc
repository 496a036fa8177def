// Random event sequences against the core, checking the invariants every
// rule rests on: each task gets exactly one final action; no task is
// dispatched before its `after` dependencies ended as required; an engine
// never holds more than HWM tasks; nothing is left behind.
#include <random>
#include <set>

#include "tests/scheduler/core_fixture.h"

namespace ztask::scheduler {
namespace {

class Invariants : public CoreTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(Invariants, RandomWorkloadKeepsEveryRule) {
  const uint64_t seed = GetParam();
  std::mt19937_64 rng(seed);
  const std::string scheme = SchemeNames()[seed % SchemeNames().size()];
  const uint32_t hwm = static_cast<uint32_t>(seed % 3);  // 0, 1 or 2
  Make(hwm, scheme);
  SCOPED_TRACE("seed " + std::to_string(seed) + " scheme " + scheme);

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
      if (!deps.empty()) {
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
      if (!running.empty()) {
        uint64_t n = running[rng() % running.size()];
        FinishOn(running_on_[n], n, rng() % 4 != 0);
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
    for (const auto& [n, e] : std::map<uint64_t, int32_t>(running_on_)) {
      if (!finals_.count(n) && FinishOn(e, n, true) == SchedulerCore::Finish::kAccepted) {
        progressed = true;
      }
    }
    ASSERT_TRUE(progressed || core().live_tasks() == 0)
        << core().live_tasks() << " tasks are stuck with every engine idle";
  }
  ASSERT_EQ(core().live_tasks(), 0u);
  for (uint64_t n = 1; n < next_task; ++n) ASSERT_EQ(FinalCount(n), 1) << "task " << n;

  // No task was dispatched before its after-dependencies had a final action.
  std::map<uint64_t, size_t> final_at, first_dispatch_at;
  for (size_t i = 0; i < log_.size(); ++i) {
    const Action& a = log_[i];
    const uint64_t n = a.task.lo;
    if ((a.kind == Action::Kind::kDeliver || a.kind == Action::Kind::kFail) && !final_at.count(n)) {
      final_at[n] = i;
    }
    if (a.kind == Action::Kind::kDispatch && !first_dispatch_at.count(n)) {
      first_dispatch_at[n] = i;
    }
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

INSTANTIATE_TEST_SUITE_P(Seeds, Invariants, ::testing::Range<uint64_t>(1, 21));

}  // namespace
}  // namespace ztask::scheduler
