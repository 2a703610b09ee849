#include "input/yaml_reader.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <unordered_set>

#include "core/text.h"
#include "input/file_cache.h"
#include "input/files.h"

namespace racksim::input {

namespace {

std::string shorten(const std::string& s, std::size_t max_len = 40) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    // Keep messages printable whatever bytes the input held.
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

std::string join_path(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

}  // namespace

Node::Node(YAML::Node yaml, std::string file, std::string display_path, std::string internal_path,
           std::shared_ptr<LoadContext> ctx)
    // A missing key in yaml-cpp is an "invalid" node whose type queries throw; normalise it.
    : yaml_(yaml.IsDefined() ? yaml : YAML::Node(YAML::NodeType::Undefined)),
      file_(std::move(file)),
      display_path_(std::move(display_path)),
      internal_path_(std::move(internal_path)),
      ctx_(std::move(ctx)) {}

SourceLocation Node::where() const {
  // A node a set made (a --set's value, a validate case's set: entry, or a mapping made on the way) is where the set
  // was given: its own marks, if any, are from parsing the value's text alone.
  // (A command-line set's origin has line -1: no line; its errors name the option alone.)
  if (ctx_)
    if (const auto g = ctx_->grafts.find(internal_path_); g != ctx_->grafts.end())
      if (auto at = g->second.location()) return *at;
  SourceLocation loc{file_, 0, 0};
  if (yaml_.IsDefined()) {
    const YAML::Mark m = yaml_.Mark();
    if (m.line >= 0) {
      loc.line = m.line + 1;
      loc.column = m.column + 1;
    }
  }
  return loc;
}

Node Node::key_of(const std::string& key) const {
  const Node c = child(key);
  if (yaml_.IsMap())
    for (auto it = yaml_.begin(); it != yaml_.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key)
        return Node(it->first, c.file(), c.path(), c.internal_path(), ctx_);
  return c;
}

Node Node::child(const std::string& key) const {
  // yaml-cpp's Node::operator= aliases content; construct instead of assigning.
  const YAML::Node& self = yaml_;
  YAML::Node c = self.IsMap() ? self[key] : YAML::Node(YAML::NodeType::Undefined);
  const std::string ipath = join_path(internal_path_, key);
  if (auto it = ctx_->grafts.find(ipath); it != ctx_->grafts.end())
    return Node(c, it->second.file, it->second.display_path, ipath, ctx_);
  // A missing child reports at its parent's location.
  return Node(c, file_, join_path(display_path_, key), ipath, ctx_);
}

Node Node::element(std::size_t index) const {
  const YAML::Node& self = yaml_;
  YAML::Node c = (self.IsSequence() && index < self.size()) ? self[index] : YAML::Node(YAML::NodeType::Undefined);
  const std::string suffix = fmt::format("[{}]", index);
  const std::string ipath = internal_path_ + suffix;
  if (auto it = ctx_->grafts.find(ipath); it != ctx_->grafts.end())
    return Node(c, it->second.file, it->second.display_path, ipath, ctx_);
  return Node(c, file_, display_path_ + suffix, ipath, ctx_);
}

std::string Node::describe() const {
  if (!yaml_.IsDefined() || yaml_.IsNull()) return "nothing (null)";
  if (yaml_.IsMap()) return "a mapping";
  if (yaml_.IsSequence()) return "a list";
  return fmt::format("'{}'", shorten(yaml_.Scalar()));
}

void Node::error(const std::string& message, DiagnosticKind kind) const {
  ctx_->diag->error(where(), display_path_, message, kind);
}

std::optional<std::string> Node::as_string() const {
  if (!yaml_.IsScalar()) {
    error(fmt::format("expected a text value, got {}", describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  return yaml_.Scalar();
}

std::optional<int64_t> Node::as_integer(int64_t min_value, int64_t max_value) const {
  if (!yaml_.IsScalar()) {
    error(fmt::format("expected a whole number, got {}", describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  const std::string& s = yaml_.Scalar();
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    error(fmt::format("expected a whole number, got {}", describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  if (v < min_value || v > max_value) {
    if (max_value == INT64_MAX)
      error(fmt::format("must be at least {}, got {}", min_value, v), DiagnosticKind::malformed_value);
    else
      error(fmt::format("must be between {} and {}, got {}", min_value, max_value, v), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  return v;
}

std::optional<double> Node::as_number(double min_value, double max_value) const {
  if (!yaml_.IsScalar()) {
    error(fmt::format("expected a number, got {}", describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  const std::string& s = yaml_.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    // A value with a unit where a plain number belongs is a common slip: say so.
    error(fmt::format("expected a plain number, got {}", describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  if (v < min_value || v > max_value) {
    error(fmt::format("must be between {} and {}, got {}", min_value, max_value, s), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  return v;
}

std::optional<bool> Node::as_bool() const {
  if (yaml_.IsScalar()) {
    const std::string& s = yaml_.Scalar();
    if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  }
  error(fmt::format("expected true or false, got {}", describe()), DiagnosticKind::malformed_value);
  return std::nullopt;
}

std::optional<double> Node::as_quantity(sim::QuantityKind kind) const {
  if (!yaml_.IsScalar()) {
    error(fmt::format("expected {}, got {}", sim::to_string(kind), describe()), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  try {
    return sim::parse_quantity(yaml_.Scalar(), kind);
  } catch (const sim::UnitError& e) {
    error(e.what(), DiagnosticKind::malformed_value);
    return std::nullopt;
  }
}

MapReader::MapReader(const Node& node) : node_(node) {
  if (node.yaml().IsMap()) {
    ok_ = true;
  } else {
    node.error(fmt::format("expected a mapping (key: value lines), got {}", node.describe()),
               DiagnosticKind::malformed_value);
  }
}

bool MapReader::refuse_null(const std::string& key, const Node& c, bool required) {
  if (!c.yaml().IsDefined() || !c.yaml().IsNull()) return false;
  if (std::find(null_reported_.begin(), null_reported_.end(), key) != null_reported_.end()) return true;
  null_reported_.push_back(key);
  // At the key itself. A half-finished edit (`recompute:` with nothing after it) had run as the key's default without
  // a word, and a required key given empty had read "required key is missing".
  node_.key_of(key).error(required ? "no value (empty or null): give one; this key is required"
                                   : "no value (empty or null): give one, or leave the key out for its default",
                          DiagnosticKind::malformed_value);
  return true;
}

bool MapReader::has(const std::string& key) {
  declared_.push_back(key);
  if (!ok_) return false;
  const YAML::Node v = node_.yaml()[key];
  if (v.IsDefined() && v.IsNull()) {
    refuse_null(key, node_.child(key), false);
    return false;
  }
  return v.IsDefined();
}

std::optional<Node> MapReader::get(const std::string& key, bool required) {
  declared_.push_back(key);
  if (!ok_) return std::nullopt;
  Node c = node_.child(key);
  if (refuse_null(key, c, required)) return std::nullopt;
  if (!c.yaml().IsDefined() || c.yaml().IsNull()) {
    if (required) {
      Diagnostics& d = node_.diag();
      d.error(node_.where(), join_path(node_.path(), key), "required key is missing");
    }
    return std::nullopt;
  }
  return c;
}

std::optional<std::string> MapReader::string(const std::string& key, bool required) {
  auto n = get(key, required);
  return n ? n->as_string() : std::nullopt;
}
std::optional<int64_t> MapReader::integer(const std::string& key, bool required, int64_t lo, int64_t hi) {
  auto n = get(key, required);
  return n ? n->as_integer(lo, hi) : std::nullopt;
}
std::optional<double> MapReader::number(const std::string& key, bool required, double lo, double hi) {
  auto n = get(key, required);
  return n ? n->as_number(lo, hi) : std::nullopt;
}
std::optional<bool> MapReader::boolean(const std::string& key, bool required) {
  auto n = get(key, required);
  return n ? n->as_bool() : std::nullopt;
}
std::optional<double> MapReader::quantity(const std::string& key, sim::QuantityKind kind, bool required) {
  auto n = get(key, required);
  return n ? n->as_quantity(kind) : std::nullopt;
}

std::string MapReader::unknown_choice_message(const std::string& got, const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : " | ") + n;
  std::string msg = fmt::format("unknown value '{}'; expected one of {}", shorten(got), list);
  if (auto near = sim::nearest(got, names, std::max<std::size_t>(2, got.size() / 3)))
    msg += fmt::format(" (did you mean '{}'?)", *near);
  return msg;
}

namespace {
thread_local DeclaredKeyProbe* active_probe = nullptr;
}
DeclaredKeyProbe::DeclaredKeyProbe() : previous_(active_probe) { active_probe = this; }
DeclaredKeyProbe::~DeclaredKeyProbe() { active_probe = previous_; }
DeclaredKeyProbe* DeclaredKeyProbe::active() { return active_probe; }

void MapReader::finish() {
  if (auto* probe = DeclaredKeyProbe::active())
    for (const auto& key : declared_) probe->record(node_.file(), join_path(node_.internal_path(), key));
  if (!ok_) return;
  std::vector<std::string> seen;
  for (auto it = node_.yaml().begin(); it != node_.yaml().end(); ++it) {
    const YAML::Node k = it->first;  // a copy (a handle): `it->` returns a proxy that dies with the statement
    const YAML::Mark m = k.Mark();
    SourceLocation loc{node_.file(), m.line >= 0 ? m.line + 1 : 0, m.line >= 0 ? m.column + 1 : 0};
    if (!k.IsScalar()) {
      node_.diag().error(loc, node_.path(), "a key must be plain text");
      continue;
    }
    const std::string key = k.Scalar();
    std::string kpath = join_path(node_.path(), key);
    if (auto g = node_.context()->grafts.find(join_path(node_.internal_path(), key));
        g != node_.context()->grafts.end()) {
      // A key that came from a set (--set, a validate case's set:) or a graft of another file.
      // (a key's own marks are from parsing the set's value alone: the set's first column instead)
      loc = g->second.location().value_or(input::SourceLocation{g->second.file, 1, 1});
      kpath = g->second.display_path;
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      node_.diag().error(loc, kpath, "duplicate key", DiagnosticKind::unknown_key);
      continue;
    }
    seen.push_back(key);
    if (std::find(declared_.begin(), declared_.end(), key) != declared_.end()) continue;
    if (key == "<<") {  // (yaml-cpp reads a merge key as a plain key named '<<')
      node_.diag().error(loc, kpath, kMergeKeyMessage);
      continue;
    }
    std::string msg = fmt::format("unknown key '{}'", shorten(key));
    if (auto near = sim::nearest(key, declared_, std::max<std::size_t>(2, key.size() / 3)))
      msg += fmt::format("; did you mean '{}'?", *near);
    else {
      std::vector<std::string> sorted = declared_;
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      std::string list;
      for (const auto& d : sorted) list += (list.empty() ? "" : ", ") + d;
      msg += fmt::format("; valid keys here: {}", list);
    }
    node_.diag().error(loc, kpath, msg, DiagnosticKind::unknown_key);
  }
}

namespace {

// A line whose indentation holds a tab, at or before `last_line` (1-based): {line, column} or {0, 0}.
std::pair<int, int> tab_in_indentation(const std::string& text, int last_line) {
  int line = 1;
  std::size_t i = 0;
  while (i < text.size() && line <= last_line) {
    std::size_t j = i;
    int tab_col = 0;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) {
      if (text[j] == '\t' && tab_col == 0) tab_col = static_cast<int>(j - i) + 1;
      ++j;
    }
    const bool content = j < text.size() && text[j] != '\n' && text[j] != '\r' && text[j] != '#';
    if (tab_col > 0 && content) return {line, tab_col};
    const std::size_t nl = text.find('\n', j);
    if (nl == std::string::npos) break;
    i = nl + 1;
    ++line;
  }
  return {0, 0};
}

// Whether the quoted scalar that starts at text[pos] (a ' or ") is closed before the end.
bool quote_closed(const std::string& text, std::size_t pos) {
  const char q = text[pos];
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;
      continue;
    }
    if (text[i] != q) continue;
    if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
      ++i;  // '' is an escaped quote
      continue;
    }
    return true;
  }
  return false;
}

// Where the text goes on after its first YAML document: nullopt when it does not; else the
// mark of the second document and whether it is one ('---') or text yaml-cpp cannot place
// (trailing junk, on which its parser reports the same empty document forever; YAML::LoadAll
// would loop until memory runs out).
struct Rest {
  YAML::Mark mark;
  bool junk = false;
};
std::optional<Rest> after_first_document(const std::string& text) {
  struct Events : YAML::EventHandler {
    YAML::Mark start;
    bool started = false;
    void OnDocumentStart(const YAML::Mark& m) override {
      start = m;
      started = true;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  Events h;
  if (!parser.HandleNextDocument(h)) return std::nullopt;  // empty
  h.started = false;
  if (!parser.HandleNextDocument(h)) return std::nullopt;  // one document
  Rest r{h.start, false};
  h.started = false;
  r.junk = parser.HandleNextDocument(h) && h.start.pos == r.mark.pos;
  return r;
}

// True when the text cannot go on after its first document, shown from the loaded root without
// parsing the text a second time (after_first_document's parse cost as much as the load: about a
// seventh of a single run's instructions). yaml-cpp ends a block mapping when its scanner pops the
// mapping's indentation: at a token left of the mapping's column, or where it pops every level -- at
// the end of the text, a document marker ('---', '...') or a directive ('%'), each at the start of a
// line. A block mapping whose first key is at column 0 has nothing to its left, so when no line starts
// with a marker or a directive it ends with the text. Anything else (a flow or scalar root, an
// indented or tagged root, a byte-order mark, any marker) is checked by parsing, as before.
bool ends_with_the_text(const YAML::Node& root, const std::string& text) {
  if (!root.IsMap() || root.Style() != YAML::EmitterStyle::Block) return false;
  const YAML::Mark m = root.Mark();
  if (m.column != 0 || m.pos < 0 || static_cast<std::size_t>(m.pos) >= text.size()) return false;
  const char first = text[static_cast<std::size_t>(m.pos)];
  if (first == '!' || first == '&' || first == '?' || first == '{' || first == '[') return false;  // properties, complex keys
  if (static_cast<unsigned char>(text[0]) == 0xEF) return false;                                  // a byte-order mark shifts marks
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i > 0 && text[i - 1] != '\n' && text[i - 1] != '\r') continue;  // not the start of a line
    const char c = text[i];
    if (c == '%' || ((c == '-' || c == '.') && i + 2 < text.size() && text[i + 1] == c && text[i + 2] == c)) return false;
  }
  return true;
}

}  // namespace

bool check_yaml_document(const YAML::Node& root, const std::string& text, const SourceLocation& where,
                         const std::string& key_path, Diagnostics& diag) {
  struct Item {
    YAML::Node node;
    int depth;
  };
  std::vector<Item> stack;
  stack.push_back({root, 0});
  std::uint64_t visited = 0;
  std::unordered_set<std::size_t> quotes_checked;
  auto at = [&](const YAML::Node& n) {
    SourceLocation loc = where;
    const YAML::Mark m = n.Mark();
    if (!text.empty() && m.line >= 0) {
      loc.line = m.line + 1;
      loc.column = m.column + 1;
    }
    return loc;
  };
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    if (++visited > limits::kMaxYamlNodes) {
      diag.error(at(it.node), key_path,
                 fmt::format("the YAML holds more than {} values once its aliases (*name) are expanded: a limit of "
                             "racksim (docs/decisions.md, \"Input limits\"); write the values out or use fewer aliases",
                             limits::kMaxYamlNodes));
      return false;
    }
    if (it.depth > limits::kMaxYamlDepth) {
      diag.error(at(it.node), key_path,
                 fmt::format("the YAML nests deeper than {} levels (aliases expanded): a limit of racksim "
                             "(docs/decisions.md, \"Input limits\")",
                             limits::kMaxYamlDepth));
      return false;
    }
    const YAML::Node& n = it.node;
    if (n.IsMap()) {
      for (auto i = n.begin(); i != n.end(); ++i) {
        stack.push_back({i->second, it.depth + 1});
        stack.push_back({i->first, it.depth + 1});
      }
    } else if (n.IsSequence()) {
      for (std::size_t i = n.size(); i-- > 0;) stack.push_back({n[i], it.depth + 1});
    } else if (n.IsScalar() && !text.empty() && n.Tag() == "!") {
      // yaml-cpp takes an unclosed quote at the end of the file as a scalar that runs to it.
      const YAML::Mark m = n.Mark();
      if (m.pos >= 0 && static_cast<std::size_t>(m.pos) < text.size() &&
          (text[static_cast<std::size_t>(m.pos)] == '"' || text[static_cast<std::size_t>(m.pos)] == '\'') &&
          quotes_checked.insert(static_cast<std::size_t>(m.pos)).second &&
          !quote_closed(text, static_cast<std::size_t>(m.pos))) {
        diag.error(at(n), key_path,
                   fmt::format("unterminated quoted text: the {} opened here is never closed",
                               text[static_cast<std::size_t>(m.pos)] == '"' ? "double quote (\")" : "single quote (')"));
        return false;
      }
    }
  }
  return true;
}

namespace {

// A citation's text that yaml-cpp takes byte for byte between double quotes: no quote, no escape,
// no control character (UTF-8 bytes pass through its scanner as they are).
bool plain_quoted_text(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c < 0x20 || c == 0x7F) return false;
  }
  return true;
}

struct Citation {
  int line = 0;          // 0-based, as yaml-cpp's marks
  int quote_column = 0;  // where the value (its opening quote) starts
  std::string text;
};

}  // namespace

std::optional<YAML::Node> load_with_citations_set_after(const std::string& text, std::string& parsed) {
  // The last line that is exactly `sources:` (a comment may follow); the block runs to the end.
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    lines.emplace_back(text.data() + at, end - at);
    at = end + 1;
  }
  auto is_sources_line = [](std::string_view l) {
    if (!l.starts_with("sources:")) return false;
    l.remove_prefix(8);
    const std::size_t rest = l.find_first_not_of(' ');
    return rest == std::string_view::npos || (l[rest] == '#' && rest > 0);
  };
  std::size_t head = lines.size();
  while (head-- > 0 && !is_sources_line(lines[head])) {}
  if (head >= lines.size() || head == 0) return std::nullopt;
  std::vector<Citation> cites;
  parsed.clear();
  parsed.reserve(text.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (i > head) {
      const std::size_t first = l.find_first_not_of(' ');
      if (first != std::string_view::npos && l[first] != '#') {
        // `  key: "text"` with trailing spaces at most; the key as a field path.
        if (first != 2) return std::nullopt;
        std::size_t k = 2;
        while (k < l.size() && (std::isalnum(static_cast<unsigned char>(l[k])) || l[k] == '_' || l[k] == '.' || l[k] == '-')) ++k;
        if (k == 2 || !std::isalpha(static_cast<unsigned char>(l[2])) || l.substr(k, 3) != ": \"") return std::nullopt;
        const std::size_t open = k + 2;
        const std::size_t close = l.find('"', open + 1);
        if (close == std::string_view::npos || l.find_first_not_of(' ', close + 1) != std::string_view::npos) return std::nullopt;
        const std::string_view value = l.substr(open + 1, close - open - 1);
        if (!plain_quoted_text(value)) return std::nullopt;
        cites.push_back({static_cast<int>(i), static_cast<int>(open), std::string(value)});
        l = l.substr(0, open + 1);
        parsed.append(l);
        parsed.append("\"");
        if (i + 1 < lines.size()) parsed.push_back('\n');
        continue;
      }
    }
    parsed.append(l);
    if (i + 1 < lines.size()) parsed.push_back('\n');
  }
  if (cites.empty()) return std::nullopt;
  YAML::Node root;
  try {
    root = YAML::Load(parsed);
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
  // The block must have been read as the expected mapping: each citation a "" at its line and column.
  if (!root.IsMap()) return std::nullopt;
  YAML::Node block;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "sources" && it->first.Mark().line == static_cast<int>(head) &&
        it->first.Mark().column == 0)
      block = it->second;
  if (!block.IsDefined() || !block.IsMap() || block.size() != cites.size()) return std::nullopt;
  std::size_t n = 0;
  for (auto it = block.begin(); it != block.end(); ++it, ++n) {
    YAML::Node value = it->second;
    const YAML::Mark m = value.Mark();
    if (!value.IsScalar() || !value.Scalar().empty() || value.Tag() != "!" || m.line != cites[n].line ||
        m.column != cites[n].quote_column)
      return std::nullopt;
  }
  n = 0;
  for (auto it = block.begin(); it != block.end(); ++it, ++n) {
    YAML::Node value = it->second;
    value = cites[n].text;  // the same node: its tag and mark stay
  }
  return root;
}

std::string escaped_text(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_bytes(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (len == 0 || (c < 0x20 && !(keep_line_breaks && (c == '\n' || c == '\t'))) || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

std::size_t utf8_sequence_bytes(std::string_view text, std::size_t i) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  const unsigned c = b[i];
  if (c < 0x80) return 1;
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + len > n || b[i + 1] < lo || b[i + 1] > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (b[i + k] < 0x80 || b[i + k] > 0xBF) return 0;
  return len;
}

std::size_t first_invalid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_bytes(text, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string::npos;
}

std::optional<Node> load_yaml_text(const std::string& text, const std::string& file_label,
                                   const std::shared_ptr<LoadContext>& ctx, YamlParse parse) {
  // Text that did not come from a file (a Python dict, a --set value) is held to the file's bound too.
  if (text.size() > limits::kMaxYamlFileBytes) {
    ctx->diag->error({file_label, 0, 0}, "",
                     fmt::format("too large for a YAML text: {} bytes; the limit is {} (docs/decisions.md, \"Input "
                                 "limits\")",
                                 text.size(), format_limit(limits::kMaxYamlFileBytes)));
    return std::nullopt;
  }
  // A NUL byte or invalid control characters make no sense in a scenario; yaml-cpp accepts
  // some of them, so reject early with a clear message.
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\0') {
      ctx->diag->error({file_label, position_in(text, i).first, 1}, "", "file contains a NUL byte: not a YAML text file");
      return std::nullopt;
    }
  }
  // Text that is not UTF-8 (a Latin-1 file, a binary): yaml-cpp reads it, and the JSON report then cannot hold it.
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string::npos) {
    const auto [line, col] = position_in(text, bad);
    ctx->diag->error({file_label, line, col}, "",
                     fmt::format("byte 0x{:02X} is not UTF-8: racksim reads UTF-8 text (save the file as UTF-8)",
                                 static_cast<unsigned char>(text[bad])));
    return std::nullopt;
  }
  try {
    std::string cheaper;
    auto quick = parse == YamlParse::quick ? load_with_citations_set_after(text, cheaper) : std::nullopt;
    YAML::Node root = quick ? *quick : YAML::Load(text);
    const std::string& read = quick ? cheaper : text;  // the text the marks index
    if (const auto rest = ends_with_the_text(root, read) ? std::nullopt : after_first_document(read)) {
      const int line = rest->mark.line >= 0 ? rest->mark.line + 1 : 0;
      const int col = rest->mark.column >= 0 ? rest->mark.column + 1 : 0;
      if (rest->junk)
        ctx->diag->error({file_label, line, col}, "",
                         "malformed YAML: text after the end of the value (a stray ',' or ']'?)");
      else
        ctx->diag->error({file_label, line, col}, "",
                         "a second YAML document ('---') starts here: racksim reads one document per file; "
                         "remove it or put it in a file of its own");
      return std::nullopt;
    }
    if (!root.IsDefined() || root.IsNull()) {
      ctx->diag->error({file_label, 0, 0}, "", "file is empty: expected a mapping of keys");
      return std::nullopt;
    }
    if (!check_yaml_document(root, read, {file_label, 1, 1}, "", *ctx->diag)) return std::nullopt;
    return Node(root, file_label, "", "", ctx);
  } catch (const YAML::DeepRecursion& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    const int col = e.mark.column >= 0 ? e.mark.column + 1 : 0;
    ctx->diag->error({file_label, line, col}, "",
                     "malformed YAML: nested too deeply (yaml-cpp parses at most about 500 levels)");
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    const int col = e.mark.column >= 0 ? e.mark.column + 1 : 0;
    // A tab in the indentation makes yaml-cpp report something else, further on.
    if (const auto [tl, tc] = tab_in_indentation(text, line > 0 ? line : INT32_MAX); tl > 0) {
      ctx->diag->error({file_label, tl, tc}, "", "malformed YAML: a tab in the indentation; YAML indents with spaces only");
      return std::nullopt;
    }
    ctx->diag->error({file_label, line, col}, "", "malformed YAML: " + e.msg);
    return std::nullopt;
  }
}

namespace {
FileCache<YAML::Node>& parsed_yaml() {
  static FileCache<YAML::Node> parsed;
  return parsed;
}
}  // namespace

void forget_parsed_yaml(const std::string& path) { parsed_yaml().erase(path); }

std::optional<Node> load_yaml_file(const std::string& path, const std::shared_ptr<LoadContext>& ctx, bool* from_cache) {
  // A file parsed before (and unchanged since) is cloned instead: loaders may graft into their tree.
  auto& parsed = parsed_yaml();
  static std::mutex clone_mu;
  if (from_cache) *from_cache = false;
  if (auto tree = parsed.get(path)) {
    std::lock_guard lock(clone_mu);
    if (from_cache) *from_cache = true;
    return Node(YAML::Clone(*tree), path, "", "", ctx);
  }
  const std::size_t errors_before = ctx->diag->size();
  auto loaded = read_yaml_file(path, ctx);
  if (loaded && ctx->diag->size() == errors_before) {
    std::lock_guard lock(clone_mu);
    parsed.put(path, YAML::Clone(loaded->yaml()));
  }
  return loaded;
}

std::optional<Node> read_yaml_file(const std::string& path, const std::shared_ptr<LoadContext>& ctx) {
  std::string text;
  try {
    text = read_file_bounded(path, limits::kMaxYamlFileBytes, "a YAML file", Binary::stop);
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) ctx->diag->error(d.where, d.key_path, d.message);
    return std::nullopt;
  }
  return load_yaml_text(text, path, ctx);
}

void collect_leaf_paths(const YAML::Node& node, const std::string& prefix, std::vector<std::string>& out,
                        const std::vector<std::string>& skip) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string key = it->first.Scalar();
      if (prefix.empty() && std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
      collect_leaf_paths(it->second, join_path(prefix, key), out, {});
    }
  } else if (!prefix.empty()) {
    out.push_back(prefix);
  }
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::vector<std::string> keys_along(const YAML::Node& root, const std::string& path) {
  const auto parts = split_path(path);
  std::vector<std::string> keys;
  YAML::Node cur = root;
  std::size_t i = 0;
  while (i < parts.size()) {
    std::size_t take = 1;
    if (cur.IsMap()) {
      const YAML::Node& c = cur;  // a const node's operator[] adds nothing
      // The longest run of parts that the mapping has as one dotted key (`scale_up.domain_size` in system.overrides).
      for (std::size_t n = parts.size() - i; n >= 2; --n) {
        std::string joined = parts[i];
        for (std::size_t k = i + 1; k < i + n; ++k) joined += "." + parts[k];
        if (c[joined].IsDefined()) {
          take = n;
          break;
        }
      }
    }
    std::string key = parts[i];
    for (std::size_t k = i + 1; k < i + take; ++k) key += "." + parts[k];
    keys.push_back(key);
    if (cur.IsMap()) {
      const YAML::Node& c = cur;
      YAML::Node next = c[key];
      cur.reset(next.IsDefined() ? next : YAML::Node());
    } else {
      cur.reset(YAML::Node());
    }
    i += take;
  }
  return keys;
}

bool set_by_path(YAML::Node root, const std::string& path, const YAML::Node& value, std::vector<std::string>* created) {
  const auto parts = keys_along(root, path);
  // Check first, so a failed set leaves the tree untouched.
  {
    // Read-only walk (a const node's operator[] adds nothing); a missing or null part ends it:
    // the rest of the path is created below.
    YAML::Node cur = root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!cur.IsDefined() || cur.IsNull()) break;
      if (!cur.IsMap()) return false;
      const YAML::Node& c = cur;
      YAML::Node next = c[parts[i]];
      if (!next.IsDefined() || next.IsNull()) {
        cur.reset(YAML::Node());
        break;
      }
      if (!next.IsMap()) return false;
      cur.reset(next);  // rebind; operator= would alias content
    }
    if (cur.IsDefined() && !cur.IsNull() && !cur.IsMap()) return false;
  }
  std::vector<YAML::Node> chain{root};
  std::string prefix;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix = i == 0 ? parts[i] : prefix + "." + parts[i];
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
      if (created) created->push_back(prefix);
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
  return true;
}

YAML::Node node_at(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = root;
  for (const auto& part : keys_along(root, path)) {
    const YAML::Node& c = cur;  // a const node's operator[] adds nothing
    YAML::Node next = c.IsMap() ? c[part] : YAML::Node();
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(next);  // rebind; operator= would alias content
  }
  return cur;
}

std::vector<std::string> keys_dropped_by_set(const YAML::Node& root, const std::string& path, const YAML::Node& value) {
  const YAML::Node cur = node_at(root, path);
  std::vector<std::string> dropped;
  if (!cur.IsMap()) return dropped;
  // Every value the mapping holds (its leaves, dotted), dropped unless the new value holds it under some spelling.
  std::vector<std::string> leaves;
  collect_leaf_paths(cur, "", leaves);
  for (const auto& leaf : leaves)
    if (!value.IsMap() || !node_at(value, leaf).IsDefined()) dropped.push_back(leaf);
  return dropped;
}

bool key_is_new(const Node& map, const YAML::Node& key, std::vector<std::string>& seen) {
  const std::string k = key.IsScalar() ? key.Scalar() : "";
  const YAML::Mark m = key.Mark();
  const SourceLocation at{map.file(), m.line >= 0 ? m.line + 1 : 0, m.line >= 0 ? m.column + 1 : 0};
  if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
    map.diag().error(at, join_path(map.path(), k), "duplicate key", DiagnosticKind::unknown_key);
    return false;
  }
  seen.push_back(k);
  if (k == "<<") {
    map.diag().error(at, join_path(map.path(), k), kMergeKeyMessage);
    return false;
  }
  return true;
}

std::vector<std::string> list_yaml_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string data_dir() {
  if (const char* env = std::getenv("RACKSIM_DATA_DIR"); env && *env) return env;
  return RACKSIM_DATA_DIR;
}


bool refuse_other_kind_of_file(const Node& root, const std::string& expected) {
  const YAML::Node& y = root.yaml();
  if (!y.IsMap()) return false;
  const auto has = [&](const char* k) { return static_cast<bool>(y[k]) && y[k].IsDefined(); };
  // Each kind by the keys only it has at the top (a scenario: system, model, training; a sweep: base and vary; a suite:
  // cases; a system preset: gpu and scale_up), and the command that reads it.
  struct Kind {
    const char* name;
    bool is;
    const char* keys;  // as the message shows them
    const char* how;
  };
  const std::array<Kind, 4> kinds = {{
      {"scenario", has("system") && has("training") && !has("vary") && !has("cases"), "system:, training:",
       "run it with `racksim run FILE` (or name it as a sweep's base:)"},
      {"sweep", has("base") && has("vary"), "base:, vary:", "run it with `racksim sweep FILE`"},
      {"validation suite", has("cases") && !has("vary"), "cases:", "run it with `racksim validate FILE`"},
      {"system preset", has("gpu") && has("scale_up"), "gpu:, scale_up:",
       "name it as a scenario's system.preset (a path) or see `racksim hw show`"},
  }};
  for (const auto& k : kinds)
    if (k.is && expected != k.name) {
      root.diag().error({root.file(), 1, 1}, "",
                        fmt::format("this looks like a {} file, not a {} ({}): {}", k.name, expected, k.keys, k.how),
                        DiagnosticKind::other);
      return true;
    }
  return false;
}

}  // namespace racksim::input
