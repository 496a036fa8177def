// usage: core_bench [--benchmark_filter=REGEX]
//
// The scheduler core alone (no sockets): the cost of one task's whole life
// (submit, dispatch, finish) for each scheme and pool size, with every engine
// kept busy at HWM 1 so each choice is made among a full index; the
// dependency bookkeeping on graph shapes (chain, fan-out, fan-in, binary
// tree, wavefront, random DAG) from 10^3 to 10^6 tasks; and the heap bytes
// the core holds per waiting and per finished task, 10^6 of them queued at
// once and run to the end; a GPU task's life with thousands waiting for the
// GPU. The codec's costs are in codec_bench.cc.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdlib>
#include <memory>

#include "scheduler/core.h"

namespace ztask::scheduler {
namespace {

// Time stands still: the core's work alone is measured.
using ZeroClock = base::ManualClock;

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

// One GPU task finishing and the next starting, with `waiting` more asking
// a GPU behind them (a sweep on engines with slots and resources): the
// placement round must not walk the tasks that cannot go.
void BM_GpuTaskLife(benchmark::State& state) {
  const auto waiting = static_cast<uint64_t>(state.range(0));
  ZeroClock clock;
  SchedulerCore core(CoreOptions{}, MakeScheme("leastload", 1), &clock);
  const EngineSlot slot = core.EngineAdded(0, true, Amounts{4, {{"gpus", 1}}});
  uint64_t n = 0;
  auto submit = [&] {
    Submission s;
    s.id = Id(++n);
    s.needs.resources["gpus"] = 1;
    (void)core.Submit(s);
  };
  for (uint64_t i = 0; i <= waiting; ++i) submit();
  std::vector<Action> actions;
  core.TakeActions(&actions);
  TaskId running = actions.at(0).task;
  for (auto _ : state) {
    submit();
    core.TaskFinished(slot, running, true, ErrorType::kNone);
    core.TakeActions(&actions);
    running = actions.at(1).task;  // deliver, then the next dispatch
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["waiting"] = static_cast<double>(waiting);
}
BENCHMARK(BM_GpuTaskLife)->Arg(10)->Arg(10000)->Arg(100000);

// ---- dependency bookkeeping on graph shapes --------------------------------

enum class Shape { kChain, kFanOut, kFanIn, kBinaryTree, kWavefront, kRandomDag };

// Each task's `after` list, by index; every dependency comes earlier.
std::vector<std::vector<uint64_t>> Build(Shape shape, uint64_t n) {
  std::vector<std::vector<uint64_t>> after(n);
  switch (shape) {
    case Shape::kChain:
      for (uint64_t i = 1; i < n; ++i) after[i] = {i - 1};
      break;
    case Shape::kFanOut:
      for (uint64_t i = 1; i < n; ++i) after[i] = {0};
      break;
    case Shape::kFanIn:
      for (uint64_t i = 0; i + 1 < n; ++i) after[n - 1].push_back(i);
      break;
    case Shape::kBinaryTree:
      // A reduction: node k of a heap (root 0) waits for 2k+1 and 2k+2;
      // submitted leaves first, so index i is heap node n-1-i.
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t k = n - 1 - i;
        for (uint64_t c : {2 * k + 1, 2 * k + 2}) {
          if (c < n) after[i].push_back(n - 1 - c);
        }
      }
      break;
    case Shape::kWavefront: {
      // A square grid: each cell after its left and upper neighbours.
      uint64_t side = 1;
      while ((side + 1) * (side + 1) <= n) ++side;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t row = i / side, col = i % side;
        if (col > 0) after[i].push_back(i - 1);
        if (row > 0) after[i].push_back(i - side);
      }
      break;
    }
    case Shape::kRandomDag: {
      uint64_t x = 88172645463325252ull;
      for (uint64_t i = 1; i < n; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        for (uint64_t k = x % 4; k > 0; --k) after[i].push_back((x >> (8 * k)) % i);
      }
      break;
    }
  }
  return after;
}

// Submits the whole graph, then runs it to the end on 2 engines at HWM 1.
void RunGraph(const std::vector<std::vector<uint64_t>>& after) {
  ZeroClock clock;
  SchedulerCore core(CoreOptions{1}, MakeScheme("leastload", 1), &clock);
  core.EngineAdded(0);
  core.EngineAdded(1);
  Submission s;
  for (uint64_t i = 0; i < after.size(); ++i) {
    s.id = Id(i + 1);
    s.after.ids.clear();
    for (uint64_t d : after[i]) s.after.ids.push_back(Id(d + 1));
    (void)core.Submit(s);
  }
  std::vector<Action> actions, running;
  core.TakeActions(&actions);
  while (true) {
    for (const Action& a : actions) {
      if (a.kind == Action::Kind::kDispatch) running.push_back(a);
    }
    if (running.empty()) break;
    const Action a = running.back();
    running.pop_back();
    core.TaskFinished(a.slot, a.task, true, ErrorType::kNone);
    core.TakeActions(&actions);
  }
  if (core.live_tasks() != 0) std::abort();
}

void BM_Shape(benchmark::State& state, Shape shape) {
  const auto n = static_cast<uint64_t>(state.range(0));
  const auto after = Build(shape, n);
  for (auto _ : state) RunGraph(after);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

#define ZTASK_SHAPE(name, shape)                                                      \
  BENCHMARK_CAPTURE(BM_Shape, name, shape)                                            \
      ->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond)
ZTASK_SHAPE(chain, Shape::kChain);
ZTASK_SHAPE(fan_out, Shape::kFanOut);
ZTASK_SHAPE(fan_in, Shape::kFanIn);
ZTASK_SHAPE(binary_tree, Shape::kBinaryTree);
ZTASK_SHAPE(wavefront, Shape::kWavefront);
ZTASK_SHAPE(random_dag, Shape::kRandomDag);
#undef ZTASK_SHAPE

// ---- memory ----------------------------------------------------------------

size_t HeapInUse() { return mallinfo2().uordblks; }

// Bytes the core holds per waiting task (each after one task that never
// runs, as tasks wait behind a long job), and per finished task (what it
// keeps so that later tasks may depend on it).
void BM_Memory(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  double waiting = 0, finished = 0;
  for (auto _ : state) {
    ZeroClock clock;
    const size_t base = HeapInUse();
    auto core = std::make_unique<SchedulerCore>(CoreOptions{1}, MakeScheme("leastload", 1),
                                                &clock);
    const EngineSlot slot = core->EngineAdded(0);
    Submission s;
    s.id = Id(1);
    (void)core->Submit(s);  // runs, and never finishes while the others wait
    const size_t before = HeapInUse();
    for (uint64_t i = 2; i <= n + 1; ++i) {
      s.id = Id(i);
      s.after.ids = {Id(1)};
      (void)core->Submit(s);
    }
    std::vector<Action> actions;
    core->TakeActions(&actions);
    actions.shrink_to_fit();
    waiting = static_cast<double>(HeapInUse() - before) / static_cast<double>(n);
    // Now all of them run and finish, one at a time.
    core->TaskFinished(slot, Id(1), true, ErrorType::kNone);
    for (uint64_t i = 2; i <= n + 1; ++i) {
      core->TaskFinished(slot, Id(i), true, ErrorType::kNone);
      if (i % 4096 == 0) core->TakeActions(&actions);
    }
    core->TakeActions(&actions);
    actions = {};
    if (core->live_tasks() != 0) state.SkipWithError("tasks left");
    finished = static_cast<double>(HeapInUse() - base) / static_cast<double>(n + 1);
  }
  state.counters["bytes_per_waiting_task"] = waiting;
  state.counters["bytes_per_finished_task"] = finished;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memory)->Arg(100000)->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ztask::scheduler

BENCHMARK_MAIN();
