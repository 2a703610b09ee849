// A pipeline chunk's forward and backward: the layers in order with their recompute, the embedding, the output head
// and loss, and multi-token prediction's inputs.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

void Builder::forward_chunk(int v) {
  begin_chunk(Phase::forward, v);
  const double a = pr_.activation_bytes;
  TensorId x;
  const bool fsdp = fsdp_per_use();
  std::size_t schedule_op = g_.ops.size();  // the chunk's first op after its input arrived (charge_chunk_host_work)
  if (v == 0) {
    wait_for_params(kEmbeddingBucket);
    fsdp_regather(kEmbeddingBucket);
    const bool has_buf = fsdp;  // (not std::optional: GCC 12 warns maybe-uninitialized on it)
    const TensorId buf = fsdp ? fsdp_gather_params(embedding_weights()) : TensorId{0};
    OpId emb = 0;
    x = embedding_forward("embedding", "embedding.out", emb);
    if (has_buf) g_.ops[emb].frees.push_back(buf);
  } else {
    // The activation arrives from the previous stage.
    pending_cross_ = ChunkKey{true, mb_, v - 1};
    x = temp("pp.recv", Tsp_ * h_ * a);
    const OpId recv = vector("pp.recv_copy", 2 * Tsp_ * h_ * a, 0);
    g_.ops[recv].allocs.push_back(x);
    if (p2p_host_sync()) cross_host_waits_.emplace_back(recv + 1, ChunkKey{true, mb_, v - 1});  // the chunk's next op
    schedule_op = recv + 1;
  }
  const bool stacked = jax_ && t_.scan_layers;
  std::vector<double> residual_bytes;  // per layer of the chunk, only when stacked
  if (stacked) {
    // lax.scan writes each residual into a buffer stacked over the layers, which XLA
    // zero-initializes before the loop (one write of every stacked buffer).
    for (int l = first_layer(v); l < end_layer(v); ++l) residual_bytes.push_back(saved_residual_bytes(l));
    const double per_chunk = std::accumulate(residual_bytes.begin(), residual_bytes.end(), 0.0);
    if (per_chunk > 0) vector("scan.stack_init", per_chunk, 0);
    // The score dot's mask operands (attn_scores.qk, attention.cpp), broadcast once before the loop (m1_full:
    // loop_broadcast_fusion, pred, and loop_broadcast_fusion.2, fp32, [B, heads, S, S]).
    // (MLA's scores are [B, heads, S, S] as well: the same operands.)
    // Two fills of [B, heads, S, S] indices each, which XLA's loop emitter covers index by index (a pred fill takes
    // as long as an f32 one on the H200: docs/decisions.md, "XLA's loop fusions write at most so many indices a
    // second"); two kernels, since each is bound on its own (the fp32 one by HBM on a slower part).
    if (materialized_ && !te_softmax_) {  // (Transformer Engine's softmax masks inside its kernel)
      const double scores = b_ * hl_ * s_ * s_;
      g_.ops[vector("attn_scores.mask_init.pred", scores, 0)].loop_indices = static_cast<float>(scores);
      g_.ops[vector("attn_scores.mask_init.fp32", 4 * scores, 0)].loop_indices = static_cast<float>(scores);
    }
  }
  TensorId decoder_out = 0;           // under MTP: the decoder's output, for the main head
  std::vector<TensorId> mtp_outputs;  // each MTP layer's output, for its head
  TensorId head_buf = 0;  // FSDP: the gathered output layer (and MTP modules and embeddings)
  auto gather_head = [&] {
    wait_for_params(kHeadBucket);
    fsdp_regather(kHeadBucket);
    if (fsdp)
      head_buf = fsdp_gather_params(head_gather_weights(), 0, GatherAfter::previous_layer_start, pr_.head_gather_bytes);
  };
  for (int l = first_layer(v); l < end_layer(v); ++l) {
    if (is_mtp_layer(l)) {
      if (l == m_.layers) {
        decoder_out = x;
        prefix_micro_vstage(v);
        gather_head();  // the depths embed with the shared table and project with eh_proj
      }
      if (ep_interleave_) ep_ctx_ = EpCtx{l, EpStep::attention};  // before the depth's layer, in its pre_dispatch
      mtp_input(l, x);
      ep_ctx_ = EpCtx{};
    }
    layer_forward(l, x);
    if (is_mtp_layer(l)) mtp_outputs.push_back(x);
    // ... and copies each iteration's residuals into their slice (dynamic-update-slice: read and
    // write), as the compiled reference steps do (shared/reference/hlo/m1_none: fusion-start /
    // loop_dynamic_update_slice_fusion in the forward loop).
    // The bf16 weights' stack (no policy) is written from the fp32 weights: that fusion reads the fp32 slice
    // and converts (m1_none: fused_dynamic_update_slice.33-.37 take f32 operands), 4 B read, 2 B written.
    // Each is an in-place update whose threads cover its slice's elements: at 2 bytes read and 2 written per
    // element, the index rate bounds it, not HBM (docs/decisions.md, "XLA's loop fusions write at most so many
    // indices a second"); the residuals counted in the activation dtype.
    if (stacked)
      if (const double r = residual_bytes[l - first_layer(v)]; r > 0) {
        const double weights = stacks_cast_weights() ? cast_weight_count(l) : 0.0;
        const OpId copy = vector("scan.stack_copy", 2 * r + weights * (4 - a), 0);  // prefix_: mbN.Ll.
        g_.ops[copy].loop_indices = static_cast<float>(r / a + weights);
      }
  }
  prefix_micro_vstage(v);
  if (ep_interleave_) ep_ctx_ = EpCtx{kEpPost};
  if (v == vstages_ - 1) {
    if (mtp_ == 0) gather_head();  // (under MTP, before the first depth: above)
    // Megatron-Core's GPT model runs the MTP losses (each depth's norm, the shared output layer and its
    // cross entropy) before the main one (gpt_model.py _postprocess).
    for (int k = 0; k < mtp_; ++k) {
      prefix_micro_layer(m_.layers + k);
      // A depth's output also feeds the next depth's input norm, whose backward frees it.
      const bool feeds_next = k + 1 < mtp_;
      mtp_logits_[{mb_, k}] = output_head("mtp.", mtp_outputs[static_cast<std::size_t>(k)], !feeds_next);
    }
    prefix_micro_vstage(v);
    // The decoder's output feeds only the head, or under MTP also the first depth's input norm.
    logits_[mb_] = output_head("", mtp_ > 0 ? decoder_out : x, mtp_ == 0);
    if (fsdp) g_.ops[last_compute()].frees.push_back(head_buf);
    // Megatron reads the micro-batch's loss on the host before it issues anything else: the NaN check
    // (pretrain_gpt.py:136-141 at f2e5db40, validate_result later) and, at f2e5db40, num_tokens.item()
    // (schedules.py:404,424).
    if (nan_checks()) pending_host_wait_ = last();
  } else {
    const OpId send = collective("pp.send_activation", CollectiveOp::send_recv, CommGroup::pp, Tsp_ * h_ * a, {last()});
    g_.ops[send].frees.push_back(x);
    sends_[ChunkKey{true, mb_, v}] = send;
    if (p2p_host_sync()) pending_host_wait_ = send;
  }
  ep_ctx_ = EpCtx{};
  charge_chunk_host_work(schedule_op, true);
}

