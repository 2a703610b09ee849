// Sweeps (DESIGN.md "Sweep file"): a base scenario and a cartesian product of `--set`-style
// overrides. Points are numbered in file order with the first key slowest; a shard K/N takes
// the points i with i % N == K and keeps their global order, so the shards' rows put together
// are the whole sweep's rows. Each point is one load_scenario + simulate; an invalid point is a
// result with an error message, never an exception.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/report.h"
#include "sim/scenario/scenario.h"
#include "sim/workflow/thread_pool.h"

namespace racksim::workflow {

struct VaryKey {
  std::string path;                 // scenario key path, as for --set (training.parallelism.tp)
  std::vector<std::string> values;  // each value as YAML text: the --set VALUE and the CSV cell
};

struct SweepSpec {
  std::string file;  // the sweep file as named
  std::string base;  // the base scenario, resolved against the sweep file's folder
  std::vector<VaryKey> keys;

  std::size_t size() const;  // number of points: product of the value counts
};

// Strict loading: unknown keys, a missing base, an empty vary map, a value that is not a
// list, an empty list are errors with file:line:column; a vary key the scenario does not have
// is reported at the key's line. Throws input::InputError with every problem.
SweepSpec load_sweep(const std::string& path);
SweepSpec load_sweep_text(const std::string& text, const std::string& file_label);

// The values of point `index` (one per key, in key order) and the overrides they make.
std::vector<std::string> point_values(const SweepSpec& spec, std::size_t index);
std::vector<sim::SetOverride> point_overrides(const SweepSpec& spec, std::size_t index);

struct Shard {
  int index = 0;  // K, from 0
  int count = 1;  // N
};
Shard parse_shard(const std::string& text);  // "K/N" with 0 <= K < N; throws input::InputError
std::vector<std::size_t> shard_points(std::size_t total, Shard shard);

struct PointResult {
  std::size_t index = 0;
  std::vector<std::string> values;  // the point's values, in key order
  nlohmann::json report;            // the run report without "scenario"; null when error is set
  std::string error;                // why the point is invalid, on one line
};

struct SweepOptions {
  bool exact = false;  // replay every micro-step (no steady-state extrapolation)
};

// One point. `cache` (may be null) shares the steady-state replays between points.
PointResult run_point(const SweepSpec& spec, std::size_t index, const SweepOptions& options = {},
                      sim::ReplayCache* cache = nullptr);

// Runs `points` on `jobs` threads; results are in the order of `points` whatever `jobs` is. The points
// share their steady-state replays (sim::ReplayCache) and what they load (presets, models,
// calibrations: parsed once per process).
std::vector<PointResult> run_sweep(const SweepSpec& spec, const std::vector<std::size_t>& points, int jobs,
                                   const ProgressFn& progress = {}, const SweepOptions& options = {});

// The report's scalar fields as CSV columns (nested maps flattened with dots), in a fixed order
// so every shard writes the same header.
const std::vector<std::string>& report_columns();
// A scalar of the report by column name (dotted); nullopt when absent or not a number/bool.
std::optional<double> report_number(const nlohmann::json& report, const std::string& column);

std::vector<std::string> csv_header(const SweepSpec& spec);  // keys, report columns, fits, error
std::string csv_line(const std::vector<std::string>& cells);  // RFC 4180 quoting, '\n' ended
void write_csv(std::ostream& out, const SweepSpec& spec, const std::vector<PointResult>& results);

// An error message of one line: the lines of a multi-line message joined by "; ".
std::string one_line(const std::string& message);

}  // namespace racksim::workflow
