#!/usr/bin/env python3
"""The expert GEMMs of a mixture-of-experts layer at the shapes Megatron-Core runs them at scale, measured
three ways against one plain GEMM of the same total work:

  single       one cuBLASLt GEMM of M = G * m tokens (what a dense layer of the same FLOPs costs)
  multistream  G cuBLASLt GEMMs of m tokens each, round-robin on 4 CUDA streams (Transformer Engine's
               GroupedLinear: general_grouped_gemm over its 4 compute streams)
  sequential   the same G GEMMs on one stream (Megatron-Core's SequentialMLP, TE with one stream)
  grouped      torch._grouped_mm: one CUTLASS grouped kernel over the G experts (torchtitan, newer TE)

Per MoE layer and direction: forward gate/up (m x 2f x h, or m x f x h without a gate) and down (m x h x f);
their data gradients (m x h x 2f, m x f x h) and weight gradients (2f x h x m, h x f x m: K = the tokens).
Each variant is captured in one CUDA graph with enough repetitions for about 2 ms and replayed 10
times (per-product time = replay span / repetitions, as racksim-bench's GEMM method); operand sets are
rotated past 4x L2 so they come from HBM. The card is first run to its power cap (20 s of 8192^3 bf16);
the ratios grouped / single do not depend on its power state as much as the absolute times do, and
every row carries the clocks after it.

usage: python3 grouped_gemm.py OUT.json
"""
import json, math, os, platform, sys, time

import torch

try:
    import pynvml
    pynvml.nvmlInit()
    NVH = pynvml.nvmlDeviceGetHandleByIndex(0)
except Exception:  # noqa: BLE001
    NVH = None

REPS = 10
TARGET_S = 2e-3
WARM_S = 20.0
STREAMS = 4


