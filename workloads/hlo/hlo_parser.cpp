#include "workloads/hlo/hlo_parser.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "hardware_models/system_spec.h"
#include "input/diagnostics.h"
#include "input/files.h"

namespace racksim::workloads::hlo {

namespace {

// One array of a module: 16 TiB, a hundred times the largest GPU memory (docs/decisions.md).
constexpr double kMaxArrayBytes = static_cast<double>(std::uint64_t{1} << 44);

struct TypeInfo {
  std::string_view name;
  double bytes;
  char kind;  // 'f' float, 'i' integer, 'p' pred, 'o' other
};

constexpr TypeInfo kTypes[] = {
    {"pred", 1, 'p'},         {"s1", 0.125, 'i'},      {"s2", 0.25, 'i'},        {"s4", 0.5, 'i'},
    {"s8", 1, 'i'},           {"s16", 2, 'i'},         {"s32", 4, 'i'},          {"s64", 8, 'i'},
    {"u1", 0.125, 'i'},       {"u2", 0.25, 'i'},       {"u4", 0.5, 'i'},         {"u8", 1, 'i'},
    {"u16", 2, 'i'},          {"u32", 4, 'i'},         {"u64", 8, 'i'},          {"f16", 2, 'f'},
    {"bf16", 2, 'f'},         {"f32", 4, 'f'},         {"f64", 8, 'f'},          {"c64", 8, 'f'},
    {"c128", 16, 'f'},        {"f8e5m2", 1, 'f'},      {"f8e4m3fn", 1, 'f'},     {"f8e4m3b11fnuz", 1, 'f'},
    {"f8e5m2fnuz", 1, 'f'},   {"f8e4m3fnuz", 1, 'f'},  {"f8e4m3", 1, 'f'},       {"f8e3m4", 1, 'f'},
    {"f8e8m0fnu", 1, 'f'},    {"f4e2m1fn", 0.5, 'f'},  {"f6e2m3fn", 0.75, 'f'},  {"f6e3m2fn", 0.75, 'f'},
    {"token", 0, 'o'},        {"opaque", 0, 'o'},
};

const TypeInfo* find_type(std::string_view t) {
  for (const auto& ti : kTypes)
    if (ti.name == t) return &ti;
  return nullptr;
}

// Attributes whose value names called computations.
bool is_call_attr(std::string_view k) {
  return k == "calls" || k == "to_apply" || k == "body" || k == "condition" || k == "branch_computations" ||
         k == "true_computation" || k == "false_computation" || k == "called_computations";
}

std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      switch (s[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: out += s[i];
      }
    } else {
      out += s[i];
    }
  }
  return out;
}

class Parser {
 public:
  Parser(std::string_view text, std::string file) : s_(text), file_(std::move(file)) {}

  Module parse() {
    Module m;
    m.file = file_;
    skip_ws();
    if (!eat_word("HloModule")) fail(p_, "expected 'HloModule' at the start of the module");
    skip_ws();
    m.name = std::string(ident("a module name"));
    // Header attributes run to the end of the line.
    for (;;) {
      skip_spaces();
      if (!peek(',')) break;
      ++p_;
      skip_spaces();
      Attribute a = attribute();
      m.header.push_back(std::move(a));
    }
    for (const auto& a : m.header) {
      if (a.name == "is_scheduled") m.is_scheduled = a.value == "true";
      if (a.name == "replica_count") m.replica_count = header_int(a);
      if (a.name == "num_partitions") m.num_partitions = header_int(a);
    }
    for (;;) {
      skip_ws();
      if (at_end()) break;
      if (section_header()) continue;
      Computation c = computation();
      if (m.computation_index.count(c.name)) fail(comp_pos_, fmt::format("computation '{}' is defined twice", c.name));
      m.computation_index[c.name] = static_cast<int>(m.computations.size());
      if (c.is_entry) {
        if (m.entry >= 0) fail(comp_pos_, "more than one ENTRY computation");
        m.entry = static_cast<int>(m.computations.size());
      }
      m.computations.push_back(std::move(c));
    }
    if (m.computations.empty()) fail(p_, "the module has no computations");
    // XLA prints the entry computation last, marked ENTRY; without it the file is cut short (or
    // not what compile().as_text() prints), and replaying another computation would be wrong.
    if (m.entry < 0)
      fail(p_, fmt::format("the module has no ENTRY computation (the last of its {} computations is '{}'): is the "
                           "file truncated?",
                           m.computations.size(), m.computations.back().name));
    if (static_cast<int64_t>(m.replica_count) * m.num_partitions > hw::kMaxGpus)
      fail(0, fmt::format("replica_count x num_partitions = {} x {} is more than the {} devices racksim models",
                          m.replica_count, m.num_partitions, hw::kMaxGpus));
    // Every called computation must exist.
    for (const auto& c : m.computations)
      for (const auto& inst : c.instructions)
        for (const auto& callee : inst.called)
          if (!m.computation_index.count(callee))
            fail_at(inst.line, inst.column,
                    fmt::format("instruction '{}' calls computation '{}', which is not defined", inst.name, callee));
    check_call_graph(m);
    return m;
  }

