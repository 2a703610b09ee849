// The results of one simulated step as the JSON report of DESIGN.md ("run --json"), and the
// Chrome trace-event file (--trace) that Perfetto opens.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/engine/replay.h"
#include "sim/scenario/scenario.h"
#include "workloads/op_graph.h"

namespace racksim::sim {

struct RunResult {
  Scenario scenario;
  workloads::OpGraph graph;  // the rank role simulated
  ReplayResult replay;
  nlohmann::json report;
};

// Builds the graph, replays it and assembles the report. A step longer than the simulated clock
// reaches (2^63 ps, about 106 days) is an input::InputError naming the scenario file.
RunResult simulate(const Scenario& scenario);
// replay() with the same translation of a too-long step, naming `label` (an HLO file).
ReplayResult replay_checked(const workloads::OpGraph& g, const Scenario& sc, const std::string& label);

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
