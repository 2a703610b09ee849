#!/usr/bin/env python3
"""The presets' launch.te_grouped_gemm and launch.te_grouped_call (x86 host) from raw/ (this folder).

  per GEMM, cuBLASLt (TE's cublas_gemm sequence): te_full per GEMM at 16 experts minus the grouped call's events
      spread over its 16 GEMMs; mean over the six bf16 GEMM classes and both token counts (default heuristics
      cache: the rows' shapes repeat, so cuBLASLt's cache answers the heuristic query after the first step).
  per GEMM, PyTorch: each expert and GroupedLinear runs 3 GEMMs (fprop, dgrad, wgrad), 2 torch.split views
      (input, grad_output) and 1 torch.empty (the wgrad placeholder under Megatron's fused wgrad accumulation):
      (2 x split per view + empty per tensor) / 3, at 16 experts, mean of both token counts.
  te_grouped_gemm = the two.
  te_grouped_call = the events per grouped call (16 experts, both token counts).
  megatron_gemm_dispatch = one torch.mm call's host time (mean of both token counts): the dense GEMM dispatch
      that the per-layer Megatron figures (measured with a dense MLP for the experts) hold for each GEMM call,
      which the grouped call replaces.
  Grace hosts: x 1.34, as the megatron_* figures (docs/decisions.md, "Grace hosts").
"""
import json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = [json.loads(l) for l in open(os.path.join(here, "raw", "cublaslt_host.jsonl"))]
cached = [r for r in rows if r["heuristics_cache"] == "default" and r["dtype"] == "bf16"]
nocache = [r for r in rows if r["heuristics_cache"] == "0" and r["dtype"] == "bf16" and r["valid_batches"] >= 6]
E = 16
events = statistics.mean(r["median_us"] for r in cached if r["variant"] == "events" and r["experts"] == E)
full = [r["median_us"] for r in cached if r["variant"] == "te_full" and r["experts"] == E]
core = statistics.mean(full) - events / E
parts = {v: statistics.mean(r["median_us"] for r in cached if r["variant"] == v and r["experts"] == E)
         for v in ("descriptors", "heuristic", "matmul")}
py = json.load(open(os.path.join(here, "raw", "python_host.json")))["rows"]
pick = lambda what: statistics.mean(r["median_us"] for r in py if r["what"] == what and r.get("experts", E) == E)
split, empty, mm = pick("torch.split"), pick("torch.empty"), pick("torch.mm")
python = (2 * split + empty) / 3
print(f"cuBLASLt per GEMM (te_full at {E} experts, events spread out): {core:.2f} us "
      f"(classes {min(full):.1f}-{max(full):.1f} us with events)")
print("  parts alone: " + ", ".join(f"{k} {v:.2f} us" for k, v in parts.items()) +
      f" (sum {sum(parts.values()):.2f})")
print(f"  heuristics cache off: te_full {statistics.mean(r['median_us'] for r in nocache if r['variant'] == 'te_full'):.1f} us,"
      f" heuristic alone {statistics.mean(r['median_us'] for r in nocache if r['variant'] == 'heuristic'):.1f} us per GEMM")
print(f"events per grouped call: {events:.2f} us")
print(f"PyTorch: split {split:.2f} us per view, empty {empty:.2f} us per tensor -> {python:.2f} us per GEMM")
print(f"torch.mm host per call (the dense dispatch): {mm:.2f} us")
for host, f in (("x86", 1.0), ("Grace", 1.34)):
    print(f"{host}: te_grouped_gemm {f * (core + python):.1f} us, te_grouped_call {f * events:.1f} us, "
          f"megatron_gemm_dispatch {f * mm:.1f} us")
