#!/usr/bin/env python3
"""Reads layer_versions.jsonl (three interleaved repetitions of megatron_layer_host.py on Megatron-Core@1e057005, the
same with its NVTX name lookup made constant ("1e057005nl"), and @d98e8a64, whose figures the presets carry) and prints,
per block, the 8-layer block's host time by version and the checks of racksim's model for the 1e057005 rows:
  - the training step (forward with autograd, backward) at 1e057005 against d98e8a64: measured difference against the
    model's, which is d98e8a64's figures plus launch.megatron_nvtx_range (132 us) per NVTX call (24 per dense layer
    forward; 66 per layer of this SequentialMLP block with 8 experts: 8 TransformerLayer + 10 Attention + 6 per expert
    MLP call, every expert receiving tokens);
  - the code without the lookup (1e057005nl) against d98e8a64: how far the two versions differ apart from NVTX.
Usage: python3 derive.py"""
import json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for line in open(os.path.join(here, "layer_versions.jsonl")):
    r = json.loads(line)
    if r.get("kind") == "megatron_block" and "step_wall_us" in r:
        rows.setdefault((r["name"], r["variant"]), []).append(r)
CALLS = {"dense_llama_tiny": 24, "dense_gpt_tiny": 24, "moe8_top2_alltoall_tiny": 66}
for name, calls in CALLS.items():
    get = lambda v, k: [r[k] / 1e3 for r in sorted(rows[(name, v)], key=lambda r: r["rep"])]
    print(f"{name} (8 layers; ms per call of the block, repetitions 1-3):")
    for v in ("1e057005", "1e057005nl", "d98e8a64"):
        print(f"  {v:11s} no-grad forward {get(v, 'fwd_host_us')}  training step {get(v, 'step_wall_us')}")
    step = lambda v: get(v, "step_wall_us")
    d_meas = [a - b for a, b in zip(step("1e057005"), step("d98e8a64"))]
    d_model = 8 * calls * 0.132
    print(f"  step 1e057005 - d98e8a64: measured {[round(x, 1) for x in d_meas]} (median {statistics.median(d_meas):.1f}),"
          f" model {d_model:.1f} ms ({calls} NVTX calls a layer x 132 us)")
    r_nl = [a / b for a, b in zip(step("1e057005nl"), step("d98e8a64"))]
    print(f"  step 1e057005nl / d98e8a64: {[round(x, 2) for x in r_nl]} (median {statistics.median(r_nl):.2f})")
