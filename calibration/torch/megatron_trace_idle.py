#!/usr/bin/env python3
"""GPU-idle intervals of one profiled Megatron step and what the host was doing in each.

Reads a torch.profiler Chrome trace (CPU and CUDA activities; megatron_loop_syncs.py's trace.json.gz) and:
  - finds every gap between GPU activity (kernels, copies, memsets; union over streams) inside the step;
  - for each gap, the host call that issued the next GPU activity (by correlation id): if it was issued
    before the gap opened, the gap is the GPU's own (a dependency or latency); otherwise the host was late,
    and the gap is charged to the blocking CUDA call the host sat in when the GPU went idle (synchronize,
    a synchronous copy, malloc/free: the host waited for the GPU to drain, then had to issue again), or,
    if none, to host-bound issue, named by the outermost torch op running on the issuing thread;
  - each gap also gets the phase (Megatron's forward_step / backward_step / finalize / optimizer, from the
    driver's `mark:` annotations) in which its next activity was issued;
  - sums blocking CUDA calls by name and enclosing op.
Usage: megatron_trace_idle.py trace.json.gz [min_gap_us]   (prints a summary; JSON with --json)
"""
import bisect, collections, gzip, json, sys

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
BLOCKING = ("Synchronize", "cudaMemcpy", "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost",
            "cuMemcpy", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")
MARKS = ("forward_step", "backward_step", "finalize_model_grads")


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def enclosing(ops_by_tid, tid, t):
    """Outermost and innermost cpu_op on thread tid that contain time t."""
    starts, ops = ops_by_tid.get(tid, ([], []))
    i = bisect.bisect_right(starts, t)
    outer = inner = None
    # ops are sorted by start; an op containing t starts at or before t: scan back a bounded number
    for j in range(i - 1, max(-1, i - 4000), -1):
        o = ops[j]
        if o["ts"] <= t <= o["ts"] + o["dur"]:
            if inner is None or o["dur"] < inner["dur"]:
                inner = o
            if outer is None or o["dur"] > outer["dur"]:
                outer = o
    return outer, inner


def analyse(events, min_gap_us=2.0):
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    rt = [e for e in events if e.get("cat") in RUNTIME_CATS]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    marks = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("mark:")]
    by_corr = {e["args"]["correlation"]: e for e in rt if "correlation" in e.get("args", {})}
    ops_by_tid = {}
    for o in sorted(ops, key=lambda o: o["ts"]):
        s, l = ops_by_tid.setdefault(o["tid"], ([], []))
        s.append(o["ts"])
        l.append(o)
    mark_iv = sorted((m["ts"], m["ts"] + m["dur"], m["name"][5:]) for m in marks)
    first_fwd = min((s for s, _, n in mark_iv if n == "forward_step"), default=None)
    last_fin = max((e for _, e, n in mark_iv if n == "finalize_model_grads"), default=None)

    def phase(t):
        for s, e, n in mark_iv:
            if s <= t <= e:
                return n
        if first_fwd is not None and t < first_fwd:
            return "before_forward"
        if last_fin is not None and t > last_fin:
            return "optimizer"
        return "between_marks"

    busy = union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    gpu_sorted = sorted(gpu, key=lambda e: e["ts"])
    gstarts = [e["ts"] for e in gpu_sorted]
    blocking = sorted((e for e in rt if any(b in e["name"] for b in BLOCKING)), key=lambda e: e["ts"])
    bl_ends = [e["ts"] + e["dur"] for e in blocking]
    gaps = []
    for (s0, e0), (s1, _) in zip(busy, busy[1:]):
        if s1 - e0 < min_gap_us:
            continue
        nxt = gpu_sorted[bisect.bisect_left(gstarts, s1)]
        launch = by_corr.get(nxt.get("args", {}).get("correlation"))
        g = dict(start=e0, end=s1, us=s1 - e0, next=nxt["name"][:80])
        if launch is None:
            g.update(kind="unlinked", cause="no launch record")
        elif launch["ts"] + launch["dur"] <= e0:
            g.update(kind="gpu", cause="issued before idle: " + launch["name"], phase=phase(launch["ts"]))
        else:
            g["phase"] = phase(launch["ts"])
            g["late_us"] = min(s1, launch["ts"]) - e0
            # a blocking call in flight when the GPU went idle (it returned at or after e0)
            j = bisect.bisect_left(bl_ends, e0 - 5.0)
            hit = None
            for b in blocking[j:j + 50]:
                if b["ts"] <= e0 + 5.0 <= b["ts"] + b["dur"] + 10.0 and b["ts"] < launch["ts"]:
                    hit = b
                    break
            if hit is not None:
                outer, inner = enclosing(ops_by_tid, hit["tid"], hit["ts"])
                g.update(kind="after_block", cause=hit["name"],
                         op=(outer or {}).get("name", "-"), inner=(inner or {}).get("name", "-"))
            else:
                outer, inner = enclosing(ops_by_tid, launch["tid"], launch["ts"])
                g.update(kind="host_bound", cause=launch["name"],
                         op=(outer or {}).get("name", "-"), inner=(inner or {}).get("name", "-"))
        gaps.append(g)

    span = busy[-1][1] - busy[0][0] if busy else 0.0
    busy_us = sum(e - s for s, e in busy)
    by = collections.defaultdict(lambda: [0.0, 0])
    for g in gaps:
        for key in [("kind", g["kind"]), ("phase/kind", g.get("phase", "-"), g["kind"]),
                    ("cause", g["kind"], g["cause"], g.get("op", "-"))]:
            by[key][0] += g["us"]
            by[key][1] += 1
    blk = collections.defaultdict(lambda: [0.0, 0])
    for b in blocking:
        outer, inner = enclosing(ops_by_tid, b["tid"], b["ts"])
        k = (b["name"], (outer or {}).get("name", "-"), (inner or {}).get("name", "-"), phase(b["ts"]))
        blk[k][0] += b["dur"]
        blk[k][1] += 1
    # host lead per phase: kernel start minus the end of its launch call
    lead = collections.defaultdict(list)
    for e in gpu_sorted:
        l = by_corr.get(e.get("args", {}).get("correlation"))
        if l is not None:
            lead[phase(l["ts"])].append(e["ts"] - (l["ts"] + l["dur"]))
    lead_s = {p: dict(n=len(v), median_us=sorted(v)[len(v) // 2], frac_under_20us=sum(x < 20 for x in v) / len(v))
              for p, v in lead.items()}
    phases = collections.defaultdict(float)
    for s, e, n in mark_iv:
        phases[n] += e - s
    return dict(span_us=span, busy_us=busy_us, idle_us=span - busy_us, gaps=len(gaps),
                gap_us=sum(g["us"] for g in gaps), min_gap_us=min_gap_us,
                by=sorted(([list(k), round(v[0], 1), v[1]] for k, v in by.items()), key=lambda x: -x[1]),
                blocking=sorted(([list(k), round(v[0], 1), v[1]] for k, v in blk.items()), key=lambda x: -x[1]),
                lead=lead_s, host_phase_us=dict(phases),
                runtime_calls=collections.Counter(e["name"] for e in rt).most_common(30),
                largest_gaps=sorted(gaps, key=lambda g: -g["us"])[:40])


def main():
    path = sys.argv[1]
    min_gap = float(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 2.0
    r = analyse(load(path), min_gap)
    if "--json" in sys.argv:
        json.dump(r, sys.stdout, indent=1)
        return
    print("span %.1f ms, GPU busy %.1f ms, idle %.1f ms in %d gaps >= %.0f us (%.1f ms)" %
          (r["span_us"] / 1e3, r["busy_us"] / 1e3, r["idle_us"] / 1e3, r["gaps"], min_gap, r["gap_us"] / 1e3))
    print("host phase time (ms):", {k: round(v / 1e3, 1) for k, v in r["host_phase_us"].items()})
    print("\nidle by key (ms, gaps):")
    for k, us, n in r["by"][:45]:
        print("  %8.2f %5d  %s" % (us / 1e3, n, " | ".join(k)))
    print("\nblocking CUDA calls (ms, count: name | outer op | inner op | phase):")
    for k, us, n in r["blocking"][:30]:
        print("  %8.2f %5d  %s" % (us / 1e3, n, " | ".join(k)))
    print("\nhost lead over the GPU by phase:", json.dumps(r["lead"]))
    print("\nruntime calls:", r["runtime_calls"])


if __name__ == "__main__":
    main()
