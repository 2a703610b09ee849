#include "sim/report/report.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

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

namespace {

// Micro-steps of gradient accumulation repeat the same work: once the pipeline has filled, every
// further micro-step (every pp of them with pipeline stages) adds the same time. A step with many
// micro-steps is therefore simulated at two lengths, m1 and m1 + unit, and the remaining
// micro-steps are added at the measured period. The last micro-step's gradient synchronisation
// and the optimizer are in both runs, so the difference is the steady state alone.
struct SteadyState {
  int m1 = 0, unit = 1;
};
std::optional<SteadyState> steady_state_plan(const Scenario& sc) {
  const auto& t = sc.training;
  const int pp = t.parallelism.pp;
  const int unit = pp;  // interleaved schedules need multiples of pp; 1F1B repeats every micro-step
  // Past the warm-up of the schedule (pp - 1 forwards for 1F1B, about (vp + 1)·pp chunks
  // interleaved) every rank is in its steady state.
  const int m1 = std::max(8, (t.parallelism.vp + 1) * pp);
  // Only where it saves most of the work; shorter steps are replayed whole.
  if (t.micro_steps() < 32 || t.micro_steps() <= 2 * (m1 + unit)) return std::nullopt;
  return SteadyState{m1, unit};
}

Scenario with_micro_steps(const Scenario& sc, int m) {
  Scenario s = sc;
  s.training.global_batch = m * s.training.micro_batch * s.training.parallelism.dp;
  return s;
}

}  // namespace

RunResult simulate(const Scenario& scenario) {
  RunResult out;
  out.scenario = scenario;
  const auto plan = steady_state_plan(scenario);
  if (!plan) {
    out.graph = build_training_graph(scenario.model, scenario.training, scenario.system.spec);
    out.replay = replay(out.graph, out.scenario);
    out.report = make_report(out.scenario, out.graph, out.replay);
    return out;
  }
  const int m = scenario.training.micro_steps();
  const Scenario a = with_micro_steps(scenario, plan->m1);
  const Scenario b = with_micro_steps(scenario, plan->m1 + plan->unit);
  const OpGraph ga = build_training_graph(a.model, a.training, a.system.spec);
  const ReplayResult ra = replay(ga, a);
  out.graph = build_training_graph(b.model, b.training, b.system.spec);
  out.replay = replay(out.graph, b);
  // Extrapolate the step and each part of the breakdown linearly in the micro-steps.
  const double k = static_cast<double>(m - plan->m1) / plan->unit;
  auto extend = [k](double va, double vb) { return va + k * (vb - va); };
  ReplayResult& r = out.replay;
  r.step_time_s = extend(ra.step_time_s, r.step_time_s);
  Breakdown& x = r.breakdown;
  const Breakdown& y = ra.breakdown;
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
      "(the trace shows the {}-micro-step run)",
      m, plan->m1, plan->m1 + plan->unit, m - plan->m1 - plan->unit,
      (r.step_time_s - ra.step_time_s) / (k * plan->unit), plan->unit == 1 ? "micro-step" : "pipeline round",
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
    json args = {{"phase", to_string(op.phase)}, {"bound_by", rec.bound_by}};
    if (op.kind == OpKind::kernel) {
      args["flops"] = op.flops;
      args["hbm_bytes"] = op.hbm_bytes;
    } else if (op.kind == OpKind::collective) {
      args["collective"] = to_string(op.coll);
      args["group"] = to_string(op.group);
      args["bytes"] = op.coll_bytes;
      args["algorithm"] = rec.algorithm;
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
