#!/usr/bin/env python3
"""Per-layer GPU time by region and kernel class from the torch.profiler traces in this folder.

Each kernel is tied to the CPU op that launched it (the launch's correlation id, then the CPU ops
open on the launching thread at that moment). A layer's forward is cut at its unpermute's
scatter_add_ (+ the residual add after it); its backward runs from the combine's backward gather
(ScatterAddBackward) to the next layer's. Regions inside a layer: attn (norms, QKV, QK norms,
attention, projection, residual, pre-MLP norm), router (router GEMM to the permutation),
permute (gather, sort_chunks), experts (first to last expert GEMM, the activations between),
unpermute (sort_chunks back, scatter_add, residual); the backward mirrors them.
Usage: analyze.py TRACE.json.gz [layers]
"""
import collections, gzip, json, re, sys

GEMM = re.compile(r"nvjet|xmma|gemm|cutlass|sgemm", re.I)


def load(path):
    ev = json.load(gzip.open(path))["traceEvents"]
    gpu = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    rt = {e["args"]["correlation"]: e for e in ev
          if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    bytid = collections.defaultdict(list)
    for o in ev:
        if o.get("cat") in ("cpu_op", "user_annotation") and o.get("ph") == "X":
            bytid[o["tid"]].append(o)
    for l in bytid.values():
        l.sort(key=lambda o: o["ts"])
    out = []
    for k in gpu:
        r = rt.get(k["args"].get("correlation"))
        stack = []
        if r:
            for o in bytid[r["tid"]]:
                if o["ts"] > r["ts"]:
                    break
                if o["ts"] + o["dur"] >= r["ts"] + r["dur"]:
                    stack.append(o["name"])
        out.append(dict(name=k["name"], dur=k["dur"], S=" > ".join(stack), fwd="FWD" in stack))
    return out


def kind(k):
    S, N = k["S"], k["name"]
    if "AccumulateGrad" in S:
        return "grad accumulate (.grad += , bf16)"
    if "cudnn" in N or "ScaledDotProduct" in S or "scaled_dot_product" in S:
        return "attention (cuDNN)"
    if "RouterGating" in S and GEMM.search(N):
        return "GEMM (router, fp32)"
    if GEMM.search(N):
        return "GEMM"
    if "rms_norm" in S or "RmsNorm" in S:
        return "norm"
    if "softmax" in S.lower() and "Router" not in S and "topk" not in S:
        return "elementwise"
    return "elementwise/copy"


def regions(ks, layers):
    """(phase, layer, region) for each kernel index; None for the loss and anything outside the layers."""
    lab = [None] * len(ks)
    fw = [i for i, k in enumerate(ks) if k["fwd"]]
    scat = [i for i in fw if ks[i]["S"].endswith("aten::scatter_add_")]
    start = 0
    for l in range(layers):
        end = scat[l] + 1
        seg = range(start, end + 1)
        r0 = next(i for i in seg if "RouterGating" in ks[i]["S"])
        g0 = next(i for i in seg if i > r0 and "aten::index_select" in ks[i]["S"])
        xg = [i for i in seg if g0 < i < scat[l] and kind(ks[i]) == "GEMM"]
        for i in seg:
            lab[i] = ("fwd", l, "attn" if i < r0 else "router" if i < g0 else "permute" if i < xg[0] else
                      "experts" if i <= xg[-1] else "unpermute")
        start = end + 1
    bw0 = max(fw) + 1
    gb = [i for i in range(bw0, len(ks)) if "ScatterAddBackward" in ks[i]["S"]]
    starts = gb[:layers] + [len(ks)]
    for j in range(layers):
        l = layers - 1 - j
        seg = range(starts[j], starts[j + 1])
        ib = max(i for i in seg if "IndexSelectBackward" in ks[i]["S"])
        rb = max(i for i in seg if "RouterGatingLinearFunctionBackward" in ks[i]["S"])
        xg = [i for i in seg if i < ib and kind(ks[i]) == "GEMM"]
        for i in seg:
            lab[i] = ("bwd", l, "unpermute" if i < xg[0] else "experts" if i <= xg[-1] else
                      "permute" if i <= ib else "router" if i <= rb else "attn")
    return lab


def table(path, layers=2):
    ks = load(path)
    lab = regions(ks, layers)
    agg = collections.OrderedDict()
    for k, r in zip(ks, lab):
        key = (r[0], r[2], kind(k)) if r else ("loss/other", "", kind(k))
        c = agg.setdefault(key, [0, 0.0])
        c[0] += 1
        c[1] += k["dur"]
    return ks, agg


if __name__ == "__main__":
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    ks, agg = table(sys.argv[1], layers)
    print(f"{sys.argv[1]}: {len(ks)} GPU activities, {sum(k['dur'] for k in ks) / 1e3:.2f} ms (both layers, loss included)")
    print(f"{'phase':10s} {'region':10s} {'class':36s} {'kernels/layer':>13s} {'us/layer':>9s}")
    tot = collections.Counter()
    for (ph, reg, kd), (n, t) in sorted(agg.items(), key=lambda x: (x[0][0], ["attn", "router", "permute", "experts", "unpermute", ""].index(x[0][1]), x[0][2])):
        d = layers if ph != "loss/other" else 1
        print(f"{ph:10s} {reg:10s} {kd:36s} {n / d:13.1f} {t / d:9.1f}")
        tot[ph] += t / d
    print({k: round(v, 1) for k, v in tot.items()})
