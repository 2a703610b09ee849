#!/usr/bin/env python3
"""Attention dropout's cost per score element, from host_overhead.jsonl's attention rows (causal, s 4096,
head dim 128, bf16; FLASH_ATTENTION and CUDNN_ATTENTION backends, dropout 0 vs 0.1, fwd+bwd, median of
20 CUDA-event timings each). The difference of each pair, divided by the causal score elements
(heads * s^2 / 2), is the time the kernels spend drawing random numbers. racksim charges it as vector
work (training.attention_dropout): this prints it in vector-fp32 operations per element and direction at
the H200's datasheet 67 TFLOP/s FP32 rate (hardware_models/presets/h200-sxm.yaml), half in forward and
half in backward (both draw the same numbers: the backward regenerates the mask). Hidden dropout draws one
number per element in its forward only; the same figure is used for it.

usage: python3 derive_dropout.py   (prints kDropoutRngOpsPerElement for workloads/training_graph/builder.h)
"""
import json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = [json.loads(l) for l in open(os.path.join(here, "host_overhead.jsonl"))]
att = [r for r in rows if r.get("kind") == "attention"]
per_elem = []
i = 0
while i + 1 < len(att):
    a, b = att[i], att[i + 1]
    if a["dropout"] == 0.0 and b["dropout"] > 0 and a["backend"] == b["backend"] and a["heads"] == b["heads"]:
        elems = a["heads"] * a["seq"] ** 2 / 2
        d = (b["fwd_bwd_ms"] - a["fwd_bwd_ms"]) * 1e-3
        per_elem.append(d / elems)
        print(f"{a['backend']:16s} heads {a['heads']:2d}: +{d * 1e3:.3f} ms fwd+bwd, {d / elems * 1e12:.2f} ps per score element")
        i += 2
    else:
        i += 1
mean = statistics.mean(per_elem)
vector_fp32 = 67e12
print(f"mean over {len(per_elem)} pairs: {mean * 1e12:.2f} ps per element (fwd+bwd), "
      f"stdev {statistics.stdev(per_elem) * 1e12:.2f} ps")
print(f"kDropoutRngOpsPerElement = {mean / 2 * vector_fp32:.0f}  (per direction, vector-fp32 operations)")
