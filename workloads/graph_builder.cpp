#include "workloads/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

#include "hardware_models/collectives.h"
#include "workloads/pipeline_schedule.h"

namespace racksim::workloads {

using hw::CollectiveOp;

double model_flops_per_step(const ModelSpec& m, const TrainingConfig& t) {
  const double tokens = static_cast<double>(t.global_batch) * t.seq_len;
  const int layers = t.graph_layers(m.layers);
  const double attention = 6.0 * t.global_batch * layers * static_cast<double>(t.seq_len) * t.seq_len *
                           (static_cast<double>(m.heads) * m.head_dim);
  double params = active_params(m);
  if (t.mtp_layers > 0 && m.layers > 0) {
    // Each MTP depth as Megatron-LM's counter takes it (training.py num_floating_point_operations at d98e8a64):
    // a layer of the last layer's kind, its norms and projection (3h + 2h^2), and one more pass of the logits.
    LayerParams p = layer_params(m, m.layers - 1);
    if (m.is_moe_layer(m.layers - 1)) p.experts *= static_cast<double>(m.moe->top_k) / m.moe->experts;
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
  p.grad_bytes = 4.0;
  p.optimizer_bytes = t.adam_moments == AdamMoments::bf16 ? 4.0 : 8.0;  // Adam first and second moments
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
  p.grad_reduce_bytes = jax && t.precision != sim::Dtype::fp32 && t.precision != sim::Dtype::tf32 ? 2.0 : 4.0;
  // MaxText's one-hot embedding (training.one_hot_embedding) is a dot: its gradient is the dot's, reduced in the
  // compute dtype as the layers' are.
  p.embedding_grad_reduce_bytes = jax && t.one_hot_embedding ? p.grad_reduce_bytes : 4.0;
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

// XLA's Triton softmax fusions of a recomputed attention tile rows into programs of 16,384
// elements on 8 warps: 64 elements of each operand per thread (the block_level_fusion_config of
// the H200 HLOs with dots/full/offload remat and of calibration/data/h200-2026-11-29-xla,
// S = 1024..8192; the forward softmax of steps that save everything uses 16). The engine turns
// the operand bytes per thread into the calibrated occupancy bound (compute_model.h).
constexpr double kXlaRowElementsPerThread = 64;
// A scanned layer's bf16 weights in the forward loop's stack (no remat policy): its tensor's name and kept key.
constexpr std::string_view kStackedWeights = "weights.cast.stacked";
// An unrolled layer's fp32 weights sliced out of their stacks under a remat policy: its tensor's name and kept key.
constexpr std::string_view kSlicedWeights = "weights.slice";

// Dropout's random draw per element and direction, in vector-fp32 operations (the engine times them at the
// GPU's FP32 rate): 1.62 ps per causal attention-score element forward + backward on the H200, the mean of
// 8 with/without-dropout pairs of fused attention kernels (FlashAttention and cuDNN, 7-16 heads, s 4096;
// stdev 0.42 ps), half per direction, at its 67 TFLOP/s
// (calibration/data/h200-2026-12-01-host-overhead/derive_dropout.py).
constexpr double kDropoutRngOpsPerElement = 54;

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

namespace {

// One forward step of a layer: ops that produce a named activation, and the matching backward.
struct Step {
  std::string name;      // activation name (DESIGN.md list)
  double out_bytes = 0;  // bytes of the named activation
  std::function<void()> forward;
  std::function<void()> backward;
  double extra_io_bytes = 0;  // residuals kept beyond the step's own output: written in forward, read in backward
  bool extra_read_by_backward = true;  // false: the backward's own kernels already count reading them back
  // The recompute policy for this step's output (filled when the layer's steps are cached).
  bool saved = false;      // kept in HBM for the backward
  bool offloaded = false;  // sent to host memory and fetched back
  // Held with the activation, outside its size (which quantized or XLA-resized saves rescale): the MLP residual's
  // one-byte dropout mask, which the MLP's last internal step carries (the MLP output is the layer's, kept anyway).
  double mask_bytes = 0;
  double held_bytes() const { return out_bytes + mask_bytes; }
};

// A few (step name -> value) pairs; iterated in name order, like the std::map it replaces. The
// names view the cached steps' own strings.
template <class V>
struct StepMap {
  std::vector<std::pair<std::string_view, V>> items;
  V* find(std::string_view k) {
    for (auto& [n, v] : items)
      if (n == k) return &v;
    return nullptr;
  }
  void set(std::string_view k, V v) {
    if (V* p = find(k)) *p = v;
    else items.emplace_back(k, v);
  }
  bool erase(std::string_view k) {
    for (auto it = items.begin(); it != items.end(); ++it)
      if (it->first == k) {
        items.erase(it);
        return true;
      }
    return false;
  }
  bool empty() const { return items.empty(); }
  std::vector<std::pair<std::string_view, V>> sorted() const {
    auto out = items;
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
  }
};

// How a GEMM's inputs are quantized under fp8-class precisions (Transformer Engine style):
// forward casts the activation and the weight; the backward casts the incoming gradient once;
// operands_cast runs in the low precision on copies earlier casts wrote (the weight-gradient GEMM
// reads the column-wise copies of the forward's input and the backward's gradient); none stays bf16.
// forward_weight_only: a forward GEMM whose input another GEMM's cast already quantized (Megatron-Core's fc1 is one
// Transformer Engine LayerNormLinear of width 2·ffn, emitted as its gate and up halves): it casts its weight alone.
// fp32: fp32 operands and output at the default matmul precision, which XLA runs on the tensor cores as TF32 (MaxText's
// logits_dot_in_fp32), whatever the training precision.
enum class Quant { none, forward, forward_weight_only, backward, operands_cast, fp32 };

// A cross-rank dependency resolved after every rank is built: the first op of a pipeline
// chunk waits for the send of the chunk before it (forward) or after it (backward).
struct ChunkKey {
  bool forward;
  int micro;
  int vstage;
  auto operator<=>(const ChunkKey&) const = default;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys, const BuildOptions& options)
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

  OpGraph build() {
    g_.ranks = pp_;
    // About 37 ops per layer and micro-step (more with recompute): 48 leaves room, so that most graphs
    // never grow the vector (a growth moves every op; the 405B step's 75,008 ops outgrew 36 per layer
    // by 3%). Pages not touched are never mapped.
    g_.ops.reserve(static_cast<std::size_t>(std::max(1, graph_layers_)) * static_cast<std::size_t>(std::max(1, micro_steps_)) * 48);
    for (int r = 0; r < pp_; ++r) {
      rank_ = r;
      grad_reduce_queue_.clear();
      grad_reduce_queued_ = 0;
      fsdp_prev_start_.reset();
      fsdp_prefetched_.clear();
      pair_open_ = false;
      unjoined_ep_.clear();
      param_ready_.clear();
      deferred_grads_.clear();
      layer_state_.clear();
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
    // all-reduce (its two ranks) and the gradient norm's (every stage).
    if (embd_all_reduce_.size() == 2) join_across_ranks(embd_all_reduce_);
    for (const auto& per_rank : norm_all_reduces_) join_across_ranks(per_rank);
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
    if (fsdp_per_step())
      g_.notes.push_back(fmt::format(
          "training.optimizer_sharding fsdp with pp {}: the weights are gathered once per step and kept, the gradients "
          "reduce-scattered in the last backward, as torch.distributed.pipelining runs FSDP under a schedule; so while "
          "the step runs each GPU holds its stage's whole weights and gradients, ZeRO-1's memory, not FSDP's "
          "(docs/decisions.md, \"FSDP under a pipeline gathers once per step\")",
          pp_));
    if (t_.pipeline.microbatch_group_size > 0 && (vp_ == 1 || pp_ == 1))
      g_.notes.push_back(fmt::format("training.pipeline.microbatch_group_size {} without an interleaved pipeline (pp {}, "
                                     "vp {}): no effect (only the interleaved schedule groups micro-batches; Megatron "
                                     "ignores it too)",
                                     t_.pipeline.microbatch_group_size, pp_, vp_));
    if (m_.moe && t_.moe.dispatch_fp8.value_or(false) && !fp8_class())
      g_.notes.push_back(fmt::format("training.moe.dispatch_fp8 with precision {}: no effect (the tokens are dispatched in "
                                     "the training precision; an fp8 dispatch needs an fp8-class precision)",
                                     sim::to_string(t_.precision)));
    if (!jax_ && t_.recompute.mode == RecomputeMode::names && t_.recompute.save.empty() && t_.recompute.offload.empty())
      g_.notes.push_back("training.recompute saves nothing by name: the backward recomputes what it needs (JAX's remat "
                         "with nothing saveable), not the whole layer forward that Megatron's full recompute reruns "
                         "(recompute: full)");
    if (jax_ && m_.moe && (t_.moe.router_fusion || t_.moe.permute_fusion))
      g_.notes.push_back("training.moe.router_fusion / permute_fusion are Megatron-Core's fused kernels: no effect in JAX "
                         "mode (XLA fuses the router and the permutations as it compiles them)");
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

 private:
  const ModelSpec& m_;
  const TrainingConfig& t_;
  const hw::SystemSpec& sys_;
  Precision pr_;
  BuildOptions options_;
  OpGraph g_;
  int tp_ = 1, pp_ = 1, vp_ = 1, cp_ = 1, ep_ = 1, dp_ = 1, etp_ = 1, edp_ = 1, micro_steps_ = 1, vstages_ = 1;
  int rep_ = 1;  // replica groups of the sharded state (training.parallelism.dp_shard): 1 = plain ZeRO/FSDP
  int rank_ = 0, mb_ = 0;
  int chunk_ = 0;  // the virtual stage being emitted (forward_chunk, backward_chunk)
  bool materialized_ = false, jax_ = false;
  bool mla_measured_dims_ = false;  // MLA's attention core at the head dims of gpu.mla_attention_*_rate
  double gpus_reached_ = 1;         // the EP ranks one token reaches (the constructor says how)
  OpId pending_host_wait_ = kNoOp;         // the next op emitted makes the host wait for this one
  struct LayerBody {
    std::size_t first, end;
    int layer;
  };
  std::vector<LayerBody> layer_bodies_;    // JAX: each layer's forward and backward ops (scan bodies)
  std::map<int, int> fwd_ops_per_layer_;   // ops a layer's forward issues (host work of recomputed ops)
  // training.cuda_graph_scope (Megatron-Core's --cuda-graph-scope): which module each of a layer's ops
  // belongs to, as (first op, module) marks made while the layer's steps emit their ops.
  enum class Module : uint8_t { other, attn, mlp, moe_router, moe_dispatch };
  const bool partial_graphs_ = t_.cuda_graph_scope.any() && t_.framework != Framework::jax;
  // Megatron's CUDA graphs without a scope: every kernel of a micro-step replays from a graph, so no Python runs per
  // layer, chunk or grouped GEMM (the MoE dispatcher's exchanges aside).
  const bool whole_step_graphs_ = t_.cuda_graphs && !partial_graphs_;
  std::vector<std::pair<std::size_t, Module>> module_marks_;
  struct ForwardHostShare {
    double dense_per_op = 0, moe_per_eager_op = 0;  // seconds (recomputed ops cost what the forward's did)
  };
  std::map<int, ForwardHostShare> fwd_host_share_;
  std::size_t router_step_end_ = 0;  // the op after the current MoE layer pass's router step (0: none yet)
  void mark_module(Module m) {
    if (partial_graphs_) module_marks_.emplace_back(g_.ops.size(), m);
  }
  // Megatron-Core's TransformerLayer: the attention part is the input norm, self-attention and its
  // bias-dropout-add; the MLP part the pre-MLP norm, the MLP or MoE layer and its bias-dropout-add.
  // In an MoE layer the router scope holds the pre-MLP norm, the router and the shared experts; the
  // token dispatcher, the experts and the combine stay outside every modelled scope.
  Module module_of_step(std::string_view step, bool moe) const {
    if (step == "norm1" || step == "qkv" || step == "attn_scores" || step == "attn" || step == "attn_out") return Module::attn;
    if (!moe) return Module::mlp;
    if (step == "norm2" || step == "router") return Module::moe_router;
    return Module::moe_dispatch;
  }
  bool captured(Module m) const {
    const auto& g = t_.cuda_graph_scope;
    return (m == Module::attn && g.attn) || (m == Module::mlp && g.mlp) || (m == Module::moe_router && g.moe_router);
  }
  // Shape legend (per rank, per micro-batch; set in the constructor): s_ sequence length of this cp rank,
  // b_ micro-batch (sequences), T_ = b_·s_ tokens, Tsp_ tokens of the sequence-parallel regions (T_ / tp),
  // h_ hidden size, hl_ / kvl_ query / key-value heads of this tp rank, qk_dim_ / v_dim_ head dimensions,
  // f_ FFN hidden of this tp rank, V_ vocabulary of this tp rank.
  double s_ = 0, b_ = 0, T_ = 0, Tsp_ = 0, h_ = 0, hl_ = 0, kvl_ = 0, qk_dim_ = 0, v_dim_ = 0, f_ = 0, V_ = 0;
  std::vector<int> vstage_first_layer_;  // size vstages_ + 1
  int mtp_ = 0;           // multi-token-prediction depth (training.mtp_layers)
  int graph_layers_ = 0;  // decoder layers and MTP layers: the layer indices the graph uses
  bool is_mtp_layer(int l) const { return l >= m_.layers; }
  Phase phase_ = Phase::forward;
  Name prefix_;  // the prefix of the names emitted now (its base unused)
  void prefix_micro_vstage(int v) { prefix_ = Name{0, NamePrefix::micro_vstage, static_cast<uint32_t>(mb_), static_cast<uint32_t>(v)}; }
  void prefix_micro_layer(int l) { prefix_ = Name{0, NamePrefix::micro_layer, static_cast<uint32_t>(mb_), static_cast<uint32_t>(l)}; }
  void prefix_rank() { prefix_ = Name{0, NamePrefix::rank, static_cast<uint32_t>(rank_), 0}; }
  // Two parts of a name joined on the stack: an op's name is interned at once, so the builder makes
  // no std::string (and no heap block for a long one) per op.
  struct Joined {
    std::array<char, 96> buf;
    std::size_t len = 0;
    std::string heap;  // a name longer than buf
    operator std::string_view() const { return heap.empty() ? std::string_view(buf.data(), len) : std::string_view(heap); }  // NOLINT
  };
  static Joined cat(std::string_view a, std::string_view b) {
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
  // The current prefix and this base: the name an op or tensor emitted now gets.
  Name named(std::string_view base) {
    Name n = prefix_;
    n.base = g_.names.intern(base);
    return n;
  }
  std::vector<OpId> pending_deps_;      // deps attached to the next emitted op
  std::optional<ChunkKey> pending_cross_;
  std::vector<std::pair<OpId, ChunkKey>> cross_deps_;
  // Under p2p_host_sync: the op after a chunk's receive, whose host waits for the tensor it receives (the peer's send).
  std::vector<std::pair<OpId, ChunkKey>> cross_host_waits_;
  std::map<ChunkKey, OpId> sends_;
  bool ep_overlap_ = false;             // this chunk's EP exchanges run beside the paired chunk's compute
  bool pair_open_ = false;              // the first chunk of an overlapped pair has run
  std::vector<OpId> unjoined_ep_;       // the loose pairing: exchanges of the open pair, joined after its second chunk
  // EP overlap where Megatron-Core runs it (Megatron mode, an interleaved pipeline or none, no full recompute):
  // the combined 1F1B order below. Elsewhere (the layouts Megatron-Core refuses, which racksim overlaps as a
  // DualPipe-like schedule would; JAX mode refuses a2a_overlap) the paired chunk's exchanges do not gate the compute
  // after them.
  // The job asks for EP overlap and has expert exchanges to overlap.
  bool ep_overlap_asked() const { return t_.moe.a2a_overlap && m_.moe && ep_ > 1; }
  bool megatron_ep_overlap() const {
    return ep_overlap_asked() && !jax_ && (pp_ == 1 || vp_ > 1) &&
           t_.recompute.mode != RecomputeMode::full;
  }
  bool loose_ep_overlap() const { return ep_overlap_ && !megatron_ep_overlap(); }
  // Megatron's non-interleaved 1F1B exchanges activations and gradients with batch_isend_irecv and then calls
  // torch.cuda.synchronize() (Megatron-LM@d98e8a64 p2p_communication.py _communicate: batch_p2p_comm and
  // batch_p2p_sync, both on: arguments.py turns overlap_p2p_comm off without virtual stages, argument_utils.py sets
  // batch_p2p_comm = not overlap_p2p_comm, model_parallel_config.py defaults batch_p2p_sync to True and no flag
  // changes it). So the host stops at every exchange until its own send is out and the tensor it receives is
  // in, and only then issues the next chunk: the GPU starts that chunk at the host's pace. The interleaved
  // schedule overlaps its exchanges (overlap_p2p_comm, no sync); a job under the loose EP pairing (a layout
  // Megatron-Core's EP overlap refuses) stands for DualPipe, whose waits are stream waits. JAX has no host-side exchange.
  bool p2p_host_sync() const {
    return !jax_ && pp_ > 1 && vp_ == 1 && !(ep_overlap_asked() && !megatron_ep_overlap());
  }

  // ---- EP overlap as Megatron-Core's combined 1F1B schedule issues it (Megatron mode) ------------------
  // Megatron-LM@d98e8a64 megatron/core/models/common/model_chunk_schedule_plan.py: TransformerModelChunkSchedulePlan
  // .run pairs layer i of the forward chunk with layer n-1-i of the backward chunk (the rest of the longer chunk
  // follows alone), and TransformerLayerSchedulePlan.run issues each pair of layers as
  //   comm stream:    combine_bwd  | dispatch_fwd -> dispatch_bwd     | combine_fwd
  //   compute stream: pre_dispatch | mlp_bwd -> mlp_bwd_dw -> mlp_fwd  | pre_dispatch_bwd
  // on the host in the order combine_bwd, pre_dispatch_fwd, mlp_bwd, dispatch_fwd, mlp_bwd_dw, dispatch_bwd,
  // mlp_fwd, combine_fwd, pre_dispatch_bwd (the attention's wgrad included). The nodes
  // (megatron/core/models/gpt/fine_grained_callables.py): pre_dispatch = attention, pre-MLP norm, shared
  // experts, router, dispatch preprocess (permutation); dispatch = the exchange; mlp = dispatch postprocess,
  // experts, combine preprocess (a dense layer's MLP); combine = the exchange, unpermutation, residual add.
  // The builder emits the two chunks whole, each with its own dependencies, and close_pair orders the pair's
  // ops by (layer slot, node) into OpGraph::issue_order, which the replay takes as program order. Kept on the
  // compute stream (Megatron runs them on the communication stream): the combine's unpermutation and residual
  // add (last in the slot, after pre_dispatch_bwd) and the combine backward's (first in the slot).
  enum class EpNode : uint8_t {
    b_combine, f_pre, b_mlp, f_dispatch, b_mlp_dw, b_dispatch, f_mlp, f_combine, b_pre, f_combine_compute, none
  };
  // What an op of the open pair was emitted as: its layer (-1: outside the layer loop) and step.
  enum class EpStep : uint8_t { none, attention, dense_mlp, moe_pre, dispatch, experts, combine };
  // layer: the decoder layer; kEpPre / kEpPost: the chunk's pre- or post-processing (before or after its layers);
  // -1: outside both (the op goes with the op emitted before it).
  static constexpr int kEpPre = -2, kEpPost = -3;
  struct EpCtx {
    int layer = -1;
    EpStep step = EpStep::none;
  };
  struct PairHalf {
    bool forward;
    int micro, vstage;
    OpId first, end;
  };
  bool ep_interleave_ = false;  // the open pair is issued in the combined 1F1B order
  OpId pair_first_op_ = 0;
  std::vector<PairHalf> pair_halves_;
  std::vector<EpCtx> pair_ctx_;  // per op of the open pair, from emit_last
  EpCtx ep_ctx_;                 // the layer and step being emitted now
  std::vector<std::pair<OpId, std::vector<OpId>>> issue_orders_;  // (a pair's first op, its ops in issue order)
  static EpStep ep_step_of(std::string_view step, bool moe_layer) {
    if (step == "norm1" || step == "qkv" || step == "attn_scores" || step == "attn" || step == "attn_out") return EpStep::attention;
    if (!moe_layer) return EpStep::dense_mlp;
    if (step == "dispatch") return EpStep::dispatch;
    if (step == "expert_out" || step == "expert_act") return EpStep::experts;
    if (step == "mlp_out") return EpStep::combine;
    return EpStep::moe_pre;  // norm2, router
  }
  // Emits a layer step's forward or backward in its module, tagged with its layer and step for the open EP pair.
  void run_step(int l, std::string_view step, bool moe_layer, const std::function<void()>& emit_step) {
    mark_module(module_of_step(step, moe_layer));
    if (ep_interleave_) ep_ctx_ = EpCtx{l, ep_step_of(step, moe_layer)};
    emit_step();
    if (step == "router") router_step_end_ = g_.ops.size();
    ep_ctx_ = EpCtx{};
  }
  // `after_exchange`: an exchange (an op on the exchanges' stream) of the same step was emitted before this op. In
  // the dispatch and combine steps the compute before the exchange belongs to the node before it, the compute after
  // it to the node after it (the permutations and chunk sorts of each dispatcher are emitted where it runs them).
  // A weight-gradient GEMM (gemm_wgrad's and the grouped experts' names).
  bool is_wgrad(const Op& op) const { return g_.names.str(op.name.base).find(".wgrad") != std::string_view::npos; }
  EpNode ep_node(const Op& op, EpStep step, bool forward, bool after_exchange) const {
    if (op.phase == Phase::recompute) return EpNode::b_combine;  // first in its slot, in emission order
    const std::string_view name = g_.names.str(op.name.base);
    const bool exchange = op.kind == OpKind::collective && op.stream == StreamKind::comm_ep;
    switch (step) {
      case EpStep::none: return EpNode::none;
      case EpStep::attention:
      case EpStep::moe_pre: return forward ? EpNode::f_pre : EpNode::b_pre;
      // A dense layer's MLP; its wgrads stay with its dgrads (a tp collective may wait for them).
      case EpStep::dense_mlp: return forward ? EpNode::f_mlp : EpNode::b_mlp;
      case EpStep::dispatch:
        if (exchange) return forward ? EpNode::f_dispatch : EpNode::b_dispatch;
        if (forward) return after_exchange ? EpNode::f_mlp : EpNode::f_pre;
        return after_exchange ? EpNode::b_pre : EpNode::b_mlp;
      case EpStep::experts:
        return forward ? EpNode::f_mlp : is_wgrad(op) ? EpNode::b_mlp_dw : EpNode::b_mlp;
      case EpStep::combine:
        if (name.starts_with("shared.")) return forward ? EpNode::f_pre : EpNode::b_pre;  // in pre_dispatch
        if (exchange) return forward ? EpNode::f_combine : EpNode::b_combine;
        if (forward) return after_exchange ? EpNode::f_combine_compute : EpNode::f_mlp;
        return after_exchange ? EpNode::b_mlp : EpNode::b_combine;
    }
    return EpNode::none;
  }
  // The open pair while close_pair orders it: its ops [first, end), its halves, and per op its node and key.
  struct PairKey {
    int slot = 0, node = 0;
  };
  struct PairLayout {
    OpId first = 0, end = 0;
    const PairHalf* fwd = nullptr;
    const PairHalf* bwd = nullptr;
    int epilogue = 0;            // the slot after every layer's
    std::vector<PairKey> key;    // per op: (layer slot, node) in issue order
    std::vector<EpNode> node;
    bool contains(OpId id) const { return id >= first && id < end; }
    int half_of(OpId id) const { return id >= fwd->first && id < fwd->end ? 0 : 1; }
  };
  // Orders the closed pair's ops (see EpNode) and records the order. Dependencies between the two chunks'
  // ops (micro-batches that share no data) are dropped: they come from emitting one chunk after the other.
  // A host wait of one chunk for the other's op (the loss's NaN check) moves after the pair, where Megatron
  // reads it (after the combined step returns). The expert dispatch's backward waits for the experts' dgrad,
  // not their wgrad (mlp_bwd_dw is issued after it).
  void close_pair() {
    PairLayout P;
    P.first = pair_first_op_;
    P.end = static_cast<OpId>(g_.ops.size());
    if (pair_halves_.size() != 2 || P.end == P.first) return;
    const OpId S = P.first, E = P.end;
    pair_ctx_.resize(E - S);
    P.fwd = pair_halves_[0].forward ? &pair_halves_[0] : &pair_halves_[1];
    P.bwd = pair_halves_[0].forward ? &pair_halves_[1] : &pair_halves_[0];
    if (!P.fwd->forward || P.bwd->forward || P.fwd->micro == P.bwd->micro)
      throw std::logic_error("close_pair: a pair is the forward and the backward of two micro-batches");
    const int nf = end_layer(P.fwd->vstage) - first_layer(P.fwd->vstage);
    const int nb = end_layer(P.bwd->vstage) - first_layer(P.bwd->vstage);
    const int overlapped = std::min(nf, nb);
    P.epilogue = 2 + nf + nb;
    P.key.assign(E - S, PairKey{});
    P.node.assign(E - S, EpNode::none);
    OpId moved_wait = kNoOp;
    // The chunks' pre- and post-processing (TransformerModelChunkSchedulePlan.run): before the layers the forward's
    // receive and embedding, then the backward's receive and loss backward; after them the forward's send, the
    // backward's send, the backward's delayed wgrads (delay_first_layer_wgrads), the forward's post-process (output
    // layer and loss) and the backward's embedding backward.
    const bool f_has_loss = P.fwd->vstage == vstages_ - 1, b_has_embedding = P.bwd->vstage == 0;
    for (const PairHalf* h : {P.fwd, P.bwd}) {
      const bool fwd = h->forward;
      EpCtx step_of_exchange;  // the layer and step of the last exchange seen
      for (OpId i = h->first; i < h->end; ++i) {
        const EpCtx& c = pair_ctx_[i - S];
        if (c.layer < 0 || c.step == EpStep::none) continue;
        const bool after = step_of_exchange.layer == c.layer && step_of_exchange.step == c.step;
        P.node[i - S] = ep_node(g_.ops[i], c.step, fwd, after);
        if (g_.ops[i].kind == OpKind::collective && g_.ops[i].stream == StreamKind::comm_ep && g_.ops[i].phase != Phase::recompute)
          step_of_exchange = c;
      }
      PairKey cur{0, fwd ? 0 : 1};
      OpId last_mlp = kNoOp;      // the backward's latest mlp_bwd op
      OpId last_combine = kNoOp;  // the backward's latest combine_bwd op
      for (OpId i = h->first; i < h->end; ++i) {
        Op& op = g_.ops[i];
        const EpCtx& c = pair_ctx_[i - S];
        const EpNode n = P.node[i - S];
        if (n != EpNode::none) {
          const int ordinal = fwd ? c.layer - first_layer(h->vstage) : end_layer(h->vstage) - 1 - c.layer;
          const int slot = fwd ? (ordinal < overlapped ? 1 + ordinal : 1 + nb + (ordinal - overlapped)) : 1 + ordinal;
          cur = PairKey{slot, static_cast<int>(n)};
        } else if (c.layer == kEpPre) {
          cur = PairKey{0, fwd ? 0 : 1};
        } else if (c.layer == kEpPost) {
          cur = PairKey{P.epilogue, fwd ? (f_has_loss ? 3 : 0) : (b_has_embedding ? 4 : 1)};
        }  // (else: with the op emitted before it)
        P.key[i - S] = cur;
        SmallVec<OpId, 3> deps;
        for (OpId d : op.deps) {
          if (P.contains(d) && P.half_of(d) != P.half_of(i)) continue;
          if (n == EpNode::b_dispatch && P.contains(d) && P.node[d - S] == EpNode::b_mlp_dw && last_mlp != kNoOp) d = last_mlp;
          // The combine backward's exchange follows the combine's gradient, not the shared experts' backward
          // emitted before it (pre_dispatch_bwd, issued later).
          if (n == EpNode::b_combine && P.contains(d) && P.node[d - S] == EpNode::b_pre && last_combine != kNoOp) d = last_combine;
          if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
        }
        op.deps = std::move(deps);
        if (n == EpNode::b_mlp) last_mlp = i;
        if (n == EpNode::b_combine) last_combine = i;
        if (op.host_waits_for != kNoOp && P.contains(op.host_waits_for) && P.half_of(op.host_waits_for) != P.half_of(i)) {
          moved_wait = moved_wait == kNoOp ? op.host_waits_for : std::max(moved_wait, op.host_waits_for);
          op.host_waits_for = kNoOp;
        }
      }
    }
    delay_first_layer_wgrads(P);
    if (moved_wait != kNoOp && pending_host_wait_ == kNoOp) pending_host_wait_ = moved_wait;
    std::vector<OpId> order(E - S);
    std::iota(order.begin(), order.end(), S);
    std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
      const PairKey& x = P.key[a - S];
      const PairKey& y = P.key[b - S];
      return x.slot != y.slot ? x.slot < y.slot : x.node < y.node;
    });
    // A host wait from before the pair (the previous forward's NaN check at pp 1, where the backward is emitted
    // first) stops the host before the pair's first op.
    for (OpId i = S; i < E; ++i) {
      Op& op = g_.ops[i];
      if (op.host_waits_for == kNoOp || op.host_waits_for >= S || i == order[0] || g_.ops[order[0]].host_waits_for != kNoOp) continue;
      g_.ops[order[0]].host_waits_for = op.host_waits_for;
      op.host_waits_for = kNoOp;
    }
    check_pair_order(P, order);
    capture_pair_graphs(P, order);
    issue_orders_.emplace_back(S, std::move(order));
  }
  // --delay-wgrad-compute (which Megatron-Core's EP overlap is run with: the ModelZoo's A2A_OVERLAP sets both): the
  // backward chunk's last layer (its first decoder layer) issues its pre_dispatch wgrads after the chunk's sends, which
  // wait for the data gradient only; what waits for those wgrads (the gradient reductions) follows them.
  void delay_first_layer_wgrads(PairLayout& P) {
    const OpId S = P.first;
    const int l0 = first_layer(P.bwd->vstage);
    const PairKey after_sends{P.epilogue, 2};  // after both sends, before the forward's post-process
    OpId last_data = kNoOp;
    std::vector<OpId> delayed;
    const auto waits_on_delayed = [&](OpId d) { return std::find(delayed.begin(), delayed.end(), d) != delayed.end(); };
    for (OpId i = P.bwd->first; i < P.bwd->end; ++i) {
      Op& op = g_.ops[i];
      const EpCtx& c = pair_ctx_[i - S];
      if (c.layer == l0 && P.node[i - S] == EpNode::b_pre && op.kind == OpKind::kernel && is_wgrad(op)) {
        delayed.push_back(i);
        P.key[i - S] = after_sends;
        continue;
      }
      PairKey& k = P.key[i - S];
      if (!delayed.empty() && std::any_of(op.deps.begin(), op.deps.end(), waits_on_delayed)) {
        if (g_.names.str(op.name.base).starts_with("pp.send") && last_data != kNoOp) {
          SmallVec<OpId, 3> deps;
          for (OpId d : op.deps) {
            if (waits_on_delayed(d)) d = last_data;
            if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
          }
          op.deps = std::move(deps);
        } else if (k.slot < P.epilogue || (k.slot == P.epilogue && k.node < after_sends.node)) {
          k = after_sends;
          delayed.push_back(i);  // (what waits for it follows it too)
          continue;
        }
      }
      if (k.slot != P.epilogue && op.stream == StreamKind::compute) last_data = i;
    }
  }
  // Every dependency and host wait inside the pair comes earlier in the order: else the replay would stall, so the
  // builder says which op it is.
  void check_pair_order(const PairLayout& P, const std::vector<OpId>& order) const {
    const OpId S = P.first;
    std::vector<OpId> pos(P.end - S);
    for (OpId p = 0; p < P.end - S; ++p) pos[order[p] - S] = p;
    for (OpId i = S; i < P.end; ++i) {
      for (OpId d : g_.ops[i].deps)
        if (P.contains(d) && pos[d - S] >= pos[i - S])
          throw std::logic_error(fmt::format("EP overlap: op {} would be issued before {}, which it waits for", g_.op_name(i), g_.op_name(d)));
      const OpId w = g_.ops[i].host_waits_for;
      if (w != kNoOp && P.contains(w) && pos[w - S] >= pos[i - S])
        throw std::logic_error(fmt::format("EP overlap: op {} would be issued before {}, which its host waits for", g_.op_name(i), g_.op_name(w)));
    }
  }
  // Whole-step CUDA graphs (cuda_graphs without a scope): one graph per chunk, as without the overlap. The engine opens
  // a graph where the micro-batch in the ops' names changes in program order, which the interleaved order changes at
  // every node: each half's ops become one captured graph, opened at its first op in the order.
  void capture_pair_graphs(const PairLayout& P, const std::vector<OpId>& order) {
    if (!t_.cuda_graphs || partial_graphs_) return;
    bool opened[2] = {false, false};
    for (OpId id : order) {
      Op& op = g_.ops[id];
      if (op.graph != GraphLaunch::step) continue;
      const int h = P.half_of(id);
      op.graph = GraphLaunch::captured;
      op.graph_start = !opened[h];
      opened[h] = true;
    }
  }

  // ---- layout (workloads/pipeline_schedule.h) ----------------------------------------------------
  int first_layer(int v) const { return vstage_first_layer_[v]; }
  int end_layer(int v) const { return vstage_first_layer_[v + 1]; }

  // ---- parameters held by this rank --------------------------------------------------------
  // Weights of layer l on one rank: attention and dense MLP (shared experts too) split by tp; routed
  // experts split by ep·etp (Megatron's expert tensor parallelism); MLA's down projections, router and norms
  // replicated.
  // The two parts are replicated over different groups: dense weights over the dp·cp ranks of the
  // same tp rank and stage, routed experts over the expert-data-parallel group of edp =
  // tp·cp·dp/(ep·etp) ranks. Gradients, optimizer state and FSDP shards follow each part's group.
  double layer_weights(int l) const { return dense_weights(l) + expert_weights(l); }
  double dense_weights(int l) const {
    const LayerParams p = layer_params(m_, l);
    // With more tp ranks than key/value heads Megatron-Core replicates each head over tp / kv_heads ranks
    // (num_query_groups a divisor of tp, transformer_config.py): those weights split kv_heads ways only.
    const double kv = !m_.mla && m_.kv_heads > 0 && m_.kv_heads < tp_ ? 2.0 * m_.hidden * m_.kv_heads * m_.head_dim : 0.0;
    return (p.attention - kv + p.mlp) / tp_ + kv / std::max(1, m_.kv_heads) + p.attention_replicated + p.router + p.norms;
  }
  double expert_weights(int l) const { return layer_params(m_, l).experts / (static_cast<double>(ep_) * etp_); }
  // Ranks over which each part's state is sharded by ZeRO/FSDP: all its replicas, or with hybrid sharding its
  // shard group (1/rep_ of them), and the communicators of those shards.
  double dense_replicas() const { return static_cast<double>(dp_) * cp_ / rep_; }
  double expert_replicas() const { return static_cast<double>(edp_) / rep_; }
  CommGroup dense_shard_group() const { return rep_ > 1 ? CommGroup::dp_shard : CommGroup::dp_cp; }
  CommGroup expert_shard_group() const { return rep_ > 1 ? CommGroup::edp_shard : CommGroup::edp; }
  double embedding_weights() const { return static_cast<double>(m_.vocab) * m_.hidden / tp_; }
  double head_weights() const {
    // The output layer's table, or with tied embeddings none of its own; but a last stage that is not the first
    // keeps a copy of the word embeddings when it needs them (Megatron-Core's shared_embedding_or_output_weight,
    // its gradients all-reduced with the first stage's): for the tied output layer, and under MTP to embed the
    // shifted tokens. (JAX: one parameter tree, kept as it was.)
    const double tables = (m_.tied_embeddings ? 0.0 : 1.0) + (keeps_embedding_copy() ? 1.0 : 0.0);
    return tables * embedding_weights() + m_.hidden + mtp_ * mtp_module_weights();
  }
  bool keeps_embedding_copy() const { return pp_ > 1 && !jax_ && (m_.tied_embeddings || mtp_ > 0); }
  // Each MTP depth's module around its transformer layer: the column-parallel projection eh_proj from 2h to h and
  // three RMSNorm gains (enorm, hnorm, its final norm), as Megatron-LM's FLOP counter counts them. They sit with the
  // output layer's weights (one bucket, gathered before the first depth's input and kept until its backward).
  double mtp_module_weights() const { return 2.0 * h_ * h_ / tp_ + 3.0 * h_; }
  // Under FSDP a depth embeds with the word embeddings: on the first stage (pp 1) they are gathered again with the
  // head, since the first lookup's gather was released.
  double head_gather_weights() const {
    const bool table_elsewhere = mtp_ > 0 && !m_.tied_embeddings && !keeps_embedding_copy();
    return head_weights() + (table_elsewhere ? embedding_weights() : 0.0);
  }
  bool holds_embedding() const { return rank_ == 0; }
  bool holds_head() const { return rank_ == (vstages_ - 1) % pp_; }
  double local_params() const { return local_expert_params() + local_dense_params(); }
  // Sum of per_layer(l) over this rank's layers (its vp virtual stages v = chunk·pp + rank).
  template <class PerLayer>
  double sum_over_local_layers(PerLayer per_layer) const {
    double n = 0;
    for (int c = 0; c < vp_; ++c) {
      const int v = c * pp_ + rank_;
      for (int l = first_layer(v); l < end_layer(v); ++l) n += per_layer(l);
    }
    return n;
  }
  double local_expert_params() const {
    return sum_over_local_layers([this](int l) { return expert_weights(l); });
  }
  double local_dense_params() const {
    double n = sum_over_local_layers([this](int l) { return dense_weights(l); });
    if (holds_embedding()) n += embedding_weights();
    if (holds_head()) n += head_weights();
    return n;
  }
  // The layers' weights Transformer Engine runs in fp8 on this rank: every local layer's less its router and norms.
  double local_quantized_weights() const {
    return sum_over_local_layers([this](int l) {
      const LayerParams p = layer_params(m_, l);
      return layer_weights(l) - p.router - p.norms;
    });
  }
  // The quantized copies of a weight Transformer Engine keeps: row-wise and column-wise, except a per-tensor FP8 weight
  // (delayed or current scaling) on Blackwell, whose tensor cores take the row-wise data in every layout: TE then makes
  // no transpose (Float8Quantizer / Float8CurrentScalingQuantizer::create_tensor skip it when
  // nvte_is_non_tn_fp8_gemm_supported(), transformer_engine/pytorch/csrc/quantizer.cpp). MXFP8 and NVFP4 scale along
  // one axis, and blockwise FP8 per 128-block: both copies.
  double weight_copies() const {
    const bool per_tensor = t_.precision == sim::Dtype::fp8 && t_.fp8_recipe != Fp8Recipe::blockwise;
    return per_tensor && sys_.gpu.architecture != hw::Architecture::hopper ? 1.0 : 2.0;
  }
  // Scale bytes per quantized value in Transformer Engine's formats: MXFP8 one E8M0 byte per 32; blockwise FP8 one
  // fp32 per 1x128 tile of an activation or per 128x128 block of a weight (DeepSeek-V3's scheme, --fp8-recipe
  // blockwise); per-tensor FP8 none to speak of; NVFP4's are in its matmul_input_bytes.
  double te_scale_bytes(bool weight) const {
    if (t_.precision == sim::Dtype::mxfp8) return 1.0 / 32.0;
    if (t_.precision == sim::Dtype::fp8 && t_.fp8_recipe == Fp8Recipe::blockwise) return weight ? 4.0 / (128.0 * 128.0) : 4.0 / 128.0;
    return 0.0;
  }
  // This rank's share of its parameters' state when it is sharded over each part's replicas.
  double sharded_params() const {
    return local_dense_params() / dense_replicas() + local_expert_params() / expert_replicas();
  }

  // ---- emitting ops ------------------------------------------------------------------------
  OpId emit(Op&& op) {
    g_.add(std::move(op));
    return emit_last();
  }
  // The next op, made in place at the end of the graph (an op is 256 bytes: moving one in cost as
  // much as filling it); fill it, then emit_last().
  Op& new_op() { return g_.ops.emplace_back(); }
  // Emits the graph's last op: its rank, the dependencies and host wait pending for it.
  OpId emit_last() {
    const OpId id = static_cast<OpId>(g_.ops.size() - 1);
    Op& op = g_.ops[id];
    op.rank = static_cast<uint16_t>(rank_);
    if (!pending_deps_.empty()) {  // (most ops have none: no call)
      op.deps.insert(op.deps.end(), pending_deps_.begin(), pending_deps_.end());
      pending_deps_.clear();
    }
    if (pending_host_wait_ != kNoOp) {
      op.host_waits_for = pending_host_wait_;
      pending_host_wait_ = kNoOp;
    }
    if (op.kind == OpKind::kernel && !overlapped_.empty() && !quantizing_) {
      // The first kernel after an overlapped TP collective runs beside it; the second waits. (A GEMM's
      // low-precision cast is not that kernel: Transformer Engine casts before it exchanges, see gemm().)
      if (overlap_countdown_ == 0) {
        overlap_countdown_ = 1;
      } else {
        op.deps.insert(op.deps.end(), overlapped_.begin(), overlapped_.end());
        overlapped_.clear();
        overlap_countdown_ = 0;
      }
    }
    if (fsdp_mark_next_ && op.stream == StreamKind::compute) {
      fsdp_prev_start_ = id;
      fsdp_mark_next_ = false;
    }
    if (pending_cross_) {
      cross_deps_.emplace_back(id, *pending_cross_);
      pending_cross_.reset();
    }
    if (ep_interleave_) {
      pair_ctx_.resize(id - pair_first_op_ + 1);
      pair_ctx_.back() = ep_ctx_;
    }
    return id;
  }
  // The op the next one follows: the last emitted, skipping data-parallel collectives (gradient
  // reductions, parameter gathers). Those run on their own streams and communicators and nothing on
  // the critical path waits for them (Megatron: a pipeline send and a DP reduce-scatter run at once,
  // sharing SMs and links but not queuing behind each other); a dependency on them is explicit.
  OpId last() const {
    for (auto i = static_cast<OpId>(g_.ops.size() - 1); i > 0; --i)
      if (!is_data_parallel_stream(g_.ops[i].stream)) return i;
    return 0;
  }
  static bool is_data_parallel_stream(StreamKind s) { return s == StreamKind::comm_dp || s == StreamKind::comm_grad; }
  // The output layer's GEMMs stay bf16 under fp8-class training in both frameworks: Megatron-Core's output layer
  // is its own ColumnParallelLinear, not a Transformer Engine module (gpt_model.py; DeepSeek-V3 also keeps the
  // output head in BF16, report sec. 3.3.1); MaxText passes no quantization to logits_dense ("We do not quantize
  // the logits matmul", AI-Hypercomputer/maxtext@e591f30 layers/decoders.py; its qwix rule matches only
  // "decoder/.*layers.*"), and Pax's TE path replaces only the transformer stack (praxis te_helper.py).
  bool fp8_class() const { return t_.fp8_class(); }
  bool xla_fp8_casts() const { return jax_ && t_.precision == sim::Dtype::fp8 && t_.fp8_casts == Fp8Casts::xla; }

  OpId gemm(std::string_view name, double m, double n, double k, double batch = 1, double extra_bytes = 0,
            Quant q = Quant::none) {
    if (fp8_class() && (q == Quant::forward || q == Quant::forward_weight_only || q == Quant::backward)) {
      // Cast to the low-precision format: row-wise and column-wise (transposed) copies, so
      // that the backward GEMMs find their operand in the layout tensor cores need.
      // A grouped GEMM (batch > 1, the experts) casts every expert's operands: Transformer Engine's
      // GroupedLinear quantizes the whole permuted input in one group_quantize over all m_splits
      // (grouped_linear.py, TE d0067d0), not one expert's chunk. (XLA's fused casts: kept as they were.)
      // The weight is cast on a step's first micro-batch only: Megatron-Core's TE modules pass
      // is_first_microbatch, and TE keeps the cast weight for the later micro-batches (its weight workspace;
      // Megatron-LM training.py resets the flag each step). XLA's casts: kept as they were.
      // Under --fp8-param-gather the parameters already are fp8 tensors: no cast of the weight here (the optimizer
      // casts its shard after the step, 1/dp of it, not modelled).
      const bool weight_cast = jax_ || (mb_ == 0 && !t_.fp8_param_gather);
      const double per = jax_ ? 1.0 : batch;
      const double act = q == Quant::forward_weight_only ? 0.0 : m * k * per;
      const double weight = (q == Quant::forward || q == Quant::forward_weight_only) && weight_cast ? k * n * per : 0.0;
      const double in = act + weight;
      // The activation's (or the incoming gradient's) column-wise copy feeds only the wgrad: under
      // training.fp8_wgrad false (Megatron --no-fp8-wgrad) TE writes the row-wise copy alone and the wgrad
      // reads the bf16 tensor. The weight keeps both (the dgrad reads its transpose).
      const double a = pr_.activation_bytes, b = pr_.matmul_input_bytes;
      // XLA's lowering of flax's FP8 dot (training.fp8_casts xla) casts each operand in one fusion that writes one
      // fp8 layout (its amax reduced beside it), then transposes the fp8 copy the other GEMM needs in a kernel of its
      // own, as cuBLASLt's FP8 GEMMs on Hopper take both operands K-major: the activation's for the wgrad, the
      // weight's for the dgrad, the output gradient's for the wgrad (calibration/data/h100-2026-12-06-jax-fp8: 168
      // fp8 transposes over 8 layers, 24.6 ms). A grouped (expert) GEMM keeps Transformer Engine's casts: how XLA
      // lowers an FP8 grouped matmul was not read.
      const bool xla_cast = xla_fp8_casts() && batch == 1;
      const double bytes = xla_cast               ? in * (a + b)
                           : t_.fp8_wgrad || jax_ ? in * (a + 2 * b)
                                                  : in * a + (2 * weight + act) * b;
      // Under tp_comm_overlap Transformer Engine casts the local shard and exchanges the fp8 data, so the
      // cast neither waits for the overlapped exchange nor takes the GEMM's place beside it.
      quantizing_ = true;
      // NVFP4's second-level scale is per tensor and from the current amax, which the quantize kernel needs
      // before it starts: one more read of the bf16 input (TE JAX calculate_amax, a jnp.amax reduction before
      // the quantize custom call; PyTorch nvte_compute_amax; TE f1d5f8d cpp_extensions/quantization.py,
      // pytorch/csrc/quantizer.cpp). FP8 with current (tensorwise) scaling does the same:
      // Float8CurrentScalingQuantizer::quantize_impl runs nvte_compute_amax_with_config before nvte_quantize_v2
      // (TE d0067d0 pytorch/csrc/quantizer.cpp). Delayed scaling (the previous steps' amax) and MXFP8's and the
      // blockwise recipe's block scales need no such pass. (Not modelled: the amax all-reduce over the tensor-
      // parallel group that current scaling adds where TE sets with_amax_reduction, and the scale kernel.)
      const bool current_amax = t_.precision == sim::Dtype::nvfp4 ||
                                (t_.precision == sim::Dtype::fp8 && t_.fp8_recipe == Fp8Recipe::tensorwise);
      if (in > 0) {
        if (current_amax) vector(cat(name, ".amax"), in * a, in);
        vector(cat(name, ".quantize"), bytes, 2 * in);
        if (xla_cast) vector(cat(name, ".transpose"), 2 * in * b, 0);
      }
      quantizing_ = false;
    }
    Op& op = new_op();
    op.name = named(name);
    op.phase = phase_;
    op.unit = ExecUnit::tensor;
    const bool fp32 = q == Quant::fp32;
    op.dtype = fp32 ? sim::Dtype::tf32 : q == Quant::none && fp8_class() ? sim::Dtype::bf16 : t_.precision;
    const double in_bytes = fp32 ? 4.0 : op.dtype == sim::Dtype::bf16 ? pr_.activation_bytes : pr_.matmul_input_bytes;
    const double out_bytes = fp32 ? 4.0 : pr_.activation_bytes;
    op.flops = 2.0 * m * n * k * batch;
    op.hbm_bytes = batch * ((m * k + k * n) * in_bytes + m * n * out_bytes) + extra_bytes;
    // A GEMM that Transformer Engine runs in chunks beside a ring exchange: each chunk a launch of
    // m/tp rows (its efficiency at that shape; the op keeps the whole GEMM's FLOPs and bytes).
    op.gemm_mnk = {chunk_next_gemms_ > 0 ? m / tp_ : m, n, k};
    if (chunk_next_gemms_ > 0) --chunk_next_gemms_;
    op.gemm_batch = static_cast<int>(batch);
    return emit_last();
  }
  // A weight GEMM with its backward pair: dgrad (input gradient) and wgrad (accumulated into
  // the fp32 main gradient: read and write 4 B per weight).
  void gemm_fwd(std::string_view name, double m, double n, double k) { gemm(name, m, n, k, 1, 0, Quant::forward); }
  void gemm_dgrad(std::string_view name, double m, double n, double k, Quant q = Quant::backward) {
    gemm(cat(name, ".dgrad"), m, k, n, 1, 0, q);
  }
  // Under fp8-class training the wgrad runs in the low precision too: Transformer Engine quantizes all three
  // GEMMs of a linear layer (Megatron-LM --fp8-wgrad, on by default: recipe override_linear_precision
  // (False, False, False); DeepSeek-V3 report sec. 3.3.1, Fprop, Dgrad and Wgrad in FP8).
  // (training.fp8_wgrad false, Megatron --no-fp8-wgrad: bf16.)
  Quant wgrad_quant() const { return t_.fp8_wgrad ? Quant::operands_cast : Quant::none; }
  OpId gemm_wgrad(std::string_view name, double m, double n, double k) { return gemm_wgrad(name, m, n, k, wgrad_quant()); }
  OpId gemm_wgrad(std::string_view name, double m, double n, double k, Quant q) {
    const Joined wgrad = cat(name, ".wgrad");  // (on the stack: the builder makes no string per op)
    const OpId id = gemm(wgrad, k, n, m, 1, wgrad_output_bytes(k * n), q);
    mark_wgrad(id, wgrad, k * n);
    return id;
  }
  // A weight-gradient GEMM of `elements` weight elements (dense or an expert group's): flagged as such, its fp32
  // main-gradient accumulate fused into it or, unfused, a kernel of its own after it.
  void mark_wgrad(OpId id, std::string_view name, double elements) {
    Op& op = g_.ops[id];
    op.accumulate_fp32 = fused_wgrad_accumulation();
    op.wgrad = 1;
    // Transformer Engine's cuBLASLt call (a bf16 wgrad in NT, measured with and without the fused accumulate); under
    // training.transformer_impl local the GEMM is PyTorch's or Megatron's own, whose cuBLAS calls pick other kernels.
    // (The output layer, always Megatron's own, clears it: column_parallel_backward.)
    op.wgrad_te_layout = !jax_ && t_.transformer_impl == TransformerImpl::transformer_engine;
    unfused_main_grad_add(name, elements);
  }
  // Megatron's --gradient-accumulation-fusion (on by default; Transformer Engine's fuse_wgrad_accumulation, also in its
  // GroupedLinear): the wgrad GEMM adds into the fp32 main_grad in its own epilogue, whose cost beyond a bf16-output
  // GEMM was measured (gpu.wgrad_accumulate_serial_bytes, calibration/data/h100-2026-12-06-wgrad-fp32-accumulate). In
  // JAX mode XLA's dot writes the gradient and a fusion of its own adds it (emitted where XLA runs it); under
  // training.gradient_accumulation_fusion false the GEMM writes the gradient and a kernel of its own adds it into the
  // fp32 main gradient (Megatron's DDP hook, distributed_data_parallel.py `param.main_grad.add_(param.grad.data)`:
  // read the bf16 gradient and the fp32 main gradient, write the sum).
  bool fused_wgrad_accumulation() const { return !jax_ && t_.gradient_accumulation_fusion; }
  bool unfused_wgrad_accumulation() const { return !jax_ && !t_.gradient_accumulation_fusion; }
  // What a wgrad GEMM of `elements` weight elements writes beyond its operands: the fp32 main gradient read and
  // written, or, unfused, the bf16 gradient alone (its add into the main gradient is unfused_main_grad_add's).
  double wgrad_output_bytes(double elements) const {
    return unfused_wgrad_accumulation() ? elements * pr_.activation_bytes : 2 * elements * pr_.grad_bytes;
  }
  void unfused_main_grad_add(std::string_view wgrad, double elements) {
    if (!unfused_wgrad_accumulation()) return;
    vector(cat(wgrad, ".main_grad_add"), elements * (pr_.activation_bytes + 2 * pr_.grad_bytes), elements);
  }

  OpId vector(std::string_view name, double bytes, double flops, double sfu = 0) {
    Op& op = new_op();
    op.name = named(name);
    op.phase = phase_;
    op.unit = ExecUnit::vector;
    op.dtype = sim::Dtype::fp32;
    op.flops = flops;
    op.hbm_bytes = bytes;
    op.sfu_ops = sfu;
    return emit_last();
  }

  // The residual add after attention or the MLP (read the branch and the residual, write the sum), with
  // hidden dropout (training.hidden_dropout) a random draw per element and a one-byte mask written for
  // the backward.
  OpId residual(std::string_view name) {
    const double elems = Tsp_ * h_, a = pr_.activation_bytes;
    // (The mask stays for the backward: attn_out's step saves it with its output; the MLP's, whose output is the
    // layer's, with the MLP's last internal step.)
    if (t_.hidden_dropout <= 0) return vector(name, 3 * elems * a, elems);
    return vector(name, 3 * elems * a + elems, elems + elems * kDropoutRngOpsPerElement);
  }
  // The one-byte mask hidden dropout keeps per element of the residual for its backward (PyTorch's dropout saves a
  // bool mask; Korthikanti et al. 2022 count it: sbh of the 34sbh per layer, once after attention and once after the MLP).
  // (JAX mode: none. MaxText's dropout is one mask per layer broadcast over the sequence, b·h, and the importer does
  // not translate it; hidden_dropout there stands for Megatron's bias-dropout-add in time only.)
  double residual_mask_bytes() const { return t_.hidden_dropout > 0 && !jax_ ? Tsp_ * h_ : 0.0; }
  // Hidden dropout's backward: the gradient scaled by the saved mask (read both, write the gradient).
  void residual_dropout_bwd(std::string_view name) {
    if (t_.hidden_dropout <= 0) return;
    const double elems = Tsp_ * h_;
    vector(name, elems * (2 * pr_.activation_bytes + 1), elems);
  }

  OpId collective(std::string_view name, CollectiveOp c, CommGroup grp, double bytes, SmallVec<OpId, 3> deps = {}) {
    Op& op = new_op();
    op.name = named(name);
    op.kind = OpKind::collective;
    const bool data_parallel = grp == CommGroup::dp || grp == CommGroup::dp_cp || grp == CommGroup::edp ||
                               grp == CommGroup::dp_shard || grp == CommGroup::edp_shard ||
                               grp == CommGroup::dp_replicate;
    // XLA issues every asynchronous collective on one stream (AsyncStreamKind::kCollective, openxla/xla
    // xla/service/gpu/runtime/nccl_clique_key.h): with unrolled layers the weight gathers queue with the
    // gradient reductions, in the order of gathers_before_grads. Megatron and FSDP gather on a stream of their
    // own; scanned JAX layers keep two streams too (the pipeliner's order on one stream is not modelled).
    op.stream = !data_parallel                                               ? StreamKind::comm
                : (c == CollectiveOp::all_gather && !gathers_before_grads()) ? StreamKind::comm_dp
                                                                             : StreamKind::comm_grad;
    op.phase = phase_;
    op.coll = c;
    op.group = grp;
    op.coll_bytes = bytes;
    op.deps = std::move(deps);
    // With more than one hardware queue (XLA's default; Megatron-Core's EP overlap) a collective reaches the GPU
    // behind the compute kernels resident when it becomes ready; launched in order on one queue
    // (CUDA_DEVICE_MAX_CONNECTIONS=1, Megatron's usual setting) it does not (op_graph.h). Userbuffer exchanges,
    // whose GEMM leaves them SMs or which run on the copy engines, are exempted where they are made.
    op.queues_behind_compute = t_.max_connections() > 1;
    return emit_last();
  }

  // Collectives on the critical path (TP with sequence parallelism, MoE dispatch/combine): the
  // next compute op waits for them.
  OpId inline_collective(std::string_view name, CollectiveOp c, CommGroup grp, double bytes) {
    const OpId id = collective(name, c, grp, bytes, {last()});
    pending_deps_.push_back(id);
    return id;
  }
  // Transformer Engine's userbuffer overlaps under tp_comm_overlap (its initialize_ub defaults,
  // transformer_engine/pytorch/module/base.py, get_default_config): ring exchange for the all-gathers
  // whose GEMM consumes them (qkv and fc1 forward, proj and fc2 dgrad) on the copy engines (use_ce,
  // 1 SM, no SM margin), the GEMM in tp chunks; pipeline for the forward reduce-scatters (16 SMs set
  // aside, set_sm_margin), the GEMM in 4 chunks; bulk for the backward's other exchanges (16 SMs set
  // aside); each only under tp_comm_overlap, inline otherwise. `nccl`: an NCCL collective beside the next GEMM under
  // tp_comm_overlap, inline otherwise (XLA's, JAX mode). `async`: an asynchronous NCCL call beside the next GEMM
  // whatever tp_comm_overlap says (Megatron-Core's own ColumnParallelLinear, the output layer, and Transformer
  // Engine's modules without userbuffers, e.g. the MTP eh_proj, which rely on CUDA_DEVICE_MAX_CONNECTIONS=1 to have it
  // scheduled before the GEMM). `none`: inline, an NCCL kernel the next op waits for.
  enum class TpOverlap { ring_exchange, pipeline, bulk, nccl, async, none };
  static constexpr int kUbPipelineSplits = 4;  // TE: num_splits of the pipeline method
  static constexpr int kUbSms = 16;            // TE: num_sm of the pipeline and bulk methods
  // A pipeline or bulk exchange: a userbuffer kernel on the SMs set aside for it.
  static void on_userbuffer_sms(Op& op) {
    op.comm_kernel = CommKernel::dedicated_sms;
    op.comm_sms = kUbSms;
    op.queues_behind_compute = false;  // the GEMM beside it is launched on the other SMs (set_sm_margin)
  }
  // `gemms` GEMMs consume the exchange (a ring exchange splits each into tp chunks).
  void tp_collective(std::string_view name, CollectiveOp c, double bytes, TpOverlap how, int gemms = 1) {
    if (tp_ == 1) return;
    if (!t_.sequence_parallel) {
      // Without sequence parallelism every TP rank holds all tokens: no gathers, and partial
      // sums are all-reduced where sequence parallelism reduce-scatters them.
      if (c == CollectiveOp::all_gather) return;
      if (c == CollectiveOp::reduce_scatter) c = CollectiveOp::all_reduce;
    }
    if (t_.tp_comm_overlap && how == TpOverlap::pipeline && !jax_ && g_.ops.back().unit == ExecUnit::tensor &&
        g_.ops.back().kind == OpKind::kernel) {
      pipelined_reduce_scatter(name, c, bytes);
      return;
    }
    if ((t_.tp_comm_overlap && how != TpOverlap::none) || how == TpOverlap::async) {
      // Runs beside the next GEMM (chunked in the real kernels): the op after that GEMM waits
      // for it, the GEMM itself does not.
      const OpId id = collective(name, c, CommGroup::tp, bytes, {last()});
      overlapped_.push_back(id);
      Op& op = g_.ops[id];
      if (jax_) return;  // XLA's collectives are NCCL kernels (its collective matmul is not modelled)
      if (how == TpOverlap::ring_exchange) {
        op.comm_kernel = CommKernel::copy_engine;
        op.queues_behind_compute = false;  // copy engines, no SMs to wait for
        chunk_next_gemms_ = gemms;
      } else if (how != TpOverlap::nccl && how != TpOverlap::async) {
        on_userbuffer_sms(op);
      }
      return;
    }
    inline_collective(name, c, CommGroup::tp, bytes);
  }
  // Transformer Engine's pipeline overlap (split_overlap_rs, num_splits 4): the GEMM just emitted runs as
  // kUbPipelineSplits chunks of m/4 rows one after another on the compute stream, and each chunk's
  // output is reduce-scattered on the 16 SMs set aside while the next chunk computes; the op after the
  // GEMM waits for every piece (the layer's output is the scattered whole). The chunks keep the GEMM's
  // total FLOPs and bytes; its tensors are allocated by the first chunk and freed by the last.
  void pipelined_reduce_scatter(std::string_view name, CollectiveOp c, double bytes) {
    const OpId first = static_cast<OpId>(g_.ops.size() - 1);
    const double split = kUbPipelineSplits;
    Op& g = g_.ops[first];
    g.flops /= split;
    g.hbm_bytes /= split;
    g.gemm_mnk[0] /= split;
    Op chunk = g;  // (copied: emplacing more ops moves the vector)
    chunk.deps = {};
    chunk.allocs = {};
    chunk.frees = {};
    chunk.host_waits_for = kNoOp;
    auto frees = std::move(g_.ops[first].frees);
    g_.ops[first].frees = {};
    std::vector<OpId> pieces;
    for (int i = 0; i < kUbPipelineSplits; ++i) {
      OpId gi = first;
      if (i > 0) {
        new_op() = chunk;
        gi = emit_last();
      }
      const OpId rs = collective(name, c, CommGroup::tp, bytes / split, {gi});
      on_userbuffer_sms(g_.ops[rs]);
      pieces.push_back(rs);
    }
    g_.ops[pieces.back() - 1].frees = std::move(frees);
    pending_deps_.insert(pending_deps_.end(), pieces.begin(), pieces.end());
  }
  // Transformer Engine's LayerNormLinear backward under tp_comm_overlap (ub_bulk_dgrad, ub_bulk_wgrad; TE v1.8
  // transformer_engine/pytorch/module/layernorm_linear.py, backward: BULK_OVERLAP_AG with the dgrad GEMM, then
  // BULK_OVERLAP_RS with the wgrad GEMM, the main stream joining the userbuffer stream after each): the input's
  // all-gather for the wgrad runs beside the dgrad GEMM, the dgrad's reduce-scatter beside the wgrad GEMM.
  // Megatron mode with TP exchanges overlapped (XLA's are NCCL collectives, unchanged).
  // Without userbuffers Transformer Engine's column-parallel modules do the same with asynchronous NCCL calls
  // (TE 07afda98 linear.py, layernorm_linear.py, layernorm_mlp.py _*.backward: the input's gather_along_first_dim
  // with async_op=True before the dgrad GEMM, waited for before the wgrad GEMM; the dgrad's
  // reduce_scatter_along_first_dim, or allreduce without sequence parallelism, with async_op=True before the wgrad
  // GEMM, waited for at the module's end).
  bool bulk_gather_beside_dgrad() const {
    return !jax_ && tp_ > 1 && (t_.tp_comm_overlap ? t_.sequence_parallel : true);
  }
  TpOverlap bwd_tp_overlap() const { return t_.tp_comm_overlap ? TpOverlap::bulk : TpOverlap::async; }
  // The overlapped TP exchanges, handed to the caller, who makes the wgrad GEMM wait for them (TE joins the
  // userbuffer stream after the dgrad GEMM they ran beside), so the reduce-scatter emitted next counts the
  // wgrad as the GEMM it runs beside.
  std::vector<OpId> take_overlapped() {
    std::vector<OpId> ids = std::move(overlapped_);
    overlapped_.clear();
    overlap_countdown_ = 0;
    return ids;
  }
  // A column-parallel layer's backward with its two exchanges beside the GEMMs (`how`: TE's bulk userbuffers, or
  // asynchronous NCCL calls): the input gathered again for the wgrad beside the dgrad GEMM, which the wgrad waits for,
  // and the dgrad's reduce-scatter (all-reduce without sequence parallelism) beside the wgrad GEMM, which the next
  // kernel waits for. `quantized`: the GEMMs at the training's low precision (false: the output layer, bf16).
  void column_parallel_backward(std::string_view name, double m, double n, double k, double input_bytes, TpOverlap how,
                                bool quantized = true) {
    // What the layer's output gradient waits for (an inline exchange before it: context parallelism's
    // all-to-all or reduce-scatter of dQ/dK/dV) holds both the gather and the dgrad: the dgrad reads that
    // gradient, and the gather's NCCL stream is made to wait for the compute stream where it is issued
    // (ProcessGroupNCCL), which already waits for the exchange. The gather alone took it before.
    const std::vector<OpId> grad_ready = pending_deps_;
    tp_collective(cat(name, ".wgrad.tp_all_gather"), CollectiveOp::all_gather, input_bytes, how);
    if (pending_deps_.empty()) pending_deps_ = grad_ready;
    if (quantized) gemm_dgrad(name, m, n, k);
    else gemm_dgrad(name, m, n, k, Quant::none);
    const auto gathered = take_overlapped();
    tp_collective(cat(name, ".dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, input_bytes, how);
    pending_deps_.insert(pending_deps_.end(), gathered.begin(), gathered.end());
    if (quantized) {
      gemm_wgrad(name, m, n, k);
    } else {
      // Megatron's output layer is its own ColumnParallelLinear: its fused wgrad is Megatron's
      // fused_weight_gradient_mlp_cuda (cublasGemmEx), not Transformer Engine's cuBLASLt call.
      g_.ops[gemm_wgrad(name, m, n, k, Quant::none)].wgrad_te_layout = 0;
    }
  }
  // A Transformer Engine column-parallel layer's backward in a transformer layer: the gather beside the dgrad where
  // that is the job's mode, else dgrad, its input gradient's reduce-scatter, the input's gather, then the wgrad
  // (userbuffers' bulk exchanges under tp_comm_overlap).
  void column_parallel_layer_backward(std::string_view name, double m, double n, double k, double input_bytes) {
    if (bulk_gather_beside_dgrad()) {
      column_parallel_backward(name, m, n, k, input_bytes, bwd_tp_overlap());
      return;
    }
    gemm_dgrad(name, m, n, k);
    tp_collective(cat(name, ".dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, input_bytes, TpOverlap::bulk);
    tp_collective(cat(name, ".wgrad.tp_all_gather"), CollectiveOp::all_gather, input_bytes, TpOverlap::bulk);
    gemm_wgrad(name, m, n, k);
  }
  std::vector<OpId> overlapped_;        // TP collectives the op after the next GEMM waits for
  int chunk_next_gemms_ = 0;  // GEMMs a ring exchange runs in tp chunks
  bool quantizing_ = false;   // emitting a GEMM's fp8 cast (not the kernel beside an overlapped exchange)
  int overlap_countdown_ = 0;

  TensorId temp(std::string_view name, double bytes) {
    return g_.tensor(named(name), MemCategory::activations, bytes, false, static_cast<uint16_t>(rank_));
  }

  // ---- training state --------------------------------------------------------------------
  void add_resident_state() {
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
      resident("grads.fp32", MemCategory::gradients, n_grad * pr_.grad_bytes);
      resident("optimizer.master_m_v", MemCategory::optimizer,
               n_opt * (pr_.master_weight_bytes + pr_.optimizer_bytes), t_.offload_optimizer);
      // Offloaded, the optimizer also keeps a pinned fp32 copy of its gradient shard on the host (hybrid_optimizer.py).
      if (t_.offload_optimizer) resident("optimizer.grads_host", MemCategory::gradients, n_opt * pr_.grad_bytes, true);
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
  TensorId jax_grads_ = 0;
  bool jax_grads_allocated_ = false;
  std::optional<TensorId> attn_dp_;  // materialized attention: dP between its GEMM and the softmax backward
  bool scores_saved_ = false;        // the forward step being built is a residual the policy keeps
  bool scores_recomputed_ = false;   // this layer's backward recomputed the scores (XLA's heavy row fusions)

  // ---- XLA buffer assignment without donation ----------------------------------------------
  // XLA allocates every output for the whole execution and places a temporary, largest first,
  // inside an output allocation that is large enough when the output is written only after the
  // temporary died (buffer_assignment.cc; the HLO importer's finish_memory does the same on
  // real programs). Without donation the new moments are such outputs, written by the optimizer
  // at the very end (the new parameters' buffers already hold the gradients): one allocation
  // per parameter array, twice: layer weights stacked over the layers, or one array per layer
  // (training.stacked_layer_params; calibration/data/h200-2026-12-07-llama7b-per-layer). Under
  // lax.scan the residuals of one kind are one stacked buffer for all layers; unrolled, one per
  // layer. A temporary placed there costs no memory of its own (its bytes become 0).
  // A dense layer's weight arrays in JAX's parameter tree, in elements on this rank: the attention's projections
  // (one fused QKV array, or q, k and v apart under fused_qkv: false), the output projection, the MLP's two or three.
  std::vector<double> dense_layer_weight_arrays() const {
    const double q = h_ * hl_ * qk_dim_, k = h_ * kvl_ * qk_dim_, v = h_ * kvl_ * v_dim_, o = hl_ * v_dim_ * h_, fh = f_ * h_;
    std::vector<double> arrays = t_.fused_qkv ? std::vector<double>{q + k + v, o, fh, fh} : std::vector<double>{q, k, v, o, fh, fh};
    if (m_.ffn == FfnKind::swiglu) arrays.push_back(fh);
    return arrays;
  }
  void pack_into_outputs() {
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

  // The XLA buffers a JAX step output stands for, as fractions of its bytes (jax_residual_sizes):
  // the scores are fp32 scores or probabilities plus a bf16 copy (4 + 2 bytes); under scan the
  // fp32 residual stream and normalized input (4 + 4), the bf16 output and fp32 sum (2 + 4), and
  // four B·S·F tensors around the SwiGLU. Anything else is one buffer.
  std::vector<double> xla_buffer_parts(const std::string& tensor_name) const {
    auto is = [&](const std::string& step) {
      const auto pos = tensor_name.rfind("." + step);
      return pos != std::string::npos &&
             (pos + step.size() + 1 == tensor_name.size() || tensor_name.compare(pos + step.size() + 1, 11, ".recomputed") == 0);
    };
    if (is("attn_scores")) return {4.0 / 6, 2.0 / 6};
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

  // ---- layer steps -------------------------------------------------------------------------
  // A layer's steps do not change within a build (their ops read the builder's state when they are
  // emitted), so each layer's are made once, with the recompute policy's decision for each.
  std::vector<std::vector<Step>> steps_cache_;
  std::vector<char> steps_cached_;
  const std::vector<Step>& layer_steps(int l) {
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
  // Whether layer l runs under the recompute policy. Megatron's block method (training.recompute_num_layers N,
  // --recompute-method block) checkpoints only the first N layers of each model chunk, counted over the chunk's
  // own layers (core/recompute.py and, at r0.8, transformer_block.py _checkpointed_forward: `layer_idx <
  // recompute_num_layers` over num_layers_per_pipeline_rank, the chunk's layer count); the multi-token prediction
  // block skips block recompute (multi_token_prediction.py: "not supported for MTP yet ... Skipping recompute").
  bool layer_recomputed(int l) const {
    if (t_.recompute.mode != RecomputeMode::full || t_.recompute_num_layers <= 0) return true;
    if (l >= m_.layers) return false;
    const auto after = std::upper_bound(vstage_first_layer_.begin(), vstage_first_layer_.end(), l);
    const int v = static_cast<int>(after - vstage_first_layer_.begin()) - 1;  // the chunk holding l
    return l - first_layer(v) < t_.recompute_num_layers;
  }
  // The recompute policy's plan for layer l (dense or MoE; recomputed or, under the block method, not), made once.
  std::array<std::optional<SavePlan>, 4> plans_;
  const SavePlan& layer_plan(int l) {
    const bool moe = m_.is_moe_layer(l);
    const bool recomputed = layer_recomputed(l);
    auto& p = plans_[(moe ? 1 : 0) + (recomputed ? 0 : 2)];
    if (!p) p = save_plan(recomputed ? t_.recompute : RecomputePolicy{}, materialized_, moe);
    return *p;
  }
  // The policy keeps the experts' fc1 output but not their activation's (Megatron's moe_act recompute).
  bool moe_act_recomputed(int l) {
    const SavePlan& plan = layer_plan(l);
    return plan.keeps("expert_out") && !plan.keeps("expert_act");
  }
  std::vector<Step> make_layer_steps(int l) {
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

  // Under fp8-class training Transformer Engine's linear layers save their input for the weight gradient in
  // the low-precision format, not bf16: the quantized copy the forward made, column-wise only (linear.py at
  // NVIDIA/TransformerEngine@d0067d0, `_Linear.forward`: `inputmat.update_usage(rowwise_usage=False,
  // columnwise_usage=True)`, then `saved_inputmat = inputmat`; grouped_linear.py and layernorm_linear.py's
  // ln_out alike). So the tensors that only a GEMM's backward reads shrink to the format's bytes with its
  // scales: the attention's LayerNormLinear output (norm1; not MLA, whose two down projections each quantize the
  // normalized input), the dense MLP's (norm2; an MoE layer's normalized input feeds the router in bf16), fc2's
  // input (mlp_act) and the experts' fc1 and fc2 inputs (dispatch, expert_act; under moe_act recompute fc2 saves
  // the recomputed bf16 tensor instead: experts.py set_save_original_input). Under training.fp8_wgrad false
  // (--no-fp8-wgrad) the wgrad reads bf16 inputs: unchanged.
  void te_quantized_saves(std::vector<Step>& steps, int l) {
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

  // What XLA keeps for the backward differs from Megatron's hand-written layers. Read off the
  // compiled reference step (shared/reference/hlo/m1_none: the forward while loop's stacked
  // outputs): the residual stream and the normalized activations in fp32 (4 tensors of B·S·D
  // fp32 per layer), the softmax output both in fp32 and in bf16, and four B·S·F bf16 tensors
  // around the SwiGLU (silu(gate), its sigmoid, the product, and the down projection's input)
  // besides gate and up.
  //
  // Unrolled (scan_layers: false) there is no loop boundary to carry values across, and XLA's
  // scheduler computes some values only the backward reads after the loss. Read off
  // calibration/data/h200-2026-11-29/s1_none_unrolled (the buffers live when its first backward
  // kernel starts, before buffer assignment packs temporaries into outputs): per layer the
  // scores in fp32 and the probabilities in bf16, gate, up and their product in bf16, the layer
  // input and normalized activations in bf16 (about six B·S·D bf16 tensors in all), and one bf16
  // copy of the layer's weights (the cast the backward GEMMs reuse). pack_into_outputs then
  // places what fits inside the optimizer's outputs, as XLA does.
  // Scanned, with the gate and up projections kept and their product not: XLA recomputes the product inside the SwiGLU
  // backward's fusion rather than in a kernel of its own (m1_dots, m1_dots_cudnn, g1_dots, m1_off).
  bool xla_swiglu_product_in_backward(int l) {
    if (!jax_ || !t_.scan_layers || m_.ffn != FfnKind::swiglu || t_.recompute.mode == RecomputeMode::none || l < 0) return false;
    const SavePlan& plan = layer_plan(l);
    return plan.keeps("mlp_gate") && plan.keeps("mlp_up") && !plan.keeps("mlp_act");
  }
  void jax_residual_sizes(const std::vector<Step*>& steps, int l) {
    if (!t_.scan_layers) {
      for (Step* p : steps) {
        Step& st = *p;
        const double before = st.out_bytes;
        if (st.name == "norm1") st.out_bytes = Tsp_ * h_ * 4 + layer_weights(l) * pr_.activation_bytes;
        else if (st.name == "attn_scores") st.out_bytes = b_ * hl_ * s_ * s_ * 6;  // fp32 + bf16
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
      else if (st.name == "attn_scores") st.out_bytes = b_ * hl_ * s_ * s_ * 6;  // fp32 + bf16 probabilities
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

  // ---- XLA's layout copies around materialized attention (JAX mode) ------------------------------
  // XLA runs attention's batched dots on operands in head-major layouts, so it copies Q, K, V and the
  // gradients between the projections' [B, S, heads, dim] layout and the dots' (read and write, bf16).
  // Each copy is one kernel, read off the compiled H200 steps s1_none_unrolled (MHA, unrolled) and
  // g1_dots (GQA, scanned, recomputed scores). A copy of a [T, dim] bf16 tensor moves 2 T dim a bytes.
  bool gqa_layouts() const { return kvl_ < hl_; }
  void layout_copy(std::string_view name, double dim) { vector(name, 2 * T_ * dim * pr_.activation_bytes, 0); }
  // Forward (and its recompute): Q, K, V into [B, heads, S, dim] (s1: input_transpose_fusion.8/.9/.10;
  // g1: input_transpose_fusion.5/.6/.7), then Q and K into the score dot's operand layouts (s1:
  // fusion.1249, fusion.1250; g1: fusion.380, fusion.381).
  void xla_attention_layout_copies_forward() {
    const double qd = hl_ * qk_dim_, kd = kvl_ * qk_dim_, vd = kvl_ * v_dim_;
    layout_copy("attn_scores.q_layout", qd);
    layout_copy("attn_scores.k_layout", kd);
    layout_copy("attn_scores.v_layout", vd);
    layout_copy("attn_scores.q_dot_layout", qd);
    layout_copy("attn_scores.k_dot_layout", kd);
  }
  // Backward, before dP: the output gradient dO into the heads' layout (s1: loop_transpose_fusion.7);
  // under GQA a second copy, grouped under the kv heads, for dP (g1: loop_transpose_fusion.2 and
  // input_transpose_fusion.2).
  void xla_output_grad_layout_copies() {
    const double od = hl_ * v_dim_;
    layout_copy("attn.do_layout", od);
    if (gqa_layouts()) layout_copy("attn.do_gqa_layout", od);
  }
  // Backward, after dK: dQ, dK, dV joined into the QKV projection's layout twice, once for its dgrad
  // and once for its wgrad (s1: input_concatenate_fusion.7 then wrapped_transpose.7; g1:
  // input_concatenate_fusion and wrapped_concatenate); under GQA each gradient is first copied out of
  // its grouped layout (g1: loop_transpose_fusion.1, loop_transpose_fusion, input_transpose_fusion.1).
  void xla_attention_layout_copies_backward() {
    const double qd = hl_ * qk_dim_, kd = kvl_ * qk_dim_, vd = kvl_ * v_dim_;
    if (gqa_layouts()) {
      layout_copy("attn_scores.dq_layout", qd);
      layout_copy("attn_scores.dk_layout", kd);
      layout_copy("attn_scores.dv_layout", vd);
    }
    qkv_gradient_joins("attn_scores.");
  }
  // With one fused QKV weight, dQ, dK and dV joined into its layout twice, for the dgrad and for the wgrad (the
  // materialized path above; under a fused attention kernel m1_*_cudnn, g1_none_cudnn, s8k_dots_cudnn, l7b16_b*_mflash:
  // input_concatenate_fusion and wrapped_concatenate). Three projections need none (calibration/data/h200-2026-12-04-
  // qkv-split-compile); nor does MLA, which projects queries and keys/values apart.
  void qkv_gradient_joins(std::string_view step) {
    if (!t_.fused_qkv || m_.mla) return;
    const double qkv = hl_ * qk_dim_ + kvl_ * qk_dim_ + kvl_ * v_dim_;
    layout_copy(cat(step, "dqkv_concat"), qkv);
    layout_copy(cat(step, "dqkv_wgrad_layout"), qkv);
  }

  void add_attention_steps(std::vector<Step>& steps) {
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

  // Flash attention of the local queries, with context parallelism as Megatron-Core runs it
  // (--cp-comm-type; training.cp_comm):
  //  p2p: a ring of cp steps, each sending this rank's K and V (and in backward their gradients) to the
  //       next rank while the previous chunk computes;
  //  all_gather: K and V of all cp ranks gathered before the kernel (again in backward, whose dK, dV
  //       are reduce-scattered after it), as Llama 3 trained at 131K;
  //  a2a: DeepSpeed-Ulysses: all-to-all of Q, K, V (heads scattered, sequence gathered) before, of the
  //       output after; backward mirrors it. `qkv_bytes` and `out_bytes`: this rank's Q/K/V and output.
  void attention_kernels(bool backward, double flops, double exps, double io, double kv_bytes, double qkv_bytes = 0,
                         double out_bytes = 0) {
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

  void add_mlp_steps(std::vector<Step>& steps, double tokens, double width, bool tensor_parallel,
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

  // Mixture of experts (expert tensor parallelism 1): each rank routes its sequence-parallel
  // share of tokens, sends each token to its top_k experts over the expert-parallel group
  // (all-to-all), runs its experts/ep local experts as grouped GEMMs, and sends the results
  // back. expert_imbalance X (tokens at the busiest EP rank / the mean) is applied where the
  // busiest rank sets the pace. Every rank sends its own tokens' top_k copies (dropless: as many
  // as balanced), but the busiest rank receives X times the mean, so it runs X times the expert
  // GEMMs and activation kernels, and its exchanges move X times the bytes; the others wait for
  // it at the combine of every layer (forward and backward), so every simulated rank is that
  // layer's busiest. Which rank is busiest differs from layer to layer (each layer's router
  // prefers its own experts), so over a rank's layers its saved expert activations average to the
  // mean: the activation memory stays at the balanced size.
  // An MoE token exchange over the EP group (dispatch or combine, either direction): tokens·top_k copies
  // of token_bytes each, sent as the scenario's dispatcher does (hw::estimate_expert_exchange), at the
  // busiest rank's volume: X times the balanced bytes come into it (dispatch, and the combine's
  // backward) or go out of it (combine, and the dispatch's backward), and an all-to-all ends when its
  // busiest endpoint has moved its bytes. (Under DeepEP/HybridEP the NIC leg carries the busiest
  // NVLink domain's share, which averages over its GPUs: X there is an upper bound.) The next
  // compute op waits for it, except under EP overlap (ep_overlap_), where it joins at the end of the pair.
  void expert_exchange(std::string_view name, double tokens, double token_bytes) {
    if (ep_ == 1) return;
    const double busiest = tokens * busiest_expert_load();
    Op& op = g_.ops[ep_stream_collective(name, CollectiveOp::all_to_all, CommGroup::ep, busiest * m_.moe->top_k * token_bytes)];
    op.expert_top_k = m_.moe->top_k;
    op.expert_max_domains = t_.moe.max_nodes_per_token;
    op.expert_library = expert_library();
  }
  // Token dropping (training.moe.capacity_factor cf): an expert takes at most C = ceil(tokens x top_k / experts x cf) of
  // a rank's tokens. Padded to capacity every expert takes exactly C from every rank, so every rank's load is the same;
  // unpadded the busiest rank's load is X times the mean but at most C per expert.
  double mean_expert_count() const { return Tsp_ * m_.moe->top_k / static_cast<double>(m_.moe->experts); }
  double expert_capacity() const { return t_.moe.expert_capacity(Tsp_, m_.moe->top_k, m_.moe->experts); }
  bool drop_and_pad() const { return t_.moe.capacity_factor > 0 && t_.moe.pad_to_capacity; }
  // training.moe.force_load_balancing and expert_imbalance: chance: the busiest rank's expected load under random routing
  double random_routing_load_ = 1.0;
  double routing_imbalance() const {
    return t_.moe.force_load_balancing || t_.expert_imbalance_chance ? random_routing_load_ : t_.expert_imbalance;
  }
  double busiest_expert_load() const {
    if (t_.moe.capacity_factor <= 0) return routing_imbalance();
    if (drop_and_pad()) return 1.0;
    return std::min(routing_imbalance(), std::max(1.0, expert_capacity() / mean_expert_count()));
  }
  hw::ExpertLibrary expert_library() const {
    return t_.moe.dispatcher == MoeDispatcher::deepep     ? hw::ExpertLibrary::deepep
           : t_.moe.dispatcher == MoeDispatcher::hybridep ? hw::ExpertLibrary::hybridep
                                                          : hw::ExpertLibrary::nccl;
  }
  // A collective of the MoE layer's exchange stream (in order with the EP exchanges), after the last op:
  // the next compute op waits for it, or under EP overlap it joins at the end of the pair.
  OpId ep_stream_collective(std::string_view name, CollectiveOp c, CommGroup grp, double bytes) {
    const OpId id = collective(name, c, grp, bytes, {last()});
    g_.ops[id].stream = StreamKind::comm_ep;
    if (loose_ep_overlap()) unjoined_ep_.push_back(id);
    else pending_deps_.push_back(id);
    return id;
  }
  // Expert tensor parallelism (etp > 1): the tokens an EP rank received are gathered over its etp group
  // before the experts (each holding 1/etp of every expert's FFN) and reduce-scattered after them
  // (Megatron-Core's alltoall dispatcher over the expert-tensor-parallel group).
  void etp_collective(std::string_view name, CollectiveOp c, double bytes) {
    if (etp_ == 1) return;
    ep_stream_collective(name, c, CommGroup::etp, bytes);  // in order with the exchange it gathers or scatters for
  }

  void add_moe_steps(std::vector<Step>& steps, int l) {
    const double a = pr_.activation_bytes;
    const auto& e = *m_.moe;
    const double E = e.experts, fe = e.expert_ffn_hidden / static_cast<double>(etp_);  // this rank's slice
    // Megatron's router padding (training.moe.router_padding) under the alltoall dispatcher: each expert's count of
    // this rank's tokens rounded up to the quantized GEMMs' alignment, the padding rows sent, permuted and computed
    // like the others (training_config.h says where Megatron-Core does it). Balanced routing's counts.
    const bool router_pads = t_.moe.router_padding && !jax_ && fp8_class() && !t_.moe.hierarchical() && !drop_and_pad();
    const int align = t_.precision == sim::Dtype::fp8 ? 16 : 32;
    // Token dropping (training.moe.capacity_factor): padded, a rank sends exactly C rows to each expert; unpadded, the
    // balanced counts capped at C (a capacity factor under 1 drops tokens even when balanced).
    const double capacity_factor = t_.moe.capacity_factor;
    const double sent_tokens =
        drop_and_pad()          ? E * expert_capacity() / e.top_k
        : capacity_factor > 0   ? Tsp_ * std::min(1.0, expert_capacity() / mean_expert_count())
        : router_pads           ? Tsp_ + E * hw::expected_alignment_padding(Tsp_, e.top_k / E, align) / e.top_k
                                : Tsp_;
    const double load_x = busiest_expert_load();               // tokens at the busiest EP rank / the mean
    const double routed = sent_tokens * e.top_k;               // token copies this rank sends
    const double received = routed * load_x;                   // at the busiest rank
    const double local_experts = E / ep_;
    // Expert tensor parallelism over ranks that hold the same tokens: without sequence parallelism a tensor-parallel
    // group replicates the activations (JAX mode: MaxText shards its activations over 'tensor' in no token axis), and
    // its etp ranks, each with 1/etp of every expert's FFN (MaxText's w0/w1 on 'mlp', wo's input), route the same
    // tokens: nothing to gather before the experts; the down projection's partial sums are reduce-scattered over
    // etp on the hidden axis, the combine carries h/etp per token, and an all-gather restores the hidden
    // (RoutedMoE.sparse_matmul, layers/moe.py). With sequence parallelism (Megatron: required with tp) each etp rank
    // holds distinct tokens, gathered before the experts and scattered after them.
    const bool etp_replicated = etp_ > 1 && tp_ > 1 && Tsp_ == T_ && tp_ % etp_ == 0;
    const double etp_gathered = etp_replicated ? 1.0 : static_cast<double>(etp_);
    const double etp_gathered_out = etp_replicated ? static_cast<double>(etp_) : 1.0;  // the hidden's split after the experts
    const double expert_tokens = received * etp_gathered;      // after the etp all-gather
    const double per_expert = expert_tokens / local_experts;
    // Saved expert activations: a rank's mean load (see above), not the busiest rank's.
    const double saved_expert_bytes = routed * etp_gathered * h_ * a;
    // The token permutations: Megatron's alltoall dispatcher permutes the tokens a rank sends before
    // the exchange and restores them after the combine (its own tokens: balanced); DeepEP's and HybridEP's
    // (`flex`, Megatron-Core's flex dispatcher) permute the tokens a rank received into expert order after
    // the dispatch and back before the combine (token_dispatcher.py, _DeepepManager.get_permuted/
    // restored_hidden_states_by_experts): the busiest rank's tokens.
    const bool flex = t_.moe.hierarchical();
    const double perm_scale = flex ? load_x : 1.0;
    const double permuted = routed * perm_scale;
    // Megatron's alltoall dispatcher over an EP group: its metadata exchanges (below, in the dispatch step).
    const bool a2a_metadata = !jax_ && !flex && ep_ > 1;
    // It receives a rank's tokens in (source rank, expert) chunks; with more than one local expert it regroups
    // them by expert after the exchange (and the etp gather) and back before the combine: sort_chunks_by_idxs
    // in token_dispatcher.py, a copy of every received token (the busiest rank's). DeepEP/HybridEP fold this
    // into their own permutation above; XLA's all-to-all is laid out by expert.
    const bool sorts_chunks = a2a_metadata && local_experts > 1;
    // DeepEP's and HybridEP's permutations between a rank's received rows, one per (token, GPU it reached), and its
    // expert rows, one per (token, local expert): each reads one side and writes the other (dispatch_postprocess,
    // combine_preprocess, and the same in the backward; HybridEP's permute.cu).
    const double flex_permute_bytes = (permuted + Tsp_ * gpus_reached_ * perm_scale) * h_ * a;
    const bool hybridep_sync = t_.moe.hybridep_combine_sync && t_.moe.dispatcher == MoeDispatcher::hybridep && !jax_ &&
                               !loose_ep_overlap() && ep_ > 1;
    const bool swiglu = m_.ffn == FfnKind::swiglu;
    const double mats = swiglu ? 2 : 1;
    // Under fp8-class training the tokens may be quantized before the dispatch (the expert GEMMs want them
    // in that format anyway), with the format's scales: fp8 one fp32 scale per 128 elements (DeepSeek-V3,
    // DeepEP; shared reference at_scale_measurements.md §4, §7c), mxfp8 one 8-bit scale per 32, nvfp4's
    // already in its bytes per element. Megatron-Core dispatches bf16 (training.moe.dispatch_fp8 says
    // why); XLA and DeepSeek's own FP8 dispatch cast first. DeepSeek's recipe (dispatch_fp8 in Megatron mode, through
    // DeepEP) also quantizes the activation gradient before the down projections, the combine's backward exchange
    // ("a similar strategy is applied to the activation gradient before MoE down-projections", arXiv 2412.19437 sec.
    // 3.3.2); the combine and the dispatch's backward stay bf16 ("for both the forward and backward combine
    // components, we retain them in BF16"). XLA's transposed exchanges carry the bf16 cotangents.
    const double scale_bytes = t_.precision == sim::Dtype::fp8 ? 4.0 / 128.0 : t_.precision == sim::Dtype::mxfp8 ? 1.0 / 32.0 : 0.0;
    const bool dispatch_fp8 = fp8_class() && t_.moe.dispatch_fp8.value_or(jax_);
    const double dispatch_bytes = dispatch_fp8 ? h_ * (pr_.matmul_input_bytes + scale_bytes) : h_ * a;
    const double grad_dispatch_bytes = dispatch_fp8 && !jax_ ? dispatch_bytes : h_ * a;
    // The shared experts: on this rank the 1/tp token slice at full width (a tp-split MLP on all tokens; its own TP
    // collectives are not modelled), or over tokens the tensor group replicates 1/tp of the width with an all-reduce
    // each way (MaxText shards their FFN on 'mlp'). Megatron-Core computes them first, before the router, on the normalized input
    // (MoELayer.forward: shared_experts_compute, then route), and autograd runs their backward after the router's
    // (lower sequence numbers last). XLA: after the combine, as the compiled steps showed (left as it was).
    const bool shared = e.shared_experts > 0;
    const double shared_w = e.shared_experts * static_cast<double>(e.expert_ffn_hidden) / (etp_replicated ? tp_ : 1);
    const auto shared_forward = [=, this] {
      mark_module(Module::moe_router);  // (captured with the router)
      gemm_fwd("shared.gate_up", Tsp_, mats * shared_w, h_);
      vector("shared.act", (mats + 1) * Tsp_ * shared_w * a, 8 * Tsp_ * shared_w, Tsp_ * shared_w);
      gemm_fwd("shared.down", Tsp_, h_, shared_w);
      if (etp_replicated) tp_collective("shared.tp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a, TpOverlap::none);
      mark_module(Module::moe_dispatch);
    };
    const auto shared_backward = [=, this] {
      mark_module(Module::moe_router);
      gemm_dgrad("shared.down", Tsp_, h_, shared_w);
      gemm_wgrad("shared.down", Tsp_, h_, shared_w);
      vector("shared.act.bwd", (2 * mats + 1) * Tsp_ * shared_w * a, 12 * Tsp_ * shared_w, Tsp_ * shared_w);
      gemm_dgrad("shared.gate_up", Tsp_, mats * shared_w, h_);
      if (etp_replicated) tp_collective("shared.bwd.tp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a, TpOverlap::none);
      gemm_wgrad("shared.gate_up", Tsp_, mats * shared_w, h_);
      mark_module(Module::moe_dispatch);
    };
    const bool shared_first = shared && !jax_;
    steps.push_back({"router", Tsp_ * E * 4,
                     [=, this] {
                       if (shared_first) shared_forward();
                       mark_module(Module::moe_router);
                       gemm("router", Tsp_, E, h_);
                       vector("router.topk", Tsp_ * E * 4 * 2, 10 * Tsp_ * E, Tsp_ * E);
                       // Token dropping (apply_router_token_dropping): a top-C over each expert's column of the fp32
                       // probabilities, the capacity mask zeroed and scattered, the probabilities masked.
                       if (capacity_factor > 0 && !jax_) vector("router.token_drop", 4 * Tsp_ * E * 4, 10 * Tsp_ * E);
                     },
                     [=, this] {
                       if (capacity_factor > 0 && !jax_) vector("router.token_drop.bwd", 3 * Tsp_ * E * 4, Tsp_ * E);
                       vector("router.topk.bwd", Tsp_ * E * 4 * 2, 4 * Tsp_ * E);
                       gemm("router.dgrad", Tsp_, h_, E);
                       gemm("router.wgrad", h_, E, Tsp_, 1, 2 * h_ * E * pr_.grad_bytes);
                       if (shared_first) shared_backward();
                       mark_module(Module::moe_router);
                     }});
    steps.push_back({"dispatch", saved_expert_bytes,
                     [=, this] {
                       const OpId routing = last_compute();  // router.topk: the routing map
                       // The alltoall dispatcher's metadata: each rank's token count per expert, all-gathered
                       // over the EP group before the exchange (gather_from_sequence_parallel_region in
                       // MoEAlltoAllTokenDispatcher.preprocess, token_dispatcher.py ~550 at d98e8a6; int64 per
                       // expert; its tp part is not modelled); the host reads the split sizes off it.
                       // A plain NCCL call on the current stream (not the exchanges' stream): the permutation waits for it.
                       // (Under the looser DualPipe-like overlap it stays on the exchanges' stream, joined after the pair.)
                       OpId counts = routing;
                       // (Padded to capacity the counts are known before routing: no gather, no host wait.)
                       if (a2a_metadata && !drop_and_pad())
                         counts = loose_ep_overlap()
                                      ? ep_stream_collective("dispatch.counts_all_gather", CollectiveOp::all_gather, CommGroup::ep, ep_ * E * 8.0)
                                      : inline_collective("dispatch.counts_all_gather", CollectiveOp::all_gather, CommGroup::ep, ep_ * E * 8.0);
                       // The alltoall dispatcher permutes before the exchange (its preprocess); DeepEP and HybridEP
                       // after it, into expert order (dispatch_postprocess: get_permuted_hidden_states_by_experts).
                       // With token dropping (unpadded) or the router's padding the permutation's output size varies,
                       // so the host waits for the counts before the permutation instead (preprocess:
                       // before_permutation_1); padded to capacity it does not wait at all (no_sync).
                       const bool waits = !jax_ && !loose_ep_overlap();
                       const bool counts_wait = waits && !flex && !drop_and_pad();
                       const bool waits_early = capacity_factor > 0 || router_pads;
                       if (counts_wait && waits_early) pending_host_wait_ = counts;
                       if (!flex) vector("dispatch.permute", 2 * permuted * h_ * a, 0);
                       // Megatron-Core's token dispatchers read the token counts on the host (shared
                       // reference: megatron/core/transformer/moe/token_dispatcher.py): the all-to-all
                       // dispatcher copies them off the routing map and waits for that copy before the EP
                       // all-to-all (or, with no EP/TP exchange, before the experts); DeepEP and HybridEP
                       // wait inside their dispatch, and DeepEP again after it (both below). XLA's static
                       // shapes need no such wait. Under EP overlap Megatron-Core's
                       // combined 1F1B schedule has issued the paired micro-batch's work before it waits
                       // (close_pair's order); the looser DualPipe-like overlap places no wait.
                       if (counts_wait && !waits_early) pending_host_wait_ = counts;
                       // DeepEP's and HybridEP's dispatch first exchange routing metadata and the host waits for it,
                       // inside the dispatch call, to size the receive buffers before it launches the exchange:
                       // DeepEP's notify_dispatch, every rank's int32 token counts per expert (deepseek-ai/DeepEP
                       // Buffer.dispatch without a cached layout); HybridEP's preprocessing, an all-gather of the
                       // ranks' boolean routing maps, a byte per token and expert (deepseek-ai/DeepEP hybrid_ep_buffer.py;
                       // Megatron-LM@d98e8a64 token_dispatcher.py _HybridEPManager: "HybridEP sizes buffers
                       // dynamically (CPU sync in dispatch)").
                       const bool hybridep = t_.moe.dispatcher == MoeDispatcher::hybridep;
                       // (Padded to capacity Megatron-Core passes HybridEP the permuted size, num_permuted_tokens, so its
                       // host does not wait for the preprocessing: _HybridEPManager.setup_metadata at d98e8a64.)
                       const bool padded_hybridep = hybridep && drop_and_pad();
                       if (flex && ep_ > 1 && (waits || padded_hybridep)) {
                         const OpId notify = ep_stream_collective("dispatch.notify", CollectiveOp::all_gather, CommGroup::ep,
                                                                  hybridep ? ep_ * Tsp_ * E : ep_ * E * 4.0);
                         if (waits && !padded_hybridep) pending_host_wait_ = notify;
                       }
                       expert_exchange("dispatch.all_to_all", sent_tokens, dispatch_bytes);
                       // HybridEP of Oct-Nov 2025 (training.moe.hybridep_dispatch_sync) then reads the tokens per local
                       // expert on the host to size its permutation's output: the host waits for the dispatch kernel
                       // (its permute_processing kernel behind it, not emitted, is tiny).
                       if (waits && !padded_hybridep && hybridep && t_.moe.hybridep_dispatch_sync && ep_ > 1) pending_host_wait_ = last();
                       // ... and the routing probabilities in an all-to-all of their own (token_dispatch:
                       // global_probs = all_to_all(...)); DeepEP and HybridEP carry them in their dispatch.
                       if (a2a_metadata) expert_exchange("dispatch.probs_all_to_all", sent_tokens, a);
                       // DeepEP's receive counts come back as a host list (fused_a2a.py: tokens_per_expert =
                       // torch.tensor(num_recv_tokens_per_expert_list)), but its routing map is rebuilt from the received
                       // indices on the GPU (_DeepepManager._indices_to_multihot, unless the experimental fused path;
                       // Megatron-LM@d98e8a64 token_dispatcher.py:1337-1365): zeroed multihot maps, then boolean
                       // indexing (indices[mask], probs[mask]) and repeat_interleave, whose output sizes the host reads
                       // back: a synchronization of the current stream, the compute stream. So the host waits for the
                       // exchange (the stream waits for it first) and for every kernel issued on the compute stream before
                       // it: under EP overlap the paired micro-batch's expert backward and weight gradients (Megatron-Core
                       // issues them before this node), after which the stream is empty and the rest of the layer runs at
                       // the host's pace. HybridEP permutes inside its dispatch and, from 83e0d15, has its counts from
                       // the preprocessing: no second wait (before it, the wait above).
                       if (waits && t_.moe.dispatcher == MoeDispatcher::deepep && ep_ > 1) {
                         // Each received row (at most one per token copy) zeroes its int64 and fp32 multihot entries for
                         // the local experts and reads and scatters its top-k indices and probabilities.
                         vector("dispatch.indices_to_multihot", permuted * 12.0 * (local_experts + e.top_k), 0);
                         pending_host_wait_ = last();
                       }
                       if (!etp_replicated) etp_collective("dispatch.etp_all_gather", CollectiveOp::all_gather, expert_tokens * h_ * a);
                       if (flex) vector("dispatch.permute", flex_permute_bytes, 0);
                       if (sorts_chunks) vector("dispatch.sort_chunks", 2 * expert_tokens * dispatch_bytes, 0);
                     },
                     [=, this] {
                       // HybridEP's combine_with_unpermute (the dispatch's backward) first synchronizes its stream
                       // (training.moe.hybridep_combine_sync): the host waits for the gradient it unpermutes, and without
                       // EP overlap (the compute stream current) for everything issued before it.
                       if (hybridep_sync) pending_host_wait_ = megatron_ep_overlap() ? expert_dgrad_ : last();
                       if (flex) vector("dispatch.unpermute.bwd", flex_permute_bytes, permuted * h_);
                       if (sorts_chunks) vector("dispatch.sort_chunks.bwd", 2 * expert_tokens * h_ * a, 0);
                       // The gate/up dgrad's partial sums over the etp ranks' FFN slices, reduced to the token owners;
                       // tokens replicated, after the exchange (below).
                       if (!etp_replicated)
                         etp_collective("dispatch.bwd.etp_reduce_scatter", CollectiveOp::reduce_scatter, expert_tokens * h_ * a);
                       if (a2a_metadata) expert_exchange("dispatch.bwd.probs_all_to_all", sent_tokens, a);  // the probs' gradient
                       expert_exchange("dispatch.bwd.all_to_all", sent_tokens, h_ * a);
                       if (!flex) vector("dispatch.unpermute.bwd", 2 * permuted * h_ * a, permuted * h_);
                       // Tokens replicated over the tensor group: the input's gradient (the k copies summed by the
                       // unpermutation) is the sum of the ranks' FFN slices, psummed over tp as JAX transposes a
                       // shard_map input the tensor axis does not shard (MaxText's sparse_matmul).
                       if (etp_replicated) etp_collective("dispatch.bwd.etp_all_reduce", CollectiveOp::all_reduce, Tsp_ * h_ * a);
                     }});
    // Under fp8-class training Megatron-Core's TEGroupedMLP pads each expert's token chunk to the recipe's
    // alignment before the grouped GEMMs and strips it from their output (Fp8Padding / Fp8Unpadding,
    // experts.py:890-1043 at d98e8a6; TE fused_multi_row_padding: a copy of every token, skipped only when
    // every split is already aligned, which routed counts are not), and the backward runs both the other
    // way. HybridEP pads inside its dispatch (moe_utils.py skip_routed_expert_padding), and DeepEP's fused
    // permutation pads to the alignment itself (permute(..., align_size): fused_permute_and_pad_with_probs),
    // after which every split is aligned and Fp8Padding copies nothing. XLA: static shapes.
    // With the router's padding (training.moe.router_padding) every split is aligned already.
    // Padded to capacity, every split is C x ep x etp rows: Fp8Padding copies nothing when that is aligned (TE
    // fp8_padding.py returns early when every split already is).
    const bool splits_aligned =
        drop_and_pad() && std::fmod(expert_capacity() * ep_ * etp_, static_cast<double>(align)) == 0;
    const bool pads = !jax_ && fp8_class() && !t_.moe.router_padding && !splits_aligned &&
                      (t_.moe.dispatcher == MoeDispatcher::all_to_all || (t_.moe.dispatcher == MoeDispatcher::deepep && !t_.moe.permute_fusion));
    const double pad_copy_bytes = 2 * expert_tokens * h_ * a;  // read and write the busiest rank's tokens
    // Experts as grouped GEMMs: local_experts GEMMs of per_expert tokens each.
    // Each grouped GEMM op also carries Transformer Engine's host time for its local experts' GEMMs.
    const double grouped_host = grouped_gemm_host_s(local_experts);
    const auto grouped_gemm = [this, grouped_host](std::string_view name, double m, double n, double k, double batch,
                                                   double extra_bytes, Quant quant) {
      const OpId id = gemm(name, m, n, k, batch, extra_bytes, quant);
      g_.ops[id].host_s += grouped_host;
      if (name.ends_with(".wgrad")) mark_wgrad(id, name, m * n * batch);
    };
    // What the experts keep for their backward (Megatron-Core's TEGroupedMLP, experts.py at d98e8a64), at the
    // rank's mean load as above: fc1's input is the dispatch step's; expert_out is fc1's output, which the
    // activation saves (the routing probabilities are applied there, so the unpermutation needs no expert output),
    // with the shared experts' fc1 output and activation (their input is the layer's normalized input); expert_act
    // is the routed experts' activation output, fc2's saved input, so that a policy without it recomputes the
    // activation as Megatron's --recompute-modules moe_act does (experts.py: the activation in
    // CheckpointWithoutOutput, its output discarded after fc2 and recomputed before fc2's backward). MaxText's
    // policies name the experts' gate, up and down outputs instead (mlpwi_0, mlpwi_1, mlpwo: layers/moe.py): in
    // JAX mode expert_out is those three.
    const double routed_rows = routed * etp_gathered, shared_rows = shared ? Tsp_ * shared_w / fe : 0.0;
    const double expert_saved_bytes = jax_ ? routed_rows * (mats * fe + h_ / etp_gathered_out) * a
                                           : (routed_rows * mats + shared_rows * (mats + 1)) * fe * a;
    const double act_saved_bytes = routed_rows * fe * a;
    // The activation's output, listed before the experts' step so that it dies with their backward (fc2's, which
    // reads it; its own backward is empty); recomputed alone (one more activation kernel before the backward) when
    // the policy keeps expert_out but not expert_act. Its forward is the experts' step's.
    const bool act_alone = moe_act_recomputed(l);
    steps.push_back({"expert_act", act_saved_bytes,
                     [=, this] {
                       // (JAX mode: XLA's recompute at the head of the layer's backward; Megatron's in the experts' backward.)
                       if (phase_ == Phase::recompute && act_alone && jax_)
                         vector("experts.act.recompute", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe,
                                expert_tokens * fe);
                     },
                     [] {}});
    steps.push_back({"expert_out", expert_saved_bytes,
                     [=, this] {
                       if (pads) vector("experts.fp8_pad", pad_copy_bytes, 0);
                       grouped_gemm("experts.gate_up", per_expert, mats * fe, h_, local_experts, 0, Quant::forward);
                       vector("experts.act", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe, expert_tokens * fe);
                       grouped_gemm("experts.down", per_expert, h_, fe, local_experts, 0, Quant::forward);
                       if (pads) vector("experts.fp8_unpad", pad_copy_bytes, 0);
                     },
                     [=, this] {
                       // Megatron's offload groups here (fine-grained activation offloading): moe_act, the
                       // activation's input (expert_out), waited for before the experts' backward and ended by the
                       // activation's; expert_fc1, fc1's input (dispatch), reloaded behind it and waited for before
                       // fc1's backward, which ends it (its dgrad; the wgrad too unless delayed under EP overlap).
                       offload_wait("expert_out");
                       // Megatron's moe_act recompute (CheckpointWithoutOutput): the activation's output, discarded after
                       // fc2's forward, is recomputed when fc2's output gradient arrives, inside the experts' backward
                       // (experts.py: discard_output_and_register_recompute), not at the head of the layer's backward.
                       if (!jax_ && act_alone) {
                         const Phase outer = std::exchange(phase_, Phase::recompute);
                         vector("experts.act.recompute", (mats + 1) * expert_tokens * fe * a, 8 * expert_tokens * fe,
                                expert_tokens * fe);
                         const TensorId t = temp("expert_act.recomputed", act_saved_bytes);
                         g_.ops[last()].allocs.push_back(t);
                         if (bwd_by_step_) bwd_by_step_->set("expert_act", t);
                         phase_ = outer;
                       }
                       if (pads) vector("experts.fp8_unpad.bwd", pad_copy_bytes, 0);
                       grouped_gemm("experts.down.dgrad", per_expert, fe, h_, local_experts, 0, Quant::backward);
                       grouped_gemm("experts.down.wgrad", fe, h_, per_expert, local_experts,
                                    wgrad_output_bytes(fe * h_ * local_experts), wgrad_quant());
                       vector("experts.act.bwd", (2 * mats + 1) * expert_tokens * fe * a, 12 * expert_tokens * fe, expert_tokens * fe);
                       offload_done("expert_out");
                       offload_wait("dispatch");
                       grouped_gemm("experts.gate_up.dgrad", per_expert, h_, mats * fe, local_experts, 0, Quant::backward);
                       expert_dgrad_ = last();
                       if (megatron_ep_overlap()) offload_done("dispatch");
                       grouped_gemm("experts.gate_up.wgrad", h_, mats * fe, per_expert, local_experts,
                                    wgrad_output_bytes(h_ * mats * fe * local_experts), wgrad_quant());
                       if (!megatron_ep_overlap()) offload_done("dispatch");
                       if (pads) vector("experts.fp8_pad.bwd", pad_copy_bytes, 0);
                     }});
    steps.back().mask_bytes = residual_mask_bytes();  // the MLP residual's dropout mask (see add_mlp_steps)
    const double combine_out = Tsp_ * h_ * a;
    steps.push_back({"mlp_out", combine_out,
                     [=, this] {
                       // Unpermuted after the exchange by the alltoall dispatcher, before it by DeepEP and HybridEP
                       // (combine_preprocess: get_restored_hidden_states_by_experts), which sum a token's local-expert
                       // rows into one row per (token, GPU it reached) to send back: read the expert rows, write one row
                       // per GPU a token reaches (each GPU receives its share of them). Before it,
                       // HybridEP's combine may synchronize its stream (training.moe.hybridep_combine_sync): the host
                       // waits for the experts' output.
                       if (hybridep_sync) pending_host_wait_ = last();
                       if (flex) vector("combine.unpermute", flex_permute_bytes, permuted * h_);
                       if (sorts_chunks) vector("combine.sort_chunks", 2 * expert_tokens * h_ * a, 0);
                       etp_collective("combine.etp_reduce_scatter", CollectiveOp::reduce_scatter, expert_tokens * h_ * a);
                       expert_exchange("combine.all_to_all", sent_tokens, h_ * a / etp_gathered_out);
                       if (!flex)
                         vector("combine.unpermute", (routed + Tsp_) * perm_scale * h_ * a / etp_gathered_out,
                                permuted * h_ / etp_gathered_out);
                       // (Replicated: the hidden gathered back once the k copies are summed.)
                       if (etp_replicated) etp_collective("combine.etp_all_gather", CollectiveOp::all_gather, Tsp_ * h_ * a);
                       if (shared && !shared_first) shared_forward();
                       // The residual add is the transformer layer's, outside the MoE layer's checkpoint:
                       // recomputed only under full recompute.
                       if (phase_ != Phase::recompute || t_.recompute.mode == RecomputeMode::full) residual("mlp_out.residual");
                     },
                     [=, this] {
                       residual_dropout_bwd("mlp_out.dropout.bwd");
                       vector("mlp_out.residual.bwd", 3 * Tsp_ * h_ * a, Tsp_ * h_);
                       if (shared && !shared_first) shared_backward();
                       // (Replicated: the output's gradient arrives whole on every rank and is sliced on the hidden axis,
                       // no exchange.)
                       if (!flex) vector("combine.bwd", 2 * permuted * h_ * a / etp_gathered_out, permuted * h_ / etp_gathered_out);
                       expert_exchange("combine.bwd.all_to_all", sent_tokens, grad_dispatch_bytes / etp_gathered_out);
                       etp_collective("combine.bwd.etp_all_gather", CollectiveOp::all_gather, expert_tokens * h_ * a);
                       if (flex) vector("combine.bwd", flex_permute_bytes, permuted * h_);
                       if (sorts_chunks) vector("combine.sort_chunks.bwd", 2 * expert_tokens * h_ * a, 0);
                     }});
  }

  // ---- forward / backward of pipeline chunks ----------------------------------------------
  struct LayerState {
    StepMap<TensorId> kept;      // saved activations, freed after backward
    StepMap<OpId> offload_copy;  // D2H copy per offloaded activation
    StepMap<TensorId> host_copy;
    struct Fetched {
      TensorId tensor;
      OpId copy;
      std::string_view step;
    };
    std::vector<Fetched> fetched;  // H2D copies issued for the backward
    bool fetch_issued = false;
    TensorId input = 0;
  };
  std::map<std::pair<int, int>, LayerState> layer_state_;  // (micro-batch, layer)
  std::map<int, TensorId> logits_;
  // JAX mode (which has no MTP: one embedding and one output layer per micro-batch): micro-batch -> the embedding's
  // one-hot matrix (one_hot_embedding), the output layer's fp32 input (logits_fp32).
  std::map<int, TensorId> one_hot_, head_input_fp32_;
  std::map<std::pair<int, int>, TensorId> mtp_logits_;  // (micro, depth) -> an MTP head's fp32 logits
  std::map<int, TensorId> chunk_output_;                   // micro-batch -> activation to send

  void forward_chunk(int v) {
    phase_ = Phase::forward;
    chunk_ = v;
    const double a = pr_.activation_bytes;
    prefix_micro_vstage(v);
    if (ep_interleave_) ep_ctx_ = EpCtx{kEpPre};
    TensorId x;
    const bool fsdp = fsdp_per_use();
    std::size_t schedule_op = g_.ops.size();  // the chunk's first op after its input arrived (charge_chunk_host_work)
    if (v == 0) {
      wait_for_params(kEmbeddingBucket);
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
      // The score dot's mask operands (above, attn_scores.qk), broadcast once before the loop (m1_full:
      // loop_broadcast_fusion, pred, and loop_broadcast_fusion.2, fp32, [B, heads, S, S]).
      // (MLA's scores are [B, heads, S, S] as well: the same operands.)
      // Two fills of [B, heads, S, S] indices each, which XLA's loop emitter covers index by index (a pred fill takes
      // as long as an f32 one on the H200: docs/decisions.md, "XLA's loop fusions write at most so many indices a
      // second"); two kernels, since each is bound on its own (the fp32 one by HBM on a slower part).
      if (materialized_) {
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

  // Megatron-Core's pipeline schedule for one model chunk and micro-batch, beyond its layers' host figures:
  // forward_step (set_input_tensor, the forward_step_func through DistributedDataParallel, Float16Module and GPTModel's
  // preprocess, rotary embedding included; MoE models also set the aux-loss scale) or backward_step (retain_grad,
  // autograd's backward from the received gradient). It runs once the chunk's input has arrived (after the p2p wait),
  // before the chunk's first kernel, so it goes to that op. Not under whole-step CUDA graphs (no Python per chunk);
  // under Megatron's per-layer graphs the schedule still runs eager. Not in JAX mode (XLA's runtime instead).
  void charge_chunk_host_work(std::size_t op, bool forward) {
    if (jax_ || whole_step_graphs_ || op >= g_.ops.size()) return;
    const auto& L = sys_.launch;
    const bool moe = m_.moe.has_value();
    g_.ops[op].host_s += forward ? (moe ? L.megatron_moe_chunk_forward_s : L.megatron_chunk_forward_s)
                                 : (moe ? L.megatron_moe_chunk_backward_s : L.megatron_chunk_backward_s);
  }

  // Megatron-Core's word embedding over tp (Megatron-LM@d98e8a64 megatron/core/tensor_parallel/layers.py
  // VocabParallelEmbedding.forward; megatron/core/models/common/embeddings/language_model_embedding.py
  // LanguageModelEmbedding.forward). Each tp rank holds a 1/tp slice of the vocabulary and looks up every token of
  // the micro-batch, the full sequence, not its sequence-parallel shard: a lookup of T rows (zeros for tokens outside
  // its slice, the masked_fill of output_parallel[input_mask, :] = 0), whose partial sums are then reduced over tp:
  // under sequence parallelism reduce-scattered to the rank's shard (reduce_scatter_to_sequence_parallel_region,
  // reduce_scatter_embeddings being set for rotary models) and copied once more (clone_scatter_output_in_embedding,
  // True by default: the clone after the scatter); without it all-reduced (reduce_from_tensor_model_parallel_region).
  // Plain NCCL calls on the default stream, so the next op waits for them, with or without tp_comm_overlap.
  // `name`: the op's name ("embedding", "mtp.embedding"); `out_name`: its output's; `lookup`: the lookup kernel (an
  // FSDP gather is released there). Returns the output, the first layer's input (Tsp tokens). At tp 1 (and in JAX
  // mode, as XLA partitions it, unchanged) one lookup of the rank's tokens.
  TensorId embedding_forward(std::string_view name, std::string_view out_name, OpId& lookup) {
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
  // Its backward: under sequence parallelism the reduce-scatter's backward, an all-gather of the output gradient to all
  // T tokens (the clone's is none; without sequence parallelism the all-reduce's backward is the identity); the
  // masked_fill's backward (the gradient of the masked rows zeroed); the lookup's weight gradient
  // (embedding_weight_grad). XLA's: a scatter-add of the rows into the gradient, unchanged.
  void embedding_backward(std::string_view name) {
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
  // The lookup's weight gradient in Megatron mode. VocabParallelEmbedding looks up with F.embedding (dense, not
  // sparse: Megatron-LM@d98e8a64 tensor_parallel/layers.py VocabParallelEmbedding.forward), whose backward is
  // PyTorch's embedding_dense_backward: a zeroed gradient of the whole [V/tp, h] table in the weights' dtype into
  // which the `tokens` rows are summed. Megatron's DDP hook then adds it into the fp32 main gradient and drops it
  // (distributed/distributed_data_parallel.py _make_backward_post_hook: param.main_grad.add_(param.grad.data); the
  // embedding has no fused weight-gradient accumulation). Every micro-batch: the zero fill (E·a written), the rows
  // (read the incoming gradient, read and write the rows: 3·a per element), the add (E·(a + 2·4)).
  void embedding_weight_grad(std::string_view name, double tokens) {
    const double a = pr_.activation_bytes, table = embedding_weights();
    const TensorId grad = temp(cat(name, ".grad"), table * a);
    g_.ops[vector(cat(name, ".bwd.zero"), table * a, 0)].allocs.push_back(grad);
    vector(cat(name, ".bwd"), tokens * h_ * 3 * a, tokens * h_);
    g_.ops[vector(cat(name, ".bwd.main_grad_add"), table * (a + 2 * pr_.grad_bytes), table)].frees.push_back(grad);
  }

  // The output layer and the loss of one micro-batch over `x` (names prefixed "mtp." for an MTP depth): the final
  // RMSNorm, the tp gather of the sequence-parallel tokens, the logits GEMM against this tp rank's vocabulary
  // slice and the cross entropy. Returns the fp32 logits, which live until the head's backward; `free_input`:
  // the cross entropy is the input's last reader.
  TensorId output_head(std::string_view pre, TensorId x, bool free_input) {
    const double a = pr_.activation_bytes;
    vector(cat(pre, "final_norm"), 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_);
    // Megatron-Core's output layer is its own ColumnParallelLinear (Megatron-LM@d98e8a64 gpt_model.py;
    // tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward): the sequence-parallel
    // input is gathered synchronously before the GEMM, with or without tp_comm_overlap (userbuffers serve
    // Transformer Engine's layers only).
    tp_collective(cat(pre, "logits.tp_all_gather"), CollectiveOp::all_gather, T_ * h_ * a, jax_ ? TpOverlap::nccl : TpOverlap::none);
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
  // The backward of output_head: the loss gradient over the logits, the logits GEMM's dgrad (its tp
  // reduce-scatter) and wgrad, and the final norm's backward (returned: it reads the norm's input).
  OpId output_head_backward(std::string_view pre, TensorId logits) {
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
        tp_collective(cat(pre, "logits.dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, T_ * h_ * a, TpOverlap::nccl);
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
      tp_collective(cat(pre, "logits.dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, T_ * h_ * a, TpOverlap::nccl);
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

  // ---- multi-token prediction (training.mtp_layers) --------------------------------------------
  // Megatron-Core's MultiTokenPredictionLayer before its transformer layer (multi_token_prediction.py
  // _get_embeddings, _concat_embeddings at d98e8a64): the shared embedding of the tokens shifted by one more
  // position, RMSNorm of it (enorm) and of the previous depth's hidden states (hnorm), their concatenation, the
  // column-parallel projection eh_proj from 2h to h (gathering the sequence-parallel input), and the gather of
  // its tp-split output back to the full hidden size, scattered to the sequence-parallel slice. `x` in: the
  // previous depth's output (the decoder's for the first); out: the projection, the layer's input.
  std::map<std::pair<int, int>, std::array<TensorId, 3>> mtp_saved_;  // (micro, depth) -> embedding, concat, hidden in
  void mtp_input(int l, TensorId& x) {
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
  // Its backward, after the MTP layer's: the gradient scattered back to the tp-split output, eh_proj's dgrad
  // (reduce-scattered over tp) and wgrad, the concatenation's split, both norms' backward and the embedding's
  // (the shared table's dense gradient, embedding_weight_grad). Frees what the forward kept, and the previous depth's
  // hidden states, whose last reader hnorm's backward is.
  void mtp_input_backward(int l) {
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

  // Megatron-Core's host work for one layer and micro-batch (eager), spread evenly over the ops the
  // layer issues. The host issues ops one after another, so the GPU waits for it wherever a layer's
  // ops take less GPU time than the host needs for them: small layers, and MoE layers after the
  // token-count wait. Recomputed ops cost what the forward's did. Under CUDA graphs (Megatron's
  // per-layer graphs) the dense part replays from a graph; the MoE dispatcher, whose shapes follow
  // the routing, stays eager. JAX: XLA's runtime (launch.xla_*) instead.
  // Megatron-Core's nvtx_range_push/pop calls in a layer's forward (at 1e057005: transformer_layer.py, attention.py,
  // mlp.py), which cost the host only in the versions that look up the caller's name first
  // (training.megatron_nvtx_lookup). The backward has none; a recomputed forward repeats them (charge_host_work).
  // The dense part of a layer's forward on the host: the measured per-layer figure and, where the version pays them,
  // the NVTX ranges' lookups.
  double dense_forward_host_s(int l) const { return sys_.launch.megatron_layer_forward_s + nvtx_forward_host_s(l); }
  double nvtx_forward_host_s(int l) const {
    if (!t_.megatron_nvtx_lookup) return 0.0;
    int calls = 8;                // TransformerLayer: self_attention, self_attn_bda, mlp, mlp_bda
    if (!m_.mla) calls += 10;     // Attention.forward: qkv, adjust_key_value, rotary_pos_emb, core_attention,
                                  // linear_proj (MLA's own forward has none)
    if (!m_.is_moe_layer(l) || m_.moe->shared_experts > 0)
      calls += 6;                 // MLP.forward (a dense layer's, or SharedExpertMLP's): linear_fc1, activation,
                                  // linear_fc2; Transformer Engine's grouped experts have none
    return calls * sys_.launch.megatron_nvtx_range_s;
  }
  // DeepSeek-V3's parts of a layer on the host beyond the measured layer figures (launch.megatron_mla_*,
  // megatron_group_router_*, megatron_shared_expert_*; calibration/data/h100-2026-12-05-megatron-dsv3-host): multi-latent
  // attention's own work (the attention module's); a group-limited router's, which Megatron's fused router replaces
  // (--moe-router-fusion: its fused top-k with score function and aux-loss scores, forward and backward) as it does
  // the routing; a shared expert's MLP (one module whatever its width). The router and the shared expert belong to
  // racksim's moe_router scope, MLA to attn.
  struct ExtraHost { double mla = 0, router = 0, shared = 0; };
  ExtraHost extra_host_s(int l, bool forward, bool routing_removed) const {
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
  void charge_host_work(int l, std::size_t first, bool forward) {
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
  // Megatron-Core's DistributedDataParallel hooks on the host, per layer and micro-batch (the layer figures were
  // measured on a bare block). Backward: the hook on every parameter's gradient accumulator; a GEMM weight's gradient
  // Transformer Engine has already accumulated into main_grad (grad_added_to_main_grad), every other parameter's (the
  // norms' weights, fused into a LayerNormLinear or not, and the router's) the hook adds there, a kernel of its own.
  // Forward, under --overlap-param-gather with the distributed optimizer: the pre-hook on every module called, walking
  // the module's own parameters (recomputed forwards call them again). Counted as Megatron-Core's Transformer Engine
  // layer spec builds a layer (models/gpt/gpt_layer_specs.py at the rows' commits): modules: the TransformerLayer, its
  // input and pre-cross-attention norms, the (identity) cross attention and its bias-dropout-add (IdentityFuncOp), the
  // pre-MLP norm; the attention module, its QKV projection (MLA: the q down and up projections, the kv down and up
  // projections, and the rotary embedding module it calls), the q and k norms (identities without qk_norm), TE's
  // attention and the backend module it calls, the output projection; a dense MLP
  // (fc1, fc2), or an MoE layer (router, TEGroupedMLP with one fc1 and one fc2 weight per local expert, the shared
  // experts' MLP). Parameters: those GEMMs' weights, and the norms (fused into QKV / fc1, or MLA's input norm and its
  // latent norms fused into the up projections) and the router weight. Biases, the embedding, the output layer and the
  // final norm (once per stage) are not counted. Megatron-FSDP has hooks of its own (not measured): none here; nor
  // under XLA.
  // forward_s: every module called; forward_graphed_s: under cuda_graph_scope, where Megatron-Core calls the pre-hooks by
  // hand (TransformerLayer.setup_manual_hooks) for the modules that own parameters only.
  struct DdpHostWork { double forward_s = 0, forward_graphed_s = 0, backward_s = 0; };
  DdpHostWork ddp_host_work(int l) const {
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
  // torch.distributed's host path for every NCCL call the framework makes from Python (Megatron-Core's mappings, its
  // DDP buckets, its pipeline's p2p calls, Transformer Engine's sequence-parallel gathers and context-parallel exchanges
  // without userbuffers, the alltoall dispatcher's exchanges): the layer figures were measured where no collective
  // is issued (TP = EP = 1), so each call's cost is added to it, launch included. Not for what does not pass through
  // torch.distributed: userbuffer exchanges (Transformer Engine's C++ comm-GEMMs), DeepEP's and HybridEP's exchanges and
  // metadata (their own buffers' C++ calls), collectives replayed from CUDA graphs, and XLA's. Under whole-step graphs
  // (cuda_graphs without a scope: every kernel of a micro-step from graphs, the MoE dispatcher eager) only the
  // alltoall dispatcher's calls (its EP and expert-TP exchanges and counts). A send_recv op stands for one rank's p2p
  // exchange with a neighbour: the 1F1B schedule's batch_isend_irecv of a send and a receive; the interleaved schedule's
  // separate isend and irecv (overlap_p2p_comm), and a context-parallel ring step's, charged as the measured pair.
  // Context parallelism makes more calls than it has ops here: Transformer Engine's ring backward exchanges cp times
  // (the last returns dK/dV to their owner, beside the last step) where the builder has cp - 1 steps, so the last gets
  // two; its all-to-all variant (flash_attn_a2a_communicate) calls all_to_all_single once per tensor: Q, K and V (or
  // dQ, dK and dV) in one op here, three calls; its all-gather variant (AttnFuncWithCPAndKVAllGather) gathers K and V,
  // and reduce-scatters dK and dV, one call each: two per op here.
  void charge_torch_nccl_calls() {
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
  // Megatron-Core's host work of one MoE layer's forward beyond a dense layer's (router, dispatcher,
  // permutations), less the routing when it is one kernel (--moe-router-fusion) or replayed from a graph,
  // and the permutations when fused (--moe-permute-fusion). (A fused kernel's own host time, a few tens of
  // microseconds, is not added back.)
  double moe_forward_host_s(bool routing_removed) const {
    const auto& L = sys_.launch;
    return std::max(0.0, L.megatron_moe_forward_s - (routing_removed ? L.megatron_moe_routing_s : 0.0) -
                             (t_.moe.permute_fusion ? L.megatron_moe_permutation_s : 0.0));
  }
  // Transformer Engine's grouped GEMM on the host (GroupedLinear, TE 2.6 at the rows' image): one cuBLASLt GEMM
  // per local expert, each with its descriptors and heuristic query built anew (cublaslt_gemm.cu cublas_gemm),
  // the per-expert torch.split views and wgrad placeholders, and the four compute streams' events once per
  // call, less the one dense GEMM dispatch the layer's host figures already hold for it. Charged to the grouped
  // GEMM op itself: the host issues it after the dispatcher's wait. None under XLA or whole-step graphs.
  double grouped_gemm_host_s(double gemms) const {
    if (jax_ || whole_step_graphs_) return 0.0;
    const auto& L = sys_.launch;
    return std::max(0.0, gemms * L.te_grouped_gemm_s + L.te_grouped_call_s - L.megatron_gemm_dispatch_s);
  }
  // Under training.cuda_graph_scope: the ops of captured modules come from Transformer Engine's graphs
  // (no host work of their own; one graph launch per layer and pass, at its first captured op); every
  // other op of the layer keeps its eager share of the layer's host work, and the MoE layer's own host
  // work (router, dispatcher, permutations) is spread over the MoE ops outside the graphs, less the
  // routing when the router is captured. Layer-level shares are per op, as in the eager model: the measured host figures
  // are per layer, not per module (calibration/data/h200-2026-12-01-megatron-host).
  void charge_scoped_host_work(int l, std::size_t first, bool forward) {
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
  void layer_forward(int l, TensorId& layer_input) {
    const std::size_t first = g_.ops.size();
    if (!stamp_layer(l, true, layer_input)) record_layer(l, true, layer_input);
    charge_host_work(l, first, true);
    if (jax_) layer_bodies_.push_back({first, g_.ops.size(), l});
  }
  void layer_backward(int l) {
    const std::size_t first = g_.ops.size();
    TensorId unused = 0;
    if (!stamp_layer(l, false, unused)) record_layer(l, false, unused);
    charge_host_work(l, first, false);
    if (jax_) layer_bodies_.push_back({first, g_.ops.size(), l});
  }

  // ---- layer templates ---------------------------------------------------------------------
  // A layer's forward (or backward) emits the same ops in every micro-batch: the same names but the
  // micro-batch's number, shapes, costs and dependencies among themselves. Its first emission is
  // recorded with the builder state it began from, with op ids relative to the graph's end (the
  // dependencies, overlaps and host wait pending, the op it follows); a later one that begins from the
  // same relative state is stamped from it: the ops copied with every op id shifted by the distance
  // between the two, the tensors it made renumbered, the tensors it found (the layer input, the saved
  // activations) replaced by this micro-batch's, and the state it leaves applied. A recording that read
  // or changed anything else (an op before the layer, a pending cross-rank dependency, an op id or a
  // tensor the state does not account for) is never stamped, nor are the layers whose emission reads
  // more state (MoE, JAX, FSDP per use, offload, partial CUDA graphs). Same graph, less work
  // (docs/decisions.md, "Layer templates").
  struct LayerTemplate {
    std::vector<int64_t> sig;            // the relative entry state (layer_signature)
    bool usable = false;
    OpId first_op = 0;
    TensorId first_tensor = 0;
    std::vector<Op> ops;
    std::vector<Tensor> tensors;
    std::vector<TensorId> slots;         // tensors found: forward {input}; backward {input, kept...}
    std::vector<std::string_view> kept_names;  // backward: kept at entry; forward: kept at exit
    std::vector<TensorId> kept_exit;     // forward: the kept tensors it leaves
    TensorId out = 0;                    // forward: the layer's output
    // The state it leaves for the op after it.
    struct Exit {
      std::vector<OpId> pending_deps, overlapped;
      OpId pending_host_wait = kNoOp;
      int overlap_countdown = 0, chunk_next_gemms = 0;
      Phase phase = Phase::forward;
    } exit;
  };
  static constexpr std::size_t kTemplatesPerLayer = 4;
  std::vector<std::vector<LayerTemplate>> templates_;  // by 2·layer + (0 forward, 1 backward)
  std::vector<int64_t> sig_;                            // scratch
  std::size_t sig_key_ = SIZE_MAX;                      // the template key sig_ was taken for, at this op
  std::vector<TensorId> slots_;                         // scratch
  std::vector<OpId> known_;                             // scratch
  std::vector<Op> before_;                              // scratch
  // A template's tensor ids: those it made from 0, those it found as kSlotRef | their slot.
  static constexpr TensorId kSlotRef = 0x80000000u;

  // A template pays for itself after a few micro-batches (the first from a state is recorded, the rest
  // stamped): a graph of fewer micro-batches per rank is emitted op by op (the sweeps' extrapolated
  // replays build 2 and 4, where recording cost more than it saved).
  static constexpr int kTemplateMinMicroSteps = 8;
  bool templates_apply(int l, bool forward) {
    if (!options_.layer_templates || micro_steps_ < kTemplateMinMicroSteps || jax_ || partial_graphs_ || fsdp_per_use() || m_.is_moe_layer(l) ||
        ep_interleave_ ||
        !layer_plan(l).offloaded.empty() || g_.ops.empty())
      return false;
    if (pending_host_wait_ != kNoOp || pending_cross_ || quantizing_ || fsdp_mark_next_ || attn_dp_ || scores_recomputed_ ||
        !module_marks_.empty() || !unjoined_ep_.empty() || !pending_alloc_.empty())
      return false;
    if (forward) return param_ready_.find(l) == param_ready_.end() && layer_state_.find({mb_, l}) == layer_state_.end();
    const auto it = layer_state_.find({mb_, l});
    return it != layer_state_.end() && it->second.fetched.empty() && it->second.offload_copy.empty() &&
           it->second.host_copy.empty();
  }
  // The state a layer's emission reads, with op ids as distances back from the graph's end.
  void layer_signature() {
    const auto first = static_cast<int64_t>(g_.ops.size());
    sig_.clear();
    sig_.push_back(static_cast<int64_t>(phase_));
    sig_.push_back(fp8_class() && mb_ == 0);  // (fp8 weight casts: gemm())
    sig_.push_back(static_cast<int64_t>(pending_deps_.size()));
    for (OpId d : pending_deps_) sig_.push_back(first - d);
    sig_.push_back(static_cast<int64_t>(overlapped_.size()));
    for (OpId d : overlapped_) sig_.push_back(first - d);
    sig_.push_back(overlap_countdown_);
    sig_.push_back(chunk_next_gemms_);
    sig_.push_back(first - last());
    sig_.push_back(first - last_compute());
    const Op& back = g_.ops.back();
    sig_.push_back(static_cast<int64_t>(back.unit) | static_cast<int64_t>(back.kind) << 8 |
                   static_cast<int64_t>(back.stream) << 16);
  }
  void layer_slots(int l, bool forward, TensorId input, std::vector<TensorId>& slots,
                   std::vector<std::string_view>* names) {
    slots.clear();
    if (forward) {
      slots.push_back(input);
      return;
    }
    const LayerState& st = layer_state_.at({mb_, l});
    slots.push_back(st.input);
    for (const auto& [n, t] : st.kept.items) {
      slots.push_back(t);
      if (names) names->push_back(n);
    }
  }

  bool stamp_layer(int l, bool forward, TensorId& layer_input) {
    sig_key_ = SIZE_MAX;
    if (!templates_apply(l, forward)) return false;
    const std::size_t key = 2 * static_cast<std::size_t>(l) + (forward ? 0 : 1);
    if (key >= templates_.size()) return false;
    layer_signature();
    sig_key_ = key;  // (record_layer, called next when nothing matches, reuses it)
    const LayerTemplate* tpl = nullptr;
    for (const LayerTemplate& c : templates_[key])
      if (c.usable && c.sig == sig_) {
        tpl = &c;
        break;
      }
    if (!tpl) return false;
    std::vector<TensorId>& slots = slots_;
    slots.clear();
    auto state = layer_state_.end();
    if (forward) {
      slots.push_back(layer_input);
    } else {
      state = layer_state_.find({mb_, l});
      const auto& kept = state->second.kept.items;
      if (kept.size() != tpl->kept_names.size()) return false;
      slots.push_back(state->second.input);
      for (std::size_t i = 0; i < kept.size(); ++i) {
        // (The names view the cached steps' strings: the same pointer, as a rule.)
        const std::string_view a = kept[i].first, b = tpl->kept_names[i];
        if (!(a.data() == b.data() && a.size() == b.size()) && a != b) return false;
        slots.push_back(kept[i].second);
      }
    }
    const auto first = static_cast<OpId>(g_.ops.size());
    const auto tfirst = static_cast<TensorId>(g_.tensors.size());
    const OpId delta = first - tpl->first_op;  // (unsigned: wraps back for ids before the layer)
    auto op_id = [&](OpId id) { return id == kNoOp ? kNoOp : id + delta; };
    auto tensor_id = [&](TensorId t) { return t & kSlotRef ? slots[t & ~kSlotRef] : t + tfirst; };
    const auto micro = static_cast<uint32_t>(mb_);
    for (const Tensor& x : tpl->tensors) {
      Tensor& y = g_.tensors.emplace_back(x);
      y.name.a = micro;
    }
    g_.ops.insert(g_.ops.end(), tpl->ops.begin(), tpl->ops.end());
    for (auto it = g_.ops.begin() + first; it != g_.ops.end(); ++it) {
      Op& op = *it;
      op.name.a = micro;
      op.host_waits_for = op_id(op.host_waits_for);
      for (OpId& d : op.deps) d = op_id(d);
      for (TensorId& t : op.allocs) t = tensor_id(t);
      for (TensorId& t : op.frees) t = tensor_id(t);
    }
    const LayerTemplate::Exit& ex = tpl->exit;
    pending_deps_.clear();
    for (OpId d : ex.pending_deps) pending_deps_.push_back(op_id(d));
    overlapped_.clear();
    for (OpId d : ex.overlapped) overlapped_.push_back(op_id(d));
    pending_host_wait_ = op_id(ex.pending_host_wait);
    overlap_countdown_ = ex.overlap_countdown;
    chunk_next_gemms_ = ex.chunk_next_gemms;
    phase_ = ex.phase;
    prefix_micro_layer(l);
    if (forward) {
      LayerState& st = layer_state_[{mb_, l}];
      st.input = layer_input;
      st.kept.items.reserve(tpl->kept_names.size());
      // (The recording's names are distinct: appended as StepMap::set would.)
      for (std::size_t i = 0; i < tpl->kept_names.size(); ++i)
        st.kept.items.emplace_back(tpl->kept_names[i], tensor_id(tpl->kept_exit[i]));
      layer_input = tensor_id(tpl->out);
    } else {
      layer_state_.erase(state);
    }
    if (options_.stamped_layers) ++*options_.stamped_layers;
    return true;
  }

  // Emits the layer's ops, and records them as a template when the state allows it.
  void record_layer(int l, bool forward, TensorId& layer_input) {
    const bool rec = templates_apply(l, forward);
    const std::size_t key = 2 * static_cast<std::size_t>(l) + (forward ? 0 : 1);
    if (!rec) {
      if (forward) layer_forward_ops(l, layer_input);
      else layer_backward_ops(l);
      return;
    }
    if (templates_.size() <= key) templates_.resize(2 * static_cast<std::size_t>(std::max(1, graph_layers_)));
    if (sig_key_ != key) layer_signature();
    sig_key_ = SIZE_MAX;
    auto& list = templates_[key];
    LayerTemplate* seen = nullptr;
    for (LayerTemplate& c : list)
      if (c.sig == sig_) {
        seen = &c;
        break;
      }
    // The first layer from a new state is recorded (with 8 micro-steps or more, a state met once is met again
    // as a rule: only the last micro-batch's backward, after the gradient reductions, is met once per layer).
    if (seen || list.size() >= kTemplatesPerLayer) {
      if (forward) layer_forward_ops(l, layer_input);
      else layer_backward_ops(l);
      return;
    }
    LayerTemplate& tpl = list.emplace_back();  // (the list does not change while the layer is emitted)
    tpl.sig = sig_;
    tpl.first_op = static_cast<OpId>(g_.ops.size());
    tpl.first_tensor = static_cast<TensorId>(g_.tensors.size());
    if (!forward) layer_slots(l, forward, layer_input, tpl.slots, &tpl.kept_names);
    else layer_slots(l, forward, layer_input, tpl.slots, nullptr);
    // The ops before the layer its emission may reach: each must come out unchanged.
    std::vector<OpId>& known = known_;
    known.assign(pending_deps_.begin(), pending_deps_.end());
    known.insert(known.end(), overlapped_.begin(), overlapped_.end());
    known.push_back(last());
    known.push_back(last_compute());
    known.push_back(tpl.first_op - 1);
    std::vector<Op>& before = before_;
    before.clear();
    for (OpId id : known) before.push_back(g_.ops[id]);
    const uint32_t micro = static_cast<uint32_t>(mb_);
    if (forward) layer_forward_ops(l, layer_input);
    else layer_backward_ops(l);

    bool ok = !pending_cross_ && !quantizing_ && !fsdp_mark_next_ && !attn_dp_ && !scores_recomputed_ &&
              module_marks_.empty() && unjoined_ep_.empty() && pending_alloc_.empty() &&
              prefix_.prefix == NamePrefix::micro_layer && prefix_.a == static_cast<uint32_t>(mb_) &&
              prefix_.b == static_cast<uint32_t>(l);
    for (std::size_t i = 0; ok && i < known.size(); ++i) ok = same_op(g_.ops[known[i]], before[i]);
    const auto op_known = [&](OpId id) {
      return id == kNoOp || id >= tpl.first_op || std::find(known.begin(), known.end(), id) != known.end();
    };
    const auto tensor_known = [&](TensorId t) {
      return t >= tpl.first_tensor || std::find(tpl.slots.begin(), tpl.slots.end(), t) != tpl.slots.end();
    };
    const auto own_name = [&](const Name& n) {
      return n.prefix == NamePrefix::micro_layer && n.a == micro && n.b == static_cast<uint32_t>(l) && !n.literal;
    };
    // Slots must be told apart by value.
    for (std::size_t i = 0; ok && i < tpl.slots.size(); ++i)
      for (std::size_t j = i + 1; ok && j < tpl.slots.size(); ++j) ok = tpl.slots[i] != tpl.slots[j];
    for (std::size_t i = tpl.first_op; ok && i < g_.ops.size(); ++i) {
      const Op& op = g_.ops[i];
      ok = own_name(op.name) && op_known(op.host_waits_for) && std::all_of(op.deps.begin(), op.deps.end(), op_known) &&
           std::all_of(op.allocs.begin(), op.allocs.end(), tensor_known) &&
           std::all_of(op.frees.begin(), op.frees.end(), tensor_known);
    }
    for (std::size_t t = tpl.first_tensor; ok && t < g_.tensors.size(); ++t) ok = own_name(g_.tensors[t].name);
    ok = ok && std::all_of(pending_deps_.begin(), pending_deps_.end(), op_known) &&
         std::all_of(overlapped_.begin(), overlapped_.end(), op_known) && op_known(pending_host_wait_);
    if (forward && ok) {
      const LayerState& st = layer_state_.at({mb_, l});
      ok = tensor_known(layer_input) && st.offload_copy.empty() && st.host_copy.empty() && st.fetched.empty();
      for (const auto& [n, t] : st.kept.items) {
        ok = ok && tensor_known(t);
        tpl.kept_names.push_back(n);
        tpl.kept_exit.push_back(t);
      }
      tpl.out = layer_input;
    }
    if (!forward && ok) ok = layer_state_.find({mb_, l}) == layer_state_.end();
    ok = ok && g_.tensors.size() - tpl.first_tensor < kSlotRef;
    tpl.usable = ok;
    if (ok) {
      const auto encode = [&](TensorId t) {
        if (t >= tpl.first_tensor) return t - tpl.first_tensor;
        return kSlotRef | static_cast<TensorId>(std::find(tpl.slots.begin(), tpl.slots.end(), t) - tpl.slots.begin());
      };
      tpl.ops.assign(g_.ops.begin() + tpl.first_op, g_.ops.end());
      for (Op& op : tpl.ops) {
        for (TensorId& t : op.allocs) t = encode(t);
        for (TensorId& t : op.frees) t = encode(t);
      }
      for (TensorId& t : tpl.kept_exit) t = encode(t);
      if (forward) tpl.out = encode(tpl.out);
      tpl.tensors.assign(g_.tensors.begin() + tpl.first_tensor, g_.tensors.end());
      tpl.exit = {pending_deps_, overlapped_, pending_host_wait_, overlap_countdown_, chunk_next_gemms_, phase_};
    }
  }
  // XLA's runtime on the host (launch.xla_*, measured: hardware_models/calibrated/h200.yaml xla_runtime),
  // as the HLO replay charges it (workloads/hlo/hlo_lower.cpp, assign_host_work): one program execution
  // per step; with command buffers (cuda_graphs) each command-buffer execution costs its commands, and,
  // when the step's buffers moved (no donation), its buffer references the first time it runs in the
  // step. Here a command buffer is a scanned layer's body (the while loop runs it once per layer, on the
  // same buffers after the first) or, unrolled, a stretch of kernels between collectives; an op is one
  // command, and it references its operands and result: 3 buffers for a GEMM, 2 for other kernels.
  void assign_xla_host_work() {
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
  void layer_forward_ops(int l, TensorId& layer_input) {
    prefix_micro_layer(l);
    auto& st = layer_state_[{mb_, l}];
    st.input = layer_input;  // every policy keeps the layer input
    wait_for_params(l);
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
  // The D2H copy of an offloaded activation `t` after `after`; its HBM copy is freed when the copy is done (the layer
  // output stays anyway: it is the next layer's input).
  void offload_to_host(LayerState& st, const Step& step, TensorId t, OpId after) {
    Op c;
    c.name = named(step.name + ".offload");
    c.rank = static_cast<uint16_t>(rank_);
    c.kind = OpKind::copy_d2h;
    // XLA issues host-offload copies on the compute stream (operation_queue_id 0; seen in a
    // JAX profile on the H200), so they serialize with compute; Megatron uses side streams.
    c.stream = jax_ ? StreamKind::compute : StreamKind::d2h;
    c.phase = Phase::forward;
    c.copy_bytes = step.held_bytes();
    c.deps = {after};
    const TensorId host = g_.tensor(named(step.name + ".host"), MemCategory::activations, step.held_bytes(), true,
                                    static_cast<uint16_t>(rank_));
    c.allocs.push_back(host);
    if (step.name != "mlp_out") c.frees.push_back(t);
    st.offload_copy.set(step.name, g_.add(std::move(c)));
    st.host_copy.set(step.name, host);
  }
  // Bytes of layer l's activations that the recompute policy keeps in HBM for the backward
  // (the layer input included), with XLA's residual sizes in JAX mode.
  double saved_residual_bytes(int l) {
    double bytes = Tsp_ * h_ * pr_.activation_bytes;  // the layer input
    for (const auto& st : layer_steps(l))
      if (st.saved) bytes += st.out_bytes;
    if (stacks_cast_weights()) bytes += cast_weight_count(l) * pr_.activation_bytes;
    return bytes;
  }
  // The weights XLA casts to bf16 for a layer: under FSDP the rank's shard (it casts before the bf16 gather).
  double cast_weight_count(int l) const {
    return fsdp_per_use() ? dense_weights(l) / dense_replicas() + expert_weights(l) / expert_replicas() : layer_weights(l);
  }
  bool scanned_forward_weight_cast() const { return scanned_loop() && !fp8_class(); }
  // Without a remat policy the scanned forward keeps each layer's bf16 weights for the backward GEMMs: the
  // loop writes them into stacked bf16 buffers (m1_none, s1_none_scan: loop_dynamic_update_slice_fusion.33-.37,
  // [L, ...] bf16 outputs of the forward while loop) and the backward slices them out (fusion-start dynamic
  // slices of the five weights, scan.stack_slice).
  bool stacks_cast_weights() const { return scanned_forward_weight_cast() && t_.recompute.mode == RecomputeMode::none; }
  bool slices_stacked_layer_weights() const {
    return jax_ && !t_.scan_layers && t_.layer_params_stacked() && t_.recompute.mode != RecomputeMode::none;
  }
  OpId last_compute() const {
    for (OpId i = last(); i > 0; --i)
      if (g_.ops[i].stream == StreamKind::compute) return i;
    return 0;
  }

  // When a layer's gather may start on the GPU: after the previous layer's compute started (one layer of
  // prefetch), or after the work issued before it (Megatron-FSDP: see fsdp_layer_params).
  enum class GatherAfter { previous_layer_start, issued_work };
  TensorId fsdp_gather(int l, GatherAfter after = GatherAfter::previous_layer_start) {
    in_loop_gather_ = true;
    const TensorId buf = fsdp_gather_params(dense_weights(l), expert_weights(l), after);
    in_loop_gather_ = false;
    return buf;
  }
  // Layer l's gathered weights for this pass, and the next layer's gather issued (`next`: l + 1 forward,
  // l - 1 backward). Megatron-FSDP (--use-custom-fsdp, Megatron-LM@1e057005 custom_fsdp/
  // fully_sharded_data_parallel.py: _pre_forward_param_unshard and _pre_backward call
  // all_gather_params with prefetch, whose suggested size is twice an FSDP unit's parameters) issues,
  // from a layer's pre-forward (pre-backward) hook, that layer's gather if it is not already there and
  // the next unit's in the pass's order. So the next gather is on the host before the layer's own
  // kernels and host waits (DeepEP's token counts). On the GPU it waits for the work issued before it:
  // the gather is an async torch.distributed call (param_and_grad_buffer.py all_gather_bucket_and_set_items),
  // and ProcessGroupNCCL makes its stream wait on the current stream at the call (syncStream), i.e. for the
  // previous layer's kernels, which bounds the gathered weights in flight. Elsewhere (XLA) fsdp_gather's
  // rules hold.
  struct Prefetched {
    TensorId buf = 0;
    std::vector<OpId> gathers;
  };
  std::map<std::pair<int, int>, Prefetched> fsdp_prefetched_;  // (micro-batch, layer) -> its gather
  TensorId fsdp_layer_params(int l, int next) {
    if (jax_) return fsdp_gather(l);
    TensorId buf = 0;
    if (auto it = fsdp_prefetched_.find({mb_, l}); it != fsdp_prefetched_.end()) {
      buf = it->second.buf;
      pending_deps_.insert(pending_deps_.end(), it->second.gathers.begin(), it->second.gathers.end());
      fsdp_prefetched_.erase(it);
    } else {
      buf = fsdp_gather(l, GatherAfter::issued_work);
    }
    if (next >= first_layer(chunk_) && next < end_layer(chunk_)) {
      // The gather takes none of this layer's pending dependencies, and this layer's compute does not
      // wait for it.
      std::vector<OpId> layer_deps;
      layer_deps.swap(pending_deps_);
      prefix_micro_layer(next);
      Prefetched p;
      p.buf = fsdp_gather(next, GatherAfter::issued_work);
      p.gathers.swap(pending_deps_);
      pending_deps_.swap(layer_deps);
      fsdp_prefetched_[{mb_, next}] = std::move(p);
      prefix_micro_layer(l);
    }
    return buf;
  }
  // JAX with scanned layers: a layer's gather is inside its iteration of XLA's while loop, unless the
  // collective pipeliner moved it into the previous iteration (--xla_gpu_enable_pipelined_all_gather:
  // kBackward pipelining, xla/service/collective_pipeliner.h; the first layer's is peeled before the loop).
  bool in_loop_gather_ = false;
  bool scanned_loop() const { return jax_ && t_.scan_layers; }
  // One layer of prefetch: the gather for the next layer may start when the current layer's
  // compute starts.
  std::optional<OpId> fsdp_prev_start_;
  bool fsdp_mark_next_ = false;
  // `dense_bytes_per_param`: the dense weights' gathered dtype, when not pr_.param_gather_bytes (the output layer's).
  TensorId fsdp_gather_params(double dense_params, double expert_params = 0,
                              GatherAfter after = GatherAfter::previous_layer_start, double dense_bytes_per_param = 0) {
    // ZeRO-3: gather these weights before use, each part over its own replicas (dense over dp·cp,
    // routed experts over edp). The all-gather may start as soon as the previous layer's compute
    // starts (one layer of prefetch), not earlier; or, `issued_work`, once the kernels issued before it
    // are done (Megatron-FSDP, which issues it from the layer's hook: fsdp_layer_params).
    const double dense_bytes =  // the gathered (full) weights
        dense_params * (dense_bytes_per_param > 0 ? dense_bytes_per_param : pr_.param_gather_bytes);
    const double expert_bytes = expert_params * pr_.param_gather_bytes;
    std::vector<OpId> deps;
    const bool own_iteration = in_loop_gather_ && scanned_loop() && !t_.xla_pipelined.all_gather;
    // In its own iteration the gather starts when the previous iteration has ended: its last op and
    // (through pending_deps_) the collectives that iteration waits for. Pipelined, it is issued at the
    // start of the previous iteration (which already waited for those), so it does not wait for them.
    std::vector<OpId> held;
    if (own_iteration) deps.push_back(last());
    else if (after == GatherAfter::issued_work) {
      if (const OpId c = last_compute(); c != 0) deps.push_back(c);
    } else if (fsdp_prev_start_) {
      deps.push_back(*fsdp_prev_start_);
    }
    if (in_loop_gather_ && scanned_loop() && t_.xla_pipelined.all_gather) held.swap(pending_deps_);
    // The next compute op starts this layer: the gather after this one may begin with it.
    fsdp_mark_next_ = true;
    const TensorId buf = g_.tensor(named("fsdp.params"), MemCategory::weights, dense_bytes + expert_bytes, false,
                                   static_cast<uint16_t>(rank_));
    std::vector<OpId> gathers;
    const std::vector<double> pieces = in_loop_gather_ ? xla_gather_pieces(dense_params) : std::vector<double>{};
    if (pieces.size() > 1) {
      for (std::size_t i = 0; i < pieces.size(); ++i)
        gathers.push_back(collective(fmt::format("fsdp.param_all_gather.{}", i), CollectiveOp::all_gather,
                                     dense_shard_group(), pieces[i], deps));
    } else {
      gathers.push_back(collective("fsdp.param_all_gather", CollectiveOp::all_gather, dense_shard_group(), dense_bytes, deps));
    }
    g_.ops[gathers.front()].allocs.push_back(buf);
    if (expert_bytes > 0)
      gathers.push_back(
          collective("fsdp.param_all_gather.experts", CollectiveOp::all_gather, expert_shard_group(), expert_bytes, deps));
    pending_deps_.insert(pending_deps_.end(), held.begin(), held.end());  // the layer's compute still waits for them
    pending_deps_.insert(pending_deps_.end(), gathers.begin(), gathers.end());
    return buf;
  }

  // XLA (JAX mode) gathers a layer's weights array by array: the SPMD partitioner makes one all-gather per sharded
  // weight, and the all-gather combiner (program order, greedy) merges consecutive ones only while the gathered
  // outputs sum to at most training.xla_combine_threshold.all_gather; one larger stays alone. Each collective pays its
  // own ring latency. (MaxText's Llama 3 70B compiled for 64 and 512 GPUs, calibration/data/h200-2026-12-04-mock-compile:
  // seven all-gathers per layer, q, k, v, o and the three MLP matrices, each over the 30 MiB default; Llama 2 7B on A3
  // at 128 MiB: four per layer.) The gathered bytes of each collective, in program order; empty when the layer is not
  // a plain dense one (MoE, MLA: one gather, as before) or not JAX. The norms' gains go with the last.
  std::vector<double> xla_gather_pieces(double dense_params) const {
    if (!jax_ || m_.moe || m_.mla || dense_params <= 0) return {};
    const std::vector<double> arrays = dense_layer_weight_arrays();
    double sum = 0;
    for (double a : arrays) sum += a;
    if (sum <= 0 || sum > dense_params * (1 + 1e-9)) return {};
    const double gb = pr_.param_gather_bytes;
    std::vector<double> outs;
    for (double a : arrays) outs.push_back(a * gb);
    const std::vector<int> group = xla_combine_groups(outs, t_.xla_combine_threshold.all_gather_bytes);
    std::vector<double> bytes;  // per group, in program order (groups are numbered by their first array)
    for (std::size_t i = 0; i < outs.size(); ++i) {
      if (group[i] < 0) continue;  // (an array of no bytes)
      const auto g = static_cast<std::size_t>(group[i]);
      if (g >= bytes.size()) bytes.resize(g + 1, 0.0);
      bytes[g] += outs[i];
    }
    bytes.back() += (dense_params - sum) * gb;  // the norms' gains with the last
    return bytes;
  }

  void backward_chunk(int v) {
    phase_ = Phase::backward;
    chunk_ = v;
    const double a = pr_.activation_bytes;
    prefix_micro_vstage(v);
    if (ep_interleave_) ep_ctx_ = EpCtx{kEpPre};
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
    // The output layer's (and MTP modules', shared embedding's) gradients are complete: release the gathered
    // weights and sync them. Under MTP that is after the first depth's input backward (eh_proj, the embedding).
    auto release_head = [&] {
      if (fsdp) g_.ops.back().frees.push_back(head_buf);
      if (last_micro_for_sync()) grad_sync("grad.head", head_weights(), 0, false, pr_.head_grad_reduce_bytes);
    };
    if (v == vstages_ - 1) {
      if (fsdp) head_buf = fsdp_gather_params(head_weights(), 0, GatherAfter::previous_layer_start, pr_.head_gather_bytes);
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
      hold_unsharded_grads(l, layer_first_op);
      if (is_mtp_layer(l)) {
        mtp_input_backward(l);
        if (l == m_.layers) release_head();
      }
      if (last_micro_for_sync()) {
        if (gathers_before_grads()) deferred_sync_ = DeferredSync{prefix_, l};
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
      embedding_backward("embedding");
      if (has_buf) g_.ops.back().frees.push_back(buf);
      if (last_micro_for_sync()) grad_sync("grad.embedding", embedding_weights(), 0, false, pr_.embedding_grad_reduce_bytes);
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
  // XLA runs all its asynchronous collectives on one stream (AsyncStreamKind::kCollective, see collective()), in the
  // order its latency-hiding scheduler issues them: a layer's weight gather needs only the weights, so it is issued
  // to overlap the layer after it in the backward, before that layer's gradient collectives, which wait for its
  // wgrad. Unrolled layers: a layer's gradient sync is emitted after the next layer's gather (its ready op is the
  // same: last() skips data-parallel collectives). Scanned layers are left as they were (two streams): their
  // iterations and the collective pipeliner fix another order, not modelled on one stream.
  bool gathers_before_grads() const { return jax_ && !t_.scan_layers && fsdp_per_use(); }
  struct DeferredSync {
    Name prefix;
    int layer = 0;
  };
  std::optional<DeferredSync> deferred_sync_;
  void flush_deferred_sync() {
    if (!deferred_sync_) return;
    const Name keep = prefix_;
    const int l = deferred_sync_->layer;
    prefix_ = deferred_sync_->prefix;
    deferred_sync_.reset();
    grad_sync("grad", dense_weights(l), expert_weights(l), true);
    prefix_ = keep;
  }
  std::vector<TensorId> pending_alloc_;
  void attach_pending_allocs(OpId id) {
    for (TensorId t : pending_alloc_) g_.ops[id].allocs.push_back(t);
    pending_alloc_.clear();
  }

  void prefetch_offloaded(int l) {
    auto& st = layer_state_[{mb_, l}];
    if (st.offload_copy.empty() || st.fetch_issued) return;
    st.fetch_issued = true;
    prefix_micro_layer(l);
    // Not before the backward reaches the layer above: fetching everything at once would fill HBM, which is what
    // offloading avoids.
    for (const auto& [name, d2h] : st.offload_copy.sorted()) fetch_from_host(st, name, last());
  }
  // The H2D copy of an offloaded activation (named under the current prefix), after its D2H copy and after `after`;
  // recorded in the layer's fetched list. XLA issues it on the compute stream, Megatron on a side stream.
  OpId fetch_from_host(LayerState& st, std::string_view name, OpId after) {
    const TensorId host = *st.host_copy.find(name);
    Op c;
    c.name = named(std::string(name) + ".fetch");
    c.rank = static_cast<uint16_t>(rank_);
    c.kind = OpKind::copy_h2d;
    c.stream = jax_ ? StreamKind::compute : StreamKind::h2d;
    c.phase = Phase::backward;
    c.copy_bytes = g_.tensors[host].bytes;
    c.deps = {*st.offload_copy.find(name)};
    if (after != kNoOp) c.deps.push_back(after);
    const TensorId t = temp(std::string(name) + ".fetched", c.copy_bytes);
    c.allocs.push_back(t);
    c.frees.push_back(host);
    const OpId id = g_.add(std::move(c));
    st.fetched.push_back({t, id, name});
    return id;
  }

  // ---- Megatron-Core's fine-grained activation offloading ------------------------------------
  // (--fine-grained-activation-offloading --offload-modules ...; megatron/core/pipeline_parallel/
  // fine_grained_activation_offload.py at Megatron-LM@0c306dcd, PR #3219, the code the Megatron-MoE-ModelZoo
  // Qwen3 GB200 MXFP8 row names.) Each offloaded activation is a group: its D2H copy runs on a side stream after its
  // module's forward; in the backward a group is reloaded on the H2D stream when the backward of the group after it
  // (in forward order) has ended: ChunkOffloadHandler.on_group_start_backward makes the H2D stream wait for the
  // compute stream and bulk_reload issues the next group on the chunk's stack, or, once the chunk's stack is empty,
  // the last group of the next backward chunk (pre_reload_last_layer). The compute stream waits for a group's reload
  // right before that group's backward (on_group_commit_backward). So a group reloads one group ahead of its use:
  // behind a whole layer's backward for the first group of a layer, behind the next module's only within one (the
  // MoE experts' fc1 input reloads after the activation's backward, right before fc1's). JAX mode keeps XLA's
  // schedule (prefetch_offloaded).
  bool megatron_offload() const { return !jax_ && t_.recompute.mode == RecomputeMode::names && !t_.recompute.offload.empty(); }
  bool keeps_last_groups_ = false;         // the chunk being emitted runs its backward next (its last group stays)
  OpId offload_preload_after_ = kNoOp;    // where the previous backward chunk's last group ended
  OpId offload_preload_pair_ = kNoOp;     // the first op of that point's interleaved pair, if in one
  int bwd_layer_ = -1;                    // the layer whose backward is being emitted
  StepMap<TensorId>* bwd_by_step_ = nullptr;  // that layer's tensors by step, freed after their step's backward
  // Which forward chunks of a rank's schedule keep their last group of each name (Megatron's fine-grained offloading):
  // a chunk whose own backward is the next to start once its forward is done (should_bulk_offload: the front of the
  // backward queue is this chunk; a backward paired with the forward in Megatron-Core's combined 1F1B order has started
  // by then), and the first backward chunk, micro-batch 0 of the rank's last model chunk (post_warmup_callback's margin).
  std::vector<char> chunks_keeping_last_groups(const std::vector<ScheduleEntry>& schedule) const {
    std::vector<char> keeps(schedule.size(), 0);
    if (!megatron_offload()) return keeps;
    std::vector<std::ptrdiff_t> partner(schedule.size(), -1);  // the other half of an interleaved pair
    if (ep_overlap_asked() && megatron_ep_overlap())
      for (std::size_t i = 0; i + 1 < schedule.size(); ++i)
        if (schedule[i].paired && schedule[i + 1].paired) {
          partner[i] = static_cast<std::ptrdiff_t>(i + 1);
          partner[i + 1] = static_cast<std::ptrdiff_t>(i);
          ++i;
        }
    for (std::size_t i = 0; i < schedule.size(); ++i) {
      const ScheduleEntry& f = schedule[i];
      if (!f.forward) continue;
      if (f.micro == 0 && f.chunk == vp_ - 1) keeps[i] = 1;
      for (std::size_t j = i + 1; j < schedule.size() && !keeps[i]; ++j) {
        if (schedule[j].forward || static_cast<std::ptrdiff_t>(j) == partner[i]) continue;
        keeps[i] = schedule[j].micro == f.micro && schedule[j].chunk == f.chunk;
        break;
      }
    }
    return keeps;
  }
  bool megatron_keeps_last_group(int l, std::string_view name) {
    if (!megatron_offload() || !keeps_last_groups_) return false;
    for (int k = l + 1; k < end_layer(chunk_); ++k)
      for (const Step& s : layer_steps(k))
        if (s.offloaded && s.name == name) return false;
    return true;
  }
  // The chunk's next offloaded group in backward order after `after` in layer l (none: from the top of layer l).
  std::optional<std::pair<int, std::string_view>> next_offloaded_group(int l, std::string_view after) {
    for (int k = l; k >= first_layer(chunk_); --k) {
      const auto it_st = layer_state_.find({mb_, k});
      if (it_st == layer_state_.end()) continue;
      bool past = k != l || after.empty();
      const auto& steps = layer_steps(k);
      for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        if (!past) {
          past = it->name == after;
          continue;
        }
        if (it_st->second.offload_copy.find(it->name)) return std::pair<int, std::string_view>{k, it->name};
      }
    }
    return std::nullopt;
  }
  // The reload (H2D copy) of layer l's group `name`, after its D2H copy and after `after` (the compute stream's work
  // then); the one already issued, if any.
  OpId megatron_reload(int l, std::string_view name, OpId after) {
    auto& st = layer_state_[{mb_, l}];
    for (const auto& f : st.fetched)
      if (f.step == name) return f.copy;
    const Name saved_prefix = prefix_;
    prefix_micro_layer(l);
    const OpId id = fetch_from_host(st, name, after);
    if (l == bwd_layer_ && bwd_by_step_) bwd_by_step_->set(name, st.fetched.back().tensor);
    prefix_ = saved_prefix;
    return id;
  }
  // A backward chunk's first group: reloaded where the previous backward chunk's last group ended, if this chunk's
  // forward had offloaded it by then (pre_reload_last_layer); otherwise now.
  // (Inside an interleaved pair the order its forward's copy and the trigger are issued in is set later, by close_pair:
  // a chunk whose forward is in the trigger's pair is not taken as done, which is the conservative reading.)
  void megatron_reload_chunk_start(int l) {
    const auto g = next_offloaded_group(l, {});
    if (!g) return;
    const OpId d2h = *layer_state_[{mb_, g->first}].offload_copy.find(g->second);
    const bool done_before = offload_preload_after_ != kNoOp && d2h < offload_preload_after_ &&
                             (offload_preload_pair_ == kNoOp || d2h < offload_preload_pair_);
    const OpId after = done_before ? offload_preload_after_ : last();
    offload_preload_after_ = kNoOp;
    megatron_reload(g->first, g->second, after);
  }
  // Right before the backward of layer bwd_layer_'s group `name`: the compute stream waits for its reload.
  void offload_wait(std::string_view name) {
    if (!megatron_offload() || bwd_layer_ < 0) return;
    auto& st = layer_state_[{mb_, bwd_layer_}];
    if (!st.offload_copy.find(name)) return;  // kept in HBM (not offloaded, or the chunk's last group)
    pending_deps_.push_back(megatron_reload(bwd_layer_, name, last()));  // (issued earlier as a rule)
  }
  // The backward of layer bwd_layer_'s group `name` has ended: the next group reloads behind it.
  void offload_done(std::string_view name) {
    if (!megatron_offload() || bwd_layer_ < 0 || !layer_state_[{mb_, bwd_layer_}].offload_copy.find(name)) return;
    if (const auto g = next_offloaded_group(bwd_layer_, name)) {
      megatron_reload(g->first, g->second, last());
    } else {
      offload_preload_after_ = last();
      offload_preload_pair_ = ep_interleave_ ? pair_first_op_ : kNoOp;
    }
  }

  void layer_backward_ops(int l) {
    prefix_micro_layer(l);
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
    bwd_layer_ = -1;
    bwd_by_step_ = nullptr;
  }

  // ---- ZeRO parameter all-gathers overlapped with the forward (--overlap-param-gather) --------
  // Megatron gathers the updated parameters bucket by bucket as the next step's forward reaches them.
  // A step in steady state is modelled with the previous step's gathers at its start: every layer's
  // bucket (and the embedding's, the head's) is issued first, and the first forward of that layer waits
  // for its own bucket only. Keys: layer index, kEmbeddingBucket, kHeadBucket.
  static constexpr int kEmbeddingBucket = -1, kHeadBucket = -2;
  std::map<int, std::vector<OpId>> param_ready_;
  bool overlapped_param_gather() const {
    const auto mode = t_.optimizer_sharding;
    return fsdp_per_step() ||
           (!jax_ && t_.overlap_param_gather && (mode == OptimizerSharding::zero1 || mode == OptimizerSharding::zero2));
  }
  // PyTorch FSDP gathers a layer's weights before each use and frees them after (forward and backward of
  // every micro-batch). Under a pipeline schedule, torch.distributed.pipelining keeps them gathered for
  // the whole step and reduces the gradients once, in the last backward (set_reshard_after_backward(False)
  // and set_requires_gradient_sync(False) for the others; torchtitan also sets reshard_after_forward off
  // with PP): the traffic of ZeRO-1 with the gathers at the start of the step, the state of ZeRO-1 while
  // the step runs. (JAX's fsdp is XLA's partitioner, not this.)
  bool fsdp_per_step() const { return t_.optimizer_sharding == OptimizerSharding::fsdp && pp_ > 1 && !jax_; }
  bool fsdp_per_use() const { return t_.optimizer_sharding == OptimizerSharding::fsdp && !fsdp_per_step(); }
  // `after`: the op the first gather waits for (kNoOp: none); it is cleared once used.
  void gather_bucket(int key, const std::string& name, double dense_params, double expert_params, OpId& after) {
    prefix_rank();
    phase_ = Phase::forward;
    auto& ready = param_ready_[key];
    const auto take_after = [&after]() -> SmallVec<OpId, 3> {
      if (after == kNoOp) return {};
      return {std::exchange(after, kNoOp)};
    };
    if (dense_replicas() > 1 && dense_params > 0)
      ready.push_back(collective(name + ".param_all_gather", CollectiveOp::all_gather, dense_shard_group(),
                                 dense_params * pr_.param_gather_bytes, take_after()));
    if (expert_replicas() > 1 && expert_params > 0)
      ready.push_back(collective(name + ".param_all_gather.experts", CollectiveOp::all_gather, expert_shard_group(),
                                 expert_params * pr_.param_gather_bytes, take_after()));
  }
  // A torch.distributed collective's stream first waits for the work already on the current stream
  // (ProcessGroupNCCL): the step's first gather waits for `after`, the gradient buffers' memset (zero_grad_buffer).
  void gather_params_ahead(OpId after) {
    for (int c = 0; c < vp_; ++c) {
      const int v = c * pp_ + rank_;
      if (v == 0) gather_bucket(kEmbeddingBucket, "embedding", embedding_weights(), 0, after);
      for (int l = first_layer(v); l < end_layer(v); ++l)
        gather_bucket(l, fmt::format("L{}", l), dense_weights(l), expert_weights(l), after);
      if (v == vstages_ - 1) gather_bucket(kHeadBucket, "head", head_weights(), 0, after);
    }
  }
  // The next op waits for this bucket's gather (once: later micro-batches find the weights there).
  void wait_for_params(int key) {
    if (auto it = param_ready_.find(key); it != param_ready_.end()) {
      pending_deps_.insert(pending_deps_.end(), it->second.begin(), it->second.end());
      param_ready_.erase(it);
    }
  }

  // ---- data-parallel gradient synchronisation -------------------------------------------
  // Buckets are layers; once per optimizer step after the last micro-batch (none, zero1) or in
  // every micro-batch (zero2, fsdp). Dense weights reduce over dp·cp; routed experts over the
  // expert-data-parallel group dp·cp/ep.
  bool last_micro_for_sync() const { return grads_sharded() || mb_ == micro_steps_ - 1; }
  // Sharded gradients (ZeRO-2, FSDP per use, Megatron mode): a layer's backward still writes its whole gradient, in
  // fp32 (Megatron-FSDP's main_grad buffer of the layer's parameters; torch FSDP2's unsharded gradient before its
  // reduce-scatter), which lives from the layer's first backward op (its wgrads) until the reduce-scatter that shards
  // it has finished; only the shard stays resident (add_resident_state). Allocated on the first backward-phase op of
  // the layer's ops [first, end), freed by grad_sync's last collective for the layer.
  void hold_unsharded_grads(int l, OpId first) {
    if (jax_ || !grads_sharded()) return;
    for (OpId i = first; i < g_.ops.size(); ++i)
      if (g_.ops[i].rank == rank_ && g_.ops[i].phase == Phase::backward) {
        const TensorId t = g_.tensor(named("grads.unsharded"), MemCategory::gradients,
                                     layer_weights(l) * pr_.grad_bytes, false, static_cast<uint16_t>(rank_));
        g_.ops[i].allocs.push_back(t);
        unsharded_grads_ = t;
        return;
      }
  }
  std::optional<TensorId> unsharded_grads_;  // the layer's whole gradient, freed by its grad_sync
  // Megatron-FSDP bounds the whole gradients waiting for their reduce-scatter: before it issues a bucket's, it makes
  // the compute stream wait for (and frees) the oldest queued ones while the queue holds more than
  // max(1e9, 2 x the mean FSDP unit) parameters (megatron_fsdp.py suggested_RS_queue_capacity; param_and_grad_buffer.py
  // GradReducePipeline.wait_for_previous_grad_reduce, Megatron-LM@d98e8a64). Without the bound a step whose
  // reductions are slower than its backward would hold every layer's gradient. ZeRO-2 takes the same bound
  // (DeepSpeed's default reduce bucket, 5e8 parameters, double-buffered). A queued reduction's params, in issue order:
  std::deque<std::pair<OpId, double>> grad_reduce_queue_;
  double grad_reduce_queued_ = 0;
  double grad_reduce_capacity_ = -1;  // computed on first use (the model's mean layer: one pass over the layers)
  void throttle_grad_reductions(OpId reduction, double params) {
    grad_reduce_queue_.emplace_back(reduction, params);
    grad_reduce_queued_ += params;
    if (grad_reduce_capacity_ < 0) {
      double units = 0;
      for (int l = 0; l < m_.layers; ++l) units += layer_weights(l);
      grad_reduce_capacity_ = std::max(1e9, 2.0 * units / std::max(1, m_.layers));
    }
    while (grad_reduce_queued_ > grad_reduce_capacity_ && grad_reduce_queue_.size() > 1) {
      pending_deps_.push_back(grad_reduce_queue_.front().first);  // the next op (compute) waits for it
      grad_reduce_queued_ -= grad_reduce_queue_.front().second;
      grad_reduce_queue_.pop_front();
    }
  }

  // `in_layer_loop`: the layer's own gradients (in JAX's scan loop), not the head's or the embedding's.
  // `elem_bytes`: the reduction's bytes per parameter (0: the weights' grad_reduce_bytes).
  void grad_sync(const std::string& name, double dense_params, double expert_params = 0, bool in_layer_loop = false,
                 double elem_bytes = 0) {
    const double eb = elem_bytes > 0 ? elem_bytes : pr_.grad_reduce_bytes;
    const auto mode = t_.optimizer_sharding;
    // Megatron's DDP without --overlap-grad-reduce reduces every bucket after the whole backward
    // (finish_grad_sync); ZeRO-2/FSDP (PyTorch FSDP) and XLA always reduce as gradients appear.
    if (!jax_ && !t_.overlap_grad_reduce && (mode == OptimizerSharding::none || mode == OptimizerSharding::zero1) &&
        !flushing_grads_) {
      deferred_grads_.push_back({prefix_, name, dense_params, expert_params});
      return;
    }
    if (bucket_nan_checks() && !flushing_grads_) nan_check_bucket(name, dense_params + expert_params, false);
    const CollectiveOp op = mode == OptimizerSharding::none ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter;
    const OpId ready = last();
    // The layer's whole gradient (hold_unsharded_grads, Megatron mode only: never combined) is freed when the last
    // of its reductions ends.
    const std::optional<TensorId> whole = in_layer_loop ? std::exchange(unsharded_grads_, std::nullopt) : std::nullopt;
    if (combining()) {
      combined_grad_sync(name, dense_params, expert_params, op, ready, eb);
      return;
    }
    const std::size_t first = grad_ops_.size();
    if (dense_replicas() > 1 && dense_params > 0)
      grad_ops_.push_back(collective(name + "." + to_string(op), op, dense_shard_group(),
                                     dense_params * eb, {ready}));
    if (expert_params > 0 && expert_replicas() > 1)
      grad_ops_.push_back(collective(name + ".experts." + to_string(op), op, expert_shard_group(),
                                     expert_params * eb, {ready}));
    if (whole) {
      const OpId reduced = grad_ops_.size() > first ? grad_ops_.back() : ready;
      g_.ops[reduced].frees.push_back(*whole);
      throttle_grad_reductions(reduced, dense_params + expert_params);
    }
    // Hybrid sharding: each shard group's reduced shard is then summed over the replicas (XLA: the all-reduce
    // over the data axis of the reduce-scattered gradient; FSDP2 HSDP and Megatron's distributed-optimizer
    // instances do the same), dense and expert shards together, after their reduce-scatters.
    if (rep_ > 1 && op == CollectiveOp::reduce_scatter) {
      const double shard_bytes = (dense_params / dense_replicas() + expert_params / expert_replicas()) * eb;
      SmallVec<OpId, 3> after;
      for (std::size_t i = first; i < grad_ops_.size(); ++i) after.push_back(grad_ops_[i]);
      if (after.empty()) after.push_back(ready);
      if (shard_bytes > 0)
        grad_ops_.push_back(collective(name + ".replica_all_reduce", CollectiveOp::all_reduce, CommGroup::dp_replicate,
                                       shard_bytes, std::move(after)));
    }
    // JAX with scanned layers: a layer is one iteration of XLA's while loop, and an iteration ends
    // when all its work, its gradient collectives too, has finished: the next layer waits for them.
    // (The head's and the embedding's are reduced outside the loop.)
    // With the collective pipeliner (--xla_gpu_enable_pipelined_reduce_scatter / _all_reduce: kForward
    // pipelining, xla/service/collective_pipeliner.h) the collective moves into the next iteration, where
    // it runs beside the next layer's work: the iteration after that waits for it, and the last layer's is
    // peeled after the loop (only the optimizer waits for it).
    // Under hybrid sharding the reduce-scatter's user is the replica all-reduce, not the loop's output, so the
    // pipeliner moves it only with that all-reduce (xla_pipelined.all_reduce).
    if (scanned_loop() && in_layer_loop) {
      std::vector<OpId> carried;
      pending_deps_.insert(pending_deps_.end(), carried_grads_.begin(), carried_grads_.end());
      for (std::size_t i = first; i < grad_ops_.size(); ++i) {
        const bool ar = g_.ops[grad_ops_[i]].coll == CollectiveOp::all_reduce;
        const bool pipelined = ar ? t_.xla_pipelined.all_reduce
                                  : t_.xla_pipelined.reduce_scatter && (rep_ == 1 || t_.xla_pipelined.all_reduce);
        (pipelined ? carried : pending_deps_).push_back(grad_ops_[i]);
      }
      carried_grads_ = std::move(carried);
    }
  }
  std::vector<OpId> carried_grads_;  // pipelined gradient collectives of the previous iteration

  // Megatron's NaN checks (training.check_for_nan, Megatron's default). Before a gradient bucket's
  // reduction its DDP takes the norm of the bucket's gradients and tests it on the host
  // (param_and_grad_buffer.py:111-117 at f2e5db40; check_grads through the rerun state machine's
  // validate_result since): the host waits there for the backward so far, and the GPU then waits for the
  // host's next launches (calibration/data/h200-2026-12-02-megatron-loop-syncs). With
  // --overlap-grad-reduce buckets close as the backward fills them, each at max(40M, 1M x dp) parameters
  // (distributed_data_parallel.py:51-54), at layer granularity here; without it one bucket is checked
  // after the backward (not modelled: the GPU has finished by then).
  bool nan_checks() const { return !jax_ && t_.check_for_nan; }
  bool bucket_nan_checks() const {
    const auto mode = t_.optimizer_sharding;
    return nan_checks() && t_.overlap_grad_reduce && (mode == OptimizerSharding::none || mode == OptimizerSharding::zero1);
  }
  double nan_bucket_params_ = 0;
  void nan_check_bucket(const std::string& name, double params, bool close) {
    nan_bucket_params_ += params;
    if (nan_bucket_params_ <= 0 || (!close && nan_bucket_params_ < std::max(40e6, 1e6 * dp_))) return;
    vector(name + ".nan_check", nan_bucket_params_ * pr_.grad_reduce_bytes, 2 * nan_bucket_params_);
    pending_host_wait_ = last();
    nan_bucket_params_ = 0;
  }

  // ---- XLA's collective combiners (AllReduceCombiner, ReduceScatterCombiner) -----------------------
  // XLA merges independent collectives of one kind over the same devices, in program order, while their
  // bytes sum to at most the threshold; one larger than the threshold stays alone. A combined collective
  // starts when all its operands exist: when the last (earliest-in-network) layer of the group has its
  // gradient. Applied in unrolled programs only: in a scanned loop the body holds one layer, one gradient
  // reduce-scatter and one replica all-reduce per group, nothing to combine, and XLA does not combine
  // across iterations (the head's and the embedding's, outside the loop, are not combined: a limitation).
  // Granularity: racksim's per-layer gradient collective (XLA sees one per weight tensor).
  bool combining() const { return jax_ && !t_.scan_layers; }
  struct CombineGroup {
    std::vector<OpId> deps;  // the members' producers
    double bytes = 0;  // the collective's (nccl-tests size)
    int members = 0;
    Name prefix;       // the first member's
    std::string name;  // the first member's
    Phase phase = Phase::backward;
    CollectiveOp op = CollectiveOp::all_reduce;
    CommGroup group = CommGroup::dp;
    std::string tail;               // "reduce_scatter", "experts.reduce_scatter", "replica_all_reduce"
    bool waits_rs[2] = {false, false};  // replica all-reduce: a member's reduce-scatter is still in a pending group
  };
  CombineGroup pending_rs_[2];  // dense, expert
  CombineGroup pending_ar_;     // the open group of replica all-reduces (hybrid sharding)
  // Closed all-reduce groups still waiting for a pending reduce-scatter group of theirs, in stream order.
  std::vector<CombineGroup> closed_ar_;
  // XLA's grouping of this backward pass, planned before it (the combiner sees the whole program): per kind
  // (dense reduce-scatter, expert reduce-scatter, replica all-reduce) and gradient-sync call, whether the
  // member is alone (none or too large) and whether it is the last of its group.
  struct CombinePlan {
    std::vector<bool> alone, closes;
  };
  CombinePlan plan_[3];
  std::size_t plan_index_ = 0;
  static constexpr int kXlaCombineMaxCount = 256;  // GPU combine_threshold_count (xla/service/gpu/gpu_compiler.cc)
  // What XLA compares with the threshold, per kind, for one gradient sync: the output's bytes
  // (xla/service/collective_combiner_utils.h, ShapeUtil::ByteSizeOf(instruction->shape())), a reduce-scatter's
  // being its group's 1/n shard; and the collective's own (nccl-tests) bytes.
  struct MemberSizes {
    double output[3] = {0, 0, 0}, bytes[3] = {0, 0, 0};
  };
  MemberSizes member_sizes(double dense_params, double expert_params, double elem_bytes) const {
    MemberSizes m;
    const CollectiveOp op = grad_sync_op();
    m.bytes[0] = dense_replicas() > 1 && dense_params > 0 ? dense_params * elem_bytes : 0;
    m.bytes[1] = expert_params > 0 && expert_replicas() > 1 ? expert_params * elem_bytes : 0;
    m.output[0] = op == CollectiveOp::reduce_scatter ? m.bytes[0] / dense_replicas() : m.bytes[0];
    m.output[1] = op == CollectiveOp::reduce_scatter ? m.bytes[1] / expert_replicas() : m.bytes[1];
    m.bytes[2] = m.output[2] = rep_ > 1 && op == CollectiveOp::reduce_scatter
                                   ? (dense_params / dense_replicas() + expert_params / expert_replicas()) * elem_bytes
                                   : 0;
    return m;
  }
  CollectiveOp grad_sync_op() const {
    return t_.optimizer_sharding == OptimizerSharding::none ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter;
  }
  double threshold(int kind) const {
    const auto& th = t_.xla_combine_threshold;
    return kind < 2 && grad_sync_op() == CollectiveOp::reduce_scatter ? th.reduce_scatter_bytes : th.all_reduce_bytes;
  }
  // This backward pass's gradient collectives grouped by XLA's greedy combiner (xla_combine_groups), per kind.
  void plan_grad_combines(int v) {
    std::vector<MemberSizes> members;
    const double eb = pr_.grad_reduce_bytes;
    if (v == vstages_ - 1) members.push_back(member_sizes(head_weights(), 0, pr_.head_grad_reduce_bytes));
    for (int l = end_layer(v) - 1; l >= first_layer(v); --l) members.push_back(member_sizes(dense_weights(l), expert_weights(l), eb));
    if (v == 0) members.push_back(member_sizes(embedding_weights(), 0, pr_.embedding_grad_reduce_bytes));
    for (int k = 0; k < 3; ++k) {
      auto& p = plan_[k];
      const double limit = threshold(k);
      std::vector<double> outs;
      for (const MemberSizes& m : members) outs.push_back(m.output[k]);
      const std::vector<int> group = xla_combine_groups(outs, limit);
      p.alone.assign(members.size(), false);
      p.closes.assign(members.size(), false);
      std::vector<std::size_t> last_of(members.size(), SIZE_MAX);  // per group, its last member
      for (std::size_t i = 0; i < members.size(); ++i) {
        p.alone[i] = outs[i] <= 0 || outs[i] > limit;
        if (!p.alone[i]) last_of[static_cast<std::size_t>(group[i])] = i;
      }
      for (std::size_t g : last_of)
        if (g != SIZE_MAX) p.closes[g] = true;
    }
    plan_index_ = 0;
  }
  // XLA's greedy combiner (CombineInstructionsByKey): in program order, a member joins the open group while the
  // summed outputs stay <= the threshold and the group has fewer than 256; one larger than the threshold stays alone
  // (its own group) and the open group goes on past it; one of no bytes takes no part (-1). Each member's group,
  // numbered in order of the group's first member.
  static std::vector<int> xla_combine_groups(const std::vector<double>& outputs, double limit) {
    std::vector<int> group(outputs.size(), -1);
    int next = 0, open = -1, count = 0;
    double sum = 0;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const double out = outputs[i];
      if (out <= 0) continue;
      if (out > limit) {
        group[i] = next++;
        continue;
      }
      if (open >= 0 && (sum + out > limit || count >= kXlaCombineMaxCount)) open = -1;
      if (open < 0) {
        open = next++;
        sum = 0;
        count = 0;
      }
      sum += out;
      ++count;
      group[i] = open;
    }
    return group;
  }

  void add_member(CombineGroup& g, const std::string& name, std::span<const OpId> deps, double bytes) {
    if (g.members == 0) {
      g.prefix = prefix_;
      g.name = name;
      g.phase = phase_;
    }
    for (OpId d : deps)
      if (std::find(g.deps.begin(), g.deps.end(), d) == g.deps.end()) g.deps.push_back(d);
    g.bytes += bytes;
    ++g.members;
  }
  // Emits the group's collective in its first member's name (as uncombined when it has one member); the
  // ops pending for the next compute op stay pending.
  OpId emit_group(CombineGroup& g) {
    const Name saved_prefix = prefix_;
    const Phase saved_phase = phase_;
    std::vector<OpId> saved_deps;
    saved_deps.swap(pending_deps_);
    const OpId saved_wait = std::exchange(pending_host_wait_, kNoOp);
    prefix_ = g.prefix;
    phase_ = g.phase;
    SmallVec<OpId, 3> deps;
    for (OpId d : g.deps) deps.push_back(d);
    const std::string name =
        g.members == 1 ? g.name + "." + g.tail : fmt::format("{}.combined_{}.{}", g.name, g.members, g.tail);
    const OpId id = collective(name, g.op, g.group, g.bytes, std::move(deps));
    prefix_ = saved_prefix;
    phase_ = saved_phase;
    pending_deps_.swap(saved_deps);
    pending_host_wait_ = saved_wait;
    grad_ops_.push_back(id);
    g = CombineGroup{};
    return id;
  }
  static bool waits(const CombineGroup& g) { return g.waits_rs[0] || g.waits_rs[1]; }
  // Issues the closed all-reduce groups whose reduce-scatters are all issued, in order.
  void emit_ready_ar() {
    std::size_t n = 0;
    while (n < closed_ar_.size() && !waits(closed_ar_[n])) emit_group(closed_ar_[n++]);
    closed_ar_.erase(closed_ar_.begin(), closed_ar_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  OpId flush_rs(int k) {
    const OpId id = emit_group(pending_rs_[k]);
    auto resolve = [&](CombineGroup& g) {
      if (g.waits_rs[k]) {
        g.deps.push_back(id);
        g.waits_rs[k] = false;
      }
    };
    for (auto& g : closed_ar_) resolve(g);
    resolve(pending_ar_);
    emit_ready_ar();
    return id;
  }
  // The open all-reduce group takes no more members: issued now, or once its reduce-scatters are.
  void close_ar() {
    if (pending_ar_.members == 0) return;
    closed_ar_.push_back(std::move(pending_ar_));
    pending_ar_ = CombineGroup{};
    emit_ready_ar();
  }
  // The end of a backward pass: whatever is still pending (nothing when the plan matched the calls).
  void flush_grad_combines() {
    close_ar();
    for (int k = 0; k < 2; ++k)
      if (pending_rs_[k].members > 0) flush_rs(k);
    emit_ready_ar();
  }
  void combined_grad_sync(const std::string& name, double dense_params, double expert_params, CollectiveOp op, OpId ready,
                          double elem_bytes) {
    const MemberSizes m = member_sizes(dense_params, expert_params, elem_bytes);
    const std::size_t i = plan_index_++;
    auto planned = [&](int k, const std::vector<bool>& v, bool fallback) { return i < plan_[k].alone.size() ? v[i] : fallback; };
    const CommGroup groups[2] = {dense_shard_group(), expert_shard_group()};
    const std::string tails[2] = {std::string(to_string(op)), "experts." + std::string(to_string(op))};
    SmallVec<OpId, 3> after;
    bool rs_pending[2] = {false, false};
    for (int k = 0; k < 2; ++k) {
      if (m.bytes[k] <= 0) continue;
      if (planned(k, plan_[k].alone, true)) {  // too large to combine: alone, as uncombined
        const OpId id = collective(name + "." + tails[k], op, groups[k], m.bytes[k], {ready});
        grad_ops_.push_back(id);
        after.push_back(id);
        continue;
      }
      CombineGroup& g = pending_rs_[k];
      const OpId producer[1] = {ready};
      add_member(g, name, producer, m.bytes[k]);
      g.op = op;
      g.group = groups[k];
      g.tail = tails[k];
      if (planned(k, plan_[k].closes, true)) after.push_back(flush_rs(k));
      else rs_pending[k] = true;
    }
    if (m.bytes[2] <= 0) return;
    // Hybrid sharding's replica all-reduce of the reduced shard (see grad_sync): after this layer's
    // reduce-scatters, combined or not.
    if (after.empty() && !rs_pending[0] && !rs_pending[1]) after.push_back(ready);
    const bool alone = planned(2, plan_[2].alone, true);
    CombineGroup single;
    CombineGroup& g = alone ? single : pending_ar_;
    add_member(g, name, std::span<const OpId>(after.data(), after.size()), m.bytes[2]);
    g.op = CollectiveOp::all_reduce;
    g.group = CommGroup::dp_replicate;
    g.tail = "replica_all_reduce";
    for (int k = 0; k < 2; ++k) g.waits_rs[k] = g.waits_rs[k] || rs_pending[k];
    if (alone) {
      closed_ar_.push_back(std::move(single));
      emit_ready_ar();
    } else if (planned(2, plan_[2].closes, true)) {
      close_ar();
    }
  }
  std::vector<OpId> grad_ops_;

  // ---- XLA's latency hiding scheduler: where the step waits for a gradient collective ---------------
  // In XLA's program every asynchronous collective is a start and a done at fixed places in one instruction
  // sequence; compute after the done waits for the collective, whatever it costs on the real network. The
  // scheduler places the start so that the compute between start and done covers its own estimate of the
  // collective's latency: in XLA's GPU cost model (GpuLatencyEstimator over ApproximateLatencyEstimator,
  // xla/service/gpu/gpu_latency_hiding_scheduler.cc and xla/service/latency_hiding_scheduler.cc) an async
  // collective's latency is 5000 units and a cuBLAS/cuDNN call or a loop fusion costs 1000: "the LHS will try
  // to schedule approximately 5 of these in between each start/end pair". A gradient reduce-scatter or
  // replica all-reduce has no user in the backward (the optimizer at the end, or a later collective), so only
  // that window bounds it: the sixth kernel after it waits for it. (MaxText's Llama 2 7B compiled for 16 GPUs,
  // calibration/data/h200-2026-12-04-mock-compile: 1-4 GEMMs, 2-4 ms of compute, between each start and done.)
  // Unrolled programs only (in a scanned loop the iteration's end already bounds them). Counted over the
  // compute stream's kernels: XLA's reductions (input fusions, cost 1) count as 1000 here, which shortens a
  // window by the norms it contains.
  static constexpr int kXlaWindowKernels = 5;
  // The gradient collectives: reduce-scatters and all-reduces of the backward over a data-parallel group (found in
  // the finished graph, so that layers copied from a template are covered too).
  static bool gradient_collective(const Op& op) {
    if (op.kind != OpKind::collective || op.phase != Phase::backward) return false;
    if (op.coll != CollectiveOp::reduce_scatter && op.coll != CollectiveOp::all_reduce) return false;
    switch (op.group) {
      case CommGroup::dp: case CommGroup::dp_cp: case CommGroup::dp_shard: case CommGroup::dp_replicate:
      case CommGroup::edp: case CommGroup::edp_shard: return true;
      default: return false;
    }
  }
  // The micro-batch an op belongs to (its name's "mb{a}." prefix), or -1 (the optimizer, the step's ends).
  static int64_t micro_of(const Op& op) {
    const bool micro = op.name.prefix == NamePrefix::micro_vstage || op.name.prefix == NamePrefix::micro_layer;
    return micro ? static_cast<int64_t>(op.name.a) : -1;
  }
  // Under gradient accumulation the micro-batches are iterations of a loop (MaxText's accumulation scan): an
  // iteration ends when its collectives have, so a window never reaches into the next micro-batch; its first kernel
  // waits instead.
  void xla_scheduler_windows() {
    for (std::size_t ci = 0; ci < g_.ops.size(); ++ci) {
      if (!gradient_collective(g_.ops[ci])) continue;
      const auto c = static_cast<OpId>(ci);
      const int64_t micro = micro_of(g_.ops[c]);
      int seen = 0;
      for (auto i = static_cast<std::size_t>(c) + 1; i < g_.ops.size(); ++i) {
        Op& op = g_.ops[i];
        if (op.rank != g_.ops[c].rank) break;
        if (op.kind != OpKind::kernel || op.stream != StreamKind::compute) continue;
        const bool next_micro = micro >= 0 && micro_of(op) >= 0 && micro_of(op) != micro;
        if (!next_micro && ++seen <= kXlaWindowKernels) continue;
        if (std::find(op.deps.begin(), op.deps.end(), c) == op.deps.end()) op.deps.push_back(c);
        break;
      }
    }
  }

  struct DeferredGrad {
    Name prefix;  // where it was deferred: its name keeps that prefix
    std::string name;
    double dense = 0, expert = 0;
  };
  std::vector<DeferredGrad> deferred_grads_;
  bool flushing_grads_ = false;

  // ---- the end of Megatron-Core's finalize_model_grads --------------------------------------------
  // After finish_grad_sync (every data-parallel gradient reduction done and waited for) and before the optimizer
  // step, finalize_model_grads (Megatron-LM@d98e8a64 megatron/core/distributed/finalize_model_grads.py) runs two
  // more reductions, in this order, each a blocking NCCL call on the default stream:
  //  - _allreduce_non_tensor_model_parallel_grads: the gradients of the parameters every tp rank holds whole but
  //    computes from its own tokens, summed over tp in one coalesced all-reduce (flattened into one buffer, reduced,
  //    copied back) of their fp32 main gradients: under sequence parallelism every parameter marked
  //    sequence_parallel (each layer's norms, Transformer Engine's LayerNormLinear/LayerNormMLP and TENorm; the MoE
  //    router, moe/router.py Router.reset_parameters; the final norm; an MTP depth's enorm, hnorm and final norm),
  //    and with q/k layernorms those, with or without it;
  //  - _allreduce_word_embedding_grads: where the last stage keeps a copy of the word embeddings (tied output layer,
  //    or MTP: _get_shared_word_embedding_weight), the two copies' gradients all-reduced over the embedding group
  //    (the first and the last stage, CommGroup::embd; fp32 main gradients). The collective completes only when both
  //    stages have reached it, so each waits for the other's backward, gradient reductions and first reduction.
  // Under FSDP (and racksim's ZeRO-2) a rank holds only its shard of the gradients, which is what it reduces
  // (Megatron-FSDP: the DTensor's local tensor).
  double tp_replicated_grad_params() const {
    if (tp_ == 1) return 0;
    double n = 0;
    for (int c = 0; c < vp_; ++c) {
      const int v = c * pp_ + rank_;
      for (int l = first_layer(v); l < end_layer(v); ++l) {
        const LayerParams p = layer_params(m_, l);
        // (p.norms holds the q/k norms' and MLA's latent norms' gains; MLA's duplicated down projections are marked
        // sequence_parallel too, transformer_engine.py TELinear)
        if (t_.sequence_parallel) n += p.norms + p.router + p.attention_replicated;
        else if (m_.qk_norm) n += 2.0 * m_.head_dim;              // the q/k layernorms, matched by name
      }
    }
    if (holds_head() && t_.sequence_parallel) n += h_ + mtp_ * 3.0 * h_;  // final norm; MTP enorm, hnorm, final norm
    return n;
  }
  bool grads_sharded() const { return t_.optimizer_sharding == OptimizerSharding::zero2 || fsdp_per_use(); }
  std::vector<OpId> embd_all_reduce_;  // the embedding group's all-reduce on each of its two ranks
  OpId expert_dgrad_ = kNoOp;          // the MoE layer's last expert data-gradient GEMM (its backward, being emitted)
  // ---- the step's ends in Megatron-Core, around the layers ------------------------------------------
  // train_step zeroes every model chunk's gradient buffer before the forward-backward (Megatron-LM@d98e8a64
  // training.py train_step -> DistributedDataParallel.zero_grad_buffer -> ParamAndGradBuffer.reset: grad_data.zero_(),
  // param_and_grad_buffer.py; the same at f2e5db40): a memset of the whole fp32 (main-)gradient buffer of the rank's
  // parameters on the compute stream, the distributed optimizer's included (it shards its state, not this buffer).
  // FSDP (Megatron-FSDP; PyTorch's under a pipeline) and racksim's ZeRO-2 hold sharded gradient buffers of their own:
  // not counted there.
  // Returns the memset (kNoOp: none).
  OpId zero_grad_buffer() {
    if (grads_sharded() || t_.optimizer_sharding == OptimizerSharding::fsdp || local_params() <= 0) return kNoOp;
    phase_ = Phase::forward;
    prefix_rank();
    return vector("step.zero_grad_buffer", local_params() * pr_.grad_bytes, 0);
  }
  // Each of `ops` (one collective on each rank it spans) waits for what every other one waits for, and the replay
  // starts them together, when the last has been launched too (OpGraph::joined).
  void join_across_ranks(const std::vector<OpId>& ops) {
    SmallVec<OpId, 3> all;
    for (OpId id : ops)
      for (OpId d : g_.ops[id].deps) all.push_back(d);
    for (OpId id : ops) g_.ops[id].deps = all;
    g_.joined.push_back(ops);
  }
  // The optimizer's gradient norm (clip_grads.py get_grad_norm_fp32, called by every optimizer with --clip-grad, on by
  // default): one multi-tensor L2-norm kernel over the gradients the rank's optimizer holds (the distributed
  // optimizer's shard of fp32 main gradients), an all-reduce of the squared norm over its grad-stats group (the
  // distributed optimizer's: every GPU of the job, parallel_state.py's intra-distributed-optimizer-instance group with
  // one instance; the model-parallel group without it, taken here as the job too), and the host reads it
  // (total_norm.item() at f2e5db40 and in 2025's code). A chained optimizer (dense and expert parameters, MoE) whose
  // parts share their grad-stats group (the distributed optimizer's) takes one norm over both parts' gradients
  // (ChainedOptimizer.get_grad_norm, since Megatron-LM e675940967, 2025-04); otherwise one per part, every rank in both
  // (an empty part still joins its all-reduce). The clipping that follows scales the gradients only when the norm
  // exceeds the threshold (at the rows' commits): not counted.
  std::vector<std::vector<OpId>> norm_all_reduces_;  // per optimizer part: its all-reduce on each rank
  void grad_norm() {
    const bool sharded = t_.optimizer_sharding != OptimizerSharding::none;
    double parts[2] = {sharded ? local_dense_params() / dense_replicas() : local_dense_params(),
                       sharded ? local_expert_params() / expert_replicas() : local_expert_params()};
    const int n_parts = m_.moe && !sharded ? 2 : 1;
    if (n_parts == 1) parts[0] += parts[1];
    if (norm_all_reduces_.size() < static_cast<std::size_t>(n_parts)) norm_all_reduces_.resize(n_parts);
    OpId reduce = kNoOp;
    for (int k = 0; k < n_parts; ++k) {
      vector(k == 0 ? "optimizer.grad_norm" : "optimizer.grad_norm.experts", parts[k] * pr_.grad_bytes, 2 * parts[k]);
      reduce = inline_collective(k == 0 ? "optimizer.grad_norm.all_reduce" : "optimizer.grad_norm.experts.all_reduce",
                                 CollectiveOp::all_reduce, CommGroup::world, 4.0);
      norm_all_reduces_[k].push_back(reduce);
    }
    pending_host_wait_ = reduce;
  }
  // Emitted with the data-parallel reductions pending (the first op waits for them all); leaves its last op pending
  // for the optimizer's.
  void finalize_model_grads_tail() {
    const double share = grads_sharded() ? 1.0 / dense_replicas() : 1.0;
    const double n = tp_replicated_grad_params() * share;
    OpId tail = kNoOp;
    if (n > 0) {
      const double bytes = n * pr_.grad_bytes;
      vector("finalize.tp_grads.flatten", 2 * bytes, 0);
      inline_collective("finalize.tp_grads.tp_all_reduce", CollectiveOp::all_reduce, CommGroup::tp, bytes);
      tail = vector("finalize.tp_grads.copy_back", 2 * bytes, 0);
    }
    if (keeps_embedding_copy() && (holds_embedding() || holds_head())) {
      tail = collective("finalize.embedding_grads.all_reduce", CollectiveOp::all_reduce, CommGroup::embd,
                        embedding_weights() * share * pr_.grad_bytes, {last()});
      embd_all_reduce_.push_back(tail);
    }
    if (tail != kNoOp) pending_deps_.push_back(tail);
  }

  void optimizer_step() {
    phase_ = Phase::optimizer;
    flushing_grads_ = true;
    for (const auto& d : deferred_grads_) {
      prefix_ = d.prefix;
      grad_sync(d.name, d.dense, d.expert);
    }
    flushing_grads_ = false;
    deferred_grads_.clear();
    prefix_rank();
    const bool sharded = t_.optimizer_sharding != OptimizerSharding::none;
    const double shard = sharded ? sharded_params() : local_params();
    pending_deps_.insert(pending_deps_.end(), grad_ops_.begin(), grad_ops_.end());  // (and any joined exchanges)
    grad_ops_.clear();
    if (!jax_) {
      finalize_model_grads_tail();
      grad_norm();
    }
    // Adam: read the gradient, master weight and moments; write the master weight and moments.
    const double adam_bytes = shard * (pr_.grad_bytes + 2 * (pr_.master_weight_bytes + pr_.optimizer_bytes));
    if (t_.offload_optimizer) {
      g_.notes.push_back(
          "optimizer offload: gradients go to host, the CPU Adam step streams the fp32 state through the host's memory, "
          "updated weights come back over the host link (Megatron's HybridDeviceOptimizer, offload fraction 1)");
      // The CPU Adam step (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py at d98e8a64: the host waits for
      // the gradients' copy, steps a torch Adam on the host, then copies the parameters back) streams the Adam state
      // at the host's memory bandwidth (the floor; the host's arithmetic is not modelled), shared by the GPUs of the
      // host.
      auto host_side = [&](std::string_view name, OpKind kind, StreamKind stream, double bytes, SmallVec<OpId, 3> deps,
                           bool host_compute = false) {
        Op o;
        o.name = named(name);
        o.rank = static_cast<uint16_t>(rank_);
        o.kind = kind;
        o.host_compute = host_compute;
        o.stream = stream;
        o.phase = Phase::optimizer;
        o.copy_bytes = bytes;
        o.deps = std::move(deps);
        return g_.add(std::move(o));
      };
      SmallVec<OpId, 3> reduced;
      for (OpId d : pending_deps_) reduced.push_back(d);
      pending_deps_.clear();
      const OpId d2h = host_side("optimizer.grads_to_host", OpKind::copy_d2h, StreamKind::d2h, shard * pr_.grad_bytes,
                                 std::move(reduced));
      const OpId adam = host_side("optimizer.cpu_adam", OpKind::copy_d2h, StreamKind::d2h, adam_bytes, {d2h}, true);
      pending_deps_ = {host_side("optimizer.weights_from_host", OpKind::copy_h2d, StreamKind::h2d,
                                 shard * pr_.activation_bytes, {adam})};
      vector("optimizer.cast_weights", shard * 2 * pr_.activation_bytes, shard);
    } else {
      const OpId adam = vector("optimizer.adamw", adam_bytes, 15 * shard);
      if (jax_) g_.ops[adam].frees.push_back(jax_grads_);
      // Megatron then writes the working copy of the weights from the fp32 master weights. With bf16 moments (the
      // precision-aware optimizer, Transformer Engine's FusedAdam holding the master weights) the Adam kernel writes it;
      // otherwise a copy of its own reads the master shard and writes the copy (distrib_optimizer.py
      // _copy_main_params_to_model_params; Float16OptimizerWithFloat16Params likewise).
      if (!jax_) {
        if (t_.adam_moments == AdamMoments::bf16) g_.ops[adam].hbm_bytes += shard * pr_.activation_bytes;
        else vector("optimizer.copy_main_to_model", shard * (pr_.master_weight_bytes + pr_.activation_bytes), 0);
      }
    }
    // ZeRO-1/2: the updated shards are gathered back into every replica, each part over its group.
    if (sharded && t_.optimizer_sharding != OptimizerSharding::fsdp && !overlapped_param_gather()) {
      const OpId updated = last();
      if (dense_replicas() > 1)
        collective("param.all_gather", CollectiveOp::all_gather, dense_shard_group(), local_dense_params() * pr_.param_gather_bytes,
                   {updated});
      if (expert_replicas() > 1 && local_expert_params() > 0)
        collective("param.all_gather.experts", CollectiveOp::all_gather, expert_shard_group(),
                   local_expert_params() * pr_.param_gather_bytes, {updated});
    }
  }
};

}  // namespace

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
    Builder b(m, off, sys, options);
    OpGraph g = b.build();
    g.notes.push_back("training.tp_comm_overlap: Megatron-Core turns it off for a model with multi-latent attention "
                      "(TELinear disables it on the shared config for MLA's buffer names); modelled without userbuffers");
    return g;
  }
  Builder b(m, t, sys, options);
  return b.build();
}

}  // namespace racksim::workloads
