// The results of one simulated step as the JSON report of DESIGN.md ("run --json"), and the
// Chrome trace-event file (--trace) that Perfetto opens.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "sim/engine/job.h"
#include "sim/engine/replay.h"
#include "workloads/op_graph.h"

namespace racksim::sim {

struct RunResult {
  Job job;
  workloads::OpGraph graph;  // the rank role simulated (empty when SimulateOptions::keep_detail is off)
  ReplayResult replay;       // its per-op records too, when keep_detail is on
  nlohmann::json report;
};

// What a report says about the simulated step besides the job and its replay. The run layer fills it
// from the workload: a described model's scenario, or an importer's description of its program.
struct StepInfo {
  nlohmann::json scenario;          // the report's `scenario` (a scenario file's reruns as it is)
  double tokens_per_step = 0;       // of the whole job
  double model_flops_per_step = 0;  // 6·N·tokens plus attention, no recompute (DESIGN.md)
  std::vector<std::string> notes;   // the builder's or importer's, then the run layer's: the first warnings
  std::string section;              // a section only this kind of workload has (an XLA module's "hlo"), or ""
  nlohmann::json section_json;
  std::string file;                 // named by an error about the figures ("<scenario>" when empty)
};

// The `run --json` report (DESIGN.md) of a replayed step.
nlohmann::json make_report(const Job& job, const ReplayResult& r, const StepInfo& step);

// Chrome trace-event JSON: one process per simulated rank, one thread per stream plus the
// host launch thread, one complete event per op with FLOPs, bytes and its bound in args.
// Also: an "HBM in use (GB)" counter track per rank, stacked by memory category (and pinned host
// memory when the step offloads), flow arrows for cross-stream and cross-rank dependencies
// (pipeline sends), and categories ("kernel,forward", "collective,backward", "launch", ...).
nlohmann::json make_trace(const Job& job, const workloads::OpGraph& g, const ReplayResult& r);
// The same events one at a time, in the trace's order (what make_trace collects and write_trace_file streams).
void for_each_trace_event(const Job& job, const workloads::OpGraph& g, const ReplayResult& r,
                          const std::function<void(const nlohmann::json&)>& emit);
// Writes the trace as it is built, in bounded memory: the text of make_trace(...).dump() + "\n"; a path ending in .gz
// is gzip-compressed (Perfetto opens both). Throws InputError naming the path; a failed write leaves no file.
void write_trace_file(const std::string& path, const Job& job, const workloads::OpGraph& g, const ReplayResult& r);

std::string version();

}  // namespace racksim::sim
