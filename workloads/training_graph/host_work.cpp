// The host's work per op, layer and chunk (framework figures, torch.distributed's NCCL calls, XLA's runtime), charged
// where the host issues it.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

double Builder::nvtx_forward_host_s(int l) const {
  if (!t_.megatron_nvtx_lookup) return 0.0;
  int calls = 8;                // TransformerLayer: self_attention, self_attn_bda, mlp, mlp_bda
  if (!m_.mla) calls += 10;     // Attention.forward: qkv, adjust_key_value, rotary_pos_emb, core_attention,
                                // linear_proj (MLA's own forward has none)
  if (!m_.is_moe_layer(l) || m_.moe->shared_experts > 0)
    calls += 6;                 // MLP.forward (a dense layer's, or SharedExpertMLP's): linear_fc1, activation,
                                // linear_fc2; Transformer Engine's grouped experts have none
  return calls * sys_.launch.megatron_nvtx_range_s;
}

Builder::ExtraHost Builder::extra_host_s(int l, bool forward, bool routing_removed) const {
  const auto& L = sys_.launch;
  ExtraHost x;
  if (m_.mla) x.mla = forward ? L.megatron_mla_forward_s : L.megatron_mla_backward_s;
  if (!m_.is_moe_layer(l)) return x;
  if (m_.moe->router_groups > 1 && !routing_removed)
    x.router = forward ? L.megatron_group_router_forward_s : L.megatron_group_router_backward_s;
  if (m_.moe->shared_experts > 0)
    x.shared = forward ? L.megatron_shared_expert_forward_s : L.megatron_shared_expert_backward_s;
  return x;
}

void Builder::charge_host_work(int l, std::size_t first, bool forward) {
  const std::size_t router_end = std::exchange(router_step_end_, 0);  // this pass's (every path resets it)
  if (jax_) return;
  if (partial_graphs_) return charge_scoped_host_work(l, first, forward);
  const auto& L = sys_.launch;
  const bool moe = m_.is_moe_layer(l);
  // Under whole-layer graphs the dense part, MLA's and the shared expert's replay; the router stays eager as the
  // routing does.
  const ExtraHost xf = extra_host_s(l, true, t_.moe.router_fusion), xb = extra_host_s(l, false, t_.moe.router_fusion);
  const double dense_fwd = t_.cuda_graphs ? 0.0 : dense_forward_host_s(l) + xf.mla + xf.shared;
  const double dense_bwd = t_.cuda_graphs ? 0.0 : L.megatron_layer_backward_s + xb.mla + xb.shared;
  const double moe_fwd = moe_forward_host_s(t_.moe.router_fusion) + xf.router;
  const DdpHostWork ddp = t_.cuda_graphs ? DdpHostWork{} : ddp_host_work(l);
  const double fwd = dense_fwd + (moe ? moe_fwd : 0.0) + ddp.forward_s;
  const double bwd = dense_bwd + (moe ? L.megatron_moe_backward_s + xb.router : 0.0) + ddp.backward_s;
  const std::size_t end = g_.ops.size();
  if (forward) {
    fwd_ops_per_layer_[l] = static_cast<int>(end - first);
    // In an MoE layer DeepSeek-V3's parts run on the host before the dispatcher's wait for the token counts (the
    // attention, the shared expert, the router), where the GPU still has the attention's kernels queued: on the
    // ops up to the router's; the rest of the layer's host work spread evenly as before.
    double before_router = 0;
    if (moe && router_end > first && router_end <= end && !t_.cuda_graphs)
      before_router = xf.mla + xf.shared + xf.router;
    if (fwd > 0 && end > first)
      for (std::size_t i = first; i < end; ++i) {
        g_.ops[i].host_s += (fwd - before_router) / static_cast<double>(end - first);
        if (i < router_end) g_.ops[i].host_s += before_router / static_cast<double>(router_end - first);
      }
    return;
  }
  std::size_t backward_ops = 0;
  for (std::size_t i = first; i < end; ++i) backward_ops += g_.ops[i].phase != Phase::recompute;
  const auto it = fwd_ops_per_layer_.find(l);
  const double per_recomputed = it != fwd_ops_per_layer_.end() && it->second > 0 ? fwd / it->second : 0.0;
  for (std::size_t i = first; i < end; ++i) {
    if (g_.ops[i].phase == Phase::recompute) g_.ops[i].host_s += per_recomputed;
    else if (bwd > 0) g_.ops[i].host_s += bwd / static_cast<double>(backward_ops);
  }
}

