#!/usr/bin/env python3
"""Grouped-query flash attention at long keys against multi-head attention of the same FLOPs, at the power cap.

Why (issue #12): racksim's attention curve (fitted on multi-head shapes, calibration/data/
h200-2026-12-04-attention-train) is applied to every attention by its FLOPs and key length, whatever the number
of K/V heads. The long-context rows run grouped-query attention with one K/V head per tensor-parallel rank
(Llama 3 405B at TP8: 16 query heads, 1 K/V head; Qwen3-235B at TP4: 16 and 1). Does cuDNN's flash kernel run
those at the multi-head rate?

Per shape, as a training step runs it (grad enabled, forward + backward through torch.autograd.grad), both with
`scaled_dot_product_attention(..., enable_gqa=True)` on H_q query and H_kv key/value heads and as multi-head
attention with H_q heads throughout (the same FLOPs): forward alone back to back for --seconds / 2, then
forward + backward back to back for --seconds (CUDA events per call, median of the second half). Writes JSON lines.

Usage: python3 attention_gqa.py --out OUT.jsonl [--seconds 4]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

# (B, H_q, H_kv, S): one tensor-parallel rank of the long-context rows, and a 4K shape.
SHAPES = [(1, 16, 1, 32768), (1, 16, 1, 65536), (1, 16, 1, 131072), (8, 16, 1, 8192), (16, 16, 2, 4096)]
D = 128


def back_to_back(fn, seconds):
    out, t_end = [], time.time() + seconds
    while time.time() < t_end:
        evs = []
        for _ in range(4):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            evs.append((a, b))
        evs[-1][1].synchronize()
        out += [a.elapsed_time(b) / 1e3 for a, b in evs]
    return statistics.median(out[len(out) // 2:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "cudnn": torch.backends.cudnn.version()}) + "\n")
        for (B, Hq, Hkv, S) in SHAPES:
            row = {"B": B, "H_q": Hq, "H_kv": Hkv, "S": S, "D": D}
            f_flops = 4.0 * B * Hq * S * S * D * 0.5  # causal, racksim's count
            for kind, hkv in (("gqa", Hkv), ("mha", Hq)):
                q = torch.randn(B, Hq, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
                k, v = (torch.randn(B, hkv, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
                g = torch.randn(B, Hq, S, D, device=dev, dtype=torch.bfloat16)
                gqa = hkv != Hq

                def fwd():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

                def fwd_bwd():
                    torch.autograd.grad(fwd(), (q, k, v), g)

                fwd_bwd()
                torch.cuda.synchronize()
                t_f = back_to_back(fwd, args.seconds / 2)
                t_fb = back_to_back(fwd_bwd, args.seconds)
                row[kind] = {"forward_s": t_f, "forward_backward_s": t_fb, "forward_tflops": f_flops / t_f / 1e12,
                             "backward_tflops": 2.5 * f_flops / (t_fb - t_f) / 1e12,
                             "forward_backward_tflops": 3.5 * f_flops / t_fb / 1e12}
                del q, k, v, g
                torch.cuda.empty_cache()
            row["gqa_over_mha_time"] = row["gqa"]["forward_backward_s"] / row["mha"]["forward_backward_s"]
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps({"S": S, "H_q": Hq, "H_kv": Hkv,
                              "gqa_fb_tflops": round(row["gqa"]["forward_backward_tflops"], 1),
                              "mha_fb_tflops": round(row["mha"]["forward_backward_tflops"], 1),
                              "gqa_over_mha_time": round(row["gqa_over_mha_time"], 3)}), flush=True)


if __name__ == "__main__":
    main()
