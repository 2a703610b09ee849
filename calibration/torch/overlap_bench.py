#!/usr/bin/env python3
"""When does an asynchronous NCCL all-reduce get the GPU beside a GEMM? (two GPUs, one process each)

Each rank, per trial: GEMM A (its output is "the gradient"), then an async all-reduce of a 32 MiB
bf16 buffer (torch.distributed, NCCL's own stream, which waits on A through an event), then GEMMs
B and C on the compute stream. A profile of the trials gives, per trial, when the NCCL kernel
started and ended relative to B's start and end. Run once with CUDA_DEVICE_MAX_CONNECTIONS unset
(CUDA's default: several hardware queues) and once with 1 (Megatron-LM's setting: one queue, kernels
dispatched in launch order). Output: one JSON line per setting.

    python3 overlap_bench.py --out rows.jsonl [--connections 1]
"""

import argparse
import gzip
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

N = 8192


def worker(rank, world, out, trials, port, ar_mib, background, op):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(ar_mib * 1024 * 1024 // 2, device="cuda", dtype=torch.bfloat16)
    h = torch.empty_like(g)
    peer = 1 - rank

    def collective(async_op):  # the all-reduce, or an exchange of g with the other rank
        if op == "all_reduce":
            return dist.all_reduce(g, async_op=async_op)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, g, peer), dist.P2POp(dist.irecv, h, peer)])
        if not async_op:
            for r in reqs:
                r.wait()
            return None
        return reqs
    src = torch.empty(2 * 1024 ** 3, device="cuda", dtype=torch.uint8)  # background copy: 2 GiB
    dst = torch.empty_like(src)

    def work():  # B and C: GEMMs, or HBM-bound copies of about the same length
        if background == "gemm":
            return a @ b
        dst.copy_(src)
        return dst

    def trial():
        c1 = a @ b  # A
        g.add_(c1[0, 0])  # the all-reduce needs A
        w = collective(True)
        c2 = work()  # B
        c3 = work()  # C
        for r in (w if isinstance(w, list) else [w]):
            r.wait()
        return c2, c3

    for _ in range(5):
        trial()
    # The all-reduce alone, for its standalone duration.
    torch.cuda.synchronize()
    dist.barrier()
    prof_dir = f"/tmp/overlap_{rank}"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            collective(False)
            torch.cuda.synchronize()
        for _ in range(trials):
            trial()
            torch.cuda.synchronize()
    os.makedirs(prof_dir, exist_ok=True)
    path = os.path.join(prof_dir, "trace.json")
    prof.export_chrome_trace(path)
    if rank == 0:
        ev = json.load(open(path))["traceEvents"]
        ks = sorted([e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"], key=lambda e: e["ts"])
        nccl = [e for e in ks if "nccl" in e["name"].lower()]
        gemm = [e for e in ks if "nccl" not in e["name"].lower() and e["dur"] > 200]  # A, B, C of each trial
        alone = [e["dur"] for e in nccl[:5]]
        rows = []
        for i, k in enumerate(nccl[5:]):
            if 3 * i + 2 >= len(gemm):
                break
            A, B = gemm[3 * i], gemm[3 * i + 1]
            rows.append({"a_end_to_nccl_start_us": k["ts"] - (A["ts"] + A["dur"]),
                         "b_start_to_nccl_start_us": k["ts"] - B["ts"],
                         "nccl_start_to_b_end_us": B["ts"] + B["dur"] - k["ts"],
                         "nccl_dur_us": k["dur"], "b_dur_us": B["dur"]})
        res = {"CUDA_DEVICE_MAX_CONNECTIONS": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "(unset)"),
               "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "gemm": f"{N}x{N}x{N} bf16", "background": background, "op": op, "all_reduce_bytes": g.numel() * 2,
               "world": world,
               "all_reduce_alone_us": alone, "trials": rows,
               "gemm_kernels": len(gemm), "nccl_kernels": len(nccl),
               "median_b_start_to_nccl_start_us": statistics.median(r["b_start_to_nccl_start_us"] for r in rows),
               "median_nccl_start_to_b_end_us": statistics.median(r["nccl_start_to_b_end_us"] for r in rows),
               "median_nccl_dur_us": statistics.median(r["nccl_dur_us"] for r in rows),
               "median_b_dur_us": statistics.median(r["b_dur_us"] for r in rows)}
        with open(out, "a") as f:
            f.write(json.dumps(res) + "\n")
        tag = f".conn{os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS', 'default')}.{op}.{background}.{ar_mib}MiB"
        with open(path, "rb") as fin, gzip.open(out + tag + ".trace.json.gz", "wb") as fout:
            fout.write(fin.read())
        print(json.dumps({k: v for k, v in res.items() if k != "trials"}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--ar-mib", type=int, default=32, help="all-reduce size (MiB of bf16)")
    ap.add_argument("--background", choices=["gemm", "copy"], default="gemm", help="what B and C are")
    ap.add_argument("--op", choices=["all_reduce", "send_recv"], default="all_reduce",
                    help="the collective: an all-reduce, or both ranks exchanging the buffer")
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        sys.exit("needs 2 GPUs")
    mp.spawn(worker, args=(2, a.out, a.trials, a.port, a.ar_mib, a.background, a.op), nprocs=2, join=True)


if __name__ == "__main__":
    main()
