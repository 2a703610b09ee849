// The results of one simulated step as the JSON report of DESIGN.md ("run --json"), and the
// Chrome trace-event file (--trace) that Perfetto opens.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/replay.h"
#include "sim/scenario/limits.h"
#include "sim/scenario/scenario.h"
#include "workloads/op_graph.h"

namespace racksim::sim {

struct RunResult {
  Scenario scenario;
  workloads::OpGraph graph;  // the rank role simulated (empty when SimulateOptions::keep_detail is off)
  ReplayResult replay;       // its per-op records too, when keep_detail is on
  nlohmann::json report;
};

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
};

// Builds the graph, replays it and assembles the report. A step with more micro-steps than its
// steady-state plan replays (steady_state_plan) is replayed at the plan's two lengths and
// extrapolated, unless options.exact. A step longer than the simulated clock reaches (2^63 ps,
// about 106 days) is an input::InputError naming the scenario file; so is an --exact replay past
// the bound on replayed layer-steps (sim/scenario/limits.h).
RunResult simulate(const Scenario& scenario, const SimulateOptions& options = {});
// replay() with the same translation of a too-long step, naming `label` (an HLO file).
ReplayResult replay_checked(const workloads::OpGraph& g, const Scenario& sc, const std::string& label);

// The steady-state plan of a step (sim/scenario/limits.h): replay m1 and m1 + unit micro-steps and
// add the other micro_steps - m1 at the measured period. Empty when every micro-step is replayed.
using SteadyStatePlan = SteadyState;
std::optional<SteadyStatePlan> steady_state_plan(const Scenario& scenario);

nlohmann::json make_report(const Scenario& sc, const workloads::OpGraph& g, const ReplayResult& r);

// Chrome trace-event JSON: one process per simulated rank, one thread per stream plus the
// host launch thread, one complete event per op with FLOPs, bytes and its bound in args.
// Also: an "HBM in use (GB)" counter track per rank, stacked by memory category (and pinned host
// memory when the step offloads), flow arrows for cross-stream and cross-rank dependencies
// (pipeline sends), and categories ("kernel,forward", "collective,backward", "launch", ...).
nlohmann::json make_trace(const Scenario& sc, const workloads::OpGraph& g, const ReplayResult& r);
// Writes the trace; a path ending in .gz is gzip-compressed (Perfetto opens both). Throws InputError.
void write_trace_file(const std::string& path, const nlohmann::json& trace);

std::string version();

}  // namespace racksim::sim
