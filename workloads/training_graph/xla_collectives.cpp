// XLA's gradient collectives: its combiners' grouping and the latency hiding scheduler's windows.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

Builder::MemberSizes Builder::member_sizes(double dense_params, double expert_params, double elem_bytes) const {
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

void Builder::plan_grad_combines(int v) {
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

std::vector<int> Builder::xla_combine_groups(const std::vector<double>& outputs, double limit) {
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

void Builder::add_member(CombineGroup& g, const std::string& name, std::span<const OpId> deps, double bytes) {
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

OpId Builder::emit_group(CombineGroup& g) {
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

OpId Builder::flush_rs(int k) {
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

void Builder::combined_grad_sync(const std::string& name, double dense_params, double expert_params, CollectiveOp op, OpId ready,
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

bool Builder::gradient_collective(const Op& op) {
  if (op.kind != OpKind::collective || op.phase != Phase::backward) return false;
  if (op.coll != CollectiveOp::reduce_scatter && op.coll != CollectiveOp::all_reduce) return false;
  switch (op.group) {
    case CommGroup::dp: case CommGroup::dp_cp: case CommGroup::dp_shard: case CommGroup::dp_replicate:
    case CommGroup::edp: case CommGroup::edp_shard: return true;
    default: return false;
  }
}

void Builder::xla_scheduler_windows() {
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

}  // namespace racksim::workloads::training_graph
