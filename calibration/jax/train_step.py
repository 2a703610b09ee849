#!/usr/bin/env python3
"""JAX ground truth for racksim: time the training step of a GPT-style decoder on one GPU.

The model and the row format follow shared/reference/README.md ("The JAX training steps"):
token embedding (V x D, gathered then cast to bf16); L decoder layers of RMSNorm, fused QKV
(D x 3D), causal attention through jax.nn.dot_product_attention, output projection (D x D),
residual, RMSNorm, SwiGLU MLP (two D x F, silu(gate) * up, F x D), residual; final RMSNorm;
output projection D x V; softmax cross-entropy in fp32. Master weights fp32, matmuls in bf16
(weights cast inside the step), optax.adamw(1e-4). Layers under jax.lax.scan (or a Python loop),
each wrapped in jax.checkpoint with the chosen policy.

Usage
  # the driver: every configuration of a suite, one process each, one JSON line each
  python3 train_step.py --suite full --outdir OUT [--budget-s 390]
  # one configuration in this process (what the driver runs)
  python3 train_step.py --config m1_dots --outdir OUT --result row.json
  # an ad-hoc configuration
  python3 train_step.py --custom NAME --D 1024 --L 8 --H 8 --F 4096 --S 1024 --B 8 --V 32768 \
      --policy dots --attention cudnn [--no-scan] --outdir OUT --result row.json

Each row: name, D L H F S B V, policy, attention, scan, jax, params, compile_s, xla_flops,
xla_bytes (compiled.cost_analysis()), mem_analysis (compiled.memory_analysis()), step_s_median/
min/max over 12 timed steps after 3 warm-ups (each synchronized), peak_bytes_in_use (device
allocator peak of the process), tokens_per_s, model_flops_6N = 6 * params * B * S, attn_flops =
6 * B * L * S^2 * D (the reference rows' formula), tflops_per_s_6N_plus_attn. The optimized HLO
(compiled.as_text()) is written gzipped as OUTDIR/NAME.hlo.txt.gz. With RACKSIM_PROFILE_DIR set, two
further steps are profiled (jax.profiler, Perfetto trace) into RACKSIM_PROFILE_DIR/NAME/ (three, dispatched back to
back, with RACKSIM_PROFILE_ASYNC=1).
"""

import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import time

M1 = dict(D=2048, L=16, H=16, F=8192, S=2048, B=8, V=32768)
S1 = dict(D=1024, L=8, H=8, F=4096, S=1024, B=8, V=32768)


def cfg(base=None, **kw):
    c = dict(base or {})
    c.setdefault("policy", "none")
    c.setdefault("attention", "xla")
    c.setdefault("scan", True)
    c.update(kw)
    return c


# Reference configurations (shared/reference/h200/jax_training_steps.jsonl), re-measured.
REFERENCE = {
    "m1_none": cfg(M1, policy="none"),
    "m1_full": cfg(M1, policy="full"),
    "m1_dots": cfg(M1, policy="dots"),
    "m1_off": cfg(M1, policy="offload"),
    "s1_none_unrolled": cfg(S1, policy="none", scan=False),
}

# Our own configurations: width, depth, sequence length, batch, policy, attention.
OWN = {
    "s1_none_scan": cfg(S1, policy="none"),
    "m1_dots_cudnn": cfg(M1, policy="dots", attention="cudnn"),
    "m1_none_cudnn": cfg(M1, policy="none", attention="cudnn"),
    "m1_full_cudnn": cfg(M1, policy="full", attention="cudnn"),
    "m1_off_cudnn": cfg(M1, policy="offload", attention="cudnn"),
    "m1s1k_dots": cfg(M1, S=1024, B=16, policy="dots"),
    "m1s4k_dots": cfg(M1, S=4096, B=4, policy="dots"),
    "m1s4k_dots_cudnn": cfg(M1, S=4096, B=4, policy="dots", attention="cudnn"),
    "s8k_full": cfg(M1, L=8, S=8192, B=1, policy="full"),
    "s8k_dots_cudnn": cfg(M1, L=8, S=8192, B=1, policy="dots", attention="cudnn"),
    "d1024_l24_s4k_dots": dict(D=1024, L=24, H=8, F=4096, S=4096, B=4, V=32768, policy="dots", attention="xla", scan=True),
    "d3072_l12_dots": dict(D=3072, L=12, H=24, F=12288, S=2048, B=4, V=32768, policy="dots", attention="xla", scan=True),
    "d4096_l8_dots": dict(D=4096, L=8, H=32, F=16384, S=2048, B=4, V=32768, policy="dots", attention="xla", scan=True),
    "d4096_l8_full": dict(D=4096, L=8, H=32, F=16384, S=2048, B=4, V=32768, policy="full", attention="xla", scan=True),
    "d4096_l8_off": dict(D=4096, L=8, H=32, F=16384, S=2048, B=4, V=32768, policy="offload", attention="xla", scan=True),
    "d2048_l32_full": cfg(M1, L=32, B=4, policy="full"),
    "s1b32_none_scan": cfg(S1, B=32, policy="none"),
}

