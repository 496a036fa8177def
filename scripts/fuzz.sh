#!/usr/bin/env bash
# Builds the codec fuzz target with clang and libFuzzer (with ASan+UBSan) and
# runs it on a copy of the committed corpus. Not part of the test suite; the
# corpus itself is replayed there under g++.
# usage: scripts/fuzz.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
CXX=clang++ cmake -S . -B build-fuzz -DZTASK_FUZZ=ON -DZTASK_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target codec_fuzzer -j2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/codec/* "$work"/
exec build-fuzz/bin/codec_fuzzer "$work" -max_total_time="${1:-60}" -max_len=4096
