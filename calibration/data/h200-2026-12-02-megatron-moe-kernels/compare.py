#!/usr/bin/env python3
"""Measured GPU time per layer by region (analyze.py over the traces) against racksim's ops for the same
single-H200 job (racksim/*.yaml, `racksim run --trace`), forward and backward.
Usage (repository root): python3 calibration/data/h200-2026-12-02-megatron-moe-kernels/compare.py build/sim/cli/racksim
"""
import collections, json, os, subprocess, sys, tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from analyze import table  # noqa: E402

PAIRS = [("qwen3-rank-4k", "raw/run2_sdpa.trace.json.gz"), ("qwen3-rank-16k-top2", "raw/run2_sdpa_s16k_top2.trace.json.gz"),
         ("mixtral-like", "raw/run2_mixtral_local.trace.json.gz")]
REGIONS = ["attn", "router", "permute", "experts", "unpermute"]


def racksim_region(op):
    if op.startswith(("router",)):
        return "router"
    if op.startswith("dispatch."):
        return "permute"
    if op.startswith("experts."):
        return "experts"
    if op.startswith(("combine.", "mlp_out.")):
        return "unpermute"
    return "attn"


def racksim_class(op):
    base = op.split(".")
    if base[0] == "attn" and base[1] in ("flash",):
        return "attention"
    if base[0] in ("qkv", "attn_out") and "residual" not in op or op.startswith(("experts.gate_up", "experts.down")) \
            or op in ("router", "router.dgrad", "router.wgrad") or op.startswith(("attn_scores.qk", "attn_scores.dq", "attn_scores.dk", "attn.pv", "attn.dp", "attn.dv")):
        return "GEMM"
    if base[0] in ("norm1", "norm2"):
        return "norm"
    return "elementwise/copy"


def measured_class(kd):
    if kd.startswith("GEMM"):
        return "GEMM"
    if kd.startswith("attention"):
        return "attention"
    if kd == "norm":
        return "norm"
    return "elementwise/copy"


def racksim_layers(binary, scenario):
    with tempfile.TemporaryDirectory() as d:
        tr = os.path.join(d, "t.json")
        subprocess.run([binary, "-q", "run", scenario, "--trace", tr], check=True, stdout=subprocess.DEVNULL)
        ev = json.load(open(tr))["traceEvents"]
    per = collections.Counter()
    ops = collections.Counter()
    layers = set()
    for e in ev:
        c = e.get("cat", "")
        parts = e["name"].split(".")
        if not c.startswith("kernel") or len(parts) < 3 or not parts[1].startswith("L"):
            continue
        layers.add(parts[1])
        ph = "fwd" if c.endswith("forward") else "bwd"
        op = ".".join(parts[2:])
        per[(ph, racksim_region(op))] += e["dur"]
        per[(ph, racksim_region(op), racksim_class(op))] += e["dur"]
        ops[ph] += 1
    n = len(layers)
    return {k: v / n for k, v in per.items()}, {k: v / n for k, v in ops.items()}


def main():
    binary = sys.argv[1]
    for scen, trace in PAIRS:
        rs, rs_ops = racksim_layers(binary, os.path.join(HERE, "racksim", scen + ".yaml"))
        ks, agg = table(os.path.join(HERE, trace))
        meas = collections.Counter()
        art = collections.Counter()
        nk = collections.Counter()
        for (ph, reg, kd), (n, t) in agg.items():
            if ph == "loss/other":
                continue
            nk[ph] += n / 2
            if kd.startswith("grad accumulate"):
                art[ph] += t / 2
            else:
                meas[(ph, reg)] += t / 2
                meas[(ph, reg, measured_class(kd))] += t / 2
        print(f"\n{scen} (ms per layer; measured = {trace}, .grad accumulation left out)")
        print(f"{'':6s} {'region / class':10s} {'measured':>9s} {'racksim':>9s} {'racksim/meas':>12s}")
        for ph in ("fwd", "bwd"):
            for r in REGIONS:
                m, p = meas[(ph, r)] / 1e3, rs.get((ph, r), 0) / 1e3
                print(f"{ph:6s} {r:10s} {m:9.3f} {p:9.3f} {p / m if m else float('nan'):12.2f}")
                for c in ("GEMM", "attention", "norm", "elementwise/copy"):
                    m, p = meas[(ph, r, c)] / 1e3, rs.get((ph, r, c), 0) / 1e3
                    if m or p:
                        print(f"{'':6s}   {c:18s} {m:9.3f} {p:9.3f}")
            m = sum(v for k, v in meas.items() if k[0] == ph and len(k) == 2) / 1e3
            p = sum(v for k, v in rs.items() if k[0] == ph and len(k) == 2) / 1e3
            print(f"{ph:6s} {'total':10s} {m:9.3f} {p:9.3f} {p / m:12.2f}   kernels {nk[ph]:.0f} vs ops {rs_ops[ph]:.0f};"
                  f" .grad accumulation {art[ph] / 1e3:.3f}")


if __name__ == "__main__":
    main()
