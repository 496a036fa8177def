#!/usr/bin/env bash
# The repository holds sources: fails when a tracked file is over 1 MiB or is
# a database, log or build output. And each mechanism is written once: a
# clock read (any ::now(), whatever the clock is called), a fork or a
# zmq::poll outside base/ (the clock, the spawner,
# the reactor) fails it, but for the exceptions listed below with their
# reasons. Tests may read clocks and fork to test these. CI runs it first.
#   scripts/check-tree.sh
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue
  size=$(stat -c %s "$path")
  if [ "$size" -gt "$limit" ]; then
    echo "check-tree: $path is $size bytes, over the 1 MiB a source file may be" >&2
    bad=1
  fi
  case "$path" in
    *.db|*.sqlite|*.sqlite3|*.db-wal|*.db-shm|*.log|*.o|*.a|*.so|*.deb)
      echo "check-tree: $path looks like a database, log or build output" >&2
      bad=1 ;;
  esac
  if [ "$size" -ge 16 ] && printf 'SQLite format 3' | cmp -s -n 15 - "$path"; then
    echo "check-tree: $path is an SQLite database" >&2
    bad=1
  fi
done < <(git ls-files -z)
if [ "$bad" = 1 ]; then
  echo "check-tree: remove these files from the repository (git rm --cached PATH)" >&2
  exit 1
fi
# path:what, each with its reason in a comment at the line.
allowed=(
  "bench/relay.cc:zmq::poll"   # the bare ZeroMQ floor measures nothing of ours
  "cluster/main.cc:fork("      # --daemonize: the child goes on as the supervisor
)
while IFS= read -r hit; do
  file=${hit%%:*}
  ok=0
  for a in "${allowed[@]}"; do
    [[ "$hit" == "${a%%:*}:"*"${a#*:}"* ]] && ok=1
  done
  if [ "$ok" = 0 ]; then
    echo "check-tree: $hit" >&2
    echo "check-tree: use base/ (clock.h, spawn.h, reactor.h) instead in $file" >&2
    bad=1
  fi
done < <(git grep -n -E '::now\(|clock_gettime|gettimeofday|[^_a-z]fork\(|zmq::poll[^a-z_]|zmq_poll\(' \
           -- '*.cc' '*.h' ':!base/' ':!tests/' || true)
if [ "$bad" = 1 ]; then exit 1; fi
echo "check-tree: $(git ls-files | wc -l) tracked files, none over 1 MiB, no databases;" \
  "clocks, forks and polls only in base/"
