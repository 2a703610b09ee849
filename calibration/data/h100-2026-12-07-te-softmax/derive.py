#!/usr/bin/env python3
"""Transformer Engine's fused causal softmax against a copy of its bytes, by row length (the figures of
gpu.te_softmax_forward_time_ratio and gpu.te_softmax_backward_time_ratio): kernel time / time of a device-to-device
copy of the bytes racksim charges it (1.5 x 2 bytes a score forward, 2 x 2 backward), per shape and run, and their
mean per row length over the runs and batch sizes. Run from this folder: python3 derive.py"""
import json
import pathlib
from collections import defaultdict

ratios = defaultdict(list)  # (direction, seq) -> ratios
for f in sorted(pathlib.Path("raw").glob("run*_te_softmax.jsonl")):
    for line in f.read_text().splitlines():
        row = json.loads(line)
        if "seq" not in row:
            print(f"{f.name}: {row['device']}")
            continue
        for d in ("forward", "backward"):
            r = row[f"{d}_ms"] / row[f"copy_same_bytes_{d}_ms"]
            ratios[(d, row["seq"])].append(r)
            print(f"  {f.name} {d:8s} batches {row['attn_batches']:4d} S {row['seq']:5d}: kernel {row[f'{d}_ms']:.4f} ms, "
                  f"copy {row[f'copy_same_bytes_{d}_ms']:.4f} ms, ratio {r:.3f}")
for d in ("forward", "backward"):
    points = {s: sum(v) / len(v) for (dd, s), v in sorted(ratios.items()) if dd == d}
    print(f"te_softmax_{d}_time_ratio: {{" + ", ".join(f"{s}: {r:.2f}" for s, r in points.items()) + "}  "
          f"(spread within each S: " + ", ".join(f"{max(ratios[(d, s)]) / min(ratios[(d, s)]) - 1:.1%}" for s in points) + ")")
