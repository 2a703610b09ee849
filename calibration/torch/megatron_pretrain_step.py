#!/usr/bin/env python3
"""Megatron-LM's own pretrain_gpt.py on one GPU, timed by Megatron's log and one iteration profiled.

Runs NVIDIA/Megatron-LM's pretrain_gpt.py (a folder MLM holding megatron/ and pretrain_gpt.py of the
commit under test) in this process after a few compatibility shims for a newer PyTorch than the commit
was written for (each one printed when applied; none changes what a kernel computes):
  - torch.distributed._all_gather_base / _reduce_scatter_base -> all_gather_into_tensor /
    reduce_scatter_tensor (the old names' successors), if the old names are gone;
  - torch._C._jit_* setters that no longer exist -> no-ops (Megatron r0.8's nvFuser switches;
    its fusions use torch.compile on torch >= 2.2, megatron/core/jit.py);
  - torch.cuda.amp.custom_fwd/custom_bwd -> torch.amp's, if gone.
One training iteration (PROFILE_ITER, counted from 1) runs under torch.profiler; its CUDA kernels are
summed by name and written as one JSON object to OUT_JSON, with the GPU-busy time (union of kernel
intervals) and the span from the first kernel's start to the last one's end.

Usage (on the device): python3 megatron_pretrain_step.py MLM OUT_JSON PROFILE_ITER -- <pretrain_gpt.py args>
"""
import functools, json, os, sys


def shims(torch):
    import torch.distributed as dist
    applied = []
    if not hasattr(dist, "_all_gather_base"):
        dist._all_gather_base = dist.all_gather_into_tensor
        applied.append("dist._all_gather_base")
    if not hasattr(dist, "_reduce_scatter_base"):
        dist._reduce_scatter_base = dist.reduce_scatter_tensor
        applied.append("dist._reduce_scatter_base")
    for n in ["_jit_set_profiling_executor", "_jit_set_profiling_mode", "_jit_override_can_fuse_on_cpu",
              "_jit_override_can_fuse_on_gpu", "_jit_set_texpr_fuser_enabled", "_jit_set_nvfuser_enabled",
              "_debug_set_autodiff_subgraph_inlining"]:
        if not hasattr(torch._C, n):
            setattr(torch._C, n, lambda *a, **k: None)
            applied.append("torch._C." + n)
    import torch.cuda.amp as amp
    for n in ["custom_fwd", "custom_bwd"]:
        if not hasattr(amp, n):
            setattr(amp, n, functools.partial(getattr(torch.amp, n), device_type="cuda"))
            applied.append("torch.cuda.amp." + n)
    print("shims applied:", applied or "none", flush=True)
    return applied


def summarize(torch, prof):
    kernels, intervals = {}, []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        dur = e.device_time if hasattr(e, "device_time") else e.cuda_time
        k = kernels.setdefault(e.name, [0.0, 0])
        k[0] += dur
        k[1] += 1
        intervals.append((e.time_range.start, e.time_range.end))
    intervals.sort()
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    span = (intervals[-1][1] - intervals[0][0]) if intervals else 0.0
    return dict(gpu_busy_us=busy, kernel_span_us=span, kernel_count=len(intervals),
                kernels_us={n: dict(us=round(v[0], 2), n=v[1]) for n, v in
                            sorted(kernels.items(), key=lambda kv: -kv[1][0])})


def main():
    mlm, out_json, profile_iter = sys.argv[1], sys.argv[2], int(sys.argv[3])
    assert sys.argv[4] == "--"
    rest = sys.argv[5:]
    sys.path.insert(0, os.path.abspath(mlm))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for k, v in dict(MASTER_ADDR="127.0.0.1", MASTER_PORT="29571", RANK="0", WORLD_SIZE="1",
                     LOCAL_RANK="0").items():
        os.environ.setdefault(k, v)
    import torch
    applied = shims(torch)
    import megatron.training.training as T
    orig = T.train_step
    count = [0]

    def train_step(*a, **k):
        count[0] += 1
        if count[0] != profile_iter:
            return orig(*a, **k)
        from torch.profiler import profile, ProfilerActivity
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            r = orig(*a, **k)
            torch.cuda.synchronize()
        rec = summarize(torch, prof)
        rec.update(iteration=count[0], shims=applied, torch=torch.__version__,
                   gpu=torch.cuda.get_device_name(), max_allocated_bytes=torch.cuda.max_memory_allocated(),
                   argv=rest)
        with open(out_json, "w") as f:
            json.dump(rec, f)
        print("profiled iteration %d: busy %.1f ms, span %.1f ms, %d kernels" %
              (count[0], rec["gpu_busy_us"] / 1e3, rec["kernel_span_us"] / 1e3, rec["kernel_count"]), flush=True)
        return r

    T.train_step = train_step
    run_pretrain_gpt(mlm, rest)


def run_pretrain_gpt(mlm, rest):
    """Runs MLM's pretrain_gpt.py in this process with the arguments rest (after the caller's patches)."""
    sys.argv = [os.path.join(mlm, "pretrain_gpt.py")] + rest
    import runpy
    runpy.run_path(os.path.join(mlm, "pretrain_gpt.py"), run_name="__main__")


if __name__ == "__main__":
    main()
