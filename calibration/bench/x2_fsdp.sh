#!/bin/bash
# One device call on a 2-GPU machine: the FSDP JAX step with its Adam moments sharded as its parameters
# (train_step.py after the 16:40 UTC fix), profiled, and the data-parallel step again for comparison.
#   bash calibration/bench/x2_fsdp.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.94
OUT=${OUT:-/tmp/x2fsdp}
mkdir -p "$OUT" /tmp/fs
T=calibration/jax/train_step.py
for c in x2_fsdp_m1_dots x2_dp_m1_dots; do
  RACKSIM_PROFILE_DIR=/tmp/fs/prof python3 $T --config $c --outdir /tmp/fs --result "$OUT/$c.json" > /tmp/fs/$c.log 2>&1
  echo "$c rc=$? $(python3 -c "import json; r=json.load(open('$OUT/$c.json')); print(r.get('step_s_median'), r.get('peak_bytes_in_use'), r.get('param_bytes_gpu0'), r.get('opt_state_bytes_gpu0'), r.get('error','')[:300])")"
done
cp /tmp/fs/x2_fsdp_m1_dots.hlo.txt.gz "$OUT/"
cp /tmp/fs/prof/x2_fsdp_m1_dots/plugins/profile/*/perfetto_trace.json.gz "$OUT/x2_fsdp_m1_dots.perfetto_trace.json.gz"
ls -la "$OUT"
