#!/bin/bash
# One device call on a 2-GPU machine: an async all-reduce beside GEMMs or beside HBM-bound copies, by
# size and hardware-queue setting (calibration/torch/overlap_bench.py), to characterize how much a
# collective slows beside compute.
#   bash calibration/bench/x2_overlap_matrix.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/x2ovm}
mkdir -p "$OUT" /tmp/ovm
P=calibration/torch/overlap_bench.py
port=29600
for conn in 1 default; do
  for bg in gemm copy; do
    for mib in 8 32 128; do
      port=$((port + 1))
      if [ "$conn" = 1 ]; then export CUDA_DEVICE_MAX_CONNECTIONS=1; else unset CUDA_DEVICE_MAX_CONNECTIONS; fi
      timeout 90 python3 $P --out /tmp/ovm/overlap_matrix.jsonl --port $port --ar-mib $mib --background $bg > /tmp/ovm/log_${conn}_${bg}_${mib}.txt 2>&1
      echo "conn=$conn bg=$bg ${mib}MiB rc=$? $(tail -n 1 /tmp/ovm/log_${conn}_${bg}_${mib}.txt | cut -c1-300)"
    done
  done
done
cp /tmp/ovm/overlap_matrix.jsonl "$OUT/"
tar -C /tmp -czf "$OUT/overlap_matrix_traces.tar.gz" ovm
ls -la "$OUT"
