#!/usr/bin/env python3
"""Per micro-batch summary of megatron_loop_syncs.py's timeline.json (host and GPU position markers).

For each instrumented iteration and micro-batch: host and GPU ms per layer in the forward (layer 0 to 23
starts) and backward (gradient arrival at layer 23's output to layer 0's), the host's forward_step and
backward_step times, and the host's wait between them (the loss read-back), plus the GPU's lag behind the
host at the forward's and backward's ends (near 0: the GPU was waiting for the host).
Usage: megatron_timeline_summary.py RUN_timeline.json [RUN_iterations.json]
"""
import json, sys


def summary(marks):
    mbs, cur = [], None
    for m in marks:
        if m["label"] == "forward_step+":
            cur = {}
            mbs.append(cur)
        if cur is not None:
            cur.setdefault(m["label"], m)
    n = max(int(k.split(".")[-1]) for k in mbs[0] if k.startswith("f+ decoder.layers.")) if mbs else 0
    rows = []
    for mb in mbs:
        f0, fn = mb["f+ decoder.layers.0"], mb["f+ decoder.layers.%d" % n]
        bn, b0 = mb["b+ decoder.layers.%d" % n], mb["b+ decoder.layers.0"]
        fs, fe, bs, be = mb["forward_step+"], mb["forward_step-"], mb["backward_step+"], mb["backward_step-"]
        rows.append(dict(fwd_host_ms_per_layer=(fn["host_ms"] - f0["host_ms"]) / n,
                         fwd_gpu_ms_per_layer=(fn["gpu_ms"] - f0["gpu_ms"]) / n,
                         bwd_host_ms_per_layer=(b0["host_ms"] - bn["host_ms"]) / n,
                         bwd_gpu_ms_per_layer=(b0["gpu_ms"] - bn["gpu_ms"]) / n,
                         forward_step_host_ms=fe["host_ms"] - fs["host_ms"],
                         backward_step_host_ms=be["host_ms"] - bs["host_ms"],
                         loss_wait_ms=bs["host_ms"] - fe["host_ms"],
                         lag_at_forward_start_ms=fs["gpu_ms"] - fs["host_ms"],
                         lag_at_backward_end_ms=be["gpu_ms"] - be["host_ms"]))
    end = [m for m in marks if m["label"] == "finalize_model_grads-"]
    return rows, (end[0]["host_ms"] if end else None)


def main():
    tl = json.load(open(sys.argv[1]))
    walls = {}
    if len(sys.argv) > 2:
        walls = {str(r["iteration"]): r["wall_ms"] for r in json.load(open(sys.argv[2]))["iterations"]}
    for it, marks in tl.items():
        rows, fb = summary(marks)
        print("iteration %s: step wall %s ms, forward-backward (to finalize end) %.1f ms" % (it, walls.get(it, "-"), fb))
        print("  mb  fwd host/gpu ms per layer  bwd host/gpu ms per layer  fwd_step  bwd_step  loss wait  lag@fwd start  lag@bwd end")
        for i, r in enumerate(rows):
            print("  %d   %5.2f / %5.2f              %5.2f / %5.2f              %6.1f    %6.1f    %6.1f     %6.1f         %6.1f" % (
                i + 1, r["fwd_host_ms_per_layer"], r["fwd_gpu_ms_per_layer"], r["bwd_host_ms_per_layer"],
                r["bwd_gpu_ms_per_layer"], r["forward_step_host_ms"], r["backward_step_host_ms"], r["loss_wait_ms"],
                r["lag_at_forward_start_ms"], r["lag_at_backward_end_ms"]))


if __name__ == "__main__":
    main()
