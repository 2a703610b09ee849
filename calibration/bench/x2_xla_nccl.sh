#!/bin/bash
# One device call on a 2-GPU NVLink machine: which NCCL algorithm, protocol and channels XLA's collectives get,
# and the step time of the data-parallel and FSDP JAX steps when NCCL is held to its Simple protocol.
#   bash calibration/bench/x2_xla_nccl.sh       (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.94
OUT=${OUT:-/tmp/x2xla}
mkdir -p "$OUT"
T=calibration/jax/train_step.py
python3 -c 'import os, jax; jax.devices(); print({k: v for k, v in os.environ.items() if k.startswith(("NCCL", "XLA", "JAX"))})' > "$OUT/env_after_jax_init.txt" 2>&1
step() {  # label config VAR=VALUE...
  local label=$1 cfg=$2; shift 2
  env "$@" python3 $T --config "$cfg" --outdir /tmp/j_$label --result "$OUT/$label.json" > /tmp/$label.log 2>&1
  echo "$label rc=$? $(python3 -c "import json; r=json.load(open('$OUT/$label.json')); print(r.get('step_s_median'), r.get('error', '')[:200])")"
}
step dp_m1_default_logged x2_dp_m1_dots NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV
step fsdp_m1_default_logged x2_fsdp_m1_dots NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV
step dp_m1_simple x2_dp_m1_dots NCCL_PROTO=Simple
step fsdp_m1_simple x2_fsdp_m1_dots NCCL_PROTO=Simple
step dp_s1_simple x2_dp_s1_none_scan NCCL_PROTO=Simple
step dp_m1_default_again x2_dp_m1_dots
tar -C /tmp -czf "$OUT/logs.tar.gz" dp_m1_default_logged.log fsdp_m1_default_logged.log dp_m1_simple.log fsdp_m1_simple.log dp_s1_simple.log dp_m1_default_again.log
ls -la "$OUT"
