#!/usr/bin/env bash
# Regenerates the seed-claim scenarios (JAX/XLA mode) from public MaxText / JAX-Toolbox configurations with
# `racksim import maxtext`, then prepends each file's header (why this configuration) from headers/NAME.txt and
# applies the few settings a MaxText config cannot hold (the XLA flag for command buffers, the 8-GPU-domain
# hardware override). Run from the repository root:  scenarios/seed_claims/make.sh [path/to/racksim]
# Sources (verbatim copies under tests/data/maxtext, AI-Hypercomputer/maxtext@e591f30cbbf217ed67ef71263ec0538239f9c3b8):
#   L70 = src/maxtext/configs/gpu/models/llama3_70b.yml  (llama3-70b, per_device_batch_size 4, 8192 tokens, remat full)
#   L7  = src/maxtext/configs/gpu/models/llama2_7b.yml   (llama2-7b, 4096 tokens, minimal_with_context, unscanned)
#   BASE = src/maxtext/configs/base.yml with a model_name and command-line overrides (as MaxText's scripts pass them)
set -euo pipefail
R=${1:-build/sim/cli/racksim}
D=scenarios/seed_claims
T=tests/data/maxtext
L70=$T/gpu/models/llama3_70b.yml
L7=$T/gpu/models/llama2_7b.yml
# The XLA_FLAGS of MaxText's GPU recipes that decide which collectives XLA's collective pipeliner moves across scan
# iterations: src/maxtext/configs/gpu/a3/llama_3.1_405b/128vm.sh (maxtext@5505348a) and gpu/a3/llama_2_7b/1vm.sh
# (maxtext@23be6e4f) both set all three (JAX-Toolbox's MaxText/Axlearn scripts set the same); the rest of those
# flags (combine thresholds, command buffers, dumps) are not read by racksim import maxtext.
XLA="--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true --xla_gpu_enable_pipelined_all_reduce=true --xla_gpu_enable_while_loop_double_buffering=true"
NVL8='overrides: {scale_up.domain_size: 8, scale_up.bandwidth_per_direction: 450 GB/s}'

imp() {  # imp NAME SYSTEM GPUS CONFIG [overrides...]
  local name=$1 sys=$2 gpus=$3 cfg=$4; shift 4
  local tmp; tmp=$(mktemp)
  "$R" -q import maxtext "$cfg" "$@" --system "$sys" --gpus "$gpus" --name "$name" --xla-flags "$XLA" --out "$tmp"
  cat "$D/headers/$name.txt" "$tmp" > "$D/$name.yaml"
  rm -f "$tmp"
}
nvl8() { sed -i "/^  overrides: /d" "$D/$1.yaml"; sed -i "s|^  gpus: \(.*\)|  gpus: \1\n  $NVL8   # the previous generation's 8-GPU NVLink domain (HGX H100/H200: 8 GPUs, 18 NVLink 4 links = 450 GB/s per direction)|" "$D/$1.yaml"; }
# JAX's allocator pool as a script exports it (XLA_PYTHON_CLIENT_MEM_FRACTION; a MaxText config cannot hold it):
# memfrac NAME FRACTION SOURCE
memfrac() { sed -i "s|^  cuda_graphs: \(.*\)|  cuda_graphs: \1\n  xla_client_mem_fraction: $2       # $3 exports XLA_PYTHON_CLIENT_MEM_FRACTION=$2 (JAX's allocator pool)|" "$D/$1.yaml"; }
# Both sides of a claim on the same footing: a Blackwell side has no calibration of its own, so the H100 side of a
# Hopper-vs-Blackwell claim runs its preset's cited figures too (since 2026-12-06 hardware_models/calibrated/h100.yaml
# would otherwise calibrate it by default): uncal NAME
uncal() { sed -i "s|^  gpus: \(.*\)|  gpus: \1\n  calibration: none   # as the Blackwell side of this claim, which has no calibration of its own|" "$D/$1.yaml"; }
nographs() { sed -i 's|^  cuda_graphs: true .*|  cuda_graphs: false              # XLA_FLAGS=--xla_gpu_enable_command_buffer= (JAX-Toolbox docs/frameworks/maxtext/README.md, MaxText gpu/a3 scripts): every thunk launched by the host|' "$D/$1.yaml"; }

