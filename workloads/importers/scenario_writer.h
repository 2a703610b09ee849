// The importers' output: scenario YAML lines "key: value   # source", the source comment aligned.
#pragma once

#include <sstream>
#include <string>

namespace racksim::workloads::importers {

struct ScenarioWriter {
  std::ostringstream o;
  void line(int indent, const std::string& key, const std::string& value, const std::string& source = "") {
    std::string l = std::string(indent, ' ') + key + ":" + (value.empty() ? "" : " " + value);
    if (!source.empty()) l += std::string(l.size() < 34 ? 34 - l.size() : 1, ' ') + "# " + source;
    o << l << "\n";
  }
};

}  // namespace racksim::workloads::importers
