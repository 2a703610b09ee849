#!/bin/bash
# One H200: Megatron-LM (MLM, folder holding megatron/ and pretrain_gpt.py) on the Megatron README 1.7B row's
# per-GPU job (4 micro-batches of 1 x 4,096 tokens), local spec, two variants (third arg 'host': the host-time runs; 'nan_ab': with and without the NaN checks, alternating). Usage: megatron_pretrain_step.sh MLM OUTDIR [host]
export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1; MLM=$1; OUT=$2; HERE=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/env.txt
python3 -c "import torch,sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())" >> $OUT/env.txt
COMMON="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --max-position-embeddings 4096
 --micro-batch-size 1 --global-batch-size 4 --bf16 --transformer-impl local --untie-embeddings-and-output-weights
 --tokenizer-type NullTokenizer --vocab-size 131071 --mock-data --overlap-grad-reduce
 --no-gradient-accumulation-fusion --no-masked-softmax-fusion --lr 1e-4 --lr-decay-style constant
 --weight-decay 0.1 --clip-grad 1.0 --train-iters 10 --log-interval 1 --eval-iters 0 --eval-interval 100000
 --log-throughput --distributed-backend nccl --no-persist-layer-norm --timing-log-level 1"
run() { # name, timeout, extra args
  local name=$1 t=$2; shift 2
  echo "=== $name: $*" | tee $OUT/log_$name.txt
  timeout $t python3 $HERE/megatron_pretrain_step.py $MLM $OUT/profile_$name.json ${PROFILE_ITER:-8} -- $COMMON "$@" 2>&1 \
    | grep -v "Warning\|warn(" >> $OUT/log_$name.txt
  echo "rc ${PIPESTATUS[0]}" >> $OUT/log_$name.txt
  grep -E "elapsed time per iteration|forward-backward|optimizer |memory \(MB\)|profiled|shims|Error|error" $OUT/log_$name.txt | tail -25
}
if [ "$3" = nan_ab ]; then  # the NaN checks' cost, alternating runs with and without them (host speed drifts)
  export PROFILE_ITER=99
  for k in 1 2; do
    run sdpa_nan_$k 100 --seq-length 4096 --spec megatron_sdpa_spec layer_spec
    run sdpa_nonan_$k 100 --seq-length 4096 --spec megatron_sdpa_spec layer_spec --no-check-for-nan-in-loss-and-grad
  done
elif [ "$3" = host ]; then  # second call: the host's time (GPU work 16x smaller)
  export PROFILE_ITER=99
  run sdpa_seq256 60 --seq-length 256 --spec megatron_sdpa_spec layer_spec --train-iters 8
else
  run sdpa 125 --seq-length 4096 --spec megatron_sdpa_spec layer_spec
  run local 105 --seq-length 4096
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $OUT/env.txt
