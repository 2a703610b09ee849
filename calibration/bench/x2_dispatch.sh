#!/bin/bash
# One device call on a 2-GPU machine: XLA's host work per step with one process driving one GPU and
# two GPUs, the same programs, back to back on the same host.
#   bash calibration/bench/x2_dispatch.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/x2disp}
mkdir -p "$OUT"
{ date -u; nvidia-smi; nvidia-smi topo -m; python3 -c 'import jax; print("jax", jax.__version__, jax.devices())'; } > "$OUT/env.txt" 2>&1
B=calibration/jax/xla_runtime_bench.py
python3 $B --outdir /tmp/d1 --only dispatch --devices 1 2>&1 | tail -14
python3 $B --outdir /tmp/d2 --only dispatch --devices 2 2>&1 | tail -14
python3 $B --outdir /tmp/d1b --only dispatch --devices 1 2>&1 | tail -14
cp /tmp/d1/xla_runtime.json "$OUT/xla_runtime_dispatch_1dev.json"
cp /tmp/d2/xla_runtime.json "$OUT/xla_runtime_dispatch_2dev.json"
cp /tmp/d1b/xla_runtime.json "$OUT/xla_runtime_dispatch_1dev_again.json"
tar -C /tmp -czf "$OUT/hlo_and_profiles.tar.gz" d1 d2 d1b
ls -la "$OUT"
