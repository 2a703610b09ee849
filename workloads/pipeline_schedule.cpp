#include "workloads/pipeline_schedule.h"

#include <algorithm>
#include <utility>

namespace racksim::workloads {

int warmup_forwards(int pp, int vp, int micro_steps, int rank, bool ep_overlap, int group) {
  if (pp <= 1) return 0;
  const int n = group > 0 ? group : pp;
  const int w = (vp == 1 ? pp - rank - 1 : (pp - rank - 1) * 2 + (vp - 1) * n) + (ep_overlap ? 1 : 0);
  return std::min(w, micro_steps * vp);
}

std::vector<ScheduleEntry> pipeline_schedule(int pp, int vp, int micro_steps, int rank, bool ep_overlap, int group) {
  std::vector<ScheduleEntry> out;
  const int m = micro_steps;
  if (pp == 1) {
    for (int i = 0; i < m; ++i) {
      out.push_back({true, i, 0, i > 0});
      out.push_back({false, i, 0, i + 1 < m});
    }
    return out;
  }
  const int total = m * vp;
  // Megatron's schedule table: entry k = (micro-batch, chunk) of the k-th forward; groups of n micro-batches, each
  // through every chunk in turn; the last group takes what is left. With vp 1 it is the micro-batches in order.
  const int n = vp == 1 ? m : std::max(1, group > 0 ? group : pp);
  std::vector<std::pair<int, int>> table;
  table.reserve(static_cast<std::size_t>(total));
  for (int first = 0; first < m; first += n) {
    const int end = first + n >= m ? m : first + n;
    for (int c = 0; c < vp; ++c)
      for (int i = first; i < end; ++i) table.emplace_back(i, c);
    if (end == m) break;
  }
  // The k-th backward runs the k-th entry's micro-batch through the chunks in reverse.
  auto chunk = [&](int k, bool fwd) { return fwd ? table[k].second : vp - 1 - table[k].second; };
  auto micro = [&](int k) { return table[k].first; };
  const int warmup = warmup_forwards(pp, vp, m, rank, ep_overlap, group);
  out.reserve(static_cast<std::size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) out.push_back({true, micro(k), chunk(k, true), false});
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back({true, micro(warmup + i), chunk(warmup + i, true), true});
    out.push_back({false, micro(i), chunk(i, false), true});
  }
  for (int k = total - warmup; k < total; ++k) out.push_back({false, micro(k), chunk(k, false), false});
  return out;
}

std::vector<int> split_layers(int layers, int vstages, const PipelineLayout& layout) {
  const int L = layers, V = vstages;
  std::vector<int> count(V, L / V);
  const int first = layout.first_stage_layers, last_n = layout.last_stage_layers;
  if (V > 1 && layout.uneven()) {
    const int middle = V - (first >= 0) - (last_n >= 0);
    const int rest = L - std::max(first, 0) - std::max(last_n, 0);
    count.assign(V, middle > 0 ? rest / middle : 0);
    if (first >= 0) count[0] = first;
    if (last_n >= 0) count[V - 1] = last_n;
  } else if (L % V != 0) {
    int deficit = V * ((L + V - 1) / V) - L;
    count.assign(V, (L + V - 1) / V);
    for (int v : {0, V - 1})
      if (deficit > 0 && count[v] > 1) {
        --count[v];
        --deficit;
      }
    for (int v = 1; deficit > 0 && v < V - 1; ++v, --deficit) --count[v];
  }
  std::vector<int> first_layer(V + 1, 0);
  for (int v = 0; v < V; ++v) first_layer[v + 1] = first_layer[v] + count[v];
  return first_layer;
}

std::vector<int> split_layers(int layers, int pp, int vp, const PipelineLayout& layout) {
  if (!layout.by_rank() || pp < 2) return split_layers(layers, pp * vp, layout);
  const int first = layout.first_rank_layers, last = layout.last_rank_layers;
  const int middle = pp - (first >= 0) - (last >= 0);
  const int rest = layers - std::max(first, 0) - std::max(last, 0);
  std::vector<int> per_rank(static_cast<std::size_t>(pp), middle > 0 ? rest / middle : 0);
  if (first >= 0) per_rank.front() = first;
  if (last >= 0) per_rank.back() = last;
  std::vector<int> first_layer(static_cast<std::size_t>(pp * vp) + 1, 0);
  for (int v = 0; v < pp * vp; ++v) first_layer[v + 1] = first_layer[v] + per_rank[static_cast<std::size_t>(v % pp)] / vp;
  return first_layer;
}

}  // namespace racksim::workloads
