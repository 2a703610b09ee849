#!/usr/bin/env python3
"""Summarize a racksim-bench JSON file and a JAX jax_steps.jsonl as Markdown tables.

  python3 calibration/bench/summarize.py --bench racksim-bench.json \
      [--torch-ref shared/reference/h200/microbench_torch.json] \
      [--jax jax_steps.jsonl] [--jax-ref shared/reference/h200/jax_training_steps.jsonl]

Standard library only. Prints the best figures against the ceilings, the GEMM table, the
bandwidth curves, launch costs, contention, and (with --jax) the training-step table with the
reference rows beside the re-measured ones.
"""

import argparse
import json


def fmt_bytes(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def bench_tables(d, torch_ref):
    out = []
    c = d.get("ceilings", {})
    ident = d.get("identity", {})
    gpu = (ident.get("gpus") or [{}])[0]
    out.append(f"Device: {gpu.get('name')} ({gpu.get('sm_count')} SMs, cc {gpu.get('compute_capability')}, "
               f"{gpu.get('total_mem_bytes', 0) / 2**30:.1f} GiB), driver {ident.get('driver_version')}, "
               f"CUDA runtime {ident.get('cuda_runtime_version')}, cuBLASLt {ident.get('cublaslt_version')}, "
               f"NCCL {ident.get('nccl', {}).get('library_version', 'n/a')}; {ident.get('date_utc')}")
    out.append(f"Warnings: {len(d.get('warnings', []))}" + "".join(f"\n  - {w}" for w in d.get("warnings", [])))
    out.append("")

    g = d.get("gemm", {}).get("results", [])
    ok = [r for r in g if "error" not in r]
    out.append("### Best figures against the ceilings\n")
    out.append("| what | measured (median) | where | ceiling | fraction |")
    out.append("|---|---|---|---|---|")
    for dt, ceil in (("bf16", c.get("bf16_dense_tflops")), ("fp8_e4m3", c.get("fp8_dense_tflops"))):
        rows = [r for r in ok if r["dtype"] == dt]
        if rows:
            b = max(rows, key=lambda r: r["tflops"]["median"])
            out.append(f"| {dt} GEMM | {b['tflops']['median']:.1f} TFLOP/s | {b['m']}x{b['n']}x{b['k']} | "
                       f"{ceil} | {b['tflops']['median'] / ceil:.1%} |")
    hbm = d.get("hbm", {}).get("results", [])
    for key in ("memcpy", "kernel"):
        rows = [r for r in hbm if key in r]
        if rows:
            b = max(rows, key=lambda r: r[key]["GBps"]["median"])
            out.append(f"| HBM {key} (read+write) | {b[key]['GBps']['median']:.0f} GB/s | {fmt_bytes(b['bytes'])} | "
                       f"{c.get('hbm_Bps', 0) / 1e9:.0f} | {b[key]['GBps']['median'] * 1e9 / c.get('hbm_Bps', 1):.1%} |")
    host = d.get("host", {}).get("results", [])
    pc = c.get("pcie_Bps_per_direction", 0) / 1e9
    for key, lab in (("h2d", "pinned H2D"), ("d2h", "pinned D2H")):
        rows = [r for r in host if key in r]
        if rows:
            b = max(rows, key=lambda r: r[key]["GBps"]["median"])
            out.append(f"| {lab} | {b[key]['GBps']['median']:.2f} GB/s | {fmt_bytes(b['bytes'])} | {pc:.1f} | "
                       f"{b[key]['GBps']['median'] / pc:.1%} |")
    rows = [r for r in host if "bidir" in r]
    if rows:
        b = max(rows, key=lambda r: r["bidir"]["total_GBps"]["median"])
        bi = b["bidir"]
        out.append(f"| pinned both directions | {bi['total_GBps']['median']:.2f} GB/s total "
                   f"({bi['h2d_GBps_median']:.2f} + {bi['d2h_GBps_median']:.2f}) | {fmt_bytes(b['bytes'])} | "
                   f"{2 * pc:.1f} | {bi['total_GBps']['median'] / (2 * pc):.1%} |")
    lr = d.get("launch", {}).get("results", [])
    for r in lr:
        if r["n"] == 1000:
            out.append(f"| launch, eager (N=1000) | {r['eager']['inclusive_us_per_kernel']['median']:.2f} us/kernel "
                       f"(host {r['eager']['host_us_per_launch']['median']:.2f} us/launch) | | | |")
            out.append(f"| launch, CUDA graph (N=1000) | {r['graph']['inclusive_us_per_kernel']['median']:.3f} us/kernel "
                       f"(cudaGraphLaunch {r['graph']['launch_host_us']['median']:.2f} us) | | | |")
    out.append("")

    out.append("### GEMM (cuBLASLt, TN, heuristic algorithm, 32 MiB workspace)\n")
    tref = {}
    if torch_ref:
        for r in torch_ref.get("gemm", []):
            tref[(r["m"], r["n"], r["k"])] = r
    out.append("| M | N | K | label | bf16 us | bf16 TFLOP/s | fp8 us | fp8 TFLOP/s | torch bf16 / fp8 TFLOP/s |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    # The grid runs every shape once per dtype (bf16 then fp8); a shape may appear twice in the grid
    # under two labels, and both runs are listed.
    seen = []
    for r in g:
        key = (r["m"], r["n"], r["k"], r.get("label", ""))
        if key not in seen:
            seen.append(key)
    for key in seen:
        cells = []
        for dt in ("bf16", "fp8_e4m3"):
            r = next((x for x in g if (x["m"], x["n"], x["k"], x.get("label", "")) == key and x["dtype"] == dt), None)
            if r is None or "error" in r:
                cells += ["err", "err"]
            else:
                cells += [f"{r['s']['median'] * 1e6:.1f}", f"{r['tflops']['median']:.1f}"]
        t = tref.get(key[:3])
        tcell = f"{t['bf16_tflops']:.1f} / {t['fp8_tflops']:.1f}" if t else ""
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + f" | {tcell} |")
    out.append("")

    out.append("### HBM copy bandwidth (GB/s, read+write counted, back-to-back)\n")
    tr = (torch_ref or {}).get("d2d_copy_GBps_rw", {})
    out.append("| size | cudaMemcpy D2D | copy kernel | isolated memcpy | torch copy |")
    out.append("|---|---|---|---|---|")
    for r in hbm:
        if "memcpy" not in r:
            continue
        t = tr.get(str(r["bytes"]))
        out.append(f"| {fmt_bytes(r['bytes'])} | {r['memcpy']['GBps']['median']:.0f} | {r['kernel']['GBps']['median']:.0f} | "
                   f"{r['memcpy']['isolated_GBps_median']:.0f} | {f'{t:.0f}' if t else ''} |")
    out.append("")

    out.append("### Pinned host <-> device (GB/s)\n")
    tp = (torch_ref or {}).get("pinned_copy", {})
    out.append("| size | H2D | D2H | H2D isolated | both: H2D + D2H = total | torch H2D / D2H |")
    out.append("|---|---|---|---|---|---|")
    for r in host:
        if "h2d" not in r:
            continue
        bi = r.get("bidir", {})
        t = tp.get(str(r["bytes"]))
        tc = f"{t['h2d_GBps']:.2f} / {t['d2h_GBps']:.2f}" if t else ""
        out.append(f"| {fmt_bytes(r['bytes'])} | {r['h2d']['GBps']['median']:.2f} | {r['d2h']['GBps']['median']:.2f} | "
                   f"{r['h2d']['isolated_GBps_median']:.2f} | {bi.get('h2d_GBps_median', 0):.2f} + "
                   f"{bi.get('d2h_GBps_median', 0):.2f} = {bi.get('total_GBps', {}).get('median', 0):.2f} | {tc} |")
    out.append("")

    out.append("### Launch cost (us)\n")
    out.append("| N | eager host/launch | eager incl./kernel | graph launch (host) | graph incl./kernel | graph GPU span/kernel |")
    out.append("|---|---|---|---|---|---|")
    for r in lr:
        e, gg = r["eager"], r["graph"]
        out.append(f"| {r['n']} | {e['host_us_per_launch']['median']:.2f} | {e['inclusive_us_per_kernel']['median']:.2f} | "
                   f"{gg['launch_host_us']['median']:.2f} | {gg['inclusive_us_per_kernel']['median']:.3f} | "
                   f"{gg['gpu_span_us_per_kernel']['median']:.3f} |")
    out.append("")

    ct = d.get("contention", {})
    if ct.get("results"):
        out.append(f"### Contention ({ct.get('gemm')})\n")
        out.append("| background | GEMM alone ms | GEMM during ms | GEMM slowdown | background alone ms | background during ms | bg slowdown |")
        out.append("|---|---|---|---|---|---|---|")
        for r in ct["results"]:
            if "error" in r:
                out.append(f"| {r['background']} | error: {r['error']} ||||||")
                continue
            out.append(f"| {r['description']} | {r['gemm_alone_s_median'] * 1e3:.3f} | {r['gemm_during_s']['median'] * 1e3:.3f} | "
                       f"x{r['gemm_slowdown']:.3f} | {r['bg_alone_s']['median'] * 1e3:.3f} | {r['bg_during_s']['median'] * 1e3:.3f} | "
                       f"x{r['bg_slowdown']:.3f} |")
        out.append("")
    n = d.get("nccl", {})
    out.append("### NCCL\n")
    out.append(n.get("skipped", f"{len(n.get('runs', []))} GPU-count runs"))
    out.append("")
    return "\n".join(out)


def jax_tables(rows, ref_rows):
    ref = {r["name"]: r for r in ref_rows}
    out = ["### JAX training steps (12 timed steps after 3 warm-ups)\n"]
    out.append("| name | D L H F S B | policy | attention | scan | step_s median (min-max) | peak GB | compile s | TFLOP/s (6N+attn) | reference step_s | reference peak GB | step ratio |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        shape = f"{r['D']} {r['L']} {r['H']} {r['F']} {r['S']} {r['B']}"
        if "error" in r:
            out.append(f"| {r['name']} | {shape} | {r['policy']} | {r['attention']} | {r['scan']} | {r['error'][:80]} |||||||")
            continue
        rf = ref.get(r["name"])
        rs = f"{rf['step_s_median']:.4f}" if rf else ""
        rp = f"{rf['peak_bytes_in_use'] / 1e9:.2f}" if rf else ""
        ratio = f"{r['step_s_median'] / rf['step_s_median']:.3f}" if rf else ""
        out.append(f"| {r['name']} | {shape} | {r['policy']} | {r['attention']} | {r['scan']} | "
                   f"{r['step_s_median']:.4f} ({r['step_s_min']:.4f}-{r['step_s_max']:.4f}) | "
                   f"{r['peak_bytes_in_use'] / 1e9:.2f} | {r['compile_s']:.1f} | {r['tflops_per_s_6N_plus_attn']:.1f} | "
                   f"{rs} | {rp} | {ratio} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench")
    ap.add_argument("--torch-ref")
    ap.add_argument("--jax")
    ap.add_argument("--jax-ref")
    a = ap.parse_args()
    if a.bench:
        with open(a.bench) as f:
            d = json.load(f)
        t = None
        if a.torch_ref:
            with open(a.torch_ref) as f:
                t = json.load(f)
        print(bench_tables(d, t))
    if a.jax:
        with open(a.jax) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        refs = []
        if a.jax_ref:
            with open(a.jax_ref) as f:
                refs = [json.loads(line) for line in f if line.strip()]
        print(jax_tables(rows, refs))


if __name__ == "__main__":
    main()
