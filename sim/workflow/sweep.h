// Sweeps (DESIGN.md "Sweep file"): a base scenario and a cartesian product of `--set`-style
// overrides. Points are numbered in file order with the first key slowest; a shard K/N takes
// the points i with i % N == K and keeps their global order, so the shards' rows put together
// are the whole sweep's rows. Each point is one load_scenario + simulate; an invalid point is a
// result with an error message, never an exception.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "sim/workflow/thread_pool.h"

namespace racksim::workflow {

struct VaryKey {
  std::string path;                 // scenario key path, as for --set (training.parallelism.tp)
  std::vector<std::string> values;  // each value as YAML text: the --set VALUE and the CSV cell
  int line = 0, column = 0;         // where the key is in the sweep file (1-based), for what its values do
};

// How many points one run may simulate (after --shard): a million rows of CSV is a day of
// simulation on a node; more is a job array (docs/decisions.md, "Input limits").
inline constexpr std::size_t kMaxSweepPoints = 1'000'000;
// How many points an HTML report (--report) may chart: a page of 100,000 points is about 10 MB.
inline constexpr std::size_t kMaxSweepReportPoints = 100'000;
// How many points a sweep file may describe in all, however it is sharded.
inline constexpr double kMaxSweepTotalPoints = 1e12;

struct SweepSpec {
  std::string file;  // the sweep file as named
  std::string base;  // the base scenario, resolved against the sweep file's folder
  std::vector<VaryKey> keys;
  int vary_line = 0, vary_column = 0;  // where `vary:` is (for errors about the number of points)

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
// A Slurm job array's shard from the environment (SLURM_ARRAY_TASK_ID, _MIN, _COUNT; 0- or
// 1-based arrays alike: K = ID - MIN); nullopt outside a job array. Throws input::InputError for
// inconsistent values. `describe` receives "K/N from SLURM_ARRAY_TASK_ID=..." for the log.
std::optional<Shard> shard_from_slurm_env(std::string* describe = nullptr);
std::vector<std::size_t> shard_points(std::size_t total, Shard shard);
std::size_t shard_size(std::size_t total, Shard shard);  // shard_points(total, shard).size(), computed
// Throws input::InputError (at the sweep's `vary:`) when the shard has more than kMaxSweepPoints
// points, or more than kMaxSweepReportPoints with an HTML report.
void check_sweep_size(const SweepSpec& spec, Shard shard, bool html_report);

struct PointResult {
  std::size_t index = 0;
  std::vector<std::string> values;  // the point's values, in key order
  nlohmann::json report;            // the run report without "scenario"; null when error is set
  std::string error;                // why the point is invalid, on one line
  std::string calibration;          // the calibration the point ran on ("none": the preset's cited figures; "" on error)
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
// Runs the points of `shard` on `jobs` threads and hands each result to `row` on the calling
// thread, in point order, as soon as it and every point before it are done: memory does not
// grow with the sweep, and an interrupted run keeps every row it wrote. An exception from
// `row` (a failed write) stops the sweep. The points share replays as run_sweep's do.
void run_sweep_streaming(const SweepSpec& spec, Shard shard, int jobs, const ProgressFn& progress,
                         const std::function<void(PointResult&&)>& row, const SweepOptions& options = {});

// The report's scalar fields as CSV columns (nested maps flattened with dots), in a fixed order
// so every shard writes the same header.
const std::vector<std::string>& report_columns();
// A scalar of the report by column name (dotted); nullopt when absent or not a number/bool.
std::optional<double> report_number(const nlohmann::json& report, const std::string& column);

std::vector<std::string> csv_header(const SweepSpec& spec);  // point, keys, report columns, fits, error
std::string csv_line(const std::vector<std::string>& cells);  // RFC 4180 quoting, '\n' ended
void write_csv(std::ostream& out, const SweepSpec& spec, const std::vector<PointResult>& results);
std::string csv_row(const SweepSpec& spec, const PointResult& r);  // one point's line of the CSV

// Reads back CSVs that `racksim sweep` wrote for `spec` (shards of one sweep, e.g. a Slurm job
// array's): each must have csv_header(spec) and rows whose point index and values are the sweep's.
// Returns the rows of all files in point order; a point in two files is an error (InputError
// naming the file and line), a point in none is left out and counted in `*missing`.
std::vector<PointResult> read_sweep_csvs(const SweepSpec& spec, const std::vector<std::string>& paths,
                                         std::size_t* missing = nullptr);

// An error message of one line: the lines of a multi-line message joined by "; ".
std::string one_line(const std::string& message);

}  // namespace racksim::workflow
