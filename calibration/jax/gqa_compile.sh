#!/usr/bin/env bash
# Compiles (does not run) the reference decoder with grouped-query, materialized attention over a grid of shapes
# and remat policies, to read off how XLA lays out the score gradient for the dQ and dK dots (duplicated softmax
# backward fusions, or a transpose). Usage, on the device, from the repository root:
#   bash calibration/jax/gqa_compile.sh OUTDIR
# Each configuration is skipped after compilation (--max-gb 0.001): its optimized HLO and its row are written.
set -u
OUT=$1; mkdir -p "$OUT"
run() {  # name D H KV S B policy
  python3 calibration/jax/train_step.py --custom "$1" --D "$2" --H "$3" --KV "$4" --S "$5" --B "$6" --L 2 --F $((4 * $2)) \
    --V 32768 --policy "$7" --attention xla --outdir "$OUT" --result "$OUT/$1.json" --max-gb 0.001 > "$OUT/$1.log" 2>&1
  echo "$1 rc=$?"
}
for pol in dots full none; do
  run "gq_d2048_h16_kv4_s2048_b8_$pol" 2048 16 4 2048 8 $pol     # g1's shape
  run "gq_d4096_h32_kv8_s4096_b2_$pol" 4096 32 8 4096 2 $pol     # g4k's shape
  run "gq_d2048_h16_kv4_s4096_b4_$pol" 2048 16 4 4096 4 $pol
  run "gq_d4096_h32_kv8_s2048_b4_$pol" 4096 32 8 2048 4 $pol
  run "gq_d2048_h16_kv8_s2048_b8_$pol" 2048 16 8 2048 8 $pol
  run "gq_d2048_h16_kv2_s2048_b8_$pol" 2048 16 2 2048 8 $pol
  run "gq_d1024_h8_kv2_s2048_b8_$pol" 1024 8 2 2048 8 $pol
done
