// Sharded state over the data-parallel groups: FSDP's and ZeRO's parameter gathers, the gradient reductions, the end
// of finalize_model_grads and the optimizer.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

TensorId Builder::fsdp_layer_params(int l, int next) {
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

TensorId Builder::fsdp_gather_params(double dense_params, double expert_params,
                                     GatherAfter after, double dense_bytes_per_param) {
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

std::vector<double> Builder::xla_gather_pieces(double dense_params) const {
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

void Builder::flush_deferred_sync() {
  if (!deferred_sync_) return;
  const Name keep = prefix_;
  const int l = deferred_sync_->layer;
  prefix_ = deferred_sync_->prefix;
  deferred_sync_.reset();
  grad_sync("grad", dense_weights(l), expert_weights(l), true);
  prefix_ = keep;
}

void Builder::gather_bucket(int key, const std::string& name, double dense_params, double expert_params,
                            StepStartDeps& after) {
  prefix_rank();
  phase_ = Phase::forward;
  auto& ready = param_ready_[key];
  const auto take = [](OpId& a) -> SmallVec<OpId, 3> {
    if (a == kNoOp) return {};
    return {std::exchange(a, kNoOp)};
  };
  if (dense_replicas() > 1 && dense_params > 0)
    ready.push_back(collective(name + ".param_all_gather", CollectiveOp::all_gather, dense_shard_group(),
                               dense_params * pr_.param_gather_bytes, take(after.dense)));
  if (expert_replicas() > 1 && expert_params > 0)
    ready.push_back(collective(name + ".param_all_gather.experts", CollectiveOp::all_gather, expert_shard_group(),
                               expert_params * pr_.param_gather_bytes, take(after.expert)));
}

// FSDP's unshard of a resharded module (fsdp_reshards_per_microbatch): a layer (key >= 0), the embedding or the output
// layer (kEmbeddingBucket, kHeadBucket). Its all-gathers are issued when the module run before it on this rank starts
// (FSDP2's prefetch of the next module) and the module's first op waits for them; they take none of the module's own
// pending dependencies (a pipeline receive, the step-start gather), which stay with its compute. No buffer of its own:
// the resident state already holds the stage's whole weights.
void Builder::fsdp_regather(int key) {
  if (!fsdp_reshards_per_microbatch()) return;
  const bool resharded = fsdp_resharded_.erase(key) > 0;
  if (resharded) {
    std::vector<OpId> held;
    held.swap(pending_deps_);
    std::vector<OpId> deps;
    if (fsdp_prev_start_) deps.push_back(*fsdp_prev_start_);
    const double dense = key >= 0 ? dense_weights(key) : key == kEmbeddingBucket ? embedding_weights() : head_weights();
    const double expert = key >= 0 ? expert_weights(key) : 0.0;
    const std::string name = key >= 0 ? "regather" : key == kEmbeddingBucket ? "embedding.regather" : "head.regather";
    std::vector<OpId> gathers;
    if (dense_replicas() > 1 && dense > 0)
      gathers.push_back(collective(name + ".param_all_gather", CollectiveOp::all_gather, dense_shard_group(),
                                   dense * pr_.param_gather_bytes, deps));
    if (expert_replicas() > 1 && expert > 0)
      gathers.push_back(collective(name + ".param_all_gather.experts", CollectiveOp::all_gather, expert_shard_group(),
                                   expert * pr_.param_gather_bytes, deps));
    pending_deps_.swap(held);
    pending_deps_.insert(pending_deps_.end(), gathers.begin(), gathers.end());
  }
  fsdp_mark_next_ = true;  // this module's first compute op is where the next module's gather may start
}

void Builder::gather_params_ahead(OpId zeroed) {
  // The first gather of each group waits for the memset (the dense and the expert group may be on streams of their own).
  StepStartDeps after{zeroed, zeroed};
  for (int c = 0; c < vp_; ++c) {
    const int v = c * pp_ + rank_;
    if (v == 0) gather_bucket(kEmbeddingBucket, "embedding", embedding_weights(), 0, after);
    for (int l = first_layer(v); l < end_layer(v); ++l)
      gather_bucket(l, fmt::format("L{}", l), dense_weights(l), expert_weights(l), after);
    if (v == vstages_ - 1) gather_bucket(kHeadBucket, "head", head_weights(), 0, after);
  }
}

void Builder::hold_unsharded_grads(double params, OpId first) {
  if (jax_ || !grads_sharded() || params <= 0) return;
  for (OpId i = first; i < g_.ops.size(); ++i)
    if (g_.ops[i].rank == rank_ && g_.ops[i].phase == Phase::backward) {
      const TensorId t = g_.tensor(named("grads.unsharded"), MemCategory::gradients,
                                   params * pr_.grad_bytes, false, static_cast<uint16_t>(rank_));
      g_.ops[i].allocs.push_back(t);
      unsharded_grads_ = t;
      return;
    }
}

void Builder::throttle_grad_reductions(OpId reduction, double params) {
  grad_reduce_queue_.emplace_back(reduction, params);
  grad_reduce_queued_ += params;
  if (grad_reduce_capacity_ < 0) {
    double units = 0;
    for (int l = 0; l < m_.layers; ++l) units += layer_weights(l);
    grad_reduce_capacity_ = std::max(1e9, 2.0 * units / std::max(1, m_.layers));
  }
  while (grad_reduce_queued_ > grad_reduce_capacity_ && grad_reduce_queue_.size() > 1) {
    // The next compute op waits for it (not the next op: after a chunk's last layer that is its pipeline send, on
    // another stream, and the compute would run on).
    compute_waits_.push_back(grad_reduce_queue_.front().first);
    grad_reduce_queued_ -= grad_reduce_queue_.front().second;
    grad_reduce_queue_.pop_front();
  }
}

void Builder::grad_sync(const std::string& name, double dense_params, double expert_params, bool in_layer_loop,
                        double elem_bytes) {
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
  // The module's whole gradient (hold_unsharded_grads, Megatron mode only: never combined) is freed when the last
  // of its reductions ends.
  const std::optional<TensorId> whole = std::exchange(unsharded_grads_, std::nullopt);
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

double Builder::tp_replicated_grad_params() const {
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

void Builder::optimizer_pass_per_part(std::string_view kernel, std::string_view flag, int n_parts, double bytes_per_param,
                                      double flops_per_param, bool host_reads_each,
                                      std::vector<std::vector<OpId>>& all_reduces) {
  const bool sharded = t_.optimizer_sharding != OptimizerSharding::none;
  double parts[2] = {sharded ? local_dense_params() / dense_replicas() : local_dense_params(),
                     sharded ? local_expert_params() / expert_replicas() : local_expert_params()};
  if (n_parts == 1) parts[0] += parts[1];
  if (all_reduces.size() < static_cast<std::size_t>(n_parts)) all_reduces.resize(n_parts);
  OpId reduce = kNoOp;
  for (int k = 0; k < n_parts; ++k) {
    const std::string_view part = k == 0 ? "" : ".experts";
    vector(cat(kernel, part), parts[k] * bytes_per_param, flops_per_param * parts[k]);
    reduce = inline_collective(cat(cat(flag, part), ".all_reduce"), CollectiveOp::all_reduce, CommGroup::world, 4.0);
    all_reduces[k].push_back(reduce);
    if (host_reads_each) pending_host_wait_ = reduce;
  }
  pending_host_wait_ = reduce;
}

void Builder::grad_norm() {
  const int n_parts = m_.moe && t_.optimizer_sharding == OptimizerSharding::none ? 2 : 1;
  optimizer_pass_per_part("optimizer.grad_norm", "optimizer.grad_norm", n_parts, pr_.main_grad_bytes, 2, false,
                          norm_all_reduces_);
}

void Builder::finalize_model_grads_tail() {
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

std::optional<TensorId> Builder::optimizer_main_grads(double shard) {
  // Megatron's MixedPrecisionOptimizer.prepare_grads over a 16-bit gradient buffer (megatron/core/optimizer/optimizer.py;
  // TrainingConfig::grads_16bit): the optimizer's shard of the gradients copied into fp32 main gradients
  // (distrib_optimizer.py _copy_model_grads_to_main_grads; under --bf16 the fp32 buffer is the main gradient, no copy;
  // none under the precision-aware optimizer or Megatron-FSDP either, Precision::main_grad_bytes). Under --fp16 the
  // dynamic loss scaler then unscales and checks them in one pass (torch._amp_foreach_non_finite_check_and_unscale_:
  // read and write), all-reduces the found-inf flag over the ranks whose shards differ and reads it on the host
  // (`found_inf.item()`), which waits there, before the clipping's norm. The fp32 copy lives until the step has read it
  // (freed by the Adam op; Megatron drops it at the next zero_grad): Megatron's README counts it ("fp16 param, fp16
  // grads: 4 + 16/d" bytes per parameter with the distributed optimizer).
  std::optional<TensorId> main_grads;
  if (pr_.main_grad_bytes != pr_.grad_bytes) {
    const OpId copy = vector("optimizer.copy_model_grads_to_main", shard * (pr_.grad_bytes + pr_.main_grad_bytes), 0);
    main_grads = g_.tensor(named("optimizer.main_grads.fp32"), MemCategory::gradients, shard * pr_.main_grad_bytes, false,
                           static_cast<uint16_t>(rank_));
    g_.ops[copy].allocs.push_back(*main_grads);
  }
  if (t_.fp16) {
    // Once per optimizer part: Megatron chains a dense and an expert optimizer when the model has experts (on every
    // rank, a part without parameters here included), and ChainedOptimizer.prepare_grads runs each one's
    // (optimizer.py), each with its own all-reduce and host read. The flag's group is the world under the distributed
    // optimizer (its get_model_parallel_group) and the model-parallel group otherwise, modelled as the world too (a
    // 4-byte all-reduce: its latency only).
    optimizer_pass_per_part("optimizer.unscale_and_check_inf", "optimizer.found_inf", m_.moe ? 2 : 1,
                            2 * pr_.main_grad_bytes, 1, true, found_inf_all_reduces_);
  }
  return main_grads;
}

void Builder::optimizer_step() {
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
  std::optional<TensorId> main_grads;
  if (!jax_) {
    finalize_model_grads_tail();
    if (t_.grads_16bit()) main_grads = optimizer_main_grads(shard);
    grad_norm();
  }
  // Adam: read the gradient, master weight and moments; write the master weight and moments. Offloaded, the host's
  // gradients are fp32 (host_fp32_bytes), and so are its moments (Precision::optimizer_bytes).
  const double grad_read_bytes = t_.offload_optimizer ? host_fp32_bytes() : pr_.main_grad_bytes;
  const double adam_bytes = shard * (grad_read_bytes + 2 * (pr_.master_weight_bytes + pr_.optimizer_bytes));
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
    // The CPU optimizer's parameters are fp32 (HybridDeviceOptimizer's param_update_in_fp32) and so are its pinned
    // gradients; a gradient of another dtype is copied into them with copy_(non_blocking=True), which PyTorch converts
    // on the GPU first (aten/src/ATen/native/cuda/Copy.cu, copy_requires_temporaries: the conversion device is CUDA
    // for a non-blocking copy), a parameter at a time: a conversion pass, then fp32 bytes over the link. The pass takes
    // the pending reductions as its dependencies; the copy waits for it.
    SmallVec<OpId, 3> reduced;
    if (pr_.main_grad_bytes != host_fp32_bytes()) {
      reduced.push_back(vector("optimizer.grads_to_fp32", shard * (pr_.main_grad_bytes + host_fp32_bytes()), 0));
    } else {
      for (OpId d : pending_deps_) reduced.push_back(d);
    }
    pending_deps_.clear();
    const OpId d2h = host_side("optimizer.grads_to_host", OpKind::copy_d2h, StreamKind::d2h, shard * host_fp32_bytes(),
                               std::move(reduced));
    // (No fp32 copy to free here: offloaded, the optimizer reads the buffer itself, Precision::main_grad_bytes.)
    const OpId adam = host_side("optimizer.cpu_adam", OpKind::copy_d2h, StreamKind::d2h, adam_bytes, {d2h}, true);
    // The updated parameters come back the same way (the post-hook's gpu_param.copy_(param, non_blocking=True)): fp32
    // over the link into a temporary, converted on the GPU into the model's weights (Copy.cu: the source on the host,
    // the temporary of its dtype on the GPU). (JAX mode keeps the weights' dtype over the link.)
    const double back_bytes = jax_ ? pr_.activation_bytes : host_fp32_bytes();
    pending_deps_ = {host_side("optimizer.weights_from_host", OpKind::copy_h2d, StreamKind::h2d, shard * back_bytes, {adam})};
    vector("optimizer.cast_weights", shard * (back_bytes + pr_.activation_bytes), shard);
  } else {
    const OpId adam = vector("optimizer.adamw", adam_bytes, 15 * shard);
    if (jax_) g_.ops[adam].frees.push_back(jax_grads_);
    if (main_grads) g_.ops[adam].frees.push_back(*main_grads);
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

}  // namespace racksim::workloads::training_graph
