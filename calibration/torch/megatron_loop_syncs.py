#!/usr/bin/env python3
"""What makes Megatron-LM's training loop wait on the GPU: syncs, a host/GPU timeline, one profiled step.

Runs pretrain_gpt.py of a Megatron-LM folder MLM in this process (the shims of megatron_pretrain_step.py)
and instruments chosen iterations (counted from 1), each from an environment variable:
  TIMELINE_ITERS  a host/GPU position marker at every micro-batch's forward_step/backward_step start and end,
                  every module's forward start/end (embedding, each layer, final norm, output layer) and
                  every layer output's gradient arrival (backward): host perf_counter plus a CUDA event on
                  the current stream; after the step, each marker's host time and GPU time from the step's
                  start (a synchronize, then the reference event) go to OUT/timeline.json. GPU time minus
                  host time is how far the GPU trails the host there: near 0, the GPU waits for the host.
  SYNC_ITERS      torch.cuda.set_sync_debug_mode("warn") on; each warning's Python stack (its last 10
                  frames) counted per iteration into OUT/syncs.json (warnings from the autograd thread are
                  replayed by torch at the end of backward(), so they carry backward_step's stack).
  PROFILE_ITER    torch.profiler (CPU and CUDA activities, no stacks) over that step; the Chrome trace is
                  written gzipped to OUT/trace.json.gz (analysed by megatron_trace_idle.py).
Every iteration: host wall of train_step and the caching allocator's counter deltas (device mallocs and
frees, allocation retries) into OUT/iterations.json.

Usage (on the device): python3 megatron_loop_syncs.py MLM OUT -- <pretrain_gpt.py args>
"""
import collections, gzip, json, os, shutil, sys, time, traceback, warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_pretrain_step import run_pretrain_gpt, shims  # noqa: E402


def env_iters(name):
    return {int(x) for x in os.environ.get(name, "").split(",") if x.strip()}


class Timeline:
    """Host time and a CUDA event per marker; the events are read after the step."""

    def __init__(self, torch):
        self.torch, self.on, self.marks = torch, False, []

    def begin(self):
        self.torch.cuda.synchronize()
        self.t0 = time.perf_counter_ns()
        self.e0 = self.torch.cuda.Event(enable_timing=True)
        self.e0.record()
        self.marks, self.on = [], True

    def mark(self, label):
        if self.on:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append((label, time.perf_counter_ns(), e))

    def end(self):
        self.torch.cuda.synchronize()
        self.on = False
        return [dict(label=l, host_ms=(h - self.t0) / 1e6, gpu_ms=self.e0.elapsed_time(e))
                for l, h, e in self.marks]


def hook_modules(model, tl):
    """Forward start/end of the embedding, each layer, the final norm and output layer; gradient arrival
    at each one's output (the start of its backward on the host)."""
    m = model[0] if isinstance(model, list) else model
    named = []
    for name, mod in m.named_modules():
        short = name.replace("module.", "")
        if short in ("embedding", "decoder.final_layernorm", "output_layer") or \
                (short.startswith("decoder.layers.") and short.count(".") == 2):
            named.append((short, mod))

    for short, mod in named:
        def pre(mod, args, short=short):
            tl.mark("f+ " + short)

        def post(mod, args, out, short=short):
            tl.mark("f- " + short)
            t = out[0] if isinstance(out, tuple) else out
            if tl.on and hasattr(t, "requires_grad") and t.requires_grad:
                t.register_hook(lambda g, short=short: tl.mark("b+ " + short))
        mod.register_forward_pre_hook(pre)
        mod.register_forward_hook(post)
    return [s for s, _ in named]


