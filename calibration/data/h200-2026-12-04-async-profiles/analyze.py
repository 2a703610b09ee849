#!/usr/bin/env python3
"""GPU time per step of a profile of N steps dispatched back to back (RACKSIM_PROFILE_ASYNC=1).

usage: analyze.py PROFILE.perfetto_trace.json.gz [STEPS]   (STEPS: 3, as train_step.py profiles them)

Prints, for GPU:0, the span from the first kernel's start to the last kernel's end over STEPS, the time some
kernel runs (time ranges merged), the kernels per step and the largest gaps between consecutive kernels.
"""
import gzip
import json
import sys


def main():
    path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    trace = json.load(gzip.open(path))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu0 = [pid for pid, name in names.items() if "GPU:0" in name][0]
    kernels = sorted((e for e in trace if e.get("ph") == "X" and e["pid"] == gpu0), key=lambda e: e["ts"])
    busy_us, start, end = 0.0, None, None
    for e in kernels:
        s, t = e["ts"], e["ts"] + e["dur"]
        if end is None or s > end:
            if end is not None:
                busy_us += end - start
            start, end = s, t
        else:
            end = max(end, t)
    busy_us += end - start
    span_us = max(e["ts"] + e["dur"] for e in kernels) - kernels[0]["ts"]
    gaps = sorted((b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(kernels, kernels[1:])), reverse=True)[:5]
    print(f"{path}: span {span_us / steps / 1e3:.3f} ms/step, busy {busy_us / steps / 1e3:.3f} ms/step, "
          f"{len(kernels) / steps:.0f} kernels/step, largest gaps {[round(g, 1) for g in gaps]} us")


if __name__ == "__main__":
    main()
