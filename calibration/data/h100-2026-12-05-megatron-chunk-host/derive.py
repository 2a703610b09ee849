#!/usr/bin/env python3
"""Turns the runs of calibration/torch/megatron_chunk_host.py in this folder into the presets' launch.megatron_chunk_*
and launch.megatron_moe_chunk_* figures.

Each run times, on one GPU with tiny shapes (the host sets the pace), a middle pipeline chunk of L = 1, 2, 4, 8 layers
driven by Megatron-Core's own schedules.forward_step / backward_step through DistributedDataParallel, Float16Module and
GPTModel (fwd_host_us, bwd_host_us: per chunk and micro-batch), and the same chunk's bare TransformerBlock forward and
backward (block_fwd_host_us, block_bwd_host_us), which is how the per-layer figures were measured. A least-squares
line against L splits each into a per-chunk intercept and a per-layer slope. The per-layer figures already hold the bare
block's own intercepts (spread over the layers of the block they were measured on), so the chunk's figures are what the
schedule and the wrappers add beyond the block, phase by phase: forward a_fwd - a_block_fwd, backward a_bwd -
a_block_bwd. Medians over runs; a negative difference (the wrappers cost less than the run-to-run noise) is 0.

Usage: python3 derive.py   (in this folder; reads megatron_chunk_host_run*.jsonl)
"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
fits = {0: [], 8: []}
rows = {}
for path in sorted(glob.glob(os.path.join(here, "megatron_chunk_host_run*.jsonl"))):
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "fit":
            fits[r["experts"]].append(r)
        elif r.get("kind") == "chunk" and "error" not in r:
            rows.setdefault((r["experts"], r["layers"]), []).append(r)

print("per run and chunk (us per micro-batch): layers, forward, backward, bare block fwd+bwd")
for (experts, layers), rs in sorted(rows.items()):
    print(f"  {'moe8' if experts else 'dense'} L{layers}: " +
          "; ".join(f"{r['fwd_host_us']:.0f} / {r['bwd_host_us']:.0f} / {r['block_fwd_bwd_host_us']:.0f}" for r in rs))

for experts, fs in fits.items():
    if not fs:
        continue
    name = "megatron_moe_chunk" if experts else "megatron_chunk"
    med = lambda key, part: statistics.median(f[key][part] for f in fs)
    a_fwd, a_bwd, a_block = med("fwd_host_us", "per_chunk_us"), med("bwd_host_us", "per_chunk_us"), \
        med("block_fwd_bwd_host_us", "per_chunk_us")
    a_block_fwd, a_block_bwd = med("block_fwd_host_us", "per_chunk_us"), med("block_bwd_host_us", "per_chunk_us")
    b_fwd, b_bwd, b_block = med("fwd_host_us", "per_layer_us"), med("bwd_host_us", "per_layer_us"), \
        med("block_fwd_bwd_host_us", "per_layer_us")
    print(f"{'MoE (8 experts)' if experts else 'dense'}: {len(fs)} runs; intercepts forward {a_fwd:.1f}, backward "
          f"{a_bwd:.1f}, bare block fwd+bwd {a_block:.1f} us; slopes per layer forward {b_fwd:.1f} + backward "
          f"{b_bwd:.1f} = {b_fwd + b_bwd:.1f} against the bare block's {b_block:.1f} us; the bare block's intercepts "
          f"forward {a_block_fwd:.1f}, backward {a_block_bwd:.1f} us")
    print(f"=> {name}_forward: {max(0.0, a_fwd - a_block_fwd):.1f} us")
    print(f"=> {name}_backward: {max(0.0, a_bwd - a_block_bwd):.1f} us")
