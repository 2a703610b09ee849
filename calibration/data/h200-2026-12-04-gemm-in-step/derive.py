#!/usr/bin/env python3
"""Compares each GEMM measured inside the sustained training steps (raw/gemm_in_step.jsonl) with racksim's GEMM
model as committed in hardware_models/calibrated/h200.yaml (bf16: t = t0 + F / (P e_max) (1 + k0 / K), or the
HBM roofline if longer), and prints the README's table.

    python3 derive.py        (from this folder; reads ../../../hardware_models/calibrated/h200.yaml)
    python3 derive.py OTHER/raw/gemm_in_step.jsonl   (another run of the same script, e.g. on an H100, whose
                             racksim model at these compute-bound shapes is the same: same peak, same transferred ceiling)
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CAL = os.path.join(HERE, "..", "..", "..", "hardware_models", "calibrated", "h200.yaml")


def bf16_model():
    text = open(CAL).read()
    bf16 = text[text.index("  bf16:"):text.index("  fp8:")]
    num = lambda key: float(re.search(rf"\n    {key}: ([0-9.e+-]+)", bf16).group(1))  # noqa: E731
    peak = float(re.search(r"peak_dense: ([0-9.]+) TFLOP/s", bf16).group(1)) * 1e12
    e_max, k0, t0 = num("e_max"), num("k0"), num("t0") * 1e-6
    hbm = float(re.search(r"\nhbm:[^\n]*\n  bandwidth: ([0-9.]+) GB/s", text).group(1)) * 1e9

    def t(m, k, n):
        return max(t0 + 2.0 * m * k * n / (peak * e_max) * (1 + k0 / k), 2.0 * (m * k + k * n + m * n) / hbm)
    return t, dict(e_max=e_max, k0=k0, t0_us=t0 * 1e6, peak_TFLOPs=peak / 1e12, hbm_GBps=hbm / 1e9)


def main():
    model, params = bf16_model()
    print("model:", params)
    print("| layers (D, F, S, B, L) | GEMM duty | SM MHz sustained | GEMM time per step: burst | sustained | racksim model "
          "| sustained / model | burst / model | per-shape sustained / model |")
    print("|---|---|---|---|---|---|---|---|---|")
    raw = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "raw", "gemm_in_step.jsonl")
    for line in open(raw):
        r = json.loads(line)
        if "config" not in r:
            continue
        sb = ss = sm = 0.0
        ratios = []
        for g in r["gemms"]:
            mt = model(g["m"], g["k"], g["n"]) * 1e6
            c = g["calls_per_iter"]
            sb += g["burst_us"] * c
            ss += g["sustained_us"] * c
            sm += mt * c
            ratios.append(g["sustained_us"] / mt)
        print(f"| {r['D']}, {r['F']}, {r['S']}, {r['B']}, {r['L']} | {r['gemm_duty']:.2f} | {r['sustained_sm_clock_MHz']:.0f} "
              f"| {sb / 1e3:.1f} ms | {ss / 1e3:.1f} ms | {sm / 1e3:.1f} ms | {ss / sm:.3f} | {sb / sm:.3f} "
              f"| {min(ratios):.3f}-{max(ratios):.3f} |")


if __name__ == "__main__":
    main()
