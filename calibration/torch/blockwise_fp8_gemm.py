#!/usr/bin/env python3
"""Blockwise-scaled FP8 GEMMs (DeepSeek-V3 / Transformer Engine "Float8BlockScaling": 1x128 activation
tiles, 128x128 weight blocks) against per-tensor-scaled FP8 and bf16 at the same shapes, on one GPU.

Why: racksim models Megatron's `--fp8-recipe blockwise` as per-tensor FP8 GEMM throughput (the importer says
so). On Hopper the block scales cannot be applied by the tensor cores (they take one scale per operand); the
kernel multiplies each 128-deep partial sum by its scales on the CUDA cores before accumulating. This measures
what that costs through cuBLASLt (torch._scaled_mm with blockwise scale shapes, CUDA >= 12.9), interleaving the
three kinds per shape so that they share the card's power state. It changes no setting of the card.

Usage: python3 blockwise_fp8_gemm.py --out OUT.jsonl [--reps 20] [--rounds 3]
Each line: one shape and kind with its median time, TFLOP/s, the call form that worked, and the error against
fp32 on dequantized operands (a slice). Kinds that the installed torch/cuBLAS refuses are written with the
exception text, so the file says what was and was not available.
"""
import argparse
import json
import statistics

import torch

from sustained_gemm import card_state, timed  # (run from the repository root: this folder is on sys.path)

