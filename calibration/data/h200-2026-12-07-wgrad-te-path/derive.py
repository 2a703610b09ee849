"""The H200's own weight-gradient figures from racksim-bench's wgrad section (two runs, one card): the fp32
main-gradient accumulate by kernel family, the blockwise recipe's wgrad rate over per-tensor fp8, and a bf16 wgrad in
Transformer Engine's NT layout over the TN product, computed as ../h100-2026-12-06-wgrad-te-path/derive.py computes
the H100's (the same least squares, the same medians), here at the H200's calibrated HBM rate.

Usage: python3 derive.py   (from anywhere; reads wgrad_a1.json and wgrad_a2.json beside it)"""
import json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = {"a1": "wgrad_a1.json", "a2": "wgrad_a2.json"}
HBM_BPS = 3891.99e9  # hardware_models/calibrated/h200.yaml: the fitted HBM bandwidth
FAMILIES = ["bf16_nt", "bf16_tn", "fp8_e4m3_tn", "fp8_block_tn"]
points, bad = {}, set()  # (run, variant, m, n, k, round) -> s; keys whose result check failed
for run, rel in RUNS.items():
    for r in json.load(open(os.path.join(HERE, rel)))["wgrad"]["results"]:
        if "s" not in r:
            continue
        key = (run, r["variant"], r["m"], r["n"], r["k"], r["round"])
        points[key] = r["s"]["median"]
        if not (r.get("check_max_rel_err") is not None and r["check_max_rel_err"] < 2e-2):
            bad.add(key)


def good(key):
    return key in points and key not in bad


def fit(fam):
    """Extra time per output element of the accumulating product over the bf16-out one, >= 4,096 tokens."""
    xs, ys, bs = [], [], []
    for (run, v, m, n, k, q), a in points.items():
        o = (run, f"{fam}_out_bf16", m, n, k, q)
        if v == f"{fam}_acc_fp32" and k >= 4096 and good((run, v, m, n, k, q)) and good(o):
            xs.append(m * n); ys.append(a - points[o]); bs.append(points[o])
    c = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    rms = (sum(((y - c * x) / b) ** 2 for x, y, b in zip(xs, ys, bs)) / len(xs)) ** 0.5
    return c, rms, len(xs)


def ratios(num, den, tokens_of, min_tokens=0):
    """time(num) / time(den) over the points both have, by tokens."""
    by = {}
    for (run, v, m, n, k, q), s in points.items():
        o = (run, den, m, n, k, q)
        if v == num and good((run, v, m, n, k, q)) and good(o) and tokens_of(m, n, k) >= min_tokens:
            by.setdefault(tokens_of(m, n, k), []).append(s / points[o])
    return by


def quartiles(r):
    r = sorted(r)
    return f"{statistics.median(r):.4f} ({r[len(r) // 4]:.3f}-{r[3 * len(r) // 4]:.3f}), {len(r)} points"


print(f"{len(points)} timed points, {len(bad)} left out (result check failed)\n")
print(f"fp32 main-gradient accumulate: extra time per output element, >= 4,096 tokens; bytes at {HBM_BPS / 1e9:.0f} GB/s")
for fam in FAMILIES:
    c, rms, n = fit(fam)
    print(f"  {fam:13s} {c * 1e12:6.3f} ps  {c * HBM_BPS:5.2f} B  rms {rms * 100:4.1f}%  ({n} points)")
print("\nblockwise fp8 rate / per-tensor fp8 rate, wgrad form (both operands 1x128), bf16 out, >= 4,096 tokens:")
pooled = [x for r in ratios("fp8_e4m3_tn_out_bf16", "fp8_block_tn_out_bf16", lambda m, n, k: k, 4096).values() for x in r]
print("  " + quartiles(pooled))
print("\nbf16 wgrad in NT / TN, bf16 out, by tokens (gpu.bf16_wgrad_nt_time_ratio):")
for k, r in sorted(ratios("bf16_nt_out_bf16", "bf16_tn_out_bf16", lambda m, n, k: k).items()):
    print(f"  {k:6d} tokens: " + quartiles(r))
