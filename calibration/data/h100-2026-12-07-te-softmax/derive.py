#!/usr/bin/env python3
"""Transformer Engine's fused causal softmax by row length: the rate at which it moves the bytes racksim charges it
(1.5 x 2 bytes a score forward, 2 x 2 backward), the figures of gpu.te_softmax_forward_GBps and
gpu.te_softmax_backward_GBps, and for comparison its time against a device-to-device copy of those bytes; per shape
and run, and their mean per row length over the runs and batch sizes. Run from this folder: python3 derive.py"""
import json
import pathlib
from collections import defaultdict

ratios = defaultdict(list)  # (direction, seq) -> ratios
rates = defaultdict(list)  # (direction, seq) -> GB/s
for f in sorted(pathlib.Path("raw").glob("run*_te_softmax.jsonl")):
    for line in f.read_text().splitlines():
        row = json.loads(line)
        if "seq" not in row:
            print(f"{f.name}: {row['device']}")
            continue
        for d in ("forward", "backward"):
            r = row[f"{d}_ms"] / row[f"copy_same_bytes_{d}_ms"]
            ratios[(d, row["seq"])].append(r)
            rates[(d, row["seq"])].append(row[f"{d}_GBps"])
            print(f"  {f.name} {d:8s} batches {row['attn_batches']:4d} S {row['seq']:5d}: kernel {row[f'{d}_ms']:.4f} ms, "
                  f"copy {row[f'copy_same_bytes_{d}_ms']:.4f} ms, ratio {r:.3f}")
for d in ("forward", "backward"):
    points = {s: sum(v) / len(v) for (dd, s), v in sorted(ratios.items()) if dd == d}
    print(f"{d} time / a copy of its bytes: {{" + ", ".join(f"{s}: {r:.2f}" for s, r in points.items()) + "}  "
          f"(spread within each S: " + ", ".join(f"{max(ratios[(d, s)]) / min(ratios[(d, s)]) - 1:.1%}" for s in points) + ")")
for d in ("forward", "backward"):
    points = {s: sum(v) / len(v) for (dd, s), v in sorted(rates.items()) if dd == d}
    print(f"te_softmax_{d}_GBps: {{" + ", ".join(f"{s}: {r:.0f}" for s, r in points.items()) + "}  (range within each S: " +
          ", ".join(f"{min(rates[(d, s)]):.0f}-{max(rates[(d, s)]):.0f}" for s in points) + ")")

