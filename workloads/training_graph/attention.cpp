// The attention block's ops: projections, the attention kernels (flash, materialized, MLA, context parallelism's
// variants) and XLA's layout copies around them.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

#include <bit>

namespace racksim::workloads::training_graph {

void Builder::xla_attention_layout_copies_backward() {
  const double qd = hl_ * qk_dim_, kd = kvl_ * qk_dim_, vd = kvl_ * v_dim_;
  if (gqa_layouts()) {
    layout_copy("attn_scores.dq_layout", qd);
    layout_copy("attn_scores.dk_layout", kd);
    layout_copy("attn_scores.dv_layout", vd);
  }
  qkv_gradient_joins("attn_scores.");
}

// Transformer Engine's unfused DotProductAttention (NVTE_FUSED_ATTN=0), as Pax's TE layers run it (Praxis's te_helper)
// (transformer_engine/jax/flax/transformer.py _UnfusedDotProductAttention, module.py Softmax, at TE v1.5): the score
// einsum is a plain bf16 dot (scale and causal mask go to the softmax), then TE's scaled upper-triangular masked
// softmax (common/fused_softmax/scaled_upper_triang_masked_softmax.cu): a warp per row that loads only the causal
// part (element < row + 1), keeps the row in fp32 registers (next_pow2(S) / 32 elements per thread) and writes the
// whole row in bf16, zeros above the diagonal. Its backward loads the output and its gradient over the same part and
// writes the whole bf16 dS, which the dQ and dK dots read as it is. Measured on an H100
// (calibration/data/h100-2026-12-07-te-softmax): 0.48 of a copy's rate forward and 0.61 backward at S = 2,048.
// TE v1.5's ScaledUpperTriangMaskedSoftmaxFwdPrimitive.is_kernel_available (transformer_engine/jax/cpp_extensions.py):
// bf16 or fp16 scores, 16 < S <= 4096 (max_k_seqlen_supported), S a multiple of 4, and the attention batches
// (micro-batch x local heads) a multiple of 4 and of the kernel's rows per 128-thread block.
int Builder::te_softmax_row_pow2() const { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(s_))); }

bool Builder::te_softmax_kernel_available() const {
  if (pr_.activation_bytes != 2 || s_ <= 16 || s_ > 4096 || std::fmod(s_, 4.0) != 0) return false;
  const double batches = b_ * hl_;
  const int pow2 = te_softmax_row_pow2();
  const int warp = std::min(pow2, 32), rows_per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  return std::fmod(batches, 4.0) == 0 && std::fmod(batches, static_cast<double>(rows_per_block)) == 0;
}

// Its time: gpu.te_softmax_*_GBps by the row length where the GPU has that measurement; else XLA's row-kernel
// bound with the loads the kernel holds per thread, the forward's one row and the backward's two (output and grad).
void Builder::mark_te_softmax(OpId op, int direction) {
  Op& o = g_.ops[op];
  o.te_softmax = static_cast<uint8_t>(direction);
  o.attention_seq = s_;
  o.thread_bytes = direction * te_softmax_row_pow2() / 32.0 * pr_.activation_bytes;
}

void Builder::te_fused_softmax_forward(double bh) {
  const double a = pr_.activation_bytes, scores = bh * s_ * s_, causal = scores / 2;
  gemm("attn_scores.qk", s_, s_, qk_dim_, bh);
  // Per causal score: scale, max, subtract, sum, divide (five flops) and one exponential.
  const OpId sm = vector("attn_scores.softmax", causal * a + scores * a, 5 * causal, causal);
  mark_te_softmax(sm, 1);
  if (phase_ == Phase::recompute) scores_recomputed_ = true;
}

