#!/usr/bin/env python3
"""Host (CPU) time of one torch.distributed NCCL call, as Megatron-Core issues its collectives.

Megatron-Core's per-layer host figures (megatron_layer_host.py) were measured at TP = EP = 1, where its
tensor-parallel and expert-parallel mappings return early without a collective; at scale each layer issues several
through torch.distributed (ProcessGroupNCCL: the work object, CUDA events on the NCCL stream, the stream waits,
NCCL's enqueue). This measures that host path per call on a one-rank NCCL group (NCCL still enqueues a kernel for
one rank; what differs with more ranks happens in NCCL's proxy thread, not in the calling thread).

For each call kind and size: the output allocated as Megatron's mappings allocate it (torch.empty), then the call,
N times back to back without synchronising; the host time per call is the loop's wall time over N (the GPU work per
call is a few microseconds, so the host sets the pace), the median of 7 repetitions.
Writes one JSON object per line. Usage (on the device): python3 calibration/torch/nccl_call_host.py --out FILE
"""
import argparse, json, os, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29581)
    args = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import wall_us_per_call  # (imports nothing of Megatron)
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    out = open(args.out, "w")

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(json.dumps(rec), flush=True)

    emit(dict(kind="env", torch=torch.__version__, nccl=".".join(map(str, torch.cuda.nccl.version())),
              gpu=torch.cuda.get_device_name()))

    def per_call_us(fn, n=2000, reps=7):
        for _ in range(50):
            fn()
        return wall_us_per_call(torch, fn, n, reps, wait_for_gpu=False)

    for numel in (1024, 1 << 20):
        x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
        cases = {
            "empty_alloc": lambda: torch.empty(numel, device="cuda", dtype=torch.bfloat16),
            "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(torch.empty_like(x), x),
            "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(torch.empty_like(x), x),
            "all_reduce": lambda: dist.all_reduce(x),
            "all_to_all_single": lambda: dist.all_to_all_single(torch.empty_like(x), x),
            "all_to_all_single_splits": lambda: dist.all_to_all_single(torch.empty_like(x), x, [numel], [numel]),
            "broadcast": lambda: dist.broadcast(x, 0),
            "all_gather_into_tensor_async_wait": lambda: dist.all_gather_into_tensor(torch.empty_like(x), x,
                                                                                     async_op=True).wait(),
            "reduce_scatter_tensor_async_wait": lambda: dist.reduce_scatter_tensor(torch.empty_like(x), x,
                                                                                   async_op=True).wait(),
        }
        for name, fn in cases.items():
            try:
                med, lo, hi = per_call_us(fn)
                emit(dict(kind="nccl_call_host", call=name, numel=numel, us_median=med, us_min=lo, us_max=hi))
            except Exception as e:
                emit(dict(kind="nccl_call_host", call=name, numel=numel, error=repr(e)[:300]))
        # Point-to-point as Megatron's pipeline issues it (batch_isend_irecv of a send and a receive); to self, if
        # this PyTorch allows it on a one-rank group.
        try:
            y = torch.empty_like(x)
            fn = lambda: [r.wait() for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, y, 0)])]
            med, lo, hi = per_call_us(fn, n=500)
            emit(dict(kind="nccl_call_host", call="batch_isend_irecv_pair", numel=numel, us_median=med, us_min=lo, us_max=hi))
        except Exception as e:
            emit(dict(kind="nccl_call_host", call="batch_isend_irecv_pair", numel=numel, error=repr(e)[:300]))
    out.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
