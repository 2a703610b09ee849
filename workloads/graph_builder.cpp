#include "workloads/graph_builder.h"

#include <algorithm>
#include <string>

#include "workloads/training_graph/builder.h"

namespace racksim::workloads {

double model_flops_per_step(const ModelSpec& m, const TrainingConfig& t) {
  const double tokens = static_cast<double>(t.global_batch) * t.seq_len;
  const int layers = t.graph_layers(m.layers);
  const double attention = 6.0 * t.global_batch * layers * static_cast<double>(t.seq_len) * t.seq_len *
                           (static_cast<double>(m.heads) * m.head_dim);
  double params = active_params(m);
  // Under token dropping (training.moe.capacity_factor below 1) an expert processes at most cf of its balanced share
  // of the routed copies: the dropped copies are no work the model does, so the routed experts count at min(1, cf) of
  // top_k (a pad_to_capacity run's padding rows are not model FLOPs either). Megatron-LM's counter ignores the
  // capacity; without this a small factor gave an MFU above 1.
  const double kept = t.moe.capacity_factor > 0 && t.moe.capacity_factor < 1 ? t.moe.capacity_factor : 1.0;
  if (m.moe && kept < 1)
    for (int l = 0; l < m.layers; ++l)
      if (m.is_moe_layer(l)) params -= (1.0 - kept) * layer_params(m, l).experts * m.moe->top_k / m.moe->experts;
  if (t.mtp_layers > 0 && m.layers > 0) {
    // Each MTP depth as Megatron-LM's counter takes it (training.py num_floating_point_operations at d98e8a64):
    // a layer of the last layer's kind, its norms and projection (3h + 2h^2), and one more pass of the logits.
    LayerParams p = layer_params(m, m.layers - 1);
    if (m.is_moe_layer(m.layers - 1)) p.experts *= kept * m.moe->top_k / m.moe->experts;
    const double h = m.hidden;
    params += t.mtp_layers * (p.total() + 3.0 * h + 2.0 * h * h + static_cast<double>(m.vocab) * h);
  }
  return 6.0 * params * tokens + attention;
}

Precision precision_of(const TrainingConfig& t) {
  Precision p{};
  switch (t.precision) {
    case sim::Dtype::fp8:
    case sim::Dtype::mxfp8: p.matmul_input_bytes = 1.0; break;
    // NVFP4: 4-bit values plus one fp8 scale per 16 elements.
    case sim::Dtype::nvfp4: p.matmul_input_bytes = 0.5 + 1.0 / 16.0; break;
    default: p.matmul_input_bytes = 2.0;
  }
  p.activation_bytes = 2.0;
  p.master_weight_bytes = 4.0;
  // Megatron keeps its gradient buffer in the parameters' dtype unless told to accumulate and reduce in fp32, which
  // --bf16 forces unless --grad-reduce-in-bf16, and --fp16 does not (megatron/training/arguments.py: bf16 sets
  // accumulate_allreduce_grads_in_fp32; megatron/core/distributed/distributed_data_parallel.py: grad_dtype = float32 if
  // grad_reduce_in_fp32 else param.dtype): a 16-bit main_grad, reduced in 16 bits. The distributed optimizer then works
  // on an fp32 copy of its shard (distrib_optimizer.py _copy_model_grads_to_main_grads: shard_model_grad.float()),
  // except Megatron-Core's precision-aware optimizer (adam_moments bf16), which reads the 16-bit shard as its
  // decoupled_grad, and Megatron-FSDP, which keeps its own buffers (no copy: the same function returns first).
  const bool grads_16bit = t.grads_16bit();
  p.grad_bytes = grads_16bit ? 2.0 : 4.0;
  // (The precision-aware optimizer reads it only where Megatron's use_precision_aware_optimizer_no_fp8_or_ds_fp8 holds:
  // not under an fp8-class recipe other than delayed scaling, optimizer_config.py. Megatron-FSDP is racksim's fsdp and,
  // in Megatron mode, zero2, the importer's optim_grads.)
  const bool fp8_not_delayed = t.fp8_class() && !(t.precision == sim::Dtype::fp8 && t.fp8_recipe == Fp8Recipe::delayed);
  // Offloaded, the optimizer is the precision-aware one (Megatron requires --use-precision-aware-optimizer with
  // --optimizer-cpu-offload, arguments.py), which reads the buffer under any recipe (optimizer_config.py:
  // use_precision_aware_optimizer_no_fp8_or_ds_fp8 holds with optimizer_cpu_offload).
  const bool optimizer_reads_buffer = (t.adam_moments == AdamMoments::bf16 && !fp8_not_delayed) || t.offload_optimizer ||
                                      t.optimizer_sharding == OptimizerSharding::fsdp ||
                                      t.optimizer_sharding == OptimizerSharding::zero2;
  p.main_grad_bytes = grads_16bit && optimizer_reads_buffer ? p.grad_bytes : 4.0;
  // Adam's first and second moments. Offloaded, Megatron's CPU optimizer is torch.optim.AdamW over fp32 parameters,
  // which keeps fp32 moments whatever --exp-avg-dtype says (megatron/core/optimizer/__init__.py passes it only to the
  // GPU optimizer). (JAX mode's offload keeps the moments' dtype.)
  const bool megatron_cpu_adam = t.offload_optimizer && t.framework != Framework::jax;
  p.optimizer_bytes = t.adam_moments == AdamMoments::bf16 && !megatron_cpu_adam ? 4.0 : 8.0;
  // Megatron reduces its fp32 main grads under bf16 training. XLA (JAX mode) reduces a weight's gradient where the
  // SPMD partitioner resolves the weight-gradient dot's partial sum over the batch: on the dot's output, in the
  // compute dtype (bf16; under TE's fp8/nvfp4 recipes too, whose weight-gradient GEMM writes bf16), before the
  // convert to the fp32 parameter's dtype. Read off every data-parallel and FSDP program compiled so far: the
  // two-GPU steps (calibration/data/h200x2-2026-11-29-mechanisms: bf16 all-reduces and reduce-scatters of the
  // layer weights, scanned or not) and MaxText's Llama 2 7B compiled for 8, 16 and 128 GPUs
  // (calibration/data/h200-2026-12-04-mock-compile: bf16 reduce-scatters over fsdp and all-reduces over data).
  // The input embedding's gradient (a gather's transpose, a scatter-add into the fp32 table) is reduced in fp32
  // in those programs, as are the norms' gains (not separated here).
  const bool jax = t.framework == Framework::jax;
  p.grad_reduce_bytes = (jax && t.precision != sim::Dtype::fp32 && t.precision != sim::Dtype::tf32) || grads_16bit ? 2.0 : 4.0;
  // MaxText's one-hot embedding (training.one_hot_embedding) is a dot: its gradient is the dot's, reduced in the
  // compute dtype as the layers' are.
  p.embedding_grad_reduce_bytes = (jax && t.one_hot_embedding) || grads_16bit ? p.grad_reduce_bytes : 4.0;
  // Parameter all-gathers (ZeRO-1 after the step, FSDP before each use) move bf16, or the fp8 copy under fp8-class
  // training where the parameters are fp8: Megatron's --fp8-param-gather (training.fp8_param_gather), and in JAX
  // mode as it was (TE casts before the gather there, see docs/seed_claims.md).
  const bool fp8_params = jax || t.fp8_param_gather;
  p.param_gather_bytes = p.matmul_input_bytes < 2.0 && fp8_params ? p.matmul_input_bytes : 2.0;
  // MaxText's logits_dot_in_fp32 (training.logits_fp32) uses the fp32 kernel as it is: no cast before the gather, and
  // the dot's gradient is fp32.
  const bool head_fp32 = jax && t.logits_fp32;
  p.head_grad_reduce_bytes = head_fp32 ? 4.0 : p.grad_reduce_bytes;
  p.head_gather_bytes = head_fp32 ? 4.0 : p.param_gather_bytes;
  return p;
}

SavePlan save_plan(const RecomputePolicy& p, bool materialized, bool moe_layer) {
  std::vector<std::string> all;
  for (const auto& n : activation_names()) {
    if (n == "attn_scores" && !materialized) continue;  // a flash kernel never writes the scores
    if (n == "mlp_out") continue;                       // the next layer's input, saved as such
    all.push_back(n);
  }
  if (moe_layer) all.insert(all.end(), moe_activation_names().begin(), moe_activation_names().end());
  SavePlan plan;
  switch (p.mode) {
    case RecomputeMode::none: plan.saved = all; break;
    case RecomputeMode::full: break;
    case RecomputeMode::selective:
      // Megatron's selective recompute: recompute the attention core (scores, softmax).
      for (const auto& n : all)
        if (n != "attn_scores") plan.saved.push_back(n);
      break;
    case RecomputeMode::save_dots:
      // Outputs of weight matmuls (JAX dots_with_no_batch_dims_saveable).
      for (const auto& n : all)
        if (n == "qkv" || n == "attn_out" || n == "mlp_gate" || n == "mlp_up" || n == "router" ||
            n == "expert_out")
          plan.saved.push_back(n);
      break;
    case RecomputeMode::names:
      plan.saved = p.save;
      plan.offloaded = p.offload;
      break;
  }
  return plan;
}

OpGraph build_training_graph(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys) {
  return build_training_graph(m, t, sys, BuildOptions{});
}

OpGraph build_training_graph(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys,
                             const BuildOptions& options) {
  if (m.mla && t.tp_comm_overlap && t.framework == Framework::megatron && t.parallelism.tp > 1) {
    // Megatron-Core builds MLA's linears with Transformer Engine buffer names userbuffers do not know (q_down_proj,
    // ...), and TELinear then sets tp_comm_overlap = False on the config every module shares (transformer_engine.py
    // at d98e8a64): the whole model runs without userbuffers.
    TrainingConfig off = t;
    off.tp_comm_overlap = false;
    training_graph::Builder b(m, off, sys, options);
    OpGraph g = b.build();
    g.notes.push_back("training.tp_comm_overlap: Megatron-Core turns it off for a model with multi-latent attention "
                      "(TELinear disables it on the shared config for MLA's buffer names); modelled without userbuffers");
    return g;
  }
  training_graph::Builder b(m, t, sys, options);
  return b.build();
}

}  // namespace racksim::workloads