def main():
    mlm, out = sys.argv[1], sys.argv[2]
    assert sys.argv[3] == "--"
    rest = sys.argv[4:]
    sys.path.insert(0, os.path.abspath(mlm))
    for k, v in dict(MASTER_ADDR="127.0.0.1", MASTER_PORT="29571", RANK="0", WORLD_SIZE="1",
                     LOCAL_RANK="0").items():
        os.environ.setdefault(k, v)
    import torch
    import torch.profiler
    applied = shims(torch)
    timeline_iters, sync_iters = env_iters("TIMELINE_ITERS"), env_iters("SYNC_ITERS")
    profile_iter = int(os.environ.get("PROFILE_ITER", "0"))
    import megatron.training.training as T
    import megatron.core.pipeline_parallel.schedules as S
    tl = Timeline(torch)
    state = dict(it=0, hooked=False, sync_on=False)
    syncs = collections.defaultdict(collections.Counter)
    iters, timelines = [], {}

    orig_show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if state["sync_on"] and "synchroniz" in str(message):
            frames = traceback.format_stack()[:-1]
            syncs[state["it"]]["".join(frames[-10:])] += 1
            return
        orig_show(message, category, filename, lineno, file, line)
    warnings.showwarning = showwarning

    def wrap(fn, label):
        def w(*a, **k):
            tl.mark(label + "+")
            with torch.profiler.record_function("mark:" + label):
                r = fn(*a, **k)
            tl.mark(label + "-")
            return r
        return w
    S.forward_step = wrap(S.forward_step, "forward_step")
    S.backward_step = wrap(S.backward_step, "backward_step")
    T.finalize_model_grads = wrap(T.finalize_model_grads, "finalize_model_grads")

    orig_step = T.train_step

    def train_step(forward_step_func, data_iterator, model, *a, **k):
        state["it"] += 1
        it = state["it"]
        if not state["hooked"]:
            state["layers"] = hook_modules(model, tl)
            state["hooked"] = True
        stats0 = torch.cuda.memory_stats()
        prof = None
        if it in timeline_iters:
            tl.begin()
        if it in sync_iters:
            warnings.filterwarnings("always", message=".*synchroniz.*")
            torch.cuda.set_sync_debug_mode("warn")
            state["sync_on"] = True
        if it == profile_iter:
            from torch.profiler import profile, ProfilerActivity
            torch.cuda.synchronize()
            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        t = time.perf_counter()
        r = orig_step(forward_step_func, data_iterator, model, *a, **k)
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - t) * 1e3
        if prof is not None:
            prof.__exit__(None, None, None)
            path = os.path.join(out, "trace.json")
            prof.export_chrome_trace(path)
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
                shutil.copyfileobj(f, g)
            os.remove(path)
        if state["sync_on"]:
            torch.cuda.set_sync_debug_mode(0)
            state["sync_on"] = False
        if it in timeline_iters:
            timelines[it] = tl.end()
        s1 = torch.cuda.memory_stats()
        delta = {k: s1.get(k, 0) - stats0.get(k, 0) for k in
                 ("segment.all.allocated", "segment.all.freed", "num_alloc_retries", "num_sync_all_streams",
                  "num_device_alloc", "num_device_free", "allocation.all.allocated")}
        rec = dict(iteration=it, wall_ms=round(wall_ms, 2), timeline=it in timeline_iters,
                   sync_debug=it in sync_iters, profiled=it == profile_iter, allocator=delta,
                   syncs=sum(syncs[it].values()))
        iters.append(rec)
        print("step", json.dumps(rec), flush=True)
        with open(os.path.join(out, "iterations.json"), "w") as f:
            json.dump(dict(iterations=iters, shims=applied, torch=torch.__version__, argv=rest,
                           cpu_count=os.cpu_count(), torch_threads=torch.get_num_threads(),
                           layers=state["layers"]), f)
        with open(os.path.join(out, "syncs.json"), "w") as f:
            json.dump({str(i): [dict(count=n, stack=s) for s, n in c.most_common()] for i, c in syncs.items()},
                      f, indent=1)
        with open(os.path.join(out, "timeline.json"), "w") as f:
            json.dump({str(i): v for i, v in timelines.items()}, f)
        return r

    T.train_step = train_step
    run_pretrain_gpt(mlm, rest)


if __name__ == "__main__":
    main()
