#!/usr/bin/env bash
# The repository holds sources: fails when a tracked file is over 1 MiB or is
# a database, log or build output. CI runs it before building.
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
echo "check-tree: $(git ls-files | wc -l) tracked files, none over 1 MiB, no databases"