# Sharded over several GPUs of one host (GSPMD): `dp` replicates parameters and optimizer
# state and splits the batch (gradients all-reduced); `fsdp` also shards every parameter and its
# Adam moments along their largest dimension; how the step then communicates is XLA's partitioner's
# choice (for these layers it gathers the activations, not the weights).
# B is the global batch; peak_bytes_in_use is GPU 0's. Run with NCCL_NVLS_ENABLE=0.
MULTI = {
    "x2_dp_m1_dots": cfg(M1, policy="dots", devices=2, shard="dp"),
    "x2_fsdp_m1_dots": cfg(M1, policy="dots", devices=2, shard="fsdp"),
    "x2_dp_s1_none_scan": cfg(S1, policy="none", devices=2, shard="dp"),
    "x2_fsdp_m1_full_cudnn": cfg(M1, policy="full", attention="cudnn", devices=2, shard="fsdp"),
    # Measured after the replay's collective queuing was built on the rows above (out of sample).
    "x2_dp_m1_none_cudnn": cfg(M1, policy="none", attention="cudnn", devices=2, shard="dp"),
    "x2_dp_d4096_l8_dots": dict(D=4096, L=8, H=32, F=16384, S=2048, B=8, V=32768, policy="dots", attention="xla",
                                scan=True, devices=2, shard="dp"),
    "x2_fsdp_d4096_l8_dots": dict(D=4096, L=8, H=32, F=16384, S=2048, B=8, V=32768, policy="dots", attention="xla",
                                  scan=True, devices=2, shard="fsdp"),
    "x2_dp_s1b32_none_scan": cfg(S1, B=32, policy="none", devices=2, shard="dp"),
}
X2_LATER = ("x2_dp_m1_none_cudnn", "x2_dp_d4096_l8_dots", "x2_fsdp_d4096_l8_dots", "x2_dp_s1b32_none_scan")

# Grouped-query attention (fewer K/V heads), Llama-like shapes: out-of-sample checks of the
# importer and the scenario builder, which were built on the multi-head steps above.
GQA = {
    "g1_dots": cfg(M1, KV=4, policy="dots"),
    "g1_none_cudnn": cfg(M1, KV=4, policy="none", attention="cudnn"),
    "g4k_l4_full": dict(D=4096, L=4, H=32, KV=8, F=14336, S=4096, B=2, V=32768, policy="full", attention="xla", scan=True),
}

# Llama 2 7B's layer (MaxText's llama2-7b: D 4096, 32 heads, F 11008, vocab 32,000) at 16 of its 32 layers
# (the full model's fp32 state and activations do not fit one GPU), 4,096 tokens, unrolled, cuDNN flash
# attention and MaxText's minimal_flash remat: the per-GPU work of the MaxText A3 (per-device batch 4) and
# JAX-Toolbox (BS/GPU 2) Llama2-7B rows of the at-scale suite, without their FSDP collectives.
LLAMA7B = dict(D=4096, L=16, H=32, F=11008, S=4096, V=32000, policy="dots_flash", attention="cudnn", scan=False)
L7B = {
    "l7b16_b4_mflash": dict(LLAMA7B, B=4),
    "l7b16_b2_mflash": dict(LLAMA7B, B=2),
}
# The same layer at 8 layers, which fits an 80 GB H100 (the A3 VMs' and DGX H100's GPU): the H100 rows' per-GPU
# work measured on the H100 itself, to tell an H100-specific miss from one common to both Hoppers.
L7B8 = {
    "l7b8_b4_mflash": dict(LLAMA7B, L=8, B=4),
    "l7b8_b2_mflash": dict(LLAMA7B, L=8, B=2),
}

