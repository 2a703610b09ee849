#!/usr/bin/env python3
"""What XLA makes of MaxText's `use_iota_embed: true` (issues #12/#13; docs/decisions.md, "MaxText's one-hot
embedding").

MaxText's GPU model configs (configs/gpu/models/*.yml) and its A3 Llama 2 scripts set use_iota_embed, which
embeds the tokens as a matmul of a one-hot matrix with the table (layers/embeddings.py: one_hot = (ids[..., None]
== iota(V)).astype(dtype); jnp.dot(one_hot, table)) instead of a gather. This compiles and times, on one GPU, the
embedding's forward and its weight gradient both ways, with the table in fp32 cast to bf16 as MaxText's
weight_dtype float32 does, and records from the optimized HLO what XLA runs: GEMM custom calls (and their shapes),
gathers, scatters, and the step's temporary memory.

Usage (on the device): python3 iota_embed.py --out DIR  (runs each flag set in its own process; writes
DIR/iota_embed.jsonl and the optimized HLO of each program)
"""
import argparse, gzip, json, os, re, statistics, subprocess, sys, time

FLAG_SETS = {
    "default": "",
    # The A3 scripts' flag that matters here (MaxText configs/a3/llama_2_7b/*.sh): no Triton GEMMs, so the one-hot
    # producer cannot be fused into a Triton matmul.
    "no_triton_gemm": "--xla_gpu_enable_triton_gemm=false",
}
# (tokens per GPU, vocab, hidden): Llama 2 7B at per-device batch 4 x 4096 tokens (the A3 rows); Llama 3 8B at
# per-device batch 4 x 8192 tokens (MaxText configs/gpu/models/llama3_8b.yml).
SHAPES = [(16384, 32000, 4096), (32768, 128256, 4096)]