TensorId Builder::embedding_forward(std::string_view name, std::string_view out_name, OpId& lookup) {
  const double a = pr_.activation_bytes;
  if (jax_ && t_.one_hot_embedding) {
    // MaxText's use_iota_embed: XLA writes the one-hot matrix (a loop fusion of the iota compare and the convert:
    // the token ids in, Tsp x V values of the compute dtype out), which a GEMM multiplies with the table. No
    // cuBLAS GEMM takes a fused producer, so the matrix is materialized, and it is the GEMM's saved operand for
    // the table's gradient (docs/decisions.md, "MaxText's one-hot embedding and fp32 logits").
    const TensorId one_hot = temp(cat(name, ".one_hot"), Tsp_ * V_ * a);
    g_.ops[vector(cat(name, ".one_hot"), Tsp_ * V_ * a + 4 * Tsp_, Tsp_ * V_)].allocs.push_back(one_hot);
    one_hot_[mb_] = one_hot;
    const TensorId x = temp(out_name, Tsp_ * h_ * a);
    lookup = gemm(name, Tsp_, h_, V_, 1, 0, Quant::none);
    g_.ops[lookup].allocs.push_back(x);
    return x;
  }
  if (jax_ || tp_ == 1) {
    const TensorId x = temp(out_name, Tsp_ * h_ * a);
    lookup = vector(name, 2 * Tsp_ * h_ * a, 0);
    g_.ops[lookup].allocs.push_back(x);
    return x;
  }
  const bool sp = t_.sequence_parallel;
  // The lookup's output: T x h on every tp rank (without sequence parallelism it is the output itself, reduced in
  // place).
  const TensorId full = temp(sp ? cat(name, ".lookup") : std::string_view(out_name), T_ * h_ * a);
  lookup = vector(name, 2 * T_ * h_ * a, 0);
  g_.ops[lookup].allocs.push_back(full);
  vector(cat(name, ".mask"), 2 * T_ * h_ * a + T_, T_ * h_);
  if (!sp) {
    inline_collective(cat(name, ".tp_all_reduce"), CollectiveOp::all_reduce, CommGroup::tp, T_ * h_ * a);
    return full;
  }
  const TensorId shard = temp(cat(name, ".scattered"), Tsp_ * h_ * a);
  const OpId rs = inline_collective(cat(name, ".tp_reduce_scatter"), CollectiveOp::reduce_scatter, CommGroup::tp, T_ * h_ * a);
  g_.ops[rs].allocs.push_back(shard);
  g_.ops[rs].frees.push_back(full);
  const TensorId x = temp(out_name, Tsp_ * h_ * a);
  const OpId clone = vector(cat(name, ".clone"), 2 * Tsp_ * h_ * a, 0);
  g_.ops[clone].allocs.push_back(x);
  g_.ops[clone].frees.push_back(shard);
  return x;
}

void Builder::embedding_backward(std::string_view name) {
  const double a = pr_.activation_bytes;
  if (jax_ && t_.one_hot_embedding) {
    // The table's gradient: the saved one-hot matrix transposed times the output gradient, V x h over the tokens.
    gemm_wgrad(name, Tsp_, h_, V_, Quant::none);
    const auto it = one_hot_.find(mb_);
    if (it != one_hot_.end()) {
      g_.ops[last()].frees.push_back(it->second);
      one_hot_.erase(it);
    }
    return;
  }
  if (jax_) {
    vector(cat(name, ".bwd"), Tsp_ * h_ * (a + 4), Tsp_ * h_);
    return;
  }
  if (tp_ > 1) {
    tp_collective(cat(name, ".bwd.tp_all_gather"), CollectiveOp::all_gather, T_ * h_ * a, TpOverlap::none);
    vector(cat(name, ".mask.bwd"), 2 * T_ * h_ * a + T_, T_ * h_);
  }
  embedding_weight_grad(name, tp_ > 1 ? T_ : Tsp_);
}

