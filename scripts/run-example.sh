#!/usr/bin/env bash
# The main job on this machine: installs what is missing, builds, starts the
# scheduler with stand-ins for the hub and engines, runs a small graph of
# tasks with dependencies, prints every outcome, and stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target taskscheduler graph_demo
exec build/bin/graph_demo "$@"
