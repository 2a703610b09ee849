#!/usr/bin/env python3
"""Does a training step slow down over minutes of load, after the 10-second windows racksim's GEMM figures came from?

Why (issue #12): the GEMM model was checked inside a sustained training step of 10 s per shape
(calibration/data/h100-2026-12-05-gemm-in-step), at 700 W and 1,395-1,620 MHz, with the card at 51-59 C. A training
job runs for hours: the card warms to its thermal steady state, and at a fixed power cap a warmer die leaks more,
which leaves less power for switching, so the clock (and every GEMM) could settle lower than a 10 s window shows.
This runs the same decoder-layer step (gemm_in_step.py's layers, bf16, PyTorch autograd) back to back for --seconds,
times every window of --window iterations with CUDA events, and samples the SM clock, power and temperature every
second from NVML; the GEMMs' kernel times are read from the profiler at the start and at the end. It changes no
setting of the card.

Usage: python3 thermal_soak.py --out OUT.jsonl [--config d4096] [--seconds 420] [--idle 10] [--window 20]
"""
import argparse
import json
import statistics
import threading
import time

import torch

from gemm_in_step import CONFIGS, Card, gemm_times, profiled, training_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="d4096", choices=sorted(CONFIGS))
    ap.add_argument("--seconds", type=float, default=420.0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--window", type=int, default=20, help="iterations per timed window")
    args = ap.parse_args()
    card = Card()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    c = CONFIGS[args.config]
    fn = training_step(c, dev)
    with open(args.out, "w") as out:
        def emit(row):
            out.write(json.dumps(row) + "\n")
            out.flush()

        emit({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "config": args.config, **c, "seconds": args.seconds,
              "window_iterations": args.window, "state_at_start": card.state()})
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        time.sleep(args.idle)
        samples, stop = [], threading.Event()
        t0 = time.time()

        def sample():
            while not stop.wait(1.0):
                samples.append({"t_s": round(time.time() - t0, 2), **card.state()})
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        # The first profile: the GEMMs of a step taken within the first seconds of load (as gemm_in_step.py's burst,
        # but after a few iterations, as its sustained figure was taken after 10 s).
        early = gemm_times(profiled(fn, 2))
        t_early = time.time() - t0
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        windows = []
        while time.time() - t0 < args.seconds:
            ev[0].record()
            for _ in range(args.window):
                fn()
            ev[1].record()
            ev[1].synchronize()
            windows.append({"t_end_s": round(time.time() - t0, 2),
                            "iter_s": ev[0].elapsed_time(ev[1]) / 1e3 / args.window})
        late = gemm_times(profiled(fn, 2))
        t_late = time.time() - t0
        stop.set()
        th.join()

        def total(g):
            return sum(us for us, _ in g.values()) / 2 / 1e6  # seconds of GEMM kernels per iteration

        for w in windows:
            near = [s for s in samples if abs(s["t_s"] - w["t_end_s"]) <= 2.0]
            if near and "sm_clock_MHz" in near[0]:
                w["sm_clock_MHz"] = statistics.median(s["sm_clock_MHz"] for s in near)
                w["power_W"] = statistics.median(s["power_W"] for s in near)
                w["temperature_C"] = statistics.median(s["temperature_C"] for s in near)
            emit({"window": w})
        emit({"gemm_s_per_iter_early": total(early), "profiled_early_at_s": t_early,
              "gemm_s_per_iter_late": total(late), "profiled_late_at_s": t_late,
              "late_over_early_gemm": total(late) / total(early),
              "first_minute_iter_s": statistics.median(w["iter_s"] for w in windows if w["t_end_s"] <= 60),
              "last_minute_iter_s": statistics.median(w["iter_s"] for w in windows if w["t_end_s"] > args.seconds - 60),
              "first_10s_iter_s": statistics.median(w["iter_s"] for w in windows if w["t_end_s"] <= 12)})
        emit({"samples": samples})
        emit({"state_at_end": card.state()})
        print(json.dumps({"late_over_early_gemm": total(late) / total(early),
                          "windows": len(windows), "samples": len(samples)}), flush=True)


if __name__ == "__main__":
    main()
