#include "sim/report/report.h"

#include <fmt/format.h>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "hardware_models/calibration.h"
#include "hardware_models/system_preset.h"
#include "sim/core/time.h"
#include "sim/input/diagnostics.h"
#include "sim/input/files.h"
#include "sim/scenario/limits.h"
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

// Micro-steps of gradient accumulation repeat the same work: a step with many micro-steps is
// simulated at two lengths, m1 and m1 + unit (steady_state_plan, sim/scenario/limits.h), and the
// remaining micro-steps are added at the measured period. The last micro-step's gradient
// synchronisation and the optimizer are in both runs, so the difference is the steady state alone.
// simulate() checks that the window is steady and, if not, starts it twice as late.
constexpr double kSteadyTolerance = 1e-3;

std::optional<SteadyStatePlan> steady_state_plan(const Scenario& sc) { return steady_state_plan(sc.training); }

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

namespace {

RunResult simulate_step(const Scenario& scenario, const SimulateOptions& options) {
  // The scenario's bound (check_replay_size) counts the plan's two lengths; --exact replays every
  // micro-step, so it is held to the same bound on those.
  const int64_t exact_work = static_cast<int64_t>(scenario.model.layers) * scenario.training.micro_steps();
  if (options.exact && steady_state_plan(scenario) && exact_work > kMaxReplayedLayerSteps) {
    input::Diagnostic d;
    d.where.file = scenario.file.empty() ? "<scenario>" : scenario.file;
    d.message = fmt::format("--exact: {} layers x {} micro-steps = {} layer-steps, more than {} (docs/decisions.md, "
                            "\"Input limits\"); without --exact the step is extrapolated from its steady state",
                            scenario.model.layers, scenario.training.micro_steps(), exact_work, kMaxReplayedLayerSteps);
    throw input::InputError(std::vector<input::Diagnostic>{d});
  }
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

}  // namespace

[[noreturn]] void step_too_long(const std::string& file, const std::exception& e) {
  input::Diagnostic d;
  d.where.file = file.empty() ? "<scenario>" : file;
  d.message = fmt::format("the simulated step would last longer than racksim's clock reaches (2^63 ps, about 106 "
                          "days): the sizes or rates of this input are beyond what it simulates ({})",
                          e.what());
  throw input::InputError(std::vector<input::Diagnostic>{d});
}

RunResult simulate(const Scenario& scenario, const SimulateOptions& options) {
  try {
    return simulate_step(scenario, options);
  } catch (const TimeOverflow& e) {
    step_too_long(scenario.file, e);
  } catch (const TimeOutOfRange& e) {
    step_too_long(scenario.file, e);
  }
}

ReplayResult replay_checked(const OpGraph& g, const Scenario& sc, const std::string& label) {
  try {
    return replay(g, sc);
  } catch (const TimeOverflow& e) {
    step_too_long(label, e);
  } catch (const TimeOutOfRange& e) {
    step_too_long(label, e);
  }
}

json make_report(const Scenario& sc, const OpGraph& g, const ReplayResult& r) {
  // The inputs are bounded where they are read (docs/decisions.md, "Input limits"); a figure
  // beyond what the report can print exactly (llround of 2^63 bytes is negative) is still an
  // error naming the input, never a report.
  auto in_range = [&](double v, double max, const char* what) {
    if (std::isfinite(v) && v >= 0 && v <= max) return;
    input::Diagnostic d;
    d.where.file = sc.file.empty() ? "<scenario>" : sc.file;
    d.message = fmt::format("the {} would be {:.6g}, beyond what racksim reports ({:.3g}): the sizes of this input "
                            "are out of range",
                            what, v, max);
    throw input::InputError(std::vector<input::Diagnostic>{d});
  };
  constexpr double kMaxBytes = 9.0e18;  // below 2^63
  in_range(r.memory.peak_hbm_bytes, kMaxBytes, "peak memory per GPU in bytes");
  in_range(r.memory.peak_host_bytes, kMaxBytes, "pinned host memory per GPU in bytes");
  for (int c = 0; c < kMemCategoryCount; ++c) in_range(r.memory.at_peak[c], kMaxBytes, "memory of one category in bytes");
  in_range(r.step_time_s, 1e7, "step time in seconds");
  in_range(g.tokens_per_step, 1e18, "tokens per step");
  in_range(g.model_flops_per_step, 1e30, "model FLOPs per step");
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
  auto thread_name = [](int tid) {
    return tid < kStreamCount ? to_string(static_cast<StreamKind>(tid)) : std::string("host launch");
  };
  const int host_tid = kStreamCount;
  for (int pid = 0; pid < g.ranks; ++pid) {
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
                      {"args", {{"name", g.ranks > 1 ? fmt::format("pipeline stage {} ({} x {})", pid, sc.system.gpus,
                                                                   sc.system.spec.name)
                                                     : fmt::format("rank role 0 ({} x {})", sc.system.gpus,
                                                                   sc.system.spec.name)}}}});
    for (int tid = 0; tid <= kStreamCount; ++tid)
      events.push_back(
          {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", thread_name(tid)}}}});
  }
  auto us = [](double s) { return s * 1e6; };
  auto kind_name = [](OpKind k) {
    return k == OpKind::kernel ? "kernel" : k == OpKind::collective ? "collective" : "copy";
  };
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
    // Categories (Perfetto's "cat" filter): what the op is and which part of the step it belongs to.
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", static_cast<int>(op.stream)},
                      {"name", name},
                      {"cat", fmt::format("{},{}", kind_name(op.kind), to_string(op.phase))},
                      {"ts", us(rec.start_s)},
                      {"dur", us(rec.end_s - rec.start_s)},
                      {"args", args}});
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", host_tid},
                      {"name", "launch " + name},
                      {"cat", "launch"},
                      {"ts", us(rec.launch_start_s)},
                      {"dur", us(rec.launch_end_s - rec.launch_start_s)}});
  }
  // Flow arrows for the dependencies the streams alone do not show: across streams (a collective
  // waiting for the GEMM that produced its input) and across ranks (pipeline sends). The arrow
  // leaves the producer just before its end and enters the consumer at its start.
  std::uint64_t flow_id = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (OpId d : op.deps) {
      const Op& from = g.ops[d];
      if (from.stream == op.stream && from.rank == op.rank) continue;
      const OpRecord& a = r.ops[d];
      const OpRecord& b = r.ops[i];
      const bool cross_rank = from.rank != op.rank;
      const char* cat = cross_rank ? "dependency,cross-rank" : "dependency,cross-stream";
      ++flow_id;
      events.push_back({{"ph", "s"}, {"id", flow_id}, {"pid", from.rank}, {"tid", static_cast<int>(from.stream)},
                        {"ts", us(std::max(a.start_s, a.end_s - 1e-12))}, {"name", cross_rank ? "send" : "dependency"},
                        {"cat", cat}});
      events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"pid", op.rank}, {"tid", static_cast<int>(op.stream)},
                        {"ts", us(b.start_s)}, {"name", cross_rank ? "send" : "dependency"}, {"cat", cat}});
    }
  }
  // HBM in use per rank, by category (a stacked counter track), and pinned host memory when used:
  // tensors allocated when their op starts and freed when it ends, frees first at equal times,
  // as the engine's memory high-water mark counts them.
  {
    const std::vector<MemoryEvent> ev = memory_events(g, r.ops);
    const int R = std::max(1, g.ranks);
    MemoryInUse in_use(g, R);
    bool any_host = false;  // the host track starts with the first pinned tensor
    for (TensorId id : g.resident) any_host = any_host || g.tensors[id].on_host;
    auto counter = [&](int rank, double t) {
      json a = json::object();
      for (int c = 0; c < kMemCategoryCount; ++c) a[to_string(static_cast<MemCategory>(c))] = in_use.hbm(rank)[c] / 1e9;
      events.push_back({{"ph", "C"}, {"pid", rank}, {"name", "HBM in use (GB)"}, {"cat", "memory"}, {"ts", us(t)}, {"args", a}});
      if (any_host)
        events.push_back({{"ph", "C"}, {"pid", rank}, {"name", "host memory in use (GB)"}, {"cat", "memory"},
                          {"ts", us(t)}, {"args", {{"pinned", in_use.host(rank) / 1e9}}}});
    };
    for (int rank = 0; rank < R; ++rank) counter(rank, 0);
    // One sample per rank and instant, after every change at that instant.
    for (std::size_t k = 0; k < ev.size();) {
      const double t = ev[k].t_s;
      std::vector<char> touched(R, 0);
      for (; k < ev.size() && ev[k].t_s == t; ++k) {
        in_use.apply(ev[k].tensor, ev[k].alloc);
        any_host = any_host || g.tensors[ev[k].tensor].on_host;
        const int rank = g.tensors[ev[k].tensor].rank;
        if (rank < R) touched[rank] = 1;
      }
      for (int rank = 0; rank < R; ++rank)
        if (touched[rank]) counter(rank, t);
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void write_trace_file(const std::string& path, const json& trace) {
  const std::string text = trace.dump() + "\n";
  auto fail = [&](const char* what) {
    input::Diagnostic d;
    d.where.file = path;
    d.key_path = "--trace";
    d.message = what;
    throw input::InputError({d});
  };
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "wb6");
    if (!f) fail("cannot write this file");
    const int n = gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    if (gzclose(f) != Z_OK || n != static_cast<int>(text.size())) fail("write failed");
    return;
  }
  input::write_file_checked(path, text, "--trace");
}

}  // namespace racksim::sim
