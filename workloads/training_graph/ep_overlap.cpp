// EP overlap as Megatron-Core's combined 1F1B schedule issues it: a pair of chunks reordered layer by layer so each
// exchange runs beside the other chunk's compute.
// Part of the training-graph builder: the class and its state are in builder.h.
#include "workloads/training_graph/builder.h"

namespace racksim::workloads::training_graph {

Builder::EpNode Builder::ep_node(const Op& op, EpStep step, bool forward, bool after_exchange) const {
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

void Builder::close_pair() {
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

void Builder::delay_first_layer_wgrads(PairLayout& P) {
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

void Builder::check_pair_order(const PairLayout& P, const std::vector<OpId>& order) const {
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

void Builder::capture_pair_graphs(const PairLayout& P, const std::vector<OpId>& order) {
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

}  // namespace racksim::workloads::training_graph
