#include "input/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace racksim::input {

std::string format_location(const SourceLocation& where) {
  std::string out = where.file;
  if (where.line > 0) out += where.column > 0 ? fmt::format(":{}:{}", where.line, where.column) : fmt::format(":{}", where.line);
  return out;
}

std::string Diagnostic::format() const {
  std::string out = format_location(where);
  out += ": error: ";
  if (!key_path.empty()) out += key_path + ": ";
  out += message;
  return out;
}

static std::string join_all(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) {
    if (!out.empty()) out += '\n';
    out += d.format();
  }
  return out;
}

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_all(diagnostics)), diagnostics_(std::move(diagnostics)) {}

void Diagnostics::error(SourceLocation where, std::string key_path, std::string message, DiagnosticKind kind) {
  if (list_.size() >= kMaxDiagnostics) {
    ++dropped_;
    return;
  }
  list_.push_back({std::move(where), std::move(key_path), std::move(message), kind});
}

void Diagnostics::throw_if_any() const {
  if (list_.empty()) return;
  auto all = list_;
  if (dropped_ > 0) {
    all.push_back({all.back().where, "", fmt::format("{} more errors not shown", dropped_)});
  }
  throw InputError(std::move(all));
}

std::pair<int, int> position_in(std::string_view text, std::size_t offset) {
  const auto end = text.begin() + static_cast<std::ptrdiff_t>(std::min(offset, text.size()));
  const auto line_start = std::find(std::make_reverse_iterator(end), text.rend(), '\n').base();
  return {static_cast<int>(1 + std::count(text.begin(), end, '\n')), static_cast<int>(end - line_start + 1)};
}

InputError with_closing_note(const InputError& e, std::string file, std::string message) {
  std::vector<Diagnostic> all = e.diagnostics();
  Diagnostic note;
  note.where.file = std::move(file);
  note.message = std::move(message);
  all.push_back(std::move(note));
  return InputError(std::move(all));
}

InputError input_error(std::string file, int line, int column, std::string key_path, std::string message) {
  // Built field by field: GCC 12 warns on the nested braces.
  Diagnostic d;
  d.where.file = std::move(file);
  d.where.line = line;
  d.where.column = column;
  d.key_path = std::move(key_path);
  d.message = std::move(message);
  return InputError({d});
}

}  // namespace racksim::input
