// The builder's constructor and its driver: the ranks' schedules walked chunk by chunk, then the step's cross-rank
// joins.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

Builder::Builder(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys, const BuildOptions& options)
    : m_(m), t_(t), sys_(sys), pr_(precision_of(t)), options_(options) {
  const auto& p = t.parallelism;
  tp_ = p.tp;
  pp_ = p.pp;
  vp_ = p.vp;
  cp_ = p.cp;
  ep_ = p.ep;
  dp_ = p.dp;
  etp_ = p.expert_tp();
  edp_ = p.expert_dp();
  // Hybrid sharding applies to sharded state only (the scenario rejects dp_shard without it).
  rep_ = t.optimizer_sharding != OptimizerSharding::none ? p.dp_replicas() : 1;
  s_ = static_cast<double>(t.seq_len) / cp_;
  b_ = t.micro_batch;
  T_ = b_ * s_;
  Tsp_ = t.sequence_parallel ? T_ / tp_ : T_;
  if (m.moe && (t.moe.force_load_balancing || t.expert_imbalance_chance))  // every EP rank's own tokens, at random
    random_routing_load_ = hw::random_routing_busiest_load(Tsp_ * ep_, m.moe->experts, m.moe->top_k, ep_);
  h_ = m.hidden;
  hl_ = static_cast<double>(m.heads) / tp_;
  kvl_ = std::max(1.0, static_cast<double>(m.kv_heads) / tp_);
  if (m.mla) {
    qk_dim_ = m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim;
    v_dim_ = m.mla->v_head_dim;
    kvl_ = hl_;  // MLA up-projects keys and values per head
    // The head dims gpu.mla_attention_*_rate were measured at (DeepSeek-V2/V3: d_qk 128 + 64 rotary, d_v 128);
    // other dims run at the fitted head-dim-128 rate per FLOP.
    mla_measured_dims_ = qk_dim_ == 192 && v_dim_ == 128;
  } else {
    qk_dim_ = v_dim_ = m.head_dim;
  }
  f_ = static_cast<double>(m.ffn_hidden) / tp_;
  V_ = static_cast<double>(m.vocab) / tp_;
  materialized_ = t.attention == AttentionImpl::materialized;
  micro_steps_ = t.micro_steps();
  vstages_ = pp_ * vp_;
  jax_ = t.framework == Framework::jax;
  te_softmax_ = jax_ && materialized_ && t.fused_softmax && te_softmax_kernel_available();
  vstage_first_layer_ = split_layers(m.layers, pp_, vp_, t.pipeline);
  // Multi-token prediction: Megatron-Core places its modules after the decoder on the last pipeline stage
  // (with the loss), so they are layers m.layers .. m.layers + D - 1 of the last virtual stage.
  mtp_ = t.mtp_layers;
  graph_layers_ = t.graph_layers(m.layers);
  vstage_first_layer_.back() += mtp_;
  // The EP ranks a token's top-k distinct experts reach (E/ep experts on each), under its router's node or group
  // limit, by the exchanges' rule (hw::expected_expert_reach; the same for every MoE layer, so counted once); the
  // EP group's domains taken as its ranks over the NVLink domain's size, as for the library's buffers.
  if (m.moe && ep_ > 1) {
    const int ep_per_domain = std::min(ep_, std::max(1, sys.scale_up.domain_size));
    gpus_reached_ = hw::expected_expert_reach(m.moe->experts, ep_, (ep_ + ep_per_domain - 1) / ep_per_domain,
                                              m.moe->top_k, t.moe.max_nodes_per_token, m.moe->router_groups,
                                              m.moe->router_group_top_k)
                        .gpus;
  }
}

