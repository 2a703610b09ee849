// A what-if scenario: a system, a model and how it is trained (DESIGN.md "Scenario file").
// load_scenario resolves presets, grafts `--set` overrides and the preset overrides, and
// validates everything, collecting all errors before throwing one InputError.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hardware_models/system_spec.h"
#include "input/diagnostics.h"
#include "sim/engine/job.h"
#include "workloads/model_spec.h"
#include "workloads/training_config.h"

namespace racksim::sim {

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
  std::string option = "--set";  // how the user gave it, for errors: --set, --base-set, --variant-set
  input::SourceLocation where{};  // where a file gave it (a validate case's set:), for errors; empty: the option
  std::string warn_label{};       // how a warning names it where not as the option or `where` do (a sweep's axis)
  bool warn_dropped = true;       // warn of the keys it drops (a sweep says so once, at load, not at every point)
};
// KEY.PATH=VALUE arguments of `option`; throws InputError.
std::vector<SetOverride> parse_set_overrides(const std::vector<std::string>& args, const std::string& option = "--set");
// The overrides one side of a comparison sees: those of both sides (--set), then its own (`own_option`: --base-set or
// --variant-set; a later override of a key wins).
std::vector<SetOverride> side_overrides(const std::vector<std::string>& both, const std::vector<std::string>& own,
                                        const std::string& own_option);

// One side of a comparison (`side`: "base" or "variant"), loaded by `load`: its errors end by saying which side they
// are, at `file` (`compare S S --variant-set tp=3` had blamed S:8:9 without naming the side). The CLI's compare and
// the Python module's both load through it.
template <class Load>
auto load_compare_side(const std::string& file, const char* side, Load&& load) {
  try {
    return std::forward<Load>(load)();
  } catch (const input::InputError& e) {
    throw input::with_closing_note(e, file, "compare: the errors above are the " + std::string(side) + " scenario's");
  }
}

Scenario load_scenario(const std::string& path, const std::vector<SetOverride>& sets = {});
Scenario load_scenario_text(const std::string& text, const std::string& file_label,
                            const std::vector<SetOverride>& sets = {});

// The fully resolved scenario (every default made explicit, the preset expanded) as JSON, so
// a report can be rerun.
nlohmann::json scenario_to_json(const Scenario& s);
// A model's MoE fields as the report's scenario and `racksim models show --json` print them (the routing groups only
// when set, so other reports keep their bytes).
nlohmann::json moe_to_json(const workloads::MoeSpec& e);
// Its `system` part alone (also the system of an imported workload's report).
nlohmann::json system_to_json(const SystemConfig& s);

// The job a scenario describes: its system and how the step is launched.
Job job_of(const Scenario& s);

// The job of a workload that brings its own graph (an imported XLA module): the system from a preset
// and a GPU count, tp and precision from the workload, and `--set` applied as in a scenario --
// system.calibration, system.overrides.*, training.cuda_graphs and training.nvls; any other key is
// an error (with the nearest valid key), and so is a --set of the preset or the GPU count, which
// the caller gives. `label` names the command in messages (e.g. "racksim replay").
Job load_job(const std::string& preset, int gpus, int tp, sim::Dtype precision, const std::vector<SetOverride>& sets,
             const std::string& label);

}  // namespace racksim::sim