TensorId Builder::output_head(std::string_view pre, TensorId x, bool free_input) {
  const double a = pr_.activation_bytes;
  vector(cat(pre, "final_norm"), 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_);
  // Megatron-Core's output layer is its own ColumnParallelLinear (Megatron-LM@d98e8a64 gpt_model.py;
  // tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward): the sequence-parallel
  // input is gathered synchronously before the GEMM, with or without tp_comm_overlap (userbuffers serve
  // Transformer Engine's layers only).
  tp_collective(cat(pre, "logits.tp_all_gather"), CollectiveOp::all_gather, T_ * h_ * a, TpOverlap::none);
  const bool fused_ce = t_.cross_entropy_fusion;
  if (jax_) {
    // XLA: with its fused loss the logits GEMM writes fp32 (4 - a more) and one pass reads and rewrites them (8
    // bytes per logit); unfused, the cast, max, subtraction, exp, sum and division (a + 36). The fp32 logits live
    // until the head's backward.
    const TensorId logits = temp(cat(pre, "logits.fp32"), T_ * V_ * 4);
    if (t_.logits_fp32) {
      // MaxText's logits_dot_in_fp32: the input cast to fp32 (kept for the wgrad), the dot at TF32 writing fp32.
      const TensorId x32 = temp(cat(pre, "logits.input_fp32"), T_ * h_ * 4);
      g_.ops[vector(cat(pre, "logits.input_cast"), T_ * h_ * (a + 4), T_ * h_)].allocs.push_back(x32);
      head_input_fp32_[mb_] = x32;
      g_.ops[gemm(cat(pre, "logits"), T_, V_, h_, 1, 0, Quant::fp32)].allocs.push_back(logits);
    } else {
      g_.ops[gemm(cat(pre, "logits"), T_, V_, h_, 1, fused_ce ? T_ * V_ * (4 - a) : 0, Quant::none)].allocs.push_back(logits);
    }
    const OpId ce = vector(cat(pre, "cross_entropy"), T_ * V_ * (fused_ce ? 8 : a + 36), 6 * T_ * V_, T_ * V_);
    if (free_input) g_.ops[ce].frees.push_back(x);
    return logits;
  }
  // Megatron: the GEMM writes the activation dtype, and the loss makes an fp32 copy, which it turns into the
  // softmax the backward reads; the activation-dtype logits live until the loss is computed (gpt_model.py
  // _postprocess holds them). Over tp the vocabulary-parallel loss reduces per-token fp32 statistics over the tp
  // ranks, NCCL calls on the default stream, each waited for, with the kernels between them as the source orders
  // them (Megatron-LM@d98e8a64):
  //  - unfused (tensor_parallel/cross_entropy.py _VocabParallelCrossEntropy.forward): the cast and max (a + 8 bytes
  //    per logit), all-reduce (MAX) of each token's largest logit; the subtraction, exp and sums (20), two
  //    all-reduces (predicted_logits, sum_exp_logits); the division (8): a + 36;
  //  - fused (--cross-entropy-loss-fusion, the native implementation, fusions/fused_cross_entropy.py): three fused
  //    functions whose results are materialized around the two all-reduces (the sums concatenated into one):
  //    calculate_logits_max (read a, write the fp32 copy), calculate_predicted_logits (the in-place subtraction and
  //    exp, and the sums: read and write 4), calculate_cross_entropy_loss (the in-place division: read and write 4):
  //    a + 20.
  //  T fp32 values per all-reduce (2T concatenated).
  const TensorId logits = temp(cat(pre, "logits"), T_ * V_ * a);
  g_.ops[gemm(cat(pre, "logits"), T_, V_, h_, 1, 0, Quant::none)].allocs.push_back(logits);
  const TensorId probs = temp(cat(pre, "logits.fp32"), T_ * V_ * 4);
  auto ce_all_reduce = [&](std::string_view what, double values) {
    tp_collective(cat(pre, what), CollectiveOp::all_reduce, values * 4, TpOverlap::none);
  };
  const bool reduces = tp_ > 1;
  OpId first = 0, ce = 0;
  if (fused_ce) {
    first = vector(cat(pre, "cross_entropy.max"), T_ * V_ * (a + 4), T_ * V_);
    if (reduces) ce_all_reduce("cross_entropy.max.tp_all_reduce", T_);
    vector(cat(pre, "cross_entropy"), T_ * V_ * 8, 3 * T_ * V_, T_ * V_);
    if (reduces) ce_all_reduce("cross_entropy.predicted_sum_exp.tp_all_reduce", 2 * T_);
    ce = vector(cat(pre, "cross_entropy.normalize"), T_ * V_ * 8, T_ * V_);
  } else if (reduces) {
    first = vector(cat(pre, "cross_entropy.max"), T_ * V_ * (a + 8), 2 * T_ * V_);
    ce_all_reduce("cross_entropy.max.tp_all_reduce", T_);
    vector(cat(pre, "cross_entropy"), T_ * V_ * 20, 3 * T_ * V_, T_ * V_);
    ce_all_reduce("cross_entropy.predicted.tp_all_reduce", T_);
    ce_all_reduce("cross_entropy.sum_exp.tp_all_reduce", T_);
    ce = vector(cat(pre, "cross_entropy.normalize"), T_ * V_ * 8, T_ * V_);
  } else {
    first = ce = vector(cat(pre, "cross_entropy"), T_ * V_ * (a + 36), 6 * T_ * V_, T_ * V_);
  }
  g_.ops[first].allocs.push_back(probs);
  g_.ops[ce].frees.push_back(logits);
  if (free_input) g_.ops[ce].frees.push_back(x);
  return probs;
}

