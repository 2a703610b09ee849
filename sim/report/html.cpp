#include "sim/report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <cmath>
#include <map>

namespace racksim::sim {

extern const char* const kHtmlPageHead;
extern const char* const kHtmlPageTail;

using nlohmann::json;
using namespace racksim::workloads;

namespace {

// Seconds rounded to a picosecond-free nanosecond, so the page holds short numbers.
double ns_round(double s) { return std::round(s * 1e9) / 1e9; }

std::string category_of(const Op& op) {
  if (op.host_compute) return "host (CPU)";
  switch (op.kind) {
    case OpKind::kernel: return to_string(op.phase);
    case OpKind::collective: return "collective " + to_string(op.group);
    case OpKind::copy_h2d: return "host to device";
    case OpKind::copy_d2h: return "device to host";
  }
  return "other";
}

std::string short_name(const std::string& s) { return s.size() <= 48 ? s : s.substr(0, 45) + "..."; }

struct Item {
  double start, end;
  int cat;
  std::size_t op;
};

struct Segment {
  double start, end;
  std::size_t count;
  std::size_t first, last;
  std::map<int, double> by_cat;  // busy time per category, for the colour of a mixed segment
  int cat() const {
    int best = -1;
    double t = -1;
    for (const auto& [c, d] : by_cat)
      if (d > t) best = c, t = d;
    return best;
  }
};

// Merges adjacent items closer than `res`; same category only unless `mixed`.
std::vector<Segment> merge(const std::vector<Item>& items, double res, bool mixed) {
  std::vector<Segment> out;
  for (const auto& it : items) {
    if (!out.empty()) {
      Segment& s = out.back();
      const bool same = mixed || (s.by_cat.size() == 1 && s.by_cat.begin()->first == it.cat);
      if (same && it.start - s.end <= res) {
        s.end = std::max(s.end, it.end);
        ++s.count;
        s.last = it.op;
        s.by_cat[it.cat] += it.end - it.start;
        continue;
      }
    }
    Segment s{it.start, it.end, 1, it.op, it.op, {}};
    s.by_cat[it.cat] = it.end - it.start;
    out.push_back(std::move(s));
  }
  return out;
}

std::string escape_script(const std::string& json_text) {
  // Inside <script>, "</" could end the element; JSON allows "\u003c" for '<' (only in strings).
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

std::string page(const json& data) {
  std::string body = data.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::string(kHtmlPageHead) + escape_script(body) + kHtmlPageTail;
}

json run_view(const RunResult& r) {
  json v = r.report;
  v["timeline"] = timeline_json(r.graph, r.replay);
  return v;
}

}  // namespace

json timeline_json(const OpGraph& g, const ReplayResult& r, std::size_t max_segments_per_lane) {
  const double step = r.step_time_s > 0 ? r.step_time_s : 1e-9;
  std::vector<std::string> cats;
  auto cat_index = [&](const std::string& c) {
    auto it = std::find(cats.begin(), cats.end(), c);
    if (it != cats.end()) return static_cast<int>(it - cats.begin());
    cats.push_back(c);
    return static_cast<int>(cats.size() - 1);
  };
  // One lane per stream kind that the graph uses (compute always), then the host launch thread.
  // With pipeline stages the graph holds one simulated rank per stage: show the one the
  // breakdown describes (the busiest).
  const int rank = g.ranks > 1 ? r.breakdown_rank : -1;
  const std::size_t n = std::min(g.ops.size(), r.ops.size());
  std::vector<bool> used(kStreamCount, false);
  used[static_cast<int>(StreamKind::compute)] = true;
  for (std::size_t i = 0; i < n; ++i) used[static_cast<int>(g.ops[i].stream)] = true;
  std::vector<int> lane_of(kStreamCount, -1);
  std::vector<std::string> lane_names;
  for (int s = 0; s < kStreamCount; ++s)
    if (used[s]) {
      lane_of[s] = static_cast<int>(lane_names.size());
      lane_names.push_back(to_string(static_cast<StreamKind>(s)));
    }
  const int launch_lane = static_cast<int>(lane_names.size());
  lane_names.push_back("host launch");
  std::vector<std::vector<Item>> lanes(lane_names.size());
  std::size_t shown = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    if (rank >= 0 && op.rank != rank) continue;
    const OpRecord& rec = r.ops[i];
    ++shown;
    lanes[lane_of[static_cast<int>(op.stream)]].push_back({rec.start_s, rec.end_s, cat_index(category_of(op)), i});
  }
  const int launch_cat = cat_index("launch");
  for (std::size_t i = 0; i < n; ++i)
    if ((rank < 0 || g.ops[i].rank == rank) && r.ops[i].launch_end_s > r.ops[i].launch_start_s)
      lanes[launch_lane].push_back({r.ops[i].launch_start_s, r.ops[i].launch_end_s, launch_cat, i});

