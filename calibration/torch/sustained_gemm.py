#!/usr/bin/env python3
"""Burst vs sustained bf16 GEMM throughput on one GPU, with the card's clocks and power over time.

Why: racksim's H200 calibration fits a GEMM ceiling e_max of 0.742 of the dense peak, while the public
best-shape figure (ml-engineering's MAMF) is 0.803 for the same die; docs/decisions.md ("GEMM ceiling on
another GPU of the same architecture") attributes part of the gap to the card's power state. This script
measures it: for each shape, a short burst after the card idled, then back-to-back GEMMs for a fixed time,
reporting TFLOP/s per chunk with the SM clock, power draw, temperature and throttle reasons that
nvidia-smi reports beside it. It changes no setting of the card.

Usage: python3 sustained_gemm.py --out OUT.jsonl [--seconds 45] [--idle 10] [--dtype bf16|fp8]
                                 [--shapes MxNxK,MxNxK,...]
(--dtype fp8: e4m3 operands through torch._scaled_mm with per-tensor scales, bf16 output: a Transformer Engine
style FP8 GEMM; the correctness check then compares against fp32 on the dequantized operands.)
"""
import argparse
import json
import subprocess
import time

import torch

SHAPES = [  # (m, n, k): a square one and a Llama-3-8B-like MLP up-projection at 8,192 tokens
    (8192, 8192, 8192),
    (8192, 14336, 4096),
]
QUERY = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def card_state():
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        sm, mem, power, temp, reasons = [x.strip() for x in out.split(",")]
        return {"sm_clock_MHz": float(sm), "mem_clock_MHz": float(mem), "power_W": float(power),
                "temperature_C": float(temp), "throttle_reasons": reasons}
    except Exception as e:  # the measurement stands without it; say why it is missing
        return {"card_state_error": repr(e)}


def timed(fn, n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3  # seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--dtype", choices=["bf16", "fp8"], default="bf16")
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK list (default: the two built-in shapes)")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    dev = torch.cuda.get_device_name()
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "dtype": args.dtype,
                            "state_at_start": card_state()}) + "\n")
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            if args.dtype == "fp8":
                # e4m3 operands, B column-major as cuBLASLt's FP8 GEMM wants it; unit scales (randn fits e4m3)
                a = a.to(torch.float8_e4m3fn)
                b = b.t().contiguous().to(torch.float8_e4m3fn).t()
                one = torch.ones((), device="cuda", dtype=torch.float32)
                fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
                c = fn()
                ref = a[:256].float() @ b.float()
                tol = 2e-2
            else:
                fn = lambda: torch.matmul(a, b, out=c)  # noqa: E731
                fn()
                ref = a[:256].float() @ b.float()
                tol = 1e-2
            # correctness once, against fp32 on a slice
            rel = ((c[:256].float() - ref).norm() / ref.norm()).item()
            assert rel < tol, rel
            flops = 2.0 * m * n * k
            timed(fn, 5)  # warm-up: handles, heuristics
            torch.cuda.synchronize()
            time.sleep(args.idle)  # let the card cool and clock up as it would at the start of a job
            state = card_state()
            burst = [timed(fn, 10) / 10 for _ in range(5)]
            burst.sort()
            f.write(json.dumps({"shape": [m, n, k], "phase": "burst_after_idle", "idle_s": args.idle,
                                "tflops_median": flops / burst[2] / 1e12, "per_gemm_s": burst, **state}) + "\n")
            per_chunk = max(1, int(0.5 / burst[2]))  # about half a second of GEMMs per chunk
            t0 = time.time()
            while time.time() - t0 < args.seconds:
                dt = timed(fn, per_chunk)
                f.write(json.dumps({"shape": [m, n, k], "phase": "sustained", "t_s": round(time.time() - t0, 3),
                                    "gemms": per_chunk, "tflops": flops * per_chunk / dt / 1e12,
                                    **card_state()}) + "\n")
                f.flush()
            del a, b, c
            torch.cuda.empty_cache()
        f.write(json.dumps({"state_at_end": card_state()}) + "\n")
    # short table last
    rows = [json.loads(x) for x in open(args.out)]
    for m, n, k in shapes:
        s = [r for r in rows if r.get("shape") == [m, n, k]]
        burst = [r for r in s if r["phase"] == "burst_after_idle"][0]
        sus = [r for r in s if r["phase"] == "sustained"]
        first = sus[: max(1, len(sus) // 10)]
        last = sus[-max(1, len(sus) // 3):]
        avg = lambda xs, key: sum(x.get(key, 0) for x in xs) / len(xs)  # noqa: E731
        print(f"{m}x{n}x{k}: burst {burst['tflops_median']:.0f} TF at {burst.get('sm_clock_MHz')} MHz; "
              f"sustained first {avg(first, 'tflops'):.0f} TF, last third {avg(last, 'tflops'):.0f} TF at "
              f"{avg(last, 'sm_clock_MHz'):.0f} MHz, {avg(last, 'power_W'):.0f} W, {avg(last, 'temperature_C'):.0f} C")


if __name__ == "__main__":
    main()
