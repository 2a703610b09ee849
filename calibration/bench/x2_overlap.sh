#!/bin/bash
# One device call on a 2-GPU machine: does an async NCCL all-reduce start beside the next GEMM?
#   bash calibration/bench/x2_overlap.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/x2ovl}
mkdir -p "$OUT"
P=calibration/torch/overlap_bench.py
timeout 150 python3 $P --out "$OUT/overlap.jsonl" --port 29533 2>&1 | tail -5
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 150 python3 $P --out "$OUT/overlap.jsonl" --port 29534 2>&1 | tail -5
ls -la "$OUT"
