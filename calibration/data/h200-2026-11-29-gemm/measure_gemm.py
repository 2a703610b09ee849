#!/usr/bin/env python3
"""GEMM shapes that the JAX training graphs use and racksim-bench's grid lacks, measured through
PyTorch's cuBLASLt path with racksim-bench's method (calibration/bench/src/bench_gemm.cu):
back-to-back products captured in one CUDA graph, replayed `reps` times, per-product time =
replay span / inner; operand sets rotated so operands come from HBM, not L2; the card is first
brought to its sustained (power-capped) state. Writes one JSON in racksim-bench's `gemm.results`
row format (plus `batch`, `layout`, `out_dtype`) under schema "racksim-gemm-torch/1".

usage: NCCL_NVLS_ENABLE=0 python3 measure_gemm.py OUT.json
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
TARGET_S = 2e-3          # racksim-bench's batch target: ~2 ms of products per graph replay
WARM_S = 20.0            # bring the card to its power cap before the first measurement
PEAK = {"bf16": 989.4e12, "fp8_e4m3": 1978.9e12}  # H200 SXM dense datasheet (racksim-bench ceilings)


def clocks():
    if NVH is None:
        return {"source": "none"}
    g = pynvml
    return {"source": "nvml",
            "sm_mhz": g.nvmlDeviceGetClockInfo(NVH, g.NVML_CLOCK_SM),
            "mem_mhz": g.nvmlDeviceGetClockInfo(NVH, g.NVML_CLOCK_MEM),
            "power_mw": g.nvmlDeviceGetPowerUsage(NVH),
            "temperature_c": g.nvmlDeviceGetTemperature(NVH, g.NVML_TEMPERATURE_GPU),
            "clock_event_reasons_mask": int(g.nvmlDeviceGetCurrentClocksEventReasons(NVH))}


def stats(v):
    v = sorted(v)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return {"median": med, "min": v[0], "max": v[-1], "n": n}


def make_op(dtype, batch, m, n, k, layout, out_dtype, nbuf):
    """Returns (enqueue(i), check()) for one shape. layout: TN = both operands K-contiguous
    (x @ W^T, racksim-bench's layout); NN = B stored K x N row-major (P @ V)."""
    dev = "cuda"
    shp = (lambda r, c: (batch, r, c)) if batch > 1 else (lambda r, c: (r, c))
    A = [torch.empty(shp(m, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(nbuf)]
    if layout == "TN":
        B = [torch.empty(shp(n, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(nbuf)]
        Bop = [b.transpose(-1, -2) for b in B]
    else:
        B = [torch.empty(shp(k, n), device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(nbuf)]
        Bop = B
    od = torch.float32 if out_dtype == "f32" else torch.bfloat16
    D = [torch.empty(shp(m, n), device=dev, dtype=od) for _ in range(nbuf)]
    if dtype == "fp8_e4m3":
        assert batch == 1 and layout == "TN"
        A8 = [a.to(torch.float8_e4m3fn) for a in A]
        B8 = [b.to(torch.float8_e4m3fn) for b in B]
        one = torch.ones((), device=dev, dtype=torch.float32)
        del A, B

        def op(i):
            j = i % nbuf
            torch._scaled_mm(A8[j], B8[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                             use_fast_accum=False, out=D[j])

        def check():
            a = A8[0][:4].double(); b = B8[0][:4].double(); d = D[0][:4, :4].double()
            ref = a @ b.t(); den = a.abs() @ b.abs().t()
            return float(((d - ref).abs() / den).max())
        return op, check
    if batch > 1:
        if od == torch.bfloat16:
            def op(i):
                j = i % nbuf
                torch.bmm(A[j], Bop[j], out=D[j])
        else:
            def op(i):
                j = i % nbuf
                torch.bmm(A[j], Bop[j], out_dtype=torch.float32, out=D[j])
    else:
        def op(i):
            j = i % nbuf
            torch.mm(A[j], Bop[j], out=D[j])

    def check():
        a = (A[0][0] if batch > 1 else A[0])[:4].double()
        b = (Bop[0][0] if batch > 1 else Bop[0])[:, :4].double()
        d = (D[0][0] if batch > 1 else D[0])[:4, :4].double()
        ref = a @ b; den = a.abs() @ b.abs()
        return float(((d - ref).abs() / den).max())
    return op, check


def measure(dtype, batch, m, n, k, layout, out_dtype, label, l2_bytes):
    in_b = 1 if dtype == "fp8_e4m3" else 2
    out_b = 4 if out_dtype == "f32" else 2
    per_set = batch * ((m * k + n * k) * in_b + m * n * out_b)
    nbuf = max(1, min(256, math.ceil(4 * l2_bytes / per_set)))
    op, check = make_op(dtype, batch, m, n, k, layout, out_dtype, nbuf)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(3):
            op(i)
        torch.cuda.synchronize()
        iso = []
        for i in range(REPS):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            e0.record(); op(i); e1.record(); e1.synchronize()
            iso.append(e0.elapsed_time(e1) * 1e-3)
        iso_s = stats(iso)
        inner = max(1, min(256, int(round(TARGET_S / max(iso_s["median"], 1e-9)))))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for i in range(inner):
                op(i)
        g.replay(); torch.cuda.synchronize()
        per = []
        for _ in range(REPS):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            per.append(e0.elapsed_time(e1) * 1e-3 / inner)
        err = check()
    del g
    flops = 2.0 * batch * m * n * k
    st = stats(per)
    r = {"dtype": dtype, "batch": batch, "m": m, "n": n, "k": k, "layout": layout,
         "out_dtype": "f32" if out_dtype == "f32" else "bf16", "label": label, "flops": flops,
         "s": st, "tflops": {"median": flops / st["median"] / 1e12, "min": flops / st["max"] / 1e12,
                              "max": flops / st["min"] / 1e12},
         "isolated_s": iso_s, "isolated_tflops_median": flops / iso_s["median"] / 1e12,
         "inner": inner, "nbuf": nbuf, "bytes_per_set": per_set, "check_max_rel_err": err,
         "clocks_after": clocks()}
    c = r["clocks_after"]
    print(f"gemm {dtype:9s} b{batch:<4d} {m:6d} x {n:6d} x {k:6d} {layout} {r['out_dtype']:4s} "
          f"{st['median']*1e6:10.2f} us {r['tflops']['median']:8.1f} TFLOP/s (iso {iso_s['median']*1e6:9.2f} us, "
          f"inner {inner}, nbuf {nbuf}, err {err:.1e}, sm {c.get('sm_mhz')} MHz {c.get('power_mw', 0)/1000:.0f} W)  {label}",
          flush=True)
    torch.cuda.empty_cache()
    return r


def main():
    out = sys.argv[1]
    torch.backends.cuda.preferred_blas_library("cublaslt")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    prop = torch.cuda.get_device_properties(0)
    l2 = getattr(prop, "L2_cache_size", 60 * 2**20)
    doc = {"schema": "racksim-gemm-torch/1",
           "tool": {"name": "measure_gemm.py", "argv": sys.argv, "reps": REPS, "warm_s": WARM_S},
           "identity": {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "hostname": platform.node(), "gpu": prop.name, "sm_count": prop.multi_processor_count,
                        "l2_cache_bytes": l2, "torch": torch.__version__, "cuda": torch.version.cuda,
                        "cublas_library": "cublaslt (torch.backends.cuda.preferred_blas_library)",
                        "driver_version": pynvml.nvmlSystemGetDriverVersion() if NVH else None,
                        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")},
           "ceilings": {"bf16_dense_tflops": 989.4, "fp8_dense_tflops": 1978.9},
           "clocks_at_start": clocks()}
    # Warm-up: 8192^3 bf16 back-to-back until the card sits at its power cap (sustained training state).
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time(); nwarm = 0
    while time.time() - t0 < WARM_S:
        for _ in range(20):
            torch.mm(a, b.t())
        torch.cuda.synchronize(); nwarm += 20
    del a, b
    doc["warmup"] = {"gemm": "bf16 8192^3", "products": nwarm, "seconds": time.time() - t0, "clocks_after": clocks()}
    print("warm-up", doc["warmup"], flush=True)

    shapes = []
    # Cross-checks against racksim-bench's grid (same shapes, other driver path).
    for (m, n, k, lab) in [(8192, 8192, 8192, "cross-check square"), (16384, 8192, 2048, "cross-check D2048 mlp up"),
                           (16384, 2048, 8192, "cross-check D2048 mlp down"), (16384, 6144, 2048, "cross-check D2048 qkv"),
                           (2048, 8192, 16384, "cross-check wgrad D2048xF8192")]:
        shapes.append(("bf16", 1, m, n, k, "TN", "bf16", lab))
    # M = 16384 tokens, N, K in {2048, 6144, 8192}: the remaining combinations.
    for n in (2048, 6144, 8192):
        for k in (2048, 6144, 8192):
            if (n, k) in [(8192, 2048), (2048, 8192), (6144, 2048), (2048, 2048)]:
                continue
            shapes.append(("bf16", 1, 16384, n, k, "TN", "bf16", "tokens 16384"))
    for (m, n, k, lab) in [(8192, 2048, 16384, "wgrad F8192xD2048, 16k tokens"), (2048, 2048, 16384, "wgrad D2048xD2048, 16k tokens"),
                           (16384, 2048, 32768, "lm head dgrad V32768"), (32768, 2048, 16384, "lm head wgrad V32768, 16k tokens")]:
        shapes.append(("bf16", 1, m, n, k, "TN", "bf16", lab))
    fp8 = [("fp8_e4m3",) + s[1:] for s in shapes]
    # Materialized attention, batch = sequences x heads, head dim 128.
    att = []
    for (bh, S) in [(128, 2048), (64, 1024), (64, 4096), (16, 8192)]:
        att.append(("bf16", bh, S, S, 128, "TN", "bf16", f"attn scores QK^T S{S}"))
        att.append(("bf16", bh, S, 128, S, "NN", "bf16", f"attn PV S{S}"))
    att.append(("bf16", 128, 2048, 2048, 128, "TN", "f32", "attn scores QK^T S2048, f32 out (as XLA m1)"))
    att.append(("bf16", 128, 128, 2048, 2048, "TN", "bf16", "attn PV S2048 as XLA m1 (hd x S out)"))
    att.append(("bf16", 128, 2048, 128, 2048, "TN", "bf16", "attn dQ/dK S2048 (TN)"))
    res = []
    for sh in shapes + att + fp8:
        try:
            res.append(measure(*sh, l2_bytes=l2))
        except Exception as e:  # noqa: BLE001
            print("gemm", sh, "ERROR", repr(e), flush=True)
            res.append({"dtype": sh[0], "batch": sh[1], "m": sh[2], "n": sh[3], "k": sh[4], "layout": sh[5],
                        "out_dtype": sh[6], "label": sh[7], "error": repr(e)})
        doc["gemm"] = {"api": "torch.mm / torch.bmm / torch._scaled_mm (fp8 e4m3, per-tensor scales 1.0, "
                              "use_fast_accum=False, bf16 out), preferred BLAS library cuBLASLt",
                       "timing": "s: inner products captured in one CUDA graph, replayed reps times, per-product = "
                                 "replay span / inner; isolated_s: one product between two events after a synchronize. "
                                 "Operand sets rotated (nbuf) so operands come from HBM. tflops = 2*batch*M*N*K / s.",
                       "results": res}
        doc["clocks_at_end"] = clocks()
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
