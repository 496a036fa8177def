// usage: core_bench [--benchmark_filter=REGEX]
//
// The scheduler core alone (no sockets): the cost of one task's whole life
// (submit, dispatch, finish) for each scheme and pool size, with every engine
// kept busy at HWM 1 so each choice is made among a full index; and the
// dependency bookkeeping of a chain and of a fan-in.
#include <benchmark/benchmark.h>

#include "scheduler/core.h"

namespace ztask::scheduler {
namespace {

struct ZeroClock final : Clock {
  int64_t NowMicros() override { return 0; }
};

TaskId Id(uint64_t n) { return TaskId{0x5eed, n}; }

// One task per iteration through a pool of `engines`, each with room for
// one more: a finish frees one slot and the next submission takes a slot.
void BM_TaskLife(benchmark::State& state, const char* scheme) {
  const auto engines = static_cast<int32_t>(state.range(0));
  ZeroClock clock;
  SchedulerCore core(CoreOptions{2}, MakeScheme(scheme, 1), &clock);
  std::vector<EngineSlot> slots;
  for (int32_t e = 0; e < engines; ++e) slots.push_back(core.EngineAdded(e));
  std::vector<Action> actions;
  uint64_t n = 0;
  // Keep every engine at load 1, so the index holds all of them.
  for (int32_t e = 0; e < engines; ++e) {
    Submission s;
    s.id = Id(++n);
    (void)core.Submit(s);
  }
  core.TakeActions(&actions);
  std::vector<std::pair<EngineSlot, TaskId>> running;
  for (const auto& a : actions) running.emplace_back(a.slot, a.task);
  size_t next = 0;
  for (auto _ : state) {
    Submission s;
    s.id = Id(++n);
    (void)core.Submit(s);
    core.TakeActions(&actions);
    auto [slot, task] = running[next];
    core.TaskFinished(slot, task, true, ErrorType::kNone);
    running[next] = {actions[0].slot, actions[0].task};
    next = (next + 1) % running.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["engines"] = static_cast<double>(engines);
}

BENCHMARK_CAPTURE(BM_TaskLife, leastload, "leastload")->Arg(2)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK_CAPTURE(BM_TaskLife, lru, "lru")->Arg(2)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK_CAPTURE(BM_TaskLife, twobin, "twobin")->Arg(2)->Arg(1000)->Arg(10000);
BENCHMARK_CAPTURE(BM_TaskLife, weighted, "weighted")->Arg(2)->Arg(1000)->Arg(10000);
BENCHMARK_CAPTURE(BM_TaskLife, random, "random")->Arg(2)->Arg(1000)->Arg(10000);

// A chain of N tasks, each after the previous, run to the end on 2 engines.
void BM_Chain(benchmark::State& state) {
  const auto length = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    ZeroClock clock;
    SchedulerCore core(CoreOptions{1}, MakeScheme("leastload", 1), &clock);
    core.EngineAdded(0);
    core.EngineAdded(1);
    for (uint64_t i = 1; i <= length; ++i) {
      Submission s;
      s.id = Id(i);
      if (i > 1) s.after.ids = {Id(i - 1)};
      (void)core.Submit(s);
    }
    std::vector<Action> actions;
    core.TakeActions(&actions);
    while (!actions.empty()) {
      const Action a = actions.back();
      core.TaskFinished(a.slot, a.task, true, ErrorType::kNone);
      core.TakeActions(&actions);
      std::erase_if(actions, [](const Action& x) { return x.kind != Action::Kind::kDispatch; });
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(length));
}
BENCHMARK(BM_Chain)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

// N independent tasks and one after all of them, on HWM 0 (all dispatched).
void BM_FanIn(benchmark::State& state) {
  const auto width = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    ZeroClock clock;
    SchedulerCore core(CoreOptions{0}, MakeScheme("leastload", 1), &clock);
    const EngineSlot slot = core.EngineAdded(0);
    Submission join;
    join.id = Id(width + 1);
    for (uint64_t i = 1; i <= width; ++i) {
      Submission s;
      s.id = Id(i);
      (void)core.Submit(s);
      join.after.ids.push_back(s.id);
    }
    (void)core.Submit(join);
    for (uint64_t i = 1; i <= width; ++i) core.TaskFinished(slot, Id(i), true, ErrorType::kNone);
    std::vector<Action> actions;
    core.TakeActions(&actions);
    benchmark::DoNotOptimize(actions.size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(width));
}
BENCHMARK(BM_FanIn)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ztask::scheduler

BENCHMARK_MAIN();
