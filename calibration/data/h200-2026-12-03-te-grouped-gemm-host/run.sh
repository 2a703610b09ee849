#!/usr/bin/env bash
# On the device, from a folder holding te_grouped_gemm_host.cu and te_grouped_python_host.py; results to $OUT.
set -u
OUT=${OUT:?}
{
  date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; nproc; lscpu | grep -E 'Model name|^CPU\(s\)|MHz'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode,compute_mode --format=csv
  nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$OUT/env.txt" 2>&1
nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/tegh te_grouped_gemm_host.cu -lcublasLt > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
/tmp/tegh --tokens 512,2048 --experts 4,16 --json "$OUT/cublaslt_host.jsonl" > "$OUT/cublaslt_host.log" 2>&1
echo "rc=$?" >> "$OUT/cublaslt_host.log"
CUBLASLT_HEURISTICS_CACHE_CAPACITY=0 /tmp/tegh --tokens 512,2048 --experts 16 --json "$OUT/cublaslt_host.jsonl" > "$OUT/cublaslt_host_nocache.log" 2>&1
echo "rc=$?" >> "$OUT/cublaslt_host_nocache.log"
PYTHONUNBUFFERED=1 python3 te_grouped_python_host.py --out "$OUT/python_host.json" > "$OUT/python_host.log" 2>&1
echo "rc=$?" >> "$OUT/python_host.log"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> "$OUT/env.txt" 2>&1
grep -E "te_full|events" "$OUT/cublaslt_host.log" | head -60
cat "$OUT/cublaslt_host_nocache.log" | head -50
cat "$OUT/python_host.log"
