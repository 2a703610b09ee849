"""Megatron-Core on one GPU, every parallel size 1: the setup the megatron_* calibration scripts share."""
import os
import sys


def init(megatron_path, port):
    """Puts megatron_path (a folder holding megatron/core) first on the import path, starts a one-rank NCCL
    group and Megatron's parallel state (TP = PP = EP = 1) with its seeded CUDA RNG tracker; returns torch."""
    sys.path.insert(0, megatron_path)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    import torch
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                             expert_model_parallel_size=1)
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    model_parallel_cuda_manual_seed(123)
    return torch


def profiled_step(torch, step, warmup=3):
    """Runs step() warmup times, then once more under torch.profiler (CPU and CUDA); returns the profile."""
    from torch.profiler import profile, ProfilerActivity
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    return prof


def kernel_time_us(event):
    """A CUDA event's device time (the attribute's name changed across torch versions)."""
    return event.device_time if hasattr(event, "device_time") else event.cuda_time


def emit(out, rec, hidden=("trace",)):
    """Appends rec to the JSON-lines file out and prints it (less the hidden keys), then any traceback."""
    import json
    out.write(json.dumps(rec) + "\n")
    out.flush()
    print(json.dumps({k: v for k, v in rec.items() if k not in hidden}), flush=True)
    if "trace" in rec:
        print(rec["trace"], flush=True)
