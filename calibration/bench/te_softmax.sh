#!/usr/bin/env bash
# Builds and runs te_softmax_bench.cu against Transformer Engine's fused upper-triangular masked softmax kernels,
# extracted from a TransformerEngine source tree (not part of racksim; Apache-2.0, NVIDIA/TransformerEngine):
#   calibration/bench/te_softmax.sh TE_SOURCE_FILE OUT_DIR [--quick]
# TE_SOURCE_FILE: transformer_engine/common/fused_softmax/scaled_upper_triang_masked_softmax.cu of the TE version
# to time (e.g. `git show v1.5:transformer_engine/common/fused_softmax/scaled_upper_triang_masked_softmax.cu`).
# The kernels and their dispatchers are the lines from `namespace transformer_engine {` to the first function that
# takes TE's Tensor type; the namespace is closed after them.
set -euo pipefail
src="$1"; out="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
first=$(grep -n '^namespace transformer_engine {' "$src" | head -1 | cut -d: -f1)
last=$(grep -n '^void scaled_upper_triang_masked_softmax_forward(' "$src" | head -1 | cut -d: -f1)
{ sed -n "${first},$((last - 1))p" "$src"; echo '}  // namespace transformer_engine'; } > "$out/te_softmax_kernels.inc"
nvcc -O3 -std=c++17 -arch=native --expt-relaxed-constexpr -DTE_SOFTMAX_KERNELS="\"$out/te_softmax_kernels.inc\"" \
  -o "$out/te_softmax_bench" "$here/te_softmax_bench.cu"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$out/gpu.txt"
nvcc --version | tail -2 >> "$out/gpu.txt"
"$out/te_softmax_bench" "$@" | tee "$out/te_softmax.jsonl"
rm -f "$out/te_softmax_bench"
