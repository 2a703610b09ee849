// The training-graph builder (internal to workloads/; the public entry is build_training_graph in
// workloads/graph_builder.h). One Builder emits the step of every pipeline rank role as an OpGraph, op by op,
// in the order each rank's schedule issues them. This header holds the class: its state, its small helpers,
// and the declarations of the member functions, which are defined by concern:
//   builder.cpp          constructor; build(): each rank's schedule walked chunk by chunk, the cross-rank joins; cat()
//   emit.cpp             emitting ops: kernels, GEMMs and their fp8-class casts, vector work, collectives, TP exchanges
//   chunks.cpp           a pipeline chunk's forward and backward: layers, embedding, output head and loss, MTP inputs
//   layer_steps.cpp      a layer's named steps (saved, recomputed or offloaded) and the MLP
//   attention.cpp        the attention block: projections, attention kernels, XLA's layout copies
//   moe.cpp              the MoE block: router, dispatch and combine, grouped expert GEMMs, shared experts
//   layer_templates.cpp  a layer built once and stamped for the layers and micro-batches that repeat it
//   offload.cpp          activation offload to host memory (JAX's named offloads, Megatron-Core's fine-grained)
//   ep_overlap.cpp       EP overlap in Megatron-Core's combined 1F1B order
//   data_parallel.cpp    FSDP/ZeRO gathers, gradient reductions, finalize_model_grads, the optimizer
//   xla_collectives.cpp  XLA's gradient combiners and the latency hiding scheduler's windows
//   host_work.cpp        the host's work per op, layer and chunk (framework figures, NCCL calls, XLA's runtime)
//   state.cpp            what a rank holds for the step, and XLA's buffer assignment of the step's outputs
#pragma once

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

namespace racksim::workloads::training_graph {

using hw::CollectiveOp;

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
  Builder(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys, const BuildOptions& options);

