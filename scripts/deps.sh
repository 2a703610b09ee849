#!/usr/bin/env bash
# Installs the Debian packages racksim builds with, if any is missing (idempotent).
#   C++: cmake, ninja, g++, yaml-cpp, Eigen (calibration fits), spdlog + fmt (logs), nlohmann-json,
#        CLI11, zlib (gzip'd HLO), GoogleTest/GoogleMock and Google Benchmark (tests).
#   Python package (import racksim): pybind11, the Python headers; pandas (sweeps as DataFrames)
#        and pytest (its tests) for Debian's /usr/bin/python3.
#   With RACKSIM_CI=1 (scripts/test.sh, the whole suite and CI, sets it): also Debian's chromium,
#        which the HtmlReport.*RendersInChromium tests drive headless (large, so the set-up command
#        scripts/quickstart.sh does not install it; without it those three tests skip).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libeigen3-dev libspdlog-dev libfmt-dev
      nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
      pybind11-dev python3-dev python3-pandas python3-pytest)
if [ "${RACKSIM_CI:-0}" = 1 ]; then
  pkgs+=(chromium)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# CUDA parts build when nvcc is found (it lives outside PATH on the GPU machines).
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "export PATH=/usr/local/cuda/bin:\$PATH"
fi