# The same Llama 2 7B-layer steps with one parameter array per layer (MaxText's unscanned layout: a layers_N subtree
# each) instead of arrays stacked over the layers: an out-of-sample check of the scenario builder's
# `training.stacked_layer_params` (the unrolled, checkpointed layer keeps slices of stacked weights, none of per-layer ones).
L7B_PER_LAYER = {
    "l7b16_b2_mflash_perlayer": dict(LLAMA7B, B=2, per_layer=True),
    "l7b16_b4_mflash_perlayer": dict(LLAMA7B, B=4, per_layer=True),
    # at 8 layers, which fit an 80 GB H100
    "l7b8_b4_mflash_perlayer": dict(LLAMA7B, L=8, B=4, per_layer=True),
    "l7b8_b2_mflash_perlayer": dict(LLAMA7B, L=8, B=2, per_layer=True),
}

# Checks of the XLA runtime host model (not used in any fit): buffer donation (no command-buffer
# re-recording, outputs alias the arguments), and a longer unrolled program.
RUNTIME = {
    "s1_none_unrolled_donate": cfg(S1, policy="none", scan=False, donate=True),
    "s1l16_none_unrolled": cfg(S1, L=16, policy="none", scan=False),
    "m1_dots_donate": cfg(M1, policy="dots", donate=True),
}

TINY = dict(D=256, L=2, H=2, F=1024, S=256, B=2, V=1024)
SMOKE = {
    "tiny_none_unrolled": cfg(TINY, policy="none", scan=False),
    "tiny_dots_cudnn": cfg(TINY, policy="dots", attention="cudnn"),
    "tiny_off": cfg(TINY, policy="offload"),
    "tiny_full": cfg(TINY, policy="full"),
}

# FP8 as MaxText's `quantization: fp8` / `fp8_gpu` runs it (maxtext@e591f30 layers/quantizations.py: Fp8Quantization,
# or qwix's NvidaFp8Provider -> flax.linen.Fp8DirectDotGeneralOp): every layer matmul through
# flax.linen.fp8_ops.fp8_scaled_dot_general, what that module calls (per-tensor delayed
# scaling from a 1,024-step amax history; e4m3 input and kernel, e5m2 output gradient; the scales and histories are
# overwritten by their "gradients", MaxText's _overwrite_with_gradient), the output head in bf16 ("We do not quantize
# the logits matmul", layers/decoders.py). Llama 3 8B's layer (D 4096, 32 heads, 8 KV heads, F 14336, separate q/k/v
# projections as MaxText's fused_qkv: false) at 8 of its 32 layers, per-device batch 4 x 8,192 tokens, unrolled,
# MaxText's save_dot_except_mlpwi (q/k/v, out_proj and mlpwo outputs saved): the per-GPU work of seed claim 9's H100
# side (JAX-Toolbox's nvfp4_example.sh job with fp8_gpu) without its FSDP collectives, and the same job in bf16.
LLAMA3_8B = dict(D=4096, H=32, KV=8, F=14336, S=8192, V=32768, attention="cudnn", scan=False, split_qkv=True,
                 policy="save_dot_except_mlpwi")
FP8 = {
    "l3_8b_l8_b4_fp8": dict(LLAMA3_8B, L=8, B=4, fp8=True),
    "l3_8b_l8_b4_bf16": dict(LLAMA3_8B, L=8, B=4),
    "tiny_fp8": cfg(TINY, KV=1, policy="save_dot_except_mlpwi", scan=False, split_qkv=True, fp8=True),
}

ALL = {**REFERENCE, **OWN, **MULTI, **RUNTIME, **GQA, **L7B, **L7B8, **L7B_PER_LAYER, **SMOKE, **FP8}

# Run order of the full suite: reference rows first, then ours by priority.
SUITES = {
    "smoke": list(SMOKE),
    "reference": list(REFERENCE),
    "full": list(REFERENCE) + [
        "s1_none_scan",
        "s8k_full",
        "s8k_dots_cudnn",
        "d1024_l24_s4k_dots",
        "m1_dots_cudnn",
        "m1_none_cudnn",
        "d4096_l8_dots",
        "d4096_l8_full",
        "d4096_l8_off",
        "m1s4k_dots",
        "m1s4k_dots_cudnn",
        "m1s1k_dots",
    ],
    "x2": [n for n in MULTI if n not in X2_LATER],
    "x2b": list(X2_LATER),
    "runtime": list(RUNTIME),
    "gqa": list(GQA),
    "llama7b": list(L7B),
    "llama7b_h100": list(L7B8),
    "llama7b_per_layer": list(L7B_PER_LAYER),
    "fp8": ["tiny_fp8", "l3_8b_l8_b4_fp8", "l3_8b_l8_b4_bf16"],
    "extra": ["d2048_l32_full", "d3072_l12_dots", "s1b32_none_scan", "m1_full_cudnn", "m1_off_cudnn"],
}

