#!/bin/bash
# One H200: what serializes host and GPU in Megatron-LM's loop on the 1.7B row's per-GPU job (issue #12).
# The flags of megatron_pretrain_step.sh's `sdpa` variant, run by megatron_loop_syncs.py, instrumented
# (timeline, sync debug, one profiled step) and in three variants that each remove one suspect.
# Usage: megatron_loop_syncs.sh MLM OUTDIR   (everything lands in OUTDIR/results.tgz)
export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1; MLM=$1; OUT=$2; HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/loop_syncs; rm -rf $W; mkdir -p $W
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  python3 -c "import torch,sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
  lscpu | grep -E "Model name|^CPU\(s\)|MHz|Thread|Socket"; } > $W/env.txt
COMMON="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --max-position-embeddings 4096
 --micro-batch-size 1 --global-batch-size 4 --bf16 --transformer-impl local --untie-embeddings-and-output-weights
 --tokenizer-type NullTokenizer --vocab-size 131071 --mock-data
 --no-gradient-accumulation-fusion --no-masked-softmax-fusion --lr 1e-4 --lr-decay-style constant
 --weight-decay 0.1 --clip-grad 1.0 --train-iters 10 --log-interval 1 --eval-iters 0 --eval-interval 100000
 --log-throughput --distributed-backend nccl --no-persist-layer-norm --timing-log-level 1
 --seq-length 4096 --spec megatron_sdpa_spec layer_spec"
run() { # name, timeout, extra args; TIMELINE_ITERS / SYNC_ITERS / PROFILE_ITER from the caller
  local name=$1 t=$2; shift 2
  mkdir -p $W/$name; echo "=== $name: T=$TIMELINE_ITERS S=$SYNC_ITERS P=$PROFILE_ITER $*" | tee $W/$name/log.txt
  timeout $t python3 $HERE/megatron_loop_syncs.py $MLM $W/$name -- $COMMON "$@" 2>&1 \
    | grep -v "Warning\|warn(" >> $W/$name/log.txt
  echo "rc ${PIPESTATUS[0]}" >> $W/$name/log.txt
  grep -E "elapsed time per iteration|rc |Error|error" $W/$name/log.txt | sed 's/.*iteration  *\([0-9]*\)\/.*per iteration (ms): \([0-9.]*\).*/it \1 \2/' | tr '\n' ' '; echo
  grep -E "forward-backward \.\." $W/$name/log.txt | awk '{print $NF}' | tr '\n' ' '; echo
  tar -czf $OUT/results.tgz -C $W .
}
TIMELINE_ITERS=3,4,9 SYNC_ITERS=5,6 PROFILE_ITER=8 run instr 110 --overlap-grad-reduce
TIMELINE_ITERS=4 SYNC_ITERS= PROFILE_ITER=0 run nomask 80 --overlap-grad-reduce --no-create-attention-mask-in-dataloader
TIMELINE_ITERS=4 SYNC_ITERS= PROFILE_ITER=0 run nonan 80 --overlap-grad-reduce --no-check-for-nan-in-loss-and-grad
TIMELINE_ITERS=4 SYNC_ITERS= PROFILE_ITER=0 run noovl 80
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $W/env.txt
tar -czf $OUT/results.tgz -C $W .