  json out_lanes = json::array();
  const std::size_t cap = std::max<std::size_t>(max_segments_per_lane, 16);
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    auto& items = lanes[l];
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.start < b.start; });
    // Finer than a pixel first, same category only; coarser and mixed until it fits the cap.
    std::vector<Segment> segs;
    double res = step / 20000;
    bool done = false;
    for (; res <= step / static_cast<double>(cap); res *= 2) {
      segs = merge(items, res, false);
      if (segs.size() <= cap) {
        done = true;
        break;
      }
    }
    for (res = step / static_cast<double>(cap); !done; res *= 2) {
      segs = merge(items, res, true);
      done = segs.size() <= cap;
    }
    json js = json::array();
    for (const auto& s : segs) {
      std::string label = short_name(g.op_name(s.first));
      if (s.count > 1) label += " \u2026 " + short_name(g.op_name(s.last));
      if (s.by_cat.size() > 1) label += " (mixed kinds)";
      js.push_back(json::array({ns_round(s.start), ns_round(s.end), s.cat(), s.count, label}));
    }
    out_lanes.push_back({{"name", lane_names[l]}, {"segments", js}});
  }
  // A long step is replayed for its first micro-steps and extrapolated from their steady state (sim/run): the ops end
  // before the step does. The chart then spans what was replayed and says so (an audit's finding: a 3.6 s replay on a
  // 14 s axis read as 10 s of idle GPU).
  double replayed_s = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (rank < 0 || g.ops[i].rank == rank) replayed_s = std::max(replayed_s, r.ops[i].end_s);
  return {{"step_time_s", r.step_time_s}, {"replayed_s", replayed_s}, {"ops", shown}, {"rank", std::max(rank, 0)},
          {"ranks", g.ranks}, {"categories", cats}, {"lanes", out_lanes}};
}

std::string html_run_report(const RunResult& run) {
  return page({{"kind", "run"}, {"runs", json::array({run_view(run)})}});
}

std::string html_compare_report(const RunResult& base, const RunResult& variant) {
  const double a = base.report.value("tokens_per_s_per_gpu", 0.0);
  const double b = variant.report.value("tokens_per_s_per_gpu", 0.0);
  return page({{"kind", "compare"},
               {"runs", json::array({run_view(base), run_view(variant)})},
               {"speedup", a > 0 ? b / a : 0.0}});
}

std::string html_sweep_report(const std::string& sweep_file, const std::string& base_scenario,
                              const std::vector<std::string>& keys, const std::vector<SweepPointView>& points) {
  // Value labels per key in order of first appearance (= the sweep file's order when every
  // point is present; a shard keeps the order of the values it has).
  std::vector<std::vector<std::string>> values(keys.size());
  std::vector<std::unordered_map<std::string, std::size_t>> value_index(keys.size());  // linear in the points
  std::vector<std::string> errors;
  std::unordered_map<std::string, std::size_t> error_index;
  json pts = json::array();
  for (const auto& p : points) {
    json vi = json::array();
    for (std::size_t k = 0; k < keys.size() && k < p.values.size(); ++k) {
      auto [it, added] = value_index[k].emplace(p.values[k], values[k].size());
      if (added) values[k].push_back(p.values[k]);
      vi.push_back(it->second);
    }
    json j = {{"v", p.values}, {"vi", vi}};
    if (!p.error.empty() || p.report.is_null()) {
      auto [it, added] = error_index.emplace(p.error, errors.size());
      if (added) errors.push_back(p.error);
      j["e"] = it->second;
    } else {
      const json& r = p.report;
      j["e"] = -1;
      j["t"] = r.value("tokens_per_s_per_gpu", 0.0);
      j["s"] = r.value("step_time_s", 0.0);
      j["m"] = r.value("mfu", 0.0);
      j["p"] = r.value("peak_memory_bytes", 0.0);
      j["c"] = r.value("memory_capacity_bytes", 0.0);
      j["f"] = r.value("fits", false);
    }
    pts.push_back(std::move(j));
  }
  return page({{"kind", "sweep"},
               {"sweep_file", sweep_file},
               {"base", base_scenario},
               {"keys", keys},
               {"values", values},
               {"errors", errors},
               {"points", pts}});
}

}  // namespace racksim::sim
