// Helpers shared by the sweep and validation loaders.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace racksim::workflow {

// `rel` resolved against the folder of `file` (DESIGN.md: paths in a suite, a sweep or a
// scenario are relative to the file that names them); absolute paths are kept.
std::string relative_to(const std::string& file, const std::string& rel);

// A YAML value as one line of YAML text (flow style), usable as a --set VALUE.
std::string flow_yaml(const YAML::Node& n);

// Letters, digits, '_' and '-' joined by '.', as `--set` accepts.
bool is_key_path(const std::string& key);

}  // namespace racksim::workflow
