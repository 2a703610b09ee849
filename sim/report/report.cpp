#include "sim/report/report.h"

#include <fmt/format.h>

#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "hardware_models/calibration.h"
#include "hardware_models/system_preset.h"
#include "workloads/graph_builder.h"

namespace racksim::sim {

using nlohmann::json;
using namespace racksim::workloads;

std::string version() {
#ifdef RACKSIM_VERSION
  return RACKSIM_VERSION;
#else
  return "0.1.0";
#endif
}

// Micro-steps of gradient accumulation repeat the same work: once the pipeline has filled, every
// further round of micro-steps adds the same time. A step with many micro-steps is therefore
// simulated at two lengths, m1 and m1 + unit, and the remaining micro-steps are added at the
// measured period. The last micro-step's gradient synchronisation and the optimizer are in both
// runs, so the difference is the steady state alone. The plan (docs/decisions.md):
//   pp = 1:        2 and 4 micro-steps: the first waits for the parameter gathers, the last reduces the
//                  gradients; a pair of middle ones is the period (MoE exchanges overlapped within
//                  1F1B pairs alternate between two patterns).
//   1F1B:          pp and 2·pp: every stage's warm-up (pp - 1 - rank forwards) and the first stage
//                  holding pp micro-batches at once, the most it ever holds (the memory peak); a round
//                  of pp micro-steps as the period, which averages patterns that repeat over several.
//   interleaved:   2·pp and 3·pp (the schedule needs multiples of pp): the first stage's warm-up,
//                  (vp + 1)·pp - 2 chunks, fits with a steady phase after it.
// simulate() checks that the window is steady and, if not, starts it twice as late; a step with no
// more micro-steps than the longer run is replayed whole. The lengths are powers of two times pp
// where the batch is, so a sweep's exact points and plans share replays (ReplayCache).
constexpr double kSteadyTolerance = 1e-3;

std::optional<SteadyStatePlan> steady_state_plan(const Scenario& sc) {
  const auto& t = sc.training;
  const int pp = t.parallelism.pp, vp = t.parallelism.vp;
  SteadyStatePlan plan;
  if (pp == 1)
    plan = {2, 2};
  else if (vp == 1)
    plan = {pp, pp};
  else
    plan = {2 * pp, pp};
  if (t.micro_steps() <= plan.m1 + plan.unit) return std::nullopt;
  return plan;
}

namespace {

Scenario with_micro_steps(const Scenario& sc, int m) {
  Scenario s = sc;
  s.training.global_batch = m * s.training.micro_batch * s.training.parallelism.dp;
  return s;
}

}  // namespace

struct ReplayCache::Entry {
  ReplayResult replay;             // without per-op records
  std::vector<std::string> notes;  // the graph's
  int ranks = 1;
};

struct ReplayCache::Impl {
  struct Slot {
    std::shared_ptr<const Entry> entry;  // null while being made
    bool failed = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, Slot> map;
  std::deque<std::string> order;  // insertion order, for eviction
  std::size_t max_entries;
  std::size_t hits = 0, misses = 0;
};

ReplayCache::ReplayCache(std::size_t max_entries) : impl_(std::make_unique<Impl>()) {
  impl_->max_entries = std::max<std::size_t>(1, max_entries);
}
ReplayCache::~ReplayCache() = default;
std::size_t ReplayCache::hits() const {
  std::lock_guard lock(impl_->mu);
  return impl_->hits;
}
std::size_t ReplayCache::misses() const {
  std::lock_guard lock(impl_->mu);
  return impl_->misses;
}

std::shared_ptr<const ReplayCache::Entry> ReplayCache::get(const std::string& key, const std::function<Entry()>& make) {
  Impl& m = *impl_;
  {
    std::unique_lock lock(m.mu);
    for (;;) {
      auto it = m.map.find(key);
      if (it == m.map.end()) break;
      if (it->second.entry) {
        ++m.hits;
        return it->second.entry;
      }
      if (it->second.failed) {
        m.map.erase(it);
        break;
      }
      m.cv.wait(lock);  // another thread is making it
    }
    ++m.misses;
    m.map[key] = Impl::Slot{};
  }
  std::shared_ptr<const Entry> made;
  try {
    made = std::make_shared<const Entry>(make());
  } catch (...) {
    std::lock_guard lock(m.mu);
    m.map[key].failed = true;
    m.cv.notify_all();
    throw;
  }
  std::lock_guard lock(m.mu);
  m.map[key].entry = made;
  m.order.push_back(key);
  while (m.order.size() > m.max_entries) {
    m.map.erase(m.order.front());
    m.order.pop_front();
  }
  m.cv.notify_all();
  return made;
}

RunResult simulate(const Scenario& scenario, const SimulateOptions& options) {
  RunResult out;
  out.scenario = scenario;
  auto plan = options.exact ? std::nullopt : steady_state_plan(scenario);
  const int m = scenario.training.micro_steps();
  // The replay at a length: its graph and records when they are kept, else from the cache.
  auto summary_of = [&](const Scenario& s, OpGraph* keep_graph, ReplayResult* keep_replay) {
    auto make = [&s, keep_graph, keep_replay] {
      OpGraph g = build_training_graph(s.model, s.training, s.system.spec);
      ReplayCache::Entry e;
      ReplayOptions ro;
      ro.rank_busy = true;
      e.replay = replay(g, s, ro);
      e.notes = g.notes;
      e.ranks = g.ranks;
      if (keep_replay) *keep_replay = e.replay;
      if (keep_graph) *keep_graph = std::move(g);
      decltype(ReplayResult::ops)().swap(e.replay.ops);  // (= {} would keep the capacity)
      return e;
    };
    if (options.cache && !keep_graph) return options.cache->get(scenario_to_json(s).dump(), make);
    return std::shared_ptr<const ReplayCache::Entry>(std::make_shared<const ReplayCache::Entry>(make()));
  };
  std::shared_ptr<const ReplayCache::Entry> ra, rb;
  int lengthened = 0;
  while (plan) {
    if (m <= plan->m1 + plan->unit) {
      plan.reset();  // the steady state starts too late to save anything: replay them all
      break;
    }
    ra = summary_of(with_micro_steps(scenario, plan->m1), nullptr, nullptr);
    const Scenario b = with_micro_steps(scenario, plan->m1 + plan->unit);
    rb = options.keep_detail ? summary_of(b, &out.graph, &out.replay) : summary_of(b, nullptr, nullptr);
    // Steady when the extra round adds no more activity to any rank than it adds to the step (within
    // kSteadyTolerance, which the shifted warm-up and cool-down edges use up by about 1e-4): a round
    // that adds more is still consuming slack left by the warm-up (a heavier stage catching up), and
    // the period grows to that rank's activity once the slack is gone. Then the window starts twice
    // as late. The period extrapolated is therefore within the tolerance of the final one.
    const double dt = rb->replay.step_time_s - ra->replay.step_time_s;
    bool steady = dt > 0;
    for (std::size_t r = 0; steady && r < rb->replay.rank_busy_s.size(); ++r)
      steady = rb->replay.rank_busy_s[r] - ra->replay.rank_busy_s[r] <= dt * (1 + kSteadyTolerance);
    if (steady) break;
    plan->m1 *= 2;
    ++lengthened;
  }
  if (!plan) {
    if (options.keep_detail || !options.cache) {
      out.graph = build_training_graph(scenario.model, scenario.training, scenario.system.spec);
      out.replay = replay(out.graph, out.scenario);
      out.report = make_report(out.scenario, out.graph, out.replay);
      if (!options.keep_detail) {
        out.graph = OpGraph{};
        decltype(ReplayResult::ops)().swap(out.replay.ops);  // (= {} would keep the capacity)
      }
      return out;
    }
    // Every micro-step replayed, through the cache: another point's plan may have replayed this
    // very length already.
    const auto e = summary_of(scenario, nullptr, nullptr);
    out.replay = e->replay;
    out.replay.rank_busy_s.clear();
    out.graph.notes = e->notes;
    out.graph.ranks = e->ranks;
    out.graph.model_flops_per_step = model_flops_per_step(scenario.model, scenario.training);
    out.graph.tokens_per_step = static_cast<double>(scenario.training.global_batch) * scenario.training.seq_len;
    out.report = make_report(out.scenario, out.graph, out.replay);
    return out;
  }
  if (!options.keep_detail) {
    out.replay = rb->replay;
    out.graph.notes = rb->notes;
    out.graph.ranks = rb->ranks;
  }
  out.replay.rank_busy_s.clear();
  // Extrapolate the step and each part of the breakdown linearly in the micro-steps.
  const double k = static_cast<double>(m - plan->m1) / plan->unit;
  auto extend = [k](double va, double vb) { return va + k * (vb - va); };
  ReplayResult& r = out.replay;
  const ReplayResult& first = ra->replay;
  r.step_time_s = extend(first.step_time_s, rb->replay.step_time_s);
  Breakdown& x = r.breakdown;
  const Breakdown& y = first.breakdown;
  x.compute_s = extend(y.compute_s, x.compute_s);
  x.recompute_s = extend(y.recompute_s, x.recompute_s);
  x.exposed_communication_s = extend(y.exposed_communication_s, x.exposed_communication_s);
  x.exposed_offload_s = extend(y.exposed_offload_s, x.exposed_offload_s);
  x.launch_overhead_s = extend(y.launch_overhead_s, x.launch_overhead_s);
  x.pipeline_bubble_s = extend(y.pipeline_bubble_s, x.pipeline_bubble_s);
  x.idle_s = extend(y.idle_s, x.idle_s);
  // The memory peak of the steady state does not grow with more micro-steps.
  out.graph.model_flops_per_step = model_flops_per_step(scenario.model, scenario.training);
  out.graph.tokens_per_step = static_cast<double>(scenario.training.global_batch) * scenario.training.seq_len;
  out.graph.notes.push_back(fmt::format(
      "{} micro-steps: simulated {} and {}, the other {} added at the steady-state period of {:.6g} s per {} "
      "micro-steps{} (the trace shows the {}-micro-step run; --exact replays them all)",
      m, plan->m1, plan->m1 + plan->unit, m - plan->m1 - plan->unit,
      (r.step_time_s - first.step_time_s) / k, plan->unit,
      lengthened > 0 ? fmt::format(", reached after {} micro-steps", plan->m1) : std::string(),
      plan->m1 + plan->unit));
  out.report = make_report(out.scenario, out.graph, out.replay);
  return out;
}

json make_report(const Scenario& sc, const OpGraph& g, const ReplayResult& r) {
  const auto& t = sc.training;
  const double step = r.step_time_s;
  const double gpus = sc.system.gpus;
  const double tokens = g.tokens_per_step;
  const double model_flops = g.model_flops_per_step;
  const double peak = hw::peak_flops_per_s(sc.system.spec, t.precision);
  const double model_tflops = step > 0 ? model_flops / step / gpus / 1e12 : 0;
  // What the framework can allocate: the device total less what the driver, the CUDA context,
  // cuBLAS workspaces and NCCL buffers hold (preset memory.reserved). peak_memory_bytes is
  // the framework's own high-water mark, comparable to torch max_memory_allocated or JAX
  // peak_bytes_in_use.
  const double capacity = sc.system.spec.gpu.hbm_capacity_bytes - sc.system.spec.memory.reserved_bytes;
  const double host_capacity_per_gpu = sc.system.spec.host.memory_capacity_bytes / sc.system.spec.host.gpus_per_host;

  std::vector<std::string> warnings = g.notes;
  if (sc.system.spec.calibration)
    for (const auto& w : sc.system.spec.calibration->warnings) warnings.push_back("calibration: " + w);
  if (!sc.system.calibration)
    warnings.push_back(
        "uncalibrated: GEMMs at the preset's best-shape efficiency for every shape (set system.calibration)");
  if (step > 0 && r.breakdown.idle_s > 0.01 * step)
    warnings.push_back(fmt::format("{:.1f}% of the step the GPU waits with nothing running (dependencies)",
                                   100.0 * r.breakdown.idle_s / step));
  if (t.nvls && !sc.system.spec.scale_up.nvls)
    warnings.push_back(fmt::format("training.nvls is on but {} has no NVLink SHARP; collectives use ring/tree",
                                   sc.system.spec.name));
  const bool host_fits = r.memory.peak_host_bytes <= host_capacity_per_gpu;
  if (!host_fits)
    warnings.push_back(fmt::format("pinned host memory {:.1f} GB per GPU exceeds the host's {:.1f} GB per GPU",
                                   r.memory.peak_host_bytes / 1e9, host_capacity_per_gpu / 1e9));
  const bool fits = r.memory.peak_hbm_bytes <= capacity && host_fits;
  if (r.memory.peak_hbm_bytes > capacity)
    warnings.push_back(fmt::format("does not fit: peak {:.1f} GB of HBM against {:.1f} GB", r.memory.peak_hbm_bytes / 1e9,
                                   capacity / 1e9));

  json mem = json::object();
  for (int c = 0; c < kMemCategoryCount; ++c)
    mem[to_string(static_cast<MemCategory>(c))] = std::llround(r.memory.at_peak[c]);

  const auto& b = r.breakdown;
  json report = {
      {"racksim_version", version()},
      {"scenario", scenario_to_json(sc)},
      {"step_time_s", step},
      {"tokens_per_s_per_gpu", step > 0 ? tokens / step / gpus : 0},
      {"model_tflops_per_gpu", model_tflops},
      {"mfu", model_tflops * 1e12 / peak},
      {"peak_memory_bytes", std::llround(r.memory.peak_hbm_bytes)},
      {"memory_capacity_bytes", std::llround(capacity)},
      {"fits", fits},
      {"memory_breakdown_bytes", mem},
      {"host_memory_bytes", std::llround(r.memory.peak_host_bytes)},
      {"breakdown_s",
       {{"compute", b.compute_s},
        {"recompute", b.recompute_s},
        {"exposed_communication", b.exposed_communication_s},
        {"exposed_offload", b.exposed_offload_s},
        {"launch_overhead", b.launch_overhead_s},
        {"pipeline_bubble", b.pipeline_bubble_s},
        {"idle", b.idle_s}}},
      {"warnings", warnings}};
  return report;
}

json make_trace(const Scenario& sc, const OpGraph& g, const ReplayResult& r) {
  json events = json::array();
  // One thread per stream, then the host launch thread.
  const char* threads[] = {"compute", "communication", "H2D", "D2H", "parameter gathers", "gradient reductions",
                           "host launch"};
  const int host_tid = kStreamCount;
  for (int pid = 0; pid < g.ranks; ++pid) {
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
                      {"args", {{"name", g.ranks > 1 ? fmt::format("pipeline stage {} ({} x {})", pid, sc.system.gpus,
                                                                   sc.system.spec.name)
                                                     : fmt::format("rank role 0 ({} x {})", sc.system.gpus,
                                                                   sc.system.spec.name)}}}});
    for (int tid = 0; tid <= kStreamCount; ++tid)
      events.push_back(
          {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", threads[tid]}}}});
  }
  auto us = [](double s) { return s * 1e6; };
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const OpRecord& rec = r.ops[i];
    const int pid = op.rank;
    json args = {{"phase", to_string(op.phase)}, {"bound_by", std::string(rec.bound_by)}};
    if (op.kind == OpKind::kernel) {
      args["flops"] = op.flops;
      args["hbm_bytes"] = op.hbm_bytes;
    } else if (op.kind == OpKind::collective) {
      args["collective"] = to_string(op.coll);
      args["group"] = to_string(op.group);
      args["bytes"] = op.coll_bytes;
      args["algorithm"] = std::string(rec.algorithm);
    } else {
      args["bytes"] = op.copy_bytes;
    }
    const std::string name = g.op_name(static_cast<OpId>(i));
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", static_cast<int>(op.stream)},
                      {"name", name},
                      {"ts", us(rec.start_s)},
                      {"dur", us(rec.end_s - rec.start_s)},
                      {"args", args}});
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", host_tid},
                      {"name", "launch " + name},
                      {"ts", us(rec.launch_start_s)},
                      {"dur", us(rec.launch_end_s - rec.launch_start_s)}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace racksim::sim