OpGraph Builder::build() {
  g_.ranks = pp_;
  // About 37 ops per layer and micro-step (more with recompute): 48 leaves room, so that most graphs
  // never grow the vector (a growth moves every op; the 405B step's 75,008 ops outgrew 36 per layer
  // by 3%). Pages not touched are never mapped.
  g_.ops.reserve(static_cast<std::size_t>(std::max(1, graph_layers_)) * static_cast<std::size_t>(std::max(1, micro_steps_)) * 48);
  for (int r = 0; r < pp_; ++r) {
    rank_ = r;
    grad_reduce_queue_.clear();
    grad_reduce_queued_ = 0;
    compute_waits_.clear();
    fsdp_prev_start_.reset();
    fsdp_prefetched_.clear();
    pair_open_ = false;
    unjoined_ep_.clear();
    param_ready_.clear();
    deferred_grads_.clear();
    layer_state_.clear();
    fsdp_resharded_.clear();
    logits_.clear();
    mtp_logits_.clear();
    mtp_saved_.clear();
    add_resident_state();
    const OpId zeroed = jax_ ? kNoOp : zero_grad_buffer();
    if (overlapped_param_gather()) gather_params_ahead(zeroed);
    const std::vector<ScheduleEntry> schedule =
        pipeline_schedule(pp_, vp_, micro_steps_, r, megatron_ep_overlap(), t_.pipeline.microbatch_group_size);
    offload_preload_after_ = kNoOp;
    const std::vector<char> keeps_last = chunks_keeping_last_groups(schedule);
    for (std::size_t i = 0; i < schedule.size(); ++i) {
      const ScheduleEntry& e = schedule[i];
      mb_ = e.micro;
      const int v = e.chunk * pp_ + r;
      keeps_last_groups_ = keeps_last[i];
      // EP overlap (Megatron mode; JAX mode refuses it). Where Megatron-Core runs it: the pair's two chunks are
      // emitted one after the other with their own dependencies, then issued in Megatron-Core's combined 1F1B order
      // (close_pair). Elsewhere (the loose pairing): a paired chunk's exchanges do not hold up compute; they are
      // joined at the end of the pair (the forward carries them into the backward that follows it).
      ep_overlap_ = ep_overlap_asked() && e.paired;
      ep_interleave_ = ep_overlap_ && megatron_ep_overlap();
      if (ep_interleave_ && !pair_open_) {
        pair_first_op_ = static_cast<OpId>(g_.ops.size());
        pair_halves_.clear();
        pair_ctx_.clear();
      }
      const auto half_first = static_cast<OpId>(g_.ops.size());
      if (e.forward)
        forward_chunk(v);
      else
        backward_chunk(v);
      if (ep_interleave_) pair_halves_.push_back({e.forward, e.micro, v, half_first, static_cast<OpId>(g_.ops.size())});
      // The first chunk of a pair carries its exchanges into the second; after the second (or an
      // unpaired chunk) the next op waits for them all.
      pair_open_ = ep_overlap_ && !pair_open_;
      if (!pair_open_) {
        pending_deps_.insert(pending_deps_.end(), unjoined_ep_.begin(), unjoined_ep_.end());
        unjoined_ep_.clear();
        if (ep_interleave_) close_pair();
        ep_interleave_ = false;
      }
    }
    optimizer_step();
  }
  if (!issue_orders_.empty()) {  // the pairs' ops in their issue order, the others as emitted
    g_.issue_order.resize(g_.ops.size());
    std::iota(g_.issue_order.begin(), g_.issue_order.end(), OpId{0});
    for (const auto& [first, order] : issue_orders_) std::copy(order.begin(), order.end(), g_.issue_order.begin() + first);
  }
  if (jax_ && !t_.donate_state && pp_ == 1 && !m_.moe && !m_.mla) pack_into_outputs();
  if (combining()) xla_scheduler_windows();
  if (jax_) assign_xla_host_work();
  if (partial_graphs_)  // what no layer's graph captured launches eagerly
    for (Op& op : g_.ops)
      if (op.graph == GraphLaunch::step) op.graph = GraphLaunch::eager;
  charge_torch_nccl_calls();
  for (const auto& [consumer, key] : cross_deps_) g_.ops[consumer].deps.push_back(sends_.at(key));
  for (const auto& [waiter, key] : cross_host_waits_)
    if (waiter < g_.ops.size() && g_.ops[waiter].rank == g_.ops[waiter - 1].rank && g_.ops[waiter].host_waits_for == kNoOp)
      g_.ops[waiter].host_waits_for = sends_.at(key);
  // A collective that spans stages starts on each of its ranks when every one has reached it: the embedding group's
  // all-reduce (its two ranks), the gradient norm's and the loss scaler's found-inf flag's (every stage).
  if (embd_all_reduce_.size() == 2) join_across_ranks(embd_all_reduce_);
  for (const auto& per_rank : norm_all_reduces_) join_across_ranks(per_rank);
  for (const auto& per_rank : found_inf_all_reduces_) join_across_ranks(per_rank);
  g_.model_flops_per_step = model_flops_per_step(m_, t_);
  g_.tokens_per_step = static_cast<double>(t_.global_batch) * t_.seq_len;
  if (!jax_ && t_.cuda_graphs && t_.recompute.mode == RecomputeMode::full)
    g_.notes.push_back("training.cuda_graphs with recompute: full: Megatron-LM refuses CUDA graphs under full recompute "
                       "but whole-iteration ones (Megatron-Core@d98e8a64 transformer_config.py: 'full recompute is only "
                       "supported with full iteration CUDA graph', --cuda-graph-impl full_iteration; before, arguments.py "
                       "refused any); simulated as asked, with every micro-step's kernels from graphs");
  if (!jax_ && t_.recompute_num_layers > 0) {
    const bool full = t_.recompute.mode == RecomputeMode::full;
    int recomputed = 0;
    for (int l = 0; full && l < graph_layers_; ++l) recomputed += layer_recomputed(l);
    g_.notes.push_back(
        !full ? fmt::format("training.recompute_num_layers {} ignored: it chooses which layers full recompute checkpoints "
                          "(--recompute-method block), and training.recompute is not full",
                          t_.recompute_num_layers)
        : recomputed == graph_layers_
            // Megatron takes a count above a chunk's layers (it checks only that one is given): every layer.
            ? fmt::format("training.recompute_num_layers {}: at least every model chunk's layer count, so Megatron's block "
                          "method recomputes all {} layers, as full recompute without the count does",
                          t_.recompute_num_layers, graph_layers_)
            : fmt::format("training.recompute_num_layers {}: Megatron's block method, at most the first {} layers of each "
                          "of the {} model chunks recomputed ({} of the {} layers; the rest keep every activation)",
                          t_.recompute_num_layers, t_.recompute_num_layers, vstages_, recomputed, graph_layers_));
  }
  if (m_.mla && t_.attention == AttentionImpl::flash)
    g_.notes.push_back(
        mla_measured_dims_
            ? fmt::format("multi-latent attention's core (d_qk 192, d_v 128) at {:g} (forward) and {:g} (backward) of the "
                          "fused kernel's head-dim-128 rate per FLOP (gpu.mla_attention_forward_rate / _backward_rate)",
                          sys_.gpu.mla_attention_forward_rate, sys_.gpu.mla_attention_backward_rate)
            : fmt::format("multi-latent attention's core with d_qk {:g}, d_v {:g}: run at the fused kernel's head-dim-128 "
                          "rate per FLOP (gpu.mla_attention_*_rate were measured at d_qk 192, d_v 128 only)",
                          qk_dim_, v_dim_));
  if (t_.precision == sim::Dtype::fp8 && t_.fp8_recipe == Fp8Recipe::blockwise)
    g_.notes.push_back(
        sys_.gpu.fp8_blockwise_rate_ratio > 0
            ? fmt::format("training.fp8_recipe blockwise: FP8 GEMMs at {:g} of the per-tensor rate "
                          "(gpu.fp8_blockwise_rate_ratio: each 128-deep block's partial sum is scaled on the CUDA cores)",
                          sys_.gpu.fp8_blockwise_rate_ratio)
            : fmt::format("training.fp8_recipe blockwise: {} gives no gpu.fp8_blockwise_rate_ratio (not measured on "
                          "this GPU): FP8 GEMMs at the per-tensor rate",
                          sys_.name));
  if (!jax_ && t_.transformer_impl == TransformerImpl::local) {
    // What the key changes is the weight gradient's GEMM; what else the job asks for is Transformer Engine's and is
    // simulated as such (Megatron's local spec has none of it).
    std::vector<std::string> te;
    if (t_.fp8_class()) te.push_back("the fp8-class casts and GEMMs (training.precision)");
    if (t_.tp_comm_overlap && tp_ > 1) te.push_back("userbuffers' TP overlap (training.tp_comm_overlap)");
    if (t_.cuda_graphs) te.push_back("partial CUDA graphs (training.cuda_graphs)");
    if (m_.moe) te.push_back("the grouped expert GEMM's host time (launch.te_grouped_gemm)");
    std::string list;
    for (const auto& s : te) list += (list.empty() ? "" : "; ") + s;
    g_.notes.push_back(te.empty()
                           ? std::string("training.transformer_impl local: weight gradients through PyTorch's or "
                                         "Megatron's own GEMM (the shape curve's TN), not Transformer Engine's NT layout")
                           : "training.transformer_impl local: weight gradients through PyTorch's or Megatron's own "
                             "GEMM, but still simulated as Transformer Engine's: " + list);
  }
  if (jax_ && m_.qk_norm)
    g_.notes.push_back("model.qk_norm under framework jax: the per-head query/key norms cost no time here (XLA "
                       "fuses them with their neighbours; not measured); their gains count as parameters");
  if (!jax_ && vstages_ > 1 && !t_.pipeline.uneven() && m_.layers % vstages_ != 0) {
    // Megatron-LM refuses a layer count that the virtual stages do not divide unless the split is given
    // (--decoder-first/last-pipeline-num-layers); racksim takes the ends' layers off first and says so.
    const auto layers_of = [this](int v) { return vstage_first_layer_[v + 1] - vstage_first_layer_[v]; };
    int most = 0;
    for (int v = 0; v < vstages_; ++v) most = std::max(most, layers_of(v));
    g_.notes.push_back(fmt::format(
        "model.layers {} over {} virtual pipeline stages (pp {} x vp {}) do not divide: the first holds {}, the "
        "last {}, the others up to {} (Megatron-LM needs the split stated: training.pipeline.first_stage_layers / "
        "last_stage_layers)",
        m_.layers, vstages_, pp_, vp_, layers_of(0), layers_of(vstages_ - 1) - mtp_, most));
  }
  // Settings that change nothing here: said, not silently dropped. (overlap_param_gather without a sharded optimizer
  // is one Megatron-LM refuses; a note, not an error, so that a sweep over optimizer_sharding keeps its base's flags.)
  if (!jax_ && t_.overlap_param_gather && t_.optimizer_sharding == OptimizerSharding::none)
    g_.notes.push_back("training.overlap_param_gather with optimizer_sharding none: no parameter gather to overlap, no "
                       "effect (Megatron-LM refuses --overlap-param-gather without the distributed optimizer or "
                       "Megatron-FSDP)");
  // (The default pipelines the reduce-scatter alone, so only a setting that turned more on is said.)
  if (jax_ && !t_.scan_layers && (t_.xla_pipelined.all_gather || t_.xla_pipelined.all_reduce))
    g_.notes.push_back("training.xla_pipelined_collectives with scan_layers false: no effect (XLA's collective pipeliner "
                       "moves a collective across iterations of a scanned layer loop; an unrolled program has none)");
  if (jax_ && t_.dp_all_gather_group != TrainingConfig::DpAllGatherGroup::shared)
    g_.notes.push_back("training.dp_all_gather_group separate: no effect in JAX mode (XLA's stream assignment places the "
                       "data-parallel collectives: one stream with unrolled layers, the gathers apart with scanned ones)");
  if (!fsdp_per_step()) {
    if (t_.fsdp_pipeline_gather != TrainingConfig::FsdpPipelineGather::per_step)
      g_.notes.push_back("training.fsdp_pipeline_gather is FSDP's gather under a pipeline schedule: it needs "
                         "optimizer_sharding fsdp with pp > 1 in Megatron mode (PyTorch); no effect here");
    if (t_.fsdp_grad_reduce != TrainingConfig::FsdpGradReduce::per_step)
      g_.notes.push_back("training.fsdp_grad_reduce is FSDP's gradient reduction under a pipeline schedule: it needs "
                         "optimizer_sharding fsdp with pp > 1 in Megatron mode (PyTorch); no effect here");
  } else {
    const std::string weights =
        fsdp_reshards_per_microbatch()
            ? "a layer's weights are resharded after each of its backwards and gathered again by the next forward or "
              "backward that needs them, about once per micro-batch (the memory counts the stage's whole weights, an "
              "upper bound)"
            : "the weights are gathered once per step and kept, as torch.distributed.pipelining runs FSDP under a "
              "schedule, so each GPU holds its stage's whole weights while the step runs";
    const std::string grads =
        fsdp_reduces_per_microbatch()
            ? "each layer's gradients are reduce-scattered after every backward and the fp32 shard accumulates, so a "
              "GPU holds a layer's whole gradient only until its reduce-scatter"
            : "the gradients are accumulated whole (fp32) and reduce-scattered in the last backward, so each GPU holds "
              "its stage's whole gradients";
    g_.notes.push_back(fmt::format(
        "training.optimizer_sharding fsdp with pp {}: {}; {} (docs/decisions.md, \"FSDP under a pipeline gathers once "
        "per step\", \"FSDP's gathers once per micro-batch under a pipeline\", \"FSDP's gradients reduced per "
        "micro-batch\")",
        pp_, weights, grads));
  }
  if (t_.pipeline.microbatch_group_size > 0 && (vp_ == 1 || pp_ == 1))
    g_.notes.push_back(fmt::format("training.pipeline.microbatch_group_size {} without an interleaved pipeline (pp {}, "
                                   "vp {}): no effect (only the interleaved schedule groups micro-batches; Megatron "
                                   "ignores it too)",
                                   t_.pipeline.microbatch_group_size, pp_, vp_));
  if (!jax_ && t_.fp16 && t_.grad_reduce_in_bf16)
    g_.notes.push_back("training.grad_reduce_in_bf16 with precision fp16: no effect (Megatron's --fp16 keeps and reduces "
                       "fp16 gradients; --grad-reduce-in-bf16 applies under --bf16)");
  if (m_.moe && t_.moe.dispatch_fp8.value_or(false) && !fp8_class())
    g_.notes.push_back(fmt::format("training.moe.dispatch_fp8 with precision {}: no effect (the tokens are dispatched in "
                                   "the training precision; an fp8 dispatch needs an fp8-class precision)",
                                   t_.precision_name()));
  if (!jax_ && t_.recompute.mode == RecomputeMode::names && t_.recompute.save.empty() && t_.recompute.offload.empty())
    g_.notes.push_back("training.recompute saves nothing by name: the backward recomputes what it needs (JAX's remat "
                       "with nothing saveable), not the whole layer forward that Megatron's full recompute reruns "
                       "(recompute: full)");
  if (jax_ && m_.moe && (t_.moe.router_fusion || t_.moe.permute_fusion))
    g_.notes.push_back("training.moe.router_fusion / permute_fusion are Megatron-Core's fused kernels: no effect in JAX "
                       "mode (XLA fuses the router and the permutations as it compiles them)");
  if (jax_ && t_.fused_softmax && t_.attention != AttentionImpl::materialized)
    g_.notes.push_back("training.fused_softmax is Transformer Engine's softmax of a materialized attention: no effect "
                       "with attention flash (the fused attention kernel has its own)");
  if (jax_ && t_.fused_softmax && materialized_ && !te_softmax_)
    g_.notes.push_back(fmt::format(
        "training.fused_softmax: Transformer Engine has no fused causal softmax for rows of {} scores in batches of {} "
        "(v1.5 is_kernel_available: 16 < S <= 4096, S a multiple of 4, micro-batch x heads a multiple of its rows per "
        "block); its Softmax then runs its scaled kernel with the mask as a bias where that kernel takes the shape, "
        "else jax.nn.softmax: the step runs XLA's fusions for both (TE's scaled kernel is not modelled)",
        s_, b_ * hl_));
  if (te_softmax_ && sys_.gpu.te_softmax_forward_GBps.empty())
    g_.notes.push_back(fmt::format(
        "training.fused_softmax: {} has no measurement of Transformer Engine's fused softmax (gpu.te_softmax_forward_GBps "
        "and _backward_GBps: only the H100's, calibration/data/h100-2026-12-07-te-softmax); its kernels are timed by "
        "the row-kernel bound, which on the H100 gave half the measured time",
        sys_.name.empty() ? std::string("this GPU") : sys_.name));
  if (t_.attention_dropout > 0 && t_.attention == AttentionImpl::materialized)
    g_.notes.push_back("training.attention_dropout with materialized attention: the dropout of the score "
                       "matrix is not modelled (only the fused attention kernel's)");
  if (m_.moe) {
    const char* dispatcher = t_.moe.hierarchical() ? "hierarchical (DeepEP/HybridEP)"
                                                                               : "NCCL all-to-all";
    const std::string routing =
        t_.moe.force_load_balancing
            ? fmt::format("random (force_load_balancing: the busiest rank receives x{:.4f} the mean by chance", random_routing_load_)
        : t_.expert_imbalance_chance
            ? fmt::format("imbalanced by chance at least (training.expert_imbalance chance: the busiest rank receives "
                          "x{:.4f} the mean, what random routing gives this layout, the least a router's counts show",
                          random_routing_load_)
            : fmt::format("{} (training.expert_imbalance {:g}", t_.expert_imbalance == 1.0 ? "balanced" : "imbalanced",
                          t_.expert_imbalance);
    g_.notes.push_back(fmt::format(
        "MoE routing: {}: tokens at the busiest expert rank / the mean); "
        "dispatch {}{}{}",
        routing, dispatcher,
        t_.moe.max_nodes_per_token > 0 ? fmt::format(", at most {} NVLink domains per token", t_.moe.max_nodes_per_token)
                                       : std::string(),
        t_.moe.a2a_overlap ? ", overlapped with the paired micro-batch's compute" : ""));
    if (t_.moe.capacity_factor > 0 && t_.moe.hierarchical() && !drop_and_pad())
      g_.notes.push_back("training.moe.capacity_factor without pad_to_capacity under DeepEP/HybridEP: the capacity sets "
                         "the tokens exchanged and computed; their host waits stay the dropless ones");
    if (t_.moe.capacity_factor > 0)
      g_.notes.push_back(fmt::format(
          "MoE token dropping: capacity factor {:g}, {:g} tokens per expert from each rank's {:g}{}", t_.moe.capacity_factor,
          expert_capacity(), Tsp_,
          drop_and_pad() ? ", padded to capacity: every rank's load is the same whatever the routing (expert_imbalance "
                           "has no effect) and the dispatcher has no counts to exchange or wait for"
                         : fmt::format(": the busiest rank's load x{:g} the mean of the tokens kept", busiest_expert_load())));
    // Megatron-Core allows its EP overlap only with an interleaved schedule under a pipeline and without
    // full recompute; racksim overlaps the 1F1B pairs anyway (as DualPipe would), and says so.
    if (t_.moe.a2a_overlap && ((pp_ > 1 && vp_ == 1) || t_.recompute.mode == RecomputeMode::full))
      g_.notes.push_back(
          "a2a_overlap outside Megatron-Core's conditions (it needs vp > 1 under a pipeline and no full "
          "recompute, of every layer or of the first layers of each chunk): the exchanges are overlapped as a "
          "DualPipe-like schedule would, loosely (a paired chunk's exchanges do not hold up its own compute; "
          "Megatron-Core's layer-by-layer order is not used)");
  }
  return std::move(g_);
}

Builder::Joined Builder::cat(std::string_view a, std::string_view b) {
  Joined j;
  if (a.size() + b.size() <= j.buf.size()) {
    std::copy(a.begin(), a.end(), j.buf.begin());
    std::copy(b.begin(), b.end(), j.buf.begin() + static_cast<std::ptrdiff_t>(a.size()));
    j.len = a.size() + b.size();
  } else {
    j.heap.reserve(a.size() + b.size());
    j.heap.append(a).append(b);
  }
  return j;
}

}  // namespace racksim::workloads::training_graph
