#!/usr/bin/env python3
"""Fused (flash) attention throughput on one GPU, for racksim's attention efficiency (short timed bursts; for the
rows a training step runs, at the card's power cap, use attention_sustained.py --short --sustained-forward --json).

torch.nn.functional.scaled_dot_product_attention on bf16 [B, H, S, D] (the backend PyTorch
picks: cuDNN's flash kernels on Hopper), forward alone and forward + backward, timed with CUDA
events over back-to-back repetitions after warm-ups. Writes one JSON file (schema
racksim-attention/1) with a row per shape: B, H, S, D, causal, forward_s, backward_s (the
difference), and the FLOPs racksim counts for them (4·B·H·S²·D forward, 10·B·H·S²·D backward,
halved when causal).

    python3 attention_bench.py --out attention.json
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def timed(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(ts), min(ts), max(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = []
    dev = torch.device("cuda")
    # About 64k query tokens x heads-worth of work per shape: B*H*S ~ 2^18.
    shapes = [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192), (8, 32, 2048), (2, 32, 4096)]
    for causal in (True, False):
        for (B, H, S) in shapes:
            D = 128
            q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            g = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)

            # The training forward (grad enabled; under no_grad PyTorch runs a faster inference kernel), and forward
            # + backward through autograd.grad (o.backward would add every call's gradients into q/k/v.grad). Until
            # 2026-12-04 this script did both of those, and its 2026-11-29 rows carry the bias (their README).
            def fwd():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.autograd.grad(o, (q, k, v), g)

            f_med, f_min, f_max = timed(fwd)
            t_med, t_min, t_max = timed(fwd_bwd)
            mask = 0.5 if causal else 1.0
            row = dict(B=B, H=H, S=S, D=D, causal=causal, forward_s=f_med, forward_s_min=f_min, forward_s_max=f_max,
                       forward_backward_s=t_med, backward_s=t_med - f_med,
                       forward_flops=4 * B * H * S * S * D * mask, backward_flops=10 * B * H * S * S * D * mask)
            row["forward_tflops"] = row["forward_flops"] / f_med / 1e12
            row["backward_tflops"] = row["backward_flops"] / row["backward_s"] / 1e12
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("B", "H", "S", "causal", "forward_tflops", "backward_tflops")}), flush=True)
            del q, k, v, g
            torch.cuda.empty_cache()
    out = dict(schema="racksim-attention/1", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version(), rows=rows)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
