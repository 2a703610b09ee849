#include "sim/run/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "core/time.h"
#include "input/diagnostics.h"
#include "workloads/graph_builder.h"

namespace racksim::sim {

using nlohmann::json;
using namespace racksim::workloads;

// Micro-steps of gradient accumulation repeat the same work: a step with many micro-steps is
// simulated at two lengths, m1 and m1 + unit (steady_state_plan, sim/scenario/limits.h), and the
// remaining micro-steps are added at the measured period. The last micro-step's gradient
// synchronisation and the optimizer are in both runs, so the difference is the steady state alone.
// simulate() checks that the window is steady and, if not, starts it twice as late.
constexpr double kSteadyTolerance = 1e-3;
// A rank whose host is busy for at least this share of the window's period paces its pipeline through the host
// (simulate_step).
constexpr double kHostPacedShare = 0.9;

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
  const int layers = scenario.training.graph_layers(scenario.model.layers);
  const int64_t exact_work = static_cast<int64_t>(layers) * scenario.training.micro_steps();
  if (options.exact && steady_state_plan(scenario) && exact_work > kMaxReplayedLayerSteps) {
    input::Diagnostic d;
    d.where.file = scenario.file.empty() ? "<scenario>" : scenario.file;
    d.message = fmt::format("--exact: {} layers x {} micro-steps = {} layer-steps, more than {} (docs/decisions.md, "
                            "\"Input limits\"); without --exact the step is extrapolated from its steady state",
                            layers, scenario.training.micro_steps(), exact_work, kMaxReplayedLayerSteps);
    throw input::InputError(std::vector<input::Diagnostic>{d});
  }
  RunResult out;
  out.job = job_of(scenario);
  // The step's figures are the described step's, also when a shorter one is replayed.
  StepInfo step;
  if (options.report_scenario) step.scenario = scenario_to_json(scenario);
  step.file = scenario.file;
  step.model_flops_per_step = model_flops_per_step(scenario.model, scenario.training);
  step.tokens_per_step = scenario.training.tokens_per_step();
  auto plan = options.exact ? std::nullopt : steady_state_plan(scenario);
  const int m = scenario.training.micro_steps();
  // The cache's key: the scenario's JSON at the length replayed. The lengths differ from the scenario in their
  // global batch alone (with_micro_steps), so the JSON is made once and that field set for each.
  std::optional<json> key_json;
  auto cache_key = [&](const Scenario& s) {
    if (!key_json) key_json = scenario_to_json(s);
    (*key_json)["training"]["global_batch"] = s.training.global_batch;
    return key_json->dump();
  };
  // The replay at a length: its graph and records when they are kept, else from the cache.
  auto summary_of = [&](const Scenario& s, OpGraph* keep_graph, ReplayResult* keep_replay) {
    auto make = [&s, keep_graph, keep_replay] {
      OpGraph g = build_training_graph(s.model, s.training, s.system.spec);
      ReplayCache::Entry e;
      ReplayOptions ro;
      ro.rank_busy = true;
      e.replay = replay(g, job_of(s), ro);
      e.notes = g.notes;
      e.ranks = g.ranks;
      if (keep_replay) *keep_replay = e.replay;
      if (keep_graph) *keep_graph = std::move(g);
      decltype(ReplayResult::ops)().swap(e.replay.ops);  // (= {} would keep the capacity)
      return e;
    };
    if (options.cache && !keep_graph) return options.cache->get(cache_key(s), make);
    return std::shared_ptr<const ReplayCache::Entry>(std::make_shared<const ReplayCache::Entry>(make()));
  };
  std::shared_ptr<const ReplayCache::Entry> ra, rb;
  int lengthened = 0;
  bool host_paced = false, host_paced_extrapolated = false;
  while (plan) {
    // The steady state starts too late to save anything: replay them all. A window whose two runs would replay as
    // many micro-steps as the step has is dropped for the whole step, where that is within the replay bound, once it
    // has been moved later (below), or where the window itself exceeds the bound (check_replay_size counts the whole
    // step then): cheaper, and exact. A first window within the bound is kept: a sweep's points share its runs.
    const int64_t window_work = static_cast<int64_t>(layers) * (2 * static_cast<int64_t>(plan->m1) + plan->unit);
    if (m <= plan->m1 + plan->unit ||
        (2 * plan->m1 + plan->unit >= m && exact_work <= kMaxReplayedLayerSteps &&
         (lengthened > 0 || window_work > kMaxReplayedLayerSteps))) {
      plan.reset();
      host_paced = host_paced_extrapolated;  // (a host-paced window found earlier: now replayed whole after all)
      host_paced_extrapolated = false;
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
    // The same for each rank's host (a host-bound rank, Megatron's eager host work, whose slack runs out later).
    for (std::size_t r = 0; steady && r < rb->replay.rank_busy_s.size(); ++r)
      steady = rb->replay.rank_busy_s[r] - ra->replay.rank_busy_s[r] <= dt * (1 + kSteadyTolerance) &&
               rb->replay.rank_host_busy_s[r] - ra->replay.rank_host_busy_s[r] <= dt * (1 + kSteadyTolerance);
    // And no part of the breakdown shrinks with the extra round: in a steady state each part grows by its share of
    // the period or stays (the bubble); one that shrinks was still paying the warm-up (the first round's exposed
    // parameter gathers, say) and, extrapolated, would go below its true value, even below zero.
    for (double Breakdown::*part : Breakdown::kParts)
      steady = steady && rb->replay.breakdown.*part - ra->replay.breakdown.*part >= -kSteadyTolerance * dt;
    // A pipeline stage whose host is busy for (nearly) the whole period sets the pace through its host: how its waits
    // for the GPU (the dispatchers' and NaN checks' read-backs) and the other stages' hosts settle against it shows
    // only after tens of micro-steps (the Qwen3-235B TP4 PP8 row: the same period, but from about 70 of its 256
    // micro-steps on waits move from the host to the pipeline, its bubble 0.13 -> 0.55 s), which no window of a
    // round or two sees. Such a step is replayed whole when its size allows (else extrapolated, with a note).
    double host_share = 0;
    for (std::size_t r = 0; r < rb->replay.rank_host_busy_s.size(); ++r)
      host_share = std::max(host_share, (rb->replay.rank_host_busy_s[r] - ra->replay.rank_host_busy_s[r]) / dt);
    if (dt > 0 && host_share >= kHostPacedShare && scenario.training.parallelism.pp > 1) {
      if (exact_work <= kMaxReplayedLayerSteps) {
        plan.reset();
        host_paced = true;
        break;
      }
      host_paced_extrapolated = true;
    }
    if (steady) break;
    plan->m1 *= 2;
    ++lengthened;
  }
  auto host_paced_note = [&]() -> std::string {
    return host_paced ? fmt::format("{} micro-steps all replayed: a pipeline stage's host paces the step (busy {:.0f}% or more of the "
                               "period), whose waits settle only over many micro-steps",
                               m, 100 * kHostPacedShare)
      : host_paced_extrapolated
          ? std::string("a pipeline stage's host paces the step: its waits settle only over many micro-steps, so the split "
                        "of the extrapolated step between launch overhead and pipeline bubble is uncertain (the step is too "
                        "large to replay whole)")
          : std::string();
  };
  // What the run says beyond the graph's notes (which a cache shares between scenarios with the same JSON): the host
  // pacing found above, and the training keys given for the other framework's mode.
  auto add_run_notes = [&](std::vector<std::string>& notes) {
    if (auto note = host_paced_note(); !note.empty()) notes.push_back(note);
    const bool jax = scenario.training.framework == Framework::jax;
    for (const auto& key : scenario.training.other_framework_keys)
      notes.push_back(fmt::format("training.{} is {}; in {} mode it changes nothing", key,
                                  jax ? (key == "tp_comm_overlap" ? "Transformer Engine's userbuffers (Megatron mode; XLA's "
                                                                    "collective matmul is not modelled)"
                                                                  : "Megatron's")
                                  : key == "fused_softmax" ? "Transformer Engine's softmax under JAX (JAX mode)"
                                                           : "XLA's (JAX mode)",
                                  jax ? "JAX" : "Megatron"));
  };
  if (!plan) {
    if (options.keep_detail || !options.cache) {
      out.graph = build_training_graph(scenario.model, scenario.training, scenario.system.spec);
      out.replay = replay(out.graph, out.job);
      step.notes = out.graph.notes;
      add_run_notes(step.notes);
      out.report = make_report(out.job, out.replay, step);
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
    out.replay.rank_host_busy_s.clear();
    out.graph.ranks = e->ranks;
    step.notes = e->notes;
    add_run_notes(step.notes);
    out.report = make_report(out.job, out.replay, step);
    return out;
  }
  if (!options.keep_detail) {
    out.replay = rb->replay;
    out.graph.ranks = rb->ranks;
  }
  out.replay.rank_busy_s.clear();
  out.replay.rank_host_busy_s.clear();
  // Extrapolate the step and each part of the breakdown linearly in the micro-steps. The memory peak
  // of the steady state does not grow with more micro-steps.
  const double k = static_cast<double>(m - plan->m1) / plan->unit;
  auto extend = [k](double va, double vb) { return va + k * (vb - va); };
  ReplayResult& r = out.replay;
  const ReplayResult& first = ra->replay;
  r.step_time_s = extend(first.step_time_s, rb->replay.step_time_s);
  for (double Breakdown::*part : Breakdown::kParts)  // (a part the window holds at zero stays there, not at -1e-15)
    r.breakdown.*part = std::max(0.0, extend(first.breakdown.*part, rb->replay.breakdown.*part));
  step.notes = rb->notes;
  add_run_notes(step.notes);
  step.notes.push_back(fmt::format(
      "{} micro-steps: simulated {} and {}, the other {} added at the steady-state period of {:.6g} s per {} "
      "micro-steps{} (the trace shows the {}-micro-step run; --exact replays them all)",
      m, plan->m1, plan->m1 + plan->unit, m - plan->m1 - plan->unit,
      (r.step_time_s - first.step_time_s) / k, plan->unit,
      lengthened > 0 ? fmt::format(", reached after {} micro-steps", plan->m1) : std::string(),
      plan->m1 + plan->unit));
  out.report = make_report(out.job, out.replay, step);
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

RunResult simulate(const Job& job, ImportedWorkload workload) {
  RunResult out;
  out.job = job;
  out.graph = std::move(workload.graph);
  try {
    out.replay = replay(out.graph, out.job);
  } catch (const TimeOverflow& e) {
    step_too_long(workload.file, e);
  } catch (const TimeOutOfRange& e) {
    step_too_long(workload.file, e);
  }
  // The report's scenario: the system as a scenario's, the imported program as the model, and the
  // launch settings that applied to it.
  const auto& p = job.parallelism;
  json training = workload.training;
  training["precision"] = sim::to_string(job.precision);
  training["parallelism"] = {{"tp", p.tp}, {"pp", p.pp}, {"vp", p.vp}, {"cp", p.cp}, {"ep", p.ep}, {"dp", p.dp}};
  training["cuda_graphs"] = job.cuda_graphs;
  training["nvls"] = job.nvls;
  training["tokens_per_step"] = out.graph.tokens_per_step;
  StepInfo step;
  step.scenario = {{"name", workload.name}, {"system", system_to_json(job.system)}, {"model", workload.model},
                   {"training", training}};
  step.tokens_per_step = out.graph.tokens_per_step;
  step.model_flops_per_step = out.graph.model_flops_per_step;
  step.notes = out.graph.notes;
  step.section = workload.section;
  step.section_json = std::move(workload.section_json);
  step.file = workload.file;
  out.report = make_report(out.job, out.replay, step);
  return out;
}

}  // namespace racksim::sim
