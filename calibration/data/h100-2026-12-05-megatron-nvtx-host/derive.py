#!/usr/bin/env python3
"""Turns the A/B runs in this folder into the presets' launch.megatron_nvtx_range figure: the host time of one call of
Megatron-Core's nvtx_range_push / nvtx_range_pop in the versions that name the range from the caller's frame before
checking whether NVTX profiling is on (Megatron-LM 7f9f2bf750, 2025-05-16, to 158951764f, 2025-06-09, "Fix perf issues
with NVTX range profiling"; @1e057005, the Qwen3-235B H100 rows' code, is one of them, @d98e8a64 is not).

Each pair is the same bare TransformerBlock (local spec, 8 layers, hidden 256, sequence 128, no-grad forward: the host's
time, the GPU idle) under the two versions, run back to back in one process each on the same machine. A layer's forward
calls the functions 24 times at @1e057005 (TransformerLayer 4 ranges, Attention 5, MLP 3; push and pop each), none of
which @d98e8a64 pays for without profiling; the profile (fwd_profile_*.txt) puts 70% of @1e057005's forward in
_nvtx_range_get_func_path's inspect calls. Per call: the difference / (8 layers x 24). The median over the pairs.

    python3 derive.py
"""
import json, os, re, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS_PER_LAYER, LAYERS = 24, 8

rows = {}
for line in open(os.path.join(HERE, "layer_ab.jsonl")):
    r = json.loads(line)
    if r.get("kind") == "env":
        version = os.path.basename(r["megatron"].rstrip("/"))
    elif r.get("kind") == "megatron_block" and "fwd_host_us" in r and not r["experts"]:
        # (The MoE block is left out: its SequentialMLP calls MLP.forward, 6 calls, once per expert that has tokens,
        # and its forward waits for the GPU at the dispatcher's token counts: the count of calls is not known.)
        rows.setdefault((r["name"], version), []).append(r["fwd_host_us"])
per_call = []
print("| block | run | @1e057005 forward ms | @d98e8a64 forward ms | per call us |")
print("|---|---|---|---|---|")
for name in sorted({n for n, _ in rows}):
    for i, (a, b) in enumerate(zip(rows[(name, "1e057005")], rows[(name, "d98e8a64")])):
        us = (a - b) / (LAYERS * CALLS_PER_LAYER)
        per_call.append(us)
        print(f"| {name} | A/B {i + 1} | {a / 1e3:.2f} | {b / 1e3:.2f} | {us:.0f} |")
fwd = {}
for v in ("1e057005", "d98e8a64"):
    text = open(os.path.join(HERE, f"fwd_profile_{v}.txt")).read()
    fwd[v] = float(re.search(r"forward host ([0-9.]+) ms", text).group(1))
us = (fwd["1e057005"] - fwd["d98e8a64"]) * 1e3 / (LAYERS * CALLS_PER_LAYER)
per_call.append(us)
print(f"| dense_llama_tiny | profile run (unprofiled part) | {fwd['1e057005']:.2f} | {fwd['d98e8a64']:.2f} | {us:.0f} |")
print(f"=> megatron_nvtx_range: {statistics.median(per_call):.0f} us per call (median of {len(per_call)}; "
      f"range {min(per_call):.0f}-{max(per_call):.0f})")
