#!/usr/bin/env python3
"""PyTorch ground truth for racksim's Megatron conventions on one GPU.

A GPT-style decoder like calibration/jax/train_step.py (token embedding, L layers of RMSNorm,
fused QKV, causal flash attention through torch's scaled_dot_product_attention, output
projection, residual, RMSNorm, SwiGLU MLP, residual; final RMSNorm; untied output projection;
cross-entropy in fp32), trained the way Megatron-LM keeps its state: bf16 weights used by the
kernels, fp32 main gradients accumulated from them, fp32 master weights and Adam moments, the
optimizer updating the master weights and copying them back to bf16. Eager execution (no CUDA
graphs, no torch.compile). Optional full activation recompute per layer
(torch.utils.checkpoint).

Each row: the model fields, step_s_median/min/max over 10 synchronized steps after 3 warm-ups,
max_memory_allocated (torch's allocator high-water mark, the analogue of JAX's
peak_bytes_in_use), torch and CUDA versions.

    python3 train_step_torch.py --configs p1_none,p1_full --out rows.jsonl
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

CONFIGS = {
    # D L H F S B V, recompute
    "p1_none": dict(D=2048, L=16, H=16, F=8192, S=2048, B=8, V=32768, recompute="none"),
    "p1_full": dict(D=2048, L=16, H=16, F=8192, S=2048, B=8, V=32768, recompute="full"),
    "p2_none": dict(D=4096, L=8, H=32, F=14336, S=4096, B=2, V=32768, recompute="none"),
}
# The same with each layer compiled by TorchInductor (fused element-wise kernels, as Megatron's
# fused RMSNorm / SwiGLU / cross-entropy are; no CUDA graphs).
for _n in list(CONFIGS):
    CONFIGS[_n + "_compiled"] = dict(CONFIGS[_n], compiled=True)


PROFILE_DIR = ""


def run(name, c):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    D, L, H, Fd, S, B, V = (c[k] for k in ("D", "L", "H", "F", "S", "B", "V"))
    Dh = D // H
    bf16, f32 = torch.bfloat16, torch.float32

    def w(*shape, std):
        return (torch.randn(*shape, device=dev, dtype=f32) * std).to(bf16).requires_grad_()

    params = {"emb": w(V, D, std=0.02), "out": w(D, V, std=D ** -0.5), "nf": torch.ones(D, device=dev, dtype=bf16, requires_grad=True)}
    for i in range(L):
        params[f"n1.{i}"] = torch.ones(D, device=dev, dtype=bf16, requires_grad=True)
        params[f"n2.{i}"] = torch.ones(D, device=dev, dtype=bf16, requires_grad=True)
        params[f"qkv.{i}"] = w(D, 3 * D, std=D ** -0.5)
        params[f"o.{i}"] = w(D, D, std=D ** -0.5)
        params[f"g.{i}"] = w(D, Fd, std=D ** -0.5)
        params[f"u.{i}"] = w(D, Fd, std=D ** -0.5)
        params[f"d.{i}"] = w(Fd, D, std=Fd ** -0.5)
    names = list(params)
    # Megatron's state: fp32 master weights, fp32 main gradients, Adam moments in fp32.
    master = [params[n].detach().float().clone() for n in names]
    main_grad = [torch.zeros_like(m) for m in master]
    opt = torch.optim.Adam(master, lr=1e-4, fused=True)
    for m, g in zip(master, main_grad):
        m.grad = g
    # Megatron's gradient-accumulation fusion: each bf16 gradient goes into the fp32 main gradient
    # as soon as it is produced and is not kept.
    for n, g in zip(names, main_grad):
        def hook(p, g=g):
            g.add_(p.grad.float())
            p.grad = None
        params[n].register_post_accumulate_grad_hook(hook)

    def rms(x, wt):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf16) * wt

    def layer(x, n1, n2, wqkv, wo, wg, wu, wd):  # weights as arguments: one compilation for all layers
        h = rms(x, n1)
        q, k, v = (h @ wqkv).split(D, dim=-1)
        q, k, v = (t.view(B, S, H, Dh).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.transpose(1, 2).reshape(B, S, D) @ wo
        h = rms(x, n2)
        return x + (F.silu(h @ wg) * (h @ wu)) @ wd

    def weights(i):
        return [params[f"{k}.{i}"] for k in ("n1", "n2", "qkv", "o", "g", "u", "d")]

    tok = torch.randint(0, V, (B, S + 1), device=dev)
    inp, tgt = tok[:, :S], tok[:, 1:]

    layer_fn = torch.compile(layer, dynamic=False) if c.get("compiled") else layer

    def head(x):
        logits = rms(x, params["nf"]) @ params["out"]
        return F.cross_entropy(logits.float().view(-1, V), tgt.reshape(-1))

    head_fn = torch.compile(head, dynamic=False) if c.get("compiled") else head

    def step():
        x = params["emb"][inp]
        for i in range(L):
            if c["recompute"] == "full":
                x = torch.utils.checkpoint.checkpoint(layer_fn, x, *weights(i), use_reentrant=False)
            else:
                x = layer_fn(x, *weights(i))
        loss = head_fn(x)
        loss.backward()
        with torch.no_grad():
            opt.step()
            for n, m, g in zip(names, master, main_grad):
                params[n].copy_(m)  # bf16 weights from the fp32 master
                g.zero_()
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if PROFILE_DIR:  # one more step under torch.profiler, after the timed ones
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        prof.export_chrome_trace(f"{PROFILE_DIR}/{name}.trace.json")
    row = dict(name=name, **c, step_s_median=statistics.median(times), step_s_min=min(times), step_s_max=max(times),
               step_s_all=times, max_memory_allocated=torch.cuda.max_memory_allocated(),
               params=sum(p.numel() for p in params.values()), torch=torch.__version__, cuda=torch.version.cuda,
               device=torch.cuda.get_device_name(), date_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile-dir", default="", help="also profile one step per configuration (Chrome trace)")
    a = ap.parse_args()
    global PROFILE_DIR
    PROFILE_DIR = a.profile_dir
    for name in a.configs.split(","):
        try:
            row = run(name, CONFIGS[name])
        except Exception as e:  # keep going: one row per configuration
            row = dict(name=name, error=f"{type(e).__name__}: {e}")
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(name, row.get("step_s_median"), row.get("max_memory_allocated"), row.get("error", ""), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
