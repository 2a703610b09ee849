#!/usr/bin/env python3
"""The 16-bit main-gradient accumulate through Transformer Engine's cuBLASLt descriptors (racksim-bench's wgrad section,
its acc_bf16 variants), against the fp32 accumulate of the same runs: per family (bf16 in NT, TE's bf16 wgrad; per-tensor
fp8 e4m3 in TN, TE's fp8 wgrad), the extra time over the bf16-out product per output element, least squares through the
origin over the points of 4,096 or more tokens, pooled over this folder's two runs (and per run), in ps, in bytes at the
H100 calibration's HBM rate, and the 16-bit fit as a fraction of the fp32 one. As
calibration/data/h100-2026-12-06-wgrad-te-path/derive.py fits the fp32 figures.
usage: python3 derive.py   (from anywhere)"""
import json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = {"a1": "wgrad_a1.json", "a2": "wgrad_a2.json"}
HBM_BPS = 3.35e12 * 0.8424  # hardware_models/calibrated/h100.yaml: hbm_efficiency 0.8424 of 3.35 TB/s
points = {}
for run, rel in RUNS.items():
    for r in json.load(open(os.path.join(HERE, rel)))["wgrad"]["results"]:
        if "s" in r and r.get("check_max_rel_err") is not None and r["check_max_rel_err"] < 2e-2:
            points[(run, r["variant"], r["m"], r["n"], r["k"], r["round"])] = r["s"]["median"]


def fit(fam, acc, runs, min_k=4096):
    xs, ys = [], []
    for (run, v, m, n, k, q), t in points.items():
        if run in runs and v == f"{fam}_{acc}" and k >= min_k:
            o = points.get((run, f"{fam}_out_bf16", m, n, k, q))
            if o is not None:
                xs.append(m * n); ys.append(t - o)
    return sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs), len(xs)


def ratios(fam, acc, k):
    return [t / points[(run, f"{fam}_out_bf16", m, n, kk, q)] for (run, v, m, n, kk, q), t in points.items()
            if v == f"{fam}_{acc}" and kk == k and (run, f"{fam}_out_bf16", m, n, kk, q) in points]


for fam in ("bf16_nt", "fp8_e4m3_tn"):
    c32, n32 = fit(fam, "acc_fp32", RUNS)
    c16, n16 = fit(fam, "acc_bf16", RUNS)
    per_run = [fit(fam, "acc_bf16", [r])[0] / fit(fam, "acc_fp32", [r])[0] for r in RUNS]
    print(f"{fam}: fp32 {c32 * 1e12:.3f} ps = {c32 * HBM_BPS:.2f} bytes ({n32} points); bf16 {c16 * 1e12:.3f} ps = "
          f"{c16 * HBM_BPS:.2f} bytes ({n16}); bf16 / fp32 {c16 / c32:.3f} (runs {', '.join(f'{x:.3f}' for x in per_run)})")
    for k in (1024, 2048, 4096, 8192, 16384):
        a, b = ratios(fam, "acc_fp32", k), ratios(fam, "acc_bf16", k)
        if a and b:
            print(f"  {k:>5} tokens: time over bf16-out, median: fp32 {statistics.median(a):.3f}, bf16 {statistics.median(b):.3f}")
    # Per shape at the rows' 4,096 tokens (the medians over runs and rounds): the 16-bit extra over the fp32 extra.
    per_shape = []
    for (run, v, m, n, k, q) in list(points):
        if run != "a1" or v != f"{fam}_out_bf16" or k != 4096 or q != 0:
            continue
        med = lambda var: statistics.median(t for (r2, v2, m2, n2, k2, q2), t in points.items()
                                            if (v2, m2, n2, k2) == (f"{fam}_{var}", m, n, k))
        o, a, b = med("out_bf16"), med("acc_fp32"), med("acc_bf16")
        if a > o:
            per_shape.append((b - o) / (a - o))
    print(f"  per shape at 4,096 tokens, 16-bit extra / fp32 extra: median {statistics.median(per_shape):.2f}, "
          f"range {min(per_shape):.2f}..{max(per_shape):.2f} ({len(per_shape)} weights)")