OFFLOAD_NAMES = ["qkv", "attn", "attn_out", "mlp_g", "mlp_u", "mlp_out"]
STEPS_WARMUP = 3
STEPS_TIMED = 12


def param_count(c):
    D, L, F, V = c["D"], c["L"], c["F"], c["V"]
    kv = c.get("KV", c["H"]) * (D // c["H"])  # K and V width (grouped-query attention: fewer KV heads)
    per_layer = D * (D + 2 * kv) + D * D + 3 * D * F + 2 * D
    return V * D + L * per_layer + D + D * V


def run_config(name, c, outdir, max_bytes, enforce_max):
    """Builds, compiles and times one configuration in this process; returns the row."""
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax.ad_checkpoint import checkpoint_name

    D, L, H, F, S, B, V = (c[k] for k in ("D", "L", "H", "F", "S", "B", "V"))
    policy, attention, scan = c["policy"], c["attention"], bool(c["scan"])
    per_layer = bool(c.get("per_layer", False))  # one array per layer (unrolled only), not stacked over the layers
    assert not (per_layer and scan), "lax.scan runs over stacked arrays"
    assert D % H == 0, "D must be a multiple of H"
    Dh = D // H
    bf16, f32 = jnp.bfloat16, jnp.float32

    ndev, shard = int(c.get("devices", 1)), c.get("shard", "none")
    donate = bool(c.get("donate", False))
    KV = int(c.get("KV", H))
    split_qkv = bool(c.get("split_qkv", False))
    fp8 = bool(c.get("fp8", False))
    assert H % KV == 0, "H must be a multiple of KV"
    row = dict(name=name, D=D, L=L, H=H, F=F, S=S, B=B, V=V, policy=policy, attention=attention, scan=scan)
    if per_layer:
        row["per_layer"] = True
    if KV != H:
        row["KV"] = KV
    if split_qkv:
        row["split_qkv"] = True
    if fp8:
        row["fp8"] = True
    if donate:
        row["donate"] = True
    if ndev > 1:
        row["devices"] = ndev
        row["shard"] = shard
    row["jax"] = jax.__version__
    try:
        import jaxlib

        row["jaxlib"] = jaxlib.__version__
    except Exception:  # noqa: BLE001
        pass
    row["optax"] = optax.__version__
    if fp8:
        import flax

        row["flax"] = flax.__version__
    row["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    row["command_buffers"] = not any(f == "--xla_gpu_enable_command_buffer=" for f in row["xla_flags"].split())
    row["xla_python_client_mem_fraction"] = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
    dev = jax.devices()[0]
    row["device_kind"] = dev.device_kind
    row["hostname"] = socket.gethostname()
    row["date_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    row["params"] = param_count(c)
    row["model_flops_6N"] = 6 * row["params"] * B * S
    row["attn_flops"] = 6 * B * L * S * S * D

    impl = {"xla": "xla", "cudnn": "cudnn"}[attention]

    def rms(x, w):
        x32 = x.astype(f32)
        return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6) * w).astype(bf16)

    # The layer's weight matmuls: bf16, or (fp8) flax's direct-quantization FP8 dot with the weight's own delayed-
    # scaling state, lp["fp8"][weight] = (input, kernel, output-gradient) scales and amax histories.
    if fp8:
        from flax.linen import fp8_ops

    def mm(h, lp, w):
        kernel = lp[w].astype(bf16)
        if not fp8:
            return h @ kernel
        m = lp["fp8"][w]
        dims = (((h.ndim - 1,), (0,)), ((), ()))
        # What Fp8DirectDotGeneralOp.__call__ runs (flax 0.12: fp8_scaled_dot_general; before: q_dot_dq).
        return fp8_ops.fp8_scaled_dot_general(
            h, kernel, dims, precision=None, preferred_element_type=bf16, lhs_scale=m["s_in"], rhs_scale=m["s_k"],
            grad_scale=m["s_g"], lhs_amax_history=m["h_in"], rhs_amax_history=m["h_k"], grad_amax_history=m["h_g"],
            quantize_compute_type=bf16)

    def layer(x, lp):
        h = rms(x, lp["n1"])
        if split_qkv:  # three projections, as MaxText's default (fused_qkv: False)
            q = checkpoint_name(mm(h, lp, "wq"), "qkv")
            k = checkpoint_name(mm(h, lp, "wk"), "qkv")
            v = checkpoint_name(mm(h, lp, "wv"), "qkv")
        else:
            qkv = checkpoint_name(mm(h, lp, "wqkv"), "qkv")
            q, k, v = jnp.split(qkv, [D, D + KV * Dh], axis=-1)
        q = q.reshape(B, S, H, Dh)
        k = k.reshape(B, S, KV, Dh)
        v = v.reshape(B, S, KV, Dh)
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=impl)
        a = checkpoint_name(a.reshape(B, S, D), "attn")
        x = x + checkpoint_name(mm(a, lp, "wo"), "attn_out")
        h = rms(x, lp["n2"])
        g = checkpoint_name(mm(h, lp, "wg"), "mlp_g")
        u = checkpoint_name(mm(h, lp, "wu"), "mlp_u")
        return x + checkpoint_name(mm(jax.nn.silu(g) * u, lp, "wd"), "mlp_out")

    if policy == "none":
        body = layer
    else:
        pol = {
            "full": jax.checkpoint_policies.nothing_saveable,
            "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
            # MaxText's minimal_flash: the weight-matmul outputs and the flash attention's output.
            "dots_flash": jax.checkpoint_policies.save_from_both_policies(
                jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
                jax.checkpoint_policies.save_only_these_names("attn"),
            ),
            # MaxText's save_dot_except_mlpwi: every weight matmul's output but the MLP's input projections.
            "save_dot_except_mlpwi": jax.checkpoint_policies.save_only_these_names("qkv", "attn_out", "mlp_out"),
            "offload": jax.checkpoint_policies.save_and_offload_only_these_names(
                names_which_can_be_saved=[],
                names_which_can_be_offloaded=OFFLOAD_NAMES,
                offload_src="device",
                offload_dst="pinned_host",
            ),
        }[policy]
        body = jax.checkpoint(layer, policy=pol, prevent_cse=not scan)

    def forward(p, tok):
        x = p["emb"][tok].astype(bf16)
        if scan:
            x, _ = jax.lax.scan(lambda carry, lp: (body(carry, lp), None), x, p["layers"])
        else:
            for i in range(L):
                x = body(x, p["layers"][i] if per_layer else jax.tree_util.tree_map(lambda a, i=i: a[i], p["layers"]))
        x = rms(x, p["norm_f"])
        return x @ p["out"].astype(bf16)

    def loss_fn(p, tok, tgt):
        logits = forward(p, tok)
        return optax.softmax_cross_entropy_with_integer_labels(logits.astype(f32), tgt).mean()

    opt = optax.adamw(1e-4)

    def trainable(t):  # the parameters without the FP8 scaling state
        if not fp8:
            return t
        t = dict(t)
        t["layers"] = {k: v for k, v in t["layers"].items() if k != "fp8"}
        return t

    def step(p, o, tok, tgt):
        loss, grads = jax.value_and_grad(loss_fn)(p, tok, tgt)
        updates, o = opt.update(trainable(grads), o, trainable(p))
        new_p = optax.apply_updates(trainable(p), updates)
        if fp8:  # MaxText's _overwrite_with_gradient: the scales and histories take their "gradients"
            new_p["layers"]["fp8"] = grads["layers"]["fp8"]
        return new_p, o, loss

    def init(key):
        ks = jax.random.split(key, 8)

        def nrm(k, shape, std):
            return jax.random.normal(k, shape, f32) * std

        return {
            "emb": nrm(ks[0], (V, D), 0.02),
            "layers": {
                "n1": jnp.ones((L, D), f32),
                "n2": jnp.ones((L, D), f32),
                "wd": nrm(ks[1], (L, F, D), F ** -0.5 / (2 * L) ** 0.5),
                "wg": nrm(ks[2], (L, D, F), D ** -0.5),
                "wo": nrm(ks[3], (L, D, D), D ** -0.5 / (2 * L) ** 0.5),
                **({"wq": nrm(ks[4], (L, D, D), D ** -0.5), "wk": nrm(jax.random.split(ks[7])[0], (L, D, KV * Dh), D ** -0.5),
                    "wv": nrm(jax.random.split(ks[7])[1], (L, D, KV * Dh), D ** -0.5)} if split_qkv else
                   {"wqkv": nrm(ks[4], (L, D, D + 2 * KV * Dh), D ** -0.5)}),
                "wu": nrm(ks[5], (L, D, F), D ** -0.5),
            },
            "norm_f": jnp.ones((D,), f32),
            "out": nrm(ks[6], (D, V), D ** -0.5),
        }

    def init_fp8(p):  # flax's Fp8DotGeneralBase state per weight: scales 1, amax histories 0 (1,024 steps)
        ws = [w for w in p["layers"] if w.startswith("w")]
        one = lambda n: jnp.ones((L, n), f32)  # noqa: E731
        zero = lambda n: jnp.zeros((L, n), f32)  # noqa: E731
        p["layers"]["fp8"] = {w: {"s_in": one(1), "s_k": one(1), "s_g": one(1), "h_in": zero(1024),
                                  "h_k": zero(1024), "h_g": zero(1024)} for w in ws}
        return p

    p = jax.jit(lambda k: init_fp8(init(k)) if fp8 else init(k))(jax.random.PRNGKey(0))
    if per_layer:  # the same values, one array per layer (a list of per-layer trees)
        assert not fp8, "per_layer is not wired through the FP8 state"
        stacked = p["layers"]
        p["layers"] = [jax.tree_util.tree_map(lambda a, i=i: a[i], stacked) for i in range(L)]
        del stacked
    rng = np.random.default_rng(0)
    tok_np = rng.integers(0, V, size=(B, S + 1), dtype=np.int32)
    tok = jnp.asarray(tok_np[:, :S])
    tgt = jnp.asarray(tok_np[:, 1:])  # next-token targets on random tokens
    out_shardings = None
    if ndev > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as Pspec

        if len(jax.devices()) < ndev:
            raise RuntimeError(f"{name} needs {ndev} GPUs, found {len(jax.devices())}")
        mesh = Mesh(np.array(jax.devices()[:ndev]), ("d",))
        batch = NamedSharding(mesh, Pspec("d", None))

        def param_sharding(x):
            if shard != "fsdp" or x.ndim == 0:
                return NamedSharding(mesh, Pspec())
            ax = max(range(x.ndim), key=lambda i: (x.shape[i] % ndev == 0, x.shape[i]))
            if x.shape[ax] % ndev:
                return NamedSharding(mesh, Pspec())
            return NamedSharding(mesh, Pspec(*[("d" if i == ax else None) for i in range(x.ndim)]))

        p = jax.device_put(p, jax.tree_util.tree_map(param_sharding, p))
        tok, tgt = jax.device_put(tok, batch), jax.device_put(tgt, batch)
    o = jax.jit(opt.init)(trainable(p))
    if ndev > 1:
        # opt.init's outputs come back replicated (or, for Adam's step count, on one device): place the
        # moments as their parameters (param_sharding depends on the shape alone) and the rest replicated.
        # (Until 2026-11-29 16:40 UTC only the scalars were placed, so the first x2_fsdp row sharded the
        # parameters but not the moments; calibration/data/h200x2-2026-11-29-mechanisms/README.md.)
        o = jax.device_put(o, jax.tree_util.tree_map(param_sharding, o))
        shard_of = lambda t: jax.tree_util.tree_map(lambda x: x.sharding, t)  # noqa: E731
        out_shardings = (shard_of(p), shard_of(o), NamedSharding(mesh, Pspec()))
    jax.block_until_ready((p, o, tok, tgt))
    assert sum(x.size for x in jax.tree_util.tree_leaves(trainable(p))) == row["params"]
    # What GPU 0 holds of the parameters and of the optimizer state (how they were sharded).
    shard0 = lambda t: sum(x.addressable_shards[0].data.nbytes for x in jax.tree_util.tree_leaves(t))  # noqa: E731
    row["param_bytes_gpu0"], row["opt_state_bytes_gpu0"] = shard0(p), shard0(o)

    t0 = time.perf_counter()
    jit_kw = {"donate_argnums": (0, 1)} if donate else {}
    if out_shardings:
        jit_kw["out_shardings"] = out_shardings
    jitted = jax.jit(step, **jit_kw)
    lowered = jitted.lower(p, o, tok, tgt)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    row["lower_s"] = t1 - t0
    row["compile_s"] = t2 - t1

    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    ca = ca or {}
    row["xla_flops"] = float(ca.get("flops", -1.0))
    row["xla_bytes"] = float(ca.get("bytes accessed", -1.0))
    ma = compiled.memory_analysis()
    mem = {}
    for key in (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "temp_size_in_bytes",
        "generated_code_size_in_bytes",
        "alias_size_in_bytes",
        "host_temp_size_in_bytes",
        "host_argument_size_in_bytes",
        "host_output_size_in_bytes",
        "host_alias_size_in_bytes",
        "host_generated_code_size_in_bytes",
        "peak_memory_in_bytes",
    ):
        if ma is not None and hasattr(ma, key):
            try:
                mem[key] = int(getattr(ma, key))
            except Exception:  # noqa: BLE001
                pass
    row["mem_analysis"] = mem

    hlo = compiled.as_text()
    os.makedirs(outdir, exist_ok=True)
    with gzip.open(os.path.join(outdir, f"{name}.hlo.txt.gz"), "wt") as f:
        f.write(hlo)
    row["hlo_file"] = f"{name}.hlo.txt.gz"
    row["hlo_has_cudnn_fmha"] = "__cudnn$fmha" in hlo
    row["hlo_cublas_calls"] = hlo.count('custom_call_target="__cublas$lt$matmul"')

    need = (
        mem.get("argument_size_in_bytes", 0)
        + mem.get("output_size_in_bytes", 0)
        + mem.get("temp_size_in_bytes", 0)
        - mem.get("alias_size_in_bytes", 0)
    )
    row["device_bytes_needed_estimate"] = need
    if enforce_max and need > max_bytes:
        row["error"] = f"skipped: XLA buffer assignment needs {need / 1e9:.1f} GB > {max_bytes / 1e9:.0f} GB limit"
        return row

    times = []
    loss = None
    for i in range(STEPS_WARMUP + STEPS_TIMED):
        ts = time.perf_counter()
        p, o, loss = compiled(p, o, tok, tgt)
        jax.block_until_ready((p, o, loss))
        te = time.perf_counter()
        if i >= STEPS_WARMUP:
            times.append(te - ts)
    # RACKSIM_ASYNC_STEPS=N: N more steps dispatched without waiting between them (JAX's asynchronous dispatch lets
    # the host prepare step i+1 while the GPU runs step i), one wait at the end. The synchronized step minus this
    # one is the host time a synchronized step exposes (the call's prologue and the wait's return), unprofiled.
    n_async = int(os.environ.get("RACKSIM_ASYNC_STEPS", "0"))
    if n_async > 0:
        for rep in range(3):
            ts = time.perf_counter()
            for _ in range(n_async):
                p, o, loss = compiled(p, o, tok, tgt)
            jax.block_until_ready((p, o, loss))
            row.setdefault("async_step_s_all", []).append((time.perf_counter() - ts) / n_async)
        row["async_step_s_median"] = sorted(row["async_step_s_all"])[1]
    prof = os.environ.get("RACKSIM_PROFILE_DIR")
    if prof:  # two more steps under the profiler (after the timed ones, so the timing is unaffected)
        # RACKSIM_PROFILE_ASYNC=1: the profiled steps are dispatched back to back with one wait at the end (the GPU's
        # own time per step, host prepared ahead), where by default each is synchronized as the timed ones are.
        profile_async = os.environ.get("RACKSIM_PROFILE_ASYNC", "0") == "1"
        jax.profiler.start_trace(os.path.join(prof, name), create_perfetto_trace=True)
        for _ in range(3 if profile_async else 2):
            p, o, loss = compiled(p, o, tok, tgt)
            if not profile_async:
                jax.block_until_ready((p, o, loss))
        jax.block_until_ready((p, o, loss))
        jax.profiler.stop_trace()
    ordered = sorted(times)
    n = len(ordered)
    med = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    row["step_s_median"] = med
    row["step_s_min"] = ordered[0]
    row["step_s_max"] = ordered[-1]
    row["step_s_all"] = times
    row["loss"] = float(loss)
    stats = dev.memory_stats() or {}
    row["peak_bytes_in_use"] = int(stats.get("peak_bytes_in_use", -1))
    row["bytes_limit"] = int(stats.get("bytes_limit", -1))
    row["tokens_per_s"] = B * S / med
    row["tflops_per_s_6N_plus_attn"] = (row["model_flops_6N"] + row["attn_flops"]) / med / 1e12
    return row


