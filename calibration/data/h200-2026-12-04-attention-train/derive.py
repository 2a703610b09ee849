#!/usr/bin/env python3
"""Turns raw/attention_train.jsonl into attention.json (racksim-attention/1), which `racksim calibrate fit` reads,
and prints the README's table.

A shape's row: a burst (single calls after 1 s idle: the training forward, then forward + backward), the forward
alone back to back at the card's power cap, then forward + backward back to back at the cap. The times written are
the ones at the cap, a training step's state: forward_s = the forward alone there, backward_s = forward + backward
there minus forward_s. (The burst is not used: calls of a few hundred microseconds after idle run while the clock
ramps up, and the long shapes' bursts already reach the cap.)

    python3 derive.py        (in this folder; writes attention.json)
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    lines = [json.loads(l) for l in open(os.path.join(HERE, "raw", "attention_train.jsonl"))]
    head = lines[0]
    rows, table = [], []
    for r in lines:
        if r.get("kind") == "gemm":
            table.append(f"| GEMM 8192^3 | - | - | {r['burst_tflops']:.0f} | {r['sustained_tflops']:.0f} | "
                         f"{r['sustained_tflops'] / r['burst_tflops']:.3f} | - | - | {r['sm_clock_MHz']:.0f} |")
        if r.get("kind") != "attention":
            continue
        fwd_s = r["sustained_forward_s"]
        bwd_s = r["sustained_s"] - fwd_s
        bwd_flops = r["forward_backward_flops"] - r["forward_flops"]
        rows.append(dict(B=r["B"], H=r["H"], S=r["S"], D=r["D"], causal=r["causal"], forward_s=fwd_s, backward_s=bwd_s,
                         forward_flops=r["forward_flops"], backward_flops=bwd_flops))
        table.append(f"| {r['B']}x{r['H']}x{r['S']} {'causal' if r['causal'] else 'full'} | {r['burst_forward_tflops']:.0f} "
                     f"| {r['burst_backward_tflops']:.0f} | {r['burst_forward_backward_tflops']:.0f} | {r['sustained_tflops']:.0f} "
                     f"| {r['sustained_tflops'] / r['burst_forward_backward_tflops']:.3f} "
                     f"| {r['forward_flops'] / fwd_s / 1e12:.0f} | {bwd_flops / bwd_s / 1e12:.0f} | {r['sm_clock_MHz']:.0f} |")
    out = dict(schema="racksim-attention/1", date="2026-12-04T03:20:00Z", device=head["device"], torch=head["torch"],
               cuda=head["cuda"], cudnn=head["cudnn"],
               note="at the power cap: the forward alone, and forward + backward minus it (derive.py)",
               rows=rows)
    with open(os.path.join(HERE, "attention.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("| shape (B x H x S) | burst fwd TFLOP/s | burst bwd | burst fwd+bwd | sustained fwd+bwd | sustained / burst "
          "| at the cap: fwd | at the cap: bwd | SM MHz (fwd+bwd at the cap) |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