# 1: same model and precision, H100 vs GB200 (MaxText's Llama 3 70B GPU config; FSDP over all GPUs as MaxText's
#    gpu/a3/llama_3.1_405b/128vm.sh shards a large dense model: ici_fsdp = the NVLink domain, dcn_fsdp the rest)
imp 01-h100-llama70b-bf16  h100-sxm    256 $L70 ici_fsdp_parallelism=8  dcn_fsdp_parallelism=32
imp 01-gb200-llama70b-bf16 gb200-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4
# 2: command buffers off vs on: JAX-Toolbox's published MaxText Llama 2 7B run (8 GPUs, BS/GPU 2, FSDP 8, flash, minimal_flash, no scan)
imp 02-graphs-off gb200-nvl72 8 $L7 per_device_batch_size=2 ici_fsdp_parallelism=8 remat_policy=minimal_flash
imp 02-graphs-on  gb200-nvl72 8 $L7 per_device_batch_size=2 ici_fsdp_parallelism=8 remat_policy=minimal_flash
nographs 02-graphs-off
memfrac 02-graphs-off 0.90 "JAX-Toolbox@bcbbfa57 docs/frameworks/maxtext/example_slurm.sub"
memfrac 02-graphs-on  0.90 "JAX-Toolbox@bcbbfa57 docs/frameworks/maxtext/example_slurm.sub"
# 3: 72-GPU vs 8-GPU NVLink domain, dense: claim 1's GB200 job; ICI axis = the NVLink domain on each side
imp 03-dense-nvl8  gb200-nvl72 256 $L70 ici_fsdp_parallelism=8  dcn_fsdp_parallelism=32
imp 03-dense-nvl72 gb200-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4
nvl8 03-dense-nvl8
# 4: the same for DeepSeek-V3 (MaxText models/deepseek3-671b.yml) with DeepSeek-V3's published 64-way expert parallelism
imp 04-moe-nvl8  gb200-nvl72 256 $T/base.yml model_name=deepseek3-671b hardware=gpu per_device_batch_size=1 max_target_length=4096 attention=cudnn_flash_te remat_policy=full ici_expert_parallelism=64 ici_fsdp_parallelism=1 dcn_fsdp_parallelism=4 dcn_data_parallelism=1
imp 04-moe-nvl72 gb200-nvl72 256 $T/base.yml model_name=deepseek3-671b hardware=gpu per_device_batch_size=1 max_target_length=4096 attention=cudnn_flash_te remat_policy=full ici_expert_parallelism=64 ici_fsdp_parallelism=1 dcn_fsdp_parallelism=4 dcn_data_parallelism=1
nvl8 04-moe-nvl8
# 5: NVLS off vs on: claim 10's one-rack job (64 GPUs, FSDP inside the NVLink domain)
imp 05-nvls-off gb200-nvl72 64 $L70 ici_fsdp_parallelism=64
imp 05-nvls-on  gb200-nvl72 64 $L70 ici_fsdp_parallelism=64
sed -i 's|^  cuda_graphs: \(.*\)|  cuda_graphs: \1\n  nvls: false                     # NCCL_NVLS_ENABLE=0|' $D/05-nvls-off.yaml
# 6: ZeRO-1 (MaxText shard_optimizer_over_data) vs FSDP, 8 gradient-accumulation micro-steps, Llama 3 8B on 64 GB200
imp 06-fsdp  gb200-nvl72 64 $T/gpu/models/llama3_8b.yml per_device_batch_size=1 gradient_accumulation_steps=8 ici_fsdp_parallelism=64
imp 06-zero1 gb200-nvl72 64 $T/gpu/models/llama3_8b.yml per_device_batch_size=1 gradient_accumulation_steps=8 ici_fsdp_parallelism=1 ici_data_parallelism=64 shard_optimizer_over_data=true
# 7: GB200 vs GB300, each with the fastest MaxText remat policy that fits (base.yml's speed order)
imp 07-gb200-full      gb200-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4 remat_policy=save_dot_except_mlpwi
imp 07-gb300-selective gb300-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4 remat_policy=save_dot_with_context_except_mlp
# 8: remat (the config's full) vs MaxText's offload policy that fits Grace memory
imp 08-remat   gb200-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4
imp 08-offload gb200-nvl72 256 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=4 remat_policy=qkv_proj_offloaded
# 9: JAX-Toolbox's MaxText NVFP4 example (docs/frameworks/maxtext/nvfp4) on a GB300 tray vs the same job in FP8 on H100
J9="model_name=llama3-8b hardware=gpu scan_layers=False attention=cudnn_flash_te dtype=bfloat16 max_target_length=8192 per_device_batch_size=4 ici_data_parallelism=1 dcn_data_parallelism=1 ici_fsdp_parallelism=4 dcn_fsdp_parallelism=1 gradient_accumulation_steps=1"
#    Both sides run the example's own XLA_FLAGS (nvfp4_example.sh, verbatim but the dump flags): command buffers off,
#    2 GiB combine thresholds (8 GiB / 4), double buffering off, rematerialization pass off.
X9="--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_enable_triton_gemm=false --xla_gpu_enable_command_buffer= --xla_gpu_all_reduce_combine_threshold_bytes=2147483648 --xla_gpu_all_gather_combine_threshold_bytes=2147483648 --xla_gpu_reduce_scatter_combine_threshold_bytes=2147483648 --xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true --xla_gpu_enable_pipelined_all_reduce=true --xla_gpu_enable_while_loop_double_buffering=false --xla_gpu_enable_all_gather_combine_by_dim=false --xla_gpu_enable_reduce_scatter_combine_by_dim=false --xla_disable_hlo_passes=rematerialization"
XLA=$X9 imp 09-gb300-nvfp4 gb300-nvl72 4 $T/base.yml $J9 quantization=te_nvfp4_no_rht remat_policy=minimal_with_context
XLA=$X9 imp 09-h100-fp8    h100-sxm    4 $T/base.yml $J9 quantization=fp8_gpu use_qwix_quantization=true remat_policy=save_dot_except_mlpwi
#    ... and the example's allocator pool, 0.9 of the card, on both sides (on the H100, 77.0 GB: the policy above is the
#    fastest that fits it; save_dot_with_context_except_mlp needs 80.9 GB)
memfrac 09-gb300-nvfp4 0.9 "JAX-Toolbox@bcbbfa57 docs/frameworks/maxtext/nvfp4/nvfp4_example.sh"
memfrac 09-h100-fp8    0.9 "JAX-Toolbox@bcbbfa57 docs/frameworks/maxtext/nvfp4/nvfp4_example.sh"
uncal 01-h100-llama70b-bf16
uncal 09-h100-fp8
# 10: weak scaling, MaxText's Llama 3 70B GPU config: one rack's 64 GPUs vs 8 racks' (ici = the 64 GPUs of a rack)
imp 10-llama70b-64  gb200-nvl72 64  $L70 ici_fsdp_parallelism=64
imp 10-llama70b-512 gb200-nvl72 512 $L70 ici_fsdp_parallelism=64 dcn_fsdp_parallelism=8
echo "regenerated $D"
