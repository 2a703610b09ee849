// A what-if scenario: a system, a model and how it is trained (DESIGN.md "Scenario file").
// load_scenario resolves presets, grafts `--set` overrides and the preset overrides, and
// validates everything, collecting all errors before throwing one InputError.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "hardware_models/system_spec.h"
#include "workloads/model_spec.h"
#include "workloads/training_config.h"

namespace racksim::sim {

struct SystemConfig {
  std::string preset;
  int gpus = 1;
  std::optional<std::string> calibration;  // name under hardware_models/calibrated/, or a path; the one applied
  // Where `calibration` came from: "scenario" (system.calibration), "default" (none named: the
  // calibration fitted against the preset, hw::default_calibration_for), "none" (system.calibration:
  // none), "unavailable" (none named and none fitted against the preset).
  std::string calibration_source = "unavailable";
  hw::SystemSpec spec;                     // preset with overrides applied (and calibration, later)
  nlohmann::json overrides = nlohmann::json::object();  // as given, for the report
};

struct Scenario {
  std::string name;
  std::string file;  // where it was loaded from ("" when built in code)
  SystemConfig system;
  workloads::ModelSpec model;
  workloads::TrainingConfig training;
};

// One `--set KEY.PATH=VALUE` (VALUE is YAML: 8, true, [a, b], "4.8 TB/s").
struct SetOverride {
  std::string key_path;
  std::string value;
};
std::vector<SetOverride> parse_set_overrides(const std::vector<std::string>& args);  // throws InputError

Scenario load_scenario(const std::string& path, const std::vector<SetOverride>& sets = {});
Scenario load_scenario_text(const std::string& text, const std::string& file_label,
                            const std::vector<SetOverride>& sets = {});

// The fully resolved scenario (every default made explicit, the preset expanded) as JSON, so
// a report can be rerun.
nlohmann::json scenario_to_json(const Scenario& s);

}  // namespace racksim::sim
