#include "workloads/graph_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

namespace racksim::workloads {

std::string to_string(StreamKind s) {
  switch (s) {
    case StreamKind::compute: return "compute";
    case StreamKind::comm: return "communication";
    case StreamKind::h2d: return "H2D";
    case StreamKind::d2h: return "D2H";
  }
  return "?";
}
std::string to_string(Phase p) {
  switch (p) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::recompute: return "recompute";
    case Phase::optimizer: return "optimizer";
  }
  return "?";
}
std::string to_string(CommGroup g) {
  switch (g) {
    case CommGroup::dp: return "dp";
    case CommGroup::tp: return "tp";
    case CommGroup::pp: return "pp";
    case CommGroup::cp: return "cp";
    case CommGroup::ep: return "ep";
  }
  return "?";
}
std::string to_string(CollOp c) {
  switch (c) {
    case CollOp::all_reduce: return "all_reduce";
    case CollOp::all_gather: return "all_gather";
    case CollOp::reduce_scatter: return "reduce_scatter";
    case CollOp::all_to_all: return "all_to_all";
    case CollOp::broadcast: return "broadcast";
    case CollOp::send_recv: return "send_recv";
  }
  return "?";
}
std::string to_string(MemCategory c) {
  switch (c) {
    case MemCategory::weights: return "weights";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer: return "optimizer";
    case MemCategory::activations: return "activations";
    case MemCategory::communication_buffers: return "communication_buffers";
    case MemCategory::other: return "other";
  }
  return "?";
}

double model_flops_per_step(const ModelSpec& m, const TrainingConfig& t) {
  const double tokens = static_cast<double>(t.global_batch) * t.seq_len;
  const double attention = 6.0 * t.global_batch * m.layers * static_cast<double>(t.seq_len) * t.seq_len *
                           (static_cast<double>(m.heads) * m.head_dim);
  return 6.0 * active_params(m) * tokens + attention;
}

