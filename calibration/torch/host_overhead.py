#!/usr/bin/env python3
"""Host (CPU) time per operation of PyTorch eager training, and what CUDA graphs remove.

A framework runs ahead of the GPU only while its host thread issues kernels faster than the GPU
finishes them. This script measures the host side of that race on the device's own CPU:

  * per-op host time of eager PyTorch (dispatcher + autograd recording; the backward node's cost),
    at shapes so small that the GPU finishes each kernel before the next is issued;
  * a GPT layer stack (pre-norm, fused QKV, flash SDPA, GELU MLP, dropout) at tiny shapes, eager vs
    one CUDA graph of the whole forward+backward: wall time per step and kernels per step;
  * the GPU time of flash attention with and without dropout at Megatron GPT shapes (heads per TP
    rank of the 1.7B-32B rows, s = 4096, d = 128), since Megatron's default attention dropout is 0.1.

Writes one JSON object per line to --out. Usage (repository root, on the device):
  python3 calibration/torch/host_overhead.py --out $OUT/host_overhead.jsonl
"""
import argparse, json, os, platform, statistics, sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_single_gpu import wall_us_per_call  # (imports nothing of Megatron)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _per_call_s(fn, iters, repeats, wait_for_gpu):
    fn()  # warm-up
    torch.cuda.synchronize()
    return wall_us_per_call(torch, fn, iters, repeats, wait_for_gpu)[0] * 1e-6


def wall_per_call(fn, iters, repeats=7):
    """Median over repeats of (wall time of `iters` calls, synchronized at both ends) / iters, seconds."""
    return _per_call_s(fn, iters, repeats, wait_for_gpu=True)


def host_per_call(fn, iters, repeats=7):
    """Median host time per call, not waiting for the GPU (the enqueue side only), seconds."""
    return _per_call_s(fn, iters, repeats, wait_for_gpu=False)


def kernels_in(fn):
    """Number of GPU kernels and memcpy/memset one call of fn launches (torch.profiler)."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        fn()
        torch.cuda.synchronize()
    n = 0
    busy_us = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n += 1
            busy_us += e.device_time if hasattr(e, "device_time") else e.cuda_time
    return n, busy_us


class Layer(torch.nn.Module):
    def __init__(self, h, heads, dropout):
        super().__init__()
        self.h, self.heads, self.p = h, heads, dropout
        self.ln1 = torch.nn.LayerNorm(h)
        self.qkv = torch.nn.Linear(h, 3 * h)
        self.proj = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, 4 * h)
        self.fc2 = torch.nn.Linear(4 * h, h)

    def forward(self, x):  # x: [b, s, h]
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           dropout_p=self.p, is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(a), self.p)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p)


def layer_stack(out, layers, h, heads, b, s, dropout):
    dev = "cuda"
    model = torch.nn.Sequential(*[Layer(h, heads, dropout) for _ in range(layers)]).to(dev, torch.bfloat16)
    x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def fwd():
        with torch.no_grad():
            model(x)

    def step():
        model(x).float().square().mean().backward()

    rec = dict(kind="layer_stack", layers=layers, hidden=h, heads=heads, batch=b, seq=s, dropout=dropout)
    rec["fwd_kernels"], rec["fwd_gpu_busy_us"] = kernels_in(fwd)
    rec["step_kernels"], rec["step_gpu_busy_us"] = kernels_in(step)
    rec["fwd_wall_us"] = wall_per_call(fwd, 20) * 1e6
    rec["fwd_host_us"] = host_per_call(fwd, 20) * 1e6
    rec["step_wall_us"] = wall_per_call(step, 10) * 1e6
    # The same forward+backward as one CUDA graph (static input; gradients accumulate in place).
    g = torch.cuda.CUDAGraph()
    s_ = torch.cuda.Stream()
    s_.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s_):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s_)
    try:
        with torch.cuda.graph(g):
            step()
        rec["step_graph_wall_us"] = wall_per_call(g.replay, 20) * 1e6
    except Exception as e:  # dropout RNG in graphs needs the graph-safe generator; record, go on
        rec["step_graph_error"] = repr(e)[:300]
    out.write(json.dumps(rec) + "\n")
    print(rec, flush=True)


def single_ops(out):
    """Host time per eager op at tiny shapes: forward with autograd recording, and its backward."""
    dev = "cuda"
    x = torch.randn(8, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(64, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
    n = 200
    cases = {
        "linear": lambda t: F.linear(t, w),
        "add": lambda t: t + 1.0,
        "gelu": lambda t: F.gelu(t),
        "layer_norm": lambda t: F.layer_norm(t, (64,)),
        "dropout": lambda t: F.dropout(t, 0.1),
    }
    for name, op in cases.items():
        def fwd_nograd():
            with torch.no_grad():
                t = x
                for _ in range(n):
                    t = op(t)

        def fwd_grad():
            t = x
            for _ in range(n):
                t = op(t)
            return t

        def fwd_bwd():
            fwd_grad().float().sum().backward()

        k_f, _ = kernels_in(fwd_nograd)
        k_fb, _ = kernels_in(fwd_bwd)
        nograd = host_per_call(fwd_nograd, 5)
        grad = host_per_call(fwd_grad, 5)
        fb = wall_per_call(fwd_bwd, 5)
        rec = dict(kind="single_op", op=name, chain=n, fwd_kernels=k_f, fwd_bwd_kernels=k_fb,
                   host_us_per_op_nograd=nograd / n * 1e6, host_us_per_op_autograd=grad / n * 1e6,
                   wall_us_per_op_fwd_bwd=fb / n * 1e6)
        out.write(json.dumps(rec) + "\n")
        print(rec, flush=True)


def attention_dropout(out):
    """GPU time of causal flash attention with and without dropout (CUDA events, median of 20)."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    s, d = 4096, 128
    for heads in (16, 16, 12, 7):  # per TP rank: 1.7B (16/1), 7.1B (32/2), 16B (48/4), 32B (56/8)
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            for p in (0.0, 0.1):
                q, k, v = (torch.randn(1, heads, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                go = torch.randn(1, heads, s, d, device="cuda", dtype=torch.bfloat16)
                rec = dict(kind="attention", backend=str(backend).split(".")[-1], heads=heads, seq=s, head_dim=d,
                           dropout=p)
                try:
                    with sdpa_kernel([backend]):
                        def f():
                            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
                        def fb():
                            f().backward(go)
                        for name, fn in (("fwd_ms", f), ("fwd_bwd_ms", fb)):
                            ts = []
                            for _ in range(3):
                                fn()
                            for _ in range(20):
                                a, b_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                                a.record(); fn(); b_.record(); torch.cuda.synchronize()
                                ts.append(a.elapsed_time(b_))
                            rec[name] = statistics.median(ts)
                except Exception as e:
                    rec["error"] = repr(e)[:300]
                out.write(json.dumps(rec) + "\n")
                print(rec, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    with open(args.out, "w") as out:
        out.write(json.dumps(dict(kind="env", torch=torch.__version__, cuda=torch.version.cuda,
                                  gpu=torch.cuda.get_device_name(), cpu=cpu_model(),
                                  python=platform.python_version())) + "\n")
        single_ops(out)
        for dropout in (0.0, 0.1):
            layer_stack(out, layers=8, h=256, heads=4, b=1, s=128, dropout=dropout)
        layer_stack(out, layers=8, h=2048, heads=16, b=1, s=4096, dropout=0.1)
        attention_dropout(out)


if __name__ == "__main__":
    main()
