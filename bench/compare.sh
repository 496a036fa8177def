#!/usr/bin/env bash
# ztask beside the bare ZeroMQ floor, IPython Parallel and Dask, back to back
# on this machine, with the same number of engines for all. Installs what it
# needs (Debian's python3-ipyparallel and python3-distributed), builds
# ztask in Release, runs every system, and prints one table of figures and
# ratios, then, as its last line, one JSON object. Every process it starts
# it stops. Takes a few minutes on a 2-core machine (3 to 5 here).
#
# usage: bench/compare.sh [ENGINES]   (default 2)
# Environment: ZTASK_TASKS (200000), PEER_TASKS (2000), ZTASK_HWM (64),
# PYTHON_TASKS (20000: the Python client's workloads).
set -euo pipefail
cd "$(dirname "$0")/.."
engines="${1:-2}"
ztask_tasks="${ZTASK_TASKS:-200000}"
peer_tasks="${PEER_TASKS:-2000}"
python_tasks="${PYTHON_TASKS:-20000}"
hwm="${ZTASK_HWM:-64}"
scripts/install-deps.sh bench
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j2 --target e2e_bench core_bench taskcluster taskhub taskscheduler \
  taskcontroller taskengine taskdash >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bench=build-release/bin/e2e_bench
py=/usr/bin/python3  # Debian's, where the peers are installed

# run NAME COMMAND...: its last line (JSON) into $out/NAME.json. A run that
# fails (or prints no JSON) is run once more, and named in the table; one
# that fails twice stops everything, with the end of its stderr and output.
run() {
  local name=$1 try status
  shift
  for try in 1 2; do
    echo "== $name: $*" >&2
    status=0
    "$@" > "$out/$name.log" 2> "$out/$name.err" || status=$?
    if ((status == 0)); then
      grep -v '^ ' "$out/$name.log" | grep '^{' | tail -n 1 > "$out/$name.json" || true
      [[ -s "$out/$name.json" ]] && return 0
      echo "$name printed no JSON line (try $try of 2)" >&2
    else
      echo "$name failed with exit code $status (try $try of 2)" >&2
    fi
    echo "-- the end of its stderr:" >&2
    tail -n 20 -- "$out/$name.err" >&2 || true
    echo "-- the end of its output:" >&2
    tail -n 5 -- "$out/$name.log" >&2 || true
    echo "$name" >> "$out/retried"
  done
  echo "$name failed twice: stopping" >&2
  exit 1
}

# The main run three times (each with its own floor): the table shows medians.
# It runs the hub and the scheduler in one process (taskcontroller), as
# taskcluster does by default; each is followed by the same no-ops and round
# trips with the two in their own processes, for the ratio of the layouts.
for k in 1 2 3; do
  run "ztask_$k" "$bench" --label ztask --engines "$engines" --hwm "$hwm" --tasks "$ztask_tasks" \
    --latency 2000 --chain 10000 --fan-in 100000 --dag 20000 --relay
  run "ztask_separate_$k" "$bench" --label ztask_separate --layout separate \
    --engines "$engines" --hwm "$hwm" --tasks "$ztask_tasks" --latency 2000 --chain 10000
done
run ztask_hwm1 "$bench" --label ztask_hwm1 --engines "$engines" --hwm 1 \
  --tasks $((ztask_tasks / 4)) --latency 0 --chain 0
run ztask_memory "$bench" --label ztask_memory --engines "$engines" --hwm "$hwm" --db :memory: \
  --tasks "$ztask_tasks" --latency 0 --chain 0
# Every connection encrypted (CurveZMQ), as beyond loopback by default.
run ztask_curve "$bench" --label ztask_curve --engines "$engines" --hwm "$hwm" --curve \
  --tasks "$ztask_tasks" --latency 2000 --chain 0
# Durable through a power loss: the hub's commits and the scheduler's journal
# synced to disk, group-committed.
run ztask_power "$bench" --label ztask_power --engines "$engines" --hwm "$hwm" \
  --durability power --tasks "$ztask_tasks" --latency 2000 --chain 0
# Alone, so that no earlier workload's freed memory hides what it needs;
# the scheduler in a process of its own, so that its memory is its own.
run ztask_waiting "$bench" --label ztask_waiting --layout separate --engines "$engines" --hwm "$hwm" \
  --tasks 0 --latency 0 --chain 0 --waiting 300000
# A pool of 10,000 engines beside one of 2, both simulated (a connection
# each to the hub and the scheduler, in processes of 2,000): no-ops and a
# chain, the seconds to register them, the idle pool's CPU and memory.
# Five pairs, in turns: a chain takes a third of a second, and one run's
# ratio is this machine's noise as much as the pool's cost (three pairs
# gave medians from 0.83 to 0.97 on the same code).
for k in 1 2 3 4 5; do
  run "ztask_sim2_$k" "$bench" --label ztask_sim2 --simulated "$engines" --hwm "$hwm" \
    --tasks $((ztask_tasks / 2)) --latency 0 --chain 30000
  run "ztask_sim10000_$k" "$bench" --label ztask_sim10000 --simulated 10000 --hwm "$hwm" \
    --tasks $((ztask_tasks / 2)) --latency 0 --chain 30000
done
# The defaults (--hwm auto, what `taskcluster start` does with no flag)
# against fixed HWMs: no-ops, and three shapes of tasks that sleep.
run ztask_auto "$bench" --label ztask_auto --engines "$engines" --hwm auto \
  --tasks "$ztask_tasks" --latency 0 --chain 0
for shape in mixed spikes slowdown; do
  for h in auto 1 64; do
    run "shape_${shape}_$h" "$bench" --label "shape_${shape}_$h" --engines "$engines" --hwm "$h" \
      --tasks 0 --latency 0 --chain 0 --shape "$shape"
  done
done
run ipyparallel_hwm1 timeout 300 "$py" bench/peers/ipyparallel_bench.py --engines "$engines" \
  --hwm 1 --tasks "$peer_tasks" --latency 500 --chain 500
run ipyparallel_hwm "$py" bench/peers/ipyparallel_bench.py --engines "$engines" \
  --hwm "$hwm" --tasks "$peer_tasks" --latency 0 --chain 0
# The Python client: the peers' Python no-op, and the engines' noop by name.
run ztask_python timeout 600 "$py" bench/peers/ztask_python_bench.py --bin build-release/bin \
  --engines "$engines" --hwm "$hwm" --tasks "$python_tasks" --latency 1000
run ztask_python_auto timeout 600 "$py" bench/peers/ztask_python_bench.py --bin build-release/bin \
  --engines "$engines" --hwm auto --tasks "$python_tasks" --latency 0
# The no-op workload with the dashboard open in headless Chromium (its task
# stream), against the same without a dashboard, in turns.
run dashboard timeout 900 "$py" bench/peers/dashboard_bench.py --bin build-release/bin \
  --engines "$engines" --hwm "$hwm" --tasks "$ztask_tasks" --rounds 3
run dask timeout 300 "$py" bench/peers/dask_bench.py --engines "$engines" --tasks "$peer_tasks" \
  --latency 500 --chain 500

"$py" bench/peers/combine.py "$out" "$engines" "$hwm"
