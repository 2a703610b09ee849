// What a rank holds for the whole step (weights, gradients, optimizer state) and XLA's buffer assignment of the
// step's outputs.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

void Builder::add_resident_state() {
  // Parameters whose state this rank holds: all of them, or its shard of each part (dense over dp·cp,
  // experts over edp) for the state the sharding mode distributes.
  const double n = local_params();
  const double shard = sharded_params();
  const auto mode = t_.optimizer_sharding;
  const double n_opt = mode != OptimizerSharding::none ? shard : n;
  const double n_grad = grads_sharded() ? shard : n;
  const double n_weight = fsdp_per_use() ? shard : n;
  const auto r = static_cast<uint16_t>(rank_);
  auto resident = [&](const std::string& name, MemCategory c, double bytes, bool host = false) {
    const TensorId id = g_.tensor(Name{g_.names.intern(name), NamePrefix::rank, static_cast<uint32_t>(rank_), 0}, c, bytes, host, r);
    g_.resident.push_back(id);
    return id;
  };
  if (jax_) {
    // JAX: fp32 parameters (cast to bf16 where used) and Adam moments; gradients are
    // temporaries of the step (allocated with the backward, see backward_chunk).
    resident("params.fp32", MemCategory::weights, n_weight * pr_.master_weight_bytes);
    resident("optimizer.m_v", MemCategory::optimizer, n_opt * pr_.optimizer_bytes, t_.offload_optimizer);
    if (!t_.donate_state)
      // Without donation the new parameters and moments are new buffers, which the runtime
      // allocates before the step runs (PjRt output buffers): live for the whole step.
      resident("optimizer.outputs", MemCategory::optimizer,
               n_opt * (pr_.master_weight_bytes + pr_.optimizer_bytes));
    jax_grads_ = g_.tensor(Name{g_.names.intern("grads.fp32"), NamePrefix::rank, static_cast<uint32_t>(rank_), 0}, MemCategory::gradients,
                           n_grad * pr_.grad_bytes, false, r);
    jax_grads_allocated_ = false;
  } else {
    resident("weights.bf16", MemCategory::weights, n_weight * pr_.activation_bytes);
    if (fp8_class() && !t_.fp8_param_gather && !fsdp_per_use())
      // Transformer Engine's weight workspace (linear.py _fp8_workspaces, kept across micro-batches and steps since
      // Megatron-Core passes is_first_microbatch): each TE layer's weight quantized row-wise and column-wise, with
      // the format's scales (MXFP8 one byte per 32; blockwise fp32 per 128x128 block; NVFP4's in its bytes). The
      // layers' GEMM weights only: the router, the norms and the output layer are not TE fp8 modules.
      resident("weights.fp8_cache", MemCategory::weights,
               local_quantized_weights() * weight_copies() * (pr_.matmul_input_bytes + te_scale_bytes(true)));
    resident("grads.main", MemCategory::gradients, n_grad * pr_.grad_bytes);  // fp32, or 16-bit (grads_16bit)
    resident("optimizer.master_m_v", MemCategory::optimizer,
             n_opt * (pr_.master_weight_bytes + pr_.optimizer_bytes), t_.offload_optimizer);
    // Offloaded, the optimizer also keeps a pinned fp32 copy of its gradient shard on the host (hybrid_optimizer.py).
    if (t_.offload_optimizer) resident("optimizer.grads_host", MemCategory::gradients, n_opt * host_fp32_bytes(), true);
    // The expert-exchange library's buffers, allocated at a stage's first exchange and kept (hw::
    // expert_library_buffer_bytes: DeepEP's and HybridEP's; NCCL's are in memory.reserved). HybridEP's hold the rank's
    // tokens from every EP rank; its ranks of one domain taken as the EP group's share of a domain.
    if (m_.moe && ep_ > 1 && local_expert_params() > 0)  // (a stage with MoE layers)
      if (const double b = hw::expert_library_buffer_bytes(expert_library(), h_, ep_, Tsp_,
                                                           static_cast<double>(m_.moe->experts) / ep_,
                                                           std::min(ep_, std::max(1, sys_.scale_up.domain_size)));
          b > 0)
        resident("expert_exchange.buffers", MemCategory::communication_buffers, b);
  }
}

