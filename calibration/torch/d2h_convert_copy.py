#!/usr/bin/env python3
"""Where PyTorch converts a 16-bit GPU tensor copied into an fp32 pinned host tensor, non-blocking.

Megatron's HybridDeviceOptimizer (optimizer CPU offload) copies each parameter's gradient into a pinned host tensor of the
host parameter's dtype, fp32, with `copy_(grad, non_blocking=True)`; under a 16-bit gradient buffer (--fp16,
--grad-reduce-in-bf16) the source is bf16 or fp16. racksim models the conversion on the GPU and 4 bytes per element over
the host link (docs/decisions.md, "The offloaded optimizer's gradients are fp32 on the host"), from PyTorch's
aten/src/ATen/native/cuda/Copy.cu. This checks it: per variant, the median wall time of the copy (synchronized) and what
the profiler records on the GPU (kernels and memcpy bytes).

Variants, each N elements:
  bf16_to_bf16   bf16 GPU -> bf16 pinned host   (2 bytes an element cross)
  fp32_to_fp32   fp32 GPU -> fp32 pinned host   (4 bytes)
  bf16_to_fp32   bf16 GPU -> fp32 pinned host   (the offloaded optimizer's copy: 4 bytes if converted on the GPU)

usage: python3 d2h_convert_copy.py OUT.json [--elements 268435456] [--reps 10]
"""
import argparse
import json
import statistics
import time

import torch


def timed(fn, reps):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def profiled(fn):
    try:
        return _profiled(fn)
    except Exception as e:  # noqa: BLE001  (the timing stands without it)
        return [{"name": f"profiler failed: {e!r}", "us": 0}]


def _profiled(fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        fn()
        torch.cuda.synchronize()
    gpu = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            gpu.append({"name": e.name, "us": getattr(e, "device_time_total", 0)})
    return gpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--elements", type=int, default=256 * 1024 * 1024)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    n = a.elements
    src16 = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    src32 = src16.float()
    dst16 = torch.empty(n, dtype=torch.bfloat16, pin_memory=True)
    dst32 = torch.empty(n, dtype=torch.float32, pin_memory=True)
    variants = {
        "bf16_to_bf16": (lambda: dst16.copy_(src16, non_blocking=True), 2),
        "fp32_to_fp32": (lambda: dst32.copy_(src32, non_blocking=True), 4),
        "bf16_to_fp32": (lambda: dst32.copy_(src16, non_blocking=True), None),
    }
    rows = []
    for name, (fn, bytes_per) in variants.items():
        med, lo, hi = timed(fn, a.reps)
        row = {"variant": name, "elements": n, "median_s": med, "min_s": lo, "max_s": hi,
               "GBps_at_2B": 2 * n / med / 1e9, "GBps_at_4B": 4 * n / med / 1e9, "gpu_events": profiled(fn)}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "gpu_events"}), flush=True)
        print("  gpu:", [(g["name"][:60], round(g["us"], 1)) for g in row["gpu_events"]], flush=True)
    ok = torch.equal(dst32, src16.float().cpu())
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "converted_values_exact": ok, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    json.dump({"meta": meta, "rows": rows}, open(a.out, "w"), indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
