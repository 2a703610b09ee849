#!/usr/bin/env bash
# Take every single-GPU measurement `racksim calibrate fit` reads, on the GPU this runs on, in one go.
#
#   calibration/bench/calibrate_one_gpu.sh OUTDIR [PARTS]
#
# PARTS: a comma-separated subset of bench,gemm,xla,kernel-gap,attention (default: all five); `xla` writes three
# folders (xla/, nocb/, loops/). Anything else is refused. OUTDIR gets one folder per input, laid out as the H200's
# calibration folders are (calibration/data/h200-*); times measured on an H100 (calibration/data/h100-2026-12-06-*):
#   bench/       racksim-bench's grid (GEMM bf16/fp8, HBM, host link, launch, contention)   ~35 s with the build
#   gemm/        the GEMM shapes of training graphs the grid lacks (measure_gemm.py)         ~25 s
#   xla/         XLA's runtime: dispatch chains and the materialized attention kernels        ~20 s
#   nocb/        the dispatch chains again without command buffers                            ~10 s
#   loops/       XLA's loop fusions at their limits                                            ~10 s
#   kernel-gap/  the GPU's cost of an eager kernel boundary (three runs)                       ~100 s
#   attention/   flash attention forward/backward at the power cap                            ~160 s
# about 6 minutes in all. Then fit them: racksim calibrate fit --from OUTDIR/bench --from OUTDIR/gemm ... --base PRESET
# --out FILE (docs/calibration.md, "Calibrating your own GPU"). Multi-GPU inputs (NCCL fits, a collective beside a
# GEMM) need two GPUs: calibration/bench/x2_*.sh. The card's name, serial, clocks, power and temperature are recorded
# in OUTDIR/env.txt at the start and the end and in each part's gpu_after.txt (bench/ also gpu_before.txt).
# Builds for the GPU's own compute capability. Exit status: the number of parts that failed (0: all ran).
# Leaves clocks, power and modes alone. NVLink SHARP stays off (NCCL_NVLS_ENABLE=0).
set -u
OUTDIR=${1:?OUTDIR}
PARTS=${2:-bench,gemm,xla,kernel-gap,attention}
for p in ${PARTS//,/ }; do
  case "$p" in bench | gemm | xla | kernel-gap | attention) ;;
    *) echo "calibrate_one_gpu.sh: unknown part '$p' (parts: bench,gemm,xla,kernel-gap,attention)" >&2; exit 64 ;;
  esac
done
want() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)   # absolute: the script runs from the repository root
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
T0=$(date +%s)
FAILED=0
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
# Record a part's exit status in its log; count it when it failed.
status() { echo "rc=$1" >> "$2"; [ "$1" = 0 ] || FAILED=$((FAILED + 1)); }
gpu_state() {
  nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv 2>&1
}
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
ARCH=${ARCH:-90}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -a
  nproc
  nvidia-smi
  gpu_state
  echo "compute capability: $ARCH"
  nvidia-smi topo -m
  command -v nvcc && nvcc --version
  python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__); print(jax.devices())'
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cublas", torch.backends.cuda.preferred_blas_library())'
  python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|torch |nvidia-(nccl|cublas|cudnn|cuda-runtime))'
} > "$OUTDIR/env.txt" 2>&1
stamp "env captured"

if want bench; then
  mkdir -p "$OUTDIR/bench"
  . calibration/bench/find_nccl.sh   # NCCL_ROOT: the toolkit's NCCL or the pip package's
  if cmake -S calibration/bench -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
       -DNCCL_ROOT="$NCCL_ROOT" > "$OUTDIR/bench/build.log" 2>&1 && cmake --build build-dev >> "$OUTDIR/bench/build.log" 2>&1; then
    gpu_state > "$OUTDIR/bench/gpu_before.txt"
    timeout ${BENCH_TIMEOUT:-240} build-dev/racksim-bench --out "$OUTDIR/bench/racksim-bench.json" > "$OUTDIR/bench/racksim-bench.log" 2>&1
    status $? "$OUTDIR/bench/racksim-bench.log"
    gpu_state > "$OUTDIR/bench/gpu_after.txt"
  else
    status 1 "$OUTDIR/bench/build.log"
  fi
  stamp "racksim-bench done"
fi

if want gemm; then
  mkdir -p "$OUTDIR/gemm"
  timeout 240 python3 calibration/data/h200-2026-11-29-gemm/measure_gemm.py "$OUTDIR/gemm/gemm_torch.json" \
    > "$OUTDIR/gemm/measure_gemm.log" 2>&1
  status $? "$OUTDIR/gemm/measure_gemm.log"
  gpu_state > "$OUTDIR/gemm/gpu_after.txt"
  stamp "gemm shapes done"
fi

if want xla; then
  # The fit tells the inputs apart by schema and part; the files keep the H200 folders' names.
  xla_part() {  # folder, file name, xla_runtime_bench.py arguments (XLA_FLAGS from the caller's environment)
    local dir="$OUTDIR/$1" name=$2; shift 2
    mkdir -p "$dir"
    timeout 180 python3 calibration/jax/xla_runtime_bench.py --outdir "$dir" "$@" > "$dir/bench.log" 2>&1
    status $? "$dir/bench.log"
    [ -f "$dir/xla_runtime.json" ] && mv "$dir/xla_runtime.json" "$dir/$name"
    gpu_state > "$dir/gpu_after.txt"
  }
  xla_part xla xla_runtime_kernels.json
  XLA_FLAGS=--xla_gpu_enable_command_buffer= xla_part nocb xla_runtime_dispatch_nocb.json --only dispatch
  xla_part loops loop_fusions.json --only loops
  stamp "XLA runtime done"
fi

if want kernel-gap; then
  mkdir -p "$OUTDIR/kernel-gap"
  BIN=$(mktemp /tmp/kernel_gap.XXXXXX)
  if nvcc -O2 -arch=sm_"$ARCH" -o "$BIN" calibration/bench/kernel_gap.cu > "$OUTDIR/kernel-gap/build.log" 2>&1; then
    for r in 1 2 3; do
      timeout 120 "$BIN" "$OUTDIR/kernel-gap/kernel_gap_run$r.json" > "$OUTDIR/kernel-gap/kernel_gap_run$r.log" 2>&1
      status $? "$OUTDIR/kernel-gap/kernel_gap_run$r.log"
    done
  else
    status 1 "$OUTDIR/kernel-gap/build.log"
  fi
  rm -f "$BIN"
  gpu_state > "$OUTDIR/kernel-gap/gpu_after.txt"
  stamp "kernel gap done"
fi

if want attention; then
  mkdir -p "$OUTDIR/attention/raw"
  timeout 300 python3 calibration/torch/attention_sustained.py --out "$OUTDIR/attention/raw/attention_train.jsonl" \
    --seconds 4 --idle 1 --short --sustained-forward --json "$OUTDIR/attention/attention.json" \
    > "$OUTDIR/attention/raw/run.log" 2>&1
  status $? "$OUTDIR/attention/raw/run.log"
  gpu_state > "$OUTDIR/attention/gpu_after.txt"
  stamp "attention done"
fi
gpu_state >> "$OUTDIR/env.txt"
stamp "all done, $FAILED part(s) failed"
exit "$FAILED"