  OpGraph build();

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
  // training.fused_softmax where Transformer Engine has its kernel for the shape (te_softmax_kernel_available): the
  // attention's softmax is TE's, not XLA's fusions, and the scores are bf16.
  bool te_softmax_ = false;
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
  // What a chunk starts with, forward or backward: its phase and virtual stage, its names' prefix, and under the
  // combined 1F1B order the exchange context before its first layer.
  void begin_chunk(Phase phase, int v) {
    phase_ = phase;
    chunk_ = v;
    prefix_micro_vstage(v);
    if (ep_interleave_) ep_ctx_ = EpCtx{kEpPre};
  }
  // Two parts of a name joined on the stack: an op's name is interned at once, so the builder makes
  // no std::string (and no heap block for a long one) per op.
  struct Joined {
    std::array<char, 96> buf;
    std::size_t len = 0;
    std::string heap;  // a name longer than buf
    operator std::string_view() const { return heap.empty() ? std::string_view(buf.data(), len) : std::string_view(heap); }  // NOLINT
  };
  static Joined cat(std::string_view a, std::string_view b);
  // The current prefix and this base: the name an op or tensor emitted now gets.
  Name named(std::string_view base) {
    Name n = prefix_;
    n.base = g_.names.intern(base);
    return n;
  }
  std::vector<OpId> pending_deps_;      // deps attached to the next emitted op
  std::vector<OpId> compute_waits_;     // deps attached to the next op on the compute stream (throttle_grad_reductions)
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
  EpNode ep_node(const Op& op, EpStep step, bool forward, bool after_exchange) const;
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
  void close_pair();
  // --delay-wgrad-compute (which Megatron-Core's EP overlap is run with: the ModelZoo's A2A_OVERLAP sets both): the
  // backward chunk's last layer (its first decoder layer) issues its pre_dispatch wgrads after the chunk's sends, which
  // wait for the data gradient only; what waits for those wgrads (the gradient reductions) follows them.
  void delay_first_layer_wgrads(PairLayout& P);
  // Every dependency and host wait inside the pair comes earlier in the order: else the replay would stall, so the
  // builder says which op it is.
  void check_pair_order(const PairLayout& P, const std::vector<OpId>& order) const;
  // Whole-step CUDA graphs (cuda_graphs without a scope): one graph per chunk, as without the overlap. The engine opens
  // a graph where the micro-batch in the ops' names changes in program order, which the interleaved order changes at
  // every node: each half's ops become one captured graph, opened at its first op in the order.
  void capture_pair_graphs(const PairLayout& P, const std::vector<OpId>& order);

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
  OpId emit_last();
  // The op the next one follows: the last emitted, skipping data-parallel collectives (gradient
  // reductions, parameter gathers). Those run on streams and communicators apart from the critical path's and nothing
  // there waits for them implicitly (Megatron: a pipeline send and a DP reduce-scatter run at once, sharing SMs and
  // links but not queuing behind each other); a dependency on them is explicit.
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
            Quant q = Quant::none);
  // A weight GEMM with its backward pair: dgrad (input gradient) and wgrad (accumulated into
  // the main gradient: read and write Precision::grad_bytes per weight, 4 B, or 2 over a 16-bit buffer).
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
  void mark_wgrad(OpId id, std::string_view name, double elements);
  // Megatron's --gradient-accumulation-fusion (on by default; Transformer Engine's fuse_wgrad_accumulation, also in its
  // GroupedLinear): the wgrad GEMM adds into the fp32 main_grad in its own epilogue, whose cost beyond a bf16-output
  // GEMM was measured (gpu.wgrad_accumulate_serial_bytes, calibration/data/h100-2026-12-06-wgrad-fp32-accumulate). In
  // JAX mode XLA's dot writes the gradient and a fusion of its own adds it (emitted where XLA runs it); under
  // training.gradient_accumulation_fusion false the GEMM writes the gradient and a kernel of its own adds it into the
  // fp32 main gradient (Megatron's DDP hook, distributed_data_parallel.py `param.main_grad.add_(param.grad.data)`:
  // read the bf16 gradient and the fp32 main gradient, write the sum).
  bool fused_wgrad_accumulation() const { return !jax_ && t_.gradient_accumulation_fusion; }
  bool unfused_wgrad_accumulation() const { return !jax_ && !t_.gradient_accumulation_fusion; }
  // What a wgrad GEMM of `elements` weight elements writes beyond its operands: the main gradient (fp32, or 16-bit
  // under TrainingConfig::grads_16bit) read and written, or, unfused, the bf16 gradient alone (its add into the main gradient is unfused_main_grad_add's).
  double wgrad_output_bytes(double elements) const {
    return unfused_wgrad_accumulation() ? elements * pr_.activation_bytes : 2 * elements * pr_.grad_bytes;
  }
  void unfused_main_grad_add(std::string_view wgrad, double elements) {
    if (!unfused_wgrad_accumulation()) return;
    vector(cat(wgrad, ".main_grad_add"), elements * (pr_.activation_bytes + 2 * pr_.grad_bytes), elements);
  }

  // Transformer Engine's fused softmax of a materialized attention (training.fused_softmax, JAX mode): the score dot,
  // the softmax kernel and, backward, its kernel and the dQ / dK dots (attention.cpp).
  void te_fused_softmax_forward(double bh);
  void te_fused_softmax_backward(double bh);
  void mark_te_softmax(OpId op, int direction);
  bool te_softmax_kernel_available() const;
  int te_softmax_row_pow2() const;  // next_pow2(S): the row TE's kernel holds, 32 threads a warp
  OpId vector(std::string_view name, double bytes, double flops, double sfu = 0);

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
    op.stream = !data_parallel ? StreamKind::comm : data_parallel_stream(c, grp);
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
  // aside); each only under tp_comm_overlap (Megatron mode), inline otherwise. `async`: an asynchronous NCCL call beside the next GEMM
  // whatever tp_comm_overlap says (Megatron-Core's own ColumnParallelLinear, the output layer, and Transformer
  // Engine's modules without userbuffers, e.g. the MTP eh_proj, which rely on CUDA_DEVICE_MAX_CONNECTIONS=1 to have it
  // scheduled before the GEMM). `none`: inline, an NCCL kernel the next op waits for.
  enum class TpOverlap { ring_exchange, pipeline, bulk, async, none };
  static constexpr int kUbPipelineSplits = 4;  // TE: num_splits of the pipeline method
  static constexpr int kUbSms = 16;            // TE: num_sm of the pipeline and bulk methods
  // A pipeline or bulk exchange: a userbuffer kernel on the SMs set aside for it.
  static void on_userbuffer_sms(Op& op) {
    op.comm_kernel = CommKernel::dedicated_sms;
    op.comm_sms = kUbSms;
    op.queues_behind_compute = false;  // the GEMM beside it is launched on the other SMs (set_sm_margin)
  }
  // `gemms` GEMMs consume the exchange (a ring exchange splits each into tp chunks).
  void tp_collective(std::string_view name, CollectiveOp c, double bytes, TpOverlap how, int gemms = 1);
  // Transformer Engine's pipeline overlap (split_overlap_rs, num_splits 4): the GEMM just emitted runs as
  // kUbPipelineSplits chunks of m/4 rows one after another on the compute stream, and each chunk's
  // output is reduce-scattered on the 16 SMs set aside while the next chunk computes; the op after the
  // GEMM waits for every piece (the layer's output is the scattered whole). The chunks keep the GEMM's
  // total FLOPs and bytes; its tensors are allocated by the first chunk and freed by the last.
  void pipelined_reduce_scatter(std::string_view name, CollectiveOp c, double bytes);
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
                                bool quantized = true);
  // A Transformer Engine column-parallel layer's backward in a transformer layer: the gather beside the dgrad where
  // that is the job's mode, else dgrad, its input gradient's reduce-scatter, the input's gather, then the wgrad
  // (userbuffers' bulk exchanges under tp_comm_overlap).
  void column_parallel_layer_backward(std::string_view name, double m, double n, double k, double input_bytes);
  std::vector<OpId> overlapped_;        // TP collectives the op after the next GEMM waits for
  int chunk_next_gemms_ = 0;  // GEMMs a ring exchange runs in tp chunks
  bool quantizing_ = false;   // emitting a GEMM's fp8 cast (not the kernel beside an overlapped exchange)
  int overlap_countdown_ = 0;

  TensorId temp(std::string_view name, double bytes) {
    return g_.tensor(named(name), MemCategory::activations, bytes, false, static_cast<uint16_t>(rank_));
  }

  // ---- training state --------------------------------------------------------------------
  void add_resident_state();
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
  void pack_into_outputs();

  // The XLA buffers a JAX step output stands for, as fractions of its bytes (jax_residual_sizes):
  // the scores are fp32 scores or probabilities plus a bf16 copy (4 + 2 bytes); under scan the
  // fp32 residual stream and normalized input (4 + 4), the bf16 output and fp32 sum (2 + 4), and
  // four B·S·F tensors around the SwiGLU. Anything else is one buffer.
  std::vector<double> xla_buffer_parts(const std::string& tensor_name) const;

  // ---- layer steps -------------------------------------------------------------------------
  // A layer's steps do not change within a build (their ops read the builder's state when they are
  // emitted), so each layer's are made once, with the recompute policy's decision for each.
  std::vector<std::vector<Step>> steps_cache_;
  std::vector<char> steps_cached_;
  const std::vector<Step>& layer_steps(int l);
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
  std::vector<Step> make_layer_steps(int l);

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
  void te_quantized_saves(std::vector<Step>& steps, int l);

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
  void jax_residual_sizes(const std::vector<Step*>& steps, int l);

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
  void xla_attention_layout_copies_backward();
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

  void add_attention_steps(std::vector<Step>& steps);

  // Flash attention of the local queries, with context parallelism as Megatron-Core runs it
  // (--cp-comm-type; training.cp_comm):
  //  p2p: a ring of cp steps, each sending this rank's K and V (and in backward their gradients) to the
  //       next rank while the previous chunk computes;
  //  all_gather: K and V of all cp ranks gathered before the kernel (again in backward, whose dK, dV
  //       are reduce-scattered after it), as Llama 3 trained at 131K;
  //  a2a: DeepSpeed-Ulysses: all-to-all of Q, K, V (heads scattered, sequence gathered) before, of the
  //       output after; backward mirrors it. `qkv_bytes` and `out_bytes`: this rank's Q/K/V and output.
  void attention_kernels(bool backward, double flops, double exps, double io, double kv_bytes, double qkv_bytes = 0,
                         double out_bytes = 0);

  void add_mlp_steps(std::vector<Step>& steps, double tokens, double width, bool tensor_parallel,
                     const std::string& tag);

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

  void add_moe_steps(std::vector<Step>& steps, int l);

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

  void forward_chunk(int v);

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
  TensorId embedding_forward(std::string_view name, std::string_view out_name, OpId& lookup);
  // Its backward: under sequence parallelism the reduce-scatter's backward, an all-gather of the output gradient to all
  // T tokens (the clone's is none; without sequence parallelism the all-reduce's backward is the identity); the
  // masked_fill's backward (the gradient of the masked rows zeroed); the lookup's weight gradient
  // (embedding_weight_grad). XLA's: a scatter-add of the rows into the gradient, unchanged.
  void embedding_backward(std::string_view name);
  // The lookup's weight gradient in Megatron mode. VocabParallelEmbedding looks up with F.embedding (dense, not
  // sparse: Megatron-LM@d98e8a64 tensor_parallel/layers.py VocabParallelEmbedding.forward), whose backward is
  // PyTorch's embedding_dense_backward: a zeroed gradient of the whole [V/tp, h] table in the weights' dtype into
  // which the `tokens` rows are summed. Megatron's DDP hook then adds it into the fp32 main gradient and drops it
  // (distributed/distributed_data_parallel.py _make_backward_post_hook: param.main_grad.add_(param.grad.data); the
  // embedding has no fused weight-gradient accumulation). Every micro-batch: the zero fill (E·a written), the rows
  // (read the incoming gradient, read and write the rows: 3·a per element), the add (E·(a + 2·g), g the main
  // gradient's bytes: 4, or 2 over a 16-bit buffer).
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
  TensorId output_head(std::string_view pre, TensorId x, bool free_input);
  // The backward of output_head: the loss gradient over the logits, the logits GEMM's dgrad (its tp
  // reduce-scatter) and wgrad, and the final norm's backward (returned: it reads the norm's input).
  OpId output_head_backward(std::string_view pre, TensorId logits);

  // ---- multi-token prediction (training.mtp_layers) --------------------------------------------
  // Megatron-Core's MultiTokenPredictionLayer before its transformer layer (multi_token_prediction.py
  // _get_embeddings, _concat_embeddings at d98e8a64): the shared embedding of the tokens shifted by one more
  // position, RMSNorm of it (enorm) and of the previous depth's hidden states (hnorm), their concatenation, the
  // column-parallel projection eh_proj from 2h to h (gathering the sequence-parallel input), and the gather of
  // its tp-split output back to the full hidden size, scattered to the sequence-parallel slice. `x` in: the
  // previous depth's output (the decoder's for the first); out: the projection, the layer's input.
  std::map<std::pair<int, int>, std::array<TensorId, 3>> mtp_saved_;  // (micro, depth) -> embedding, concat, hidden in
  void mtp_input(int l, TensorId& x);
  // Its backward, after the MTP layer's: the gradient scattered back to the tp-split output, eh_proj's dgrad
  // (reduce-scattered over tp) and wgrad, the concatenation's split, both norms' backward and the embedding's
  // (the shared table's dense gradient, embedding_weight_grad). Frees what the forward kept, and the previous depth's
  // hidden states, whose last reader hnorm's backward is.
  void mtp_input_backward(int l);

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
  double nvtx_forward_host_s(int l) const;
  // DeepSeek-V3's parts of a layer on the host beyond the measured layer figures (launch.megatron_mla_*,
  // megatron_group_router_*, megatron_shared_expert_*; calibration/data/h100-2026-12-05-megatron-dsv3-host): multi-latent
  // attention's own work (the attention module's); a group-limited router's, which Megatron's fused router replaces
  // (--moe-router-fusion: its fused top-k with score function and aux-loss scores, forward and backward) as it does
  // the routing; a shared expert's MLP (one module whatever its width). The router and the shared expert belong to
  // racksim's moe_router scope, MLA to attn.
  struct ExtraHost { double mla = 0, router = 0, shared = 0; };
  ExtraHost extra_host_s(int l, bool forward, bool routing_removed) const;
  void charge_host_work(int l, std::size_t first, bool forward);
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
  DdpHostWork ddp_host_work(int l) const;
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
  void charge_torch_nccl_calls();
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
  void charge_scoped_host_work(int l, std::size_t first, bool forward);
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
      std::vector<OpId> pending_deps, overlapped, compute_waits;
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
  bool templates_apply(int l, bool forward);
  // The state a layer's emission reads, with op ids as distances back from the graph's end.
  void layer_signature();
  void layer_slots(int l, bool forward, TensorId input, std::vector<TensorId>& slots,
                   std::vector<std::string_view>* names);

  bool stamp_layer(int l, bool forward, TensorId& layer_input);

  // Emits the layer's ops, and records them as a template when the state allows it.
  void record_layer(int l, bool forward, TensorId& layer_input);
  // XLA's runtime on the host (launch.xla_*, measured: hardware_models/calibrated/h200.yaml xla_runtime),
  // as the HLO replay charges it (workloads/hlo/hlo_lower.cpp, assign_host_work): one program execution
  // per step; with command buffers (cuda_graphs) each command-buffer execution costs its commands, and,
  // when the step's buffers moved (no donation), its buffer references the first time it runs in the
  // step. Here a command buffer is a scanned layer's body (the while loop runs it once per layer, on the
  // same buffers after the first) or, unrolled, a stretch of kernels between collectives; an op is one
  // command, and it references its operands and result: 3 buffers for a GEMM, 2 for other kernels.
  void assign_xla_host_work();
  void layer_forward_ops(int l, TensorId& layer_input);
  // The D2H copy of an offloaded activation `t` after `after`; its HBM copy is freed when the copy is done (the layer
  // output stays anyway: it is the next layer's input).
  void offload_to_host(LayerState& st, const Step& step, TensorId t, OpId after);
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
  TensorId fsdp_layer_params(int l, int next);
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
                              GatherAfter after = GatherAfter::previous_layer_start, double dense_bytes_per_param = 0);

  // XLA (JAX mode) gathers a layer's weights array by array: the SPMD partitioner makes one all-gather per sharded
  // weight, and the all-gather combiner (program order, greedy) merges consecutive ones only while the gathered
  // outputs sum to at most training.xla_combine_threshold.all_gather; one larger stays alone. Each collective pays its
  // own ring latency. (MaxText's Llama 3 70B compiled for 64 and 512 GPUs, calibration/data/h200-2026-12-04-mock-compile:
  // seven all-gathers per layer, q, k, v, o and the three MLP matrices, each over the 30 MiB default; Llama 2 7B on A3
  // at 128 MiB: four per layer.) The gathered bytes of each collective, in program order; empty when the layer is not
  // a plain dense one (MoE, MLA: one gather, as before) or not JAX. The norms' gains go with the last.
  std::vector<double> xla_gather_pieces(double dense_params) const;

  void backward_chunk(int v);
  // XLA runs all its asynchronous collectives on one stream (AsyncStreamKind::kCollective, see collective()), in the
  // order its latency-hiding scheduler issues them: a layer's weight gather needs only the weights, so it is issued
  // to overlap the layer after it in the backward, before that layer's gradient collectives, which wait for its
  // wgrad. Unrolled layers: a layer's gradient sync is emitted after the next layer's gather (its ready op is the
  // same: last() skips data-parallel collectives). Scanned layers are left as they were (two streams): their
  // iterations and the collective pipeliner fix another order, not modelled on one stream.
  bool gathers_before_grads() const { return jax_ && !t_.scan_layers && fsdp_per_use(); }
  // FSDP under a pipeline regathering per micro-batch, on one data-parallel communicator: FSDP issues the next layer's
  // gather from the current layer's pre-backward hook, before that layer's reduce-scatter (its post-backward), so on
  // the one stream the gather comes first; racksim emits a layer's gradient sync after the next layer's regather.
  bool regathers_before_grads() const {
    return !jax_ && fsdp_reshards_per_microbatch() && t_.dp_all_gather_group == TrainingConfig::DpAllGatherGroup::shared;
  }
  // The stream of a data-parallel collective: one per communicator, whose operations run in issue order.
  // XLA issues every asynchronous collective on one stream (AsyncStreamKind::kCollective, openxla/xla
  // xla/service/gpu/runtime/nccl_clique_key.h): with unrolled layers the weight gathers queue with the
  // gradient reductions, in the order of gathers_before_grads; scanned JAX layers keep the gathers on a stream of
  // their own (the pipeliner's order on one stream is not modelled). Megatron mode (training.dp_all_gather_group):
  // shared, a group's gathers and reductions on its one communicator, the dense group's (dp, dp·cp, the shard group)
  // on comm_grad, the expert group's on comm_dp; hybrid sharding's replica all-reduce (dp_replicate) with the dense
  // group's under the distributed optimizer (Megatron runs the instance's reduce-scatter and the instances' all-reduce
  // one after the other on one stream, param_and_grad_buffer.py), on comm_dp under FSDP (HSDP: the replica group's
  // own communicator; it shares the expert group's stream where there is one, an approximation). separate, the gathers
  // on communicators of their own (comm_dp), the reductions on comm_grad; dense and expert share each (Megatron-FSDP
  // creates four communicators then; two streams are modelled).
  StreamKind data_parallel_stream(CollectiveOp c, CommGroup grp) const {
    if (jax_ || t_.dp_all_gather_group == TrainingConfig::DpAllGatherGroup::separate)
      return c == CollectiveOp::all_gather && !gathers_before_grads() ? StreamKind::comm_dp : StreamKind::comm_grad;
    if (grp == CommGroup::dp_replicate)
      return t_.optimizer_sharding == OptimizerSharding::fsdp ? StreamKind::comm_dp : StreamKind::comm_grad;
    return grp == CommGroup::edp || grp == CommGroup::edp_shard ? StreamKind::comm_dp : StreamKind::comm_grad;
  }
  struct DeferredSync {
    Name prefix;
    int layer = 0;
  };
  std::optional<DeferredSync> deferred_sync_;
  void flush_deferred_sync();
  std::vector<TensorId> pending_alloc_;
  void attach_pending_allocs(OpId id) {
    for (TensorId t : pending_alloc_) g_.ops[id].allocs.push_back(t);
    pending_alloc_.clear();
  }

  void prefetch_offloaded(int l);
  // The H2D copy of an offloaded activation (named under the current prefix), after its D2H copy and after `after`;
  // recorded in the layer's fetched list. XLA issues it on the compute stream, Megatron on a side stream.
  OpId fetch_from_host(LayerState& st, std::string_view name, OpId after);

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
  std::vector<char> chunks_keeping_last_groups(const std::vector<ScheduleEntry>& schedule) const;
  bool megatron_keeps_last_group(int l, std::string_view name) {
    if (!megatron_offload() || !keeps_last_groups_) return false;
    for (int k = l + 1; k < end_layer(chunk_); ++k)
      for (const Step& s : layer_steps(k))
        if (s.offloaded && s.name == name) return false;
    return true;
  }
  // The chunk's next offloaded group in backward order after `after` in layer l (none: from the top of layer l).
  std::optional<std::pair<int, std::string_view>> next_offloaded_group(int l, std::string_view after);
  // The reload (H2D copy) of layer l's group `name`, after its D2H copy and after `after` (the compute stream's work
  // then); the one already issued, if any.
  OpId megatron_reload(int l, std::string_view name, OpId after);
  // A backward chunk's first group: reloaded where the previous backward chunk's last group ended, if this chunk's
  // forward had offloaded it by then (pre_reload_last_layer); otherwise now.
  // (Inside an interleaved pair the order its forward's copy and the trigger are issued in is set later, by close_pair:
  // a chunk whose forward is in the trigger's pair is not taken as done, which is the conservative reading.)
  void megatron_reload_chunk_start(int l);
  // Right before the backward of layer bwd_layer_'s group `name`: the compute stream waits for its reload.
  void offload_wait(std::string_view name) {
    if (!megatron_offload() || bwd_layer_ < 0) return;
    auto& st = layer_state_[{mb_, bwd_layer_}];
    if (!st.offload_copy.find(name)) return;  // kept in HBM (not offloaded, or the chunk's last group)
    pending_deps_.push_back(megatron_reload(bwd_layer_, name, last()));  // (issued earlier as a rule)
  }
  // The backward of layer bwd_layer_'s group `name` has ended: the next group reloads behind it.
  void offload_done(std::string_view name);

  void layer_backward_ops(int l);

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
  // the step runs (training.fsdp_pipeline_gather and fsdp_grad_reduce per_microbatch change each half of that).
  // (JAX's fsdp is XLA's partitioner, not this.)
  bool fsdp_per_step() const { return t_.fsdp_under_pipeline(); }
  // training.fsdp_pipeline_gather per_microbatch (Llama 3's FSDP under its pipeline): on top of fsdp_per_step's
  // gradients and step-start gathers, a layer's weights are resharded after each of its backwards and gathered again
  // by the next forward or backward that needs them (fsdp_regather). The resident state keeps the whole stage's
  // weights as fsdp_per_step does (an upper bound: FSDP holds only the shards and the unsharded layers).
  bool fsdp_reshards_per_microbatch() const { return t_.fsdp_regathers_per_microbatch(); }
  // training.fsdp_grad_reduce per_microbatch: under a pipeline, FSDP reduce-scatters a layer's gradients after each of
  // its backwards (grads_sharded: the fp32 shard is resident, a layer's whole gradient lives until its reduce-scatter).
  bool fsdp_reduces_per_microbatch() const { return t_.fsdp_reduces_per_microbatch(); }
  std::set<int> fsdp_resharded_;  // modules of this rank whose weights a backward resharded
  // Under fsdp_reshards_per_microbatch (else nothing): before a module's forward or backward, gather it again if a
  // backward resharded it; after its backward, reshard it. Keys: a layer, kEmbeddingBucket, kHeadBucket.
  void fsdp_regather(int key);
  void fsdp_reshard(int key) {
    if (fsdp_reshards_per_microbatch()) fsdp_resharded_.insert(key);
  }
  bool fsdp_per_use() const { return t_.optimizer_sharding == OptimizerSharding::fsdp && !fsdp_per_step(); }
  // `after`: the op the first gather of each group waits for (kNoOp: none); each is cleared once used.
  struct StepStartDeps {
    OpId dense = kNoOp, expert = kNoOp;
  };
  void gather_bucket(int key, const std::string& name, double dense_params, double expert_params, StepStartDeps& after);
  // A torch.distributed collective's stream first waits for the work already on the current stream
  // (ProcessGroupNCCL): the step's first gather waits for `after`, the gradient buffers' memset (zero_grad_buffer).
  void gather_params_ahead(OpId zeroed);
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
  // Sharded gradients (ZeRO-2; FSDP per use; FSDP under a pipeline with fsdp_grad_reduce per_microbatch; Megatron
  // mode): a layer's backward still writes its whole gradient, in
  // fp32 (Megatron-FSDP's main_grad buffer of the layer's parameters; torch FSDP2's unsharded gradient before its
  // reduce-scatter), which lives from the layer's first backward op (its wgrads) until the reduce-scatter that shards
  // it has finished; only the shard stays resident (add_resident_state). Allocated on the first backward-phase op of
  // the module's ops [first, end) (a layer, the output layer, the embedding), freed by grad_sync's last collective for
  // it.
  void hold_unsharded_grads(double params, OpId first);
  std::optional<TensorId> unsharded_grads_;  // the layer's whole gradient, freed by its grad_sync
  // Megatron-FSDP bounds the whole gradients waiting for their reduce-scatter: before it issues a bucket's, it makes
  // the compute stream wait for (and frees) the oldest queued ones while the queue holds more than
  // max(1e9, 2 x the mean FSDP unit) parameters (megatron_fsdp.py suggested_RS_queue_capacity; param_and_grad_buffer.py
  // GradReducePipeline.wait_for_previous_grad_reduce, Megatron-LM@d98e8a64). Without the bound a step whose
  // reductions are slower than its backward would hold every layer's gradient. ZeRO-2 takes the same bound
  // (DeepSpeed's default reduce bucket, 5e8 parameters, double-buffered), and so does PyTorch FSDP under a pipeline
  // reducing per micro-batch (FSDP2 makes the compute stream wait for the previous reduce-scatter before the next
  // post-backward, a tighter bound of about two). The wait goes to the next compute op (compute_waits_), not the next
  // op, which after a chunk's last layer is its pipeline send. A queued reduction's params, in issue order:
  std::deque<std::pair<OpId, double>> grad_reduce_queue_;
  double grad_reduce_queued_ = 0;
  double grad_reduce_capacity_ = -1;  // computed on first use (the model's mean layer: one pass over the layers)
  void throttle_grad_reductions(OpId reduction, double params);

  // `in_layer_loop`: the layer's own gradients (in JAX's scan loop), not the head's or the embedding's.
  // `elem_bytes`: the reduction's bytes per parameter (0: the weights' grad_reduce_bytes).
  void grad_sync(const std::string& name, double dense_params, double expert_params = 0, bool in_layer_loop = false,
                 double elem_bytes = 0);
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
  MemberSizes member_sizes(double dense_params, double expert_params, double elem_bytes) const;
  CollectiveOp grad_sync_op() const {
    return t_.optimizer_sharding == OptimizerSharding::none ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter;
  }
  double threshold(int kind) const {
    const auto& th = t_.xla_combine_threshold;
    return kind < 2 && grad_sync_op() == CollectiveOp::reduce_scatter ? th.reduce_scatter_bytes : th.all_reduce_bytes;
  }
  // This backward pass's gradient collectives grouped by XLA's greedy combiner (xla_combine_groups), per kind.
  void plan_grad_combines(int v);
  // XLA's greedy combiner (CombineInstructionsByKey): in program order, a member joins the open group while the
  // summed outputs stay <= the threshold and the group has fewer than 256; one larger than the threshold stays alone
  // (its own group) and the open group goes on past it; one of no bytes takes no part (-1). Each member's group,
  // numbered in order of the group's first member.
  static std::vector<int> xla_combine_groups(const std::vector<double>& outputs, double limit);

  void add_member(CombineGroup& g, const std::string& name, std::span<const OpId> deps, double bytes);
  // Emits the group's collective in its first member's name (as uncombined when it has one member); the
  // ops pending for the next compute op stay pending.
  OpId emit_group(CombineGroup& g);
  static bool waits(const CombineGroup& g) { return g.waits_rs[0] || g.waits_rs[1]; }
  // Issues the closed all-reduce groups whose reduce-scatters are all issued, in order.
  void emit_ready_ar() {
    std::size_t n = 0;
    while (n < closed_ar_.size() && !waits(closed_ar_[n])) emit_group(closed_ar_[n++]);
    closed_ar_.erase(closed_ar_.begin(), closed_ar_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  OpId flush_rs(int k);
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
                          double elem_bytes);
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
  static bool gradient_collective(const Op& op);
  // The micro-batch an op belongs to (its name's "mb{a}." prefix), or -1 (the optimizer, the step's ends).
  static int64_t micro_of(const Op& op) {
    const bool micro = op.name.prefix == NamePrefix::micro_vstage || op.name.prefix == NamePrefix::micro_layer;
    return micro ? static_cast<int64_t>(op.name.a) : -1;
  }
  // Under gradient accumulation the micro-batches are iterations of a loop (MaxText's accumulation scan): an
  // iteration ends when its collectives have, so a window never reaches into the next micro-batch; its first kernel
  // waits instead.
  void xla_scheduler_windows();

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
  double tp_replicated_grad_params() const;
  bool grads_sharded() const {
    return t_.optimizer_sharding == OptimizerSharding::zero2 || fsdp_per_use() || fsdp_reduces_per_microbatch();
  }
  std::vector<OpId> embd_all_reduce_;  // the embedding group's all-reduce on each of its two ranks
  OpId expert_dgrad_ = kNoOp;          // the MoE layer's last expert data-gradient GEMM (its backward, being emitted)
  // ---- the step's ends in Megatron-Core, around the layers ------------------------------------------
  // train_step zeroes every model chunk's gradient buffer before the forward-backward (Megatron-LM@d98e8a64
  // training.py train_step -> DistributedDataParallel.zero_grad_buffer -> ParamAndGradBuffer.reset: grad_data.zero_(),
  // param_and_grad_buffer.py; the same at f2e5db40): a memset of the whole (main-)gradient buffer (fp32, or 16-bit
  // under TrainingConfig::grads_16bit) of the rank's
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
  std::vector<std::vector<OpId>> found_inf_all_reduces_;  // the same for --fp16's loss-scaler flag
  void grad_norm();
  // Per optimizer part (dense, and the experts' with n_parts 2; one part holds both with 1), each part's parameters on
  // this rank (its shard under a sharded optimizer): a kernel `kernel`(.experts) of bytes_per_param and
  // flops_per_param, then the 4-byte world all-reduce `flag`(.experts).all_reduce collected in `all_reduces` (joined
  // across the stages in build()); the host reads the last one, or each one with host_reads_each.
  void optimizer_pass_per_part(std::string_view kernel, std::string_view flag, int n_parts, double bytes_per_param,
                               double flops_per_param, bool host_reads_each, std::vector<std::vector<OpId>>& all_reduces);
  // Emitted with the data-parallel reductions pending (the first op waits for them all); leaves its last op pending
  // for the optimizer's.
  void finalize_model_grads_tail();

  void optimizer_step();
  // The offloaded optimizer's parameters and gradients on the host, and what crosses the link for them: fp32
  // (HybridDeviceOptimizer keeps fp32 copies of the parameters it steps on the host, param_update_in_fp32, and pinned
  // gradients of their dtype).
  double host_fp32_bytes() const { return pr_.master_weight_bytes; }
  // Megatron's work on a 16-bit gradient buffer before the optimizer step (the fp32 copy of the shard, --fp16's loss
  // scaler); returns the fp32 main gradients it allocates, if any.
  std::optional<TensorId> optimizer_main_grads(double shard);
};

}  // namespace racksim::workloads::training_graph
