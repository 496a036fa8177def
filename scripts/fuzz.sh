#!/usr/bin/env bash
# Builds every fuzz target with clang and libFuzzer (with ASan+UBSan) and runs
# each on a copy of its committed corpus: the codec, the scheduler core fed
# with event sequences, the connection-file parser and the graph parser.
# Not part of the test suite; the corpora are replayed there under g++.
# usage: scripts/fuzz.sh [SECONDS PER TARGET] [TARGET...]   (default 60, all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh fuzz
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(codec core connection_file graph)
CXX=clang++ cmake -S . -B build-fuzz -DZTASK_FUZZ=ON -DZTASK_BUILD_BENCH=OFF -DZTASK_PACKAGE=OFF >/dev/null
for target in "${targets[@]}"; do
  cmake --build build-fuzz --target "${target}_fuzzer" -j2
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  cp tests/fuzz/corpus/"$target"/* "$work/$target"/
  echo "== $target: ${seconds}s"
  build-fuzz/bin/"${target}_fuzzer" "$work/$target" -max_total_time="$seconds" -max_len=4096 \
    -print_final_stats=1 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" || true
  # A crash leaves a crash-* file in the working directory: fail then.
  if compgen -G "crash-*" >/dev/null || compgen -G "leak-*" >/dev/null; then
    echo "$target: a finding was saved in $(pwd); replay it with build-fuzz/bin/${target}_fuzzer FILE" >&2
    exit 1
  fi
done
