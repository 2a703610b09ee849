"""Megatron-Core on one GPU, every parallel size 1: the setup the megatron_* calibration scripts share."""
import argparse
import dataclasses
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def init(megatron_path, port):
    """Puts megatron_path (a folder holding megatron/core) first on the import path, starts a one-rank NCCL
    group and Megatron's parallel state (TP = PP = EP = 1) with its seeded CUDA RNG tracker; returns torch."""
    # This folder's grouped_gemm.py would shadow the optional package Megatron-Core probes for.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
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
    _define_missing_te_names()
    return torch


def _define_missing_te_names():
    """Megatron-LM@932b7674's moe_utils imports te_general_gemm with Transformer Engine's other MoE functions and leaves
    the name undefined when that import fails, then tests it for None in the router's gating (NameError on a machine
    without TE). Defined as None where missing, which is the fallback the code means: the router's torch GEMM."""
    try:
        import megatron.core.transformer.moe.moe_utils as mu
    except ImportError:
        return
    if not getattr(mu, "HAVE_TE", True) and not hasattr(mu, "te_general_gemm"):
        mu.te_general_gemm = None


def disable_nvtx_lookup():
    """Megatron-LM 7f9f2bf750..158951764f (2025-05-16..06-09) names every NVTX range from its caller's frame with
    inspect before checking whether profiling is on (../data/h100-2026-12-05-megatron-nvtx-host); this makes the name a
    constant, so that what remains of such a version's host time is its code without that lookup. A no-op elsewhere."""
    import megatron.core.utils as mcu
    if hasattr(mcu, "_nvtx_range_get_func_path"):
        mcu._nvtx_range_get_func_path = lambda: "range"


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


def wall_us_per_call(torch, fn, iters, reps, wait_for_gpu=True):
    """fn's wall time per call in microseconds over reps repetitions of iters calls, each repetition started with the
    GPU idle: (median, min, max). wait_for_gpu=False reads the clock before the GPU catches up (the host's time)."""
    import statistics
    import time
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        if wait_for_gpu:
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / iters * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts), min(ts), max(ts)


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


def start(default_port, add_arguments=None):
    """The DDP scripts' common start: parses --megatron, --out and --port (and whatever add_arguments(parser) adds),
    starts Megatron-Core on one GPU (init), opens the JSON-lines output and writes its env line; returns
    (torch, args, out)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=default_port)
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args()
    torch = init(args.megatron, args.port)
    out = open(args.out, "w")
    emit(out, dict(kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), megatron=args.megatron))
    return torch, args, out


def llama_block_config(torch, layers, hidden, heads, ffn, experts=None, topk=2):
    """A TransformerConfig for a bf16 Llama-style block (RMSNorm, SwiGLU, no biases, no dropout); with experts, an MoE
    block with the all-to-all dispatcher and SequentialMLP experts (no grouped GEMM on the device)."""
    from megatron.core.transformer.transformer_config import TransformerConfig
    kw = dict(num_layers=layers, hidden_size=hidden, num_attention_heads=heads, ffn_hidden_size=ffn, bf16=True,
              params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
              add_bias_linear=False, gated_linear_unit=True, activation_func=torch.nn.functional.silu,
              normalization="RMSNorm")
    if experts:
        kw.update(num_moe_experts=experts, moe_router_topk=topk, moe_token_dispatcher_type="alltoall",
                  moe_grouped_gemm=False, moe_ffn_hidden_size=ffn, moe_router_load_balancing_type="aux_loss",
                  moe_aux_loss_coeff=1e-2)
    return TransformerConfig(**kw)


def ddp_config(**kw):
    """Megatron-Core's DistributedDataParallelConfig with the given fields, those its version lacks left out."""
    from megatron.core.distributed import DistributedDataParallelConfig
    fields = {f.name for f in dataclasses.fields(DistributedDataParallelConfig)}
    return DistributedDataParallelConfig(**{k: v for k, v in kw.items() if k in fields})


def record_error(rec):
    """Called in an except block: notes the exception and the end of its traceback in rec (emit prints the trace)."""
    import traceback
    rec["error"] = repr(sys.exc_info()[1])[:500]
    rec["trace"] = traceback.format_exc()[-2000:]
