#!/usr/bin/env python3
"""DeepSeek-V3's parts of a Megatron-Core layer on the host, beyond the parts the presets' per-layer figures hold
(their dense layer: a standard attention and an MLP; their MoE layer: a softmax top-k router with an aux loss, no
shared expert). Rows of megatron_layer_host.py at @d98e8a64 (local spec, PyTorch SDPA as the core attention in both
the MLA row and its control; 8 tiny layers: host-bound), measured in turn within each rep, so a rep's rows share the
VM host's speed, which drifts by tens of percent between minutes:
  MLA extra           = dense_mla_sdpa_tiny - dense_llama_sdpa_tiny                       (dsv3_parts.jsonl, 3 reps)
  router + shared     = (moe16_top8_dsv3_like_tiny - moe16_top8_tiny) - MLA extra of the rep (dsv3_parts.jsonl)
Per layer and micro-batch: forward = fwd_wall_us / layers, backward = (step_wall_us - fwd_wall_us) / layers; the
median over reps. The router and the shared expert apart (moe16_top8_dsv3router_tiny and ..._shared_tiny against
moe16_top8_tiny, 7 reps with router_pairs.jsonl) differ by more than their size between reps, so the combined figure
is split between them by the kernels each adds (their step_kernels), i.e. at the same host time per kernel.
"""
import json, os, statistics as st

here = os.path.dirname(os.path.abspath(__file__))


def load(name):
    rows = {}
    for line in open(os.path.join(here, name)):
        r = json.loads(line)
        if r.get("kind") == "megatron_block" and "error" not in r:
            rows[(r["rep"], r["name"])] = r
    return rows


def per_layer(r):  # (forward, backward) host ms per layer and micro-batch
    f = r["fwd_wall_us"] / r["layers"] / 1e3
    return f, r["step_wall_us"] / r["layers"] / 1e3 - f


def diff(a, b):
    (fa, ba), (fb, bb) = per_layer(a), per_layer(b)
    return fa - fb, ba - bb


parts = load("dsv3_parts.jsonl")
reps = sorted({k[0] for k in parts})
mla, rest = [], []
for rep in reps:
    g = lambda n: parts[(rep, n)]
    m = diff(g("dense_mla_sdpa_tiny"), g("dense_llama_sdpa_tiny"))
    d = diff(g("moe16_top8_dsv3_like_tiny"), g("moe16_top8_tiny"))
    mla.append(m)
    rest.append((d[0] - m[0], d[1] - m[1]))
    print(f"rep {rep}: MLA extra forward {m[0]:.2f} backward {m[1]:.2f} ms; router + shared expert forward "
          f"{rest[-1][0]:.2f} backward {rest[-1][1]:.2f} ms")
med = lambda xs, i: st.median(x[i] for x in xs)
mla_f, mla_b, rs_f, rs_b = med(mla, 0), med(mla, 1), med(rest, 0), med(rest, 1)
print(f"median MLA extra: forward {mla_f:.2f} ms, backward {mla_b:.2f} ms (step {mla_f + mla_b:.2f})")
print(f"median router + shared expert: forward {rs_f:.2f} ms, backward {rs_b:.2f} ms (step {rs_f + rs_b:.2f})")

# The router and the shared expert apart: per-rep differences, both files (for the spread), and the kernel split.
pairs = dict(parts)
pairs.update({(100 + k[0], k[1]): v for k, v in load("router_pairs.jsonl").items()})
router, shared = [], []
for rep in sorted({k[0] for k in pairs}):
    try:
        base, rt, sh = (pairs[(rep, n)] for n in ("moe16_top8_tiny", "moe16_top8_dsv3router_tiny",
                                                 "moe16_top8_dsv3router_shared_tiny"))
    except KeyError:
        continue
    router.append(sum(diff(rt, base)))
    shared.append(sum(diff(sh, rt)))
print("router step extra by rep (ms):", " ".join(f"{x:.2f}" for x in router), f"median {st.median(router):.2f}")
print("shared expert step extra by rep (ms):", " ".join(f"{x:.2f}" for x in shared), f"median {st.median(shared):.2f}")
k = lambda n: parts[(reps[0], n)]["step_kernels"] / parts[(reps[0], n)]["layers"]
k_router = k("moe16_top8_dsv3router_tiny") - k("moe16_top8_tiny")
k_shared = k("moe16_top8_dsv3router_shared_tiny") - k("moe16_top8_dsv3router_tiny")
k_mla = k("dense_mla_sdpa_tiny") - k("dense_llama_sdpa_tiny")
print(f"kernels per layer step: MLA +{k_mla:.0f}, router +{k_router:.0f}, shared expert +{k_shared:.0f}; "
      f"host per added kernel: MLA {1e3 * (mla_f + mla_b) / k_mla:.0f} us, router + shared "
      f"{1e3 * (rs_f + rs_b) / (k_router + k_shared):.0f} us")
share = k_router / (k_router + k_shared)
print(f"megatron_mla_forward: {mla_f:.2f} ms")
print(f"megatron_mla_backward: {mla_b:.2f} ms")
print(f"megatron_group_router_forward: {rs_f * share:.2f} ms")
print(f"megatron_group_router_backward: {rs_b * share:.2f} ms")
print(f"megatron_shared_expert_forward: {rs_f * (1 - share):.2f} ms")
print(f"megatron_shared_expert_backward: {rs_b * (1 - share):.2f} ms")

# A version check (run 3, version_79e8592b.jsonl): the MLA row and its control at Megatron-LM@79e8592b (2025-11-05,
# the DeepSeek-V3 GB200 doc's commit); its MoE rows failed there (its local experts call Transformer Engine's GEMM).
v = {}
for line in open(os.path.join(here, "version_79e8592b.jsonl")):
    r = json.loads(line)
    if r.get("kind") == "megatron_block" and "error" not in r:
        v[(r["rep"], r["name"])] = r
at79 = [sum(diff(v[(rep, "dense_mla_sdpa_tiny")], v[(rep, "dense_llama_sdpa_tiny")]))
        for rep in sorted({k[0] for k in v})]
print("79e8592b MLA extra per layer step by rep (ms):", " ".join(f"{x:.2f}" for x in at79),
      f"median {st.median(at79):.2f} ({st.median(at79) / (mla_f + mla_b):.2f} of d98e8a64's)")
