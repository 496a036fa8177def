#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything with
# warnings as errors, and runs every test under CTest (each with a timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZTASK_WERROR=ON >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 "$@"
