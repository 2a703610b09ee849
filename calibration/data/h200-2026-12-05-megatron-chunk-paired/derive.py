#!/usr/bin/env python3
"""Turns the paired runs of calibration/torch/megatron_chunk_host.py in this folder into the presets'
launch.megatron_chunk_* and launch.megatron_moe_chunk_* figures (x86 hosts; the Grace presets take them x 1.34).

Each row is one chunk size (L layers, dense or 8 experts): the chunk through Megatron-Core's schedules.forward_step /
backward_step and its wrappers, and the same layers' bare block, alternated repetition by repetition; d_fwd_us and
d_bwd_us are the medians of the paired differences per micro-batch. The figure is the median over the rows of one
kind (every L, both runs); a negative median (the schedule's step costs less than the pairs' noise) is 0.

Usage: python3 derive.py   (in this folder)
"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = {0: [], 8: []}
for path in sorted(glob.glob(os.path.join(here, "paired*_nolookup.jsonl"))):
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "chunk" and "error" not in r:
            rows[r["experts"]].append((os.path.basename(path), r))
for experts, rs in rows.items():
    name = "megatron_moe_chunk" if experts else "megatron_chunk"
    for f, r in rs:
        print(f"  {f} {r['name']}: {r['paired_reps']} pairs; forward {r['d_fwd_us']:.0f} us (quartiles "
              f"{r['d_fwd_quartiles_us'][0]:.0f}..{r['d_fwd_quartiles_us'][1]:.0f}), backward {r['d_bwd_us']:.0f} us "
              f"(quartiles {r['d_bwd_quartiles_us'][0]:.0f}..{r['d_bwd_quartiles_us'][1]:.0f}); bare block forward "
              f"{r['block_fwd_host_us']:.0f}, backward {r['block_bwd_host_us']:.0f} us")
    fwd = statistics.median(r["d_fwd_us"] for _, r in rs)
    bwd = statistics.median(r["d_bwd_us"] for _, r in rs)
    print(f"=> {name}_forward: {max(0.0, fwd):.0f} us")
    print(f"=> {name}_backward: {max(0.0, bwd):.0f} us")
