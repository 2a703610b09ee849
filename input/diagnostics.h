// Errors in user input. Every diagnostic carries file:line:column and the key path, and the
// loaders collect all of them before failing, so one run shows every mistake in a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace racksim::input {

struct SourceLocation {
  std::string file;  // path as the user named it, or "--set KEY=VALUE" for command-line overrides
  int line = 0;      // 1-based; 0 = unknown; -1 = a command-line --set (printed without a line)
  int column = 0;    // 1-based; 0 = unknown
};
// "FILE:LINE:COLUMN", "FILE:LINE" without a column, "FILE" without a line: how every message places itself.
std::string format_location(const SourceLocation& where);

// What a diagnostic is about, for a caller that treats kinds differently: a sweep refuses at load a value its key
// cannot take, whatever the other axes hold, and leaves a value that makes one point's layout impossible to that
// point's row. Set where the message is written, so no caller reads the message's words.
enum class DiagnosticKind : uint8_t {
  other,            // anything else: a combination of values, a layout, a file's contents
  malformed_value,  // not the key's type (not a number, no unit, not one of its names) or outside its fixed range
  unknown_name,     // a preset, calibration or model name that names none, or a path that is not such a file
  unknown_key,      // a key the mapping does not have (unknown, duplicate, a path through a value, a preset field)
};

struct Diagnostic {
  SourceLocation where;
  std::string key_path;  // e.g. "training.parallelism.tp"; empty for whole-file errors
  std::string message;
  DiagnosticKind kind = DiagnosticKind::other;

  // "file:line:col: error: key.path: message"
  std::string format() const;
};

// Thrown by loaders when input is invalid. what() holds every diagnostic, one per line.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// One diagnostic (file:line:column, key path, message) as an InputError.
InputError input_error(std::string file, int line, int column, std::string key_path, std::string message);
// `e`'s diagnostics and, after them, one at `file` without a line saying what they belong to (compare's "the errors
// above are the variant scenario's").
InputError with_closing_note(const InputError& e, std::string file, std::string message);

// The 1-based line and byte column of byte `offset` of `text` (an offset past the end: the end), for a diagnostic at a
// place a parser reports as an offset (JSON errors, a NUL byte).
std::pair<int, int> position_in(std::string_view text, std::size_t offset);

// Collects diagnostics while a loader walks a file; throw_if_any() fails with all of them.
class Diagnostics {
 public:
  void error(SourceLocation where, std::string key_path, std::string message,
             DiagnosticKind kind = DiagnosticKind::other);
  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  const std::vector<Diagnostic>& list() const { return list_; }
  void throw_if_any() const;

  // Guard against pathological input (a 1 MB garbage file) producing megabytes of errors.
  static constexpr std::size_t kMaxDiagnostics = 50;

 private:
  std::vector<Diagnostic> list_;
  std::size_t dropped_ = 0;
};

}  // namespace racksim::input
