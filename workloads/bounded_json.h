#pragma once
// JSON from user files (Hugging Face configs, XLA backend configs) parsed with a nesting bound: nlohmann's parser
// builds any depth, but printing a value (in an error message) and comparing it recurse once per level, so a
// crafted file of 100,000 nested brackets overflowed the stack. Real configs nest a few levels deep.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace racksim::workloads {

inline constexpr int kMaxJsonDepth = 64;

// What parse_bounded_json refused (empty: nothing).
struct JsonBoundError {
  std::string message;
};

// The parsed value, or the discarded value with `refused` set when the document nests deeper than kMaxJsonDepth or,
// with `unique_keys`, repeats a key in one object (nlohmann keeps the last; a YAML file would be refused). Syntax
// errors are as nlohmann::json::parse reports them (an exception with allow_exceptions, else the discarded value).
inline nlohmann::json parse_bounded_json(std::string_view text, JsonBoundError& refused, bool allow_exceptions = true,
                                         bool unique_keys = false) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys;  // per open object
  auto bound = [&](int depth, Event event, nlohmann::json& parsed) {
    if (!refused.message.empty()) return false;
    if (depth > kMaxJsonDepth) {
      refused.message = "nested more than 64 levels deep (racksim's bound for JSON input)";
      return false;
    }
    if (!unique_keys) return true;
    if (event == Event::object_start) keys.emplace_back();
    else if (event == Event::object_end && !keys.empty()) keys.pop_back();
    else if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      refused.message = "key \"" + parsed.get<std::string>() + "\" appears twice in one object";
    return refused.message.empty();
  };
  nlohmann::json j = nlohmann::json::parse(text, bound, allow_exceptions);
  if (!refused.message.empty()) return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

}  // namespace racksim::workloads
