#!/usr/bin/env bash
# Compiles (does not run) MaxText's Llama 2 7B A3 step (AI-Hypercomputer/maxtext@efb6d9e4
# MaxText/configs/a3/llama_2_7b/{1,2,16}vm.sh: ici_fsdp 8, dcn_data = #VMs, per_device_batch_size 4,
# seq 4096, cudnn_flash_te, minimal_flash, scan_layers false, use_iota_embed) for 8, 16 and 128 GPUs on one GPU,
# through JAX's mock GPU topology (mock_compile.py), each with its script's XLA_FLAGS. Usage, on the device,
# from the repository root:   bash calibration/jax/mock_compile.sh OUTDIR [run]
# (`run`: compile the 1-VM program and also run it on this GPU, below.)
# --xla_gpu_shard_autotuning=false: XLA shards autotuning over the job's processes and waits for the others'
# results through the distributed key-value store, which the mocked processes never write (the compile hangs).
# XLA flags this XLA no longer knows are dropped (XLA aborts on an unknown flag) and listed in OUTDIR/flags_*.txt.
set -u
OUT=$1; mkdir -p "$OUT"
COMMON="--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_enable_triton_gemm=false --xla_gpu_graph_level=0 --xla_gpu_enable_command_buffer=
 --xla_gpu_enable_highest_priority_async_stream=true --xla_gpu_enable_pipelined_all_gather=true
 --xla_gpu_enable_pipelined_reduce_scatter=true --xla_gpu_enable_pipelined_all_reduce=true
 --xla_gpu_enable_while_loop_double_buffering=true --xla_gpu_enable_triton_softmax_fusion=false
 --xla_gpu_enable_all_gather_combine_by_dim=false --xla_gpu_enable_reduce_scatter_combine_by_dim=false
 --xla_disable_hlo_passes=rematerialization --xla_gpu_shard_autotuning=false"
thresholds() {  # all_reduce all_gather reduce_scatter (bytes)
  echo "--xla_gpu_all_reduce_combine_threshold_bytes=$1 --xla_gpu_all_gather_combine_threshold_bytes=$2 --xla_gpu_reduce_scatter_combine_threshold_bytes=$3"
}
known_flags() {  # drop the flags this XLA rejects; print the rest
  local flags="$1" tag="$2"
  for i in 1 2 3 4 5 6 7 8; do
    err=$(XLA_FLAGS="$flags" python3 -c "import jax, jax.numpy as jnp; jnp.zeros(1).block_until_ready()" 2>&1 >/dev/null)
    bad=$(echo "$err" | grep -i "unknown flag" | grep -o -- "--xla_[a-z0-9_]*" | sort -u)
    [ -z "$bad" ] && break
    echo "dropped: $bad" >> "$OUT/flags_$tag.txt"
    for b in $bad; do flags=$(echo "$flags" | tr ' \n' '\n\n' | grep -v -- "^$b=" | tr '\n' ' '); done
  done
  echo "$flags" | tr -s ' \n' '  ' > "$OUT/flags_${tag}_used.txt"
  echo "$flags"
}
run() {  # name topology mesh B flags [more mock_compile.py arguments]
  local f; f=$(known_flags "$5" "$1")
  XLA_FLAGS="$f" XLA_PYTHON_CLIENT_MEM_FRACTION=${MEM_FRACTION:-0.85} CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_FUSED_ATTN=1 \
    timeout 300 python3 calibration/jax/mock_compile.py --name "$1" --topology "$2" --mesh "$3" --B "$4" \
    --outdir "$OUT" "${@:6}" > "$OUT/$1.log" 2>&1
  echo "$1 rc=$?"; tail -2 "$OUT/$1.log"
}
if [ "${2:-}" = run ]; then
  # The 1-VM program run on this GPU (its shard of every input; the collectives go to JAX's mock NCCL): the
  # per-GPU time of the 8-GPU step without its communication, at per-device batch 4 (MaxText's A3 rows) and 2
  # (the JAX-Toolbox row's batch, with 1vm.sh's flags).
  run mt_1vm_run 1x8x1 1,8 4 "$COMMON $(thresholds 134217728 134217728 67108864)" --iota-embed --run 8
  run mt_1vm_b2_run 1x8x1 1,8 2 "$COMMON $(thresholds 134217728 134217728 67108864)" --iota-embed --run 8
  exit 0
