#!/usr/bin/env python3
"""Megatron-Core's host time per pipeline chunk and micro-batch, beyond its layers.

The per-layer host figures (megatron_layer_host.py) divide a bare TransformerBlock's time by its layers. In training
each virtual pipeline stage (a model chunk) runs, per micro-batch, Megatron's schedule step around its layers:
schedules.forward_step (set_input_tensor, the forward_step_func, the MoE aux-loss scale), deallocate_output_tensor
once the output is sent, and backward_step
(retain_grad, autograd's backward from the received gradient, the input's gradient), through the wrappers training uses
(DistributedDataParallel over Float16Module over GPTModel: GPTModel's preprocess with its rotary embedding, the
TransformerBlock's contexts, the postprocess). With one or two layers per chunk (the interleaved rows) that is paid per
layer or two. This measures it on one GPU: a middle chunk (no embedding, no loss; the pipeline's last-stage test
patched to false, as the first-stage test) of L layers, tiny shapes so that the host sets the pace, the real forward_step / backward_step
called for M micro-batches back to back (all forwards, then all backwards, as the warm-up and cool-down run them),
for L in 1, 2, 4, 8; host time per chunk = a + b L, a least-squares line; a is the chunk's own.

--paired (2026-12-05, later): the chunk and its bare block alternate repetition by repetition, for L = 1 and 2 only,
and the per-chunk figure is the median of the paired differences (chunk - block, per micro-batch and phase): the
layers' host time, the same on both sides, cancels instead of entering through two fitted intercepts, so the host's
drift between repetitions no longer sets the resolution. --no-nvtx-lookup replaces Megatron-Core's frame lookup for NVTX
range names (Megatron-LM 2025-05-16..06-09, ../data/h100-2026-12-05-megatron-nvtx-host) by a constant, on both sides
alike: it only lowers the noise, since the schedule step calls no NVTX range per chunk at those commits.

Usage (on the device, repository root):
  python3 calibration/torch/megatron_chunk_host.py --megatron PATH_CONTAINING_megatron --out FILE [--paired [--paired-reps 41] [--paired-layers 1,2]] [--no-nvtx-lookup]
"""
import os, statistics, sys, time


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_single_gpu import ddp_config, disable_nvtx_lookup, emit, llama_block_config, record_error, start

    def add_arguments(ap):
        ap.add_argument("--paired", action="store_true", help="chunk and bare block alternated (see above)")
        ap.add_argument("--paired-reps", type=int, default=41, help="pairs per chunk size in --paired")
        ap.add_argument("--paired-layers", default="1,2", help="chunk sizes (layers) in --paired")
        ap.add_argument("--no-nvtx-lookup", action="store_true", help="NVTX range names made constant (2025-05-16..06-09)")
    torch, args, out = start(29591, add_arguments)
    paired = args.paired
    if args.no_nvtx_lookup:
        disable_nvtx_lookup()
    from megatron.core import parallel_state
    from megatron.core.pipeline_parallel import schedules
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.distributed import DistributedDataParallel
    from megatron.core.transformer.module import Float16Module
    from megatron.core.enums import ModelType

    # A middle virtual stage: neither the first (embedding; Float16Module's input cast) nor the last (output layer and
    # loss; its output cast). The wrappers read these through the parallel_state module.
    parallel_state.is_pipeline_first_stage = lambda *a, **k: False
    parallel_state.is_pipeline_last_stage = lambda *a, **k: False

    seq, hidden, micro = 128, 256, 16

    def one_rep(fwd, bwd):
        """One repetition from an idle GPU: M forwards then M backwards; host time per micro-batch of each phase
        (the clock is read before the GPU catches up: a tiny chunk's GPU work finishes well before its host's), and
        the wall time of both with the GPU's."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        outs = fwd()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        bwd(outs)
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        t4 = time.perf_counter()
        return (t1 - t0) / micro * 1e6, (t3 - t2) / micro * 1e6, ((t2 - t0) + (t4 - t2)) / micro * 1e6

    def chunk(name, layers, experts, reps):
        rec = dict(kind="chunk", name=name, layers=layers, experts=experts, micro_batches=micro, seq=seq, hidden=hidden)
        try:
            # Megatron-Core's layer-wise aux-loss log is a global sized by the first model's layer count: a later chunk
            # of more layers indexed past it (IndexError on the 2026-12-05 H100 run). Empty it for each chunk.
            try:
                from megatron.core.transformer.moe.moe_utils import get_moe_layer_wise_logging_tracker
                get_moe_layer_wise_logging_tracker().clear()
            except ImportError:
                pass
            cfg = llama_block_config(torch, layers, hidden, 4, 1024 if not experts else 512, experts or None, 2)
            cfg.deallocate_pipeline_outputs = True  # Megatron-LM's training default (arguments.py)
            spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False, normalization="RMSNorm")
            gpt = GPTModel(cfg, spec, vocab_size=256, max_sequence_length=seq, pre_process=False, post_process=False,
                           position_embedding_type="rope").cuda().bfloat16()
            model = DistributedDataParallel(cfg, ddp_config(grad_reduce_in_fp32=True, overlap_grad_reduce=True,
                                                            use_distributed_optimizer=True, check_for_nan_in_grad=False,
                                                            bucket_size=40_000_000), Float16Module(cfg, gpt))

            def forward_step_func(data_iterator, m):  # pretrain_gpt.forward_step on a middle stage: no batch, no loss
                return m(None, None, None), None

            inputs = [torch.randn(seq, 1, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                      for _ in range(micro)]
            grads = [torch.randn(seq, 1, hidden, device="cuda", dtype=torch.bfloat16) for _ in range(micro)]

            def forwards():
                outs = []
                for i in range(micro):
                    o, _ = schedules.forward_step(forward_step_func, None, model, micro, inputs[i], [], cfg,
                                                  is_first_microbatch=(i == 0), current_microbatch=i)
                    # As the schedule does once the output is sent: its data freed, its graph kept (backward_step's
                    # custom_backward requires it).
                    schedules.deallocate_output_tensor(o, cfg.deallocate_pipeline_outputs)
                    outs.append(o)
                return outs

            def backwards(outs):
                for i in range(micro):
                    schedules.backward_step(inputs[i], outs[i], grads[i], ModelType.encoder_or_decoder, cfg)
                    inputs[i].grad = None

            with model.no_sync():
                for _ in range(3):
                    backwards(forwards())
                if not paired:  # (paired: timed below, alternating with the bare block)
                    fw, bw, busy = zip(*[one_rep(forwards, backwards) for _ in range(reps)])
                    rec.update(fwd_host_us=statistics.median(fw), bwd_host_us=statistics.median(bw),
                               fwd_host_us_range=[min(fw), max(fw)], bwd_host_us_range=[min(bw), max(bw)],
                               wall_us=statistics.median(busy))
            # The bare block, as megatron_layer_host.py times it (the same layers, no schedule, no wrappers), the same
            # way: M forwards, then M backwards, host time per micro-batch. The layer figures hold its intercept.
            block = gpt.decoder
            rope = gpt.rotary_pos_emb(seq)
            xs = [t.detach().requires_grad_(True) for t in inputs]

            def block_forwards():
                ys = []
                for i in range(micro):  # a middle stage's block reads its input from set_input_tensor
                    block.set_input_tensor(xs[i])
                    ys.append(block(None, attention_mask=None, rotary_pos_emb=rope))
                return ys

            def block_backwards(ys):
                for i in range(micro):
                    ys[i].backward(grads[i])
                    xs[i].grad = None
            with model.no_sync():
                for _ in range(3):
                    block_backwards(block_forwards())
                if paired:  # chunk and block alternate; the differences of each pair, per micro-batch and phase
                    d_fwd, d_bwd, c_fwd, c_bwd, k_fwd, k_bwd = [], [], [], [], [], []
                    for _ in range(reps):
                        cf, cb, _ = one_rep(forwards, backwards)
                        kf, kb, _ = one_rep(block_forwards, block_backwards)
                        d_fwd.append(cf - kf)
                        d_bwd.append(cb - kb)
                        c_fwd.append(cf), c_bwd.append(cb), k_fwd.append(kf), k_bwd.append(kb)
                    q = lambda v: statistics.quantiles(v, n=4)
                    rec.update(paired_reps=reps, d_fwd_us=statistics.median(d_fwd), d_bwd_us=statistics.median(d_bwd),
                               d_fwd_quartiles_us=[q(d_fwd)[0], q(d_fwd)[2]],
                               d_bwd_quartiles_us=[q(d_bwd)[0], q(d_bwd)[2]],
                               fwd_host_us=statistics.median(c_fwd), bwd_host_us=statistics.median(c_bwd),
                               block_fwd_host_us=statistics.median(k_fwd), block_bwd_host_us=statistics.median(k_bwd))
                else:
                    bf, bb, _ = zip(*[one_rep(block_forwards, block_backwards) for _ in range(reps)])
                    rec.update(block_fwd_host_us=statistics.median(bf), block_bwd_host_us=statistics.median(bb),
                               block_fwd_bwd_host_us=statistics.median(bf) + statistics.median(bb),
                               block_fwd_range=[min(bf), max(bf)], block_bwd_range=[min(bb), max(bb)])
        except Exception:
            record_error(rec)
        emit(out, rec)
        return rec

    rows = {}
    for experts in (0, 8):
        for layers in (tuple(int(x) for x in args.paired_layers.split(",")) if paired else (1, 2, 4, 8)):
            rows[(experts, layers)] = chunk(("moe8_" if experts else "dense_") + f"L{layers}", layers, experts,
                                            reps=args.paired_reps if paired else 9)
    if paired:
        out.close()
        return
    for experts in (0, 8):
        pts = [(l, rows[(experts, l)]) for l in (1, 2, 4, 8) if "fwd_host_us" in rows[(experts, l)]]
        if len(pts) < 2:
            continue
        fit = {}
        for key in ("fwd_host_us", "bwd_host_us", "block_fwd_host_us", "block_bwd_host_us", "block_fwd_bwd_host_us"):
            xs = [l for l, _ in pts]
            ys = [r[key] for _, r in pts]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            fit[key] = dict(per_chunk_us=my - b * mx, per_layer_us=b)
        emit(out, dict(kind="fit", experts=experts, **fit))
    out.close()


if __name__ == "__main__":
    main()