 private:
  // No computation calls itself, directly or through others (XLA's HLO verifier rejects a call cycle), and no
  // chain of calls nests deeper than kMaxCallDepth. Iterative, so a long chain cannot overflow the stack.
  void check_call_graph(const Module& m) const {
    const std::size_t n = m.computations.size();
    std::vector<int> depth(n, 0);       // 0 unvisited, -1 on the current path, else the deepest chain from here
    struct Frame { std::size_t comp, inst, call; };
    std::vector<Frame> path;
    for (std::size_t root = 0; root < n; ++root) {
      if (depth[root] != 0) continue;
      depth[root] = -1;
      path.push_back({root, 0, 0});
      while (!path.empty()) {
        Frame& f = path.back();
        const Computation& c = m.computations[f.comp];
        if (f.inst == c.instructions.size()) {
          int d = 1;
          for (const auto& inst : c.instructions)
            for (const auto& callee : inst.called)
              d = std::max(d, 1 + depth[static_cast<std::size_t>(m.computation_index.at(callee))]);
          if (d > kMaxCallDepth)
            fail_at(c.line, 1, fmt::format("calls from computation '{}' nest {} deep, more than the {} racksim "
                                           "follows (docs/decisions.md, \"Input limits\")",
                                           c.name, d, kMaxCallDepth));
          depth[f.comp] = d;
          path.pop_back();
          continue;
        }
        const Instruction& inst = c.instructions[f.inst];
        if (f.call == inst.called.size()) {
          ++f.inst;
          f.call = 0;
          continue;
        }
        const auto callee = static_cast<std::size_t>(m.computation_index.at(inst.called[f.call++]));
        if (depth[callee] == -1) {
          std::string cycle;
          auto from = std::find_if(path.begin(), path.end(), [&](const Frame& x) { return x.comp == callee; });
          for (auto it = from; it != path.end(); ++it) cycle += m.computations[it->comp].name + " -> ";
          cycle += m.computations[callee].name;
          fail_at(inst.line, inst.column,
                  fmt::format("computation '{}' calls itself ({}): recursion, which XLA's HLO verifier rejects",
                              m.computations[callee].name, cycle));
        }
        if (depth[callee] == 0) {
          depth[callee] = -1;
          path.push_back({callee, 0, 0});  // invalidates f
        }
      }
    }
  }

  std::string_view s_;
  std::string file_;
  std::size_t p_ = 0;
  std::size_t comp_pos_ = 0;
  mutable std::vector<std::size_t> line_starts_;

  bool at_end() const { return p_ >= s_.size(); }
  bool peek(char c) const { return p_ < s_.size() && s_[p_] == c; }
  bool peek2(const char* t) const { return s_.substr(p_, std::strlen(t)) == t; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++p_;
    return true;
  }

  std::pair<int, int> line_col(std::size_t pos) const {
    if (line_starts_.empty()) {
      line_starts_.push_back(0);
      for (std::size_t i = 0; i < s_.size(); ++i)
        if (s_[i] == '\n') line_starts_.push_back(i + 1);
    }
    pos = std::min(pos, s_.size());
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(pos - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail(std::size_t pos, const std::string& msg) const {
    auto [l, c] = line_col(pos);
    fail_at(l, c, msg);
  }
  [[noreturn]] void fail_at(int line, int col, const std::string& msg) const {
    input::Diagnostic d;
    d.where.file = file_;
    d.where.line = line;
    d.where.column = col;
    d.message = "HLO: " + msg;
    throw input::InputError(std::vector<input::Diagnostic>{d});
  }

  std::string describe_here() const {
    if (at_end()) return "the end of the file";
    std::size_t e = p_;
    while (e < s_.size() && e - p_ < 20 && s_[e] != '\n') ++e;
    std::string t(s_.substr(p_, e - p_));
    if (t.empty()) return "the end of the line";
    return "'" + t + "'";
  }

  void expect(char c, const char* what) {
    skip_ws();
    if (!eat(c)) fail(p_, fmt::format("expected '{}' {}, found {}", c, what, describe_here()));
  }

  // Whitespace (including newlines) and /* comments */.
  void skip_ws() {
    for (;;) {
      while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
      if (peek2("/*")) {
        const auto e = s_.find("*/", p_ + 2);
        if (e == std::string_view::npos) fail(p_, "unterminated comment");
        p_ = e + 2;
        continue;
      }
      break;
    }
  }
  // Spaces and tabs only (the module header ends at its line's end).
  void skip_spaces() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r')) ++p_;
  }

  static bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '$';
  }

  bool eat_word(std::string_view w) {
    if (s_.substr(p_, w.size()) != w) return false;
    const std::size_t e = p_ + w.size();
    if (e < s_.size() && ident_char(s_[e])) return false;
    p_ = e;
    return true;
  }