void Builder::te_fused_softmax_backward(double bh) {
  const double a = pr_.activation_bytes, scores = bh * s_ * s_, causal = scores / 2;
  // Per causal score: the product with the output, the row sum, the subtraction, the product and the scale.
  const OpId sb = vector("attn_scores.softmax.bwd", 2 * causal * a + scores * a, 5 * causal);
  mark_te_softmax(sb, 2);
  scores_recomputed_ = false;
  // A custom call's result is a new buffer: the bf16 dS lives until dK is done; dP dies here.
  const TensorId ds = temp("attn_scores.dS", scores * a);
  g_.ops[sb].allocs.push_back(ds);
  if (attn_dp_) g_.ops[sb].frees.push_back(*attn_dp_);
  attn_dp_.reset();
  gemm("attn_scores.dq", s_, qk_dim_, s_, bh);
  const OpId dk = gemm("attn_scores.dk", s_, qk_dim_, s_, bh);
  g_.ops[dk].frees.push_back(ds);
  xla_attention_layout_copies_backward();
}

void Builder::add_attention_steps(std::vector<Step>& steps) {
  const double a = pr_.activation_bytes;
  const double qd = hl_ * qk_dim_, kd = kvl_ * qk_dim_, vd = kvl_ * v_dim_, od = hl_ * v_dim_;
  if (m_.mla) {
    // DeepSeek MLA: low-rank Q and KV projections, then per-head up-projections.
    const auto& mla = *m_.mla;
    const double ql = mla.q_lora_rank, kvlr = mla.kv_lora_rank, rope = mla.qk_rope_head_dim;
    const double qkv_out = qd + hl_ * (mla.qk_nope_head_dim + v_dim_);
    // Megatron-Core's fused MLA rotary embedding (apply_rope_fusion, on unless --no-rope-fusion; multi_latent_attention.py
    // get_query_key_value_tensors, megatron/core/fusions/fused_mla_yarn_rope_apply.py at 79e8592b): two Triton
    // kernels per pass, each memory-bound. The query's rope part is rotated in place (read and written: T x heads x
    // rope); the keys and values are built from the kv up projection's output and the rope key: read kv (T x heads
    // x (nope + v)) and the rope key (T x rope), write K (T x heads x (nope + rope)) and V (T x heads x v). The
    // backward moves the same bytes the other way (dQ in place; dK, dV read, dKV and the rope key's gradient
    // written). Six flops per rotated pair element. Not in JAX mode: XLA fuses the concatenations with their
    // neighbours (not read off a compiled MLA program yet).
    const double mla_rope_bytes =
        T_ * a * (2 * hl_ * rope + hl_ * (mla.qk_nope_head_dim + v_dim_) + rope + hl_ * (qk_dim_ + v_dim_));
    const double mla_rope_flops = 3.0 * T_ * rope * (hl_ + 1);
    // Megatron-Core with Transformer Engine (multi_latent_attention.py _qkv_down_projection and
    // get_query_key_value_tensors): the down projections are duplicated on every tp rank and run on the rank's own
    // tokens (its sequence-parallel part, all of them without sequence parallelism); the compressed latents (and
    // the rope key) are what the up projections, column-parallel, gather over tp, not the hidden state. In the
    // backward the latents' gradients are reduce-scattered (all-reduced without sequence parallelism) before the
    // down projections' own backward, which then needs no exchange.
    steps.push_back({"qkv", T_ * (qd + kd + vd) * a,
                     [=, this] {
                       gemm_fwd("q_down", Tsp_, ql, h_);
                       gemm_fwd("kv_down", Tsp_, kvlr + rope, h_);
                       tp_collective("q_up.tp_all_gather", CollectiveOp::all_gather, T_ * ql * a, TpOverlap::ring_exchange);
                       gemm_fwd("q_up", T_, qd, ql);
                       tp_collective("kv_up.tp_all_gather", CollectiveOp::all_gather, T_ * kvlr * a, TpOverlap::ring_exchange);
                       gemm_fwd("kv_up", T_, qkv_out - qd, kvlr);
                       // The rope key, split from the down projection's output, gathered on its own (sequence
                       // parallelism only: without it every rank has all tokens).
                       if (t_.sequence_parallel)
                         tp_collective("k_pos_emb.tp_all_gather", CollectiveOp::all_gather, T_ * rope * a, TpOverlap::none);
                       if (!jax_) vector("rope", mla_rope_bytes, mla_rope_flops);
                     },
                     [=, this] {
                       // The rope's backward first: it makes the rope key's gradient, summed over the heads.
                       if (!jax_) vector("rope.bwd", mla_rope_bytes, mla_rope_flops);
                       if (t_.sequence_parallel)
                         tp_collective("k_pos_emb.tp_reduce_scatter", CollectiveOp::reduce_scatter, T_ * rope * a,
                                       TpOverlap::none);
                       column_parallel_layer_backward("kv_up", T_, qkv_out - qd, kvlr, T_ * kvlr * a);
                       column_parallel_layer_backward("q_up", T_, qd, ql, T_ * ql * a);
                       for (auto [n, mm, nn, kk] : {std::tuple{"kv_down", Tsp_, kvlr + rope, h_},
                                                    std::tuple{"q_down", Tsp_, ql, h_}}) {
                         gemm_dgrad(n, mm, nn, kk);
                         gemm_wgrad(n, mm, nn, kk);
                       }
                     }});
  } else {
    // Per-head query/key RMSNorm (model.qk_norm; Megatron-Core's q_layernorm/k_layernorm, TENorm): the heads
    // are strided views of the fused QKV output and Transformer Engine's RMSNorm makes its input contiguous
    // first (TE d0067d0 ops/basic/rmsnorm.py: input_.contiguous()), so the forward copies q and k, then reads
    // and writes them; it keeps the copy for the backward, which reads it and the gradient and writes the
    // input gradient. Measured as separate kernels in Megatron-Core's layer on the H200
    // (calibration/data/h200-2026-12-02-megatron-moe-kernels). XLA fuses it with its neighbours: not modelled.
    const bool qk_norm = m_.qk_norm && !jax_;
    const double qk_elems = T_ * (qd + kd);
    steps.push_back({"qkv", T_ * (qd + kd + vd) * a + (qk_norm ? qk_elems * a : 0.0),
                     [=, this] {
                       tp_collective("qkv.tp_all_gather", CollectiveOp::all_gather, T_ * h_ * a, TpOverlap::ring_exchange);
                       gemm_fwd("qkv", T_, qd + kd + vd, h_);
                       if (qk_norm) vector("qk_norm", 4 * qk_elems * a, 5 * qk_elems);
                     },
                     [=, this] {
                       if (qk_norm) vector("qk_norm.bwd", 3 * qk_elems * a, 8 * qk_elems);
                       column_parallel_layer_backward("qkv", T_, qd + kd + vd, h_, T_ * h_ * a);
                     }});
  }
  const double bh = b_ * hl_;
  if (materialized_) {
    // Scores written to HBM (XLA without a flash kernel): QK^T, softmax in fp32, probs in bf16.
    steps.push_back({"attn_scores", bh * s_ * s_ * a,
                     [=, this] {
                       if (jax_) xla_attention_layout_copies_forward();
                       if (te_softmax_) return te_fused_softmax_forward(bh);  // TE's softmax, not XLA's
                       // Scanned, the forward's score dot is a Triton GEMM fusion that applies the causal mask
                       // as select(mask, scale * QK^T, fill) from two loop-invariant [B heads, S, S] operands
                       // materialized before the loop, a pred mask and an fp32 fill: 5 B more per score read
                       // (gemm_fusion_dot.48 of m1_none and s1_none_scan, .49 of m1_dots and d4096_l8_dots, .53 of
                       // m1_full, .43 of g4k_l4_full, .39 of g1_dots; the recomputed dot reads neither).
                       const double mask_reads = jax_ && t_.scan_layers && phase_ == Phase::forward ? bh * s_ * s_ * 5 : 0;
                       gemm("attn_scores.qk", s_, s_, qk_dim_, bh, bh * s_ * s_ * (4 - a) + mask_reads);
                       // XLA splits the softmax into two Triton row fusions of 64 elements per
                       // thread, each reading the fp32 scores: a reduction writing one fp32
                       // statistic per row, then the normalization writing the bf16
                       // probabilities. Seen where the softmax is recomputed (g1_dots: fusion.94,
                       // fusion.92; m1_dots) and in unrolled forwards (s1_none_unrolled:
                       // fusion.858, fusion.603). The scanned forward's is left as one kernel.
                       const bool split = jax_ && (phase_ == Phase::recompute || !t_.scan_layers);
                       // Scanned, with the scores kept for the backward (no policy), the forward's softmax is
                       // three fusions, as the loop saves both the fp32 exponentials and the bf16
                       // probabilities: the row max and exp (read the fp32 scores, write fp32), the row sum
                       // (read them again), and the division with the bf16 convert (read fp32, write bf16);
                       // the two stacks' dynamic-update-slices are scan.stack_copy (m1_none and s1_none_scan:
                       // fusion.157 / fusion.160, input_reduce_fusion.7, loop_convert_fusion). With the scores
                       // not kept (m1_dots, m1_full) it stays one fusion (fusion.168 / .169, 6 B per score).
                       if (jax_ && t_.scan_layers && phase_ == Phase::forward && scores_saved_) {
                         vector("attn_scores.softmax.exp", bh * s_ * s_ * 8 + bh * s_ * 4, 2 * bh * s_ * s_, bh * s_ * s_);
                         vector("attn_scores.softmax.reduce", bh * s_ * s_ * 4 + bh * s_ * 4, bh * s_ * s_);
                         vector("attn_scores.softmax", bh * s_ * s_ * (4 + a) + bh * s_ * 4, bh * s_ * s_);
                         return;
                       }
                       if (split) {
                         const OpId red = vector("attn_scores.softmax.reduce", bh * s_ * s_ * 4 + bh * s_ * 4,
                                                 3 * bh * s_ * s_, bh * s_ * s_);
                         g_.ops[red].thread_bytes = kXlaRowElementsPerThread * 4;  // f32 scores
                       }
                       const OpId sm = vector("attn_scores.softmax", bh * s_ * s_ * (4 + a) + (split ? bh * s_ * 4 : 0),
                                              (split ? 3 : 5) * bh * s_ * s_, bh * s_ * s_);
                       if (split) g_.ops[sm].thread_bytes = kXlaRowElementsPerThread * 4;
                       // Grouped-query, scanned, under full remat: the recomputed bf16 probabilities are transposed
                       // into the two dots' layouts, a read and a write each (g4k_l4_full wrapped_transpose.1 and .2,
                       // and every shape under full in calibration/data/h200-2026-12-04-gqa-compile).
                       if (jax_ && phase_ == Phase::recompute && t_.scan_layers && gqa_layouts() &&
                           t_.recompute.mode == RecomputeMode::full) {
                         vector("attn_scores.probs_layout", 2 * bh * s_ * s_ * a, 0);
                         vector("attn_scores.probs_dk_layout", 2 * bh * s_ * s_ * a, 0);
                       }
                       if (jax_ && phase_ == Phase::recompute) scores_recomputed_ = true;
                     },
                     [=, this] {
                       // XLA's softmax backward (the compiled H200 steps): with the scores
                       // recomputed (or unrolled) one Triton row fusion reads the fp32
                       // probabilities and bf16 dP, reduces the rows and writes fp32 dS (10 B per
                       // score, heavy tiles); with the scores saved under scan, a row reduction
                       // (bf16 dP and fp32 P in: 6 B) and an element-wise fusion (fp32 P, bf16 dP
                       // and the mask in, fp32 dS out: 11 B) of lighter tiles.
                       if (te_softmax_) return te_fused_softmax_backward(bh);
                       const bool fused = scores_recomputed_ || !t_.scan_layers;
                       OpId sb;
                       if (jax_ && !fused) {
                         vector("attn_scores.softmax.bwd.rowsum", bh * s_ * s_ * (a + 4), 2 * bh * s_ * s_);
                         sb = vector("attn_scores.softmax.bwd", bh * s_ * s_ * (4 + a + 1 + 4), 4 * bh * s_ * s_);
                       } else {
                         sb = vector("attn_scores.softmax.bwd", bh * s_ * s_ * (jax_ ? 4 + a + 4 : 3 * a), 4 * bh * s_ * s_);
                         if (jax_) g_.ops[sb].thread_bytes = kXlaRowElementsPerThread * (4 + a);
                       }
                       // Grouped-query, scanned, under a saving policy XLA runs this fusion twice, once per
                       // layout of dS the two dots read ([B, kv, S, S, group] for dQ's, [B, kv, S, group, S]
                       // for dK's): g1_dots fusion.95 and .96, and every shape compiled in
                       // calibration/data/h200-2026-12-04-gqa-compile under dots. Under full remat it runs
                       // once and transposes the probabilities in the recompute instead (attn_scores.softmax).
                       const bool twice = jax_ && fused && t_.scan_layers && gqa_layouts() &&
                                          t_.recompute.mode != RecomputeMode::none && t_.recompute.mode != RecomputeMode::full;
                       std::optional<OpId> sb2;
                       if (twice) {
                         sb2 = vector("attn_scores.softmax.bwd.kv_layout", bh * s_ * s_ * (4 + a + 4), 4 * bh * s_ * s_);
                         g_.ops[*sb2].thread_bytes = kXlaRowElementsPerThread * (4 + a);
                       }
                       scores_recomputed_ = false;
                       // The score gradient dS lives until dK is done. XLA writes it as a new fp32
                       // buffer (dP dies here); Megatron's fused softmax backward works in place
                       // on dP, which then lives until dK.
                       std::optional<TensorId> ds = attn_dp_, ds2;
                       if (jax_) {
                         ds = temp("attn_scores.dS", bh * s_ * s_ * 4);
                         g_.ops[sb].allocs.push_back(*ds);
                         if (sb2) {
                           ds2 = temp("attn_scores.dS.kv_layout", bh * s_ * s_ * 4);
                           g_.ops[*sb2].allocs.push_back(*ds2);
                         }
                         if (attn_dp_) g_.ops[sb2 ? *sb2 : sb].frees.push_back(*attn_dp_);
                       }
                       attn_dp_.reset();
                       // dQ and dK read dS in fp32 under XLA (Triton GEMM fusions convert it).
                       const double ds_extra = jax_ ? bh * s_ * s_ * (4 - a) : 0;
                       gemm("attn_scores.dq", s_, qk_dim_, s_, bh, ds_extra);
                       const OpId dk = gemm("attn_scores.dk", s_, qk_dim_, s_, bh, ds_extra);
                       if (ds) g_.ops[dk].frees.push_back(*ds);
                       if (ds2) g_.ops[dk].frees.push_back(*ds2);
                       if (jax_) xla_attention_layout_copies_backward();
                     }});
    steps.push_back({"attn", T_ * od * a, [=, this] { gemm("attn.pv", s_, v_dim_, s_, bh); },
                     [=, this] {
                       if (jax_) xla_output_grad_layout_copies();
                       // dP = dO V^T, a score-sized bf16 tensor, until the softmax backward reads it.
                       const OpId dp = gemm("attn.dp", s_, s_, v_dim_, bh);
                       attn_dp_ = temp("attn.dP", bh * s_ * s_ * a);
                       g_.ops[dp].allocs.push_back(*attn_dp_);
                       gemm("attn.dv", s_, v_dim_, s_, bh);
                     }});
  } else {
    // Flash attention, causal (half the score tiles). With context parallelism the local
    // queries meet every rank's keys: cp chunks, each after a ring step of K and V that
    // overlaps the previous chunk (ring attention, load-balanced).
    const double fwd_flops = bh * s_ * (s_ * cp_) * (qk_dim_ + v_dim_) * 2.0 * 0.5;
    const double exps = bh * s_ * (s_ * cp_) * 0.5;
    const double io = T_ * (qd + kd + vd + od) * a + bh * s_ * 4;
    const double kv_bytes = T_ * (kd + vd) * a;
    const double qkv_bytes = T_ * (qd + kd + vd) * a, out_bytes = T_ * od * a;
    steps.push_back({"attn", T_ * od * a,
                     [=, this] { attention_kernels(false, fwd_flops, exps, io, kv_bytes, qkv_bytes, out_bytes); },
                     [=, this] {
                       attention_kernels(true, 2.5 * fwd_flops, exps, 2 * io + T_ * od * a, kv_bytes, qkv_bytes, out_bytes);
                       if (jax_) qkv_gradient_joins("attn.");  // the fused kernel returns dQ, dK, dV apart
                     }});
  }
  steps.push_back({"attn_out", Tsp_ * h_ * a,
                   [=, this] {
                     gemm_fwd("attn_out", T_, h_, od);
                     tp_collective("attn_out.tp_reduce_scatter", CollectiveOp::reduce_scatter, T_ * h_ * a,
                                   TpOverlap::pipeline);
                     residual("attn_out.residual");
                   },
                   [=, this] {
                     residual_dropout_bwd("attn_out.dropout.bwd");
                     tp_collective("attn_out.tp_all_gather", CollectiveOp::all_gather, T_ * h_ * a,
                                   TpOverlap::ring_exchange);
                     gemm_dgrad("attn_out", T_, h_, od);
                     gemm_wgrad("attn_out", T_, h_, od);
                   }});
  steps.back().mask_bytes = residual_mask_bytes();  // the attention residual's dropout mask, with its output
}

