#!/usr/bin/env python3
"""Measure two properties of the XLA GPU runtime that racksim's HLO replay needs.

1. Host cost of one execution (`dispatch`): a jitted chain of N tiny layers (N unrolled, no
   buffer donation, so every argument and output lives at a new address each step, as in a
   training step without donation). Per N: the synchronized step time (as train_step.py times
   it) and, from a profile of two steps, the host spans XLA records: the time from the Python
   call to the first command buffer, each command buffer's `update` (re-recording its CUDA graph
   when the buffers it uses moved) and `execute` (cuGraphLaunch), with the number of GPU kernels
   the graph ran; and the gap the GPU waited before the step's first kernel.
2. Achieved HBM bandwidth of XLA's kernels (`kernels`): causal materialized attention
   (jax.nn.dot_product_attention, implementation="xla") forward + backward on
   [B, H, S, Dh] bf16 with the scores in f32, at S = 1024..8192, as in the training steps'
   XLA attention. Every GPU kernel of the profiled steps with its duration and the launch
   details the profiler records (grid, block, registers, occupancy); the optimized HLO of each
   function is written beside it, so the kernels map to HLO fusions by name.
3. XLA's loop fusions at their limits (`loops`): fills (a broadcast of zero, as the zero-initialised
   gradient accumulators and scan stacks of a training step) of pred/s8/bf16/f32 with one, two or
   four outputs, and element-wise maps that move 2-8 bytes per output index (negate, add, convert,
   compare), each alone in a program over 2^27 elements ([32768, 4096]) and 2^25; every GPU kernel
   of two profiled calls, as in (2). Where a fusion moves few bytes per index its time is bound by
   the indices it writes, not by HBM bytes (docs/decisions.md, "XLA's loop fusions write at most so
   many indices a second").

Output (OUTDIR): xla_runtime.json (schema racksim-xla-runtime/1), NAME.hlo.txt.gz per function,
the raw profiles NAME.perfetto.json.gz.

  python3 xla_runtime_bench.py --outdir OUT
  python3 xla_runtime_bench.py --outdir OUT --only dispatch --devices 2   # one process, two GPUs
  python3 xla_runtime_bench.py --outdir OUT --only loops
"""

import argparse
import glob
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import jax
import jax.numpy as jnp

f32, bf16 = jnp.float32, jnp.bfloat16
DEVICES = 1  # GPUs each dispatch program runs on (--devices)


def profile(fn, args, outdir, name, steps=2):
    """Run fn(*args) `steps` times under the profiler (each synchronized); return the trace events."""
    tdir = f"/tmp/xrb_trace_{name}"
    shutil.rmtree(tdir, ignore_errors=True)
    jax.profiler.start_trace(tdir, create_perfetto_trace=True)
    for _ in range(steps):
        jax.block_until_ready(fn(*args))
    jax.profiler.stop_trace()
    files = glob.glob(f"{tdir}/**/perfetto_trace.json.gz", recursive=True)
    if not files:
        return []
    shutil.copy(files[0], os.path.join(outdir, f"{name}.perfetto.json.gz"))
    d = json.load(gzip.open(files[0]))
    return d["traceEvents"] if isinstance(d, dict) else d


def gpu_pid(events):
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name" and "GPU" in str(e.get("args", {}).get("name", "")):
            return e["pid"]
    return None


def timed(fn, args, warm=3, reps=15):
    for _ in range(warm):
        jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return ts


def write_hlo(fn, args, outdir, name):
    text = fn.lower(*args).compile().as_text()
    with gzip.open(os.path.join(outdir, f"{name}.hlo.txt.gz"), "wt") as f:
        f.write(text)
    return f"{name}.hlo.txt.gz"


