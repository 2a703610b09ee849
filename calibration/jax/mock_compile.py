#!/usr/bin/env python3
"""Compile (not run) a MaxText-style decoder training step for a multi-node GPU mesh on one GPU.

JAX's mock GPU topology (`jax_mock_gpu_topology`, "<nodes>x<processes per node>x<GPUs per process>"; JAX's
persistent-cache docs, "Pre-compiling multi-node programs on single node") makes the GPU client present the
devices of the whole cluster, so XLA's GPU compiler partitions, schedules and combines the program exactly as it
would for that cluster, with this GPU's model for autotuning. Nothing is run: the optimized HLO (what collectives
XLA emits, over which replica groups, in which dtype, and where the latency hiding scheduler puts their start
and done) is the result, replayed by `racksim replay` and compared with the scenario builder.

The model follows MaxText's Llama 2 decoder (AI-Hypercomputer/maxtext@efb6d9e4 layers/llama2.py, base.yml):
RMSNorm, three Q/K/V projections (fused_qkv: False), causal attention through jax.nn.dot_product_attention
(cuDNN when --attention cudnn, as attention=cudnn_flash_te), output projection, RMSNorm, SwiGLU MLP; fp32
parameters cast to bf16 inside the step (weight_dtype float32); embedding by one-hot matmul when --iota-embed
(use_iota_embed=true); untied output head; fp32 cross entropy; optax.adamw. Parameters are sharded over the
'fsdp' mesh axis on their embed dimension and replicated over 'data' (MaxText's logical_axis_rules: 'embed' ->
fsdp; nothing maps weights to 'data'); activations' batch over ('data', 'fsdp'). Each layer is wrapped in
jax.checkpoint with the chosen policy (minimal_flash = dots with no batch dims + the name 'context').

Usage (on a machine with one GPU of the model to compile for; XLA_FLAGS must include --xla_gpu_shard_autotuning=false,
or the compile waits for the mocked processes' autotuning results forever; mock_compile.sh sets it):
  XLA_FLAGS=--xla_gpu_shard_autotuning=false python3 mock_compile.py --name NAME --topology 2x8x1 --mesh 2,8 \
      [--L --D --H --KV --F --S --B --V] [--policy minimal_flash] [--scan] [--iota-embed] [--logits-fp32] --outdir OUT
  racksim replay OUT/NAME.hlo.txt.gz --system h100-sxm --gpus 16 --set system.calibration=h200
Writes OUT/NAME.hlo.txt.gz and OUT/NAME.json (shapes, flags, versions, memory analysis, collective summary).
--run N also runs the program on the one GPU with JAX's mock NCCL: not a timing measurement (the README of
calibration/data/h200-2026-12-04-mock-compile says why).
"""

import argparse
import gzip
import json
import os
import re
import socket
import time
from collections import defaultdict


_ELEM_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "s32": 4, "u32": 4, "f8e4m3fn": 1, "f8e5m2": 1, "pred": 1, "s8": 1, "u8": 1}
_COLL = re.compile(r"\s*(?:ROOT )?%(\S+) = (.+?) (all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all)"
                   r"(-start|-done)?\((.*)")
_GROUPS = re.compile(r"replica_groups=(mesh\[[^\]]*\] \{[^}]*\}|\[[^\]]*\]<=\[[^\]]*\](?:T\([^)]*\))?|\{[^ ]*\})")


def _shape_bytes(text):
    """Bytes and first element type of the array shapes in an HLO shape text (a tuple sums its members)."""
    total, dtype = 0, None
    for t, dims in re.findall(r"([a-z0-9]+)\[([0-9,]*)\]", text):
        if t not in _ELEM_BYTES:
            continue
        dtype = dtype or t
        n = 1
        for d in dims.split(","):
            if d:
                n *= int(d)
        total += n * _ELEM_BYTES[t]
    return total, dtype


