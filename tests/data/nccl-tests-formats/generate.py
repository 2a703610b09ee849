#!/usr/bin/env python3
"""Writes the synthetic nccl-tests outputs of this folder (README.md): the three shapes nccl-tests'
output takes on a cluster, in the exact layout of nccl-tests 2.19 (src/util.cu: writeDeviceReport,
writeResultHeader, writeBenchmarkLine*, writeResultFooter, the -J JSON writer), with numbers from
closed formulas (t = latency + size / bandwidth), not measurements. Run: python3 generate.py"""

import json


def fstr(v, width):  # nccl-tests' getFloatStr
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, v)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, v)


OPS = {  # program, redop, busbw factor(n), rounds count to ranks
    "all_reduce": ("all_reduce_perf", "sum", lambda n: 2 * (n - 1) / n, False),
    "all_gather": ("all_gather_perf", "none", lambda n: (n - 1) / n, True),
    "alltoall": ("alltoall_perf", "none", lambda n: (n - 1) / n, True),
}


def rows(op, n, lo, hi, lat_us, bw_GBps):
    prog, redop, factor, split = OPS[op]
    out, size = [], lo
    while size <= hi:
        count = size // 4
        param = count // n if split else count
        nbytes = param * n * 4 if split else count * 4
        t = lat_us + nbytes / (bw_GBps * 1e3)  # us
        alg = nbytes / 1e3 / t  # GB/s
        out.append((nbytes, param, redop, t, alg, alg * factor(n)))
        size *= 2
    return out


def table(op, n, lo, hi, lat, bw, cputime=False, prefix="", hosts=("node001",), per_host=8, extra=()):
    prog, redop, factor, split = OPS[op]
    p = lambda s: prefix + s
    lines = [p("# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703"),
             p(f"# Collective test starting: {prog}"),
             p(f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
               f"validation: 1 graph: 0 unalign: 0"),
             p("#"), p("# Using devices")]
    for r in range(n):
        host = hosts[r // per_host]
        lines.append(p("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
                       % (r, 0, 4000 + r, host, r % per_host, 0, 0x18 + r % per_host, 0, "SYNTHETIC GPU")))
    lines += extra
    t = "cputime" if cputime else "time"
    lines.append(p("#"))
    lines.append(p("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
                   % ("", "", "", "", "")))
    lines.append(p("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
                   % ("size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong")))
    lines.append(p("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
                   % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")))
    bus = []
    for nbytes, param, rop, tt, alg, busbw in rows(op, n, lo, hi, lat, bw):
        shown = tt * (1.03 if cputime else 1.0)  # host time per iteration: a little above the GPU's
        body = "  %7s  %6s  %6s  %6g" % (fstr(shown, 7), fstr(alg, 6), fstr(busbw, 6), 0)
        body2 = "  %7s  %6s  %6s  %6g" % (fstr(shown * 1.01, 7), fstr(alg / 1.01, 6), fstr(busbw / 1.01, 6), 0)
        lines.append(p("%12li  %12li  %8s  %6s  %6s%s%s" % (nbytes, param, "float", rop, "%6i" % -1, body, body2)))
        bus.append(busbw)
    lines.append(p("# %-20s : %d %s" % ("Out of bounds values", 0, "OK")))
    lines.append(p("# %-20s : %g " % ("Avg bus bandwidth", sum(bus) / len(bus))))
    lines.append(p("#"))
    lines.append(p(f"# Collective test concluded: {prog}"))
    lines.append(p(""))
    return lines


HEADER = ["# SYNTHETIC TEST INPUT, NOT A MEASUREMENT (tests/data/nccl-tests-formats/README.md)."]

# 1. A stdout log of all_reduce_perf -C 1 (cputime column), 8 GPUs of one node.
open("all_reduce_perf_cputime.log", "w").write(
    "\n".join(HEADER + table("all_reduce", 8, 1024, 1 << 30, 30.0, 360.0, cputime=True)) + "\n")

# 2. A Slurm job's .out: job-script chatter, `srun --label` prefixes, NCCL INFO lines, two tests
#    (all_reduce then all_gather) on 16 GPUs of two nodes.
info = ["0: node001:4000:4000 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>",
        "0: node001:4000:4000 [0] NCCL INFO NCCL version 2.27.3+cuda12.9"]
out = ["SYNTHETIC TEST INPUT, NOT A MEASUREMENT (tests/data/nccl-tests-formats/README.md).",
       "Job 123456 started on node[001-002] at Mon Dec  1 10:00:00 UTC 2026",
       "+ srun --label --mpi=pmix -N 2 --ntasks-per-node=8 ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 1"]
out += info + table("all_reduce", 16, 8, 1 << 30, 45.0, 180.0, prefix="0: ", hosts=("node001", "node002"))
out += ["+ srun --label --mpi=pmix -N 2 --ntasks-per-node=8 ./build/all_gather_perf -b 1K -e 1G -f 2 -g 1"]
out += table("all_gather", 16, 1024, 1 << 30, 40.0, 170.0, prefix="0: ", hosts=("node001", "node002"))
out += ["Job 123456 finished at Mon Dec  1 10:04:12 UTC 2026"]
open("slurm-123456.out", "w").write("\n".join(out) + "\n")

# 3. nccl-tests -J alltoall.json: the JSON report (its keys as util.cu writes them).
res = []
for nbytes, param, rop, tt, alg, busbw in rows("alltoall", 8, 1024, 1 << 28, 35.0, 150.0):
    res.append({"size": nbytes, "count": param, "type": "float", "redop": "none", "root": "    -1",
                "out_of_place": {"time": round(tt, 6), "alg_bw": round(alg, 6), "bus_bw": round(busbw, 6), "nwrong": 0},
                "in_place": {"time": round(tt * 1.01, 6), "alg_bw": round(alg / 1.01, 6), "bus_bw": round(busbw / 1.01, 6),
                             "nwrong": 0},
                "actual_iterations": 20, "experiment_name": ""})
doc = {"version": 1, "start_time": "2026-12-01 10:00:00", "comment": HEADER[0][2:],
       "args": ["./build/alltoall_perf", "-b", "1K", "-e", "256M", "-f", "2", "-g", "8", "-J", "alltoall.json"],
       "env": [], "nccl_version": 22703,
       "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 1024, "maximum_bytes": 1 << 28, "step_factor": 2,
                  "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1, "validation": 1, "graph": 0,
                  "blocking_collectives": "false", "per_iter_timing": "false", "per_iter_skip": 0,
                  "parallel_init": "false",
                  "devices": [{"rank": r, "group": 0, "pid": 4000, "hostname": "node001", "device": r,
                               "device_hex": "0000:%02x:00" % (0x18 + r), "device_info": "SYNTHETIC GPU"} for r in range(8)]},
       "results": res, "out_of_bounds": {"count": 0, "okay": "true"},
       "average_bus_bandwidth": {"bandwidth": sum(r["out_of_place"]["bus_bw"] for r in res) / len(res), "okay": "unchecked"},
       "errors": [], "end_time": "2026-12-01 10:01:00"}
open("alltoall.json", "w").write(json.dumps(doc, indent=1) + "\n")
