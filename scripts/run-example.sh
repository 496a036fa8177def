#!/usr/bin/env bash
# The main job on this machine: installs what is missing, builds, starts a
# local cluster (hub with SQLite records, scheduler, 4 engines) in the default
# profile (~/.ztask/profile_default, or the one given), runs a graph of tasks
# with dependencies and the client example, prints every outcome, and stops
# what it started. usage: scripts/run-example.sh [PROFILE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target taskcluster client_example
exec examples/run-pipeline.sh build/bin "${1:-$HOME/.ztask/profile_default}" 4
