#!/usr/bin/env python3
"""A GEMM's speed inside a sustained training step, against the same GEMM in a burst, at several GEMM duties.

Why (issue #12): a GEMM slows from its burst rate to 0.86 of it when GEMMs run back to back at the card's power
cap (calibration/data/h200-2026-12-02-sustained-gemm), and to 0.87-1.0 of it when other kernels sit between them
(../h200-2026-12-02-power-duty, with synthetic fillers). This measures it in real training work: decoder layers
(RMSNorm, QKV, causal flash attention, output projection, SwiGLU MLP; bf16, PyTorch autograd) of three widths,
whose GEMMs take different shares of the step. Per width: 5 s idle, one profiled forward + backward (the burst);
then forward + backward back to back for --seconds, and two more profiled while the load goes on (sustained).
Every aten::mm's kernel time is read from the profiler by its input shapes; the step's wall time from CUDA events
on unprofiled iterations; the SM clock and power from NVML. It changes no setting of the card.

Usage: python3 gemm_in_step.py --out OUT.jsonl [--seconds 10] [--idle 5]
"""
import argparse
import collections
import json
import statistics
import threading
import time

import torch
import torch.nn.functional as F

try:
    import pynvml
except ImportError:
    pynvml = None

CONFIGS = {  # width D, MLP F, heads H, sequence S, batch B, layers L
    "d8192": dict(D=8192, F=28672, H=64, S=4096, B=1, L=3),
    "d4096": dict(D=4096, F=14336, H=32, S=4096, B=2, L=6),
    "d2048": dict(D=2048, F=8192, H=16, S=2048, B=8, L=8),
}


class Card:
    def __init__(self):
        self.h = None
        if pynvml is not None:
            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

    def state(self):
        if self.h is None:
            return {}
        return {"sm_clock_MHz": pynvml.nvmlDeviceGetClockInfo(self.h, pynvml.NVML_CLOCK_SM),
                "power_W": pynvml.nvmlDeviceGetPowerUsage(self.h) / 1e3,
                "temperature_C": pynvml.nvmlDeviceGetTemperature(self.h, pynvml.NVML_TEMPERATURE_GPU)}


def rms_norm(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w


def make_model(D, F_, H, L, dev):
    def p(*shape):
        return (torch.randn(*shape, device=dev, dtype=torch.bfloat16) * shape[0] ** -0.5).requires_grad_()
    return [dict(n1=torch.ones(D, device=dev, dtype=torch.bfloat16, requires_grad=True), wqkv=p(D, 3 * D), wo=p(D, D),
                 n2=torch.ones(D, device=dev, dtype=torch.bfloat16, requires_grad=True), wg=p(D, F_), wu=p(D, F_),
                 wd=p(F_, D)) for _ in range(L)]


def step(layers, x0, B, S, H):
    x = x0
    D = x0.shape[-1]
    for l in layers:
        h = rms_norm(x, l["n1"])
        qkv = torch.mm(h, l["wqkv"]).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        x = x + torch.mm(o.permute(0, 2, 1, 3).reshape(B * S, D), l["wo"])
        h = rms_norm(x, l["n2"])
        a = F.silu(torch.mm(h, l["wg"])) * torch.mm(h, l["wu"])
        x = x + torch.mm(a, l["wd"])
    x.float().mean().backward()


def training_step(c, dev):
    """A forward + backward of config c's layers on fresh weights, gradients dropped after each call."""
    D, F_, H, S, B, L = c["D"], c["F"], c["H"], c["S"], c["B"], c["L"]
    layers = make_model(D, F_, H, L, dev)
    x0 = torch.randn(B * S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def fn():
        step(layers, x0, B, S, H)
        for layer in layers:
            for t in layer.values():
                t.grad = None
        x0.grad = None
    return fn


def gemm_times(prof):
    """Kernel time per call of every aten::mm, by (m, k, n): {shape: [us per call, calls]}."""
    acc = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.name != "aten::mm" or not e.input_shapes or len(e.input_shapes) < 2:
            continue
        a, b = e.input_shapes[0], e.input_shapes[1]
        if len(a) != 2 or len(b) != 2:
            continue
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0.0)
        key = (a[0], a[1], b[1])
        acc[key][0] += t
        acc[key][1] += 1
    return acc


def profiled(fn, iters):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    return prof


def wall(fn, iters):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args()
    card = Card()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    with open(args.out, "w") as out:
        out.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                              "state_at_start": card.state()}) + "\n")
        for name in args.configs.split(","):
            c = CONFIGS[name]
            fn = training_step(c, dev)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            time.sleep(args.idle)
            state_burst = card.state()
            burst = gemm_times(profiled(fn, 1))
            # Sustained: back to back, the clock sampled.
            samples, stop = [], threading.Event()

            def sample():
                while not stop.wait(0.25):
                    samples.append(card.state())
            th = threading.Thread(target=sample, daemon=True)
            th.start()
            t_end = time.time() + args.seconds
            n = 0
            while time.time() < t_end:
                fn()
                n += 1
                if n % 4 == 0:
                    torch.cuda.synchronize()
            iter_s = wall(fn, 5)
            sus = gemm_times(profiled(fn, 2))
            stop.set()
            th.join()
            half = samples[len(samples) // 2:] or samples
            rows = []
            gemm_us_per_iter = 0.0
            for key in sorted(sus):
                m, k, n_ = key
                us_s, calls_s = sus[key]
                us_b, calls_b = burst.get(key, [0.0, 0])
                per_s = us_s / calls_s
                per_b = us_b / calls_b if calls_b else None
                gemm_us_per_iter += us_s / 2
                rows.append({"m": m, "k": k, "n": n_, "calls_per_iter": calls_s // 2, "sustained_us": per_s,
                             "burst_us": per_b, "flops": 2.0 * m * k * n_})
            row = {"config": name, **c, "iterations_back_to_back": n, "iter_s": iter_s,
                   "gemm_s_per_iter": gemm_us_per_iter / 1e6, "gemm_duty": gemm_us_per_iter / 1e6 / iter_s,
                   "state_burst": state_burst,
                   "sustained_sm_clock_MHz": statistics.median(x["sm_clock_MHz"] for x in half) if half and half[0] else None,
                   "sustained_power_W": statistics.median(x["power_W"] for x in half) if half and half[0] else None,
                   "gemms": rows}
            sb = sum(r["burst_us"] * r["calls_per_iter"] for r in rows if r["burst_us"])
            ss = sum(r["sustained_us"] * r["calls_per_iter"] for r in rows if r["burst_us"])
            row["gemm_sustained_over_burst_time"] = ss / sb if sb else None
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps({k: row[k] for k in ("config", "iter_s", "gemm_duty", "gemm_sustained_over_burst_time",
                                                  "sustained_sm_clock_MHz", "sustained_power_W")}), flush=True)
            del fn
            torch.cuda.empty_cache()
        out.write(json.dumps({"state_at_end": card.state()}) + "\n")


if __name__ == "__main__":
    main()