def collective_summary(hlo: str):
    """The collectives of an optimized HLO module by opcode, element type and replica groups: count and output
    bytes (an asynchronous one counted at its done, whose shape is the output; its groups read at its start)."""
    out = defaultdict(lambda: {"count": 0, "output_bytes": 0})
    starts = {}
    for line in hlo.splitlines():
        m = _COLL.match(line)
        if not m:
            continue
        name, shape, op, suffix, rest = m.groups()
        g = _GROUPS.search(line)
        groups = g.group(1) if g else "-"
        if suffix == "-start":
            starts[name] = (groups, _shape_bytes(shape)[1])
            continue
        if suffix == "-done":
            src = re.match(r"%(\S+?)\)", rest)
            groups, dtype = starts.get(src.group(1) if src else "", ("?", None))
            nbytes = _shape_bytes(shape)[0]
        else:
            nbytes, dtype = _shape_bytes(shape)
        key = f"{op} {dtype} groups={groups}"
        out[key]["count"] += 1
        out[key]["output_bytes"] += nbytes
    return dict(out)


def run_local(jax, jnp, np, compiled, args, steps, V, log):
    """Runs the compiled cluster program on this process's one GPU: every input is a global array made of its
    local shard only (as each process of a multi-process job provides its own), weights ~N(0, 0.02), norms 1,
    tokens uniform. Returns the step times (each synchronized) after 3 warm-ups."""
    rng = np.random.default_rng(0)

    def local(x, zero=False):
        dev = jax.local_devices()[0]
        idx = x.sharding.addressable_devices_indices_map(x.shape)[dev]
        shape = tuple(len(range(*sl.indices(n))) for sl, n in zip(idx, x.shape))
        if zero:
            buf = np.zeros(shape, x.dtype)
        elif x.dtype == jnp.int32:
            buf = rng.integers(0, V, size=shape, dtype=np.int32)
        elif len(x.shape) <= 1:
            buf = np.ones(shape, np.float32) if len(x.shape) == 1 else np.zeros(shape, x.dtype)
        else:
            buf = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(x.dtype)
        return jax.make_array_from_single_device_arrays(x.shape, x.sharding, [jax.device_put(buf, dev)])

    p, tok, tgt = (jax.tree_util.tree_map(local, t) for t in (args[0], args[2], args[3]))
    o = jax.tree_util.tree_map(lambda x: local(x, zero=True), args[1])  # Adam's moments and count start at zero
    times = []
    for i in range(3 + steps):
        t0 = time.perf_counter()
        p, o, loss = compiled(p, o, tok, tgt)
        jax.block_until_ready((p, o, loss))
        dt = time.perf_counter() - t0
        if i >= 3:
            times.append(dt)
        log(f"step {i}: {dt * 1e3:.1f} ms")
    times.sort()
    stats = jax.local_devices()[0].memory_stats() or {}
    return {"run_steps": steps, "step_s_median": times[len(times) // 2], "step_s_min": times[0], "step_s_max": times[-1],
            "step_s_all": times, "peak_bytes_in_use": int(stats.get("peak_bytes_in_use", -1))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True)
    ap.add_argument("--topology", required=True, help="jax_mock_gpu_topology, e.g. 2x8x1")
    ap.add_argument("--mesh", required=True, help="data,fsdp sizes, e.g. 2,8 (their product = the devices)")
    for k, d in dict(D=4096, L=32, H=32, KV=0, F=11008, S=4096, B=4, V=32000).items():
        ap.add_argument(f"--{k}", type=int, default=d)
    ap.add_argument("--policy", choices=["none", "full", "minimal", "minimal_flash"], default="minimal_flash")
    ap.add_argument("--attention", choices=["xla", "cudnn"], default="cudnn")
    ap.add_argument("--scan", action="store_true", help="layers under jax.lax.scan (default: unrolled)")
    ap.add_argument("--iota-embed", action="store_true", help="embedding as a one-hot matmul (use_iota_embed)")
    ap.add_argument("--logits-fp32", action="store_true",
                    help="the output head's dot in fp32 (MaxText logits_dot_in_fp32: the fp32 kernel uncast, the input cast up)")
    ap.add_argument("--outdir", default="mock_out")
    ap.add_argument("--run", type=int, default=0, metavar="N",
                    help="also run the compiled step N times on this GPU (its shard of every input; the collectives "
                         "go to JAX's mock NCCL, which moves nothing). Not a timing of the cluster's program: the "
                         "gathered operands are uninitialized")
    a = ap.parse_args()

    import faulthandler
    import sys

    faulthandler.dump_traceback_later(float(os.environ.get("MOCK_TRACEBACK_AFTER_S", "240")), exit=False)
    import jax

    jax.config.update("jax_mock_gpu_topology", a.topology)
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax.ad_checkpoint import checkpoint_name
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    ndata, nfsdp = (int(x) for x in a.mesh.split(","))
    devs = jax.devices()
    log(f"{len(devs)} devices ({len(jax.local_devices())} local): {devs[0].device_kind}")
    assert len(devs) == ndata * nfsdp, f"mesh {a.mesh} needs {ndata * nfsdp} devices, the mock topology has {len(devs)}"
    mesh = Mesh(np.array(devs).reshape(ndata, nfsdp), ("data", "fsdp"))
    D, L, H, F, S, B, V = a.D, a.L, a.H, a.F, a.S, a.B, a.V
    KV = a.KV or H
    Dh = D // H
    bf16, f32 = jnp.bfloat16, jnp.float32
    GB = B * ndata * nfsdp  # global batch: per-device batch x devices
    act = NamedSharding(mesh, P(("data", "fsdp"), None, None))

    def rms(x, w):
        x32 = x.astype(f32)
        return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6) * w).astype(bf16)

    def layer(x, lp):
        x = jax.lax.with_sharding_constraint(x, act)
        h = rms(x, lp["n1"])
        q = checkpoint_name(h @ lp["wq"].astype(bf16), "query_proj").reshape(GB, S, H, Dh)
        k = checkpoint_name(h @ lp["wk"].astype(bf16), "key_proj").reshape(GB, S, KV, Dh)
        v = checkpoint_name(h @ lp["wv"].astype(bf16), "value_proj").reshape(GB, S, KV, Dh)
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=a.attention)
        o = checkpoint_name(o.reshape(GB, S, H * Dh), "context")
        x = x + checkpoint_name(o @ lp["wo"].astype(bf16), "out_proj")
        x = jax.lax.with_sharding_constraint(x, act)
        h = rms(x, lp["n2"])
        g = checkpoint_name(h @ lp["wg"].astype(bf16), "mlpwi_0")
        u = checkpoint_name(h @ lp["wu"].astype(bf16), "mlpwi_1")
        return x + checkpoint_name((jax.nn.silu(g) * u) @ lp["wd"].astype(bf16), "mlpwo")

    cp = jax.checkpoint_policies
    pol = {
        "full": cp.nothing_saveable,
        "minimal": cp.checkpoint_dots_with_no_batch_dims,
        "minimal_flash": cp.save_from_both_policies(cp.checkpoint_dots_with_no_batch_dims,
                                                    cp.save_only_these_names("context")),
    }.get(a.policy)
    body = layer if pol is None else jax.checkpoint(layer, policy=pol, prevent_cse=not a.scan)

    def forward(p, tok):
        if a.iota_embed:
            one_hot = (tok[..., None] == jnp.arange(V, dtype=jnp.int32)).astype(bf16)
            x = one_hot @ p["emb"].astype(bf16)
        else:
            x = p["emb"][tok].astype(bf16)
        if a.scan:
            x, _ = jax.lax.scan(lambda c, lp: (body(c, lp), None), x, p["layers"])
        else:
            for lp in p["layers"]:
                x = body(x, lp)
        x = rms(x, p["norm_f"])
        if a.logits_fp32:
            return x.astype(f32) @ p["out"]
        return x @ p["out"].astype(bf16)

    def loss_fn(p, tok, tgt):
        return optax.softmax_cross_entropy_with_integer_labels(forward(p, tok).astype(f32), tgt).mean()

    opt = optax.adamw(1e-4)

    def step(p, o, tok, tgt):
        loss, grads = jax.value_and_grad(loss_fn)(p, tok, tgt)
        updates, o = opt.update(grads, o, p)
        return optax.apply_updates(p, updates), o, loss

    # Abstract parameters with MaxText's shardings: the embed dimension over fsdp.
    def w(shape, spec):
        return jax.ShapeDtypeStruct(shape, f32, sharding=NamedSharding(mesh, P(*spec)))

    one = {"n1": w((D,), (None,)), "n2": w((D,), (None,)),
           "wq": w((D, H * Dh), ("fsdp", None)), "wk": w((D, KV * Dh), ("fsdp", None)),
           "wv": w((D, KV * Dh), ("fsdp", None)), "wo": w((H * Dh, D), (None, "fsdp")),
           "wg": w((D, F), ("fsdp", None)), "wu": w((D, F), ("fsdp", None)), "wd": w((F, D), (None, "fsdp"))}
    if a.scan:
        layers = {k: jax.ShapeDtypeStruct((L,) + v.shape, f32,
                                          sharding=NamedSharding(mesh, P(None, *v.sharding.spec))) for k, v in one.items()}
    else:
        layers = [dict(one) for _ in range(L)]
    p = {"emb": w((V, D), (None, "fsdp")), "layers": layers, "norm_f": w((D,), (None,)), "out": w((D, V), ("fsdp", None))}
    # Adam's moments take their parameters' shardings (subtrees shaped like p); the step count is replicated.
    pdef = jax.tree_util.tree_structure(p)
    like_p = lambda t: not isinstance(t, jax.ShapeDtypeStruct) and jax.tree_util.tree_structure(t) == pdef  # noqa: E731

    def place(t):
        if like_p(t):
            return jax.tree_util.tree_map(lambda x, ref: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=ref.sharding), t, p)
        return jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=NamedSharding(mesh, P()))

    o = jax.tree_util.tree_map(place, jax.eval_shape(opt.init, p),
                               is_leaf=lambda t: isinstance(t, jax.ShapeDtypeStruct) or like_p(t))
    batch = NamedSharding(mesh, P(("data", "fsdp"), None))
    tok = jax.ShapeDtypeStruct((GB, S), jnp.int32, sharding=batch)
    tgt = jax.ShapeDtypeStruct((GB, S), jnp.int32, sharding=batch)
    shardings = lambda t: jax.tree_util.tree_map(lambda x: x.sharding, t)  # noqa: E731
    jitted = jax.jit(step, donate_argnums=(0, 1),
                     out_shardings=(shardings(p), shardings(o), NamedSharding(mesh, P())))
    row = dict(name=a.name, topology=a.topology, mesh=a.mesh, D=D, L=L, H=H, KV=KV, F=F, S=S, B=B, V=V,
               global_batch=GB, policy=a.policy, attention=a.attention, scan=a.scan, iota_embed=a.iota_embed,
               logits_fp32=a.logits_fp32, xla_client_mem_fraction=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", ""),
               jax=jax.__version__, optax=optax.__version__, xla_flags=os.environ.get("XLA_FLAGS", ""),
               devices=len(devs), device_kind=devs[0].device_kind, local_devices=len(jax.local_devices()),
               hostname=socket.gethostname(), date_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    t0 = time.perf_counter()
    lowered = jitted.lower(p, o, tok, tgt)
    t1 = time.perf_counter()
    log(f"lowered in {t1 - t0:.1f} s")
    compiled = lowered.compile()
    log(f"compiled in {time.perf_counter() - t1:.1f} s")
    row["lower_s"], row["compile_s"] = t1 - t0, time.perf_counter() - t1
    ma = compiled.memory_analysis()
    row["mem_analysis"] = {k: int(getattr(ma, k)) for k in (
        "argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
        "generated_code_size_in_bytes", "peak_memory_in_bytes") if ma is not None and hasattr(ma, k)}
    hlo = compiled.as_text()
    os.makedirs(a.outdir, exist_ok=True)
    with gzip.open(os.path.join(a.outdir, f"{a.name}.hlo.txt.gz"), "wt") as f:
        f.write(hlo)
    row["hlo_file"] = f"{a.name}.hlo.txt.gz"
    row["collectives"] = collective_summary(hlo)
    if a.run > 0:
        row.update(run_local(jax, jnp, np, compiled, (p, o, tok, tgt), a.run, V, log))
    with open(os.path.join(a.outdir, f"{a.name}.json"), "w") as f:
        json.dump(row, f, indent=1)
    print(json.dumps({k: row[k] for k in ("name", "devices", "compile_s", "mem_analysis")}))


if __name__ == "__main__":
    main()
