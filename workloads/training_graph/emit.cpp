// Emitting ops: kernels, GEMMs (with their fp8-class casts), vector work and collectives, and the tensor-parallel
// exchanges as each overlap method issues them.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

OpId Builder::emit_last() {
  const OpId id = static_cast<OpId>(g_.ops.size() - 1);
  Op& op = g_.ops[id];
  op.rank = static_cast<uint16_t>(rank_);
  if (!pending_deps_.empty()) {  // (most ops have none: no call)
    op.deps.insert(op.deps.end(), pending_deps_.begin(), pending_deps_.end());
    pending_deps_.clear();
  }
  if (!compute_waits_.empty() && op.stream == StreamKind::compute) {
    op.deps.insert(op.deps.end(), compute_waits_.begin(), compute_waits_.end());
    compute_waits_.clear();
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

OpId Builder::gemm(std::string_view name, double m, double n, double k, double batch, double extra_bytes,
                   Quant q) {
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

void Builder::mark_wgrad(OpId id, std::string_view name, double elements) {
  Op& op = g_.ops[id];
  // Into Megatron's main_grad: fp32, or 16-bit under --fp16 or --grad-reduce-in-bf16 (Precision::grad_bytes).
  op.accumulate_fp32 = fused_wgrad_accumulation() && !t_.grads_16bit();
  op.accumulate_16bit = fused_wgrad_accumulation() && t_.grads_16bit();
  op.wgrad = 1;
  // Transformer Engine's cuBLASLt call (a bf16 wgrad in NT, measured with and without the fused accumulate); under
  // training.transformer_impl local the GEMM is PyTorch's or Megatron's own, whose cuBLAS calls pick other kernels.
  // (The output layer, always Megatron's own, clears it: column_parallel_backward.)
  op.wgrad_te_layout = !jax_ && t_.transformer_impl == TransformerImpl::transformer_engine;
  unfused_main_grad_add(name, elements);
}

OpId Builder::vector(std::string_view name, double bytes, double flops, double sfu) {
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

void Builder::tp_collective(std::string_view name, CollectiveOp c, double bytes, TpOverlap how, int gemms) {
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
  // In JAX mode the key changes nothing: XLA runs a tensor-parallel collective as an NCCL kernel its consumer waits
  // for; its collective matmul (windowed einsum, --xla_gpu_threshold_for_windowed_einsum_mib), which would overlap
  // one, is not modelled (scenario.cpp notes the key).
  const bool overlap = t_.tp_comm_overlap && !jax_;
  if ((overlap && how != TpOverlap::none) || how == TpOverlap::async) {
    // Runs beside the next GEMM (chunked in the real kernels): the op after that GEMM waits
    // for it, the GEMM itself does not.
    const OpId id = collective(name, c, CommGroup::tp, bytes, {last()});
    overlapped_.push_back(id);
    Op& op = g_.ops[id];
    if (how == TpOverlap::ring_exchange) {
      op.comm_kernel = CommKernel::copy_engine;
      op.queues_behind_compute = false;  // copy engines, no SMs to wait for
      chunk_next_gemms_ = gemms;
    } else if (how != TpOverlap::async) {
      on_userbuffer_sms(op);
    }
    return;
  }
  inline_collective(name, c, CommGroup::tp, bytes);
}

void Builder::pipelined_reduce_scatter(std::string_view name, CollectiveOp c, double bytes) {
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

void Builder::column_parallel_backward(std::string_view name, double m, double n, double k, double input_bytes, TpOverlap how,
                                       bool quantized) {
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

void Builder::column_parallel_layer_backward(std::string_view name, double m, double n, double k, double input_bytes) {
  if (bulk_gather_beside_dgrad()) {
    column_parallel_backward(name, m, n, k, input_bytes, bwd_tp_overlap());
    return;
  }
  gemm_dgrad(name, m, n, k);
  tp_collective(cat(name, ".dgrad.tp_reduce_scatter"), CollectiveOp::reduce_scatter, input_bytes, TpOverlap::bulk);
  tp_collective(cat(name, ".wgrad.tp_all_gather"), CollectiveOp::all_gather, input_bytes, TpOverlap::bulk);
  gemm_wgrad(name, m, n, k);
}

}  // namespace racksim::workloads::training_graph