Precision precision_of(const TrainingConfig& t) {
  Precision p{};
  switch (t.precision) {
    case hw::Dtype::fp8:
    case hw::Dtype::mxfp8: p.matmul_input_bytes = 1.0; break;
    // NVFP4: 4-bit values plus one fp8 scale per 16 elements.
    case hw::Dtype::nvfp4: p.matmul_input_bytes = 0.5 + 1.0 / 16.0; break;
    default: p.matmul_input_bytes = 2.0;
  }
  p.activation_bytes = 2.0;
  p.master_weight_bytes = 4.0;
  p.grad_bytes = 4.0;
  p.optimizer_bytes = 8.0;      // Adam first and second moments, fp32
  p.grad_reduce_bytes = 4.0;    // Megatron reduces main grads in fp32 under bf16 training
  p.param_gather_bytes = 2.0;   // bf16 parameters
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

namespace {

// One forward step of a layer: ops that produce a named activation, and the matching backward.
struct Step {
  std::string name;      // activation name (DESIGN.md list)
  double out_bytes = 0;  // bytes of the named activation
  std::function<void(Phase)> forward;
  std::function<void()> backward;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys, const RankRole& role)
      : m_(m), t_(t), sys_(sys), role_(role), pr_(precision_of(t)) {
    const auto& p = t.parallelism;
    tp_ = p.tp;
    s_ = static_cast<double>(t.seq_len) / p.cp;
    b_ = t.micro_batch;
    T_ = b_ * s_;
    Tsp_ = T_ / tp_;
    h_ = m.hidden;
    hd_ = m.head_dim;
    hl_ = static_cast<double>(m.heads) / tp_;
    kvl_ = std::max(1.0, static_cast<double>(m.kv_heads) / tp_);
    q_ = hl_ * hd_;
    kv_ = kvl_ * hd_;
    f_ = static_cast<double>(m.ffn_hidden) / tp_;
    V_ = static_cast<double>(m.vocab) / tp_;
    dp_ = p.dp;
    materialized_ = t.attention == AttentionImpl::materialized;
    micro_steps_ = t.micro_steps();
    layers_ = m.layers;  // pipeline stages: layer range set by the pipeline issue
    first_layer_ = 0;
  }

  OpGraph build() {
    if (t_.parallelism.pp > 1 || t_.parallelism.cp > 1 || t_.parallelism.ep > 1 || m_.moe || m_.mla)
      throw std::invalid_argument(
          "not modelled yet: pipeline, context and expert parallelism, MoE and MLA layers arrive with the "
          "training-graphs issue; this build models dense decoders with data and tensor parallelism");
    add_resident_state();
    for (int mb = 0; mb < micro_steps_; ++mb) {
      mb_ = mb;
      last_micro_ = mb == micro_steps_ - 1;
      forward_micro_step();
      backward_micro_step();
    }
    optimizer_step();
    g_.model_flops_per_step = model_flops_per_step(m_, t_);
    g_.tokens_per_step = static_cast<double>(t_.global_batch) * t_.seq_len;
    return std::move(g_);
  }

 private:
  const ModelSpec& m_;
  const TrainingConfig& t_;
  const hw::SystemSpec& sys_;
  RankRole role_;
  Precision pr_;
  OpGraph g_;
  int tp_ = 1, dp_ = 1, micro_steps_ = 1, layers_ = 0, first_layer_ = 0, mb_ = 0;
  bool last_micro_ = false, materialized_ = false;
  double s_ = 0, b_ = 0, T_ = 0, Tsp_ = 0, h_ = 0, hd_ = 0, hl_ = 0, kvl_ = 0, q_ = 0, kv_ = 0, f_ = 0, V_ = 0;

  // Per-layer state between forward and backward of one micro-step.
  struct LayerState {
    std::map<std::string, TensorId> kept;        // saved or fetched activations, freed after backward
    std::map<std::string, OpId> offload_copy;    // D2H copy per offloaded activation
    std::map<std::string, TensorId> host_copy;   // host-side tensor of an offloaded activation
    TensorId input = 0;
    OpId last_forward_op = 0;
  };
  std::vector<LayerState> layer_state_;
  std::vector<OpId> layer_grad_ready_;  // last backward op of each layer (this micro-step)
  std::vector<OpId> pending_deps_;      // deps attached to the next emitted op
  std::vector<TensorId> step_temps_;    // tensors freed at the end of the current step
  Phase phase_ = Phase::forward;
  std::string prefix_;

  double layer_weights(int l) const {
    const LayerParams p = layer_params(m_, l);
    return (p.attention + p.mlp + p.experts + p.router) / tp_ + p.norms;
  }
  double local_params() const {
    double n = 0;
    for (int l = first_layer_; l < first_layer_ + layers_; ++l) n += layer_weights(l);
    const double table = static_cast<double>(m_.vocab) * m_.hidden / tp_;
    n += (m_.tied_embeddings ? table : 2.0 * table) + m_.hidden;
    return n;
  }

  OpId emit(Op op) {
    op.name = prefix_ + op.name;
    op.deps.insert(op.deps.end(), pending_deps_.begin(), pending_deps_.end());
    pending_deps_.clear();
    return g_.add(std::move(op));
  }

  OpId gemm(const std::string& name, double m, double n, double k, double batch = 1, double extra_bytes = 0) {
    Op op;
    op.name = name;
    op.kind = OpKind::kernel;
    op.phase = phase_;
    op.unit = ExecUnit::tensor;
    op.dtype = t_.precision;
    op.flops = 2.0 * m * n * k * batch;
    // Inputs in the matmul dtype, output in bf16.
    op.hbm_bytes = batch * ((m * k + k * n) * pr_.matmul_input_bytes + m * n * pr_.activation_bytes) + extra_bytes;
    op.gemm_mnk = {m, n, k};
    op.gemm_batch = static_cast<int>(batch);
    return emit(std::move(op));
  }

  OpId vector(const std::string& name, double bytes, double flops) {
    Op op;
    op.name = name;
    op.kind = OpKind::kernel;
    op.phase = phase_;
    op.unit = ExecUnit::vector;
    op.dtype = hw::Dtype::fp32;
    op.flops = flops;
    op.hbm_bytes = bytes;
    return emit(std::move(op));
  }

  OpId collective(const std::string& name, CollOp c, CommGroup grp, double bytes, std::vector<OpId> deps = {}) {
    Op op;
    op.name = name;
    op.kind = OpKind::collective;
    op.stream = StreamKind::comm;
    op.phase = phase_;
    op.coll = c;
    op.group = grp;
    op.coll_bytes = bytes;
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  // Tensor-parallel collectives run in line with compute (sequence parallelism needs their
  // result right away), so the next compute op depends on them.
  void tp_collective(const std::string& name, CollOp c, double bytes) {
    if (tp_ == 1) return;
    const OpId prev = g_.ops.empty() ? 0 : static_cast<OpId>(g_.ops.size() - 1);
    std::vector<OpId> deps;
    if (!g_.ops.empty()) deps.push_back(prev);
    const OpId id = collective(name, c, CommGroup::tp, bytes, deps);
    pending_deps_.push_back(id);
  }

  TensorId temp(const std::string& name, double bytes) {
    const TensorId id = g_.tensor(prefix_ + name, MemCategory::activations, bytes);
    return id;
  }

  void add_resident_state() {
    const double n = local_params();
    const bool zero = t_.optimizer_sharding != OptimizerSharding::none;
    const double opt_share = zero ? 1.0 / dp_ : 1.0;
    const double grad_share =
        (t_.optimizer_sharding == OptimizerSharding::zero2 || t_.optimizer_sharding == OptimizerSharding::fsdp)
            ? 1.0 / dp_
            : 1.0;
    const double weight_share = t_.optimizer_sharding == OptimizerSharding::fsdp ? 1.0 / dp_ : 1.0;
    auto resident = [&](const std::string& name, MemCategory c, double bytes, bool host = false) {
      g_.resident.push_back(g_.tensor(name, c, bytes, host));
    };
    resident("weights.bf16", MemCategory::weights, n * pr_.activation_bytes * weight_share);
    resident("grads.fp32", MemCategory::gradients, n * pr_.grad_bytes * grad_share);
    resident("optimizer.master_m_v", MemCategory::optimizer,
             n * (pr_.master_weight_bytes + pr_.optimizer_bytes) * opt_share, t_.offload_optimizer);
    if (sys_.memory.reserved_bytes > 0)
      resident("reserved.cuda_context_nccl", MemCategory::other, sys_.memory.reserved_bytes);
  }

  // ---- layer steps -------------------------------------------------------------------------
  std::vector<Step> layer_steps(int l) {
    const double a = pr_.activation_bytes;
    std::vector<Step> steps;
    steps.push_back({"norm1", Tsp_ * h_ * a, [=, this](Phase) { vector("norm1", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_); },
                     [=, this] { vector("norm1.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_); }});
    steps.push_back({"qkv", T_ * (q_ + 2 * kv_) * a,
                     [=, this](Phase) {
                       tp_collective("qkv.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("qkv", T_, q_ + 2 * kv_, h_);
                     },
                     [=, this] {
                       gemm("qkv.dgrad", T_, h_, q_ + 2 * kv_);
                       tp_collective("qkv.dgrad.tp_reduce_scatter", CollOp::reduce_scatter, T_ * h_ * a);
                       tp_collective("qkv.wgrad.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("qkv.wgrad", h_, q_ + 2 * kv_, T_, 1, 2 * h_ * (q_ + 2 * kv_) * pr_.grad_bytes);
                     }});
    const double bh = b_ * hl_;
    if (materialized_) {
      // Scores written to HBM (XLA without a flash kernel): QK^T, softmax in fp32, probs in bf16.
      steps.push_back({"attn_scores", bh * s_ * s_ * a,
                       [=, this](Phase) {
                         gemm("attn_scores.qk", s_, s_, hd_, bh, bh * s_ * s_ * (4 - a));
                         const OpId sm = vector("attn_scores.softmax", bh * s_ * s_ * (4 + a), 5 * bh * s_ * s_);
                         g_.ops[sm].sfu_ops = bh * s_ * s_;
                       },
                       [=, this] {
                         vector("attn_scores.softmax.bwd", bh * s_ * s_ * 3 * a, 4 * bh * s_ * s_);
                         gemm("attn_scores.dq", s_, hd_, s_, bh);
                         gemm("attn_scores.dk", s_, hd_, s_, bh);
                       }});
      steps.push_back({"attn", T_ * q_ * a, [=, this](Phase) { gemm("attn.pv", s_, hd_, s_, bh); },
                       [=, this] {
                         gemm("attn.dp", s_, s_, hd_, bh);
                         gemm("attn.dv", s_, hd_, s_, bh);
                       }});
    } else {
      // Flash attention: causal, so half of the S x S tiles; backward recomputes the scores
      // (5 matmuls against 2 in forward).
      const double fwd_flops = 2.0 * 2.0 * bh * s_ * s_ * hd_ * 0.5;
      const double io = (T_ * (q_ + 2 * kv_) + T_ * q_) * a + bh * s_ * 4;
      steps.push_back({"attn", T_ * q_ * a,
                       [=, this](Phase) {
                         Op op;
                         op.name = "attn.flash";
                         op.phase = phase_;
                         op.unit = ExecUnit::tensor;
                         op.dtype = hw::Dtype::bf16;
                         op.flops = fwd_flops;
                         op.hbm_bytes = io;
                         op.sfu_ops = bh * s_ * s_ * 0.5;  // one exp per unmasked score
                         emit(std::move(op));
                       },
                       [=, this] {
                         Op op;
                         op.name = "attn.flash.bwd";
                         op.phase = phase_;
                         op.unit = ExecUnit::tensor;
                         op.dtype = hw::Dtype::bf16;
                         op.flops = 2.5 * fwd_flops;
                         op.sfu_ops = bh * s_ * s_ * 0.5;  // the scores are recomputed
                         op.hbm_bytes = 2 * io + T_ * q_ * a;
                         emit(std::move(op));
                       }});
    }
    steps.push_back({"attn_out", Tsp_ * h_ * a,
                     [=, this](Phase) {
                       gemm("attn_out", T_, h_, q_);
                       tp_collective("attn_out.tp_reduce_scatter", CollOp::reduce_scatter, T_ * h_ * a);
                       vector("attn_out.residual", 3 * Tsp_ * h_ * a, Tsp_ * h_);
                     },
                     [=, this] {
                       tp_collective("attn_out.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("attn_out.dgrad", T_, q_, h_);
                       gemm("attn_out.wgrad", q_, h_, T_, 1, 2 * q_ * h_ * pr_.grad_bytes);
                     }});
    steps.push_back({"norm2", Tsp_ * h_ * a, [=, this](Phase) { vector("norm2", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_); },
                     [=, this] { vector("norm2.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_); }});
    const bool swiglu = m_.ffn == FfnKind::swiglu;
    if (swiglu)
      steps.push_back({"mlp_gate", T_ * f_ * a,
                       [=, this](Phase) {
                         tp_collective("mlp.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                         gemm("mlp_gate", T_, f_, h_);
                       },
                       [=, this] {
                         gemm("mlp_gate.dgrad", T_, h_, f_);
                         tp_collective("mlp.wgrad.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                         gemm("mlp_gate.wgrad", h_, f_, T_, 1, 2 * h_ * f_ * pr_.grad_bytes);
                       }});
    steps.push_back({"mlp_up", T_ * f_ * a,
                     [=, this](Phase) {
                       if (!swiglu) tp_collective("mlp.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("mlp_up", T_, f_, h_);
                     },
                     [=, this] {
                       gemm("mlp_up.dgrad", T_, h_, f_, 1, swiglu ? T_ * h_ * 2 * a : 0);
                       tp_collective("mlp.dgrad.tp_reduce_scatter", CollOp::reduce_scatter, T_ * h_ * a);
                       if (!swiglu) tp_collective("mlp.wgrad.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("mlp_up.wgrad", h_, f_, T_, 1, 2 * h_ * f_ * pr_.grad_bytes);
                     }});
    const double act_in = swiglu ? 2 : 1;
    steps.push_back({"mlp_act", T_ * f_ * a,
                     [=, this](Phase) { vector("mlp_act", (act_in + 1) * T_ * f_ * a, 8 * T_ * f_); },
                     [=, this] { vector("mlp_act.bwd", (2 * act_in + 1) * T_ * f_ * a, 12 * T_ * f_); }});
    steps.push_back({"mlp_out", Tsp_ * h_ * a,
                     [=, this](Phase) {
                       gemm("mlp_out", T_, h_, f_);
                       tp_collective("mlp_out.tp_reduce_scatter", CollOp::reduce_scatter, T_ * h_ * a);
                       vector("mlp_out.residual", 3 * Tsp_ * h_ * a, Tsp_ * h_);
                     },
                     [=, this] {
                       vector("mlp_out.residual.bwd", 3 * Tsp_ * h_ * a, Tsp_ * h_);
                       tp_collective("mlp_out.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
                       gemm("mlp_out.dgrad", T_, f_, h_);
                       gemm("mlp_out.wgrad", f_, h_, T_, 1, 2 * f_ * h_ * pr_.grad_bytes);
                     }});
    (void)l;
    return steps;
  }

  void forward_micro_step() {
    phase_ = Phase::forward;
    const double a = pr_.activation_bytes;
    prefix_ = fmt::format("mb{}.", mb_);
    layer_state_.assign(layers_, {});
    // Embedding lookup (gather), output in bf16.
    const TensorId x0 = temp("embedding.out", Tsp_ * h_ * a);
    OpId emb = vector("embedding", 2 * Tsp_ * h_ * a, 0);
    g_.ops[emb].allocs.push_back(x0);
    TensorId layer_input = x0;
    for (int l = 0; l < layers_; ++l) layer_forward(l, layer_input);
    // Final norm, logits (vocab-parallel), cross-entropy in fp32.
    prefix_ = fmt::format("mb{}.", mb_);
    vector("final_norm", 2 * Tsp_ * h_ * a, 5 * Tsp_ * h_);
    tp_collective("logits.tp_all_gather", CollOp::all_gather, T_ * h_ * a);
    const TensorId logits = temp("logits.fp32", T_ * V_ * 4);
    const OpId lg = gemm("logits", T_, V_, h_, 1, T_ * V_ * (4 - a));
    g_.ops[lg].allocs.push_back(logits);
    logits_ = logits;
    vector("cross_entropy", T_ * V_ * 4 * 2, 6 * T_ * V_);
    g_.ops.back().frees.push_back(layer_input);  // the last layer's output feeds only the head
  }
  TensorId logits_ = 0;

  void layer_forward(int l, TensorId& layer_input) {
    prefix_ = fmt::format("mb{}.L{}.", mb_, l);
    auto& st = layer_state_[l];
    const auto plan = save_plan(t_.recompute, materialized_, m_.is_moe_layer(l));
    const std::set<std::string> saved(plan.saved.begin(), plan.saved.end());
    const std::set<std::string> offloaded(plan.offloaded.begin(), plan.offloaded.end());
    st.input = layer_input;  // always kept: every policy saves the layer input
    if (t_.optimizer_sharding == OptimizerSharding::fsdp) fsdp_gather(l);
    std::vector<TensorId> transient;
    TensorId out = layer_input;
    for (auto& step : layer_steps(l)) {
      step.forward(Phase::forward);
      const OpId producer = static_cast<OpId>(g_.ops.size() - 1);
      const TensorId t = temp(step.name, step.out_bytes);
      g_.ops[producer].allocs.push_back(t);
      out = t;
      if (saved.count(step.name)) {
        st.kept[step.name] = t;
      } else if (offloaded.count(step.name)) {
        // D2H copy as soon as the producer finishes; HBM freed when the copy is done.
        Op c;
        c.name = prefix_ + step.name + ".offload";
        c.kind = OpKind::copy_d2h;
        c.stream = StreamKind::d2h;
        c.phase = Phase::forward;
        c.copy_bytes = step.out_bytes;
        c.deps = {producer};
        const TensorId host = g_.tensor(prefix_ + step.name + ".host", MemCategory::activations, step.out_bytes, true);
        c.allocs.push_back(host);
        // The layer output stays in HBM anyway as the next layer's input.
        if (step.name != "mlp_out") c.frees.push_back(t);
        st.offload_copy[step.name] = g_.add(std::move(c));
        st.host_copy[step.name] = host;
      } else {
        transient.push_back(t);
      }
    }
    // The layer output is the next layer's input; intermediate tensors not kept die here.
    const OpId last = static_cast<OpId>(g_.ops.size() - 1);
    for (auto it = g_.ops.rbegin(); it != g_.ops.rend(); ++it)
      if (it->stream == StreamKind::compute) {
        for (TensorId t : transient)
          if (t != out) it->frees.push_back(t);
        break;
      }
    if (std::find(transient.begin(), transient.end(), out) == transient.end() && !st.kept.count("mlp_out") &&
        !st.offload_copy.count("mlp_out")) {
      // out is kept anyway as the next layer's input
    }
    st.last_forward_op = last;
    layer_input = out;
  }

  void fsdp_gather(int l) {
    // ZeRO-3: gather this layer's bf16 weights before use; the buffer lives until the layer is done.
    const double bytes = layer_weights(l) * pr_.param_gather_bytes;
    const OpId ag = collective("fsdp.param_all_gather", CollOp::all_gather, CommGroup::dp, bytes);
    const TensorId buf = g_.tensor(prefix_ + "fsdp.params", MemCategory::weights, bytes);
    g_.ops[ag].allocs.push_back(buf);
    pending_deps_.push_back(ag);
    fsdp_buffers_.push_back(buf);
  }
  std::vector<TensorId> fsdp_buffers_;

  void backward_micro_step() {
    phase_ = Phase::backward;
    const double a = pr_.activation_bytes;
    prefix_ = fmt::format("mb{}.", mb_);
    vector("cross_entropy.bwd", T_ * V_ * (4 + a), 4 * T_ * V_);
    gemm("logits.dgrad", T_, h_, V_);
    tp_collective("logits.dgrad.tp_reduce_scatter", CollOp::reduce_scatter, T_ * h_ * a);
    const OpId lw = gemm("logits.wgrad", V_, h_, T_, 1, 2 * V_ * h_ * pr_.grad_bytes);
    g_.ops[lw].frees.push_back(logits_);
    vector("final_norm.bwd", 4 * Tsp_ * h_ * a, 8 * Tsp_ * h_);
    layer_grad_ready_.assign(layers_, 0);
    for (int l = layers_ - 1; l >= 0; --l) {
      // Fetch this layer's offloaded activations (if not yet) and the next layer's, one ahead.
      prefetch_offloaded(l);
      if (l >= 1) prefetch_offloaded(l - 1);
      layer_backward(l);
      grad_sync_layer(l);
    }
    prefix_ = fmt::format("mb{}.", mb_);
    phase_ = Phase::backward;
    vector("embedding.bwd", Tsp_ * h_ * (a + 4), Tsp_ * h_);
    grad_sync_embedding();
  }

  std::map<int, std::vector<std::pair<TensorId, OpId>>> fetched_;

  void prefetch_offloaded(int l) {
    auto& st = layer_state_[l];
    if (st.offload_copy.empty() || fetched_.count(l)) return;
    prefix_ = fmt::format("mb{}.L{}.", mb_, l);
    for (const auto& [name, d2h] : st.offload_copy) {
      Op c;
      c.name = prefix_ + name + ".fetch";
      c.kind = OpKind::copy_h2d;
      c.stream = StreamKind::h2d;
      c.phase = Phase::backward;
      c.copy_bytes = g_.tensors[st.host_copy[name]].bytes;
      c.deps = {d2h};
      // Not before the backward reaches the layer above: fetching everything at once would
      // fill HBM, which is what offloading avoids.
      if (!g_.ops.empty()) c.deps.push_back(static_cast<OpId>(g_.ops.size() - 1));
      const TensorId t = temp(name + ".fetched", c.copy_bytes);
      c.allocs.push_back(t);
      c.frees.push_back(st.host_copy[name]);
      fetched_[l].push_back({t, g_.add(std::move(c))});
    }
  }

  void layer_backward(int l) {
    prefix_ = fmt::format("mb{}.L{}.", mb_, l);
    auto& st = layer_state_[l];
    auto steps = layer_steps(l);
    const auto plan = save_plan(t_.recompute, materialized_, m_.is_moe_layer(l));
    const std::set<std::string> have = [&] {
      std::set<std::string> s(plan.saved.begin(), plan.saved.end());
      s.insert(plan.offloaded.begin(), plan.offloaded.end());
      return s;
    }();
    if (t_.optimizer_sharding == OptimizerSharding::fsdp) fsdp_gather(l);
    // Offloaded activations must be back before this layer's backward starts.
    std::vector<TensorId> to_free;
    if (auto it = fetched_.find(l); it != fetched_.end()) {
      for (auto& [t, op] : it->second) {
        pending_deps_.push_back(op);
        to_free.push_back(t);
      }
      fetched_.erase(it);
    }
    // Recompute what the policy did not keep (its forward ops again, in the backward pass).
    phase_ = Phase::recompute;
    for (auto& step : steps) {
      if (have.count(step.name)) continue;
      if (step.name == "mlp_out") continue;  // the layer output itself is not needed by backward
      step.forward(Phase::recompute);
      const TensorId t = temp(step.name + ".recomputed", step.out_bytes);
      g_.ops.back().allocs.push_back(t);
      to_free.push_back(t);
    }
    phase_ = Phase::backward;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) it->backward();
    OpId last = static_cast<OpId>(g_.ops.size() - 1);
    for (const auto& [name, t] : st.kept) to_free.push_back(t);
    to_free.push_back(st.input);
    for (TensorId t : fsdp_buffers_) to_free.push_back(t);
    fsdp_buffers_.clear();
    for (TensorId t : to_free) g_.ops[last].frees.push_back(t);
    layer_grad_ready_[l] = last;
  }

  // Data-parallel gradient synchronisation, bucketed per layer so it overlaps the backward of
  // earlier layers (PyTorch DDP / Megatron buckets).
  void grad_sync_layer(int l) {
    if (dp_ == 1) return;
    const double bytes = layer_weights(l) * pr_.grad_reduce_bytes;
    const auto mode = t_.optimizer_sharding;
    const OpId ready = layer_grad_ready_[l];
    if (mode == OptimizerSharding::none && last_micro_)
      collective("grad.all_reduce", CollOp::all_reduce, CommGroup::dp, bytes, {ready});
    else if (mode == OptimizerSharding::zero1 && last_micro_)
      collective("grad.reduce_scatter", CollOp::reduce_scatter, CommGroup::dp, bytes, {ready});
    else if (mode == OptimizerSharding::zero2 || mode == OptimizerSharding::fsdp)
      collective("grad.reduce_scatter", CollOp::reduce_scatter, CommGroup::dp, bytes, {ready});
  }
  void grad_sync_embedding() {
    if (dp_ == 1) return;
    const double table = static_cast<double>(m_.vocab) * m_.hidden / tp_;
    // Embedding tables and the final norm gain: the parameters outside the layers.
    const double bytes = ((m_.tied_embeddings ? table : 2 * table) + m_.hidden) * pr_.grad_reduce_bytes;
    const OpId ready = static_cast<OpId>(g_.ops.size() - 1);
    const auto mode = t_.optimizer_sharding;
    if (mode == OptimizerSharding::none && last_micro_)
      collective("grad.embedding.all_reduce", CollOp::all_reduce, CommGroup::dp, bytes, {ready});
    else if ((mode == OptimizerSharding::zero1 && last_micro_) || mode == OptimizerSharding::zero2 ||
             mode == OptimizerSharding::fsdp)
      collective("grad.embedding.reduce_scatter", CollOp::reduce_scatter, CommGroup::dp, bytes, {ready});
  }

  void optimizer_step() {
    phase_ = Phase::optimizer;
    prefix_ = "";
    const double n = local_params();
    const bool sharded = t_.optimizer_sharding != OptimizerSharding::none;
    const double shard = sharded ? n / dp_ : n;
    // The optimizer waits for every gradient collective.
    std::vector<OpId> comm;
    for (OpId i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].kind == OpKind::collective && g_.ops[i].group == CommGroup::dp) comm.push_back(i);
    pending_deps_ = comm;
    if (t_.offload_optimizer) {
      g_.notes.push_back(
          "optimizer offload: gradients go to host and updated weights come back over the host link; the CPU "
          "Adam step itself is not timed yet");
      Op d;
      d.name = "optimizer.grads_to_host";
      d.kind = OpKind::copy_d2h;
      d.stream = StreamKind::d2h;
      d.phase = Phase::optimizer;
      d.copy_bytes = shard * pr_.grad_bytes;
      d.deps = comm;
      const OpId d2h = g_.add(std::move(d));
      Op u;
      u.name = "optimizer.weights_from_host";
      u.kind = OpKind::copy_h2d;
      u.stream = StreamKind::h2d;
      u.phase = Phase::optimizer;
      u.copy_bytes = shard * pr_.activation_bytes;
      u.deps = {d2h};
      pending_deps_ = {g_.add(std::move(u))};
      vector("optimizer.cast_weights", shard * 2 * pr_.activation_bytes, shard);
    } else {
      // AdamW: read grad, master, m, v; write master, m, v and the bf16 working copy.
      vector("optimizer.adamw", shard * (pr_.grad_bytes + 2 * (pr_.master_weight_bytes + pr_.optimizer_bytes) +
                                         pr_.activation_bytes),
             15 * shard);
    }
    if (sharded && t_.optimizer_sharding != OptimizerSharding::fsdp && dp_ > 1) {
      const OpId last = static_cast<OpId>(g_.ops.size() - 1);
      collective("param.all_gather", CollOp::all_gather, CommGroup::dp, n * pr_.param_gather_bytes, {last});
    }
  }
};

}  // namespace

OpGraph build_training_graph(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys,
                             const RankRole& role) {
  Builder b(m, t, sys, role);
  return b.build();
}

}  // namespace racksim::workloads
