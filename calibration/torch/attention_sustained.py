#!/usr/bin/env python3
"""Fused (flash) attention at long sequences, in a burst and sustained, with the card's clock and power.

Why (issue #12): racksim's attention curve (calibration/data/h200-2026-11-29-attention) was fitted on key
lengths of 1,024-8,192 from 20 timed repetitions, each followed by a synchronize: short bursts. The
long-context rows of the at-scale suite (Llama 3 405B at 131,072; Qwen3-235B at 16K-128K) spend most of
their step in attention, back to back for hours, where the card sits at its power limit
(calibration/data/h200-2026-12-02-sustained-gemm: a GEMM falls to 0.86 of its burst rate within 0.5 s).
This measures both states at key lengths 4,096-131,072 (with --short also the 1,024-8,192 shapes of
attention_bench.py), causal (the rows' case) and a few non-causal shapes (the off-diagonal blocks of ring context
parallelism), and an 8192^3 bf16 GEMM the same way as the reference for the GEMM's state. It changes no setting of the card.

Per shape: `--idle` seconds idle, then a burst (3 single calls of the training forward, then of forward +
backward, each timed alone: the card at its maximum clock), then forward + backward back to back for
`--seconds`, one CUDA-event pair per call, the card's SM clock and power read by NVML every 0.25 s. Writes JSON
lines. (Until 2026-12-04, 03:10 UTC the forward was timed under no_grad, PyTorch's faster inference kernel, and
the backward accumulated into q/k/v.grad: calibration/data/h200-2026-12-04-attention-long ran that version.)

With --sustained-forward the forward alone also runs back to back (for --seconds / 2) before forward + backward,
and with --json FILE the rows at the cap are written as racksim-attention/1 for `racksim calibrate fit` (forward_s:
the forward alone at the cap; backward_s: forward + backward at the cap minus it; as
calibration/data/h200-2026-12-04-attention-train/derive.py does from the JSON lines).

Usage: python3 attention_sustained.py --out OUT.jsonl [--seconds 8] [--idle 5] [--short] [--sustained-forward]
                                      [--json attention.json]
"""
import argparse
import json
import statistics
import threading
import time

import torch
import torch.nn.functional as F

try:
    import pynvml
except ImportError:  # the timings stand without the card's state
    pynvml = None

# (B, H, S, causal): B*H*S^2 about 2.5e10 for the causal shapes, so one forward + backward takes ~50 ms.
SHAPES = [(48, 32, 4096, True), (12, 32, 8192, True), (3, 32, 16384, True), (1, 24, 32768, True),
          (1, 6, 65536, True), (1, 2, 131072, True), (3, 32, 16384, False), (1, 3, 65536, False)]
# With --short as well: the shapes of calibration/torch/attention_bench.py (1K-8K keys, causal and not).
SHORT = [(B, H, S, c) for c in (True, False)
         for (B, H, S) in ((16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192), (8, 32, 2048), (2, 32, 4096))]
D = 128


class CardSampler:
    """NVML samples of the SM clock and power draw every period_s, in a thread."""

    def __init__(self, period_s=0.25):
        self.period_s, self.samples, self._stop = period_s, [], threading.Event()
        self.h = None
        if pynvml is not None:
            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

    def state(self):
        if self.h is None:
            return {}
        return {"t": time.time(), "sm_clock_MHz": pynvml.nvmlDeviceGetClockInfo(self.h, pynvml.NVML_CLOCK_SM),
                "power_W": pynvml.nvmlDeviceGetPowerUsage(self.h) / 1e3,
                "temperature_C": pynvml.nvmlDeviceGetTemperature(self.h, pynvml.NVML_TEMPERATURE_GPU),
                "throttle_reasons": hex(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(self.h))}

    def _run(self):
        while not self._stop.wait(self.period_s):
            self.samples.append(self.state())

    def __enter__(self):
        self.samples, self._stop = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()


def time_one(fn):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3


def back_to_back(fn, seconds):
    """Calls fn back to back for about `seconds`, one event pair per call; returns [(t_start_host, s)]."""
    pairs, t_end = [], time.time() + seconds
    while time.time() < t_end:
        chunk = []
        for _ in range(4):  # keep the queue a few calls deep; the host never waits for more than one chunk
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            chunk.append((time.time(), a, b))
        if pairs:
            pairs[-1][-1][2].synchronize()
        pairs.append(chunk)
    torch.cuda.synchronize()
    return [(t, a.elapsed_time(b) / 1e3) for chunk in pairs for (t, a, b) in chunk]


