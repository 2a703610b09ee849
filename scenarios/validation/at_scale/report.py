#!/usr/bin/env python3
"""Prints the at-scale results table of docs/validation.md from a fresh run.

    python3 scenarios/validation/at_scale/report.py [--racksim build/sim/cli/racksim]

Runs `racksim validate` on the suite and `racksim run` on each case's scenario (for the breakdown and
memory), then prints one markdown row per check and the summary line. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "..", "at_scale.yaml")


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 4):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def scenario_paths():
    # The suite's `scenario:` lines in order (the validate report names cases, not files).
    paths = []
    with open(SUITE) as f:
        for line in f:
            line = line.strip()
            if line.startswith("scenario:"):
                paths.append(os.path.join(os.path.dirname(SUITE), line.split(":", 1)[1].strip()))
    return paths


def num(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--racksim", default="build/sim/cli/racksim")
    a = ap.parse_args()
    checks = run([a.racksim, "validate", SUITE, "--json"])
    rows = checks if isinstance(checks, list) else checks["cases"]
    paths = scenario_paths()
    print("| row | measured | predicted | error | racksim: step = compute + recompute + exposed comm + bubble "
          "(+ host launch wait, + exposed offload, where over 1% of the step); peak / capacity |")
    print("|---|---|---|---|---|")
    errors = []
    for row, path in zip(rows, paths):
        rep = run([a.racksim, "run", path, "--json"])
        b = rep["breakdown_s"]
        unit = "s/step" if row["field"] == "step_time_s" else "tok/s/GPU"
        fits = "" if rep["fits"] else " (does not fit)"
        host = (f" + {b['launch_overhead']:.3g} host" if b["launch_overhead"] > 0.01 * rep["step_time_s"] else "")
        if b.get("exposed_offload", 0) > 0.01 * rep["step_time_s"]:
            host += f" + {b['exposed_offload']:.3g} offload"  # (host-link copies nothing else ran beside)
        note = (f"{rep['step_time_s']:.3g} s = {b['compute']:.3g} + {b['recompute']:.3g} + "
                f"{b['exposed_communication']:.3g} + {b['pipeline_bubble']:.3g}{host}; "
                f"{rep['peak_memory_bytes'] / 1e9:.1f} / {rep['memory_capacity_bytes'] / 1e9:.1f} GB{fits}")
        errors.append(abs(row["error"]))
        print(f"| {row['case']} | {num(row['measured'])} {unit} | {num(row['predicted'])} | "
              f"{100 * row['error']:+.1f}% | {note} |")
    within = sum(1 for r in rows if r["pass"])
    print(f"\n{len(rows)} checks: {within} within 10%, {sum(1 for e in errors if e <= 0.2)} within 20%, "
          f"mean |error| {100 * sum(errors) / len(errors):.1f}%")


if __name__ == "__main__":
    main()
