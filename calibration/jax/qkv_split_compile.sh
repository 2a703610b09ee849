#!/usr/bin/env bash
# Compiles (does not run) the reference decoder with one fused QKV weight and with three Q, K, V projections
# (MaxText's default, fused_qkv: False), to read off whether XLA joins dQ, dK, dV only for the fused weight.
# Usage, on the device, from the repository root:  bash calibration/jax/qkv_split_compile.sh OUTDIR
set -u
OUT=$1; mkdir -p "$OUT"
run() {  # name policy attention scan(1/0) split(1/0)
  local extra=""; [ "$4" = 0 ] && extra="$extra --no-scan"; [ "$5" = 1 ] && extra="$extra --split-qkv"
  python3 calibration/jax/train_step.py --custom "$1" --D 2048 --H 16 --L 2 --F 8192 --S 2048 --B 8 --V 32768 \
    --policy "$2" --attention "$3" $extra --outdir "$OUT" --result "$OUT/$1.json" --max-gb 0.001 > "$OUT/$1.log" 2>&1
  echo "$1 rc=$?"
}
for split in 0 1; do
  t=$([ $split = 1 ] && echo split || echo fused)
  run "qkv_${t}_dots_cudnn_scan" dots cudnn 1 $split
  run "qkv_${t}_none_cudnn_scan" none cudnn 1 $split
  run "qkv_${t}_dots_xla_scan" dots xla 1 $split
  run "qkv_${t}_dflash_cudnn_unrolled" dots_flash cudnn 0 $split
done