def summarize(calls, samples, flops):
    second_half = [s for (_, s) in calls[len(calls) // 2:]]
    t0 = calls[len(calls) // 2][0]
    st = [x for x in samples if x.get("t", 0) >= t0]
    med = statistics.median(second_half)
    out = {"calls": len(calls), "sustained_s": med, "sustained_tflops": flops / med / 1e12,
           "first_call_s": calls[0][1], "first_tflops": flops / calls[0][1] / 1e12}
    if st:
        out.update(sm_clock_MHz=statistics.median(x["sm_clock_MHz"] for x in st),
                   power_W=statistics.median(x["power_W"] for x in st),
                   temperature_C=max(x["temperature_C"] for x in st),
                   throttle_reasons=sorted({x["throttle_reasons"] for x in st}))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--short", action="store_true", help="also the 1K-8K shapes of attention_bench.py")
    ap.add_argument("--sustained-forward", action="store_true",
                    help="also the forward alone back to back for --seconds / 2, before forward + backward")
    ap.add_argument("--json", default="", help="also write the rows at the cap as racksim-attention/1 "
                                                "(needs --sustained-forward)")
    args = ap.parse_args()
    if args.json and not args.sustained_forward:
        ap.error("--json needs --sustained-forward (the forward's time at the cap)")
    fit_rows = []
    sampler = CardSampler()
    dev = torch.device("cuda")
    with open(args.out, "w") as f:
        f.write(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                            "state_at_start": sampler.state()}) + "\n")
        # The GEMM reference, measured the same way.
        m = 8192
        a_ = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
        b_ = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
        c_ = torch.empty(m, m, device=dev, dtype=torch.bfloat16)
        gemm = lambda: torch.matmul(a_, b_, out=c_)  # noqa: E731
        gemm()
        torch.cuda.synchronize()
        ref = (a_[:256].float() @ b_.float())
        assert ((c_[:256].float() - ref).abs().max() / ref.abs().max()) < 1e-2
        gflops = 2.0 * m ** 3
        time.sleep(args.idle)
        burst = [time_one(gemm) for _ in range(5)]
        with sampler:
            calls = back_to_back(gemm, args.seconds)
        row = {"kind": "gemm", "m": m, "n": m, "k": m, "flops": gflops, "burst_s": statistics.median(burst),
               "burst_tflops": gflops / statistics.median(burst) / 1e12}
        row.update(summarize(calls, sampler.samples, gflops))
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(json.dumps({k: row[k] for k in ("kind", "burst_tflops", "sustained_tflops")}), flush=True)
        del a_, b_, c_, ref

        for (B, H, S, causal) in (SHORT if args.short else []) + SHAPES:
            q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            g = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)

            # The training forward (grad enabled: the kernel that also writes the softmax statistics the backward
            # reads; under no_grad PyTorch runs a faster inference kernel), and forward + backward through
            # autograd.grad (o.backward would also add each call's gradients into q/k/v.grad: three more kernels).
            def fwd():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.autograd.grad(o, (q, k, v), g)

            fwd()
            fwd_bwd()  # first calls pick the kernels
            torch.cuda.synchronize()
            mask = 0.5 if causal else 1.0
            f_flops = 4.0 * B * H * S * S * D * mask
            fb_flops = 14.0 * B * H * S * S * D * mask  # racksim's count: 4 forward + 10 backward
            time.sleep(args.idle)
            burst_f = [time_one(fwd) for _ in range(3)]
            burst_fb = [time_one(fwd_bwd) for _ in range(3)]
            # The forward alone at the cap too (its share of forward + backward there), then forward + backward.
            calls_f = back_to_back(fwd, args.seconds / 2) if args.sustained_forward else []
            with sampler:
                calls = back_to_back(fwd_bwd, args.seconds)
            row = {"kind": "attention", "B": B, "H": H, "S": S, "D": D, "causal": causal,
                   "forward_flops": f_flops, "forward_backward_flops": fb_flops,
                   "burst_forward_s": statistics.median(burst_f), "burst_forward_backward_s": statistics.median(burst_fb)}
            row["burst_forward_tflops"] = f_flops / row["burst_forward_s"] / 1e12
            row["burst_backward_tflops"] = (fb_flops - f_flops) / (row["burst_forward_backward_s"] - row["burst_forward_s"]) / 1e12
            row["burst_forward_backward_tflops"] = fb_flops / row["burst_forward_backward_s"] / 1e12
            row.update(summarize(calls, sampler.samples, fb_flops))
            if calls_f:
                row["sustained_forward_s"] = statistics.median(t for (_, t) in calls_f[len(calls_f) // 2:])
                row["sustained_forward_tflops"] = f_flops / row["sustained_forward_s"] / 1e12
                fit_rows.append(dict(B=B, H=H, S=S, D=D, causal=causal, forward_s=row["sustained_forward_s"],
                                     backward_s=row["sustained_s"] - row["sustained_forward_s"], forward_flops=f_flops,
                                     backward_flops=fb_flops - f_flops))
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps({k: row[k] for k in ("S", "causal", "burst_forward_tflops", "burst_backward_tflops",
                                                  "burst_forward_backward_tflops", "sustained_tflops", "sustained_forward_tflops",
                                                  "sm_clock_MHz")
                              if k in row}), flush=True)
            del q, k, v, g
            torch.cuda.empty_cache()
        f.write(json.dumps({"state_at_end": sampler.state()}) + "\n")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(dict(schema="racksim-attention/1", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                           cudnn=torch.backends.cudnn.version(),
                           note="at the power cap: the forward alone, and forward + backward minus it", rows=fit_rows),
                      out, indent=1)


if __name__ == "__main__":
    main()
