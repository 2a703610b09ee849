#!/usr/bin/env python3
"""Host (CPU) time of Megatron-Core transformer layers in eager mode, dense and MoE.

Megatron-Core's own TransformerBlock (local spec: Megatron's ColumnParallelLinear/RowParallelLinear,
its attention, bias-dropout-add, router, token dispatcher and SequentialMLP experts; Transformer
Engine is not on the device, so TE's modules, which do more Python work per call, are not measured)
on one GPU with the parallel state initialised for TP = PP = EP = 1.

At small shapes the GPU finishes every kernel before the host issues the next, so the wall time of a
step is the host's: Python module code, the dispatcher, autograd, and for MoE the token dispatcher's
device-to-host copies of the routing counts, which stop the host until the GPU has caught up.

Writes one JSON object per line. Usage (on the device, repository root):
  python3 calibration/torch/megatron_layer_host.py --megatron PATH_CONTAINING_megatron --out FILE
      [--only NAME,NAME] [--port P]   (only those rows; another rendezvous port for a second run)
      [--no-nvtx-lookup]              (Megatron-LM 2025-05-16..06-09: NVTX range names made constant, megatron_single_gpu.py)
      [--reps N]                      (every selected row N times, in turn, in this one process)
"""
import argparse, json, os, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated row names (default: every row)")
    ap.add_argument("--port", type=int, default=29557)
    ap.add_argument("--no-nvtx-lookup", action="store_true", help="NVTX range names made constant (2025-05-16..06-09)")
    ap.add_argument("--reps", type=int, default=1, help="measure the rows this many times, in turn, in one process")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import (disable_nvtx_lookup, emit, init, kernel_time_us, profiled_step, record_error,
                                     wall_us_per_call)
    torch = init(args.megatron, args.port)
    if args.no_nvtx_lookup:
        disable_nvtx_lookup()
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    from megatron.core.transformer.module import MegatronModule

    class SdpaCoreAttention(MegatronModule):
        """The core attention's interface ([s, b, heads, d] in, [s, b, heads * d_v] out), MLA's arguments accepted."""

        def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None,
                     softmax_scale=None, **kwargs):
            super().__init__(config=config)
            self.scale = softmax_scale

        def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                    packed_seq_params=None, **kwargs):
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
            s, b = query.shape[0], query.shape[1]
            return o.permute(2, 0, 1, 3).reshape(s, b, -1)

    out = open(args.out, "w")
    out.write(json.dumps(dict(kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                              megatron=args.megatron, no_nvtx_lookup=args.no_nvtx_lookup)) + "\n")

    def measure(name, layers, h, heads, ffn, s, b, dropout, experts=None, topk=2, dispatcher="alltoall",
                swiglu=False, mla=False, dsv3_router=False, shared_ffn=0, sdpa=False):
        """mla: DeepSeek-V3's multi-latent attention (its recipe's switches: q LoRA, q/kv latent norms, YaRN rope,
        mscale 1.0) at this hidden size; dsv3_router: its router (sigmoid scores in fp32, expert bias, 8 groups
        of which 4 are kept, top-k scaling 2.5, sequence-level aux loss; yanring/Megatron-MoE-ModelZoo@e8650517
        model_configs/benchmarking/DeepSeek-V3.yaml); shared_ffn: a shared expert of that width; sdpa: the core
        attention is PyTorch's fused SDPA (the local DotProductAttention cannot take MLA's head dimensions), so an
        MLA row is compared with an SDPA control row."""
        kw = dict(num_layers=layers, hidden_size=h, num_attention_heads=heads, ffn_hidden_size=ffn,
                  bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
                  hidden_dropout=dropout, attention_dropout=dropout, add_bias_linear=not swiglu,
                  gated_linear_unit=swiglu)
        if swiglu:
            kw["activation_func"] = torch.nn.functional.silu
            kw["normalization"] = "RMSNorm"
        if experts:
            kw.update(num_moe_experts=experts, moe_router_topk=topk, moe_token_dispatcher_type=dispatcher,
                      moe_grouped_gemm=False, moe_ffn_hidden_size=ffn, moe_router_load_balancing_type="aux_loss",
                      moe_aux_loss_coeff=1e-2)
        if dsv3_router:
            kw.update(moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
                      moe_router_num_groups=8, moe_router_group_topk=4, moe_router_topk_scaling_factor=2.5,
                      moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=1e-4,
                      moe_router_dtype="fp32")
        if shared_ffn:
            kw["moe_shared_expert_intermediate_size"] = shared_ffn
        if mla:
            d = h // heads
            kw.update(q_lora_rank=h // 4, kv_lora_rank=h // 8, qk_head_dim=d, qk_pos_emb_head_dim=d // 2,
                      v_head_dim=d, qk_layernorm=True, rotary_scaling_factor=40, mscale=1.0, mscale_all_dim=1.0)
        if only and name not in only:
            return
        rec = dict(kind="megatron_block", name=name, layers=layers, hidden=h, heads=heads, ffn=ffn, seq=s,
                   batch=b, dropout=dropout, experts=experts or 0, topk=topk if experts else 0,
                   dispatcher=dispatcher if experts else "", mla=mla, dsv3_router=dsv3_router, shared_ffn=shared_ffn,
                   sdpa=sdpa, rep=rep)  # main's loop turn, read when called
        try:
            if mla:
                from megatron.core.transformer.transformer_config import MLATransformerConfig
                cfg = MLATransformerConfig(**kw)
            else:
                cfg = TransformerConfig(**kw)
            extra = dict(multi_latent_attention=True, qk_layernorm=True) if mla else {}
            try:
                spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                                normalization="RMSNorm" if swiglu else None, **extra)
            except TypeError:  # Megatron-Core before the spec's normalization argument (r0.8): its LayerNorm spec
                spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, **extra)
            if sdpa:
                spec.submodules.self_attention.submodules.core_attention = SdpaCoreAttention
            # Megatron's Float16Module casts the whole model to bf16 (module.bfloat16()).
            block = TransformerBlock(cfg, spec).cuda().bfloat16()
            x = torch.randn(s, b, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def fwd():
                with torch.no_grad():
                    block(x, attention_mask=None)

            def step():
                block(x, attention_mask=None).float().square().mean().backward()

            prof = profiled_step(torch, step)
            kernels, busy_us, syncs = 0, 0.0, {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    kernels += 1
                    busy_us += kernel_time_us(e)
                elif "Synchronize" in e.name or "cudaMemcpy" in e.name or e.name in ("aten::item", "aten::_local_scalar_dense"):
                    syncs[e.name] = syncs.get(e.name, 0) + 1
            rec.update(step_kernels=kernels, step_gpu_busy_us=busy_us, host_sync_calls=syncs)

            rec["step_wall_us"] = wall_us_per_call(torch, step, 10, 5)[0]
            rec["fwd_wall_us"] = wall_us_per_call(torch, fwd, 10, 5)[0]
            rec["fwd_host_us"] = wall_us_per_call(torch, fwd, 10, 5, wait_for_gpu=False)[0]
            rec["step_wall_us_per_layer"] = rec["step_wall_us"] / layers
            rec["fwd_wall_us_per_layer"] = rec["fwd_wall_us"] / layers
            del block, x
            torch.cuda.empty_cache()
        except Exception:
            record_error(rec)
        emit(out, rec)

    for rep in range(args.reps):
        # Host-bound shapes (GPU time per kernel a few microseconds): the host's time per layer.
        measure("dense_gpt_tiny", 8, 256, 4, 1024, 128, 1, 0.1)
        measure("dense_gpt_tiny_nodrop", 8, 256, 4, 1024, 128, 1, 0.0)
        measure("dense_llama_tiny", 8, 256, 4, 768, 128, 1, 0.0, swiglu=True)
        measure("moe8_top2_alltoall_tiny", 8, 256, 4, 512, 128, 1, 0.0, experts=8, topk=2, swiglu=True)
        measure("moe64_top8_alltoall_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=64, topk=8, swiglu=True)
        measure("moe8_top2_allgather_tiny", 8, 256, 4, 512, 128, 1, 0.0, experts=8, topk=2, dispatcher="allgather",
                swiglu=True)
        # A GPT-1.7B-sized layer (Megatron's weak-scaling row: h 2048, 16 heads, s 4096): GPU vs host.
        measure("dense_gpt_1.7b_layer", 4, 2048, 16, 8192, 4096, 1, 0.1)
        measure("dense_gpt_1.7b_layer_nodrop", 4, 2048, 16, 8192, 4096, 1, 0.0)
        measure("moe8_top2_alltoall_mixtral_like", 2, 4096, 32, 14336, 4096, 1, 0.0, experts=8, topk=2, swiglu=True)
        # DeepSeek-V3's parts against the rows above at the same shapes (2026-12-05): its attention (MLA) against the
        # Llama-style layer, its router against the 64-expert one, a shared expert, and all three in one layer.
        measure("dense_llama_sdpa_tiny", 8, 256, 4, 768, 128, 1, 0.0, swiglu=True, sdpa=True)
        measure("dense_mla_sdpa_tiny", 8, 256, 4, 768, 128, 1, 0.0, swiglu=True, mla=True, sdpa=True)
        measure("moe16_top8_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=16, topk=8, swiglu=True, sdpa=True)
        measure("moe16_top8_dsv3router_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=16, topk=8, swiglu=True,
                dsv3_router=True, sdpa=True)
        measure("moe16_top8_dsv3router_shared_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=16, topk=8, swiglu=True,
                dsv3_router=True, shared_ffn=128, sdpa=True)
        measure("moe16_top8_dsv3_like_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=16, topk=8, swiglu=True, mla=True,
                dsv3_router=True, shared_ffn=128, sdpa=True)
        measure("moe64_top8_dsv3router_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=64, topk=8, swiglu=True,
                dsv3_router=True)
        measure("moe64_top8_dsv3router_shared_tiny", 8, 256, 4, 128, 128, 1, 0.0, experts=64, topk=8, swiglu=True,
                dsv3_router=True, shared_ffn=128)
    out.close()


if __name__ == "__main__":
    main()