OpId Builder::output_head_backward(std::string_view pre, TensorId logits) {
  const double a = pr_.activation_bytes;
  if (jax_) {
    // XLA's loss backward (the same in every compiled H200 step, e.g. s1_none_unrolled, g1_dots, m1_none,
    // g1_none_cudnn): a per-token pass that gathers each target logit (loop_add_subtract_fusion: its row
    // statistics, targets and the one gathered logit in, two fp32 values out per token; 2.4 us measured for 8,192
    // tokens, where reading the whole logits would take 138 us: docs/decisions.md, "An operand sliced through a
    // fused element-wise op is read only where sliced"), then two passes over the logits: the fp32 gradient
    // (loop_multiply_fusion: read a, write 4) and its cast to bf16 for the logits GEMMs (wrapped_convert.1: read
    // 4, write a).
    vector(cat(pre, "cross_entropy.bwd.rows"), T_ * (a + 24), 10 * T_);
    vector(cat(pre, "cross_entropy.bwd"), T_ * V_ * (a + 4), 4 * T_ * V_);
    if (t_.logits_fp32) {
      // logits_dot_in_fp32: the fp32 gradient feeds both GEMMs at TF32 (no cast); the fp32 input gradient is cast
      // back to the compute dtype, and the wgrad reads the fp32 input the forward kept.
      gemm_dgrad(cat(pre, "logits"), T_, V_, h_, Quant::fp32);
      vector(cat(pre, "logits.dgrad.cast"), T_ * h_ * (4 + a), T_ * h_);
      tp_collective(cat(pre, "logits.dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, T_ * h_ * a, TpOverlap::none);
      gemm_wgrad(cat(pre, "logits"), T_, V_, h_, Quant::fp32);
      g_.ops[last()].frees.push_back(logits);
      const auto it = head_input_fp32_.find(mb_);
      if (it != head_input_fp32_.end()) {
        g_.ops[last()].frees.push_back(it->second);
        head_input_fp32_.erase(it);
      }
      return vector(cat(pre, "final_norm.bwd"), 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
    }
    vector(cat(pre, "cross_entropy.bwd.cast"), T_ * V_ * (4 + a), T_ * V_);
    gemm_dgrad(cat(pre, "logits"), T_, V_, h_, Quant::none);
    tp_collective(cat(pre, "logits.dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, T_ * h_ * a, TpOverlap::none);
    gemm_wgrad(cat(pre, "logits"), T_, V_, h_, Quant::none);
    g_.ops[last()].frees.push_back(logits);
    return vector(cat(pre, "final_norm.bwd"), 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
  }
  // Megatron's loss backward turns the saved fp32 softmax (`logits`) into the activation-dtype gradient of the
  // logits, which the output layer's GEMMs read. Unfused: the softmax scaled in place (read and write 4), then cast
  // (read 4, write a). Fused (calculate_gradients, one fused function): the softmax read, scaled in place and
  // written back (an input it mutates), the gradient written: 8 + a.
  const TensorId grad = temp(cat(pre, "logits.grad"), T_ * V_ * a);
  const OpId bwd = vector(cat(pre, "cross_entropy.bwd"), T_ * V_ * (t_.cross_entropy_fusion ? 8 + a : 12 + a), 4 * T_ * V_);
  g_.ops[bwd].allocs.push_back(grad);
  g_.ops[bwd].frees.push_back(logits);
  // The output layer's backward (LinearWithGradAccumulationAndAsyncCommunication.backward): the forward kept the
  // input's sequence shard, so the input is gathered again for the wgrad, asynchronously beside the dgrad GEMM; the
  // dgrad's reduce-scatter (all-reduce without sequence parallelism) runs asynchronously beside the wgrad GEMM.
  column_parallel_backward(cat(pre, "logits"), T_, V_, h_, T_ * h_ * a, TpOverlap::async, /*quantized=*/false);
  g_.ops[last()].frees.push_back(grad);
  return vector(cat(pre, "final_norm.bwd"), 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
}

void Builder::mtp_input(int l, TensorId& x) {
  const double a = pr_.activation_bytes;
  const int k = l - m_.layers;
  prefix_micro_layer(l);
  OpId lookup = 0;
  const TensorId emb = embedding_forward("mtp.embedding", "mtp.embedding", lookup);
  vector("mtp.enorm", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_);
  vector("mtp.hnorm", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_);
  const TensorId cat_in = temp("mtp.concat", 2 * Tsp_ * h_ * a);
  g_.ops[vector("mtp.concat", 4 * Tsp_ * h_ * a, 0)].allocs.push_back(cat_in);
  tp_collective("mtp.eh_proj.tp_all_gather", CollectiveOp::all_gather, 2 * T_ * h_ * a, TpOverlap::none);
  gemm_fwd("mtp.eh_proj", T_, h_ / tp_, 2 * h_);
  // gather_from_tensor_model_parallel_region: an all-gather of the hidden dimension, with or without sequence
  // parallelism (its backward is a split, no exchange).
  if (tp_ > 1) inline_collective("mtp.eh_proj.out_all_gather", CollectiveOp::all_gather, CommGroup::tp, T_ * h_ * a);
  const TensorId out = temp("mtp.eh_proj.out", Tsp_ * h_ * a);
  g_.ops[last()].allocs.push_back(out);
  mtp_saved_[{mb_, k}] = {emb, cat_in, x};
  x = out;
}

void Builder::mtp_input_backward(int l) {
  const double a = pr_.activation_bytes;
  const int k = l - m_.layers;
  prefix_micro_layer(l);
  const auto it = mtp_saved_.find({mb_, k});
  const auto [emb, cat_in, hidden_in] = it->second;
  mtp_saved_.erase(it);
  // The sequence-parallel scatter's backward gathers the tokens. eh_proj is a TEColumnParallelLinear without a
  // userbuffer, so its backward is TE's without userbuffers (linear.py): the input gathered again for the wgrad,
  // asynchronously beside the dgrad GEMM, and the input gradient reduce-scattered (all-reduced without sequence
  // parallelism) asynchronously beside the wgrad GEMM, under tp_comm_overlap too.
  tp_collective("mtp.eh_proj.out_scatter.bwd", CollectiveOp::all_gather, T_ * h_ * a, TpOverlap::none);
  column_parallel_backward("mtp.eh_proj", T_, h_ / tp_, 2 * h_, 2 * T_ * h_ * a, TpOverlap::async);
  g_.ops[last()].frees.push_back(cat_in);
  vector("mtp.concat.bwd", 4 * Tsp_ * h_ * a, 0);
  vector("mtp.hnorm.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
  g_.ops[last()].frees.push_back(hidden_in);
  vector("mtp.enorm.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
  g_.ops[last()].frees.push_back(emb);
  embedding_backward("mtp.embedding");
}

void Builder::layer_forward_ops(int l, TensorId& layer_input) {
  prefix_micro_layer(l);
  auto& st = layer_state_[{mb_, l}];
  st.input = layer_input;  // every policy keeps the layer input
  wait_for_params(l);
  fsdp_regather(l);
  std::vector<TensorId> fsdp_bufs;
  if (fsdp_per_use()) fsdp_bufs.push_back(fsdp_layer_params(l, l + 1));
  std::vector<TensorId> transient;
  TensorId out = layer_input;
  const bool moe_layer = m_.is_moe_layer(l);
  // Scanned, XLA casts each of the layer's fp32 weights to bf16 inside the forward loop body: one convert
  // fusion per weight per iteration (read 4 B, write 2 B), under every policy (calibration/data/
  // h200-2026-11-29: m1_none and s1_none_scan loop_convert_fusion.3-.7, m1_full .7-.11, m1_dots .5-.9, five per
  // layer). Without a policy the bf16 copy is also a residual of the loop (saved_residual_bytes); with one it is
  // transient and the backward recasts (weights.cast).
  std::optional<TensorId> forward_cast;
  if (scanned_forward_weight_cast()) {
    const double w = cast_weight_count(l);
    vector("weights.cast", w * (4 + pr_.activation_bytes), w);
    forward_cast = temp("weights.cast.forward", w * pr_.activation_bytes);
    g_.ops[last()].allocs.push_back(*forward_cast);
    // Stacked (no policy), the loop's bf16 stack of the weights holds a second copy until the layer's backward
    // ends, like a residual (freed with the kept tensors no backward step claims); scan.stack_copy writes it.
    if (stacks_cast_weights()) {
      const TensorId stacked = temp(kStackedWeights, w * pr_.activation_bytes);
      g_.ops[last()].allocs.push_back(stacked);
      st.kept.set(kStackedWeights, stacked);
    }
  }
  // Unrolled over stacked weights under a remat policy, the checkpointed layer's inputs are residuals of its
  // backward, its fp32 weights among them: XLA slices each weight array of the layer out of its [L, ...] stack
  // into a buffer of its own in the forward (a loop fusion per array: read 4 B, write 4 B per weight) and keeps
  // it until the layer's backward has cast it again (l7b16_b2_mflash: wrapped_slice.2-.6 into remat2's operands,
  // 808 MB a layer; calibration/data/h200-2026-12-04-llama7b; under fp8 a transposed copy of the same bytes, read
  // last by the recompute's quantizations, l3_8b_l8_b4_fp8). Per-layer arrays (MaxText unscanned) and a step
  // without a policy (the slice fused into the forward's cast) have no such copy. Expert weights are sliced with
  // the rest (cast_weight_count); no MoE program was read to confirm it.
  if (slices_stacked_layer_weights()) {
    const double w = cast_weight_count(l);
    vector(kSlicedWeights, w * 8, 0);
    const TensorId sliced = temp(kSlicedWeights, w * 4);
    g_.ops[last()].allocs.push_back(sliced);
    st.kept.set(kSlicedWeights, sliced);
  }
  const Step* pending_offload = nullptr;  // Megatron: an activation offloaded once its reader has run,
  TensorId pending_tensor = 0;            // its tensor,
  OpId pending_from = kNoOp;              // and the op that produced it
  for (const auto& step : layer_steps(l)) {
    scores_saved_ = step.saved;
    run_step(l, step.name, moe_layer, step.forward);
    scores_saved_ = false;
    const OpId producer = last();
    // (A step with no kernels of its own, as the experts' activation outside a recompute, reads nothing yet.)
    if (pending_offload && producer != pending_from) {
      offload_to_host(st, *pending_offload, pending_tensor, producer);
      pending_offload = nullptr;
    }
    // Scanned, a residual's extra XLA buffers (jax_residual_sizes) are not written by the step's fusion: a
    // saved one is computed by the dynamic-update-slice fusion that writes it into its stack (scan.stack_copy
    // counts that read and write; m1_none and s1_none_scan: loop_dynamic_update_slice_fusion.32/.28/.23/.19
    // write the fp32 residual stream and normalized inputs from bf16 operands, .17/.13/.16 the SwiGLU's
    // intermediates from the gate), and an unsaved one is not written at all (m1_full, m1_dots,
    // d4096_l8_dots: the forward's norm fusions write bf16 only, the softmax fusion.169/.168 reads the fp32
    // scores and writes the bf16 probabilities, 6 B per score, the SwiGLU product loop_multiply_fusion 3 x
    // T F bf16). The backward still reads the saved ones back.
    if (!scanned_loop()) g_.ops[last_compute()].hbm_bytes += step.extra_io_bytes;
    const TensorId t = temp(step.name, step.held_bytes());
    g_.ops[producer].allocs.push_back(t);
    out = t;
    if (step.saved || (step.offloaded && megatron_keeps_last_group(l, step.name))) {
      st.kept.set(step.name, t);
    } else if (step.offloaded && !(jax_ && step.name == "mlp_out")) {
      // (XLA never offloads the layer output: it is the loop carry, the next layer's input.)
      // XLA: the D2H copy as soon as the producer finishes. Megatron: when the module that reads it as its input has
      // run its forward (the group's commit: on_group_commit_forward), the next step here; the experts' activation
      // reads fc1's output inside the experts' own step. The HBM copy is freed when the copy is done.
      if (!megatron_offload() || step.name == "expert_out") offload_to_host(st, step, t, producer);
      else pending_offload = &step, pending_tensor = t, pending_from = producer;
    } else if (step.name != "mlp_out") {
      transient.push_back(t);
    }
  }
  if (pending_offload) offload_to_host(st, *pending_offload, pending_tensor, last());
  // Intermediate tensors the policy does not keep die with the layer's last kernel.
  auto& closing = g_.ops[last_compute()];
  for (TensorId t : transient) closing.frees.push_back(t);
  for (TensorId t : fsdp_bufs) closing.frees.push_back(t);
  if (forward_cast) closing.frees.push_back(*forward_cast);
  layer_input = out;
}

void Builder::backward_chunk(int v) {
  begin_chunk(Phase::backward, v);
  const double a = pr_.activation_bytes;
  if (combining() && last_micro_for_sync()) plan_grad_combines(v);
  // Without donation XLA places the gradients, which die when the optimizer writes its
  // outputs, inside those outputs' (already allocated) buffers: no memory of their own (seen
  // in the buffer assignment of the replayed HLO, docs/decisions.md).
  if (jax_ && t_.donate_state && !jax_grads_allocated_) {
    // JAX materializes the gradients with the first backward.
    pending_alloc_.push_back(jax_grads_);
    jax_grads_allocated_ = true;
  }
  const bool fsdp = fsdp_per_use();
  std::size_t schedule_op = g_.ops.size();  // the chunk's first op after its gradient arrived
  TensorId head_buf = 0;  // FSDP: the gathered output layer (and MTP modules)
  auto head_first = static_cast<OpId>(g_.ops.size());  // the output layer's first backward op
  // The output layer's (and MTP modules', shared embedding's) gradients are complete: release the gathered
  // weights and sync them. Under MTP that is after the first depth's input backward (eh_proj, the embedding).
  auto release_head = [&] {
    if (fsdp) g_.ops.back().frees.push_back(head_buf);
    fsdp_reshard(kHeadBucket);  // FSDP's reshard after backward
    if (last_micro_for_sync()) {
      hold_unsharded_grads(head_weights(), head_first);
      grad_sync("grad.head", head_weights(), 0, false, pr_.head_grad_reduce_bytes);
    }
  };
  if (v == vstages_ - 1) {
    if (fsdp) head_buf = fsdp_gather_params(head_weights(), 0, GatherAfter::previous_layer_start, pr_.head_gather_bytes);
    fsdp_regather(kHeadBucket);
    head_first = static_cast<OpId>(g_.ops.size());
    // JAX's gradient buffers come with the layers' backward loop, after the logits are gone.
    attach_pending_allocs(output_head_backward("", logits_[mb_]));
    // Every MTP loss's backward before any depth's layer: Megatron-Core splits the depths' hidden states out of
    // one tensor for their losses (process_mtp_loss), so autograd reaches the layers only when all are done; a
    // depth's output is then last read by the next depth's hnorm backward.
    for (int k = mtp_ - 1; k >= 0; --k) {
      prefix_micro_layer(m_.layers + k);
      const auto lg = mtp_logits_.find({mb_, k});
      output_head_backward("mtp.", lg->second);
      mtp_logits_.erase(lg);
    }
    prefix_micro_vstage(v);
    if (mtp_ == 0) release_head();
  } else {
    pending_cross_ = ChunkKey{false, mb_, v + 1};
    const OpId recv = vector("pp.recv_grad_copy", 2 * Tsp_ * h_ * a, 0);
    attach_pending_allocs(recv);
    if (p2p_host_sync()) cross_host_waits_.emplace_back(recv + 1, ChunkKey{false, mb_, v + 1});
    schedule_op = recv + 1;
  }
  if (megatron_offload()) megatron_reload_chunk_start(end_layer(v) - 1);
  for (int l = end_layer(v) - 1; l >= first_layer(v); --l) {
    if (!megatron_offload()) {
      prefetch_offloaded(l);
      if (l - 1 >= first_layer(v)) prefetch_offloaded(l - 1);
    }
    const auto layer_first_op = static_cast<OpId>(g_.ops.size());
    layer_backward(l);
    hold_unsharded_grads(layer_weights(l), layer_first_op);
    if (is_mtp_layer(l)) {
      mtp_input_backward(l);
      if (l == m_.layers) release_head();
    }
    if (last_micro_for_sync()) {
      if (gathers_before_grads() || regathers_before_grads()) deferred_sync_ = DeferredSync{prefix_, l};
      else grad_sync("grad", dense_weights(l), expert_weights(l), true);
    }
  }
  flush_deferred_sync();
  carried_grads_.clear();  // the last iteration's pipelined collectives, peeled after the loop
  prefix_micro_vstage(v);
  phase_ = Phase::backward;
  if (ep_interleave_) ep_ctx_ = EpCtx{kEpPost};
  if (v == 0) {
    const bool has_buf = fsdp;  // (not std::optional: GCC 12 warns maybe-uninitialized on it)
    const TensorId buf = fsdp ? fsdp_gather_params(embedding_weights()) : TensorId{0};
    fsdp_regather(kEmbeddingBucket);
    const auto embedding_first = static_cast<OpId>(g_.ops.size());
    embedding_backward("embedding");
    if (has_buf) g_.ops.back().frees.push_back(buf);
    fsdp_reshard(kEmbeddingBucket);  // FSDP's reshard after backward
    if (last_micro_for_sync()) {
      hold_unsharded_grads(embedding_weights(), embedding_first);
      grad_sync("grad.embedding", embedding_weights(), 0, false, pr_.embedding_grad_reduce_bytes);
    }
    if (bucket_nan_checks() && last_micro_for_sync()) nan_check_bucket("grad.last_bucket", 0, true);
  } else {
    if (bucket_nan_checks() && last_micro_for_sync()) nan_check_bucket("grad.last_bucket", 0, true);
    const OpId send = collective("pp.send_grad", CollectiveOp::send_recv, CommGroup::pp, Tsp_ * h_ * a, {last()});
    sends_[ChunkKey{false, mb_, v}] = send;
    if (p2p_host_sync()) pending_host_wait_ = send;
  }
  if (combining()) flush_grad_combines();
  ep_ctx_ = EpCtx{};
  charge_chunk_host_work(schedule_op, false);
}

void Builder::layer_backward_ops(int l) {
  prefix_micro_layer(l);
  fsdp_regather(l);  // another micro-batch's backward may have resharded them
  auto& st = layer_state_[{mb_, l}];
  const auto& steps = layer_steps(l);
  const SavePlan& plan = layer_plan(l);
  std::vector<TensorId> to_free;  // freed when the layer's backward ends
  StepMap<TensorId> by_step = st.kept;  // freed once their step's backward ran
  // An unrolled layer's fp32 weight slices (slices_stacked_layer_weights) die with the op just emitted, their last
  // reader.
  const auto free_sliced_weights = [&] {
    if (const TensorId* sliced = by_step.find(kSlicedWeights)) {
      g_.ops[last()].frees.push_back(*sliced);
      by_step.erase(kSlicedWeights);
    }
  };
  if (fsdp_per_use()) to_free.push_back(fsdp_layer_params(l, l - 1));
  flush_deferred_sync();
  for (const auto& f : st.fetched) {
    if (!megatron_offload()) pending_deps_.push_back(f.copy);  // offloaded activations must be back first
    by_step.set(f.step, f.tensor);
  }
  bwd_layer_ = l;
  bwd_by_step_ = &by_step;
  // Recompute what the policy did not keep: its forward ops again, in the backward pass. The
  // layer output is not needed by the backward, and XLA drops its unused projection. Megatron's
  // checkpoints (tensor_parallel.checkpoint, and TE's checkpoint under fp8, both reentrant) re-execute
  // the whole checkpointed function in the backward, its last part included: under full recompute
  // the layer's output projection (fc2), its TP reduce-scatter and the residual add
  // (transformer_block.py _checkpointed_forward, random.py CheckpointFunction.backward); under a
  // checkpoint of the whole MoE layer (--recompute-modules moe, the only other setting that re-runs
  // a dispatch) the combine (all-to-all, unpermutation, shared experts).
  phase_ = Phase::recompute;
  const bool moe_layer = m_.is_moe_layer(l);
  const bool recompute_combine =
      moe_layer && !jax_ &&
      std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.name == "dispatch" && !s.saved && !s.offloaded; });
  const bool recompute_output =
      recompute_combine || (!jax_ && t_.recompute.mode == RecomputeMode::full && layer_recomputed(l));
  // Megatron's selective recompute checkpoints the core attention (--recompute-modules core_attn, the
  // default list): its backward re-runs the attention kernel, flash or not, though the attention output
  // stays saved as the output projection's input (attention.py checkpoint_core_attention,
  // _checkpointed_attention_forward). The replayed output lives until the attention's backward.
  const bool replay_core_attention = !jax_ && t_.recompute.mode == RecomputeMode::selective;
  std::optional<TensorId> replayed_attention;
  // XLA under a remat policy casts the layer's fp32 weights to bf16 again in the backward: a cast is not
  // a dot, so no policy keeps it, and the backward's GEMMs need the bf16 copy (one convert fusion per weight
  // in the recompute of every compiled H200 step with a policy, offloading ones included: m1_dots, m1_full,
  // m1_off and d4096_l8_dots scanned, l7b16_b4_mflash unrolled, 5 per layer; calibration/data/
  // h200-2026-12-04-llama7b). Read 4 B, write 2 B per weight. Under FSDP XLA casts the rank's fp32 shard and
  // gathers bf16 (the two-GPU x2_fsdp_m1_dots HLO: half of m1_dots's recompute converts, bf16 all-gathers), so
  // the cast covers the shard. Scanned, the copy is a buffer of its own until the layer's backward ends;
  // unrolled, jax_residual_sizes already counts a bf16 copy of the layer's weights in norm1's output, which
  // the policy recomputes. (Under fp8-class training the GEMM's own quantize of the weight is emitted where it
  // runs.)
  std::optional<TensorId> recast_weights;
  if (jax_ && !fp8_class() && t_.recompute.mode != RecomputeMode::none) {
    const double w = cast_weight_count(l);
    vector("weights.cast", w * (4 + pr_.activation_bytes), w);
    if (t_.scan_layers) {
      recast_weights = temp("weights.cast.bf16", w * pr_.activation_bytes);
      g_.ops[last()].allocs.push_back(*recast_weights);
    }
    free_sliced_weights();  // the cast was the fp32 slice's last reader
  }
  const Step* before_step = nullptr;  // the step whose output this one reads
  bool recomputed_any = false;
  for (const auto& step : steps) {
    const Step* input_step = std::exchange(before_step, &step);
    const bool replay = step.name == "attn" && replay_core_attention && step.saved;
    if (!replay && (step.saved || step.offloaded || (step.name == "mlp_out" && !recompute_output))) continue;
    if (!jax_ && step.name == "expert_act" && moe_act_recomputed(l)) continue;  // (inside the experts' backward)
    // (Megatron: a recomputed module reads its offloaded input once reloaded. The MoE activation's input is the
    // experts' step's own, waited for inside that step.)
    if (step.name == "expert_out") offload_wait("dispatch");  // (fc1's input: the dispatched tokens)
    else if (input_step && input_step->offloaded && step.name != "expert_act") offload_wait(input_step->name);
    // (XLA recomputes the SwiGLU product inside the backward's fusion here: no kernel, no buffer of its own.)
    if (step.name == "mlp_act" && xla_swiglu_product_in_backward(l)) continue;
    run_step(l, step.name, moe_layer, step.forward);
    const TensorId t = temp(step.name + ".recomputed", step.held_bytes());
    g_.ops[last()].allocs.push_back(t);
    if (replay) replayed_attention = t;
    else by_step.set(step.name, t);
    recomputed_any = true;
  }
  // Under fp8-class training the slice's last readers are the recompute's weight quantizations (l3_8b_l8_b4_fp8: the
  // kept fp32 weights, there transposed copies, last read by input_convert_reduce_fusions before the recomputed
  // attention): it dies with the recompute, not at the layer backward's end.
  if (recomputed_any && fp8_class()) free_sliced_weights();
  // Under lax.scan the backward reads its residuals out of the stacked buffers: element-wise
  // fusions read a slice in place, but XLA copies out (dynamic-slice: read and write) the bf16
  // ones that feed GEMMs -- Q, K, V, the attention output, the bf16 probabilities, the
  // normalized inputs and the SwiGLU product (shared/reference/hlo/m1_none: fusion-start
  // dynamic slices in the backward loop). Only without a remat policy: under one (save_dots, a list of names,
  // full, offload) the compiled steps' backward loops have no such slices (every scanned H200 program with a policy,
  // one and two GPUs: the only dynamic-slice fusion-starts are the forward's slices of the norms' gains; m1_none has
  // 17, s1_none_scan 15), as the backward's fusions read the policy's saved residuals in place out of their stacks.
  if (jax_ && t_.scan_layers && t_.recompute.mode == RecomputeMode::none) {
    const double a = pr_.activation_bytes;
    double copy = 0;
    for (const auto& [name, bytes] : std::initializer_list<std::pair<const char*, double>>{
             {"qkv", T_ * (hl_ * qk_dim_ + kvl_ * qk_dim_ + kvl_ * v_dim_) * a},
             {"attn", T_ * hl_ * v_dim_ * a},
             {"attn_scores", materialized_ ? b_ * hl_ * s_ * s_ * a : 0.0},
             {"norm1", Tsp_ * h_ * a},
             {"norm2", Tsp_ * h_ * a},
             {"mlp_act", T_ * f_ * a}})
      if (plan.saves(name) &&
          std::any_of(steps.begin(), steps.end(), [&](const Step& st) { return st.name == name; }))
        copy += bytes;  // (an MoE layer has no dense SwiGLU product)
    // ... and the layer's bf16 weights the forward stacked (no policy): m1_none's backward loop slices the
    // five out (fusion-start.15/.16/.17/.22/.29, bf16[1,...] dynamic slices).
    if (stacks_cast_weights()) copy += cast_weight_count(l) * a;
    if (copy > 0) {
      phase_ = Phase::backward;
      vector("scan.stack_slice", 2 * copy, 0);
    }
  }
  // Backward step by step; an activation dies as soon as the step that saved it is done
  // (autograd releases saved tensors node by node; XLA frees buffers after their last use).
  phase_ = Phase::backward;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    // Megatron's group is a module's input: the step before this one in forward order, waited for before this step's
    // backward and ended by it. (The experts' two groups, fc1's input and the activation's input, wait and end inside
    // the experts' backward.)
    const auto input = std::next(it);
    const bool input_group = input != steps.rend() && input->offloaded && input->name != "dispatch" &&
                             input->name != "expert_out";
    if (input_group) offload_wait(input->name);
    run_step(l, it->name, moe_layer, it->backward);
    if (input_group) offload_done(input->name);
    if (it->extra_read_by_backward) g_.ops[last_compute()].hbm_bytes += it->extra_io_bytes;
    if (const TensorId* f = by_step.find(it->name)) {
      g_.ops[last_compute()].frees.push_back(*f);
      by_step.erase(it->name);
    }
    if (replayed_attention && it->name == "attn") g_.ops[last_compute()].frees.push_back(*replayed_attention);
  }
  for (const auto& [name, t] : by_step.sorted()) to_free.push_back(t);
  // Scanned, the backward loop writes each layer's weight gradients into fp32 buffers stacked over the layers:
  // one dynamic-update-slice fusion per weight array that reads the wgrad GEMM's bf16 output and writes fp32
  // (every scanned compiled H200 step: loop_dynamic_update_slice_fusion x5 per layer, 6 B per weight; m1_*: 0.40 GB
  // per layer of 67.1M weights). Under FSDP, the rank's shard.
  if (jax_ && t_.scan_layers) vector("scan.grad_stack", cast_weight_count(l) * (pr_.activation_bytes + 4), 0);
  if (recast_weights) to_free.push_back(*recast_weights);
  to_free.push_back(st.input);
  auto& closing = g_.ops[last_compute()];
  for (TensorId t : to_free) closing.frees.push_back(t);
  layer_state_.erase({mb_, l});
  fsdp_reshard(l);  // FSDP's reshard after backward
  bwd_layer_ = -1;
  bwd_by_step_ = nullptr;
}

}  // namespace racksim::workloads::training_graph
