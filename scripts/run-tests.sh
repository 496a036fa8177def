#!/usr/bin/env bash
# The test suite: installs what is missing, builds everything with warnings
# as errors and runs every test under CTest (each with a timeout).
#
#   scripts/run-tests.sh                 the plain build, the whole suite
#   scripts/run-tests.sh --sanitizers    then builds and runs the suite again
#                                        under AddressSanitizer+UBSan and
#                                        under ThreadSanitizer (what CI runs)
#   scripts/run-tests.sh -L unit         any other argument goes to ctest:
#                                        labels are unit, integration, long
#
# Under a sanitizer any report, from the tests or from any process they
# start, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=0
ctest_args=()
for arg in "$@"; do
  case "$arg" in
    --sanitizers) sanitizers=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) ctest_args+=("$arg") ;;
  esac
done
scripts/install-deps.sh
# The three builds take several GiB and the long tests write a few hundred MiB
# each: on a fuller disk they fail on their writes (each says so), so the
# space is named here first.
free_kib=$({ df -Pk "${TMPDIR:-/tmp}" . 2>/dev/null || true; } |
  awk 'NR > 1 { if (min == "" || $4 < min) min = $4 } END { print min + 0 }')
echo "free disk space: $((free_kib / 1024)) MiB"
if [ "$free_kib" -lt $((4 * 1024 * 1024)) ]; then
  echo "warning: under 4 GiB free; tests that write much may fail on a full disk" >&2
fi
# ccache hits across clones of the repository: paths relative to the clone,
# and the directory left out of the hash (it goes in by default with -g; the
# objects then name another clone as where they were compiled, which nothing
# here reads).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZTASK_WERROR=ON >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 ${ctest_args[@]+"${ctest_args[@]}"}

[ "$sanitizers" = 1 ] || exit 0
for kind in address thread; do
  echo "== the test suite under the ${kind} sanitizer"
  # Without -Werror: GCC warns falsely (maybe-uninitialized) under sanitizers;
  # the plain build above holds the code to no warnings. Packaging (install
  # rules, the shared libraries, the .deb) is checked in the plain build.
  cmake -S . -B "build-$kind" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZTASK_WERROR=OFF \
    -DZTASK_SANITIZE="$kind" -DZTASK_BUILD_BENCH=OFF -DZTASK_PACKAGE=OFF >/dev/null
  cmake --build "build-$kind" -j2
  reports=$(mktemp -d)
  # atexit_sleep_ms=0: the thread that takes stop signals (base/signals.h)
  # still waits when a process exits, and each exit would pause a second.
  ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1" \
  UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1" \
  TSAN_OPTIONS="log_path=$reports/tsan suppressions=$PWD/scripts/tsan.supp history_size=7 atexit_sleep_ms=0" \
    ctest --test-dir "build-$kind" --output-on-failure -j2 ${ctest_args[@]+"${ctest_args[@]}"}
  if compgen -G "$reports/*" >/dev/null; then
    echo "the ${kind} sanitizer reported:" >&2
    cat "$reports"/* >&2
    exit 1
  fi
  rm -rf "$reports"
done