  std::string_view ident(const char* what) {
    if (at_end() || !(ident_start(s_[p_]) || std::isdigit(static_cast<unsigned char>(s_[p_]))))
      fail(p_, fmt::format("expected {}, found {}", what, describe_here()));
    const std::size_t b = p_;
    while (p_ < s_.size() && ident_char(s_[p_])) ++p_;
    return s_.substr(b, p_ - b);
  }

  // An instruction or computation name: an optional '%' then an identifier.
  std::string name(const char* what) {
    skip_ws();
    eat('%');
    return std::string(ident(what));
  }

  int64_t integer(const char* what) {
    skip_ws();
    const std::size_t b = p_;
    bool neg = eat('-');
    if (at_end() || !std::isdigit(static_cast<unsigned char>(s_[p_])))
      fail(b, fmt::format("expected {}, found {}", what, describe_here()));
    int64_t v = 0;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      const int d = s_[p_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) fail(b, fmt::format("{} is out of range", what));
      v = v * 10 + d;
      ++p_;
    }
    return neg ? -v : v;
  }

  int header_int(const Attribute& a) const {
    try {
      std::size_t used = 0;
      const long v = std::stol(a.value, &used);
      if (used == a.value.size() && v >= 1 && v <= hw::kMaxGpus) return static_cast<int>(v);
    } catch (const std::exception&) {
    }
    fail(0, fmt::format("header attribute {}={} is not a device count (1 to {})", a.name, a.value, hw::kMaxGpus));
  }

  // A "string" with backslash escapes; returns its contents (escapes kept) and leaves p_ after it.
  void skip_string() {
    const std::size_t b = p_;
    ++p_;  // opening quote
    while (p_ < s_.size() && s_[p_] != '"') {
      if (s_[p_] == '\\') ++p_;
      ++p_;
    }
    if (p_ >= s_.size()) fail(b, "unterminated string");
    ++p_;
  }

  // An attribute value as written: runs to a comma or whitespace outside brackets, braces,
  // parentheses and strings.
  std::string value() {
    skip_ws();
    const std::size_t b = p_;
    std::vector<char> stack;
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == '"') {
        skip_string();
        continue;
      }
      if (c == '{' || c == '[' || c == '(') {
        stack.push_back(c == '{' ? '}' : c == '[' ? ']' : ')');
        ++p_;
        continue;
      }
      if (c == '}' || c == ']' || c == ')') {
        if (stack.empty()) break;
        if (c != stack.back()) fail(p_, fmt::format("mismatched '{}' in an attribute value (expected '{}')", c, stack.back()));
        stack.pop_back();
        ++p_;
        continue;
      }
      if (stack.empty() && (c == ',' || std::isspace(static_cast<unsigned char>(c)))) break;
      ++p_;
    }
    if (!stack.empty()) fail(b, fmt::format("unbalanced value: '{}' is never closed", stack.back() == '}' ? '{' : stack.back() == ']' ? '[' : '('));
    if (p_ == b) fail(p_, fmt::format("expected an attribute value, found {}", describe_here()));
    std::string v(s_.substr(b, p_ - b));
    // Mesh-axes replica groups print as two space-separated parts, `mesh['x'=2,'y'=4] {'y'}`: keep both.
    if (v.starts_with("mesh[")) {
      std::size_t q = p_;
      while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t')) ++q;
      if (q < s_.size() && s_[q] == '{') {
        p_ = q;
        v += ' ';
        v += value();
      }
    }
    return v;
  }

  Attribute attribute() {
    skip_ws();
    Attribute a;
    a.name = std::string(ident("an attribute name"));
    skip_ws();
    if (!eat('=')) fail(p_, fmt::format("expected '=' after attribute '{}', found {}", a.name, describe_here()));
    a.value = value();
    return a;
  }

  // FileNames / FunctionNames / FileLocations / StackFrames: a bare word on its own line
  // followed by numbered entries. Returns true if one was skipped.
  bool section_header() {
    const std::size_t b = p_;
    if (!ident_start(s_[p_])) return false;
    std::size_t e = p_;
    while (e < s_.size() && std::isalpha(static_cast<unsigned char>(s_[e]))) ++e;
    std::size_t q = e;
    while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t' || s_[q] == '\r')) ++q;
    if (q < s_.size() && s_[q] != '\n') return false;
    if (s_.substr(b, e - b) == "ENTRY") return false;
    p_ = q;
    // Skip the numbered lines that follow.
    for (;;) {
      std::size_t ls = p_;
      while (ls < s_.size() && (s_[ls] == '\n' || s_[ls] == ' ' || s_[ls] == '\t' || s_[ls] == '\r')) ++ls;
      if (ls >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[ls]))) {
        p_ = ls;
        return true;
      }
      const auto nl = s_.find('\n', ls);
      p_ = nl == std::string_view::npos ? s_.size() : nl + 1;
    }
  }

  Shape shape(int depth = 0) {
    skip_ws();
    if (depth > 64) fail(p_, "shape nesting is too deep");
    Shape sh;
    if (eat('(')) {
      sh.is_tuple = true;
      skip_ws();
      if (eat(')')) return sh;
      for (;;) {
        sh.tuple.push_back(shape(depth + 1));
        skip_ws();
        if (eat(',')) continue;
        if (eat(')')) break;
        fail(p_, fmt::format("expected ',' or ')' in a tuple shape, found {}", describe_here()));
      }
      return sh;
    }
    const std::size_t tpos = p_;
    sh.element_type = std::string(ident("a shape"));
    if (!find_type(sh.element_type)) fail(tpos, fmt::format("unknown element type '{}'", sh.element_type));
    if (!eat('[')) fail(p_, fmt::format("expected '[' after element type '{}', found {}", sh.element_type, describe_here()));
    skip_ws();
    if (!eat(']')) {
      for (;;) {
        skip_ws();
        if (eat('?')) {
          sh.dims.push_back(0);
        } else {
          if (peek2("<=")) p_ += 2;
          const int64_t d = integer("a dimension");
          if (d < 0) fail(p_, "negative dimension");
          sh.dims.push_back(d);
        }
        skip_ws();
        if (eat(',')) continue;
        if (eat(']')) break;
        fail(p_, fmt::format("expected ',' or ']' in dimensions, found {}", describe_here()));
      }
    }
    if (peek('{')) layout(sh);  // a layout follows the dimensions with no space
    if (sh.bytes() > kMaxArrayBytes)
      fail(tpos, fmt::format("shape {} holds {:.3g} bytes, more than the {} TiB racksim takes for one array "
                             "(docs/decisions.md, \"Input limits\")",
                             sh.to_string(), sh.bytes(), kMaxArrayBytes / (1ull << 40)));
    return sh;
  }

  void layout(Shape& sh) {
    const std::size_t b = p_;
    ++p_;  // '{'
    skip_ws();
    while (!at_end() && !peek(':') && !peek('}')) {
      sh.minor_to_major.push_back(integer("a layout dimension"));
      while (!at_end() && std::isalpha(static_cast<unsigned char>(s_[p_]))) ++p_;  // dim-level suffixes
      skip_ws();
      if (!eat(',')) break;
      skip_ws();
    }
    skip_ws();
    if (eat(':')) {
      int paren = 0;
      while (!at_end() && !(paren == 0 && peek('}'))) {
        const char c = s_[p_];
        if (c == '(') ++paren;
        else if (c == ')') {
          if (--paren < 0) fail(p_, "unbalanced ')' in a layout");
        } else if (c == 'S' && paren == 0 && p_ + 1 < s_.size() && s_[p_ + 1] == '(') {
          p_ += 2;
          const int64_t ms = integer("a memory space");
          if (ms < 0 || ms > 1000) fail(p_, "memory space out of range");
          sh.memory_space = static_cast<int>(ms);
          if (!eat(')')) fail(p_, "expected ')' after the memory space");
          continue;
        } else if (c == '\n') {
          break;
        }
        ++p_;
      }
    }
    if (!eat('}')) fail(b, "unterminated layout (expected '}')");
  }

  bool looks_like_shape() const {
    if (peek('(')) return true;
    std::size_t e = p_;
    while (e < s_.size() && ident_char(s_[e])) ++e;
    return e < s_.size() && s_[e] == '[' && find_type(s_.substr(p_, e - p_));
  }

  // Literal text up to the closing bracket at depth 0 (or, with stop_at_comma, a top-level ','),
  // stepping over nested brackets and quoted strings; p_ is left on the stopping character.
  std::string balanced_text(bool stop_at_comma) {
    const std::size_t b = p_;
    int depth = 0;
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == '"') {
        skip_string();
        continue;
      }
      if (c == '(' || c == '{' || c == '[') ++depth;
      if (c == ')' || c == '}' || c == ']') {
        if (depth == 0) break;
        --depth;
      }
      if (stop_at_comma && depth == 0 && c == ',') break;
      ++p_;
    }
    return std::string(s_.substr(b, p_ - b));
  }

  // The text between the parentheses of constant(...).
  std::string balanced_literal() {
    const std::size_t b = p_;
    std::string text = balanced_text(false);
    if (at_end()) fail(b, "unterminated operand list");
    return text;
  }

  void operands(Instruction& inst) {
    // p_ is after '('.
    if (inst.opcode == "constant") {
      inst.literal = balanced_literal();
      expect(')', "to close constant(...)");
      return;
    }
    skip_ws();
    if (eat(')')) return;
    if (inst.opcode == "parameter") {
      inst.parameter_number = integer("a parameter number");
      if (inst.parameter_number < 0 || inst.parameter_number > 1'000'000) fail(p_, "parameter number out of range");
      inst.literal = std::to_string(inst.parameter_number);
      expect(')', "to close parameter(...)");
      return;
    }
    for (;;) {
      skip_ws();
      if (peek('%')) {
        inst.operand_names.push_back(name("an operand name"));
      } else if (!at_end() && (std::isdigit(static_cast<unsigned char>(s_[p_])) || s_[p_] == '-' || s_[p_] == '{' ||
                               s_[p_] == '"')) {
        // A literal operand (some opcodes print numbers or strings): kept, not a reference.
        if (!inst.literal.empty()) inst.literal += ",";
        inst.literal += balanced_text(true);
      } else if (looks_like_shape()) {
        shape();  // typed operand: "f32[2]{0} %x"
        inst.operand_names.push_back(name("an operand name after its shape"));
      } else {
        inst.operand_names.push_back(name("an operand"));
      }
      skip_ws();
      if (eat(',')) continue;
      if (eat(')')) break;
      fail(p_, fmt::format("expected ',' or ')' in the operands of '{}', found {}", inst.name, describe_here()));
    }
  }

  static void split_names(const std::string& v, std::vector<std::string>& out) {
    std::string cur;
    for (char c : v) {
      if (c == '{' || c == '}' || c == ',' || c == ' ' || c == '%' || c == '\n' || c == '\t') {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
  }

  static std::string metadata_field(const std::string& v, std::string_view key) {
    // metadata={op_name="..." source_file="..." ...}
    std::size_t i = 0;
    while ((i = v.find(key, i)) != std::string::npos) {
      const bool boundary = i == 0 || v[i - 1] == '{' || v[i - 1] == ' ' || v[i - 1] == ',';
      const std::size_t q = i + key.size();
      if (boundary && q + 1 < v.size() && v[q] == '=' && v[q + 1] == '"') {
        std::size_t e = q + 2;
        while (e < v.size() && v[e] != '"') {
          if (v[e] == '\\') ++e;
          ++e;
        }
        if (e > v.size()) e = v.size();
        return unescape(std::string_view(v).substr(q + 2, e - (q + 2)));
      }
      i = q;
    }
    return "";
  }

  Instruction instruction() {
    Instruction inst;
    skip_ws();
    const auto [l, c] = line_col(p_);
    inst.line = l;
    inst.column = c;
    if (eat_word("ROOT")) {
      inst.is_root = true;
      skip_ws();
    }
    inst.name = name("an instruction name");
    expect('=', fmt::format("after instruction name '{}'", inst.name).c_str());
    inst.shape = shape();
    skip_ws();
    inst.opcode = std::string(ident("an opcode"));
    expect('(', fmt::format("after opcode '{}'", inst.opcode).c_str());
    operands(inst);
    for (;;) {
      skip_ws();
      if (!eat(',')) break;
      inst.attrs.push_back(attribute());
    }
    for (const auto& a : inst.attrs) {
      if (is_call_attr(a.name)) split_names(a.value, inst.called);
      if (a.name == "metadata") inst.op_name = metadata_field(a.value, "op_name");
      if (a.name == "custom_call_target") {
        std::string_view v = a.value;
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
        inst.custom_call_target = unescape(v);
      }
    }
    return inst;
  }

  // Operand counts and shapes that the opcode requires (what XLA's verifier checks, for the
  // opcodes whose shapes the importer reads): a module that breaks them was not printed by XLA.
  void verify_shapes(const Computation& c, const Instruction& inst) const {
    const std::string& op = inst.opcode;
    auto bad = [&](const std::string& why) {
      fail_at(inst.line, inst.column, fmt::format("'{}' ({} {}): {}", inst.name, op, inst.shape.to_string(), why));
    };
    auto operand = [&](std::size_t i) -> const Shape& {
      return c.instructions[static_cast<std::size_t>(inst.operands[i])].shape;
    };
    auto need_operands = [&](std::size_t n) {
      if (inst.operands.size() != n)
        bad(fmt::format("takes {} operand{}, has {}", n, n == 1 ? "" : "s", inst.operands.size()));
    };
    auto need_array = [&](const Shape& s, const std::string& what) {
      if (s.is_tuple) bad(fmt::format("{} must be an array, not the tuple {}", what, s.to_string()));
    };
    auto same_dims = [&](const Shape& s, const std::string& what) {
      need_array(s, what);
      if (s.dims != inst.shape.dims)
        bad(fmt::format("{} {} does not have the result's dimensions", what, s.to_string()));
    };
    static const std::set<std::string, std::less<>> binary = {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "and", "or", "xor",
        "atan2", "compare", "shift-left", "shift-right-arithmetic", "shift-right-logical", "complex"};
    static const std::set<std::string, std::less<>> unary = {
        "abs", "negate", "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "sqrt", "rsqrt",
        "cbrt", "convert", "copy", "not", "sign", "floor", "ceil", "cosine", "sine", "tan", "logistic",
        "round-nearest-afz", "round-nearest-even", "is-finite", "real", "imag", "popcnt", "count-leading-zeros",
        "erf"};
    if (op == "dot") {
      need_operands(2);
      const Shape& lhs = operand(0);
      const Shape& rhs = operand(1);
      need_array(lhs, "the left operand");
      need_array(rhs, "the right operand");
      need_array(inst.shape, "the result");
      auto dims_attr = [&](const char* key, const Shape& s) {
        std::vector<int64_t> out;
        if (const std::string* v = inst.attr(key)) {
          std::string cur;
          for (char ch : *v + ",") {
            if (std::isdigit(static_cast<unsigned char>(ch))) {
              cur += ch;
            } else if (ch == ',' || ch == '}') {
              if (cur.empty()) continue;
              if (cur.size() > 6 || std::stoll(cur) >= static_cast<int64_t>(s.dims.size()))
                bad(fmt::format("{}={} names a dimension that {} does not have", key, *v, s.to_string()));
              out.push_back(std::stoll(cur));
              cur.clear();
            } else if (ch != '{' && ch != ' ') {
              bad(fmt::format("{}={} is not a list of dimensions", key, *v));
            }
          }
        }
        for (std::size_t i = 0; i < out.size(); ++i)
          for (std::size_t j = i + 1; j < out.size(); ++j)
            if (out[i] == out[j]) bad(fmt::format("{}={} names a dimension twice", key, *inst.attr(key)));
        return out;
      };
      const auto lc = dims_attr("lhs_contracting_dims", lhs), rc = dims_attr("rhs_contracting_dims", rhs);
      const auto lb = dims_attr("lhs_batch_dims", lhs), rb = dims_attr("rhs_batch_dims", rhs);
      if (lc.size() != rc.size()) bad("lhs and rhs contract different numbers of dimensions");
      if (lb.size() != rb.size()) bad("lhs and rhs have different numbers of batch dimensions");
      for (std::size_t i = 0; i < lc.size(); ++i)
        if (lhs.dims[static_cast<std::size_t>(lc[i])] != rhs.dims[static_cast<std::size_t>(rc[i])])
          bad(fmt::format("contracting dimensions differ: {} (lhs dimension {}) against {} (rhs dimension {})",
                          lhs.dims[static_cast<std::size_t>(lc[i])], lc[i], rhs.dims[static_cast<std::size_t>(rc[i])],
                          rc[i]));
      for (std::size_t i = 0; i < lb.size(); ++i)
        if (lhs.dims[static_cast<std::size_t>(lb[i])] != rhs.dims[static_cast<std::size_t>(rb[i])])
          bad(fmt::format("batch dimensions differ: {} against {}", lhs.dims[static_cast<std::size_t>(lb[i])],
                          rhs.dims[static_cast<std::size_t>(rb[i])]));
      for (const auto& d : lc)
        for (const auto& e : lb)
          if (d == e) bad("a left dimension is both contracting and batch");
      for (const auto& d : rc)
        for (const auto& e : rb)
          if (d == e) bad("a right dimension is both contracting and batch");
      // The result: batch dimensions, then the free dimensions of lhs, then those of rhs.
      std::vector<int64_t> want;
      for (auto b : lb) want.push_back(lhs.dims[static_cast<std::size_t>(b)]);
      auto free_dims = [&](const Shape& s, const std::vector<int64_t>& con, const std::vector<int64_t>& bat) {
        for (std::size_t d = 0; d < s.dims.size(); ++d) {
          const auto di = static_cast<int64_t>(d);
          if (std::find(con.begin(), con.end(), di) == con.end() && std::find(bat.begin(), bat.end(), di) == bat.end())
            want.push_back(s.dims[d]);
        }
      };
      free_dims(lhs, lc, lb);
      free_dims(rhs, rc, rb);
      if (want != inst.shape.dims) {
        Shape w;
        w.element_type = inst.shape.element_type;
        w.dims = want;
        bad(fmt::format("{} x {} gives {}, not the result's shape", lhs.to_string(), rhs.to_string(), w.to_string()));
      }
    } else if (binary.count(op)) {
      need_operands(2);
      same_dims(operand(0), "the first operand");
      same_dims(operand(1), "the second operand");
    } else if (unary.count(op)) {
      need_operands(1);
      same_dims(operand(0), "the operand");
    } else if (op == "select") {
      need_operands(3);
      need_array(operand(0), "the predicate");
      if (!operand(0).dims.empty() && operand(0).dims != inst.shape.dims)
        bad(fmt::format("the predicate {} is neither a scalar nor of the result's dimensions", operand(0).to_string()));
      same_dims(operand(1), "the second operand");
      same_dims(operand(2), "the third operand");
    } else if (op == "reshape" || op == "transpose") {
      need_operands(1);
      need_array(operand(0), "the operand");
      need_array(inst.shape, "the result");
      if (operand(0).elements() != inst.shape.elements())
        bad(fmt::format("the operand {} has {:.0f} elements, the result {:.0f}", operand(0).to_string(),
                        operand(0).elements(), inst.shape.elements()));
    } else if (op == "get-tuple-element" || op == "while" || op == "bitcast" || op == "broadcast" ||
               op == "slice" || op == "reduce-precision") {
      need_operands(1);
    }
  }

  Computation computation() {
    Computation c;
    comp_pos_ = p_;
    c.line = line_col(p_).first;
    if (eat_word("ENTRY")) c.is_entry = true;
    c.name = name("a computation name");
    skip_ws();
    if (eat('(')) {
      // Signature: (name: shape, ...) -> shape
      skip_ws();
      if (!eat(')')) {
        for (;;) {
          name("a parameter name");
          expect(':', "after a parameter name in a computation signature");
          shape();
          skip_ws();
          if (eat(',')) continue;
          if (eat(')')) break;
          fail(p_, fmt::format("expected ',' or ')' in the signature of '{}', found {}", c.name, describe_here()));
        }
      }
      skip_ws();
      if (!peek2("->")) fail(p_, fmt::format("expected '->' in the signature of '{}', found {}", c.name, describe_here()));
      p_ += 2;
      shape();
    }
    for (;;) {
      skip_ws();
      if (!eat(',')) break;
      attribute();  // e.g. execution_thread="..."
    }
    expect('{', fmt::format("to open computation '{}'", c.name).c_str());
    for (;;) {
      skip_ws();
      if (at_end()) fail(comp_pos_, fmt::format("computation '{}' is never closed with '}}'", c.name));
      if (eat('}')) break;
      Instruction inst = instruction();
      if (c.index.count(inst.name))
        fail_at(inst.line, inst.column, fmt::format("instruction '{}' is defined twice in '{}'", inst.name, c.name));
      if (c.instructions.size() >= 50'000'000) fail(p_, "too many instructions");
      c.index[inst.name] = static_cast<int>(c.instructions.size());
      if (inst.is_root) {
        if (c.root >= 0) fail_at(inst.line, inst.column, fmt::format("computation '{}' has two ROOT instructions", c.name));
        c.root = static_cast<int>(c.instructions.size());
      }
      c.instructions.push_back(std::move(inst));
    }
    if (c.instructions.empty()) fail(comp_pos_, fmt::format("computation '{}' has no instructions", c.name));
    if (c.root < 0) c.root = static_cast<int>(c.instructions.size()) - 1;
    // Resolve operands and parameters.
    for (std::size_t ii = 0; ii < c.instructions.size(); ++ii) {
      auto& inst = c.instructions[ii];
      for (const auto& on : inst.operand_names) {
        auto it = c.index.find(on);
        if (it == c.index.end())
          fail_at(inst.line, inst.column,
                  fmt::format("operand '{}' of '{}' is not defined in computation '{}'", on, inst.name, c.name));
        // XLA prints a computation in post order: an operand is defined before its users.
        if (static_cast<std::size_t>(it->second) >= ii)
          fail_at(inst.line, inst.column,
                  fmt::format("operand '{}' of '{}' is used before it is defined (line {})", on, inst.name,
                              c.instructions[static_cast<std::size_t>(it->second)].line));
        inst.operands.push_back(it->second);
      }
      if (inst.opcode == "parameter") {
        if (inst.parameter_number < 0) fail_at(inst.line, inst.column, "parameter without a number");
        const auto n = static_cast<std::size_t>(inst.parameter_number);
        if (n >= 100'000) fail_at(inst.line, inst.column, "parameter number out of range");
        if (c.parameters.size() <= n) c.parameters.resize(n + 1, -1);
        if (c.parameters[n] >= 0)
          fail_at(inst.line, inst.column, fmt::format("parameter({}) appears twice in '{}'", n, c.name));
        c.parameters[n] = c.index[inst.name];
      }
    }
    for (std::size_t i = 0; i < c.parameters.size(); ++i)
      if (c.parameters[i] < 0) fail(comp_pos_, fmt::format("computation '{}' has no parameter({})", c.name, i));
    for (const auto& inst : c.instructions) verify_shapes(c, inst);
    return c;
  }
};

}  // namespace

// ---- Shape

double Shape::elements() const {
  if (is_tuple) return 0;
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(d);
  return n;
}

double Shape::bytes() const {
  if (is_tuple) {
    double b = 0;
    for (const auto& e : tuple) b += e.bytes();
    return b;
  }
  const auto eb = element_bytes(element_type);
  return eb ? elements() * *eb : 0;
}

int Shape::leaf_count() const {
  if (!is_tuple) return 1;
  int n = 0;
  for (const auto& e : tuple) n += e.leaf_count();
  return n;
}

int Shape::leaf_offset(int tuple_index) const {
  int off = 0;
  for (int i = 0; i < tuple_index && i < static_cast<int>(tuple.size()); ++i) off += tuple[static_cast<std::size_t>(i)].leaf_count();
  return off;
}

std::string Shape::to_string() const {
  std::string s;
  if (is_tuple) {
    s += '(';
    for (std::size_t i = 0; i < tuple.size(); ++i) {
      if (i) s += ", ";
      s += tuple[i].to_string();
    }
    s += ')';
    return s;
  }
  s += element_type;
  s += '[';
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  if (memory_space != 0) s += fmt::format("{{S({})}}", memory_space);
  return s;
}

std::optional<double> element_bytes(std::string_view type) {
  const auto* t = find_type(type);
  if (!t) return std::nullopt;
  return t->bytes;
}
bool is_float_type(std::string_view type) {
  const auto* t = find_type(type);
  return t && t->kind == 'f';
}
bool is_integer_type(std::string_view type) {
  const auto* t = find_type(type);
  return t && t->kind == 'i';
}

const std::string* Instruction::attr(std::string_view key) const {
  for (const auto& a : attrs)
    if (a.name == key) return &a.value;
  return nullptr;
}

const Computation* Module::find(const std::string& n) const {
  auto it = computation_index.find(n);
  return it == computation_index.end() ? nullptr : &computations[static_cast<std::size_t>(it->second)];
}

// ---- Entry points

namespace {
[[noreturn]] void file_error(const std::string& path, const std::string& msg) {
  input::Diagnostic d;
  d.where.file = path;
  d.message = msg;
  throw input::InputError(std::vector<input::Diagnostic>{d});
}
}  // namespace

Module parse_hlo_text(std::string_view text, const std::string& file_label) {
  Parser p(text, file_label);
  return p.parse();
}

namespace {

// Inflates every member of a gzip file (gzip -c a b > ab.gz is one valid file of two members),
// handing the text to `sink` in blocks; throws InputError past `max_bytes` of text, so a gzip
// bomb costs time up to the limit but no memory.
void inflate_gzip(const std::string& path, std::string& raw, std::uint64_t max_bytes,
                  const std::function<void(const char*, std::size_t)>& sink) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw std::runtime_error("zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  std::size_t left = raw.size();
  std::vector<char> buf(std::size_t{1} << 16);
  std::uint64_t total = 0;
  for (;;) {
    // avail_in is 32 bits: feed a file larger than 4 GiB in pieces.
    if (zs.avail_in == 0 && left > 0) {
      zs.avail_in = static_cast<uInt>(std::min<std::size_t>(left, std::size_t{1} << 30));
      left -= zs.avail_in;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && zs.avail_in == 0 && left == 0))
      file_error(path, fmt::format("corrupt gzip data (zlib: {})", zs.msg ? zs.msg : "error"));
    const std::size_t n = buf.size() - zs.avail_out;
    total += n;
    if (total > max_bytes)
      file_error(path, fmt::format("the HLO text inside this gzip file is larger than {} (the limit of racksim, "
                                   "docs/decisions.md \"Input limits\"): a gzip bomb, or not a training step",
                                   input::format_limit(max_bytes)));
    if (n > 0) sink(buf.data(), n);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && left == 0) return;
      // Another gzip member may follow (concatenated files); trailing zero padding is ignored.
      const auto* next = reinterpret_cast<const unsigned char*>(zs.next_in);
      if (zs.avail_in >= 2 && next[0] == 0x1f && next[1] == 0x8b) {
        if (inflateReset(&zs) != Z_OK) throw std::runtime_error("zlib inflateReset failed");
        continue;
      }
      bool zeros = left == 0;
      for (uInt i = 0; i < zs.avail_in && zeros; ++i) zeros = next[i] == 0;
      if (zeros) return;
      file_error(path, "data after the end of the gzip stream that is not another gzip member");
    }
    if (rc == Z_BUF_ERROR || (zs.avail_in == 0 && left == 0 && n == 0))
      file_error(path, "truncated gzip data (the file ends inside the compressed stream)");
  }
}

}  // namespace

