#!/usr/bin/env python3
"""Where the host time of a Megatron-Core MoE layer's forward goes, phase by phase.

Same set-up as megatron_layer_host.py (Megatron-Core local spec, one GPU, TP = EP = 1, tiny shapes so the
host sets the pace). Each phase's Python entry point is wrapped with a host timer (time.perf_counter;
nested phases are counted in their own row and in their parent's): the router (gating GEMM + routing),
its routing function (what --moe-router-fusion replaces with one fused kernel), the token dispatcher's
steps, permute / unpermute / sort_chunks_by_idxs (what --moe-permute-fusion replaces with fused kernels),
and the experts. Forward only, under no_grad, averaged over iterations; per layer and call.

Usage (on the device): python3 calibration/torch/megatron_moe_phases.py --megatron PATH --out FILE
"""
import argparse, collections, functools, json, os, sys, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import init
    torch = init(args.megatron, 29558)
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    import megatron.core.transformer.moe.router as router_mod
    import megatron.core.transformer.moe.token_dispatcher as td
    import megatron.core.transformer.moe.experts as experts_mod
    import megatron.core.transformer.moe.moe_layer as moe_layer_mod

    acc = collections.defaultdict(float)
    calls = collections.defaultdict(int)

    def timed(name, fn):
        @functools.wraps(fn)
        def w(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[name] += time.perf_counter() - t0
                calls[name] += 1
        return w

    router_mod.TopKRouter.forward = timed("router", router_mod.TopKRouter.forward)
    router_mod.TopKRouter.routing = timed("router.routing", router_mod.TopKRouter.routing)
    for f in ("permute", "unpermute", "sort_chunks_by_idxs"):
        setattr(td, f, timed(f, getattr(td, f)))
    for m in ("dispatch_preprocess", "token_dispatch", "dispatch_postprocess", "combine_preprocess", "token_combine",
              "combine_postprocess"):
        setattr(td.MoEAlltoAllTokenDispatcher, m, timed("dispatcher." + m, getattr(td.MoEAlltoAllTokenDispatcher, m)))
    experts_mod.SequentialMLP.forward = timed("experts", experts_mod.SequentialMLP.forward)
    moe_layer_mod.MoELayer.forward = timed("moe_layer", moe_layer_mod.MoELayer.forward)

    out = open(args.out, "w")
    for experts, topk, ffn in ((8, 2, 512), (64, 8, 128)):
        layers = 8
        cfg = TransformerConfig(num_layers=layers, hidden_size=256, num_attention_heads=4, ffn_hidden_size=ffn,
                                bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
                                hidden_dropout=0.0, attention_dropout=0.0, add_bias_linear=False,
                                gated_linear_unit=True, activation_func=torch.nn.functional.silu,
                                normalization="RMSNorm", num_moe_experts=experts, moe_router_topk=topk,
                                moe_token_dispatcher_type="alltoall", moe_grouped_gemm=False,
                                moe_ffn_hidden_size=ffn, moe_router_load_balancing_type="aux_loss",
                                moe_aux_loss_coeff=1e-2)
        block = TransformerBlock(cfg, get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                                               normalization="RMSNorm")).cuda().bfloat16()
        x = torch.randn(128, 1, 256, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            for _ in range(3):
                block(x, attention_mask=None)
            torch.cuda.synchronize()
            acc.clear(); calls.clear()
            iters = 10
            t0 = time.perf_counter()
            for _ in range(iters):
                block(x, attention_mask=None)
            torch.cuda.synchronize()
            total = time.perf_counter() - t0
        rec = dict(kind="moe_phases", experts=experts, topk=topk, layers=layers, iters=iters,
                   forward_ms_per_layer=total / iters / layers * 1e3,
                   phases_ms_per_layer={k: v / iters / layers * 1e3 for k, v in sorted(acc.items())},
                   calls_per_layer={k: v / iters / layers for k, v in sorted(calls.items())})
        out.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
        del block
    out.close()


if __name__ == "__main__":
    main()
