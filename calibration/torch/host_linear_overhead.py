#!/usr/bin/env python3
"""Host (CPU) time of one torch.nn.Linear forward, as NVIDIA/TransformerEngine issue #2053 measured it on
GB200, GH200 and an H100 DGX (bf16, hidden 2048 -> 2048, 8192 tokens): this machine's figure for the same
work, so that the issue's Grace and Xeon 8480C figures can be related to the host the Megatron-Core host
times were measured on (calibration/data/h200-2026-12-01-megatron-host).

Method: the Linear is called N times in a Python loop without synchronising; the host time per call is the
loop's wall time / N (the GPU queue stays far from full at N = 200: launches are asynchronous); GPU time per
call from CUDA events around the same loop after a synchronise. Autograd on (training forward: the output
keeps its graph) and off (torch.no_grad), 7 repetitions each after warm-up; medians and minima reported.
Usage: python3 host_linear_overhead.py --out FILE.json
"""
import argparse, json, platform, statistics, time

import torch

from host_identity import host_cpu_model


def measure(lin, x, n, grad):
    ctx = torch.enable_grad() if grad else torch.no_grad()
    cpu, gpu = [], []
    with ctx:
        for _ in range(20):
            lin(x)
        torch.cuda.synchronize()
        for _ in range(7):
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            t0 = time.perf_counter()
            for _ in range(n):
                y = lin(x)
            t1 = time.perf_counter()
            e1.record()
            torch.cuda.synchronize()
            del y
            cpu.append((t1 - t0) / n * 1e6)
            gpu.append(e0.elapsed_time(e1) / n * 1e3)
    return {"cpu_us_median": statistics.median(cpu), "cpu_us_min": min(cpu), "gpu_us_median": statistics.median(gpu),
            "cpu_us": cpu, "gpu_us": gpu}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    torch.manual_seed(0)
    lin = torch.nn.Linear(2048, 2048, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8192, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    cpu_model = host_cpu_model()
    rows = {"grad": measure(lin, x, a.n, True), "no_grad": measure(lin, x, a.n, False)}
    out = {"tool": "calibration/torch/host_linear_overhead.py", "what": "torch.nn.Linear(2048, 2048, bf16) forward on 8192 tokens",
           "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
           "cpu": cpu_model, "python": platform.python_version(), "calls_per_repetition": a.n, "rows": rows}
    json.dump(out, open(a.out, "w"), indent=1)
    for k, r in rows.items():
        print(f"{k:8s} cpu {r['cpu_us_median']:.2f} us (min {r['cpu_us_min']:.2f})  gpu {r['gpu_us_median']:.2f} us")


if __name__ == "__main__":
    main()
