// The run layer: a Job plus a workload source, simulated. A described model (a scenario) goes through
// the graph builder, at two lengths of its steady state when that saves replaying every micro-step;
// an imported program (an XLA module, workloads/hlo/hlo_import.h) brings its own graph. Both reach the
// engine as an OpGraph and a Job (sim/engine/replay.h), and the report as the job, the replay and a
// StepInfo (sim/report/report.h). `run`, `compare`, `sweep`, `validate` and `replay` call it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/report.h"
#include "sim/scenario/limits.h"
#include "sim/scenario/scenario.h"
#include "workloads/imported_workload.h"

namespace racksim::sim {

// Replays shared between simulations: a step extrapolated from its steady state needs the replays at
// two fixed lengths, which do not depend on the global batch, so the points of a sweep that differ
// only there share them. Thread-safe; a simulation that finds its replay being made by another thread
// waits for it. Results do not depend on whether a cache is used.
class ReplayCache {
 public:
  explicit ReplayCache(std::size_t max_entries = 4096);
  ~ReplayCache();
  ReplayCache(const ReplayCache&) = delete;
  ReplayCache& operator=(const ReplayCache&) = delete;
  struct Entry;
  // The entry for `key`, made by `make` unless it exists or is being made.
  std::shared_ptr<const Entry> get(const std::string& key, const std::function<Entry()>& make);
  std::size_t hits() const;
  std::size_t misses() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SimulateOptions {
  // Replay every micro-step: no steady-state extrapolation (racksim run/compare/sweep/validate --exact).
  bool exact = false;
  // Keep the replayed graph and its per-op records in the result (for a trace or an HTML report).
  // Off, a steady-state extrapolation may take its replays from `cache`.
  bool keep_detail = true;
  ReplayCache* cache = nullptr;
  // Echo the scenario in the report (its "scenario" key; null when off): a sweep's rows leave it out, and
  // making it costs about a third of a sweep point's scenario_to_json.
  bool report_scenario = true;
};

// A described model: builds the graph, replays it and assembles the report. A step with more
// micro-steps than its steady-state plan replays (steady_state_plan) is replayed at the plan's two
// lengths and extrapolated, unless options.exact. A step longer than the simulated clock reaches
// (2^63 ps, about 106 days) is an input::InputError naming the scenario file; so is an --exact replay
// past the bound on replayed layer-steps (sim/scenario/limits.h).
RunResult simulate(const Scenario& scenario, const SimulateOptions& options = {});

// An imported workload on a job (sim::load_job): replayed as it is (it has no micro-steps to
// extrapolate). A step past the simulated clock is an input::InputError naming the workload's file.
RunResult simulate(const Job& job, workloads::ImportedWorkload workload);

// The steady-state plan of a step (sim/scenario/limits.h): replay m1 and m1 + unit micro-steps and
// add the other micro_steps - m1 at the measured period. Empty when every micro-step is replayed.
using SteadyStatePlan = SteadyState;
std::optional<SteadyStatePlan> steady_state_plan(const Scenario& scenario);

// `racksim replay MODULE --system PRESET [--gpus N] [--set ...]` and validate's `replay:` cases: the
// HLO importer's workload on the job those name (gpus 0: the devices the module was compiled for).
// A --set of system, system.preset or system.gpus is an error (--system and --gpus give them).
RunResult run_hlo(const std::string& path, const std::string& system, int gpus, const std::vector<std::string>& sets);

}  // namespace racksim::sim
