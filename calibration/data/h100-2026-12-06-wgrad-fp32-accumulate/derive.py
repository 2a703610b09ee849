#!/usr/bin/env python3
"""The fp32 main-gradient accumulate's cost beyond a bf16-output GEMM, from this folder's runs: least squares through
the origin of the extra time (in place, D = C, as Transformer Engine accumulates) on the output elements, over every
shape with 4,096 or more tokens in runs 2 and 3 (the rows' micro-batches; run 1 has no in-place variant), then in
bytes per element at the H100's calibrated HBM rate (hardware_models/calibrated/h100.yaml: 2,822.12 GB/s).
usage: python3 derive.py   (from anywhere)"""
import json, os
HERE = os.path.dirname(os.path.abspath(__file__))
HBM_Bps = 2822.12e9
pts = []
for f in ("run2_four_variants.jsonl", "run3_inplace.jsonl"):
    for line in open(os.path.join(HERE, f)):
        r = json.loads(line)
        if "meta" in r:
            continue
        r["run"] = f.split("_")[0]
        pts.append(r)
fit = [r for r in pts if r["tokens"] >= 4096]
c = sum(r["n_out"] * r["n_in"] * (r["fp32inplace_s"] - r["bf16_s"]) for r in fit) / sum((r["n_out"] * r["n_in"]) ** 2 for r in fit)
print(f"{len(fit)} points: {c:.4e} s per output element = {c * HBM_Bps:.3f} bytes per element at {HBM_Bps / 1e9:.2f} GB/s")
print("| run | shape | tokens | bf16 out | fp32 in place | measured ratio | model ratio |")
print("|---|---|---|---|---|---|---|")
res = []
for r in pts:
    t, e = r["bf16_s"], r["fp32inplace_s"]
    model = t + c * r["n_out"] * r["n_in"]
    if r["tokens"] >= 4096:
        res.append(model / e - 1)
    print(f"| {r['run']} | {r['label']} | {r['tokens']} | {t * 1e6:.1f} us | {e * 1e6:.1f} us | {e / t:.3f} | {model / t:.3f} |")
rms = (sum(x * x for x in res) / len(res)) ** 0.5
print(f"model against the in-place time, 4,096 tokens or more: rms {rms:.3f}, max {max(map(abs, res)):.3f}")