SHAPES = [  # (m, n, k, label)
    (8192, 8192, 8192, "square 8192"),
    (4096, 32768, 6144, "Mixtral 8x22B expert fc1 (gate+up), 4096 tokens"),
    (4096, 6144, 16384, "Mixtral 8x22B expert fc2, 4096 tokens"),
    (4096, 4096, 7168, "DeepSeek-V3 expert fc1 (gate+up), 4096 tokens"),
    (4096, 7168, 2048, "DeepSeek-V3 expert fc2, 4096 tokens"),
    (8192, 28672, 8192, "Llama 70B MLP up at TP1, 8192 tokens"),
    (6144, 16384, 4096, "wgrad-like: K = 4096 tokens"),
]
def quantize_1x128(x):
    """x (rows, K) bf16 -> e4m3 and one fp32 scale per row and 128-column tile: (rows, K/128)."""
    r, k = x.shape
    t = x.float().view(r, k // 128, 128)
    amax = t.abs().amax(dim=2).clamp(min=1e-12)
    scale = amax / 448.0
    q = (t / scale.unsqueeze(2)).to(torch.float8_e4m3fn).view(r, k)
    return q, scale


def quantize_128x128(w):
    """w (K, N) bf16 -> e4m3 and one fp32 scale per 128x128 block: (K/128, N/128)."""
    k, n = w.shape
    t = w.float().view(k // 128, 128, n // 128, 128)
    amax = t.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    scale = amax / 448.0
    q = (t / scale[:, None, :, None]).to(torch.float8_e4m3fn).view(k, n)
    return q, scale


def outer_major(s):
    """The same values with stride(0) == 1 (the 'outer-dim-major' scale layout cuBLAS's blockwise path wants)."""
    return s.t().contiguous().t()


def blockwise_candidates(a_q, sa, b_q, sb):
    """Call forms to try, most specific first: (name, thunk)."""
    cands = []
    F = getattr(torch.nn.functional, "scaled_mm", None)
    ST = getattr(torch.nn.functional, "ScalingType", None)
    if F is not None and ST is not None:
        for la, lb in ((outer_major, outer_major), (lambda s: s, lambda s: s)):
            cands.append((f"F.scaled_mm BlockWise1x128/BlockWise128x128 {'outer' if la is outer_major else 'row'}",
                          lambda la=la, lb=lb: F(a_q, b_q, la(sa), ST.BlockWise1x128, lb(sb), ST.BlockWise128x128,
                                                 output_dtype=torch.bfloat16)))
    for la, lb, tag in ((outer_major, outer_major, "outer/outer"), (outer_major, lambda s: s, "outer/row"),
                        (lambda s: s, lambda s: s, "row/row"), (lambda s: s, outer_major, "row/outer")):
        cands.append((f"torch._scaled_mm blockwise {tag}",
                      lambda la=la, lb=lb: torch._scaled_mm(a_q, b_q, scale_a=la(sa), scale_b=lb(sb),
                                                            out_dtype=torch.bfloat16)))
    return cands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    peak = {"bf16": 989.4e12, "fp8": 1978.9e12}  # H100/H200 SXM dense datasheet rates
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "state_at_start": card_state()}) + "\n")
        f.flush()
        for m, n, k, label in SHAPES:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * 0.05
            ref = a[:256].float() @ w.float()
            kinds = {}
            # bf16
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            kinds["bf16"] = ("torch.matmul", lambda: torch.matmul(a, w, out=c), lambda: c)
            # per-tensor FP8 (B column-major, as cuBLASLt's FP8 GEMM wants it)
            sa_t = (a.abs().amax().float() / 448.0).reshape(())
            sb_t = (w.abs().amax().float() / 448.0).reshape(())
            a8 = (a.float() / sa_t).to(torch.float8_e4m3fn)
            b8 = (w.float() / sb_t).t().contiguous().to(torch.float8_e4m3fn).t()
            kinds["fp8 tensorwise"] = ("torch._scaled_mm tensorwise",
                                       lambda: torch._scaled_mm(a8, b8, scale_a=sa_t, scale_b=sb_t,
                                                                out_dtype=torch.bfloat16), None)
            # blockwise: 1x128 on A (per row, per 128 of K), 128x128 on B
            a_q, sa = quantize_1x128(a)
            b_q_rm, sb = quantize_128x128(w)
            b_q = b_q_rm.t().contiguous().t()
            chosen, errors = None, []
            for name, thunk in blockwise_candidates(a_q, sa, b_q, sb):
                try:
                    out = thunk()
                    torch.cuda.synchronize()
                    rel = ((out[:256].float() - ref).norm() / ref.norm()).item()
                    if rel < 0.1:
                        chosen = (name, thunk, None)
                        break
                    errors.append(f"{name}: wrong result, relative error {rel:.3g}")
                except Exception as e:  # recorded: what this torch/cuBLAS accepts
                    errors.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            if chosen:
                kinds["fp8 blockwise 1x128/128x128"] = chosen
            times = {kind: [] for kind in kinds}
            checks = {}
            for kind, (name, fn, _) in kinds.items():
                try:
                    out = fn()
                    out = c if out is None else out
                    torch.cuda.synchronize()
                    checks[kind] = ((out[:256].float() - ref).norm() / ref.norm()).item()
                    for _ in range(3):
                        fn()
                except Exception as e:
                    checks[kind] = f"{type(e).__name__}: {str(e)[:300]}"
            for _ in range(args.rounds):  # interleaved: the kinds share the card's state
                for kind, (name, fn, _) in kinds.items():
                    if isinstance(checks[kind], str):
                        continue
                    times[kind].append(timed(fn, args.reps) / args.reps)
            state = card_state()
            for kind, (name, fn, _) in kinds.items():
                row = {"label": label, "m": m, "n": n, "k": k, "kind": kind, "call": name,
                       "relative_error_vs_fp32": checks[kind], "card_state_after": state}
                if times[kind]:
                    t = statistics.median(times[kind])
                    flops = 2.0 * m * n * k
                    row.update({"median_s": t, "all_s": times[kind], "TFLOPs": flops / t / 1e12,
                                "fraction_of_peak": flops / t / peak["bf16" if kind == "bf16" else "fp8"]})
                f.write(json.dumps(row) + "\n")
            if not chosen:
                f.write(json.dumps({"label": label, "kind": "fp8 blockwise 1x128/128x128", "unavailable": errors}) + "\n")
            elif errors:
                f.write(json.dumps({"label": label, "blockwise_forms_refused_before_the_one_used": errors}) + "\n")
            f.flush()
            del a, w, a8, b8, a_q, b_q, c
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
