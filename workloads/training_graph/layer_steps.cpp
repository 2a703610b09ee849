// A layer's steps (the activations it names, saved, recomputed or offloaded), the MLP's ops, and what each step keeps
// for the backward.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

const std::vector<Step>& Builder::layer_steps(int l) {
  if (steps_cache_.empty()) {
    steps_cache_.resize(static_cast<std::size_t>(std::max(0, graph_layers_)));
    steps_cached_.assign(steps_cache_.size(), 0);
  }
  if (!steps_cached_[l]) {
    std::vector<Step> steps = make_layer_steps(l);
    const SavePlan& plan = layer_plan(l);
    for (Step& st : steps) {
      st.saved = plan.saves(st.name);
      st.offloaded = plan.offloads(st.name);
    }
    steps_cache_[l] = std::move(steps);
    steps_cached_[l] = 1;
  }
  return steps_cache_[l];
}

std::vector<Step> Builder::make_layer_steps(int l) {
  const double a = pr_.activation_bytes;
  std::vector<Step> steps;
  steps.push_back({"norm1", Tsp_ * h_ * a, [=, this] { vector("norm1", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_); },
                   [=, this] { vector("norm1.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_); }});
  add_attention_steps(steps);
  steps.push_back({"norm2", Tsp_ * h_ * a, [=, this] { vector("norm2", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_); },
                   [=, this] { vector("norm2.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_); }});
  if (m_.is_moe_layer(l))
    add_moe_steps(steps, l);
  else
    add_mlp_steps(steps, T_, f_, true, "");
  // XLA's intermediates (fp32 residual stream, fp32 softmax) exist wherever XLA computes the
  // step: in forward, and again when it recomputes it. Under a saving policy the saved ones are
  // exactly the named dot outputs (bf16), so those keep their own size.
  if (!jax_ && fp8_class() && t_.fp8_wgrad) te_quantized_saves(steps, l);
  if (jax_) {
    const SavePlan& plan = layer_plan(l);
    std::vector<Step*> xla;
    for (auto& st : steps)
      if (t_.recompute.mode == RecomputeMode::none || !plan.keeps(st.name))
        xla.push_back(&st);
    jax_residual_sizes(xla, l);
  }
  return steps;
}

void Builder::te_quantized_saves(std::vector<Step>& steps, int l) {
  const double a = pr_.activation_bytes;
  const double q = pr_.matmul_input_bytes + te_scale_bytes(false);  // bytes per saved value
  const bool moe = m_.is_moe_layer(l);
  // Megatron-Core asks the attention's output projection to save its bf16 input (set_save_original_input)
  // for every fp8 recipe but delayed scaling, and for fp4 (attention.py at d98e8a64, lines 428-444): the
  // flash kernel keeps that tensor anyway. Under delayed scaling the projection keeps its quantized copy
  // beside it; with an unfused attention the backward does not read the context, only the copy. Likewise
  // the shared experts' fc1 saves a quantized copy of the MoE layer's normalized input under delayed scaling
  // only (shared_experts.py); the router keeps the bf16 tensor.
  const bool delayed = t_.precision == sim::Dtype::fp8 && t_.fp8_recipe == Fp8Recipe::delayed;
  const bool shared = moe && m_.moe->shared_experts > 0;
  for (Step& st : steps) {
    if ((st.name == "norm1" && !m_.mla) || (st.name == "norm2" && !moe) || st.name == "mlp_act" ||
        st.name == "dispatch" || (st.name == "expert_act" && !moe_act_recomputed(l)))
      st.out_bytes *= q / a;
    else if (st.name == "attn" && delayed)
      st.out_bytes *= (materialized_ ? q : a + q) / a;
    else if (st.name == "norm2" && shared && delayed)
      st.out_bytes *= (a + q) / a;
  }
}

void Builder::jax_residual_sizes(const std::vector<Step*>& steps, int l) {
  if (!t_.scan_layers) {
    for (Step* p : steps) {
      Step& st = *p;
      const double before = st.out_bytes;
      if (st.name == "norm1") st.out_bytes = Tsp_ * h_ * 4 + layer_weights(l) * pr_.activation_bytes;
      else if (st.name == "attn_scores" && !te_softmax_) st.out_bytes = b_ * hl_ * s_ * s_ * 6;  // fp32 + bf16
      st.extra_io_bytes = std::max(0.0, st.out_bytes - before);
      // The fp32 scores are the score GEMM's own output (attn_scores.qk writes fp32) and the softmax
      // backward fusion reads them back within its 10 B per score (s1_none_unrolled: the forward's
      // fusion.858 and fusion.603 read them, fusion.526 671 MB; the dK dot reads only dS).
      if (materialized_ && st.name == "attn_scores") {
        st.extra_io_bytes = 0;
        st.extra_read_by_backward = false;
      }
    }
    return;
  }
  for (Step* p : steps) {
    Step& st = *p;
    const double before = st.out_bytes;
    if (st.name == "norm1") st.out_bytes = Tsp_ * h_ * 8;        // fp32 input + fp32 normalized
    else if (st.name == "attn_out") st.out_bytes = Tsp_ * h_ * 6;  // bf16 output + fp32 residual sum
    else if (st.name == "norm2") st.out_bytes = Tsp_ * h_ * 4;   // fp32 normalized
    // (Transformer Engine's softmax keeps only its bf16 output: softmax.py _softmax_fwd_rule saves (output,).)
    else if (st.name == "attn_scores" && !te_softmax_) st.out_bytes = b_ * hl_ * s_ * s_ * 6;  // fp32 + bf16 probabilities
    else if (st.name == "mlp_act") st.out_bytes = T_ * f_ * pr_.activation_bytes * 4;
    // The extra residuals are written by the forward fusion and read back by the backward.
    st.extra_io_bytes = std::max(0.0, st.out_bytes - before);
    // The dense SwiGLU's backward (mlp_act.bwd: 5 T·F bf16 of its own) as XLA fuses it in the scanned loop: with
    // no policy it reads the kept intermediates, 9 T·F in all (m1_none: loop_add_fusion, 6, and loop_multiply_fusion,
    // 3; m1_none_cudnn: .2 and .1); with the gate and up kept it recomputes the product inside its own
    // multi-output fusion, 6 in all and no separate recompute (m1_dots, m1_dots_cudnn, g1_dots:
    // loop_add_multiply_fusion, three bf16 outputs; xla_swiglu_product_in_backward); with them recomputed too, 7
    // after the product's own recompute (m1_full: loop_add_fusion, 4, and loop_multiply_fusion.1, 3).
    if (st.name == "mlp_act" && m_.ffn == FfnKind::swiglu) {
      const double tf = T_ * f_ * pr_.activation_bytes;
      st.extra_io_bytes = t_.recompute.mode == RecomputeMode::none ? 4 * tf : xla_swiglu_product_in_backward(l) ? tf : 2 * tf;
    }
    // Recomputed scores are read by the recomputed softmax's fusions and the softmax backward
    // fusion, each counted with its own bytes; the dK dot reads only dS (g1_dots: gemm_fusion_dot.44
    // and .43 move the same 2.23 GB). Kept ones likewise: the softmax backward's own bytes (11 B per score)
    // already read them, and the bf16 probabilities' slice is scan.stack_slice (m1_none: loop_select_fusion
    // 5.91 GB per layer, as racksim's attn_scores.softmax.bwd; fusion-start.23 the slice); no third read.
    if (materialized_ && st.name == "attn_scores") st.extra_read_by_backward = false;
  }
}

void Builder::add_mlp_steps(std::vector<Step>& steps, double tokens, double width, bool tensor_parallel,
                            const std::string& tag) {
  const double a = pr_.activation_bytes;
  const bool swiglu = m_.ffn == FfnKind::swiglu;
  const bool tpc = tensor_parallel && tp_ > 1;
  auto gather = [=, this](std::string_view n, TpOverlap how, int gemms = 1) {
    if (tpc) tp_collective(n, CollectiveOp::all_gather, T_ * h_ * a, how, gemms);
  };
  auto scatter = [=, this](std::string_view n, TpOverlap how) {
    if (tpc) tp_collective(n, CollectiveOp::reduce_scatter, T_ * h_ * a, how);
  };
  const std::string p = tag;
  if (swiglu)
    steps.push_back({tag.empty() ? "mlp_gate" : tag + "gate", tokens * width * a,
                     [=, this] {
                       gather(cat(p, "mlp.tp_all_gather"), TpOverlap::ring_exchange, 2);  // fc1: gate and up
                       gemm_fwd(cat(p, "mlp_gate"), tokens, width, h_);
                     },
                     [=, this] {
                       if (tpc && bulk_gather_beside_dgrad()) {
                         // fc1's second half (the gather went beside the up projection's dgrad): its
                         // dgrad completes fc1's input gradient, reduce-scattered beside this wgrad.
                         gemm_dgrad(cat(p, "mlp_gate"), tokens, width, h_);
                         scatter(cat(p, "mlp.dgrad.tp_reduce_scatter"), bwd_tp_overlap());
                         gemm_wgrad(cat(p, "mlp_gate"), tokens, width, h_);
                         return;
                       }
                       gemm_dgrad(cat(p, "mlp_gate"), tokens, width, h_);
                       gather(cat(p, "mlp_gate.wgrad.tp_all_gather"), TpOverlap::bulk);
                       gemm_wgrad(cat(p, "mlp_gate"), tokens, width, h_);
                     }});
  steps.push_back({tag.empty() ? "mlp_up" : tag + "up", tokens * width * a,
                   [=, this] {
                     if (!swiglu) gather(cat(p, "mlp.tp_all_gather"), TpOverlap::ring_exchange);
                     // fc1's input was cast with its gate half (Megatron); XLA's two dots cast it each.
                     gemm(cat(p, "mlp_up"), tokens, width, h_, 1, 0,
                          swiglu && !jax_ ? Quant::forward_weight_only : Quant::forward);
                   },
                   [=, this] {
                     if (tpc && bulk_gather_beside_dgrad()) {
                       // fc1's input gathered for the wgrad beside the dgrad; with SwiGLU the reduce-scatter
                       // waits for the gate's dgrad (fc1's other half, the next step backward).
                       gather(cat(p, swiglu ? "mlp_gate.wgrad.tp_all_gather" : "mlp_up.wgrad.tp_all_gather"), bwd_tp_overlap());
                       gemm_dgrad(cat(p, "mlp_up"), tokens, width, h_);
                       const auto gathered = take_overlapped();
                       if (!swiglu) scatter(cat(p, "mlp.dgrad.tp_reduce_scatter"), bwd_tp_overlap());
                       pending_deps_.insert(pending_deps_.end(), gathered.begin(), gathered.end());
                       gemm_wgrad(cat(p, "mlp_up"), tokens, width, h_);
                       return;
                     }
                     gemm_dgrad(cat(p, "mlp_up"), tokens, width, h_);
                     scatter(cat(p, "mlp.dgrad.tp_reduce_scatter"), TpOverlap::bulk);
                     if (!swiglu) gather(cat(p, "mlp_up.wgrad.tp_all_gather"), TpOverlap::bulk);
                     gemm_wgrad(cat(p, "mlp_up"), tokens, width, h_);
                   }});
  const double act_in = swiglu ? 2 : 1;
  steps.push_back({tag.empty() ? "mlp_act" : tag + "act", tokens * width * a,
                   [=, this] { vector(cat(p, "mlp_act"), (act_in + 1) * tokens * width * a, 8 * tokens * width, tokens * width); },
                   [=, this] { vector(cat(p, "mlp_act.bwd"), (2 * act_in + 1) * tokens * width * a, 12 * tokens * width, tokens * width); }});
  // The MLP residual's dropout mask rides the MLP's last internal step (mlp_out is the layer's output, which every
  // policy keeps, where Megatron's full recompute regenerates the mask).
  steps.back().mask_bytes = residual_mask_bytes();
  steps.push_back({tag.empty() ? "mlp_out" : tag + "out", (tpc ? Tsp_ : tokens) * h_ * a,
                   [=, this] {
                     gemm_fwd(cat(p, "mlp_out"), tokens, h_, width);
                     scatter(cat(p, "mlp_out.tp_reduce_scatter"), TpOverlap::pipeline);
                     residual(cat(p, "mlp_out.residual"));
                   },
                   [=, this] {
                     residual_dropout_bwd(cat(p, "mlp_out.dropout.bwd"));
                     vector(cat(p, "mlp_out.residual.bwd"), 3 * Tsp_ * h_ * a, Tsp_ * h_);
                     gather(cat(p, "mlp_out.tp_all_gather"), TpOverlap::ring_exchange);
                     gemm_dgrad(cat(p, "mlp_out"), tokens, h_, width);
                     gemm_wgrad(cat(p, "mlp_out"), tokens, h_, width);
                   }});
}

}  // namespace racksim::workloads::training_graph
