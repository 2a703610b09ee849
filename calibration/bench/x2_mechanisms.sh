#!/bin/bash
# One device call on a 2-GPU NVLink machine (nvidia-h200-x2): the NCCL ring mechanisms behind the
# all-gather / reduce-scatter vs all-reduce gap, then the JAX data-parallel / FSDP training steps.
#   bash calibration/bench/x2_mechanisms.sh [PHASE...]   (repository root; writes under $OUT)
# PHASE: nccl (the channel / thread / buffer sweep), nccl_extra (P2P read mode, LL128), jax; default all.
# NVLink SHARP stays off, as the lending workplace requires (KINDS.md): never unset these.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/x2out}
PHASES=" ${*:-nccl nccl_extra jax} "
has() { [[ "$PHASES" == *" $1 "* ]]; }
mkdir -p "$OUT"
t0=$(date +%s)
{
  date -u; nvidia-smi; nvidia-smi topo -m; nvidia-smi -q -d CLOCK | head -40
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > "$OUT/env.txt" 2>&1

# ---- 1. NCCL sweep: channel count, threads per channel and buffer (chunk) size -----------------------------
cmake -S calibration/bench -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  > "$OUT/build.log" 2>&1 && cmake --build /tmp/b >> "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; }
S=/tmp/nccl_sweep
mkdir -p $S
variant() {  # name max_bytes VAR=VALUE...
  local name=$1 maxb=$2; shift 2
  echo "== $name: $* (max $maxb)" | tee -a $S/commands.txt
  env "$@" /tmp/b/racksim-bench --only nccl --nccl-max-bytes "$maxb" --out $S/$name.json > $S/$name.log 2>&1
  echo "   rc=$? at $(( $(date +%s) - t0 )) s"
}
if [ -x /tmp/b/racksim-bench ] && has nccl; then
  variant default 4GiB NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,ENV
  for k in 2 4 8 16 32; do variant ch$k 1GiB NCCL_MIN_NCHANNELS=$k NCCL_MAX_NCHANNELS=$k; done
  variant nt256 1GiB NCCL_NTHREADS=256
  variant buff1M 1GiB NCCL_BUFFSIZE=1048576
  variant buff16M 1GiB NCCL_BUFFSIZE=16777216
  variant ch4_buff16M 1GiB NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4 NCCL_BUFFSIZE=16777216
  variant default_again 1GiB
fi
if [ -x /tmp/b/racksim-bench ] && has nccl_extra; then
  variant p2pread 1GiB NCCL_P2P_READ_ENABLE=1
  variant ll128 1GiB NCCL_PROTO=LL128
  variant ch4_p2pread 1GiB NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4 NCCL_P2P_READ_ENABLE=1
fi
tar -C /tmp -czf "$OUT/nccl_sweep.tar.gz" nccl_sweep
echo "nccl sweep done at $(( $(date +%s) - t0 )) s"

# ---- 2. JAX data-parallel and FSDP steps on both GPUs --------------------------------------------------------
J=/tmp/jax_x2
mkdir -p $J/prof
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 90 ] && has jax; then
  RACKSIM_PROFILE_DIR=$J/prof PYTHONUNBUFFERED=1 timeout $left \
    python3 calibration/jax/train_step.py --suite x2 --outdir $J --budget-s $(( left - 60 )) 2>&1 | tail -40
fi
tar -C /tmp -czf "$OUT/jax_x2.tar.gz" --exclude='jax_x2/prof' jax_x2
tar -C /tmp -czf "$OUT/jax_x2_prof.tar.gz" jax_x2/prof
# files back are limited to 16 MiB each: drop the profiles rather than lose the call
[ "$(stat -c %s "$OUT/jax_x2_prof.tar.gz")" -gt 16000000 ] && rm -f "$OUT/jax_x2_prof.tar.gz" && echo "profiles too large, dropped"
echo "all done at $(( $(date +%s) - t0 )) s"
ls -la "$OUT"
