// A scenario from YAML text (as if read from `file`, with --set overrides), and the error text such a
// load throws, for tests that build small scenarios inline.
#pragma once

#include <string>
#include <vector>

#include "input/diagnostics.h"
#include "sim/scenario/scenario.h"

namespace racksim::testing {

inline sim::Scenario scenario_from_text(const std::string& yaml, const std::string& file,
                                        const std::vector<std::string>& sets = {}) {
  return sim::load_scenario_text(yaml, file, sim::parse_set_overrides(sets));
}

// The message of the InputError loading `yaml` throws; empty when it loads.
inline std::string scenario_error_text(const std::string& yaml, const std::string& file,
                                       const std::vector<std::string>& sets = {}) {
  try {
    scenario_from_text(yaml, file, sets);
  } catch (const input::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace racksim::testing
