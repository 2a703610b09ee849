#!/usr/bin/env python3
"""Weight-gradient GEMMs as Transformer Engine's cublas_gemm runs them, accumulating into an fp32 main gradient in
place against the same GEMM writing bf16 (racksim-bench's wgrad section), pooled over the runs of this folder.

Prints, per variant family (bf16 in NT, TE's bf16 layout; bf16 in TN; fp8 e4m3 per-tensor in TN, TE's fp8 layout;
fp8 with 1x128 block scales in TN, TE's Float8BlockScaling on Hopper): the time ratio accumulate / bf16-out by tokens
(median over runs and rounds), and the extra time per output element by least squares through the origin over the
points of 4,096 or more tokens, per run and pooled, in ps and in bytes at the H100 calibration's HBM rate (what
`gpu.wgrad_accumulate_serial_bytes*` hold). Then the PyTorch path (calibration/torch/wgrad_fp32_accumulate.py,
`torch.addmm(out_dtype=float32)` in place) on the same card, interleaved with the bench runs (run2/order.txt).

Then the blockwise recipe's rates against per-tensor fp8 (per-tensor time / blockwise time, bf16 out): the weight
gradient's form (both operands 1x128) over all four runs, and, from run3, the forward's (weight in 128x128 blocks) and
the 1x128-both form on forward-shaped products. These are `gpu.fp8_blockwise_wgrad_rate_ratio` and the check of
`gpu.fp8_blockwise_rate_ratio`. Then, from run4, bf16 in TE's layouts against TN: the wgrad in NT, the dgrad in NN; and
the wgrad's NT / TN pooled over every run, the Hopper presets' `gpu.bf16_wgrad_nt_time_ratio`.

Usage: python3 derive.py   (from anywhere; reads run1/wgrad.json, run2/wgrad_a1.json, run2/wgrad_a2.json,
run3/wgrad.json, run4/wgrad.json, run2/torch_b*.jsonl)"""
import json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
# The accumulate figures are pooled over runs 1-2 (they set the presets); run3, taken after for the forward's rates,
# is printed beside them as a check.
RUNS = {"run1 (card 1651924023436)": "run1/wgrad.json", "run2a1 (card 1654123047598)": "run2/wgrad_a1.json",
        "run2a2 (card 1654123047598)": "run2/wgrad_a2.json"}
ALL_RUNS = dict(RUNS, **{"run3 (card 1651624108119)": "run3/wgrad.json"})
HBM_BPS = 3.35e12 * 0.8424  # hardware_models/calibrated/h100.yaml: hbm_efficiency 0.8424 of 3.35 TB/s
FAMILIES = ["bf16_nt", "bf16_tn", "fp8_e4m3_tn", "fp8_block_tn"]
# block-scaled bf16-out products whose result check failed (one 128-deep block lost at the largest outputs, 1-2K
# tokens; the accumulating ones check clean): left out of the fits and ratios
bad = set()
points = {}  # (run, variant, m, n, k, round) -> s
for run, rel in ALL_RUNS.items():
    for r in json.load(open(os.path.join(HERE, rel)))["wgrad"]["results"]:
        if "s" not in r:
            continue
        key = (run, r["variant"], r["m"], r["n"], r["k"], r["round"])
        points[key] = r["s"]["median"]
        if not (r.get("check_max_rel_err") is not None and r["check_max_rel_err"] < 2e-2):
            bad.add(key)


def pairs(fam, runs, min_k=0, max_k=10**9):
    for (run, v, m, n, k, q), t_acc in points.items():
        if run not in runs or v != f"{fam}_acc_fp32" or not (min_k <= k <= max_k):
            continue
        o = (run, f"{fam}_out_bf16", m, n, k, q)
        if o in points and o not in bad and (run, v, m, n, k, q) not in bad:
            yield m, n, k, t_acc, points[o]


def fit(fam, runs):
    xs, ys, bs = [], [], []
    for m, n, k, a, b in pairs(fam, runs, min_k=4096):
        xs.append(m * n); ys.append(a - b); bs.append(b)
    c = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    rms = (sum(((y - c * x) / b) ** 2 for x, y, b in zip(xs, ys, bs)) / len(xs)) ** 0.5
    return c, rms, len(xs)


print(f"{len(points)} timed points, {len(bad)} left out (result check failed)\n")
print("time ratio accumulate-in-place / bf16-out, median over runs and rounds (and min..max), by tokens")
tokens = sorted({k[4] for k in points if not k[1].startswith("fprop_")})
for fam in FAMILIES:
    cells = []
    for tk in tokens:
        rs = [a / b for _, _, _, a, b in pairs(fam, list(RUNS), tk, tk)]
        cells.append(f"{statistics.median(rs):.2f} ({min(rs):.2f}..{max(rs):.2f})")
    print(f"  {fam:13s} " + "  ".join(f"{tk}: {c}" for tk, c in zip(tokens, cells)))
print("\nextra time per output element (least squares through the origin, >= 4,096 tokens); bytes at "
      f"{HBM_BPS / 1e9:.0f} GB/s")
for fam in FAMILIES:
    for run in ALL_RUNS:
        c, rms, n = fit(fam, [run])
        print(f"  {fam:13s} {run:28s} {c * 1e12:6.3f} ps  {c * HBM_BPS:5.2f} B  rms {rms * 100:4.1f}%  ({n} points)")
    c, rms, n = fit(fam, list(RUNS))
    print(f"  {fam:13s} {'pooled, runs 1-2':28s} {c * 1e12:6.3f} ps  {c * HBM_BPS:5.2f} B  rms {rms * 100:4.1f}%  ({n} points)\n")
