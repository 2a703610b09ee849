#!/usr/bin/env python3
"""GPU kernels of one Megatron-Core MoE transformer layer, forward + backward, at the per-rank shapes
of the Qwen3-235B-A22B TP4 EP8 rows (scenarios/validation/at_scale/qwen3-235b-h100-*).

Megatron-Core's TransformerBlock with its local spec (Megatron's ColumnParallelLinear/RowParallelLinear,
RMSNorm through torch, QK layernorm, the router, the all-to-all token dispatcher and SequentialMLP
experts) on one GPU with TP = EP = 1. Per-rank shapes of the rows: hidden 4096; 64 query heads and 4
KV groups split by TP4 -> 16 query heads and 1 KV group of head_dim 128; 4,096 tokens at the MoE;
128 experts top-8 with ffn 1536 split by EP8 -> 16 local experts. One GPU cannot run the EP exchange,
so the layer is given 16 experts top-8 over 4,096 tokens: the permutation then has the 32,768 rows
and each expert the 2,048 tokens that the rank's 16 experts receive after the all-to-all under forced
balance (`moe_router_force_load_balancing`: random router logits); the router scores 16 experts
instead of 128.

Variant `sdpa_s16k_top2` runs 16,384 tokens (the attention's share of a rank in the 16K CP1 row) with
top-2 of 16 experts, which gives the experts the same 32,768 rows (2,048 per expert); the router and the
permutations then see 16,384 tokens instead of 4,096. Variant `mixtral_local` is megatron_layer_host.py's
Mixtral-like row (h 4096, 32 heads, ffn 14336, 8 experts top-2, local attention), traced.

Variants: `sdpa` replaces the local spec's unfused core attention with torch's
scaled_dot_product_attention (flash/cuDNN, as the rows' Transformer Engine attention); `local` keeps
the unfused one. No Transformer Engine, so no TE grouped GEMM (SequentialMLP: one GEMM per expert),
no fused permute/router kernels, no gradient-accumulation fusion (weight gradients are written in
bf16 to .grad), no TP/EP collectives.

Writes, per variant, a Chrome trace of one profiled forward + backward (OUT/<variant>.trace.json)
and one JSON line with the kernel count, GPU busy time and CUDA-event times of the step. Usage (on the
device): python3 megatron_moe_kernels.py --megatron PATH_CONTAINING_megatron --out DIR
"""
import argparse, json, os, statistics, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="sdpa,local,sdpa_e128")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import emit, init, kernel_time_us, profiled_step
    torch = init(args.megatron, 29558)
    import torch.nn.functional as F
    from megatron.core.transformer.module import MegatronModule
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    class SDPACoreAttention(MegatronModule):
        """Causal attention through torch SDPA; takes/returns Megatron's [s, b, heads, d] / [s, b, h]."""

        def __init__(self, config, layer_number, attn_mask_type, attention_type, **kwargs):
            super().__init__(config=config)

        def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                    packed_seq_params=None):
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, heads, s, d]
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            s, b = query.shape[0], query.shape[1]
            return o.permute(2, 0, 1, 3).reshape(s, b, -1)

    os.makedirs(args.out, exist_ok=True)
    summary = open(os.path.join(args.out, "summary.jsonl"), "w")
    summary.write(json.dumps(dict(kind="env", torch=torch.__version__, cuda=torch.version.cuda,
                                  gpu=torch.cuda.get_device_name())) + "\n")

    def measure(variant, layers=2, h=4096, heads=16, groups=1, d=128, s=4096, experts=16, topk=8,
                moe_ffn=1536, qwen=True):
        rec = dict(kind="moe_layer", variant=variant, layers=layers, hidden=h, heads=heads, groups=groups,
                   head_dim=d, seq=s, experts=experts, topk=topk, moe_ffn=moe_ffn)
        try:
            kw = dict(num_layers=layers, hidden_size=h, num_attention_heads=heads, num_query_groups=groups,
                      kv_channels=d, ffn_hidden_size=12288, bf16=True, params_dtype=torch.bfloat16,
                      pipeline_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
                      add_bias_linear=False, gated_linear_unit=True, activation_func=F.silu,
                      normalization="RMSNorm", num_moe_experts=experts, moe_router_topk=topk,
                      moe_ffn_hidden_size=moe_ffn, moe_token_dispatcher_type="alltoall", moe_grouped_gemm=False,
                      moe_router_load_balancing_type="aux_loss")
            if qwen:  # ModelZoo Qwen3-235B-A22B.yaml: QK layernorm, eps 1e-6, fp32 router, forced balance
                kw.update(layernorm_epsilon=1e-6, qk_layernorm=True, moe_aux_loss_coeff=1e-3,
                          moe_router_dtype="fp32", moe_router_force_load_balancing=True)
            else:  # megatron_layer_host.py's Mixtral-like row, as it was configured there
                kw.update(ffn_hidden_size=moe_ffn, moe_aux_loss_coeff=1e-2)
            cfg = TransformerConfig(**kw)
            spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, qk_layernorm=qwen,
                                            normalization="RMSNorm")
            if variant.startswith("sdpa"):
                spec.submodules.self_attention.submodules.core_attention = SDPACoreAttention
            block = TransformerBlock(cfg, spec).cuda().bfloat16()
            x = torch.randn(s, 1, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def step():
                with torch.profiler.record_function("FWD"):
                    y = block(x, attention_mask=None)
                    loss = y.float().square().mean()
                with torch.profiler.record_function("BWD"):
                    loss.backward()

            prof = profiled_step(torch, step)
            kernels, busy_us, by_name = 0, 0.0, {}
            for e in prof.events():
                # (FWD/BWD are the record_function ranges, which the profiler also lists on the GPU.)
                if e.device_type == torch.autograd.DeviceType.CUDA and e.name not in ("FWD", "BWD"):
                    t = kernel_time_us(e)
                    kernels += 1
                    busy_us += t
                    n = e.name[:90]
                    c = by_name.setdefault(n, [0, 0.0])
                    c[0] += 1
                    c[1] += t
            prof.export_chrome_trace(os.path.join(args.out, f"{variant}.trace.json"))
            rec.update(step_kernels=kernels, step_gpu_busy_us=busy_us,
                       top_kernels=sorted(([k, v[0], round(v[1], 1)] for k, v in by_name.items()),
                                          key=lambda r: -r[2])[:40])
            # Step time by CUDA events (fwd + bwd), median of 10.
            ts = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                step()
                b.record()
                torch.cuda.synchronize()
                ts.append(a.elapsed_time(b) * 1e3)
            rec["step_event_us_median"] = statistics.median(ts)
            rec["step_event_us_all"] = [round(t, 1) for t in ts]
            rec["max_memory_allocated"] = torch.cuda.max_memory_allocated()
            del block, x
            torch.cuda.empty_cache()
        except Exception as e:
            import traceback
            rec["error"] = repr(e)[:500]
            rec["trace"] = traceback.format_exc()[-3000:]
        emit(summary, rec, hidden=("trace", "top_kernels"))
        for r in rec.get("top_kernels", [])[:25]:
            print(f"  {r[2]:10.1f} us {r[1]:5d}  {r[0]}", flush=True)

    for v in args.variants.split(","):
        if v == "sdpa_e128":  # the single-GPU EP1 shape: 128 experts of 256 tokens each
            measure(v, experts=128)
        elif v == "sdpa_s16k_top2":  # the 16K CP1 row's rank: 16,384 tokens at the attention, 32,768 expert rows
            measure(v, s=16384, topk=2)
        elif v == "mixtral_local":  # megatron_layer_host.py's moe8_top2_alltoall_mixtral_like, traced
            measure(v, heads=32, groups=None, d=None, experts=8, topk=2, moe_ffn=14336, qwen=False)
        else:
            measure(v)
    summary.close()


if __name__ == "__main__":
    main()
