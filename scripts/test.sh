#!/usr/bin/env bash
# Builds everything (CUDA microbenchmarks too when nvcc is present) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/deps.sh)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