Builder::DdpHostWork Builder::ddp_host_work(int l) const {
  if (jax_ || t_.optimizer_sharding == OptimizerSharding::fsdp) return {};
  const auto& L = sys_.launch;
  // (MLA's latent norms are counted as --qk-layernorm builds them, fused into the up projections, as the DeepSeek
  // recipes set it; racksim's MLA always has them.)
  double gemm_weights = 0, added = 0, modules = 6;  // layer, input norm, pre-cross norm, cross attention + bda, pre-MLP norm
  double owners = 0;                                // modules that own parameters
  if (m_.mla) {  // (racksim's MLA has a q LoRA: model.mla.q_lora_rank >= 1)
    gemm_weights += 5;  // q down and up, kv down and up, output
    added += 3;         // the input norm, the latent norms fused into the up projections
    modules += 11;      // attention, q down/up, kv down/up, rotary, q/kv norm identities, TE attention + backend, output
    owners += 6;        // the input norm and the projections
  } else {
    gemm_weights += 2;                    // QKV, output
    added += 1 + (m_.qk_norm ? 2 : 0);    // the norm fused into QKV; the q and k norms
    modules += 7;                         // attention, QKV, q/k norms, TE attention + backend, output
    owners += 2 + (m_.qk_norm ? 2 : 0);
  }
  if (m_.is_moe_layer(l)) {
    const auto& e = *m_.moe;
    gemm_weights += 2.0 * e.experts / ep_ + (e.shared_experts > 0 ? 2 : 0);
    added += 2;  // the pre-MLP norm, the router
    modules += 5 + (e.shared_experts > 0 ? 3 : 0);
    owners += 4 + (e.shared_experts > 0 ? 2 : 0);  // the pre-MLP norm, router, grouped fc1 and fc2; the shared fc1, fc2
  } else {
    gemm_weights += 2;  // fc1, fc2
    added += 1;         // the norm fused into fc1
    modules += 3;
    owners += 2;
  }
  const double backward_s = gemm_weights * L.megatron_ddp_grad_hook_s + added * L.megatron_ddp_grad_hook_add_s;
  if (!t_.overlap_param_gather || t_.optimizer_sharding == OptimizerSharding::none) return {0.0, 0.0, backward_s};
  const double walk_s = (gemm_weights + added) * L.megatron_ddp_param_prehook_s;
  return {modules * L.megatron_ddp_module_prehook_s + walk_s, owners * L.megatron_ddp_module_prehook_s + walk_s,
          backward_s};
}

void Builder::charge_torch_nccl_calls() {
  if (jax_) return;
  const auto& L = sys_.launch;
  // The context-parallel ops that stand for more than one call, by their names' interned bases (0: none).
  auto base = [&](std::string_view name) { return cp_ > 1 ? g_.names.intern(name) : 0u; };
  const uint32_t last_ring = base(fmt::format("attn.cp_ring{}", cp_ - 1)), qkv_a2a = base("attn.cp_a2a_qkv"),
                 dqkv_a2a = base("attn.cp_a2a_dqkv"), kv_gather = base("attn.cp_kv_all_gather"),
                 dkv_scatter = base("attn.cp_dkv_reduce_scatter");
  for (Op& op : g_.ops) {
    if (op.kind != OpKind::collective || op.comm_kernel != CommKernel::nccl || op.graph == GraphLaunch::captured) continue;
    const bool dispatcher = op.group == CommGroup::ep || op.group == CommGroup::etp;
    if (dispatcher ? t_.moe.hierarchical() : whole_step_graphs_) continue;
    double calls = 1;
    if (op.group == CommGroup::cp && cp_ > 1) {
      const uint32_t b = op.name.base;
      if (b == last_ring && op.phase == Phase::backward) calls = 2;
      if (b == qkv_a2a || b == dqkv_a2a) calls = 3;
      if (b == kv_gather || b == dkv_scatter) calls = 2;
    }
    op.host_s += calls * (op.coll == CollectiveOp::all_reduce  ? L.torch_nccl_all_reduce_s
                          : op.coll == CollectiveOp::send_recv ? L.torch_nccl_p2p_pair_s
                                                               : L.torch_nccl_collective_s);
  }
}

