#!/usr/bin/env bash
# Take every single-GPU measurement `racksim calibrate fit` reads, on the GPU this runs on, in one go.
#
#   calibration/bench/calibrate_one_gpu.sh OUTDIR [PARTS]
#
# PARTS: a comma-separated subset of bench,gemm,xla,kernel-gap,attention (default: all of them).
# OUTDIR gets one folder per input, laid out as the H200's calibration folders are (calibration/data/h200-*):
#   bench/       racksim-bench's grid (GEMM bf16/fp8, HBM, host link, launch, contention)   ~2.5 min with the build
#   gemm/        the GEMM shapes of training graphs the grid lacks (measure_gemm.py)         ~1 min
#   xla/         XLA's runtime: dispatch chains and the materialized attention kernels        ~1 min
#   nocb/        the dispatch chains again without command buffers                            ~20 s
#   loops/       XLA's loop fusions at their limits                                            ~10 s
#   kernel-gap/  the GPU's cost of an eager kernel boundary (three runs)                       ~30 s
#   attention/   flash attention forward/backward at the power cap                            ~4 min
# then fit them: racksim calibrate fit --from OUTDIR/bench --from OUTDIR/gemm ... --base PRESET --out FILE
# (docs/calibration.md, "Calibrating your own GPU"). Multi-GPU inputs (NCCL fits, a collective beside a GEMM)
# need two GPUs: calibration/bench/x2_*.sh.
# Leaves clocks, power and modes alone. NVLink SHARP stays off (NCCL_NVLS_ENABLE=0).
set -u
OUTDIR=${1:?OUTDIR}
PARTS=",${2:-bench,gemm,xla,kernel-gap,attention},"
want() { case "$PARTS" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUTDIR"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
gpu_state() {
  nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv 2>&1
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -a
  nproc
  nvidia-smi
  gpu_state
  nvidia-smi topo -m
  command -v nvcc && nvcc --version
  python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__); print(jax.devices())'
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cublas", torch.backends.cuda.preferred_blas_library())'
  python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|torch |nvidia-(nccl|cublas|cudnn|cuda-runtime))'
} > "$OUTDIR/env.txt" 2>&1
stamp "env captured"

# racksim-bench, built here against the pip package's NCCL where the toolkit has none.
if want bench; then
mkdir -p "$OUTDIR/bench"
. calibration/bench/find_nccl.sh   # NCCL_ROOT: the toolkit's NCCL or the pip package's
if cmake -S calibration/bench -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DNCCL_ROOT="$NCCL_ROOT" > "$OUTDIR/bench/build.log" 2>&1 && cmake --build build-dev >> "$OUTDIR/bench/build.log" 2>&1; then
  stamp "racksim-bench built"
  gpu_state > "$OUTDIR/bench/gpu_before.txt"
  timeout ${BENCH_TIMEOUT:-240} build-dev/racksim-bench --out "$OUTDIR/bench/racksim-bench.json" > "$OUTDIR/bench/racksim-bench.log" 2>&1
  echo "rc=$?" >> "$OUTDIR/bench/racksim-bench.log"
  gpu_state > "$OUTDIR/bench/gpu_after.txt"
else
  echo "racksim-bench build failed" >> "$OUTDIR/bench/build.log"
fi
stamp "racksim-bench done"
fi

if want gemm; then
mkdir -p "$OUTDIR/gemm"
timeout 240 python3 calibration/data/h200-2026-11-29-gemm/measure_gemm.py "$OUTDIR/gemm/gemm_torch.json" \
  > "$OUTDIR/gemm/measure_gemm.log" 2>&1
echo "rc=$?" >> "$OUTDIR/gemm/measure_gemm.log"
gpu_state > "$OUTDIR/gemm/gpu_after.txt"
stamp "gemm shapes done"
fi

if want xla; then
mkdir -p "$OUTDIR"/{xla,nocb,loops}
timeout 180 python3 calibration/jax/xla_runtime_bench.py --outdir "$OUTDIR/xla" > "$OUTDIR/xla/bench.log" 2>&1
echo "rc=$?" >> "$OUTDIR/xla/bench.log"
XLA_FLAGS=--xla_gpu_enable_command_buffer= timeout 120 python3 calibration/jax/xla_runtime_bench.py \
  --outdir "$OUTDIR/nocb" --only dispatch > "$OUTDIR/nocb/bench.log" 2>&1
echo "rc=$?" >> "$OUTDIR/nocb/bench.log"
timeout 120 python3 calibration/jax/xla_runtime_bench.py --outdir "$OUTDIR/loops" --only loops > "$OUTDIR/loops/bench.log" 2>&1
echo "rc=$?" >> "$OUTDIR/loops/bench.log"
# The fit tells the inputs apart by schema and part; keep the H200 folders' names.
[ -f "$OUTDIR/xla/xla_runtime.json" ] && mv "$OUTDIR/xla/xla_runtime.json" "$OUTDIR/xla/xla_runtime_kernels.json"
[ -f "$OUTDIR/nocb/xla_runtime.json" ] && mv "$OUTDIR/nocb/xla_runtime.json" "$OUTDIR/nocb/xla_runtime_dispatch_nocb.json"
[ -f "$OUTDIR/loops/xla_runtime.json" ] && mv "$OUTDIR/loops/xla_runtime.json" "$OUTDIR/loops/loop_fusions.json"
stamp "XLA runtime done"
fi

if want kernel-gap && mkdir -p "$OUTDIR/kernel-gap" && nvcc -O2 -arch=sm_90 -o /tmp/kernel_gap calibration/bench/kernel_gap.cu > "$OUTDIR/kernel-gap/build.log" 2>&1; then
  for r in 1 2 3; do
    /tmp/kernel_gap "$OUTDIR/kernel-gap/kernel_gap_run$r.json" > "$OUTDIR/kernel-gap/kernel_gap_run$r.log" 2>&1
  done
fi
stamp "kernel gap done"

if want attention; then
  mkdir -p "$OUTDIR/attention/raw"
  timeout 300 python3 calibration/torch/attention_sustained.py --out "$OUTDIR/attention/raw/attention_train.jsonl" \
    --seconds 4 --idle 1 --short --sustained-forward --json "$OUTDIR/attention/attention.json" \
    > "$OUTDIR/attention/raw/run.log" 2>&1
  stamp "attention done"
fi
gpu_state >> "$OUTDIR/env.txt"
stamp "all done"
