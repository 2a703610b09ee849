#!/usr/bin/env python3
"""How much the background work (GEMM or HBM-bound copy) slows beside an NCCL all-reduce (issue #12).

Reads rank 0's profiles of overlap_bench.py in calibration/data/h200x2-2026-11-29-mechanisms/overlap/
overlap_matrix_traces.tar.gz (the tarball's file names; no GPU needed). Per trial: GEMM A, an all-reduce that
needs A, then B and C (GEMMs or 2 GiB device copies). For GEMM backgrounds: B's excess over the mean of A and C
(same trial, so the same power state; trials whose NCCL kernel also overlaps C are left out) against the time
the NCCL kernel was resident beside B; the slope is the share of B's rate lost while it is resident. For copy
backgrounds: each copy's excess over the median copy with no NCCL kernel beside it, per us of overlap.

    python3 calibration/torch/overlap_compute_slowdown.py calibration/data/h200x2-2026-11-29-mechanisms/overlap/overlap_matrix_traces.tar.gz
"""
import gzip
import io
import json
import statistics as st
import sys
import tarfile


def overlap(a, b):
    return max(0.0, min(a["ts"] + a["dur"], b["ts"] + b["dur"]) - max(a["ts"], b["ts"]))


def fit(xs, ys):  # least squares: slope through the origin, and intercept + slope
    through0 = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return through0, my - slope * mx, slope


def main():
    tar = tarfile.open(sys.argv[1])
    traces = {m.name.split("/")[-1]: m for m in tar.getmembers() if m.name.endswith(".trace.json.gz")}
    all_x, all_y = [], []
    for conn in ("1", "default"):
        for mib in (8, 32, 128):
            ev = json.load(io.TextIOWrapper(gzip.open(tar.extractfile(
                traces[f"overlap_matrix.jsonl.conn{conn}.gemm.{mib}MiB.trace.json.gz"]))))["traceEvents"]
            ks = sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"), key=lambda e: e["ts"])
            nccl = [e for e in ks if "nccl" in e["name"].lower()]
            gemm = [e for e in ks if "nccl" not in e["name"].lower() and e["dur"] > 200]
            xs, ys, ratio = [], [], []
            for i, k in enumerate(nccl[5:]):  # the first 5 ran alone
                a, b, c = gemm[3 * i:3 * i + 3]
                if overlap(c, k) > 0 or overlap(b, k) <= 0:
                    continue
                ref = (a["dur"] + c["dur"]) / 2
                xs.append(overlap(b, k))
                ys.append(b["dur"] - ref)
                ratio.append(b["dur"] / ref)
            if len(xs) < 3:
                continue
            if conn == "1":
                all_x += xs
                all_y += ys
            t0, a0, s = fit(xs, ys)
            print(f"GEMM conn={conn} {mib:3d} MiB: n={len(xs):2d} B/ref median {st.median(ratio):.3f} "
                  f"[{min(ratio):.3f}, {max(ratio):.3f}], NCCL beside B median {st.median(xs):.0f} us, "
                  f"excess median {st.median(ys):.0f} us; slope through 0 {t0:.3f}, fit {a0:.1f} us + {s:.3f} x")
    t0, a0, s = fit(all_x, all_y)
    print(f"GEMM conn=1 all sizes: n={len(all_x)} slope through 0 {t0:.3f}, fit {a0:.1f} us + {s:.3f} x "
          f"(24 NCCL CTAs of 132 SMs: {24 / 132:.3f})")
    for conn in ("1", "default"):
        for mib in (8, 32, 128):
            ev = json.load(io.TextIOWrapper(gzip.open(tar.extractfile(
                traces[f"overlap_matrix.jsonl.conn{conn}.copy.{mib}MiB.trace.json.gz"]))))["traceEvents"]
            xs = [e for e in ev if e.get("ph") == "X"]
            nccl = [e for e in xs if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
            copies = [e for e in xs if e.get("cat") == "gpu_memcpy" and e["dur"] > 500]
            rows = [(c["dur"], sum(overlap(c, n) for n in nccl)) for c in copies]
            alone = st.median(d for d, o in rows if o == 0)
            beside = [(d, o) for d, o in rows if o > 0]
            print(f"copy conn={conn} {mib:3d} MiB: {len(rows)} copies of 2 GiB, alone {alone:.0f} us; {len(beside)} beside "
                  f"NCCL (median overlap {st.median(o for d, o in beside):.0f} us): excess per us of overlap, "
                  f"median {st.median((d - alone) / o for d, o in beside):.3f}")


if __name__ == "__main__":
    main()
