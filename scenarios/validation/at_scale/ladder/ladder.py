#!/usr/bin/env python3
"""Prints the DeepSeek-V3 GB200 optimization ladder: measured against predicted gain per rung.

    python3 scenarios/validation/at_scale/ladder/ladder.py [--racksim build/sim/cli/racksim]

Reads ladder.json (this folder: the 13 published rungs, their TFLOP/s, and the scenario racksim runs
for each, or null where the rung changes nothing racksim models), runs `racksim run` once per scenario,
and prints one markdown row per rung: measured TFLOP/s and tokens/s/GPU (Megatron's counter, as
derive_measured.py converts the two at-scale rows), racksim's tokens/s/GPU, and each rung's gain over
the rung before, measured and predicted. Standard library only. The rungs are diagnostics, not
validation targets (not in at_scale.yaml); tests/calibration/test_validation.cpp pins them.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from derive_measured import deepseek_v3_gb200_flops_per_token  # noqa: E402


def run(racksim, path):
    out = subprocess.run([racksim, "run", path, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"racksim run {path} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--racksim", default="build/sim/cli/racksim")
    a = ap.parse_args()
    with open(os.path.join(HERE, "ladder.json")) as f:
        ladder = json.load(f)
    flops_per_token = deepseek_v3_gb200_flops_per_token()
    tokens_per_gpu = None  # per step: GBS x seq / GPUs, from the baseline's resolved scenario
    print("| # | rung (dispatcher) | measured TFLOP/s: tok/s/GPU, step | racksim tok/s/GPU, step | measured gain | racksim gain | racksim: what changed |")
    print("|---|---|---|---|---|---|---|")
    prev_tf = prev_tps = first_tps = None
    for r in ladder["rungs"]:
        tps_measured = r["tflops"] * 1e12 / flops_per_token
        if r["scenario"]:
            rep = run(a.racksim, os.path.join(HERE, r["scenario"]))
            tps = rep["tokens_per_s_per_gpu"]
            t = rep["scenario"]["training"]
            tokens_per_gpu = t["global_batch"] * t["seq_len"] / rep["scenario"]["system"]["gpus"]
        else:
            tps = prev_tps  # nothing racksim models changes
        first_tps = first_tps or tps
        gain_m = f"{r['tflops'] / prev_tf:.3f}" if prev_tf else "-"
        gain_p = f"{tps / prev_tps:.3f}" if prev_tps else "-"
        print(f"| {r['rung']} | {r['step']} ({r['dispatcher']}) | {r['tflops']:.2f}: {tps_measured:,.0f}, "
              f"{tokens_per_gpu / tps_measured:.2f} s | {tps:,.0f}, {tokens_per_gpu / tps:.2f} s | {gain_m} | {gain_p} | "
              f"{r['racksim']} |")
        prev_tf, prev_tps = r["tflops"], tps
    first, last = ladder["rungs"][0], ladder["rungs"][-1]
    print(f"\nwhole ladder: measured {last['tflops'] / first['tflops']:.3f}x, racksim {prev_tps / first_tps:.3f}x")


if __name__ == "__main__":
    main()