def host_rows(events):
    """Per profiled step: host prologue, command-buffer updates/executes and the GPU's wait."""
    gp = gpu_pid(events)
    kern = sorted([e for e in events if e.get("ph") == "X" and e.get("pid") == gp], key=lambda e: e["ts"])
    host = sorted([e for e in events if e.get("ph") == "X" and e.get("pid") != gp], key=lambda e: e["ts"])
    calls = [e for e in host if e["name"].startswith("PjitFunction")]
    # PjitFunction appears nested twice per call; keep the outer one of each start time.
    seen, steps = set(), []
    for c in calls:
        k = round(c["ts"])
        if k in seen or any(abs(c["ts"] - s["ts"]) < 2 for s in steps):
            continue
        seen.add(k)
        steps.append(c)
    rows = []
    for i, c in enumerate(steps):
        end = steps[i + 1]["ts"] if i + 1 < len(steps) else float("inf")
        inside = [e for e in host if c["ts"] <= e["ts"] < end]
        ks = [e for e in kern if c["ts"] <= e["ts"] < end]
        cbs = []
        for e in inside:
            if e["name"].startswith("command_buffer_"):
                span = [x for x in inside if e["ts"] <= x["ts"] <= e["ts"] + e["dur"]]
                up = sum(x["dur"] for x in span if x["name"] == "command_buffer::update")
                ex = sum(x["dur"] for x in span if x["name"] == "command_buffer::execute")
                gids = {x["name"].split("CudaGraph:")[1].rstrip(")") for x in span if x["name"].startswith("cuGraphLaunch")}
                nk = sum(1 for k in ks if str(k.get("args", {}).get("cuda_graph_id")) in gids)
                cbs.append({"name": e["name"], "start_us": e["ts"] - c["ts"], "span_us": e["dur"], "update_us": up,
                            "execute_us": ex, "kernels": nk})
        first_cb = min((x["start_us"] for x in cbs), default=None)
        rows.append({
            "call_us": c["dur"],
            "first_command_buffer_us": first_cb,
            "first_kernel_us": (ks[0]["ts"] - c["ts"]) if ks else None,
            "gpu_span_us": (ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"]) if ks else None,
            "gpu_busy_us": sum(k["dur"] for k in ks),
            "kernels": len(ks),
            "command_buffers": cbs,
        })
    return rows


def kernel_rows(events):
    gp = gpu_pid(events)
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == gp:
            a = e.get("args", {})
            out.append({"name": e["name"], "ts_us": e["ts"], "dur_us": e["dur"], "stream": e.get("tid"),
                        "details": a.get("kernel_details"), "hlo_op": a.get("hlo_op")})
    out.sort(key=lambda r: r["ts_us"])
    return out


def timed_chained(fn, ws, x, warm=3, reps=15):
    """Steps that feed their new state back in, as a training loop does (ws = step(ws))."""
    for _ in range(warm):
        ws, h = fn(ws, x)
        jax.block_until_ready((ws, h))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        ws, h = fn(ws, x)
        jax.block_until_ready((ws, h))
        ts.append(time.perf_counter() - t0)
    return ws, ts


def profile_chained(fn, ws, x, outdir, name, steps=2):
    state = [ws]

    def one(_ws, _x):
        state[0], h = fn(state[0], _x)
        return state[0], h

    return profile(one, (ws, x), outdir, name, steps)


def dispatch_suite(outdir, res):
    """Unrolled chains of N layers; `same_args` calls with the same arguments every step,
    `chained` feeds the outputs back (arguments move every step, as in training without
    donation), `donated` does so with the state donated (outputs reuse the argument buffers);
    `scan` runs the N layers as a lax.scan over stacked weights (one command buffer per iteration)."""
    D = 256
    cases = [("same_args", n) for n in (4, 16, 64, 256)] + [("chained", n) for n in (4, 16, 64, 256)] + \
            [("donated", n) for n in (16, 256)] + [("scan", n) for n in (16, 64)]
    for mode, n in cases:
        def f(ws, x):
            h = x
            new = []
            for w in ws:
                h = jnp.tanh(h @ w)
                new.append(w * 0.999)
            return new, h

        def f_scan(wst, x):
            def body(h, w):
                return jnp.tanh(h @ w), w * 0.999
            h, new = jax.lax.scan(body, x, wst)
            return new, h

        key = jax.random.PRNGKey(n)
        ws = [jax.random.normal(jax.random.fold_in(key, i), (D, D), bf16) * 0.05 for i in range(n)]
        x = jax.random.normal(key, (D, D), bf16)
        if mode == "scan":
            ws = jnp.stack(ws)
        if DEVICES > 1:
            # One process driving DEVICES GPUs, as JAX does on one host: weights replicated, the
            # activations split by rows, so the program runs on every GPU and needs no collective.
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            import numpy as np
            mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
            ws = jax.device_put(ws, NamedSharding(mesh, P()))
            x = jax.device_put(x, NamedSharding(mesh, P("d", None)))
        fn = jax.jit(f_scan if mode == "scan" else f, donate_argnums=(0,) if mode == "donated" else ())
        name = f"dispatch_{mode}_n{n}" if DEVICES == 1 else f"dispatch_x{DEVICES}_{mode}_n{n}"
        hlo = write_hlo(fn, (ws, x), outdir, name)
        if mode == "same_args":
            ts = timed(lambda a, b: fn(a, b), (ws, x))
            ev = profile(fn, (ws, x), outdir, name)
        else:
            ws, ts = timed_chained(fn, ws, x)
            ev = profile_chained(fn, ws, x, outdir, name)
        res["dispatch"].append({"name": name, "mode": mode, "layers": n, "donate": mode == "donated", "devices": DEVICES,
                                "hlo_file": hlo, "step_s_all": ts, "step_s_median": statistics.median(ts),
                                "profiled_steps": host_rows(ev)})
        print(f"{name}: step {statistics.median(ts) * 1e3:.3f} ms", flush=True)


def kernel_suite(outdir, res):
    Dh = 128
    for (B, H, S) in ((32, 16, 1024), (8, 16, 2048), (4, 8, 4096), (1, 8, 8192)):
        def loss(q, k, v):
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
            return jnp.sum(jnp.square(o.astype(f32)))

        g = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
        key = jax.random.PRNGKey(S)
        q, k, v = (jax.random.normal(jax.random.fold_in(key, i), (B, S, H, Dh), bf16) for i in range(3))
        name = f"attn_xla_b{B}_h{H}_s{S}"
        hlo = write_hlo(g, (q, k, v), outdir, name)
        ts = timed(g, (q, k, v), warm=2, reps=8)
        ev = profile(g, (q, k, v), outdir, name)
        res["kernels"].append({"name": name, "B": B, "H": H, "S": S, "Dh": Dh, "hlo_file": hlo, "step_s_all": ts,
                               "step_s_median": statistics.median(ts), "profiled_steps": 2,
                               "gpu_kernels": kernel_rows(ev)})
        print(f"{name}: step {statistics.median(ts) * 1e3:.3f} ms", flush=True)


def loop_suite(outdir, res):
    """Loop fusions alone in a program: fills and element-wise maps of 2-8 bytes per output index."""
    i8 = jnp.int8
    cases = []
    for rows in (32768, 8192):
        shape = (rows, 4096)
        tag = f"{rows // 1024}k"
        for dt, dn in ((jnp.bool_, "pred"), (i8, "s8"), (bf16, "bf16"), (f32, "f32")):
            cases.append((f"fill_{dn}_{tag}", (lambda dt=dt, shape=shape: jnp.zeros(shape, dt)), ()))
        cases.append((f"fill_2xbf16_{tag}", (lambda shape=shape: (jnp.zeros(shape, bf16), jnp.zeros(shape, bf16))), ()))
        cases.append((f"fill_4xbf16_{tag}", (lambda shape=shape: tuple(jnp.zeros(shape, bf16) for _ in range(4))), ()))
        cases.append((f"fill_2xf32_{tag}", (lambda shape=shape: (jnp.zeros(shape, f32), jnp.zeros(shape, f32))), ()))
        key = jax.random.PRNGKey(rows)
        xb = jax.random.normal(key, shape, bf16)
        yb = jax.random.normal(jax.random.fold_in(key, 1), shape, bf16)
        xf = jax.random.normal(jax.random.fold_in(key, 2), shape, f32)
        xi = (jax.random.normal(jax.random.fold_in(key, 3), shape, f32) * 40).astype(i8)
        cases += [
            (f"neg_s8_{tag}", lambda x: -x, (xi,)),
            (f"neg_bf16_{tag}", lambda x: -x, (xb,)),
            (f"gt_bf16_pred_{tag}", lambda x: x > 0, (xb,)),
            (f"add_bf16_{tag}", lambda x, y: x + y, (xb, yb)),
            (f"cvt_f32_bf16_{tag}", lambda x: x.astype(bf16), (xf,)),
            (f"cvt_bf16_f32_{tag}", lambda x: x.astype(f32), (xb,)),
            (f"neg_f32_{tag}", lambda x: -x, (xf,)),
        ]
    for name, f, args in cases:
        g = jax.jit(f)
        hlo = write_hlo(g, args, outdir, name)
        ts = timed(g, args, warm=2, reps=8)
        ev = profile(g, args, outdir, name)
        res["kernels"].append({"name": name, "hlo_file": hlo, "step_s_all": ts, "step_s_median": statistics.median(ts),
                               "profiled_steps": 2, "gpu_kernels": kernel_rows(ev)})
        print(f"{name}: " + ", ".join(f"{k['name']} {k['dur_us']:.1f} us" for k in res["kernels"][-1]["gpu_kernels"]),
              flush=True)


def command_buffers_enabled():
    """False when XLA_FLAGS empties --xla_gpu_enable_command_buffer (every kernel launched one by one)."""
    for flag in os.environ.get("XLA_FLAGS", "").split():
        if flag.startswith("--xla_gpu_enable_command_buffer="):
            return flag.split("=", 1)[1] != ""
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--only", default="dispatch,kernels")
    ap.add_argument("--devices", type=int, default=1, help="dispatch: run each program on this many GPUs of one process")
    a = ap.parse_args()
    global DEVICES
    DEVICES = a.devices
    if len(jax.devices()) < DEVICES:
        sys.exit(f"--devices {DEVICES}: only {len(jax.devices())} GPU(s) visible")
    os.makedirs(a.outdir, exist_ok=True)
    dev = jax.devices()[0]
    res = {"schema": "racksim-xla-runtime/1", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "device": getattr(dev, "device_kind", str(dev)), "jax": jax.__version__, "argv": sys.argv,
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "command_buffers": command_buffers_enabled(), "devices": a.devices,
           "dispatch": [], "kernels": []}
    only = a.only.split(",")
    path = os.path.join(a.outdir, "xla_runtime.json")
    for part, fn in (("dispatch", dispatch_suite), ("kernels", kernel_suite), ("loops", loop_suite)):
        if part in only:
            try:
                fn(a.outdir, res)
            except Exception as e:  # keep what was measured
                res.setdefault("errors", []).append(f"{part}: {type(e).__name__}: {e}")
                print("ERROR", part, e, flush=True)
            with open(path, "w") as f:
                json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
