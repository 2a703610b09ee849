#!/usr/bin/env python3
"""The rate of a bf16 GEMM as a function of what runs between GEMMs (the card's power state).

Why: on the H200 a GEMM runs at 0.805 of peak in a burst and at 0.69 back to back, power-capped
(calibration/data/h200-2026-12-02-sustained-gemm). A training step interleaves GEMMs with memory-bound
kernels and waits (communication), which draw less power, so its GEMMs run somewhere between. This script
measures where: for each pattern it repeats [GEMM, then filler] for a fixed time, where the filler is an
HBM-bound copy or a GPU spin-wait (torch.cuda._sleep, no memory traffic) sized to a fraction of the GEMM's
time, and reports the GEMM's own time (events around it alone) in the steady state, with the SM clock and
power nvidia-smi reports. It changes no setting of the card.

Usage: python3 power_duty_gemm.py --out OUT.jsonl [--seconds 12]
"""
import argparse
import json
import subprocess
import threading
import time

import torch

QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
M = N = K = 8192


def card_state():
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        sm, power, temp, reasons = [x.strip() for x in out.split(",")]
        return {"sm_clock_MHz": float(sm), "power_W": float(power), "temperature_C": float(temp),
                "throttle_reasons": reasons}
    except Exception as e:
        return {"card_state_error": repr(e)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=12.0)
    args = ap.parse_args()
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = a[:256].float() @ b.float()
    torch.matmul(a, b, out=c)
    assert ((c[:256].float() - ref).norm() / ref.norm()).item() < 1e-2
    src = torch.randn(1 << 29, device="cuda", dtype=torch.bfloat16)  # 1 GiB
    dst = torch.empty_like(src)
    flops = 2.0 * M * N * K
    # Calibrate: burst GEMM time, copy time per byte, spin cycles per second (all after a short idle).
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    time.sleep(5)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(5):
        torch.matmul(a, b, out=c)
    e1.record()
    e1.synchronize()
    gemm_s = e0.elapsed_time(e1) / 5e3
    e0.record()
    dst.copy_(src)
    e1.record()
    e1.synchronize()
    copy_s_per_elem = e0.elapsed_time(e1) / 1e3 / src.numel()
    e0.record()
    torch.cuda._sleep(1_000_000)
    e1.record()
    e1.synchronize()
    spin_s_per_cycle = e0.elapsed_time(e1) / 1e3 / 1_000_000
    patterns = [("back_to_back", None, 0.0)]
    for filler in ("copy", "spin"):
        for ratio in (0.33, 1.0, 3.0):  # filler time / GEMM time: GEMM duty 75%, 50%, 25%
            patterns.append((filler, filler, ratio))
    rows = []
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "burst_gemm_s": gemm_s,
                            "burst_tflops": flops / gemm_s / 1e12, "state": card_state()}) + "\n")
        for name, filler, ratio in patterns:
            time.sleep(5)  # each pattern starts from a cooled card
            fill_s = ratio * gemm_s
            copies = max(1, round(fill_s / (copy_s_per_elem * src.numel())))  # whole-buffer copies
            cycles = max(1, int(fill_s / spin_s_per_cycle))
            # The card's state is read by a thread every 0.5 s, and the GPU queue is kept two chunks deep
            # (the host waits only for the chunk before the last), so the GPU never idles for the host.
            states, stop = [], threading.Event()

            def poll():
                while not stop.is_set():
                    states.append((time.time(), card_state()))
                    time.sleep(0.5)
            th = threading.Thread(target=poll)
            t0 = time.time()
            th.start()
            samples, pending = [], []
            while time.time() - t0 < args.seconds:
                evs = []
                for _ in range(20):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    torch.matmul(a, b, out=c)
                    e.record()
                    evs.append((s, e))
                    if filler == "copy":
                        for _ in range(copies):
                            dst.copy_(src)
                    elif filler == "spin":
                        torch.cuda._sleep(cycles)
                pending.append(evs)
                if len(pending) > 2:
                    done = pending.pop(0)
                    done[-1][1].synchronize()
                    t = time.time() - t0
                    per = sorted(x.elapsed_time(y) / 1e3 for x, y in done)
                    near = [st for ts, st in states if ts - t0 <= t]
                    samples.append({"t_s": round(t, 3), "gemm_s_median": per[len(per) // 2],
                                    **(near[-1] if near else {})})
            torch.cuda.synchronize()
            stop.set()
            th.join()
            steady = [x for x in samples if x["t_s"] > args.seconds / 2]
            g = sorted(x["gemm_s_median"] for x in steady)[len(steady) // 2]
            if filler == "copy":  # the ratio the whole copies give, at burst rates
                ratio = copies * copy_s_per_elem * src.numel() / gemm_s
            row = {"pattern": name, "filler_over_gemm": ratio, "gemm_duty": 1 / (1 + ratio),
                   "steady_gemm_tflops": flops / g / 1e12, "steady_fraction_of_burst": gemm_s / g,
                   "steady_sm_clock_MHz": sum(x.get("sm_clock_MHz", 0) for x in steady) / len(steady),
                   "steady_power_W": sum(x.get("power_W", 0) for x in steady) / len(steady),
                   "samples": samples}
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
    print(f"burst {flops / gemm_s / 1e12:.0f} TF")
    for r in rows:
        print(f"{r['pattern']:>13} filler/gemm {r['filler_over_gemm']:.2f} duty {r['gemm_duty']:.2f}: GEMM "
              f"{r['steady_gemm_tflops']:.0f} TF ({r['steady_fraction_of_burst']:.3f} of burst) at "
              f"{r['steady_sm_clock_MHz']:.0f} MHz, {r['steady_power_W']:.0f} W")


if __name__ == "__main__":
    main()
