#!/bin/bash
# Seed for the Megatron importer's fuzzer: case, if/else, arithmetic, arrays, defaults.
SIZE=${SIZE:-8b}
GPUS_PER_NODE=8
NNODES=$(( 2 * 2 ))
case "$SIZE" in
  7b|8b) TP=2; PP=1 ;;
  70b)
    TP=8
    PP=$(( NNODES / 2 ))
    ;;
  *) TP=4; PP=2 ;;
esac
if [ "$FP8" = 1 ]; then
  PREC=(--fp8-format hybrid --fp8-amax-history-len 1024)
else
  PREC=(--bf16)
fi
MODEL_ARGS=(
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336
  --num-attention-heads 32 --group-query-attention --num-query-groups 8
  --seq-length 8192 --max-position-embeddings 8192 --vocab-size 128256
  --swiglu --untie-embeddings-and-output-weights
)
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py ${MODEL_ARGS[@]} ${PREC[@]} \
  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP --sequence-parallel \
  --micro-batch-size 1 --global-batch-size $(( 16 * 8 )) --use-distributed-optimizer \
  --overlap-grad-reduce --overlap-param-gather --recompute-granularity full --recompute-method block \
  --recompute-num-layers 2 --use-flash-attn