void Builder::charge_scoped_host_work(int l, std::size_t first, bool forward) {
  const auto& L = sys_.launch;
  const auto& g = t_.cuda_graph_scope;
  const bool moe = m_.is_moe_layer(l);
  const std::size_t end = g_.ops.size();
  std::size_t k = 0;
  Module cur = Module::other;
  std::size_t ops = 0, eager = 0;
  bool launched = false;
  for (std::size_t i = first; i < end; ++i) {
    while (k < module_marks_.size() && module_marks_[k].first <= i) cur = module_marks_[k++].second;
    Op& op = g_.ops[i];
    const bool in_graph = captured(cur);
    op.graph = in_graph ? GraphLaunch::captured : GraphLaunch::eager;
    // One graph per layer and pass, whatever the scopes: Megatron-Core's TransformerLayer captures its
    // scoped parts (the attention, then the MLP or the router part) in one Transformer Engine callable
    // (_te_cuda_graph_capture), replayed as one forward graph and one backward graph.
    op.graph_start = in_graph && !launched;
    launched = launched || in_graph;
    if (op.phase == Phase::recompute) continue;
    ++ops;
    eager += !in_graph;
  }
  module_marks_.clear();
  const bool routing_removed = t_.moe.router_fusion || g.moe_router;
  const double moe_fwd = moe_forward_host_s(routing_removed);
  // DeepSeek-V3's parts, where their module is not captured: with the layer's eager ops.
  auto eager_extra = [&](bool fwd_pass) {
    const ExtraHost x = extra_host_s(l, fwd_pass, routing_removed);
    return (g.attn ? 0.0 : x.mla) + (g.moe_router ? 0.0 : x.router + x.shared);
  };
  // DDP's hooks under the layer's graphs: the gradient hooks fire for every parameter (they sit on the accumulators,
  // outside the graphs); Megatron-Core calls the forward pre-hooks by hand before it replays a graph, for the modules
  // that own parameters (TransformerLayer.setup_manual_hooks), so the forward counts those (a lower bound: the eager
  // modules without parameters call theirs too). The time goes with the layer's eager ops, or, when the graphs hold
  // every op of the pass, to its first op.
  const DdpHostWork ddp = ddp_host_work(l);
  auto charge_ddp_to_graph = [&](double s) {
    for (std::size_t i = first; i < end; ++i)
      if (g_.ops[i].phase != Phase::recompute) {
        g_.ops[i].host_s += s;
        return;
      }
  };
  if (forward) {
    ForwardHostShare& sh = fwd_host_share_[l];
    sh.dense_per_op = ops > 0 ? dense_forward_host_s(l) / static_cast<double>(ops) : 0.0;
    sh.moe_per_eager_op =
        eager > 0 ? ((moe ? moe_fwd : 0.0) + eager_extra(true) + ddp.forward_graphed_s) / static_cast<double>(eager) : 0.0;
    for (std::size_t i = first; i < end; ++i)
      if (g_.ops[i].graph == GraphLaunch::eager) g_.ops[i].host_s += sh.dense_per_op + sh.moe_per_eager_op;
    if (eager == 0) charge_ddp_to_graph(ddp.forward_graphed_s);
    return;
  }
  const ForwardHostShare sh = fwd_host_share_[l];
  const double dense = ops > 0 ? L.megatron_layer_backward_s / static_cast<double>(ops) : 0.0;
  const double moe_share =
      eager > 0 ? ((moe ? L.megatron_moe_backward_s : 0.0) + eager_extra(false) + ddp.backward_s) / static_cast<double>(eager)
                : 0.0;
  for (std::size_t i = first; i < end; ++i) {
    Op& op = g_.ops[i];
    if (op.graph != GraphLaunch::eager) continue;
    op.host_s += op.phase == Phase::recompute ? sh.dense_per_op + sh.moe_per_eager_op : dense + moe_share;
  }
  if (eager == 0) charge_ddp_to_graph(ddp.backward_s);
}

void Builder::assign_xla_host_work() {
  const std::size_t n = g_.ops.size();
  if (n == 0) return;
  std::vector<int> body(n, -1);  // scanned layer body (index into layer_bodies_); -1 otherwise
  std::vector<char> starts(n, 0);
  starts[0] = 1;
  for (std::size_t i = 1; i < n; ++i)
    starts[i] = g_.ops[i].rank != g_.ops[i - 1].rank || g_.ops[i].kind != OpKind::kernel ||
                g_.ops[i - 1].kind != OpKind::kernel;  // collectives and copies are not in the buffers
  if (t_.scan_layers)
    for (std::size_t k = 0; k < layer_bodies_.size(); ++k) {
      const auto& lb = layer_bodies_[k];
      for (std::size_t i = lb.first; i < lb.end; ++i) body[i] = static_cast<int>(k);
      if (lb.first < n) starts[lb.first] = 1;
      if (lb.end < n) starts[lb.end] = 1;
    }
  // The first body of each phase on each rank runs on new buffers; later iterations reuse them.
  std::set<std::pair<int, int>> phases_seen;  // (rank, phase)
  std::set<int> first_bodies;
  for (std::size_t k = 0; k < layer_bodies_.size(); ++k) {
    const Op& op = g_.ops[layer_bodies_[k].first];
    if (phases_seen.insert({op.rank, static_cast<int>(op.phase)}).second) first_bodies.insert(static_cast<int>(k));
  }
  for (std::size_t first = 0; first < n;) {
    std::size_t end = first + 1;
    while (end < n && !starts[end]) ++end;
    Op& head = g_.ops[first];
    if (head.kind == OpKind::kernel) {
      head.host_commands = static_cast<int>(end - first);
      int refs = 0;
      for (std::size_t j = first; j < end; ++j) refs += g_.ops[j].unit == ExecUnit::tensor ? 3 : 2;
      head.host_buffer_refs = refs;
      const bool repeat = body[first] >= 0 && !first_bodies.count(body[first]);
      head.host_rerecord = !t_.donate_state && !repeat;
    }
    first = end;
  }
  // Each rank's ops are contiguous (build() emits rank by rank): its first op starts the program.
  for (std::size_t i = 0; i < n; ++i)
    g_.ops[i].host_program_start = i == 0 || g_.ops[i].rank != g_.ops[i - 1].rank;
  g_.xla_program = true;
}

}  // namespace racksim::workloads::training_graph
