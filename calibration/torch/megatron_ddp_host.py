#!/usr/bin/env python3
"""Host (CPU) time that Megatron-Core's DistributedDataParallel wrapper adds to a micro-batch.

The per-layer host figures (megatron_layer_host.py) were measured on a bare TransformerBlock. In training
the model is wrapped in Megatron-Core's DDP, which
  - registers a backward post-hook on every parameter's gradient accumulator
    (distributed_data_parallel.py `_make_backward_post_hook`): each backward it adds param.grad into the fp32
    main_grad unless Transformer Engine already accumulated the weight gradient there
    (`grad_added_to_main_grad`), drops param.grad and, under overlap_grad_reduce, calls
    `register_grad_ready` (which acts only in the last micro-batch);
  - under overlap_param_gather registers a forward pre-hook on every module (`_make_forward_pre_hook`): each
    forward it walks the module's own parameters and calls `finish_param_sync` of their bucket group;
  - in the last micro-batch, starts each bucket's gradient reduction from the hook of its last parameter.

On one GPU with host-bound shapes (every kernel a few microseconds) the wall time of a micro-batch is the
host's, so the difference between the wrapped and the bare block is the wrapper's host time. Variants:
  bare            the block alone (as megatron_layer_host.py)
  ddp_add         DDP, inside no_sync (a micro-batch that is not the last): hooks plus the main_grad add kernel
  ddp_te          as ddp_add with grad_added_to_main_grad set, as Transformer Engine's fused weight-gradient
                  accumulation leaves it: the hooks alone
  ddp_te_pg       ddp_te plus overlap_param_gather's forward pre-hooks on every module
  *_fwd           the same, forward only under no_grad (the pre-hooks also run in a recompute's forward)
  step_bare/step_ddp_te_pg  a whole step of M micro-batches: zero_grad_buffer, M-1 under no_sync, the last with
                  the gradient reductions (one rank: NCCL calls over a group of one), finish_grad_sync

Writes one JSON object per line. Usage (on the device, repository root):
  python3 calibration/torch/megatron_ddp_host.py --megatron PATH_CONTAINING_megatron --out FILE
"""
import os, sys


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import ddp_config, emit, llama_block_config, record_error, start, wall_us_per_call
    torch, args, out = start(29561)
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.distributed import DistributedDataParallel

    def median_us(fn, iters):
        return wall_us_per_call(torch, fn, iters, 7)

    def measure(name, layers, h, heads, ffn, s, experts=None, topk=2, microbatches=8):
        rec = dict(kind="megatron_ddp_host", name=name, layers=layers, hidden=h, ffn=ffn, seq=s,
                   experts=experts or 0, topk=topk if experts else 0, microbatches=microbatches)
        try:
            cfg = llama_block_config(torch, layers, h, heads, ffn, experts, topk)
            spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, normalization="RMSNorm")
            # A fresh block for every wrapper: DDP's hooks stay on the parameters it wrapped.
            make_block = lambda: TransformerBlock(cfg, spec).cuda().bfloat16()
            block = make_block()
            params = [p for p in block.parameters() if p.requires_grad]
            rec["params"] = len(params)
            rec["modules"] = sum(1 for _ in block.modules())
            rec["modules_with_own_params"] = sum(1 for m in block.modules() if any(True for _ in m.parameters(recurse=False)))
            x = torch.randn(s, 1, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def mb(model):
                model(x, attention_mask=None).float().square().mean().backward()

            def fwd(model):
                with torch.no_grad():
                    model(x, attention_mask=None)

            for _ in range(3):
                mb(block)
            rec["bare_us"] = median_us(lambda: mb(block), 10)
            rec["bare_fwd_us"] = median_us(lambda: fwd(block), 10)
            rec["step_bare_us"] = median_us(lambda: [mb(block) for _ in range(microbatches)], 1)
            for p in params:
                p.grad = None

            def wrap(param_gather):
                nonlocal params
                fresh = make_block()
                params = [p for p in fresh.parameters() if p.requires_grad]
                return DistributedDataParallel(cfg, ddp_config(grad_reduce_in_fp32=True, overlap_grad_reduce=True,
                                                               overlap_param_gather=param_gather,
                                                               use_distributed_optimizer=True,
                                                               check_for_nan_in_grad=False,
                                                               bucket_size=40_000_000), fresh)

            def te_flags(model):
                for p in params:
                    p.grad_added_to_main_grad = True

            def nosync_us(model, te, forward_only=False):
                if te:
                    te_flags(model)
                fn = (lambda: fwd(model)) if forward_only else (lambda: mb(model))
                with model.no_sync():
                    for _ in range(3):
                        fn()
                    return median_us(fn, 10)

            ddp = wrap(False)
            rec["buckets"] = len(ddp.bucket_groups) + len(getattr(ddp, "expert_parallel_bucket_groups", []))
            rec["ddp_add_us"] = nosync_us(ddp, te=False)
            rec["ddp_te_us"] = nosync_us(ddp, te=True)
            rec["ddp_te_fwd_us"] = nosync_us(ddp, te=True, forward_only=True)
            del ddp
            torch.cuda.empty_cache()
            ddp = wrap(True)
            rec["ddp_te_pg_us"] = nosync_us(ddp, te=True)
            rec["ddp_te_pg_fwd_us"] = nosync_us(ddp, te=True, forward_only=True)

            def step_ddp():
                ddp.zero_grad_buffer()
                te_flags(ddp)
                with ddp.no_sync():
                    for _ in range(microbatches - 1):
                        mb(ddp)
                mb(ddp)
                ddp.finish_grad_sync()

            for _ in range(2):
                step_ddp()
            rec["step_ddp_te_pg_us"] = median_us(step_ddp, 1)
            n = rec["params"]
            per = lambda k: (rec[k][0] - rec["bare_us"][0]) / n
            rec["hook_us_per_param_with_add"] = per("ddp_add_us")
            rec["hook_us_per_param_te"] = per("ddp_te_us")
            rec["prehook_us_per_module_fwd"] = (rec["ddp_te_pg_fwd_us"][0] - rec["ddp_te_fwd_us"][0]) / rec["modules"]
            rec["step_extra_us"] = rec["step_ddp_te_pg_us"][0] - rec["step_bare_us"][0]
            del ddp, block, x
            torch.cuda.empty_cache()
        except Exception:
            record_error(rec)
        emit(out, rec)

    # Host-bound shapes: dense Llama-style, and MoE with 16 local experts top-8 (a Qwen3-235B EP 8 rank's count).
    measure("dense_llama_tiny", 8, 256, 4, 768, 128)
    measure("moe16_top8_tiny", 8, 256, 4, 128, 128, experts=16, topk=8)
    measure("moe16_top8_tiny_4layers", 4, 256, 4, 128, 128, experts=16, topk=8)
    out.close()


if __name__ == "__main__":
    main()