def child(flagset, out):
    import jax
    import jax.numpy as jnp
    from jax import lax

    rows = []
    for T, V, D in SHAPES:
        key = jax.random.PRNGKey(0)
        table = jax.random.normal(key, (V, D), jnp.float32) * 0.02
        ids = jax.random.randint(key, (T,), 0, V, jnp.int32)
        dy = (jax.random.normal(jax.random.PRNGKey(1), (T, D), jnp.float32)).astype(jnp.bfloat16)

        def embed(t, i, mode):
            w = t.astype(jnp.bfloat16)
            if mode == "onehot":
                one_hot = (i[:, None] == lax.iota(jnp.int32, V)).astype(jnp.bfloat16)
                return jnp.dot(one_hot, w)
            return w[i]

        for mode in ("onehot", "gather"):
            # A loss whose gradient at the embedding's output is dy: the weight gradient sees a dense cotangent.
            def loss(t, i, g, mode=mode):
                return jnp.sum((embed(t, i, mode) * g).astype(jnp.float32))

            for what, fn in (("fwd", jax.jit(lambda t, i, g, mode=mode: embed(t, i, mode))),
                             ("fwd_bwd", jax.jit(jax.grad(loss)))):
                compiled = fn.lower(table, ids, dy).compile()
                text = compiled.as_text()
                name = f"{flagset}_{mode}_{what}_T{T}_V{V}_D{D}"
                os.makedirs(os.path.join(out, "hlo"), exist_ok=True)
                with gzip.open(os.path.join(out, "hlo", name + ".hlo.txt.gz"), "wt") as f:
                    f.write(text)
                gemms = [ln.strip()[:300] for ln in text.splitlines() if 'custom_call_target="__cublas' in ln]
                triton = text.count("__triton_gemm")
                gathers = text.count(" gather(")
                scatters = text.count(" scatter(")
                mem = compiled.memory_analysis()
                run = (lambda: fn(table, ids, dy))
                for _ in range(3):
                    jax.block_until_ready(run())
                times = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    jax.block_until_ready(run())
                    times.append(time.perf_counter() - t0)
                rows.append({
                    "flags": flagset, "xla_flags": FLAG_SETS[flagset], "mode": mode, "what": what,
                    "tokens": T, "vocab": V, "hidden": D,
                    "median_s": statistics.median(times), "min_s": min(times),
                    "gemm_custom_calls": gemms, "triton_gemm_fusions": triton,
                    "gathers": gathers, "scatters": scatters,
                    "temp_bytes": getattr(mem, "temp_size_in_bytes", None),
                    "output_bytes": getattr(mem, "output_size_in_bytes", None),
                    "one_hot_flops_per_dot": 2.0 * T * V * D,
                    "jax": jax.__version__, "device": jax.devices()[0].device_kind,
                })
                print(json.dumps(rows[-1]), flush=True)
    # MaxText's logits_dot_in_fp32 (base.yml default True from 2024-01-13 to 2024-10-03, 0fee32045 and 49b84a74e):
    # logits_dense with dtype float32, the bf16 activations cast to fp32 against the fp32 kernel at the default
    # matmul precision, the fp32 logits into the loss; against the bf16 dot (the kernel cast to bf16).
    for T, V, D in SHAPES[:1]:
        key = jax.random.PRNGKey(2)
        kernel = jax.random.normal(key, (D, V), jnp.float32) * 0.02
        y = jax.random.normal(key, (T, D), jnp.float32).astype(jnp.bfloat16)
        ids = jax.random.randint(key, (T,), 0, V, jnp.int32)
        for mode in ("logits_fp32", "logits_bf16"):
            def loss(k, x, i, mode=mode):
                if mode == "logits_fp32":
                    z = jnp.dot(x.astype(jnp.float32), k)
                else:
                    z = jnp.dot(x, k.astype(jnp.bfloat16)).astype(jnp.float32)
                return jnp.mean(jax.nn.logsumexp(z, -1) - jnp.take_along_axis(z, i[:, None], -1)[:, 0])
            fn = jax.jit(jax.grad(loss, argnums=(0, 1)))
            compiled = fn.lower(kernel, y, ids).compile()
            text = compiled.as_text()
            os.makedirs(os.path.join(out, "hlo"), exist_ok=True)
            with gzip.open(os.path.join(out, "hlo", f"{flagset}_{mode}_T{T}_V{V}_D{D}.hlo.txt.gz"), "wt") as f:
                f.write(text)
            for _ in range(3):
                jax.block_until_ready(fn(kernel, y, ids))
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(kernel, y, ids))
                times.append(time.perf_counter() - t0)
            rows.append({
                "flags": flagset, "xla_flags": FLAG_SETS[flagset], "mode": mode, "what": "fwd_bwd",
                "tokens": T, "vocab": V, "hidden": D, "median_s": statistics.median(times), "min_s": min(times),
                "gemm_custom_calls": [ln.strip()[:300] for ln in text.splitlines() if 'custom_call_target="__cublas' in ln],
                "triton_gemm_fusions": text.count("__triton_gemm"),
                "temp_bytes": getattr(compiled.memory_analysis(), "temp_size_in_bytes", None),
                "gemm_flops": 6.0 * T * V * D, "jax": jax.__version__, "device": jax.devices()[0].device_kind,
            })
            print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(out, f"iota_embed_{flagset}.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        child(args.child, args.out)
        return
    for flagset, flags in FLAG_SETS.items():
        env = dict(os.environ, XLA_FLAGS=flags, XLA_PYTHON_CLIENT_MEM_FRACTION="0.9")
        r = subprocess.run([sys.executable, __file__, "--out", args.out, "--child", flagset], env=env)
        print(f"{flagset}: exit {r.returncode}", flush=True)
    with open(os.path.join(args.out, "iota_embed.jsonl"), "w") as f:
        for flagset in FLAG_SETS:
            p = os.path.join(args.out, f"iota_embed_{flagset}.jsonl")
            if os.path.exists(p):
                f.write(open(p).read())
                os.remove(p)
    # One archive of the optimized HLO (the device returns at most 8 files).
    subprocess.run(["tar", "czf", os.path.join(args.out, "iota_embed_hlo.tar.gz"), "-C", args.out, "hlo"], check=False)
    subprocess.run(["rm", "-rf", os.path.join(args.out, "hlo")], check=False)


if __name__ == "__main__":
    main()