void Builder::pack_into_outputs() {
  const double f32 = 4, L = static_cast<double>(m_.layers);
  std::vector<double> leaves = {static_cast<double>(m_.vocab) * h_ * f32 / tp_};
  for (double x : dense_layer_weight_arrays()) {
    if (t_.layer_params_stacked()) leaves.push_back(L * x * f32);  // stacked over the layers
    else leaves.insert(leaves.end(), static_cast<std::size_t>(m_.layers), x * f32);  // one array per layer
  }
  if (!m_.tied_embeddings) leaves.push_back(static_cast<double>(m_.vocab) * h_ * f32 / tp_);
  std::vector<std::pair<double, std::vector<std::pair<std::size_t, std::size_t>>>> outs;  // size, placed intervals
  // The moments are sharded like the optimizer state (1/dp of each array under zero1/2, fsdp).
  const double opt_share = t_.optimizer_sharding != OptimizerSharding::none ? static_cast<double>(rep_) / dp_ : 1.0;
  for (double b : leaves)
    for (int copy = 0; copy < 2; ++copy) outs.push_back({b * opt_share, {}});
  std::sort(outs.begin(), outs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Live range of every activation tensor in op order.
  std::vector<std::size_t> first(g_.tensors.size(), SIZE_MAX), last(g_.tensors.size(), 0);
  for (std::size_t i = 0; i < g_.ops.size(); ++i) {
    for (TensorId t : g_.ops[i].allocs) first[t] = std::min(first[t], i);
    for (TensorId t : g_.ops[i].frees) last[t] = std::max(last[t], i);
  }
  struct Cand {
    double bytes = 0;
    std::size_t lo = SIZE_MAX, hi = 0;
    std::vector<std::pair<TensorId, double>> members;  // tensor, bytes of it in this buffer
  };
  std::map<std::string, Cand> groups;
  std::vector<Cand> cands;
  for (TensorId t = 0; t < g_.tensors.size(); ++t) {
    const Tensor& x = g_.tensors[t];
    if (x.category != MemCategory::activations || x.on_host || x.bytes <= 0 || first[t] == SIZE_MAX) continue;
    const std::string xname = g_.tensor_name(t);
    const std::size_t hi = std::max(first[t], last[t]);
    // Made in the forward, read in the backward: a residual (stacked under scan).
    const bool residual = g_.ops[first[t]].phase == Phase::forward && g_.ops[hi].phase != Phase::forward;
    // "mb3.L7.qkv" -> stacked group "mb3.qkv" under scan.
    std::string key;
    if (t_.scan_layers && residual) {
      const auto dot1 = xname.find('.'), dot2 = xname.find('.', dot1 + 1);
      if (dot1 != std::string::npos && dot2 != std::string::npos && xname.compare(dot1 + 1, 1, "L") == 0)
        key = xname.substr(0, dot1) + xname.substr(dot2);
    }
    // A step output that is several XLA buffers (jax_residual_sizes) is packed buffer by buffer.
    const auto parts = xla_buffer_parts(xname);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      Cand& c = key.empty() ? cands.emplace_back() : groups[fmt::format("{}#{}", key, p)];
      c.bytes += x.bytes * parts[p];
      c.lo = std::min(c.lo, first[t]);
      c.hi = std::max(c.hi, hi);
      c.members.push_back({t, x.bytes * parts[p]});
    }
  }
  for (auto& [k, c] : groups) cands.push_back(std::move(c));
  std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.bytes > b.bytes; });
  double packed = 0;
  int n = 0;
  for (const Cand& c : cands) {
    auto it = std::lower_bound(outs.begin(), outs.end(), c.bytes, [](const auto& o, double v) { return o.first < v; });
    for (; it != outs.end(); ++it) {
      bool clash = false;
      for (const auto& [lo, hi] : it->second) clash |= !(c.hi < lo || hi < c.lo);
      if (clash) continue;
      it->second.push_back({c.lo, c.hi});
      for (const auto& [t, b] : c.members) g_.tensors[t].bytes = std::max(0.0, g_.tensors[t].bytes - b);
      packed += c.bytes;
      ++n;
      break;
    }
  }
  if (n > 0)
    g_.notes.push_back(fmt::format("jax without donation: {} activation buffers ({:.1f} GB over the step) placed inside "
                                   "the optimizer's outputs before they are written, as XLA's buffer assignment does",
                                   n, packed / 1e9));
}

std::vector<double> Builder::xla_buffer_parts(const std::string& tensor_name) const {
  auto is = [&](const std::string& step) {
    const auto pos = tensor_name.rfind("." + step);
    return pos != std::string::npos &&
           (pos + step.size() + 1 == tensor_name.size() || tensor_name.compare(pos + step.size() + 1, 11, ".recomputed") == 0);
  };
  if (is("attn_scores")) return te_softmax_ ? std::vector<double>{1.0} : std::vector<double>{4.0 / 6, 2.0 / 6};
  // The weights' bf16 stack is one buffer per weight array (m1_none_cudnn's forward loop: bf16 [L, D, 3D],
  // [L, D, D], [L, D, F] twice, [L, F, D]), each of which buffer assignment places on its own; the norm gains'
  // share (2 D of the layer's weights) is left in with the others. (Packing runs for dense, non-MLA models only.)
  if (is(std::string(kStackedWeights)) || is(std::string(kSlicedWeights))) {
    std::vector<double> arrays = dense_layer_weight_arrays();
    const double sum = std::accumulate(arrays.begin(), arrays.end(), 0.0);
    for (double& x : arrays) x /= sum;
    return arrays;
  }
  if (t_.scan_layers) {
    if (is("norm1")) return {0.5, 0.5};
    if (is("attn_out")) return {2.0 / 6, 4.0 / 6};
    if (is("mlp_act")) return {0.25, 0.25, 0.25, 0.25};
  }
  return {1.0};
}

}  // namespace racksim::workloads::training_graph
