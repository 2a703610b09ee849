#!/usr/bin/env python3
"""Where XLA puts the fp32 -> bf16 weight casts of a remat'd decoder under gradient accumulation (issue #13,
seed claim 6; docs/decisions.md, "XLA recasts the weights in the backward").

MaxText accumulates gradients with a jax.lax.scan over the micro-batches whose body takes value_and_grad of the
loss with the fp32 parameters closed over (loop-invariant). Whether XLA casts the weights once, outside the
micro-batch loop, or in every micro-step (forward, and again in the backward under a remat policy) decides what a
ZeRO-1 job with replicated weights pays per micro-step. This compiles such a step (no run) for GPU 0 and counts
the f32 -> bf16 converts whose operand has a weight's shape, per computation, and whether that computation is the
micro-batch loop's body or nested inside it.

Usage (on the device): python3 accum_casts.py --out DIR   (writes DIR/accum_casts.json and the optimized HLO)
"""
import argparse, gzip, json, os, re

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--micro", type=int, default=4)
ap.add_argument("--scan", type=int, default=1)
args = ap.parse_args()

import jax
import jax.numpy as jnp

D, F, L, S, B, V = 1024, 4096, 4, 1024, 2, 8192
bf16, f32 = jnp.bfloat16, jnp.float32


def init(key):
    ks = jax.random.split(key, 6)
    n = lambda k, s: jax.random.normal(k, s, f32) * 0.02
    return {"emb": n(ks[0], (V, D)), "out": n(ks[1], (D, V)),
            "layers": {"wqkv": n(ks[2], (L, D, 3 * D)), "wo": n(ks[3], (L, D, D)),
                       "wi": n(ks[4], (L, D, F)), "wd": n(ks[5], (L, F, D))}}


def layer(x, lp):
    h = x @ lp["wqkv"].astype(bf16)
    q, k, v = jnp.split(h, 3, axis=-1)
    a = jax.nn.dot_product_attention(q.reshape(B, S, 8, D // 8), k.reshape(B, S, 8, D // 8),
                                     v.reshape(B, S, 8, D // 8), is_causal=True).reshape(B, S, D)
    x = x + a @ lp["wo"].astype(bf16)
    return x + jax.nn.gelu(x @ lp["wi"].astype(bf16)) @ lp["wd"].astype(bf16)


body = jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable, prevent_cse=not args.scan)


def loss(p, tok):
    x = p["emb"][tok].astype(bf16)
    if args.scan:
        x, _ = jax.lax.scan(lambda c, lp: (body(c, lp), None), x, p["layers"])
    else:
        for i in range(L):
            x = body(x, jax.tree_util.tree_map(lambda t, i=i: t[i], p["layers"]))
    logits = (x @ p["out"].astype(bf16)).astype(f32)
    return jax.nn.logsumexp(logits, -1).mean()


def step(p, toks):  # toks: [micro, B, S]
    def acc(g, tok):
        l, gi = jax.value_and_grad(loss)(p, tok)
        return jax.tree_util.tree_map(jnp.add, g, gi), l
    g0 = jax.tree_util.tree_map(jnp.zeros_like, p)
    g, ls = jax.lax.scan(acc, g0, toks)
    return jax.tree_util.tree_map(lambda a, b: a - 1e-4 * b, p, g), ls.mean()


p = jax.jit(init)(jax.random.PRNGKey(0))
toks = jnp.zeros((args.micro, B, S), jnp.int32)
compiled = jax.jit(step).lower(p, toks).compile()
text = compiled.as_text()
os.makedirs(args.out, exist_ok=True)
name = f"accum_m{args.micro}_{'scan' if args.scan else 'unrolled'}"
with gzip.open(os.path.join(args.out, name + ".hlo.txt.gz"), "wt") as f:
    f.write(text)

# Computations, the while loops that call them (body=...), and the converts in each.
weight_shapes = {"bf16[%s]" % ",".join(map(str, s)) for s in [(D, 3 * D), (D, D), (D, F), (F, D), (D, V),
                                                               (L, D, 3 * D), (L, D, D), (L, D, F), (L, F, D)]}
comps, cur = {}, None
for line in text.splitlines():
    m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) ", line)
    if m and line.rstrip().endswith("{"):
        cur = m.group(1)
        comps[cur] = []
    elif cur:
        comps[cur].append(line)
calls = {}  # callee -> caller
for c, lines in comps.items():
    for l in lines:
        for key in ("body=", "calls=", "to_apply=", "condition="):
            for m in re.finditer(key + r"%?([\w.\-]+)", l):
                calls.setdefault(m.group(1), c)
def chain(c):
    out = []
    while c in calls and len(out) < 20:
        c = calls[c]
        out.append(c)
    return out
rows = []
for c, lines in comps.items():
    n = sum(1 for l in lines if re.search(r"= (bf16\[[\d,]+\])\{?[^ ]*\s*convert\(", l) and
            re.search(r"= (bf16\[[\d,]+\])", l).group(1) in weight_shapes)
    if n:
        rows.append({"computation": c, "weight_converts": n, "callers": chain(c)})
whiles = [l.strip()[:200] for c in comps.values() for l in c if " while(" in l]
res = {"jax": jax.__version__, "device": jax.devices()[0].device_kind, "micro": args.micro, "scan": bool(args.scan),
       "converts": rows, "while_ops": whiles}
with open(os.path.join(args.out, name + ".json"), "w") as f:
    json.dump(res, f, indent=1)
print(json.dumps(res, indent=1))