std::string read_hlo_text(const std::string& path) { return read_hlo_text(path, input::limits::kMaxHloTextBytes); }

std::string read_hlo_text(const std::string& path, std::uint64_t max_bytes) {
  std::string raw = input::read_file_bounded(path, max_bytes, "an HLO module", input::Binary::stop_unless_gzip);
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b) {
    if (const auto nul = raw.find('\0'); nul != std::string::npos) {
      const int line = 1 + static_cast<int>(std::count(raw.begin(), raw.begin() + static_cast<long>(nul), '\n'));
      const auto bol = raw.rfind('\n', nul);
      input::Diagnostic d;
      d.where = {path, line, static_cast<int>(nul - (bol == std::string::npos ? 0 : bol + 1)) + 1};
      d.message = "HLO: binary data (a NUL byte), not HLO text nor gzip";
      throw input::InputError(std::vector<input::Diagnostic>{d});
    }
    return raw;
  }
  // gzip: measure the text first (no memory), then inflate it into one allocation of its size.
  std::uint64_t size = 0;
  inflate_gzip(path, raw, max_bytes, [&](const char*, std::size_t n) { size += n; });
  std::string out;
  out.reserve(static_cast<std::size_t>(size));
  inflate_gzip(path, raw, max_bytes, [&](const char* p, std::size_t n) { out.append(p, n); });
  return out;
}

Module load_hlo_file(const std::string& path) { return parse_hlo_text(read_hlo_text(path), path); }

}  // namespace racksim::workloads::hlo
