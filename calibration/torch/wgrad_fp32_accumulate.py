#!/usr/bin/env python3
"""A weight-gradient GEMM that accumulates into an fp32 main gradient, against the same GEMM writing bf16.

Megatron-LM with Transformer Engine (`--gradient-accumulation-fusion`, on by default) computes each linear layer's
weight gradient as one cuBLASLt GEMM that adds into the fp32 `main_grad`: D = C + dY^T X with bf16 operands and fp32
C and D (beta = 1), so its epilogue reads and writes 8 bytes per weight where a bf16-output GEMM writes 2. racksim's
GEMM shape model was measured on bf16-output GEMMs; this measures what the fp32 accumulate costs on top, at the
weight shapes of the at-scale rows (tokens K = 4,096 per micro-batch).

Method (calibration/data/h200-2026-11-29-gemm/measure_gemm.py's): cuBLASLt through PyTorch; per shape and variant,
`inner` products (about 2 ms) captured in one CUDA graph and replayed `reps` times, time = replay span / inner; the
card first held at its power cap for `--warm` seconds; variants interleaved shape by shape so both see the same power
state. Operand sets rotated to exceed L2. Variants:
  bf16:  torch.mm(dY.t(), X)                                    D bf16, beta 0
  fp32acc: torch.addmm(C, dY.t(), X, out_dtype=float32)       D fp32 = C fp32 + ..., beta 1 (D another fp32
           buffer: the same bytes as TE's in-place accumulate, C read and D written at 4 bytes each)
  fp32inplace: the same with D = C (Transformer Engine's main_grad accumulate), where PyTorch allows it
  fp32out: torch.mm(dY.t(), X, out_dtype=float32)               D fp32, beta 0 (the fp32 write alone)
  fp16:  torch.mm(dY.t(), X) on fp16 copies of the operands     D fp16, beta 0 (Megatron --fp16's tensor-core path)
  fp16inplace: torch.addmm(C, dY.t(), X, out=C), all fp16        D = C fp16, beta 1 (--fp16 with
           --gradient-accumulation-fusion: main_grad is fp16, the parameters' dtype, distributed_data_parallel.py)
  bf16inplace: torch.addmm(C, dY.t(), X, out=C), all bf16        D = C bf16, beta 1 (--grad-reduce-in-bf16's main_grad)
Writes JSON lines: shape, both times, their ratio, TFLOP/s, the SM clock after.

usage: python3 wgrad_fp32_accumulate.py OUT.jsonl [--warm 15] [--reps 10]
"""
import argparse, json, sys, time

import torch

SHAPES = [  # (label, out features N_out, in features N_in, tokens K)
    ("1.7B qkv", 6144, 2048, 4096), ("1.7B fc1", 8192, 2048, 4096), ("1.7B fc2", 2048, 8192, 4096),
    ("7.1B tp2 qkv", 6144, 4096, 4096), ("7.1B tp2 fc1", 8192, 4096, 4096), ("7.1B tp2 fc2", 4096, 8192, 4096),
    ("70B tp8 qkv", 3072, 8192, 4096), ("70B tp8 fc1", 4096, 8192, 4096), ("70B tp8 fc2", 8192, 4096, 4096),
    ("Mixtral expert gate_up", 32768, 6144, 4096), ("Mixtral expert down", 6144, 16384, 4096),
    ("square 8192", 8192, 8192, 8192), ("405B tp8 fc1", 13312, 16384, 8192),
    ("7.1B tp2 fc1, 2K tokens", 8192, 4096, 2048), ("7.1B tp2 fc1, 8K tokens", 8192, 4096, 8192),
    ("7.1B tp2 fc1, 16K tokens", 8192, 4096, 16384),
    ("7.1B tp2 fc1, 1K tokens", 8192, 4096, 1024), ("square 4096", 4096, 4096, 4096), ("square 4096, 16K", 4096, 4096, 16384),
]


def sm_clock():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001
        return None


