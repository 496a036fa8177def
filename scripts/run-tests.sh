#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything with
# warnings as errors and runs every test under CTest (each with a timeout);
# then builds and runs the suite again under AddressSanitizer+UBSan and under
# ThreadSanitizer. Any sanitizer report, from the tests or from any process
# they start, fails the run. ZTASK_SANITIZERS=0 skips the sanitizer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# ccache hits across clones of the repository.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZTASK_WERROR=ON >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 "$@"

[ "${ZTASK_SANITIZERS:-1}" = 0 ] && exit 0
for kind in address thread; do
  echo "== the test suite under the ${kind} sanitizer"
  # Without -Werror: GCC warns falsely (maybe-uninitialized) under sanitizers;
  # the plain build above holds the code to no warnings.
  cmake -S . -B "build-$kind" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZTASK_WERROR=OFF \
    -DZTASK_SANITIZE="$kind" -DZTASK_BUILD_BENCH=OFF >/dev/null
  cmake --build "build-$kind" -j2
  reports=$(mktemp -d)
  ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1" \
  UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1" \
  TSAN_OPTIONS="log_path=$reports/tsan suppressions=$PWD/scripts/tsan.supp history_size=7" \
    ctest --test-dir "build-$kind" --output-on-failure -j2 "$@"
  if compgen -G "$reports/*" >/dev/null; then
    echo "the ${kind} sanitizer reported:" >&2
    cat "$reports"/* >&2
    exit 1
  fi
  rm -rf "$reports"
done
