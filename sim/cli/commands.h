// Subcommands of `racksim`. Each lives in its own commands_*.cpp and registers itself on the
// app; cli.cpp lists them (kCommands) and runs the one that was parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/cli/cli.h"

namespace racksim::cli {

// What runs when the subcommand was given on the command line; returns the exit code.
using Action = std::function<int(std::ostream& out, std::ostream& err)>;
struct Registered {
  CLI::App* sub = nullptr;
  Action action;
};

// Options shared by commands that take scenarios.
struct Common {
  std::vector<std::string> sets;
  bool json_out = false;
  bool exact = false;  // --exact: replay every micro-step, no steady-state extrapolation
};

// `compare`'s one-sided overrides, applied after the common --set: --base-set and --variant-set.
struct CompareSets {
  std::vector<std::string> base, variant;
};

// The human-readable figures of a report (step time .. time breakdown), shared by run and replay.
void print_report_figures(std::ostream& out, const nlohmann::json& report);

// An output path given empty (--trace '') had written nothing and said nothing: refused (an audit's finding).
inline CLI::Validator path_given() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty path: name a file") : std::string(); },
                        "FILE");
}
// A preset's name (hw show '' and models show '' had printed the whole list, as list does).
inline CLI::Validator name_given() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty name: name a preset") : std::string(); },
                        "NAME");
}

Registered register_run(CLI::App& app);
Registered register_compare(CLI::App& app);
Registered register_collective(CLI::App& app);
Registered register_hw(CLI::App& app);
Registered register_models(CLI::App& app);
Registered register_sweep(CLI::App& app);     // commands_sweep.cpp
Registered register_validate(CLI::App& app);  // commands_validate.cpp
Registered register_calibrate(CLI::App& app);  // commands_calibrate.cpp
Registered register_replay(CLI::App& app);     // commands_replay.cpp
// `racksim models import HF_CONFIG.json [--out MODEL.yaml] [--name NAME]` (commands_import.cpp).
struct ModelsImport {
  std::string config, out, name;
};
CLI::App* register_models_import(CLI::App& models, ModelsImport& opts);
int cmd_models_import(const ModelsImport& opts, std::ostream& out);
Registered register_import(CLI::App& app);
// `racksim calibrate read FILE... [--json]`: the nccl-tests tables racksim reads (commands_import.cpp).
struct CalibrateRead {
  std::vector<std::string> files;
  bool json = false;
};
int cmd_calibrate_read(const CalibrateRead& opts, std::ostream& out);  // racksim import megatron ... (commands_import.cpp)

}  // namespace racksim::cli
