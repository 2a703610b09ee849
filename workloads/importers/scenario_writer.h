// The importers' output: scenario YAML lines "key: value   # source", the source comment aligned.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "input/yaml_reader.h"

namespace racksim::workloads::importers {

// A comment's text kept on its line: a line break or other control byte in it (from a file's name, a config's value)
// is escaped, since a line break would end the comment and what follows would be read as YAML.
inline std::string comment_text(const std::string& text) { return input::escaped_text(text, false); }

struct ScenarioWriter {
  std::ostringstream o;
  void line(int indent, const std::string& key, const std::string& value, const std::string& source = "") {
    std::string l = std::string(indent, ' ') + key + ":" + (value.empty() ? "" : " " + value);
    if (!source.empty()) l += std::string(l.size() < 34 ? 34 - l.size() : 1, ' ') + "# " + comment_text(source);
    o << l << "\n";
  }
};

// A string as a double-quoted YAML scalar (a JSON string is one). A byte that is not UTF-8 (a file name's Latin-1)
// becomes U+FFFD: nlohmann's dump would throw on it.
inline std::string yaml_quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What an importer writes, made loadable whatever bytes the imported file held (a Latin-1 comment's value, a NUL in a
// name): without it such a byte, copied into a comment or a name, made the importer's own scenario fail to load.
inline std::string yaml_safe_text(const std::string& text) { return input::escaped_text(text, true); }

}  // namespace racksim::workloads::importers
