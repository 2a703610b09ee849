#!/usr/bin/env bash
# Fresh machine to first prediction: install what is missing, build, run a shipped scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/deps.sh)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target racksim -j "$(nproc)"
build/sim/cli/racksim run scenarios/quickstart.yaml "$@"
