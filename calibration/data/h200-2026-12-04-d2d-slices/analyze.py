#!/usr/bin/env python3
"""Where the scanned steps' dynamic memcpys ran (README.md): per GPU of a profile, the memcpy-like GPU events (the
driver's memcpy kernels memcpy128 / memcpy32_post, or MemcpyD2D copy-engine copies) by name, command buffer or HLO op
and grid; then the wall time the copy-engine copies and the memcpy kernels cover, and how much of it the GPU's other
kernels cover too (time ranges merged per GPU, so overlapping copies count once).
  python3 analyze.py profiles/s1b32_none_scan.perfetto_trace.json.gz"""
import collections
import gzip
import json
import statistics
import sys

events = json.load(gzip.open(sys.argv[1]))["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}


def merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(xs, ys):
    """Time of the merged ranges xs that the merged ranges ys cover too."""
    total, j = 0.0, 0
    for a, b in xs:
        while j < len(ys) and ys[j][1] <= a:
            j += 1
        k = j
        while k < len(ys) and ys[k][0] < b:
            total += max(0.0, min(b, ys[k][1]) - max(a, ys[k][0]))
            k += 1
    return total


for pid in sorted(p for p, n in procs.items() if "GPU" in n):
    gpu = [e for e in events if e.get("ph") == "X" and e["pid"] == pid]
    copies = [e for e in gpu if e["name"].lower().startswith("memcpy")]
    groups = collections.defaultdict(list)
    for e in copies:
        a = e.get("args", {})
        grid = (a.get("kernel_details") or "grid:- ").split("grid:")[1].split(" ")[0]
        groups[(e["name"], a.get("hlo_op", ""), grid)].append(e["dur"])
    print(procs[pid], "(two profiled steps): name, command buffer / hlo op, grid: count, median us, total ms")
    for k, v in sorted(groups.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"  {k}: {len(v)}, {statistics.median(v):.2f}, {sum(v) / 1e3:.3f}")
    others = merged([(e["ts"], e["ts"] + e["dur"]) for e in gpu if not e["name"].lower().startswith("memcpy")])
    for label, pick in (("copy-engine MemcpyD2D", lambda e: e["name"] == "MemcpyD2D"),
                        ("driver memcpy kernels", lambda e: e["name"].startswith("memcpy"))):
        xs = merged([(e["ts"], e["ts"] + e["dur"]) for e in copies if pick(e)])
        wall = sum(b - a for a, b in xs)
        print(f"  {label}: {wall / 1e3:.3f} ms of wall time, of which other kernels run during {covered(xs, others) / 1e3:.3f} ms")
