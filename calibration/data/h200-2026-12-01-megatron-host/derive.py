#!/usr/bin/env python3
"""The four launch.megatron_* figures of the presets, from megatron_layer_host.jsonl (this folder).

Host-bound rows only (tiny shapes: the GPU is idle most of the step, so wall time is host time).
  layer forward  = mean over the three dense rows of fwd_wall_us / layers
  layer backward = mean over the three dense rows of (step_wall_us - fwd_wall_us) / layers
  MoE forward extra (megatron_moe_phases.jsonl: host time per phase of the MoE layer's forward): the
  MoE layer minus its experts (Megatron's SequentialMLP loops over the local experts; racksim models the
  experts as grouped GEMMs, whose host work is that of the dense MLP already in the layer figure), i.e.
  the router, the token dispatcher's steps and the permutations; mean of the 8- and 64-expert rows.
  Of that, routing (router.routing) is what --moe-router-fusion replaces, and permute + unpermute +
  sort_chunks_by_idxs what --moe-permute-fusion replaces.
  MoE backward extra: the layer rows' backward (step - forward) is linear in the local experts; the
  8- and 64-expert rows give the slope; the intercept minus the dense layer of the same kind
  (dense_llama_tiny: RMSNorm, SwiGLU, no bias). A lower bound: it puts SequentialMLP's fixed cost, if
  any, on the experts.
"""
import json, os
rows = {r["name"]: r for r in map(json.loads, open(os.path.join(os.path.dirname(__file__), "megatron_layer_host.jsonl")))
        if r.get("kind") == "megatron_block" and "error" not in r}
per = lambda r, k: r[k] / r["layers"] / 1e3  # ms per layer
dense = [rows[n] for n in ("dense_gpt_tiny", "dense_gpt_tiny_nodrop", "dense_llama_tiny")]
fwd = sum(per(r, "fwd_wall_us") for r in dense) / 3
bwd = sum(per(r, "step_wall_us") - per(r, "fwd_wall_us") for r in dense) / 3
m8, m64, llama = rows["moe8_top2_alltoall_tiny"], rows["moe64_top8_alltoall_tiny"], rows["dense_llama_tiny"]
def split(r):
    return per(r, "fwd_wall_us"), per(r, "step_wall_us") - per(r, "fwd_wall_us")
(f8, b8), (f64, b64) = split(m8), split(m64)
fs, bs = (f64 - f8) / (64 - 8), (b64 - b8) / (64 - 8)
f0, b0 = f8 - 8 * fs, b8 - 8 * bs
lf, lb = split(llama)
print(f"megatron_layer_forward:  {fwd:.2f} ms")
print(f"megatron_layer_backward: {bwd:.2f} ms")
print(f"per local expert (SequentialMLP): forward {fs:.3f} ms, backward {bs:.3f} ms")
print(f"MoE layer without the expert loop: forward {f0:.2f} ms, backward {b0:.2f} ms")
print(f"megatron_moe_backward: {max(0.0, b0 - lb):.2f} ms")
ph = [json.loads(l) for l in open(os.path.join(os.path.dirname(__file__), "megatron_moe_phases.jsonl"))]
mean = lambda f: sum(f(r["phases_ms_per_layer"]) for r in ph) / len(ph)
print(f"megatron_moe_forward: {mean(lambda p: p['moe_layer'] - p['experts']):.2f} ms")
print(f"megatron_moe_routing: {mean(lambda p: p['router.routing']):.2f} ms")
print(f"megatron_moe_permutation: {mean(lambda p: p['permute'] + p['unpermute'] + p['sort_chunks_by_idxs']):.2f} ms")
