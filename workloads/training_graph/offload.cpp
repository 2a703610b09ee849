// Activation offload to host memory: JAX's named offloads and Megatron-Core's fine-grained offloading, with their
// reloads.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

void Builder::offload_to_host(LayerState& st, const Step& step, TensorId t, OpId after) {
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

void Builder::prefetch_offloaded(int l) {
  auto& st = layer_state_[{mb_, l}];
  if (st.offload_copy.empty() || st.fetch_issued) return;
  st.fetch_issued = true;
  prefix_micro_layer(l);
  // Not before the backward reaches the layer above: fetching everything at once would fill HBM, which is what
  // offloading avoids.
  for (const auto& [name, d2h] : st.offload_copy.sorted()) fetch_from_host(st, name, last());
}

OpId Builder::fetch_from_host(LayerState& st, std::string_view name, OpId after) {
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

std::vector<char> Builder::chunks_keeping_last_groups(const std::vector<ScheduleEntry>& schedule) const {
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

std::optional<std::pair<int, std::string_view>> Builder::next_offloaded_group(int l, std::string_view after) {
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

OpId Builder::megatron_reload(int l, std::string_view name, OpId after) {
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

void Builder::megatron_reload_chunk_start(int l) {
  const auto g = next_offloaded_group(l, {});
  if (!g) return;
  const OpId d2h = *layer_state_[{mb_, g->first}].offload_copy.find(g->second);
  const bool done_before = offload_preload_after_ != kNoOp && d2h < offload_preload_after_ &&
                           (offload_preload_pair_ == kNoOp || d2h < offload_preload_pair_);
  const OpId after = done_before ? offload_preload_after_ : last();
  offload_preload_after_ = kNoOp;
  megatron_reload(g->first, g->second, after);
}

void Builder::offload_done(std::string_view name) {
  if (!megatron_offload() || bwd_layer_ < 0 || !layer_state_[{mb_, bwd_layer_}].offload_copy.find(name)) return;
  if (const auto g = next_offloaded_group(bwd_layer_, name)) {
    megatron_reload(g->first, g->second, last());
  } else {
    offload_preload_after_ = last();
    offload_preload_pair_ = ep_interleave_ ? pair_first_op_ : kNoOp;
  }
}

}  // namespace racksim::workloads::training_graph
