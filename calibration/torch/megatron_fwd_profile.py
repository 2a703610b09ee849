#!/usr/bin/env python3
"""Where a Megatron-Core version spends the host time of a tiny layer's forward: cProfile of a bare TransformerBlock's
no-grad forward (local spec, Llama-style: RMSNorm, SwiGLU, 8 layers, hidden 256, sequence 128, one GPU), the functions
by own time and by cumulative time. Why (2026-12-05): Megatron-Core @1e057005 ran this forward 2.8x slower on the host
than @d98e8a64 on the same machine (calibration/data/h100-2026-12-05-megatron-version-host).

Usage: python3 megatron_fwd_profile.py --megatron PATH_CONTAINING_megatron [--port P] [--top 25]
"""
import argparse, cProfile, io, os, pstats, sys, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--port", type=int, default=29581)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import init, llama_block_config
    torch = init(args.megatron, args.port)
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    cfg = llama_block_config(torch, 8, 256, 4, 768)
    block = TransformerBlock(cfg, get_gpt_layer_local_spec(normalization="RMSNorm")).cuda().bfloat16()
    x = torch.randn(128, 1, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(5):
            block(x, attention_mask=None)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            block(x, attention_mask=None)
        t1 = time.perf_counter()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            block(x, attention_mask=None)
        prof.disable()
        torch.cuda.synchronize()
    print(f"megatron {args.megatron}: forward host {1e3 * (t1 - t0) / 10:.2f} ms per 8-layer forward (unprofiled)")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        print(f"---- by {key}")
        print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:6000])


if __name__ == "__main__":
    main()
