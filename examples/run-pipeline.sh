#!/usr/bin/env bash
# Starts a local cluster in PROFILE with BIN's programs, runs the example
# pipeline (examples/pipeline.json) and the client example on it, prints the
# outcomes, and stops the cluster (also when anything fails).
# usage: run-pipeline.sh BIN_DIR [PROFILE_DIR] [ENGINES]
set -uo pipefail
bin=$1
profile=${2:-$HOME/.ztask/profile_default}
engines=${3:-4}
here=$(cd "$(dirname "$0")" && pwd)
ctl() { "$bin/taskctl" --profile-dir "$profile" "$@"; }

"$bin/taskcluster" start -n "$engines" --profile-dir "$profile" --daemonize || exit 2
trap '"$bin/taskcluster" stop --profile-dir "$profile"' EXIT

echo
echo "== the pipeline: taskctl submit-graph, then taskctl wait"
ids=$(ctl submit-graph "$here/pipeline.json") || exit 2
printf '%-9s %-6s %-6s %s\n' task status engine "output or error"
# taskctl's summary ("2 of 8 tasks failed", on stderr) goes below the table
# it sums up, not wherever the terminal interleaves it.
summary=$(mktemp)
trap 'rm -f "$summary"; "$bin/taskcluster" stop --profile-dir "$profile"' EXIT
ctl wait --timeout 120 $(echo "$ids" | awk '{print $2}') 2>"$summary" | while read -r record; do
  name=$(echo "$ids" | grep "$(echo "$record" | sed 's/.*"id":"\([0-9a-f]*\)".*/\1/')" | cut -d' ' -f1)
  echo "$record" | python3 -c '
import json, sys
r = json.load(sys.stdin)
out = (r["stdout"] or r["stderr"]).strip() or json.dumps(r["result"])
if r["error"]:
    out = r["error"]["type"] + ": " + (r["stderr"].strip() or r["error"]["message"])
engine = "-" if r["engine_id"] is None else str(r["engine_id"])
print("%-9s %-6s %-6s %s" % (sys.argv[1], r["status"], engine, out[:90]))
' "$name"
done
cat "$summary" >&2

echo
echo "== the client library (examples/client_example.cc)"
"$bin/client_example" "$profile" || exit 1
echo
ctl status
