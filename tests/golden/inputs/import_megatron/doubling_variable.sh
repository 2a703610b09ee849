A=x
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
A=$A$A$A$A$A$A$A$A$A$A
--num-layers 8 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --vocab-size 128256 --bf16 --swiglu --untie-embeddings-and-output-weights --use-distributed-optimizer