def clocks():
    if NVH is None:
        return {"source": "none"}
    g = pynvml
    return {"sm_mhz": g.nvmlDeviceGetClockInfo(NVH, g.NVML_CLOCK_SM),
            "power_mw": g.nvmlDeviceGetPowerUsage(NVH),
            "temperature_c": g.nvmlDeviceGetTemperature(NVH, g.NVML_TEMPERATURE_GPU),
            "clock_event_reasons_mask": int(g.nvmlDeviceGetCurrentClocksEventReasons(NVH))}


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def timed_graph(enqueue, l2_bytes, est_s):
    """enqueue(i) issues one product (or one grouped layer op) on the current stream; returns s per call."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(3):
            enqueue(i)
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); enqueue(3); e1.record(); e1.synchronize()
        iso = e0.elapsed_time(e1) * 1e-3
        inner = max(1, min(200, int(round(TARGET_S / max(iso, 1e-7)))))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for i in range(inner):
                enqueue(i)
        g.replay(); torch.cuda.synchronize()
        per = []
        for _ in range(REPS):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            per.append(e0.elapsed_time(e1) * 1e-3 / inner)
    del g
    return median(per), min(per), max(per), inner


def measure_case(G, m, n, k, label, l2_bytes, streams):
    """One expert GEMM kind: G experts, each (m x k) @ (k x n) -> (m x n), bf16 in and out."""
    dev = "cuda"
    per_set = G * (m * k + k * n + m * n) * 2
    nbuf = max(1, min(64, math.ceil(4 * l2_bytes / per_set)))
    A = [torch.empty(G * m, k, device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(nbuf)]
    W = [torch.empty(G, n, k, device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(nbuf)]
    D = [torch.empty(G * m, n, device=dev, dtype=torch.bfloat16) for _ in range(nbuf)]
    Wbig = [w.reshape(G * n, k)[:n] for w in W]  # the single GEMM: one expert's weight, G*m tokens
    rows = {}

    def single(i):
        j = i % nbuf
        torch.mm(A[j], Wbig[j].t(), out=D[j])

    def sequential(i):
        j = i % nbuf
        for e in range(G):
            torch.mm(A[j][e * m:(e + 1) * m], W[j][e].t(), out=D[j][e * m:(e + 1) * m])

    def multistream(i):
        j = i % nbuf
        cur = torch.cuda.current_stream()
        ev = torch.cuda.Event()
        ev.record(cur)
        for e in range(G):
            st = streams[e % STREAMS]
            st.wait_event(ev)
            with torch.cuda.stream(st):
                torch.mm(A[j][e * m:(e + 1) * m], W[j][e].t(), out=D[j][e * m:(e + 1) * m])
        for st in streams[:min(G, STREAMS)]:
            done = torch.cuda.Event()
            done.record(st)
            cur.wait_event(done)

    offs = torch.arange(1, G + 1, device=dev, dtype=torch.int32) * m
    Wt = [w.transpose(-1, -2) for w in W]  # (G, k, n) views of (G, n, k): K-major like nn.Linear

    def grouped(i):
        j = i % nbuf
        torch._grouped_mm(A[j], Wt[j], offs=offs, out_dtype=torch.bfloat16)

    variants = [("single", single), ("sequential", sequential), ("multistream", multistream)]
    if hasattr(torch, "_grouped_mm"):
        variants.append(("grouped", grouped))
    flops = 2.0 * G * m * n * k
    for name, fn in variants:
        try:
            med, lo, hi, inner = timed_graph(fn, l2_bytes, 0)
            rows[name] = {"s": med, "s_min": lo, "s_max": hi, "inner": inner, "tflops": flops / med / 1e12}
        except Exception as ex:  # noqa: BLE001
            rows[name] = {"error": f"{type(ex).__name__}: {ex}"[:300]}
        torch.cuda.synchronize()
    # Check one expert of the multistream result against float64 on a 4x4 corner.
    multistream(0); torch.cuda.synchronize()
    a = A[0][:4].double(); w = W[0][0][:4].double(); d = D[0][:4, :4].double()
    ref = a @ w.t(); den = a.abs() @ w.abs().t()
    err = float(((d - ref).abs() / den).max())
    del A, W, D, Wbig, Wt
    torch.cuda.empty_cache()
    r = {"label": label, "experts": G, "m": m, "n": n, "k": k, "flops": flops, "nbuf": nbuf,
         "variants": rows, "check_max_rel_err": err, "clocks_after": clocks()}
    s1 = rows["single"].get("s")
    line = " ".join(f"{v}={rows[v].get('tflops', float('nan')):6.1f}" + (f"({rows[v]['s'] / s1:.2f}x)" if s1 and 's' in rows[v] else "")
                    for v in rows)
    print(f"{label:42s} G{G:<3d} {m:6d} x {n:6d} x {k:6d}  TFLOP/s {line}  err {err:.1e} "
          f"{r['clocks_after'].get('sm_mhz')} MHz", flush=True)
    return r


# (label, local experts G, tokens per expert m, hidden h, expert ffn f, gated)
LAYERS = [
    ("qwen3-235b tp4 ep8 (m 512)", 16, 512, 4096, 1536, True),
    ("qwen3-235b tp2 ep8 (m 1024)", 16, 1024, 4096, 1536, True),
    ("qwen3-235b tp1 ep8 (m 2048)", 16, 2048, 4096, 1536, True),
    ("qwen3-235b tp2 ep32 (m 4096)", 4, 4096, 4096, 1536, True),
    ("qwen3-235b ep8 mbs4 (m 4096)", 16, 4096, 4096, 1536, True),
    ("deepseek-v3 ep32 (m 4096)", 8, 4096, 7168, 2048, True),
    ("deepseek-v3 ep64 (m 8192)", 4, 8192, 7168, 2048, True),
    ("deepseek proxy ci ep8 (m 8192)", 4, 8192, 7168, 2048, True),
    ("mixtral proxy ci ep8 (m 1024)", 1, 1024, 4096, 14336, True),
    ("mixtral-8x22b tp2 ep8 (m 4096)", 1, 4096, 6144, 16384, True),
]


def main():
    out = sys.argv[1]
    torch.backends.cuda.preferred_blas_library("cublaslt")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    prop = torch.cuda.get_device_properties(0)
    l2 = getattr(prop, "L2_cache_size", 60 * 2**20)
    doc = {"schema": "racksim-grouped-gemm/1",
           "tool": {"name": "grouped_gemm.py", "argv": sys.argv, "reps": REPS, "warm_s": WARM_S, "streams": STREAMS},
           "identity": {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "hostname": platform.node(),
                        "gpu": prop.name, "sm_count": prop.multi_processor_count, "l2_cache_bytes": l2,
                        "torch": torch.__version__, "cuda": torch.version.cuda,
                        "driver_version": pynvml.nvmlSystemGetDriverVersion() if NVH else None,
                        "has_grouped_mm": hasattr(torch, "_grouped_mm")},
           "clocks_at_start": clocks()}
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time(); nwarm = 0
    while time.time() - t0 < WARM_S:
        for _ in range(20):
            torch.mm(a, b.t())
        torch.cuda.synchronize(); nwarm += 20
    del a, b
    doc["warmup"] = {"gemm": "bf16 8192^3", "products": nwarm, "seconds": time.time() - t0,
                     "tflops": nwarm * 2 * 8192**3 / (time.time() - t0) / 1e12, "clocks_after": clocks()}
    print("warm-up", doc["warmup"], flush=True)
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    rows = []
    for (name, G, m, h, f, gated) in LAYERS:
        up = 2 * f if gated else f
        for (kind, mm, n, k) in [("fc1 fwd", m, up, h), ("fc2 fwd", m, h, f),
                                 ("fc1 dgrad", m, h, up), ("fc2 dgrad", m, f, h),
                                 ("fc1 wgrad", up, h, m), ("fc2 wgrad", h, f, m)]:
            r = measure_case(G, mm, n, k, f"{name} {kind}", l2, streams)
            r["layer"] = name; r["kind"] = kind
            rows.append(r)
            with open(out, "w") as fo:
                json.dump(dict(doc, results=rows), fo, indent=1)
    doc["clocks_at_end"] = clocks()
    with open(out, "w") as fo:
        json.dump(dict(doc, results=rows), fo, indent=1)


if __name__ == "__main__":
    main()