fi
if [ "${2:-}" = mem ]; then
  # The 1-VM program under the A3 VM's memory budget. XLA's latency hiding scheduler budgets against the module's
  # device_memory_size (gpu_hlo_schedule.cc GetSchedulerMemoryLimit: less the inputs and outputs, x the slop
  # factor), which the GPU client may set from its allocator (not checked; the last compile covers the reading where
  # it does not): XLA_PYTHON_CLIENT_MEM_FRACTION=0.85 (1vm.sh) of an
  # 80 GB H100 is 72.7e9 bytes. On an H200 the same allocator is the fraction A3_FRACTION (default 0.5055 of its
  # 143.8e9 bytes). Three compiles, all with the row's fp32 logits: the H200's 0.85 (as mock_compile.sh's other
  # programs), the A3's allocator, the A3's allocator with the scheduler's limit lifted (slop factor 1000%,
  # which only the scheduler reads), and the H100's limit through the slop factor alone. The logs keep the scheduler's
  # memory lines (TF_CPP_VMODULE). Run on an 80 GB H100 on 2026-12-06 with A3_FRACTION=0.85 H100_SLOP=95
  # (calibration/data/h100-2026-12-06-mock-compile-mem): the scheduler's peak, 55.0e9 bytes, stays under its 59.0e9
  # limit, and both programs replay to 1.278 s.
  A3="$COMMON $(thresholds 134217728 134217728 67108864)"
  export TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=latency_hiding_scheduler=1,gpu_hlo_schedule=1
  [ -n "${WITH_085:-}" ] && MEM_FRACTION=0.85 run mem_1vm_085 1x8x1 1,8 4 "$A3" --iota-embed --logits-fp32
  MEM_FRACTION=${A3_FRACTION:-0.5055} run mem_1vm_a3 1x8x1 1,8 4 "$A3" --iota-embed --logits-fp32
  MEM_FRACTION=${A3_FRACTION:-0.5055} run mem_1vm_a3_nolimit 1x8x1 1,8 4 "$A3 --xla_gpu_memory_limit_slop_factor=1000" --iota-embed --logits-fp32
  # If the client leaves device_memory_size unset, the base is 80% of the card's memory whatever the fraction: an
  # 80 GB H100's limit is then this card's scaled by the slop factor H100_SLOP (default 53 on an H200:
  # 95 x (0.8 x 85.5e9 - 10.1e9 of inputs) / (0.8 x 143.8e9 - 10.1e9)).
  [ "${H100_SLOP:-53}" != 95 ] && MEM_FRACTION=0.85 run mem_1vm_h100slop 1x8x1 1,8 4 "$A3 --xla_gpu_memory_limit_slop_factor=${H100_SLOP:-53}" --iota-embed --logits-fp32
  for f in "$OUT"/mem_1vm*.log; do grep -i -E "memory|limit" "$f" | head -300 > "${f%.log}.memory_lines.txt"; gzip -f "$f"; done
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/device_env.txt" 2>&1
  exit 0
fi
if [ "${2:-}" = seed10 ]; then
  # Seed claim 10's pair (scenarios/seed_claims/10-llama70b-{64,512}.yaml): MaxText's Llama 3 70B GPU config
  # (gpu/models/llama3_70b.yml: per_device_batch_size 4, seq 8192, remat full, scanned layers, cuDNN flash) with FSDP
  # over 64 GPUs (one rack: 16 trays of 4) and 512 (8 racks), under the collective pipeliner's flags the seed scenarios
  # carry (128vm.sh@5505348a) and XLA's default combine thresholds. GB200 is compiled for as this Hopper GPU.
  SEED="--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_enable_pipelined_all_gather=true
   --xla_gpu_enable_pipelined_reduce_scatter=true --xla_gpu_enable_pipelined_all_reduce=true
   --xla_gpu_enable_while_loop_double_buffering=true --xla_gpu_shard_autotuning=false"
  L70="--L 80 --D 8192 --H 64 --KV 8 --F 28672 --V 128256 --S 8192 --scan --policy full"
  run c10_64 16x4x1 1,64 4 "$SEED" $L70
  run c10_512 128x4x1 1,512 4 "$SEED" $L70
  exit 0
fi
run mt_1vm 1x8x1 1,8 4 "$COMMON $(thresholds 134217728 134217728 67108864)" --iota-embed
run mt_2vm 2x8x1 2,8 4 "$COMMON $(thresholds 67108864 134217728 67108864)" --iota-embed
run mt_16vm 16x8x1 16,8 4 "$COMMON $(thresholds 1073741824 134217728 134217728)" --iota-embed
