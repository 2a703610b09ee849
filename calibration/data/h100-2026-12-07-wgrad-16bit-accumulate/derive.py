#!/usr/bin/env python3
"""The 16-bit main-gradient accumulate's cost beyond a bf16-output GEMM, against the fp32 accumulate's, from this
folder's two runs: least squares through the origin of each in-place variant's extra time over `bf16` (D = C + dY^T X,
D = C, beta 1) on the output elements, over every shape with 4,096 or more tokens (the rows' micro-batches), as
calibration/data/h100-2026-12-06-wgrad-fp32-accumulate/derive.py fits the fp32 one; then the 16-bit fits as fractions of
the fp32 fit of the same runs, which is what gpu.wgrad_accumulate_serial_bytes_16bit takes of the preset's fp32 figure.
Also: fp16 against bf16 without an accumulate (Megatron --fp16's GEMMs at bf16's rate?).
usage: python3 derive.py   (from anywhere)"""
import json, os, statistics
HERE = os.path.dirname(os.path.abspath(__file__))
HBM_Bps = 2822.12e9  # hardware_models/calibrated/h100.yaml
pts = []
for f in ("run1_16bit.jsonl", "run2_16bit.jsonl"):
    for line in open(os.path.join(HERE, f)):
        r = json.loads(line)
        if "meta" in r:
            continue
        r["run"] = f.split("_")[0]
        pts.append(r)
fit = [r for r in pts if r["tokens"] >= 4096]


def slope(rows, key):
    return sum(r["n_out"] * r["n_in"] * (r[key] - r["bf16_s"]) for r in rows) / sum((r["n_out"] * r["n_in"]) ** 2 for r in rows)


c32 = slope(fit, "fp32inplace_s")
print(f"{len(fit)} points (4,096 tokens or more, both runs)")
print(f"fp32 in place: {c32:.4e} s per output element = {c32 * HBM_Bps:.3f} bytes at {HBM_Bps / 1e9:.2f} GB/s")
for key in ("bf16inplace_s", "fp16inplace_s"):
    c = slope(fit, key)
    per_run = [slope([r for r in fit if r["run"] == run], key) / slope([r for r in fit if r["run"] == run], "fp32inplace_s")
               for run in ("run1", "run2")]
    print(f"{key[:-2]}: {c:.4e} s per output element = {c * HBM_Bps:.3f} bytes; {c / c32:.3f} of the fp32 fit "
          f"(run 1 {per_run[0]:.3f}, run 2 {per_run[1]:.3f})")
# The two 16-bit variants move the same bytes: pooled, one fit over both (the mean of their slopes, same points).
pooled = (slope(fit, "bf16inplace_s") + slope(fit, "fp16inplace_s")) / 2
print(f"16-bit pooled: {pooled:.4e} s per output element = {pooled * HBM_Bps:.3f} bytes; {pooled / c32:.3f} of the fp32 fit "
      "(gpu.wgrad_accumulate_serial_bytes_16bit = this fraction x the preset's fp32 figure)")
r16 = [r["fp16_s"] / r["bf16_s"] for r in pts if "fp16_s" in r]
print(f"fp16 / bf16 without accumulate (run 1, {len(r16)} shapes): median {statistics.median(r16):.3f}, "
      f"range {min(r16):.3f}-{max(r16):.3f}")
print("| run | shape | tokens | bf16 out | bf16 in place | fp16 in place | fp32 in place |")
print("|---|---|---|---|---|---|---|")
for r in pts:
    t = r["bf16_s"]
    print(f"| {r['run']} | {r['label']} | {r['tokens']} | {t * 1e6:.1f} us | {r['bf16inplace_s'] / t:.3f} | "
          f"{r['fp16inplace_s'] / t:.3f} | {r['fp32inplace_s'] / t:.3f} |")
