#!/usr/bin/env bash
# A long run: TASKS no-ops (default 10,000,000) through one cluster of the
# release build, the hub keeping at most RECORDS finished records (default
# 100,000). Every 10^6 tasks it samples each process's resident memory, the
# database's size and rows, and the throughput, into a CSV under a temporary
# directory, then draws them (bench/plot_soak.py) into soak.png beside it.
# usage: bench/soak.sh [TASKS] [RECORDS]
#   BUILD=build-release ENGINES=2 SAMPLE_EVERY=1000000 OUT=DIR bench/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${1:-10000000}
records=${2:-100000}
build=${BUILD:-build-release}
engines=${ENGINES:-2}
sample_every=${SAMPLE_EVERY:-1000000}
out=${OUT:-$(mktemp -d /tmp/ztask-soak.XXXXXX)}
bin=$build/bin
for program in taskcluster taskhub taskscheduler taskengine soak; do
  [ -x "$bin/$program" ] || { echo "soak.sh: no $bin/$program (build the release tree)" >&2; exit 2; }
done
profile=$out/profile
stop() { "$bin/taskcluster" stop --profile-dir "$profile" >/dev/null 2>&1 || true; }
trap stop EXIT
"$bin/taskcluster" start --profile-dir "$profile" --daemonize -n "$engines" --hwm 64 \
  --max-finished-records "$records"
echo "soak: $tasks no-ops, $engines engines, --hwm 64, --max-finished-records $records;" \
  "$(nproc) cores; in $out"
"$bin/soak" --profile "$profile" --engines "$engines" --db "$profile/tasks.db" \
  --csv "$out/soak.csv" --tasks "$tasks" --sample-every "$sample_every"
stop
trap - EXIT
/usr/bin/python3 bench/plot_soak.py "$out/soak.csv" "$out/soak.png" \
  "$tasks no-ops, $engines engines, at most $records finished records"
echo "soak: $out/soak.csv $out/soak.png"
