// Loading system presets (hardware_models/presets/NAME.yaml) into SystemSpec, with a
// scenario's `system.overrides` grafted on before validation.
#pragma once

#include <string>
#include <vector>

#include "hardware_models/system_spec.h"
#include "input/yaml_reader.h"

namespace racksim::hw {

std::string presets_dir();
std::vector<std::string> list_system_presets();  // sorted names

// Parses a preset document (strict: unknown keys, missing units and missing sources are
// errors recorded in the node's Diagnostics). The caller throws.
SystemSpec parse_system_preset(const input::Node& root);

// Divides every host figure of spec.launch but eager_kernel_gap by spec.host.framework_speed (once the preset, its
// overrides and a calibration have set them), and says so in each figure's source. A speed of 1 changes nothing.
void apply_framework_speed(SystemSpec& spec);

// Whether a system preset or calibration `name` is a file path (contains '/' or ends in .yaml) rather than the name of a
// shipped one: the rule load_system_preset and load_calibration read it by, for callers that must tell which.
inline bool names_preset_file(const std::string& name) { return name.find('/') != std::string::npos || name.ends_with(".yaml"); }

// Loads preset `name`, grafting `overrides` (a mapping of preset field paths, nested or dotted,
// or a unique leaf name such as `nvls`) from `overrides_node` when given. Errors go to ctx.
// Returns false if the preset cannot be found or read (an error is recorded).
bool load_system_preset(const std::string& name, const input::Node* where_named,
                        const std::optional<input::Node>& overrides_node,
                        const std::shared_ptr<input::LoadContext>& ctx, SystemSpec& out);

// One row per field of a preset for `hw show`: dotted path, the value as written, its source.
struct PresetField {
  std::string path;
  std::string value;
  std::string source;
};
std::vector<PresetField> preset_fields(const std::string& name);

double peak_flops_per_s(const SystemSpec& sys, sim::Dtype d);  // throws std::invalid_argument if unsupported

}  // namespace racksim::hw