def child_main(args):
    if args.config:
        name = args.config
        if name not in ALL:
            sys.exit(f"unknown config {name}; known: {', '.join(ALL)}")
        c = ALL[name]
    else:
        name = args.custom
        c = dict(
            D=args.D, L=args.L, H=args.H, F=args.F, S=args.S, B=args.B, V=args.V,
            policy=args.policy, attention=args.attention, scan=not args.no_scan,
        )
        if args.KV:
            c["KV"] = args.KV
        if args.split_qkv:
            c["split_qkv"] = True
    enforce = name not in REFERENCE
    try:
        row = run_config(name, c, args.outdir, args.max_gb * 1e9, enforce)
    except Exception as e:  # noqa: BLE001  (an OOM is a row with an error, not a crash)
        row = dict(name=name, **c)
        row["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
    text = json.dumps(row)
    if args.result:
        with open(args.result, "w") as f:
            f.write(text + "\n")
    print(text, flush=True)
    return 0


def driver_main(args):
    names = SUITES[args.suite] if args.suite else args.configs.split(",")
    os.makedirs(args.outdir, exist_ok=True)
    jsonl = os.path.join(args.outdir, args.jsonl)
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.94")
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    t_start = time.time()
    rows = []
    for name in names:
        elapsed = time.time() - t_start
        c = ALL[name]
        if args.budget_s and elapsed > args.budget_s:
            row = dict(name=name, **c, error=f"skipped: time budget {args.budget_s:.0f} s spent")
        else:
            res = os.path.join(args.outdir, f".{name}.row.json")
            if os.path.exists(res):
                os.remove(res)
            cmd = [sys.executable, os.path.abspath(__file__), "--config", name, "--outdir", args.outdir,
                   "--result", res, "--max-gb", str(args.max_gb)]
            timeout = args.timeout_s
            if args.budget_s:
                timeout = max(30.0, min(timeout, args.budget_s - elapsed + 60))
            t0 = time.time()
            log_path = os.path.join(args.outdir, f"{name}.log")
            with open(log_path, "w") as log:
                try:
                    rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
            wall = time.time() - t0
            row = None
            if os.path.exists(res):
                with open(res) as f:
                    row = json.loads(f.read())
                os.remove(res)
            if row is None:
                with open(log_path) as f:
                    tail = f.read()[-2000:]
                row = dict(name=name, **c, error=f"process ended without a row (rc={rc}): {tail}")
            row["process_wall_s"] = wall
        rows.append(row)
        with open(jsonl, "a") as f:
            f.write(json.dumps(row) + "\n")
        if "error" in row:
            print(f"{name:22s} ERROR {row['error'][:300]}", flush=True)
        else:
            print(
                f"{name:22s} step {row['step_s_median']:.4f} s (min {row['step_s_min']:.4f}, max {row['step_s_max']:.4f})"
                f"  peak {row['peak_bytes_in_use'] / 1e9:7.2f} GB  compile {row['compile_s']:5.1f} s"
                f"  {row['tflops_per_s_6N_plus_attn']:6.1f} TFLOP/s  wall {row['process_wall_s']:5.1f} s",
                flush=True,
            )
    print(f"jax suite done in {time.time() - t_start:.1f} s; rows in {jsonl}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=sorted(SUITES), help="run every configuration of a suite, one process each")
    ap.add_argument("--configs", help="comma-separated configuration names to run as a suite")
    ap.add_argument("--config", help="run one named configuration in this process")
    ap.add_argument("--custom", metavar="NAME", help="run an ad-hoc configuration in this process")
    for k, d in (("D", 1024), ("L", 8), ("H", 8), ("F", 4096), ("S", 1024), ("B", 8), ("V", 32768)):
        ap.add_argument(f"--{k}", type=int, default=d)
    ap.add_argument("--KV", type=int, default=0, help="key/value heads (grouped-query attention); 0: as many as --H")
    ap.add_argument("--policy", choices=["none", "full", "dots", "dots_flash", "save_dot_except_mlpwi", "offload"],
                    default="none")
    ap.add_argument("--attention", choices=["xla", "cudnn"], default="xla")
    ap.add_argument("--no-scan", action="store_true", help="unroll the layers in a Python loop")
    ap.add_argument("--split-qkv", action="store_true", help="three Q, K, V projections instead of one fused weight")
    ap.add_argument("--outdir", default="jax_out")
    ap.add_argument("--result", help="(child) write the row here")
    ap.add_argument("--jsonl", default="jax_steps.jsonl", help="(driver) rows file inside outdir")
    ap.add_argument("--budget-s", type=float, default=0.0, help="(driver) skip configurations once this is spent")
    ap.add_argument("--timeout-s", type=float, default=240.0, help="(driver) per-configuration limit")
    ap.add_argument("--max-gb", type=float, default=120.0,
                    help="skip non-reference configurations whose buffers need more (GB, 1e9)")
    ap.add_argument("--list", action="store_true", help="list configurations and exit")
    args = ap.parse_args()
    if args.list:
        for n, c in ALL.items():
            print(f"{n:22s} params {param_count(c) / 1e9:6.3f} B  {c}")
        return 0
    if args.config or args.custom:
        return child_main(args)
    if args.suite or args.configs:
        return driver_main(args)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