clean = {}  # (variant, m, n, k, round, run) -> s, result check passed
for run, rel in ALL_RUNS.items():
    for r in json.load(open(os.path.join(HERE, rel)))["wgrad"]["results"]:
        e = r.get("check_max_rel_err")
        if "s" in r and e is not None and e < 2e-2:
            clean[(r["variant"], r["m"], r["n"], r["k"], r["round"], run)] = r["s"]["median"]


def rate_ratios(per_tensor, blockwise, tokens_of):
    out = []
    for (v, m, n, k, q, run), s in clean.items():
        b = clean.get((blockwise, m, n, k, q, run))
        if v == per_tensor and b and tokens_of(m, n, k) >= 4096:
            out.append(s / b)
    return sorted(out)


print("blockwise fp8 rate / per-tensor fp8 rate (per-tensor time / blockwise time, bf16 out, >= 4,096 tokens)")
for what, pt, bw, tok in [
        ("wgrad form, both operands 1x128 (all runs)", "fp8_e4m3_tn_out_bf16", "fp8_block_tn_out_bf16", lambda m, n, k: k),
        ("forward, weight 128x128 (run3)", "fprop_fp8_e4m3_tn_out_bf16", "fprop_fp8_block2d_tn_out_bf16", lambda m, n, k: n),
        ("forward-shaped, both 1x128 (run3)", "fprop_fp8_e4m3_tn_out_bf16", "fprop_fp8_block_tn_out_bf16", lambda m, n, k: n)]:
    r = rate_ratios(pt, bw, tok)
    print(f"  {what:44s} median {statistics.median(r):.3f}  quartiles {r[len(r) // 4]:.3f}-{r[3 * len(r) // 4]:.3f}"
          f"  ({len(r)} points)")
print()
print("bf16 layouts, run4 (card 1651524048122): time in TE's layout / time in TN (racksim's GEMM calibration measures TN),"
      " bf16 out, median (min..max)")
run4 = {}
for r in json.load(open(os.path.join(HERE, "run4/wgrad.json")))["wgrad"]["results"]:
    e = r.get("check_max_rel_err")
    if "s" in r and e is not None and e < 2e-2:
        run4[(r["variant"], r["m"], r["n"], r["k"], r["round"])] = r["s"]["median"]
for what, te, tn, tok in [("wgrad, NT", "bf16_nt_out_bf16", "bf16_tn_out_bf16", lambda m, n, k: k),
                          ("dgrad, NN", "dgrad_bf16_nn_out_bf16", "dgrad_bf16_tn_out_bf16", lambda m, n, k: n)]:
    by = {}
    for (v, m, n, k, q), s in run4.items():
        o = run4.get((tn, m, n, k, q))
        if v == te and o:
            by.setdefault(tok(m, n, k), []).append(s / o)
    print(f"  {what}: " + "  ".join(f"{t}: {statistics.median(r):.3f} ({min(r):.3f}..{max(r):.3f})" for t, r in sorted(by.items())))
print()
print("bf16 wgrad in NT / TN, pooled over every run (run1, run2 x2, run3, run4: four cards), bf16 out, median (quartiles):"
      " the Hopper presets' gpu.bf16_wgrad_nt_time_ratio")
pooled = {}
for rel in ["run1/wgrad.json", "run2/wgrad_a1.json", "run2/wgrad_a2.json", "run3/wgrad.json", "run4/wgrad.json"]:
    pts = {}
    for r in json.load(open(os.path.join(HERE, rel)))["wgrad"]["results"]:
        e = r.get("check_max_rel_err")
        if "s" in r and e is not None and e < 2e-2:
            pts[(r["variant"], r["m"], r["n"], r["k"], r["round"])] = r["s"]["median"]
    for (v, m, n, k, q), s in pts.items():
        o = pts.get(("bf16_tn_out_bf16", m, n, k, q))
        if v == "bf16_nt_out_bf16" and o:
            pooled.setdefault(k, []).append(s / o)
for k, r in sorted(pooled.items()):
    r.sort()
    print(f"  {k:6d} tokens: {statistics.median(r):.4f} ({r[len(r) // 4]:.3f}-{r[3 * len(r) // 4]:.3f}), {len(r)} points")
print()
print("PyTorch's path on run2's card (torch.addmm, bf16 operands, fp32 C = D; its 17 shapes of 4,096+ tokens):")
for f in ["run2/torch_b1.jsonl", "run2/torch_b2.jsonl"]:
    xs, ys, bs = [], [], []
    for line in open(os.path.join(HERE, f)):
        r = json.loads(line)
        if r.get("tokens", 0) >= 4096:
            xs.append(r["n_out"] * r["n_in"]); ys.append(r["fp32inplace_s"] - r["bf16_s"]); bs.append(r["bf16_s"])
    c = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    rms = (sum(((y - c * x) / b) ** 2 for x, y, b in zip(xs, ys, bs)) / len(xs)) ** 0.5
    print(f"  {f:22s} {c * 1e12:6.3f} ps  {c * HBM_BPS:5.2f} B  rms {rms * 100:4.1f}%  ({len(xs)} points)")