void Builder::attention_kernels(bool backward, double flops, double exps, double io, double kv_bytes, double qkv_bytes,
                                double out_bytes) {
  const std::string n = backward ? "attn.flash.bwd" : "attn.flash";
  const double dropout_draws = t_.attention_dropout > 0 ? exps : 0;  // one per score element (see kernel)
  auto kernel = [&](std::string_view name, double part, double extra_bytes, double keys) {
    Op op;
    op.name = named(name);
    op.phase = phase_;
    op.unit = ExecUnit::tensor;
    op.dtype = sim::Dtype::bf16;
    op.flops = flops * part;
    op.hbm_bytes = io * part + extra_bytes;
    op.sfu_ops = exps * part;
    op.attention = backward ? 2 : 1;  // causal
    op.attention_causal = true;
    op.attention_mla = mla_measured_dims_;
    op.attention_seq = keys;
    const OpId id = emit(std::move(op));
    // Attention dropout (training.attention_dropout): the kernel draws a random number per causal score
    // element, in forward and again in backward (the mask is regenerated, not stored). Measured as the
    // difference with and without dropout, it is charged as vector work after the kernel.
    if (dropout_draws > 0) vector(cat(name, ".dropout_rng"), 0, dropout_draws * part * kDropoutRngOpsPerElement);
    return id;
  };
  if (cp_ == 1 || t_.cp_comm == CpComm::p2p) {
    // Transformer Engine's ring (AttnFuncWithCPAndKVP2P, context_parallel.py at TE d0067d0): ring step j, which
    // brings chunk j's K/V, is posted at the start of step j-1, as soon as step j-1's K/V arrived, and runs
    // beside chunk j-1; in the backward it also carries the dK/dV summed through chunk j-2, so it waits for that
    // step's end (its kernel and the sums after it). A chunk waits only for the K/V it reads.
    // Merging the steps is element-wise work of its own: the forward rescales and adds each step's partial output
    // into the result (flash_attn_fwd_out_correction, after the ring; a bf16 read of the step's output and a
    // read and write of the sum, on half the rows for the steps beyond this rank's own under the causal split),
    // and the backward adds each step's dQ into the sum and, from the second step, its dK and dV into the
    // received ones (dq.add_, dk.add_, dv.add_). Per step: 3 x the step's dQ (or output) bytes, 3 x the K/V
    // bytes. Steps 0..r are whole for rank r and the rest half: (3 cp + 1) / 4 whole steps on the average rank.
    const double whole_steps = cp_ > 1 ? (3.0 * cp_ + 1) / 4 : 1.0;
    const double q_bytes = std::max(0.0, qkv_bytes - kv_bytes);
    const OpId before = last();
    std::vector<OpId> step_ends;
    OpId ring = kNoOp;
    for (int j = 0; j < cp_; ++j) {
      if (j > 0) {
        SmallVec<OpId, 3> deps{j == 1 ? before : ring};
        if (backward && j >= 2) deps.push_back(step_ends[static_cast<std::size_t>(j - 2)]);
        ring = collective(fmt::format("attn.cp_ring{}", j), CollectiveOp::send_recv, CommGroup::cp,
                          backward ? 2 * kv_bytes : kv_bytes, std::move(deps));
        pending_deps_.push_back(ring);
      }
      // Each chunk streams one rank's s_ keys (load-balanced causal split).
      OpId end = kernel(cp_ > 1 ? fmt::format("{}.chunk{}", n, j) : n, 1.0 / cp_, j > 0 ? kv_bytes : 0, s_);
      if (backward && cp_ > 1 && j > 0)
        end = vector(fmt::format("{}.chunk{}.grad_sum", n, j),
                     3 * q_bytes * whole_steps / cp_ + 3 * kv_bytes, (q_bytes * whole_steps / cp_ + kv_bytes) / 2);
      step_ends.push_back(end);
    }
    if (!backward && cp_ > 1)
      vector(cat(n, ".out_correction"), 3 * out_bytes * whole_steps, out_bytes * whole_steps);  // a mul, an add
    return;
  }
  if (t_.cp_comm == CpComm::all_gather) {
    const double gathered = kv_bytes * cp_;
    inline_collective("attn.cp_kv_all_gather", CollectiveOp::all_gather, CommGroup::cp, gathered);
    const TensorId kv = temp(backward ? "attn.cp_kv.bwd" : "attn.cp_kv", gathered);
    g_.ops[last()].allocs.push_back(kv);
    const OpId k = kernel(n, 1.0, gathered, s_ * cp_);
    g_.ops[k].frees.push_back(kv);
    if (backward) {
      // dK, dV of all cp ranks' keys, written by the kernel, until they are reduce-scattered.
      const TensorId dkv = temp("attn.cp_dkv", gathered);
      g_.ops[k].allocs.push_back(dkv);
      inline_collective("attn.cp_dkv_reduce_scatter", CollectiveOp::reduce_scatter, CommGroup::cp, gathered);
      g_.ops[last()].frees.push_back(dkv);
    }
    return;
  }
  // a2a (Ulysses): the full sequence for heads/cp heads.
  inline_collective(backward ? "attn.cp_a2a_dout" : "attn.cp_a2a_qkv", CollectiveOp::all_to_all, CommGroup::cp,
                    backward ? out_bytes : qkv_bytes);
  kernel(n, 1.0, 0, s_ * cp_);
  inline_collective(backward ? "attn.cp_a2a_dqkv" : "attn.cp_a2a_out", CollectiveOp::all_to_all, CommGroup::cp,
                    backward ? qkv_bytes : out_bytes);
}

}  // namespace racksim::workloads::training_graph
