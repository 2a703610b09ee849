// Validation suites (DESIGN.md "Validation suite file"): the simulator checked against
// measurements and against reported speedups.
//
//   cases:
//     - name: H200 m1 full recompute
//       scenario: h200-m1-full.yaml          # or: replay: m1_full.hlo.gz, system: h200-sxm, gpus: 1
//       set: {training.micro_batch: 4}        # optional --set overrides (scenario and compare cases)
//       measured: {step_time_s: 0.418, peak_memory_bytes: 34.5e9, fits: true}
//       tolerance: 0.10                       # relative; or per field: {step_time_s: 0.1, peak_memory_bytes: 0.05}
//     - name: ZeRO-1 vs FSDP
//       compare: {base: a.yaml, variant: b.yaml}  # a side may be {scenario: a.yaml, set: {...}}
//       expect_speedup: [1.10, 1.15]         # variant / base tokens/s per GPU, inclusive
//
// `measured` takes any scalar field of the run report (the sweep CSV's column names, dotted for
// breakdown_s.* and memory_breakdown_bytes.*) and `fits` (compared exactly). A value is a plain
// number or a quantity with its unit ("34.5 GB", "418 ms"). Paths are relative to the suite.
//
// Outcome: every check is a row (case, field, predicted, measured, error, pass). A case that
// cannot run (its scenario is invalid, replay is not available) is one row with a message.
// Exit code: 1 if the suite file is invalid or a case could not run, else 4 if a check fell
// outside its tolerance, else 0.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace racksim::workflow {

struct ScenarioRef {
  std::string path;  // resolved against the suite file
  std::vector<sim::SetOverride> sets;
};

struct Expectation {
  std::string field;
  bool is_bool = false;
  double value = 0;       // measured number (when !is_bool)
  bool flag = false;      // measured fits (when is_bool)
  double tolerance = 0;   // relative
};

struct SuiteCase {
  enum class Kind { scenario, replay, compare };
  std::string name;
  Kind kind = Kind::scenario;
  ScenarioRef scenario;         // scenario cases
  std::string replay;           // replay cases: the HLO module, resolved
  std::string system;           // replay cases: system preset
  int gpus = 0;                 // replay cases: 0 = not given
  std::vector<std::string> replay_sets;  // replay cases: set: overrides (KEY.PATH=VALUE)
  std::vector<Expectation> measured;
  ScenarioRef base, variant;    // compare cases
  double speedup_lo = 0, speedup_hi = 0;
};

struct Suite {
  std::string file;
  std::vector<SuiteCase> cases;
};

// Strict: unknown keys, missing keys, files that do not exist, a case with both or neither of
// scenario/replay/compare, unknown measured fields are errors with file:line:col (InputError).
Suite load_suite(const std::string& path);
Suite load_suite_text(const std::string& text, const std::string& file_label);

struct CheckRow {
  std::string case_name;
  std::string field;              // "speedup" for compare cases; empty when the case could not run
  nlohmann::json predicted;       // number or bool; null when the case could not run
  nlohmann::json measured;        // number, bool, or [lo, hi] for a speedup
  std::optional<double> error;    // relative: (predicted - measured) / measured; for a speedup the
                                  // distance outside [lo, hi] relative to the nearer bound (0 inside)
  bool pass = false;
  std::string message;            // why the case could not run
  std::string note;               // a caveat on the prediction: a side that does not fit in memory
};

struct SuiteResult {
  std::vector<CheckRow> rows;     // case order, then field order as in the file
  int checks = 0, failed = 0, case_errors = 0;
};

// Runs the cases on `jobs` threads; the result does not depend on `jobs`.
// exact: replay every micro-step (no steady-state extrapolation).
SuiteResult run_suite(const Suite& suite, int jobs = 1, bool exact = false);

std::string format_table(const SuiteResult& r);  // the text `racksim validate` prints
nlohmann::json to_json(const SuiteResult& r);   // a list of row objects
int exit_code(const SuiteResult& r);             // 0, 1 or 4 as above

}  // namespace racksim::workflow
