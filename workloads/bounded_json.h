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

// What parse_bounded_json refused (empty: nothing), and the byte offset of the place in the text (the bracket past the
// bound, the repeated key), found by scanning the text since nlohmann's callback does not give positions.
struct JsonBoundError {
  std::string message;
  std::size_t offset = 0;
};

// The offset of the first bracket nested deeper than `max_depth` outside strings, or of the second `"key"` followed by
// a colon (a repeated key); 0 when not found.
inline std::size_t locate_json_bound(std::string_view text, int max_depth, const std::string& repeated_key) {
  int depth = 0, seen = 0;
  bool in_string = false, escaped = false;
  std::size_t string_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') {
        in_string = false;
        if (!repeated_key.empty() && text.substr(string_start + 1, i - string_start - 1) == repeated_key) {
          std::size_t j = i + 1;
          while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r')) ++j;
          if (j < text.size() && text[j] == ':' && ++seen == 2) return string_start;
        }
      }
      continue;
    }
    if (c == '"') in_string = true, string_start = i;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth && repeated_key.empty()) return i;
    } else if (c == ']' || c == '}') --depth;
  }
  return 0;
}

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
      refused.offset = locate_json_bound(text, kMaxJsonDepth, "");
      return false;
    }
    if (!unique_keys) return true;
    if (event == Event::object_start) keys.emplace_back();
    else if (event == Event::object_end && !keys.empty()) keys.pop_back();
    else if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
      refused.message = "key \"" + parsed.get<std::string>() + "\" appears twice in one object";
      refused.offset = locate_json_bound(text, kMaxJsonDepth, parsed.get<std::string>());
    }
    return refused.message.empty();
  };
  nlohmann::json j = nlohmann::json::parse(text, bound, allow_exceptions);
  if (!refused.message.empty()) return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

}  // namespace racksim::workloads
