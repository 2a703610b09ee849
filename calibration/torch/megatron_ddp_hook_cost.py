#!/usr/bin/env python3
"""The host cost of one call of each of Megatron-Core DDP's hooks, measured inside and around the call.

megatron_ddp_host.py compares whole micro-batches with and without the wrapper; on the device's VM host the
micro-batch's wall time varies by 10-30% between repetitions, more than the hooks cost, so that difference is
noise. This script measures the two parts of a hook's cost separately, each with many calls:
  inner     the time spent inside Megatron's hook functions (DistributedDataParallel._make_backward_post_hook's
            and _make_forward_pre_hook's closures), timed by wrapping them, over real micro-batches of a
            wrapped block (one rank), with and without the main_grad add (grad_added_to_main_grad, which
            Transformer Engine's fused weight-gradient accumulation sets);
  dispatch  what calling any Python hook costs autograd (a hook on a gradient accumulator) or a module
            (a forward pre-hook, which also takes nn.Module.__call__ off its fast path), from A/B pairs of
            1,024 trivial parameters or modules with and without a no-op hook, the median of 41 paired
            differences.
Per call = inner + dispatch.

Usage (on the device, repository root):
  python3 calibration/torch/megatron_ddp_hook_cost.py --megatron PATH_CONTAINING_megatron --out FILE
"""
import os, statistics, sys, time


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import ddp_config, emit, llama_block_config, record_error, start
    torch, args, out = start(29563)
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.distributed import DistributedDataParallel

    # --- inner: time inside Megatron's hook closures -------------------------------------------------------
    clock = {"bwd_s": 0.0, "bwd_n": 0, "fwd_s": 0.0, "fwd_n": 0}

    def timed(make, key):
        def make_timed(self, *a):
            hook = make(self, *a)

            def wrapper(*args, **kw):
                t0 = time.perf_counter()
                r = hook(*args, **kw)
                clock[key + "_s"] += time.perf_counter() - t0
                clock[key + "_n"] += 1
                return r
            return wrapper
        return make_timed

    DistributedDataParallel._make_backward_post_hook = timed(DistributedDataParallel._make_backward_post_hook, "bwd")
    DistributedDataParallel._make_forward_pre_hook = timed(DistributedDataParallel._make_forward_pre_hook, "fwd")

    def inner(name, layers, experts, topk, ffn, te_flag, microbatches=12):
        rec = dict(kind="inner", name=name, layers=layers, experts=experts, topk=topk, te_flag=te_flag,
                   microbatches=microbatches)
        try:
            cfg = llama_block_config(torch, layers, 256, 4, ffn, experts or None, topk)
            spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False,
                                            normalization="RMSNorm")
            block = TransformerBlock(cfg, spec).cuda().bfloat16()
            ddp = DistributedDataParallel(cfg, ddp_config(grad_reduce_in_fp32=True, overlap_grad_reduce=True,
                                                          overlap_param_gather=True, use_distributed_optimizer=True,
                                                          check_for_nan_in_grad=False, bucket_size=40_000_000), block)
            params = [p for p in block.parameters() if p.requires_grad]
            rec.update(params=len(params), modules=sum(1 for _ in block.modules()))
            x = torch.randn(128, 1, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def step():
                ddp.zero_grad_buffer()
                for p in params:
                    p.grad_added_to_main_grad = te_flag
                with ddp.no_sync():
                    for _ in range(microbatches - 1):
                        ddp(x, attention_mask=None).float().square().mean().backward()
                ddp(x, attention_mask=None).float().square().mean().backward()
                ddp.finish_grad_sync()

            for _ in range(2):
                step()
            torch.cuda.synchronize()
            for k in clock:
                clock[k] = 0 if k.endswith("_n") else 0.0
            steps = 5
            t_zero = 0.0
            for _ in range(steps):
                t0 = time.perf_counter()
                ddp.zero_grad_buffer()
                t_zero += time.perf_counter() - t0
                step()
            torch.cuda.synchronize()
            rec.update(bwd_hook_calls=clock["bwd_n"], fwd_prehook_calls=clock["fwd_n"],
                       bwd_hook_inner_us=clock["bwd_s"] / max(clock["bwd_n"], 1) * 1e6,
                       fwd_prehook_inner_us=clock["fwd_s"] / max(clock["fwd_n"], 1) * 1e6,
                       zero_grad_buffer_us=t_zero / steps * 1e6)
            del ddp, block, x
            torch.cuda.empty_cache()
        except Exception:
            record_error(rec)
        emit(out, rec)

    inner("dense_llama_tiny", 8, 0, 0, 768, te_flag=True)
    inner("dense_llama_tiny_add", 8, 0, 0, 768, te_flag=False)
    inner("moe16_top8_tiny", 4, 16, 8, 128, te_flag=True)
    inner("moe16_top8_tiny_add", 4, 16, 8, 128, te_flag=False)

    # --- dispatch: what calling a Python hook costs, A/B with trivial work ---------------------------------
    n, pairs = 1024, 41

    def paired(fa, fb):
        diffs = []
        for _ in range(3):
            fa(); fb()
        for i in range(pairs):
            order = (fa, fb) if i % 2 == 0 else (fb, fa)
            t = {}
            for f in order:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                torch.cuda.synchronize()
                t[f] = time.perf_counter() - t0
            diffs.append(t[fb] - t[fa])
        return statistics.median(diffs) / n * 1e6, statistics.quantiles(diffs, n=4)

    # Gradient-accumulator hooks: n leaf parameters each feeding one mul; backward of their sum.
    def make_params(hooked):
        ps = [torch.nn.Parameter(torch.randn(4, device="cuda")) for _ in range(n)]
        keep = []
        if hooked:
            for p in ps:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(lambda *unused: None)
                keep.append(acc)
        return ps, keep

    pa, _ = make_params(False)
    pb, keep_b = make_params(True)

    def bwd(ps):
        def f():
            torch.stack([(p * 2.0).sum() for p in ps]).sum().backward()
            for p in ps:
                p.grad = None
        return f

    per, q = paired(bwd(pa), bwd(pb))
    emit(out, dict(kind="dispatch", what="grad_accumulator_hook", n=n, pairs=pairs, us_per_call=per,
                   quartiles_of_diff_s=q))

    # Module forward pre-hooks: n modules in sequence whose forward launches nothing.
    class Noop(torch.nn.Module):
        def forward(self, x):
            return x

    ma = torch.nn.ModuleList([Noop() for _ in range(n)])
    mb = torch.nn.ModuleList([Noop() for _ in range(n)])
    for m in mb:
        m.register_forward_pre_hook(lambda module, *unused: None)
    xx = torch.randn(4, device="cuda")

    def fwd(ms):
        def f():
            y = xx
            for m in ms:
                y = m(y)
        return f

    per, q = paired(fwd(ma), fwd(mb))
    emit(out, dict(kind="dispatch", what="module_forward_pre_hook", n=n, pairs=pairs, us_per_call=per,
                   quartiles_of_diff_s=q))
    out.close()


if __name__ == "__main__":
    main()
