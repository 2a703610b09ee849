// nccl-tests output as it comes off a cluster (`racksim calibrate fit` and `racksim calibrate
// read`): the stdout log (with `-C 1` the time column is "cputime"), a Slurm *.out file (several
// tests one after another, lines prefixed "N: " by `srun --label`, other job output around
// them), and the JSON file `-J FILE.json` writes. `racksim collective -b -e -f` prints the same
// table shape, so a prediction reads back like a measurement.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "hardware_models/calibration.h"

namespace racksim::hw {

// Every test in the text (a log, a .out file) or JSON document (-J), in file order. A test's op
// comes from its "Collective test starting" line (or the JSON's program name), else from the
// file name; its GPU count from the "Rank" lines, nThread x nGpus, or the JSON's devices. Empty
// when the text holds no nccl-tests table; throws input::InputError for a malformed one.
std::vector<NcclTestsLog> parse_nccl_tests_output(const std::string& text, const std::string& file_label);

// Whether a parsed JSON document is nccl-tests' -J output (results + config, no racksim schema).
bool is_nccl_tests_json(const nlohmann::json& j);

// A test as JSON: {"op", "gpus", "time_column", "format", "rows": [{"size", "time_us", "algbw_GBps", "busbw_GBps"}]}.
nlohmann::json nccl_tests_json(const NcclTestsLog& log);

}  // namespace racksim::hw
