#!/usr/bin/env python3
"""Rewrite a scheduled XLA program so that its asynchronous collectives overlap nothing.

Each `<op>-start` of the chosen kinds in the entry computation is moved to the line just before its `<op>-done`, so
the program waits for every such collective right where it starts it. Replaying the result (`racksim replay`) next to
the original bounds how much any schedule of those collectives can add to the step: what XLA's latency hiding
scheduler hides, and what it would stop hiding under memory pressure (its budget is the module's device memory size
less the program's inputs and outputs: gpu_hlo_schedule.cc, GetSchedulerMemoryLimit). Instructions inside called
computations (loop bodies) are left alone.

Usage:
  python3 serialize_collectives.py IN.hlo.txt.gz OUT.hlo.txt.gz all-gather,reduce-scatter,all-reduce
  racksim replay OUT.hlo.txt.gz --system h100-sxm --gpus 8 --set system.calibration=h200
Prints how many starts moved. Standard library only.
"""

import gzip
import re
import sys


def serialize(text: str, kinds: list[str]) -> tuple[str, int]:
    entry = text.index("\nENTRY ")
    end = text.index("\n}\n", entry)
    head, body, tail = text[:entry], text[entry:end], text[end:]
    alternatives = "|".join(re.escape(k) for k in kinds)
    start_re = re.compile(r"\s*%(\S+) = .*? (?:" + alternatives + r")-start\(")
    done_re = re.compile(r"\s*(?:ROOT )?%\S+ = .*? (?:" + alternatives + r")-done\(.*?%(\S+?)[),]")
    held: dict[str, str] = {}
    out: list[str] = []
    moved = 0
    for line in body.split("\n"):
        m = start_re.match(line)
        if m:
            held[m.group(1)] = line
            continue
        m = done_re.match(line)
        if m and m.group(1) in held:
            out.append(held.pop(m.group(1)))
            moved += 1
        out.append(line)
    if held:  # a start whose done this parser did not recognise: refuse rather than write a program without its done
        raise SystemExit(f"{len(held)} starts without a recognised done: {sorted(held)[:3]}")
    return head + "\n".join(out) + tail, moved


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    src, dst, kinds = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        text = f.read()
    result, moved = serialize(text, kinds)
    with (gzip.open if dst.endswith(".gz") else open)(dst, "wt") as f:
        f.write(result)
    print(f"moved {moved} starts")


if __name__ == "__main__":
    main()
