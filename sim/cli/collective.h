// `racksim collective`: one collective's predicted time (--bytes), or an nccl-tests-shaped sweep
// of sizes (-b MIN -e MAX -f FACTOR | -i STEP) whose table `racksim calibrate fit` reads back.
// Shared by the CLI and the Python module (racksim.collective).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace racksim::cli {

// The object `racksim collective --json` prints for one size:
// {"op", "gpus", "bytes", "algorithm", "protocol", "time_s", "algbw_GBps", "busbw_GBps"}.
// Throws input::InputError for an unknown system/op/algorithm or a size without a unit.
// `stride`: the group's members that many ranks apart in the job (packed into NVLink domains in rank order): a
// data-parallel group of a tp-8 job is --stride 8, one rank per 8-GPU node.
nlohmann::json collective_json(const std::string& system, int gpus, const std::string& op, const std::string& bytes,
                               const std::string& algo, int stride = 1);

struct CollectiveSweep {
  std::string system;
  int gpus = 8;
  int stride = 1;                // the members' distance in the job's ranks (see collective_json)
  std::string op = "all_reduce";
  std::string algo = "auto";
  std::string min_bytes = "8";   // -b (nccl-tests' default 32M; sizes take units: 8, 1K, 8G)
  std::string max_bytes = "8";   // -e
  std::optional<double> factor;  // -f: multiply the size by this (> 1; not given: 2, or -i) ...
  std::string step_bytes;        // -i: ... or add this many bytes
};

// One row per size, as nccl-tests sizes them (float elements; all_gather, reduce_scatter and
// all_to_all round to a multiple of gpus elements): {"size", "count", "type", "redop", "root",
// "time_us", "algbw_GBps", "busbw_GBps", "algorithm", "protocol"}. Throws input::InputError.
nlohmann::json collective_sweep_json(const CollectiveSweep& s);

// The rows as nccl-tests prints them (header, "# Using devices" lines naming the preset, the
// out-of-place and in-place columns, the footer): `racksim calibrate fit` and any script that
// parses nccl-tests output read it. The first line says it is a prediction, not a measurement.
std::string nccl_tests_table(const CollectiveSweep& s, const nlohmann::json& rows);

}  // namespace racksim::cli
