// Layer templates: a layer's ops built once per signature and stamped for the layers and micro-batches that repeat it
// (a speed path; the graph is the same).
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

bool Builder::templates_apply(int l, bool forward) {
  if (!options_.layer_templates || micro_steps_ < kTemplateMinMicroSteps || jax_ || partial_graphs_ || fsdp_per_use() || fsdp_reshards_per_microbatch() ||
      fsdp_reduces_per_microbatch() || m_.is_moe_layer(l) ||
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

void Builder::layer_signature() {
  const auto first = static_cast<int64_t>(g_.ops.size());
  sig_.clear();
  sig_.push_back(static_cast<int64_t>(phase_));
  sig_.push_back(fp8_class() && mb_ == 0);  // (fp8 weight casts: gemm())
  sig_.push_back(static_cast<int64_t>(pending_deps_.size()));
  for (OpId d : pending_deps_) sig_.push_back(first - d);
  sig_.push_back(static_cast<int64_t>(overlapped_.size()));
  for (OpId d : overlapped_) sig_.push_back(first - d);
  sig_.push_back(static_cast<int64_t>(compute_waits_.size()));
  for (OpId d : compute_waits_) sig_.push_back(first - d);
  sig_.push_back(overlap_countdown_);
  sig_.push_back(chunk_next_gemms_);
  sig_.push_back(first - last());
  sig_.push_back(first - last_compute());
  const Op& back = g_.ops.back();
  sig_.push_back(static_cast<int64_t>(back.unit) | static_cast<int64_t>(back.kind) << 8 |
                 static_cast<int64_t>(back.stream) << 16);
}

void Builder::layer_slots(int l, bool forward, TensorId input, std::vector<TensorId>& slots,
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

bool Builder::stamp_layer(int l, bool forward, TensorId& layer_input) {
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
  compute_waits_.clear();
  for (OpId d : ex.compute_waits) compute_waits_.push_back(op_id(d));
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

void Builder::record_layer(int l, bool forward, TensorId& layer_input) {
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
  known.insert(known.end(), compute_waits_.begin(), compute_waits_.end());
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
       std::all_of(overlapped_.begin(), overlapped_.end(), op_known) &&
       std::all_of(compute_waits_.begin(), compute_waits_.end(), op_known) && op_known(pending_host_wait_);
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
    tpl.exit = {pending_deps_, overlapped_, compute_waits_, pending_host_wait_, overlap_countdown_, chunk_next_gemms_,
                phase_};
  }
}

}  // namespace racksim::workloads::training_graph
