#!/usr/bin/env bash
# DeepSeek-V3's layer parts on the host (MLA, its router, a shared expert) against control rows of the same shapes
# with the same core attention (PyTorch SDPA), in one process, the rows in turn, REPS times (megatron_layer_host.py;
# the VM host's speed drifts between minutes). Usage on the device, repository root, .mlm/<commit>/megatron/core:
#   bash calibration/torch/megatron_dsv3_host.sh OUT_DIR COMMIT REPS
set -u
out=$1; v=$2; reps=$3
rows=dense_llama_sdpa_tiny,dense_mla_sdpa_tiny,moe16_top8_tiny,moe16_top8_dsv3router_tiny,moe16_top8_dsv3router_shared_tiny,moe16_top8_dsv3_like_tiny
mkdir -p "$out"
python3 calibration/torch/megatron_layer_host.py --megatron ".mlm/$v" --out "$out/dsv3_host_$v.jsonl" --only "$rows" \
  --reps "$reps" > "$out/run_$v.log" 2>&1
