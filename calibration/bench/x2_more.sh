#!/bin/bash
# One device call on a 2-GPU machine: four more two-GPU JAX steps (the `x2b` suite), measured after the
# replay's collective queuing was built, as out-of-sample checks; one profile each.
#   bash calibration/bench/x2_more.sh      (repository root; writes under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/x2more}
mkdir -p "$OUT"
RACKSIM_PROFILE_DIR=/tmp/x2b/prof PYTHONUNBUFFERED=1 timeout 500 \
  python3 calibration/jax/train_step.py --suite x2b --outdir /tmp/x2b --budget-s 440 2>&1 | tail -8
mkdir -p /tmp/x2b_keep/prof
cp /tmp/x2b/jax_steps.jsonl /tmp/x2b/*.hlo.txt.gz /tmp/x2b/*.log /tmp/x2b_keep/ 2>/dev/null
for d in /tmp/x2b/prof/*/; do n=$(basename "$d"); cp "$d"/plugins/profile/*/perfetto_trace.json.gz "/tmp/x2b_keep/prof/$n.perfetto_trace.json.gz" 2>/dev/null; done
tar -C /tmp -czf "$OUT/x2b.tar.gz" x2b_keep
ls -la "$OUT"
