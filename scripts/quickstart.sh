#!/usr/bin/env bash
# Fresh machine to first prediction: install what is missing, build, run a shipped scenario.
# Also builds the Python package and makes `import racksim` work for /usr/bin/python3
# (scripts/python_env.sh: a .pth file in the user's site-packages; docs/python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/deps.sh)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(racksim)
if grep -q "^RACKSIM_PYTHON:BOOL=ON" build/CMakeCache.txt && [ -f build/build.ninja ] && grep -q "racksim_python" build/build.ninja; then
  targets+=(racksim_python)
fi
cmake --build build --target "${targets[@]}" -j "$(nproc)"
if [[ " ${targets[*]} " == *" racksim_python "* ]]; then
  scripts/python_env.sh || echo "note: the Python package did not install (see above); the CLI works" >&2
fi
build/sim/cli/racksim run scenarios/quickstart.yaml "$@"
