#!/usr/bin/env python3
"""How much of each at-scale row's prediction is the host's: every row again with all its host figures scaled.

    python3 scenarios/validation/at_scale/host_sensitivity.py [--racksim build/sim/cli/racksim] [--factors 0.5,1.5]
        [--only "GB200"]

For each case of the suite, reads the host figures its report was built from (`system.resolved.launch`: the
framework's per-layer and per-call host time, kernel and graph launches, XLA's runtime) and runs the scenario again
with every one of them multiplied by each factor (`--set system.overrides.launch.NAME=VALUE`, which keeps the
scenario's other overrides); `eager_kernel_gap` is the GPU's front end, not the host, and stays. Prints one markdown
row per case: the error today and at each factor, and the step's ratio. A diagnostic, not a fit: it says which misses
a different host speed could move at all, and which it cannot (docs/validation.md, "Which misses are host time").
Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (the suite's runner: run(), scenario_paths(), SUITE)

NOT_HOST = {"eager_kernel_gap"}


def scaled_sets(launch, factor):
    sets = []
    for name, value in sorted(launch.items()):
        if name in NOT_HOST:
            continue
        m = re.fullmatch(r"([0-9.eE+-]+)\s*(\w+)", str(value))
        if not m:
            sys.exit(f"unexpected launch figure {name}: {value!r}")
        sets += ["--set", f"system.overrides.launch.{name}={float(m.group(1)) * factor:.6g} {m.group(2)}"]
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--racksim", default="build/sim/cli/racksim")
    ap.add_argument("--factors", default="0.5,1.5")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    a = ap.parse_args()
    factors = [float(f) for f in a.factors.split(",")]
    checks = report.run([a.racksim, "validate", report.SUITE, "--json"])
    rows = checks if isinstance(checks, list) else checks["cases"]
    head = " | ".join(f"host x{f:g}: step, error" for f in factors)
    print(f"| row | error | {head} |")
    print("|---|---|" + "---|" * len(factors))
    for row, path in zip(rows, report.scenario_paths()):
        if a.only not in row["case"]:
            continue
        base = report.run([a.racksim, "run", path, "--json"])
        launch = base["scenario"]["system"]["resolved"]["launch"]
        cells = []
        for f in factors:
            rep = report.run([a.racksim, "run", path, "--json"] + scaled_sets(launch, f))
            ratio = rep["step_time_s"] / base["step_time_s"]
            # A tokens/s error moves with 1 / step; a step-time error with the step.
            e = (1 + row["error"]) * (ratio if row["field"] == "step_time_s" else 1 / ratio) - 1
            cells.append(f"x{ratio:.3f}, {e:+.1%}")
        print(f"| {row['case']} | {row['error']:+.1%} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
