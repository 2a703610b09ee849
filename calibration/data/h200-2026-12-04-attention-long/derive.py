#!/usr/bin/env python3
"""Turns raw/attention_sustained.jsonl into attention.json (racksim-attention/1), the burst forward and
backward times per shape, which `racksim calibrate fit` reads; prints the burst vs sustained table.

    python3 derive.py            (in this folder; writes attention.json, prints the README's table)
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    lines = [json.loads(l) for l in open(os.path.join(HERE, "raw", "attention_sustained.jsonl"))]
    head = lines[0]
    rows, table = [], []
    for r in lines:
        if r.get("kind") == "gemm":
            table.append(f"| GEMM 8192^3 | - | {r['burst_tflops']:.0f} | - | {r['sustained_tflops']:.0f} "
                         f"| {r['sustained_tflops'] / r['burst_tflops']:.3f} | {r['sm_clock_MHz']:.0f} | {r['power_W']:.0f} |")
        if r.get("kind") != "attention":
            continue
        bwd_s = r["burst_forward_backward_s"] - r["burst_forward_s"]
        rows.append(dict(B=r["B"], H=r["H"], S=r["S"], D=r["D"], causal=r["causal"],
                         forward_s=r["burst_forward_s"], backward_s=bwd_s,
                         forward_flops=r["forward_flops"],
                         backward_flops=r["forward_backward_flops"] - r["forward_flops"]))
        table.append(f"| {r['B']}x{r['H']}x{r['S']} {'causal' if r['causal'] else 'full'} | {r['burst_forward_tflops']:.0f} "
                     f"| {r['burst_backward_tflops']:.0f} | {r['burst_forward_backward_tflops']:.0f} | {r['sustained_tflops']:.0f} "
                     f"| {r['sustained_tflops'] / r['burst_forward_backward_tflops']:.3f} | {r['sm_clock_MHz']:.0f} | {r['power_W']:.0f} |")
    out = dict(schema="racksim-attention/1", date="2026-12-04T02:27:00Z", device=head["device"], torch=head["torch"],
               cuda=head["cuda"], cudnn=head["cudnn"],
               note="burst times (single calls after 5 s idle) from raw/attention_sustained.jsonl (derive.py)", rows=rows)
    with open(os.path.join(HERE, "attention.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("| shape (B x H x S) | burst fwd TFLOP/s | burst bwd | burst fwd+bwd | sustained fwd+bwd | sustained / burst | SM MHz | W |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
