#!/usr/bin/env bash
# Builds everything (CUDA microbenchmarks too when nvcc is present) with warnings as errors and runs
# the whole test suite. Extra arguments go to ctest, e.g. `scripts/test.sh -L unit` (tiers: unit,
# integration, calibration, golden, bench; README "Tests").
set -euo pipefail
cd "$(dirname "$0")/.."
# The whole suite: deps.sh also installs Chromium, so the HTML render tests run rather than skip.
export RACKSIM_CI="${RACKSIM_CI:-1}"
eval "$(scripts/deps.sh)"
launcher=()  # ccache when installed; paths relative to the checkout, so that clones share the cache
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRACKSIM_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600 "$@"
