#!/usr/bin/env bash
# Build racksim-bench on a GPU node and take the calibration measurements.
#
#   calibration/bench/device_run.sh smoke|full OUTDIR
#
# smoke: build, racksim-bench --quick (with a single-rank NCCL code check), the JAX script on tiny
#        configurations and one reference configuration.
# full:  racksim-bench on the full grid, then the JAX suite (calibration/jax/train_step.py --suite full).
# Everything lands in OUTDIR/results.tar.gz (plus a few small top-level files).
# Leaves clocks, power and modes alone. NVLink SHARP stays off (NCCL_NVLS_ENABLE=0).
set -u
MODE=${1:?smoke|full}
OUTDIR=${2:?OUTDIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
W=/tmp/racksim-calib
rm -rf "$W"
mkdir -p "$W/logs" "$W/data" "$OUTDIR"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -a
  nproc
  free -g
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.max,persistence_mode,compute_mode --format=csv
  nvidia-smi topo -m
  command -v nvcc && nvcc --version
  cmake --version | head -1
  python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__); print(jax.devices())'
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|optax|flax|numpy|nvidia-(nccl|cublas|cudnn|cuda-runtime))'
} > "$W/env.txt" 2>&1
stamp "env captured"

. calibration/bench/find_nccl.sh   # NCCL_ROOT: the toolkit's NCCL or the pip package's
echo "NCCL_ROOT=$NCCL_ROOT" >> "$W/env.txt"

# Build here (preferred); fall back to a binary carried in build-bench/ (built elsewhere).
BIN=""
if cmake -S calibration/bench -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DNCCL_ROOT="$NCCL_ROOT" > "$W/logs/build.log" 2>&1 && cmake --build build-dev >> "$W/logs/build.log" 2>&1; then
  BIN=build-dev/racksim-bench
  cp "$BIN" "$OUTDIR/racksim-bench.devbuild" 2>/dev/null
elif [ -x build-bench/racksim-bench ]; then
  BIN=build-bench/racksim-bench
fi
stamp "build done: BIN=$BIN"
echo "BIN=$BIN" >> "$W/env.txt"
[ -n "$BIN" ] && ldd "$BIN" >> "$W/env.txt" 2>&1
if [ -x build-bench/racksim-bench ]; then
  { echo "== carried binary"; ldd build-bench/racksim-bench; build-bench/racksim-bench --only launch --quick --out "$W/logs/carried_launch.json"; echo "rc=$?"; } > "$W/logs/carried.log" 2>&1
fi

if [ "$MODE" = smoke ]; then
  if [ -n "$BIN" ]; then
    timeout 150 "$BIN" --quick --nccl-min-gpus 1 --out "$W/data/bench_quick.json" > "$W/logs/bench_quick.log" 2>&1
    echo "bench rc=$?" >> "$W/logs/bench_quick.log"
  fi
  stamp "bench quick done"
  timeout 150 python3 calibration/jax/train_step.py --configs tiny_none_unrolled,tiny_dots_cudnn,tiny_off,tiny_full,s1_none_unrolled \
    --outdir "$W/data/jax" > "$W/logs/jax_smoke.log" 2>&1
  echo "jax rc=$?" >> "$W/logs/jax_smoke.log"
  stamp "jax smoke done"
else
  if [ -n "$BIN" ]; then
    timeout ${BENCH_TIMEOUT:-220} "$BIN" --out "$W/data/racksim-bench.json" > "$W/logs/bench.log" 2>&1
    echo "bench rc=$?" >> "$W/logs/bench.log"
  fi
  stamp "bench done"
  timeout ${JAX_TIMEOUT:-450} python3 calibration/jax/train_step.py --suite full --outdir "$W/data/jax" \
    --budget-s ${JAX_BUDGET:-380} > "$W/logs/jax.log" 2>&1
  echo "jax rc=$?" >> "$W/logs/jax.log"
  stamp "jax done"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$W/env.txt" 2>&1
tar czf "$OUTDIR/results.tar.gz" -C "$W" .
cp "$W/env.txt" "$OUTDIR/env.txt"
for f in "$W"/logs/bench*.log "$W"/logs/jax*.log; do [ -f "$f" ] && cp "$f" "$OUTDIR/"; done
stamp "packed"
tail -n 40 "$W"/logs/bench*.log 2>/dev/null
tail -n 30 "$W"/logs/jax*.log 2>/dev/null
ls -la "$OUTDIR"
