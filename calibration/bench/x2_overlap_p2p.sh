#!/bin/bash
# One device call on a 2-GPU machine: an async send/recv exchange beside GEMMs, one hardware queue
# (Megatron's setting), by size: does a point-to-point collective slow beside compute as the all-reduce does?
#   bash calibration/bench/x2_overlap_p2p.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_DEVICE_MAX_CONNECTIONS=1
OUT=${OUT:-/tmp/x2ovp}
mkdir -p "$OUT" /tmp/ovp
port=29700
for mib in 8 32 128; do
  port=$((port + 1))
  timeout 90 python3 calibration/torch/overlap_bench.py --out /tmp/ovp/overlap_p2p.jsonl --port $port --ar-mib $mib \
    --background gemm --op send_recv > /tmp/ovp/log_$mib.txt 2>&1
  echo "${mib}MiB rc=$? $(tail -n 1 /tmp/ovp/log_$mib.txt | cut -c1-200)"
done
cp /tmp/ovp/overlap_p2p.jsonl "$OUT/"
tar -C /tmp -czf "$OUT/overlap_p2p_traces.tar.gz" ovp
ls -la "$OUT"
