#!/usr/bin/env python3
"""The presets' launch.torch_nccl_* figures from nccl_call_host.jsonl (this folder).

collective: the median over the all-gather, reduce-scatter and all-to-all calls (plain, with splits, and async with
the work's wait), both sizes; all_reduce: its two sizes' median; p2p_pair: batch_isend_irecv of one send and one
receive with both waits, its two sizes' median. Grace hosts: x 1.34, as the other Megatron host figures
(docs/decisions.md, "Grace hosts").
"""
import json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = [json.loads(l) for l in open(os.path.join(here, "nccl_call_host.jsonl"))]
calls = [r for r in rows if r.get("kind") == "nccl_call_host" and "us_median" in r]
collective = ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single", "all_to_all_single_splits",
              "all_gather_into_tensor_async_wait", "reduce_scatter_tensor_async_wait")
figures = {
    "torch_nccl_collective": statistics.median(r["us_median"] for r in calls if r["call"] in collective),
    "torch_nccl_all_reduce": statistics.median(r["us_median"] for r in calls if r["call"] == "all_reduce"),
    "torch_nccl_p2p_pair": statistics.median(r["us_median"] for r in calls if r["call"] == "batch_isend_irecv_pair"),
}
spread = {k: (min(r["us_min"] for r in calls if r["call"] in names), max(r["us_max"] for r in calls if r["call"] in names))
          for k, names in (("torch_nccl_collective", collective), ("torch_nccl_all_reduce", ("all_reduce",)),
                           ("torch_nccl_p2p_pair", ("batch_isend_irecv_pair",)))}
alloc = statistics.median(r["us_median"] for r in calls if r["call"] == "empty_alloc")
print(f"torch.empty of the output alone: {alloc:.1f} us (inside the collective figures, as in Megatron's mappings)")
for k, v in figures.items():
    lo, hi = spread[k]
    print(f"{k}: {v:.1f} us (x86; repetitions' range {lo:.1f}-{hi:.1f}); Grace x 1.34: {v * 1.34:.1f} us")
