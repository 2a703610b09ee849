#!/usr/bin/env python3
"""Reads the two runs' layer_versions.jsonl (first/: dense and MoE blocks at Megatron-Core@932b7674, @d98e8a64 and
@1e057005, interleaved, two complete repetitions; moe/: the MoE block at @932b7674 and @d98e8a64, three repetitions)
and prints, per block and repetition, each version's 8-layer block host time and its ratio to @d98e8a64 within the
same repetition (the VM host's speed drifts between minutes, so only ratios within a repetition are compared).
Usage: python3 derive.py"""
import json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
for run in ("first", "moe"):
    rows = {}
    for line in open(os.path.join(here, run, "layer_versions.jsonl")):
        r = json.loads(line)
        if r.get("kind") == "megatron_block" and "step_wall_us" in r:
            rows[(r["name"], r["variant"], r["rep"])] = r
    names = sorted({k[0] for k in rows})
    print(f"run {run}/:")
    for name in names:
        for v in sorted({k[1] for k in rows if k[0] == name and k[1] != "d98e8a64"}):
            for key, label in (("step_wall_us", "training step"), ("fwd_host_us", "no-grad forward")):
                ratios = []
                for rep in sorted({k[2] for k in rows if k[0] == name}):
                    a, b = rows.get((name, v, rep)), rows.get((name, "d98e8a64", rep))
                    if a and b:
                        ratios.append((rep, a[key] / 1e3, b[key] / 1e3, a[key] / b[key]))
                if not ratios:
                    continue
                text = ", ".join(f"rep {rep}: {x:.1f} / {y:.1f} ms = {q:.3f}" for rep, x, y, q in ratios)
                print(f"  {name} {label}, {v} / d98e8a64: {text}; median {statistics.median(q for *_, q in ratios):.3f}")
    missing = [(k[0], k[1], k[2]) for k in ((json.loads(l)["name"], json.loads(l)["variant"], json.loads(l)["rep"])
               for l in open(os.path.join(here, run, "layer_versions.jsonl")) if '"error"' in l)]
    for m in missing:
        print(f"  not measured: {m[0]} at {m[1]}, repetition {m[2]} (an error; see the row's trace)")
