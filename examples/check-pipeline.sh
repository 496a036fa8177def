#!/usr/bin/env bash
# Runs run-pipeline.sh on a cluster in a temporary profile and checks what it
# printed: each task's outcome, the follow placement, and the client example.
# usage: check-pipeline.sh BIN_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/run-pipeline.sh" "$1" "$tmp/profile" 3 > "$tmp/out" 2>&1
code=$?
cat "$tmp/out"
fail() { echo "check-pipeline: $1" >&2; exit 1; }
[ $code -eq 0 ] || fail "run-pipeline.sh exited with $code"
for pattern in \
    '^fetch-a +ok +[0-9]+ +3$' '^fetch-b +ok +[0-9]+ +4$' '^merge +ok' '^score +ok +[0-9]+ +12$' \
    '^flaky +error +[0-9]+ +TaskFailed: disk full$' '^clean-up +ok +[0-9]+ +cleaned$' \
    '^publish +error +- +ImpossibleDependency' \
    'ok engine [0-9]+: hello from engine [0-9]+$' ' ok engine [0-9]+: 6$' '^cluster stopped$'; do
  grep -Eq "$pattern" "$tmp/out" || fail "no line matches: $pattern"
done
# What a newcomer reads first: no stray line of the client example, and
# taskctl's summary below the table it sums up.
! grep -Eq '^null$' "$tmp/out" || fail "a line that says only 'null'"
last_row=$(grep -nE '^(fetch-a|fetch-b|merge|render|score|flaky|clean-up|publish) ' "$tmp/out" |
           tail -1 | cut -d: -f1)
summary=$(grep -nE '^taskctl: [0-9]+ of [0-9]+ tasks failed' "$tmp/out" | head -1 | cut -d: -f1)
[ -n "$summary" ] || fail "no line says how many tasks failed"
[ "$summary" -gt "$last_row" ] || fail "the summary (line $summary) is above the table (ends at line $last_row)"
merge=$(grep -E '^merge ' "$tmp/out" | awk '{print $3}')
render=$(grep -E '^render ' "$tmp/out" | awk '{print $3}')
[ "$merge" = "$render" ] || fail "render (follow merge) ran on engine $render, merge on $merge"
echo "check-pipeline: all outcomes as expected"
