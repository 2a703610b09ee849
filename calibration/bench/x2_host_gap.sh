#!/bin/bash
# One device call on a 2-GPU machine: the same JAX steps on one GPU and on two, profiled, on one host,
# to compare the host's time between steps.
#   bash calibration/bench/x2_host_gap.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.94
OUT=${OUT:-/tmp/x2gap}
mkdir -p "$OUT" /tmp/gap
T=calibration/jax/train_step.py
for c in s1_none_scan x2_dp_s1_none_scan; do
  RACKSIM_PROFILE_DIR=/tmp/gap/prof python3 $T --config $c --outdir /tmp/gap --result "$OUT/$c.json" > /tmp/gap/$c.log 2>&1
  echo "$c rc=$? $(python3 -c "import json; r=json.load(open('$OUT/$c.json')); print(r.get('step_s_median'), r.get('error','')[:200])")"
done
for c in s1_none_scan x2_dp_s1_none_scan; do cp /tmp/gap/prof/$c/plugins/profile/*/perfetto_trace.json.gz "$OUT/$c.perfetto_trace.json.gz"; done
ls -la "$OUT"
