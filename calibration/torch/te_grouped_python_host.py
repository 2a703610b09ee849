#!/usr/bin/env python3
"""Host time of the per-expert PyTorch calls in Transformer Engine's GroupedLinear (TE 2.6.0.dev0,
NVIDIA/TransformerEngine@07afda98, transformer_engine/pytorch/module/grouped_linear.py), bf16 path:

- forward: torch.split(inp_view, m_splits) (line 129): one view per expert;
- backward: torch.split(grad_output_view, m_splits) (line 314) and, under Megatron's fused wgrad
  accumulation, one torch.empty(weight.main_grad.shape) per expert (handle_custom_ddp_from_mcore,
  lines 421-441: the dummy wgrad returned to autograd; TransformerEngine issue #1499);
- reference: one torch.mm and one torch.nn.functional.linear call, the GEMM dispatch of the dense MLP's
  linear layers that racksim's per-layer host figures already contain.

The GPU is kept busy (torch.cuda._sleep on the current stream) so no call waits for it; the loop's wall time
is divided by the calls (per view for split). A batch is kept only if the sleep kernel was still running
when the loop ended. Usage: python3 te_grouped_python_host.py --out FILE.json
"""
import argparse, json, platform, statistics, time

import torch

from host_identity import host_cpu_model


def timed(fn, per_batch, batches=15, sleep_cycles=30_000_000):
    """Median, p10, p90 of host us per unit over `batches`, with the GPU busy behind a sleep kernel."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    vals = []
    for _ in range(batches):
        torch.cuda._sleep(sleep_cycles)
        done = torch.cuda.Event()
        done.record()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        busy = not done.query()
        torch.cuda.synchronize()
        if busy:
            vals.append((t1 - t0) * 1e6 / per_batch)
    vals.sort()
    if not vals:
        return {"valid": 0}
    return {"median_us": statistics.median(vals), "p10_us": vals[len(vals) // 10],
            "p90_us": vals[len(vals) * 9 // 10], "valid": len(vals), "batches": batches}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=1536)
    a = ap.parse_args()
    dev, bf16 = "cuda", torch.bfloat16
    reps = 50  # calls per batch
    rows = []
    for tokens in (512, 2048):
        for experts in (4, 16):
            m_splits = [tokens] * experts
            x = torch.randn(tokens * experts, a.hidden, device=dev, dtype=bf16)

            def split():
                for _ in range(reps):
                    torch.split(x, m_splits)

            def empty():
                for _ in range(reps):
                    [torch.empty((2 * a.ffn, a.hidden), dtype=bf16, device=dev) for _ in range(experts)]

            rows.append({"what": "torch.split", "per": "view", "tokens": tokens, "experts": experts,
                         **timed(split, reps * experts)})
            rows.append({"what": "torch.empty", "per": "tensor", "shape": [2 * a.ffn, a.hidden], "experts": experts,
                         "tokens": tokens, **timed(empty, reps * experts)})
        w = torch.randn(2 * a.ffn, a.hidden, device=dev, dtype=bf16)
        xt = torch.randn(tokens, a.hidden, device=dev, dtype=bf16)

        def mm():
            for _ in range(reps):
                torch.mm(xt, w.t())

        def linear():
            for _ in range(reps):
                torch.nn.functional.linear(xt, w)

        rows.append({"what": "torch.mm", "per": "call", "tokens": tokens, **timed(mm, reps)})
        rows.append({"what": "F.linear", "per": "call", "tokens": tokens, **timed(linear, reps)})
    cpu_model = host_cpu_model()
    out = {"tool": "calibration/torch/te_grouped_python_host.py", "torch": torch.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0), "cpu": cpu_model,
           "python": platform.python_version(), "calls_per_batch": reps, "rows": rows}
    json.dump(out, open(a.out, "w"), indent=1)
    for r in rows:
        print(f"{r['what']:12s} tokens {r['tokens']:5d} experts {r.get('experts', '-')!s:>3s} "
              f"median {r.get('median_us', float('nan')):8.2f} us per {r['per']} (valid {r['valid']})")


if __name__ == "__main__":
    main()