def graph_time(fn, inner, reps):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn(0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / inner)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--warm", type=float, default=15.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds per shape (each variant once a round)")
    ap.add_argument("--variants", default="bf16,fp32acc,fp32out,fp32inplace")
    a = ap.parse_args()
    torch.backends.cuda.preferred_blas_library("cublaslt")
    dev = torch.cuda.get_device_name(0)
    meta = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # Does this PyTorch run bf16 x bf16 -> fp32 with an fp32 addend in one GEMM?
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.zeros(64, 64, device="cuda", dtype=torch.float32)
    try:
        r = torch.addmm(c, x.t(), x, out_dtype=torch.float32)
        meta["fp32acc_api"] = "torch.addmm(out_dtype=float32)"
        ref = c + (x.t().float() @ x.float())
        meta["fp32acc_check_max_abs"] = float((r - ref).abs().max())
    except Exception as e:  # noqa: BLE001
        meta["fp32acc_api"] = f"unavailable: {type(e).__name__}: {e}"
        print(json.dumps(meta), flush=True)
        sys.exit(2)
    if any(v.startswith("fp16") for v in a.variants.split(",")):  # fp16 C + dY^T X in one GEMM, against float64
        x16 = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        c16 = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        ref = c16.double() + x16.t().double() @ x16.double()
        r16 = torch.addmm(c16, x16.t(), x16)
        meta["fp16acc_check_rel"] = float((r16.double() - ref).norm() / ref.norm())
    out = open(a.out, "w")
    out.write(json.dumps({"meta": meta}) + "\n")
    print(json.dumps(meta), flush=True)
    # Warm the card to its power cap on a big GEMM.
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < a.warm:
        for _ in range(20):
            big @ big
        torch.cuda.synchronize()
    del big
    l2 = 50 * 2**20
    for label, n_out, n_in, k in SHAPES:
        per_set = (k * n_out + k * n_in) * 2 + n_out * n_in * 10
        nbuf = max(1, min(8, -(-4 * l2 // per_set)))
        dys = [torch.randn(k, n_out, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        xs = [torch.randn(k, n_in, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        cs = [torch.zeros(n_out, n_in, device="cuda", dtype=torch.float32) for _ in range(nbuf)]
        ds = [torch.empty(n_out, n_in, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)]
        d32 = [torch.empty(n_out, n_in, device="cuda", dtype=torch.float32) for _ in range(nbuf)]
        want = a.variants.split(",")
        half = any(v.startswith("fp16") for v in want)
        dys16 = [d.half() for d in dys] if half else []
        xs16 = [x.half() for x in xs] if half else []
        cs16 = [torch.zeros(n_out, n_in, device="cuda", dtype=torch.float16) for _ in range(nbuf)] if half else []
        ds16 = [torch.empty(n_out, n_in, device="cuda", dtype=torch.float16) for _ in range(nbuf)] if half else []
        cs_bf = [torch.zeros(n_out, n_in, device="cuda", dtype=torch.bfloat16) for _ in range(nbuf)] if "bf16inplace" in want else []
        flops = 2.0 * n_out * n_in * k
        inner = max(1, int(2e-3 / (flops / 600e12)))

        def bf16(i):
            j = i % nbuf
            torch.mm(dys[j].t(), xs[j], out=ds[j])

        def fp32out(i):  # fp32 output, no addend (beta 0): the write alone at 4 bytes
            j = i % nbuf
            torch.mm(dys[j].t(), xs[j], out_dtype=torch.float32, out=d32[j])

        def fp32inplace(i):  # D is C, as Transformer Engine accumulates into main_grad
            j = i % nbuf
            torch.addmm(cs[j], dys[j].t(), xs[j], out_dtype=torch.float32, out=cs[j])

        def fp32acc(i):
            j = i % nbuf
            torch.addmm(cs[j], dys[j].t(), xs[j], out_dtype=torch.float32, out=d32[j])

        def fp16(i):
            j = i % nbuf
            torch.mm(dys16[j].t(), xs16[j], out=ds16[j])

        def fp16inplace(i):  # D is C in fp16: Megatron --fp16's main_grad accumulate
            j = i % nbuf
            torch.addmm(cs16[j], dys16[j].t(), xs16[j], out=cs16[j])

        def bf16inplace(i):  # D is C in bf16: --grad-reduce-in-bf16's main_grad accumulate
            j = i % nbuf
            torch.addmm(cs_bf[j], dys[j].t(), xs[j], out=cs_bf[j])

        variants = []
        for name, fn in (("bf16", bf16), ("fp32acc", fp32acc), ("fp32out", fp32out), ("fp32inplace", fp32inplace),
                         ("fp16", fp16), ("fp16inplace", fp16inplace), ("bf16inplace", bf16inplace)):
            if name not in want:
                continue
            try:
                fn(0)
                torch.cuda.synchronize()
                variants.append((name, fn))
            except Exception as e:  # noqa: BLE001
                print(f"{label}: variant {name} unavailable: {type(e).__name__}: {e}", flush=True)
        res = {"label": label, "n_out": n_out, "n_in": n_in, "tokens": k, "inner": inner, "nbuf": nbuf}
        for rnd in range(a.rounds):  # interleaved: bf16, fp32acc, bf16, fp32acc
            for name, fn in variants:
                t = graph_time(fn, inner, a.reps)
                res.setdefault(name + "_s", []).append(t)
        for name, _ in variants:
            res[name + "_s"] = min(res[name + "_s"])
            res[name + "_tflops"] = flops / res[name + "_s"] / 1e12
        last = variants[-1][0]
        res["ratio"] = res[last + "_s"] / res["bf16_s"]
        res["ratio_of"] = last + " / bf16"
        res["sm_mhz_after"] = sm_clock()
        out.write(json.dumps(res) + "\n")
        out.flush()
        print(f"{label:24s} " + "  ".join(f"{n} {res[n + '_s']*1e6:8.1f} us" for n, _ in variants)
              + f"  ratio {res['ratio']:.3f}  SM {res['sm_mhz_after']}", flush=True)
        del dys, xs, cs, ds, d32, dys16, xs16, cs16, ds16, cs_bf
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
