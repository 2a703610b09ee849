// nccl-tests output as it comes off a cluster (`racksim calibrate fit` and `racksim calibrate
// read`): the stdout log (with `-C 1` the time column is "cputime"), a Slurm *.out file (several
// tests one after another, lines prefixed "N: " by `srun --label`, other job output around
// them), and the JSON file `-J FILE.json` writes. `racksim collective -b -e -f` prints the same
// table shape, so a prediction reads back like a measurement.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace racksim::calib {

// nccl-tests output ("size count type redop root time algbw busbw #wrong ..."): one row per size,
// out-of-place columns. `op` and `gpus` come from the log (or its file name); 0/"" if unknown.
struct NcclTestsLog {
  std::string op;
  int gpus = 0;
  std::string time_column = "time";  // "cputime" for a log of `-C 1` (host time per iteration)
  std::string format = "text";       // "text" (stdout, Slurm .out) or "json" (-J)
  struct Row {
    double bytes = 0;
    double time_s = 0;
    double algbw_Bps = 0;
    double busbw_Bps = 0;
  };
  std::vector<Row> rows;
  std::string device;         // the first "#  Rank" line's device name (cudaDeviceProp.name); "" if none
  bool prediction = false;    // a table `racksim collective` printed (its first line says so), not a measurement
  bool complete = true;       // the table's closing lines ("# Out of bounds values", "# Avg bus bandwidth") seen
};
// Returns nullopt when the text holds no nccl-tests table; throws InputError when it holds a
// malformed one. The first test of the text; parse_nccl_tests_output reads them all (and JSON).
std::optional<NcclTestsLog> parse_nccl_tests_log(const std::string& text, const std::string& file_label);

// nccl-tests' bus-bandwidth factor (busbw = algbw * factor).
double nccl_busbw_factor(const std::string& op, int gpus);

// Every test in the text (a log, a .out file) or JSON document (-J), in file order. A test's op
// comes from its "Collective test starting" line (or the JSON's program name), else from the
// file name; its GPU count from the "Rank" lines, nThread x nGpus, or the JSON's devices. Empty
// when the text holds no nccl-tests table; throws input::InputError for a malformed one.
std::vector<NcclTestsLog> parse_nccl_tests_output(const std::string& text, const std::string& file_label);

// Whether a parsed JSON document is nccl-tests' -J output (results + config, no racksim schema).
bool is_nccl_tests_json(const nlohmann::json& j);

// A test as JSON: {"op", "gpus", "time_column", "format", "rows": [{"size", "time_us", "algbw_GBps", "busbw_GBps"}]}.
nlohmann::json nccl_tests_json(const NcclTestsLog& log);

}  // namespace racksim::calib
