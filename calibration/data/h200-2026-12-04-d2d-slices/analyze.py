#!/usr/bin/env python3
"""Where the scanned steps' dynamic memcpys ran on one H200 (README.md): per profile, the GPU's streams, every
memcpy-like GPU event (the driver's memcpy kernels memcpy128 / memcpy32_post, or MemcpyD2D copy-engine copies) by
name, command buffer and grid, and how much of their time overlapped other kernels.
  python3 analyze.py profiles/s1b32_none_scan.perfetto_trace.json.gz"""
import bisect
import collections
import gzip
import json
import statistics
import sys

events = json.load(gzip.open(sys.argv[1]))["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
gpu = [e for e in events if e.get("ph") == "X" and "GPU" in procs.get(e["pid"], "")]
print("GPU streams:", sorted({threads.get((e["pid"], e["tid"]), "?") for e in gpu}))
copies = sorted([e for e in gpu if e["name"].lower().startswith("memcpy")], key=lambda e: e["ts"])
others = sorted([e for e in gpu if not e["name"].lower().startswith("memcpy")], key=lambda e: e["ts"])
groups = collections.defaultdict(list)
for e in copies:
    a = e.get("args", {})
    grid = (a.get("kernel_details") or "grid:- ").split("grid:")[1].split(" ")[0]
    groups[(e["name"], a.get("hlo_op", ""), grid)].append(e["dur"])
print("name, command buffer / hlo op, grid: count, median us, total ms")
for k, v in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
    print(f"  {k}: {len(v)}, {statistics.median(v):.2f}, {sum(v) / 1e3:.3f}")
starts = [e["ts"] for e in others]
overlap = 0.0
for c in copies:
    a, b = c["ts"], c["ts"] + c["dur"]
    i = max(0, bisect.bisect_left(starts, a) - 64)
    for o in others[i:i + 256]:
        overlap += max(0.0, min(b, o["ts"] + o["dur"]) - max(a, o["ts"]))
print(f"memcpy events {sum(e['dur'] for e in copies) / 1e3:.3f} ms, of which beside other kernels {overlap / 1e3:.3f} ms;"
      f" all GPU events {sum(e['dur'] for e in gpu) / 1e3:.2f} ms (two profiled steps)")
