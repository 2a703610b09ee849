#!/usr/bin/env bash
# Megatron-Core's host time per layer at several commits, interleaved (each repetition runs every commit back to back:
# the VM host's speed drifts between minutes, so a ratio is taken within one repetition). Each row of
# megatron_layer_host.py's output is tagged with its commit ("variant") and repetition ("rep") in
# OUT_DIR/layer_versions.jsonl. Written for the Qwen3 2026-script row's open question (docs/validation.md, "Known
# misses"): Megatron-LM main@932b7674 (its code) against @d98e8a64 (the presets' figures) and @1e057005 (the older
# Qwen3 rows' code). Usage on the device, repository root, each commit's megatron/core under .mlm/<commit>/:
#   bash calibration/torch/megatron_versions_host.sh OUT_DIR REPS ROWS COMMIT...
#   e.g. bash calibration/torch/megatron_versions_host.sh $OUT/v 3 dense_llama_tiny,moe64_top8_alltoall_tiny \
#          932b7674 d98e8a64 1e057005
set -u
out=$1; reps=$2; rows=$3; shift 3
mkdir -p "$out"
{ date; nvidia-smi --query-gpu=name,serial,driver_version,power.limit --format=csv
  python3 -c "import torch, sys; print('torch', torch.__version__, sys.version)"
  lscpu | grep -E "^CPU\(s\)|Model name"; } > "$out/env.txt" 2>&1
for rep in $(seq 1 "$reps"); do
  for v in "$@"; do
    rm -f /tmp/versions_host.jsonl
    echo "== rep $rep variant $v $(date +%T)" >> "$out/run.log"
    timeout 150 python3 calibration/torch/megatron_layer_host.py --megatron ".mlm/$v" --out /tmp/versions_host.jsonl \
      --only "$rows" --port "2963$rep" >> "$out/run.log" 2>&1
    [ -f /tmp/versions_host.jsonl ] && python3 -c "
import json, sys
for line in open('/tmp/versions_host.jsonl'):
    r = json.loads(line); r['variant'] = sys.argv[1]; r['rep'] = int(sys.argv[2]); print(json.dumps(r))" "$v" "$rep" \
      >> "$out/layer_versions.jsonl"
  done
done
date >> "$out/env.txt"
