#include "workloads/importers/megatron_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <sstream>
#include <stdexcept>

#include "input/diagnostics.h"
#include "input/files.h"
#include "workloads/importers/scenario_writer.h"
#include "workloads/model_spec.h"
#include "workloads/training_config.h"

namespace racksim::workloads::importers {

namespace fs = std::filesystem;

namespace {

using input::input_error;

// ------------------------------------------------------------------ reading the arguments

struct Arg {
  std::string flag;                  // without the leading "--"
  std::optional<std::string> value;  // none for a switch
  int line = 0;
};

// Flags that never take a value (so a following token is not swallowed).
const std::set<std::string>& switches() {
  static const std::set<std::string> s = {
      "bf16", "fp16", "swiglu", "squared-relu", "group-query-attention", "untie-embeddings-and-output-weights",
      "sequence-parallel", "tp-comm-overlap", "use-distributed-optimizer", "overlap-grad-reduce",
      "overlap-param-gather", "overlap-param-gather-with-optimizer-step", "moe-enable-deepep", "create-all-gather-group",
      "overlap-moe-expert-parallel-comm", "multi-latent-attention", "recompute-activations", "use-flash-attn",
      "enable-cuda-graph", "external-cuda-graph", "optimizer-cpu-offload", "use-mcore-models", "use-legacy-models",
      "disable-bias-linear", "add-qkv-bias", "qk-layernorm", "apply-layernorm-1p", "no-position-embedding",
      "use-rotary-position-embeddings", "moe-grouped-gemm", "moe-permute-fusion", "mock-data", "no-load-optim",
      "no-load-rng", "log-throughput", "profile", "manual-gc", "cross-entropy-loss-fusion", "calculate-per-token-loss",
      "grad-reduce-in-bf16", "fp8-param-gather", "no-fp8-wgrad", "no-masked-softmax-fusion", "no-bias-gelu-fusion",
      "no-bias-swiglu-fusion", "no-rope-fusion", "no-gradient-accumulation-fusion", "no-mmap-bin-files",
      "no-create-attention-mask-in-dataloader", "accumulate-allreduce-grads-in-fp32", "attention-softmax-in-fp32",
      "moe-router-enable-expert-bias", "moe-router-pre-softmax", "moe-shared-expert-overlap",
      "moe-pad-expert-input-to-capacity", "moe-per-layer-logging", "moe-router-fusion", "moe-router-padding-for-fp8",
      "moe-router-padding-for-quantization", "use-precision-aware-optimizer", "fine-grained-activation-offloading",
      "moe-router-force-load-balancing",
      "delay-wgrad-compute", "account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split",
      "use-torch-fsdp2", "use-custom-fsdp", "use-megatron-fsdp", "async-save", "auto-detect-ckpt-format",
      "use-checkpoint-args", "log-params-norm", "log-num-zeros-in-grad", "log-timers-to-tensorboard",
      "log-memory-to-tensorboard", "log-validation-ppl-to-tensorboard", "log-world-size-to-tensorboard",
      "no-save-optim", "no-save-rng", "use-dist-ckpt", "ckpt-fully-parallel-save", "ckpt-fully-parallel-load",
      "no-async-tensor-model-parallel-allreduce", "no-check-for-nan-in-loss-and-grad", "check-for-nan-in-loss-and-grad",
      "exit-on-missing-checkpoint", "moe-use-upcycling", "use-te-rng-tracker", "te-rng-tracker",
      "moe-use-legacy-grouped-gemm", "decoupled-weight-decay", "no-persist-layer-norm", "defer-embedding-wgrad-compute",
      "enable-experimental",
  };
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// A GPU count as a launcher or Megatron's log prints it: whole digits, 1 to 1,048,576; nullopt for anything else
// (4294967304, 8.9, -8, abc, an elastic 1:4).
std::optional<int> gpu_count(const std::string& v) {
  const bool digits = !v.empty() && v.size() <= 7 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long n = digits ? std::stol(v) : 0;
  if (n < 1 || n > 1'048'576) return std::nullopt;
  return static_cast<int>(n);
}

// Where the "))" that closes the "$((" at `start` is (its parentheses counted: $((2*(3+4))) ends at the last two), or
// npos.
std::size_t arith_end(const std::string& text, std::size_t start) {
  int depth = 0;
  for (std::size_t k = start + 3; k < text.size(); ++k) {
    if (text[k] == '(') {
      ++depth;
    } else if (text[k] == ')') {
      if (depth == 0) return k + 1 < text.size() && text[k + 1] == ')' ? k : std::string::npos;
      --depth;
    }
  }
  return std::string::npos;
}

// A shell word past Shell::kMaxExpandedBytes, at `line` of the script.
// A script line racksim refuses (its shell variables past their bound, a torchrun count that is not one).
struct ScriptError : std::length_error {
  int line;
  ScriptError(int l, const std::string& what) : std::length_error(what), line(l) {}
};

class Shell {
 public:
  std::map<std::string, std::string> vars;
  // expand() met what racksim cannot tell: a variable the script never set (a script argument, $SLURM_*) or set from
  // one (`untold`), a command's output, a special parameter ($#, $@), an expansion it does not evaluate (${X/a/b}).
  bool unset_seen = false;
  std::set<std::string> untold;
  int line = 0;  // the script line being read, for the expansion bound's message
  // A variable's value, or a word, expanded: at most this long. A script that doubles a variable line after line
  // (A=$A$A) would otherwise grow it exponentially; a launch script's longest word is a few kilobytes.
  static constexpr std::size_t kMaxExpandedBytes = std::size_t{1} << 20;
  // ${X#p} ${X%p} and their longest forms are evaluated on values up to this long (a path, a model name).
  static constexpr std::size_t kMaxPatternRemovalBytes = 1024;
  static constexpr std::size_t kMaxPatternReplaceBytes = 256;  // ${X/p/r}: as many ends as starts are tried
  // Glob matches a script's ${X#p} ${X/p/r} forms may take together (about a second); past it a match is refused
  // (counted in glob_refused), and the form gives the variable's value unchanged, not told.
  std::size_t glob_matches_left = 2'000'000;
  std::size_t glob_refused = 0;
  bool glob(const std::string& pattern, const std::string& text) {
    if (glob_matches_left == 0) {
      ++glob_refused;
      unset_seen = true;
      return false;
    }
    --glob_matches_left;
    return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
  }

  // Evaluates $((...)) as bash does for what launch scripts write: integers (decimal, 0-octal, 0x-hex), variables,
  // + - * / % **, unary signs and parentheses. $VAR and ${VAR:-default} are expanded as text first (bash's order); a
  // bare name is read as an expression of its own, as bash reads it (X=1+2: $((X*2)) is 6; B=A: $((B)) is A's value).
  // Division by zero and a result past 64 bits are refused at the script's line (bash fails on the first and wraps the
  // second silently), unless a variable in the expression is unset: an sbatch script's $SLURM_* are, where racksim
  // reads it, so the expression stays unexpanded as one racksim cannot evaluate. What racksim cannot read (i++, ++i,
  // comparisons, ?:, base#n) stays as written, so a flag's error shows it.
  std::string arith(const std::string& expr) {
    const std::string unread = "$((" + expr + "))";
    std::string text = expand(expr);
    bool unset = false;
    std::string s = substitute_names(text, 0, unset);
    unset_seen = unset_seen || unset;
    if (s.size() > 4096) return unread;
    ArithParser p{s, 0, line, expr, unset};
    try {
      const auto v = p.parse();
      return v ? std::to_string(*v) : unread;
    } catch (const ArithParser::Unevaluable&) {
      return unread;
    }
  }
  // Bare variable names replaced by their values, each in parentheses and itself read for names (8 levels deep);
  // an unset or empty one is 0, as in bash, and noted.
  std::string substitute_names(const std::string& e, int depth, bool& unset) {
    std::string s;
    for (std::size_t i = 0; i < e.size();) {
      const bool starts_name = std::isalpha(static_cast<unsigned char>(e[i])) || e[i] == '_';
      const bool in_number = i > 0 && std::isalnum(static_cast<unsigned char>(e[i - 1]));  // 0x1f's x and f
      if (starts_name && !in_number) {
        std::size_t j = i;
        while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_')) ++j;
        auto it = vars.find(e.substr(i, j - i));
        const bool has = it != vars.end() && !trim(it->second).empty();
        unset = unset || !has;
        unset_seen = unset_seen || (it != vars.end() && untold.count(it->first) > 0);
        s.push_back('(');
        if (!has) s.push_back('0');
        else if (depth < 8) s.append(substitute_names(it->second, depth + 1, unset));
        else s.append("?");  // (a chain of names past 8: not read)
        s.push_back(')');
        i = j;
      } else {
        s.push_back(e[i++]);
      }
      if (s.size() > 4096) break;
    }
    return s;
  }

  // A recursive-descent reader of the substituted expression; nullopt when it is not one racksim reads.
  struct ArithParser {
    struct Unevaluable {};
    const std::string& s;
    std::size_t i;
    int line;
    const std::string& original;
    bool unset_variable = false;  // an unset variable took part: a division by zero is not the script's own
    int depth = 0;
    [[noreturn]] void refuse(const std::string& why) const {
      if (unset_variable) throw Unevaluable{};
      throw ScriptError(line, fmt::format("$(({})): {}", original, why));
    }
    void ws() {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    }
    bool eat(const char* tok) {
      ws();
      const std::size_t n = std::strlen(tok);
      if (s.compare(i, n, tok) != 0) return false;
      if (n == 1 && tok[0] == '*' && i + 1 < s.size() && s[i + 1] == '*') return false;  // '*' is not '**'
      i += n;
      return true;
    }
    std::optional<long long> parse() {
      auto v = add();
      ws();
      if (!v || i != s.size()) return std::nullopt;
      return v;
    }
    std::optional<long long> add() {
      auto acc = mul();
      while (acc) {
        if (eat("+")) {
          auto w = mul();
          if (!w) return std::nullopt;
          if (__builtin_add_overflow(*acc, *w, &*acc)) refuse("the result passes 64 bits");
        } else if (eat("-")) {
          auto w = mul();
          if (!w) return std::nullopt;
          if (__builtin_sub_overflow(*acc, *w, &*acc)) refuse("the result passes 64 bits");
        } else {
          break;
        }
      }
      return acc;
    }
    std::optional<long long> mul() {
      auto acc = power();
      while (acc) {
        char op = 0;
        if (eat("*")) op = '*';
        else if (eat("/")) op = '/';
        else if (eat("%")) op = '%';
        else break;
        auto w = power();
        if (!w) return std::nullopt;
        if (op == '*') {
          if (__builtin_mul_overflow(*acc, *w, &*acc)) refuse("the result passes 64 bits");
        } else {
          if (*w == 0) refuse("division by 0");
          if (*acc == std::numeric_limits<long long>::min() && *w == -1) refuse("the result passes 64 bits");
          acc = op == '/' ? *acc / *w : *acc % *w;
        }
      }
      return acc;
    }
    std::optional<long long> power() {  // right-associative; bash reads a unary sign before it
      auto base = unary();
      if (!base || !eat("**")) return base;
      auto ex = power();
      if (!ex) return std::nullopt;
      if (*ex < 0) refuse("a negative exponent");
      if (*base == 0 || *base == 1) return *ex == 0 ? 1 : *base;
      if (*base == -1) return *ex % 2 == 0 ? 1 : -1;
      long long r = 1;  // |base| >= 2: 64 bits pass within 63 factors
      for (long long k = 0; k < *ex; ++k)
        if (__builtin_mul_overflow(r, *base, &r)) refuse("the result passes 64 bits");
      return r;
    }
    std::optional<long long> unary() {
      if (++depth > 200) return std::nullopt;  // (nesting a launch script does not reach)
      ws();
      if (s.compare(i, 2, "--") == 0 || s.compare(i, 2, "++") == 0) return std::nullopt;  // bash's ++X/--X: not read
      std::optional<long long> v;
      if (eat("-")) {
        v = unary();
        if (v && __builtin_sub_overflow(0LL, *v, &*v)) refuse("the result passes 64 bits");
      } else if (eat("+")) {
        v = unary();
      } else {
        v = primary();
      }
      --depth;
      return v;
    }
    std::optional<long long> primary() {
      ws();
      if (eat("(")) {
        auto v = add();
        if (!v || !eat(")")) return std::nullopt;
        return v;
      }
      const std::size_t b = i;
      while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
      const std::string lit = s.substr(b, i - b);
      if (lit.empty() || lit.size() > 24 || !std::isdigit(static_cast<unsigned char>(lit[0]))) return std::nullopt;
      // bash's constants: 0x hexadecimal, a leading 0 octal, else decimal (base#n is not read).
      const bool hex = lit.size() > 2 && lit[0] == '0' && (lit[1] == 'x' || lit[1] == 'X');
      const int base = hex ? 16 : lit.size() > 1 && lit[0] == '0' ? 8 : 10;
      const std::string digits = hex ? lit.substr(2) : lit;
      for (char c : digits) {
        const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                      : std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10 : 99;
        if (d >= base) return std::nullopt;  // (bash: "value too great for base"; 08 is such)
      }
      errno = 0;
      const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
      if (errno == ERANGE || v > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
        refuse("the result passes 64 bits");
      return static_cast<long long>(v);
    }
  };

  // All variables' values together: at most this much (10,000 lines of B1=$A would each stay under the word bound).
  static constexpr std::size_t kMaxVariableBytes = std::size_t{16} << 20;
  std::size_t variable_bytes = 0;
  void set_var(const std::string& name, std::string value) {
    variable_bytes += value.size();
    if (variable_bytes > kMaxVariableBytes)
      throw ScriptError(line, fmt::format("the script's shell variables hold more than {} bytes together; racksim "
                                               "reads launch scripts' variables up to that size",
                                               kMaxVariableBytes));
    vars[name] = std::move(value);
  }
  void check_length(const std::string& s) const {
    if (s.size() > kMaxExpandedBytes)
      throw ScriptError(line, fmt::format("a shell word expands to more than {} bytes (a variable that grows line "
                                               "after line?); racksim reads launch scripts' variables up to that size",
                                               kMaxExpandedBytes));
  }

  // ${...} as bash reads it: NAME; NAME:-d NAME-d NAME:=d NAME=d (a default; := and = assign it); NAME:+a NAME+a;
  // NAME#p NAME##p NAME%p NAME%%p (a glob removed from the front or back, shortest or longest); #NAME (the length).
  // ${X,,} ${X^^} ${X,} ${X^} (case), ${X:o} ${X:o:n} (a substring), ${X/p/r} and its kin (replacement). Other
  // forms (${!X}, ${X@Q}) give the value unchanged, and the word is one racksim cannot tell.
  std::string parameter(const std::string& body) {
    const bool length = !body.empty() && body[0] == '#' && body.size() > 1;
    const std::size_t from = length ? 1 : 0;
    std::size_t n = from;
    while (n < body.size() && (std::isalnum(static_cast<unsigned char>(body[n])) || body[n] == '_')) ++n;
    if (n == from && n < body.size() && (body[n] == '@' || body[n] == '*')) ++n;  // ${@:-x}: no script arguments
    const std::string name = body.substr(from, n - from), op = body.substr(n);
    auto it = vars.find(name);
    const bool set = it != vars.end();
    const std::string value = set ? it->second : "";
    unset_seen = unset_seen || untold.count(name) > 0 || name == "@" || name == "*";
    if (name.empty()) {
      unset_seen = true;
      return "";
    }
    if (length && op.empty()) {
      unset_seen = unset_seen || !set;
      return std::to_string(value.size());
    }
    if (op.empty()) {
      unset_seen = unset_seen || !set;
      return value;
    }
    for (const char* sep : {":-", ":=", ":+", "-", "=", "+"}) {
      const std::size_t k = std::strlen(sep);
      if (op.compare(0, k, sep) != 0) continue;
      const bool colon = sep[0] == ':';
      const char kind = sep[colon ? 1 : 0];
      const bool present = colon ? !value.empty() : set;  // `:` also takes an empty value as absent
      // (the other word is expanded only where it is used, as bash does: ${N:-$((256 / DP))} with N set divides nothing)
      if (kind == '+') return present ? expand(unquote(op.substr(k))) : "";
      if (present) return value;
      const std::string alt = expand(unquote(op.substr(k)));
      if (kind == '=') set_var(name, alt);
      return alt;
    }
    for (const char* sep : {"##", "#", "%%", "%"}) {
      const std::size_t k = std::strlen(sep);
      if (op.compare(0, k, sep) != 0) continue;
      unset_seen = unset_seen || !set;
      const std::string pat = expand(unquote(op.substr(k)));
      const bool front = sep[0] == '#', longest = k == 2;
      const std::size_t len = value.size();
      // Each cut is one glob match over up to the whole value: values past a launch script's paths and names are
      // left as they are, and told as not evaluated (a 480 KB value took seconds per expansion).
      if (len > kMaxPatternRemovalBytes) {
        unset_seen = true;
        return value;
      }
      for (std::size_t t = 0; t <= len; ++t) {
        const std::size_t cut = longest ? len - t : t;  // characters removed
        const std::string piece = front ? value.substr(0, cut) : value.substr(len - cut);
        if (glob(pat, piece)) return front ? value.substr(cut) : value.substr(0, len - cut);
      }
      return value;
    }
    // Replacement: ${X/p/r} (the first match), ${X//p/r} (every match), ${X/#p/r} (at the front), ${X/%p/r} (at the
    // end); p a glob, each match the longest from where it starts. Each start tries every end: values up to 256 bytes.
    if (op.size() > 1 && op[0] == '/' && value.size() <= kMaxPatternReplaceBytes) {
      unset_seen = unset_seen || !set;
      const char mode = op[1] == '/' || op[1] == '#' || op[1] == '%' ? op[1] : 0;
      const std::string spec = op.substr(mode ? 2 : 1);
      const auto slash = spec.find('/');
      const std::string pat = expand(unquote(spec.substr(0, slash)));
      const std::string rep = slash == std::string::npos ? "" : expand(unquote(spec.substr(slash + 1)));
      if (pat.empty()) return value;
      std::string out;
      const std::size_t len = value.size();
      const std::size_t refused_before = glob_refused;
      for (std::size_t b = 0; b <= len;) {
        std::size_t match = std::string::npos;  // the longest match's length from b
        if ((mode != '#' || b == 0)) {
          for (std::size_t e = len; e + 1 > b && match == std::string::npos; --e) {
            if (mode == '%' && e != len) break;
            if (glob(pat, value.substr(b, e - b))) match = e - b;
            if (e == 0) break;
          }
        }
        if (match != std::string::npos && (match > 0 || mode)) {
          out += rep;
          b += match;
          if (mode != '/') return out + value.substr(b);
          if (match == 0) {
            if (b < len) out += value[b];
            ++b;
          }
          continue;
        }
        if (b < len) out += value[b];
        ++b;
      }
      return glob_refused == refused_before ? out : value;  // (a match refused: the value unchanged)
    }
    // Case conversion of every character or the first (${X,,} ${X^^} ${X,} ${X^}; with a pattern after: not told).
    if (op == ",," || op == "^^" || op == "," || op == "^") {
      unset_seen = unset_seen || !set;
      std::string v = value;
      const bool upper = op[0] == '^';
      for (std::size_t k = 0; k < (op.size() == 2 ? v.size() : std::min<std::size_t>(1, v.size())); ++k)
        v[k] = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(v[k]))
                                       : std::tolower(static_cast<unsigned char>(v[k])));
      return v;
    }
    // A substring, ${X:offset} or ${X:offset:length}, either negative from the end (`${X: -3}`, with its space).
    if (op.size() > 1 && op[0] == ':') {
      std::istringstream in(op.substr(1));
      long long off = 0, cnt = 0;
      char colon = 0;
      const bool has_off = static_cast<bool>(in >> off);
      const bool has_cnt = has_off && static_cast<bool>(in >> colon) && colon == ':' && static_cast<bool>(in >> cnt);
      std::string extra;
      if (has_off && (!colon || has_cnt) && !(in >> extra)) {
        unset_seen = unset_seen || !set;
        const auto size = static_cast<long long>(value.size());
        const long long b = off < 0 ? size + off : off;
        const long long e = !has_cnt ? size : cnt < 0 ? size + cnt : b + cnt;
        if (b < 0 || b > size || e < b) return "";
        return value.substr(static_cast<std::size_t>(b), static_cast<std::size_t>(std::min(e, size) - b));
      }
    }
    unset_seen = true;
    return value;
  }

  // `word` expanded, and whether racksim can tell its value (nothing in it that unset_seen notes).
  std::string expand(const std::string& word, bool& told) {
    unset_seen = false;
    std::string out = expand(word);
    told = !unset_seen;
    return out;
  }

  std::string expand(const std::string& word) {
    std::string out;
    for (std::size_t i = 0; i < word.size();) {
      check_length(out);
      if (word[i] != '$') {
        unset_seen = unset_seen || word[i] == '`';  // a command's output
        out += word[i++];
        continue;
      }
      if (word.compare(i, 3, "$((") == 0) {
        const auto end = arith_end(word, i);
        if (end == std::string::npos) break;
        out += arith(word.substr(i + 3, end - i - 3));
        i = end + 2;
        continue;
      }
      if (i + 1 < word.size() && word[i + 1] == '{') {
        const auto end = word.find('}', i + 2);
        if (end == std::string::npos) break;
        std::string body = word.substr(i + 2, end - i - 2);
        i = end + 1;
        if (body.find('[') != std::string::npos) continue;  // ${ARR[@]}: arrays are read where defined
        out += parameter(body);
        continue;
      }
      std::size_t j = i + 1;
      while (j < word.size() && (std::isalnum(static_cast<unsigned char>(word[j])) || word[j] == '_')) ++j;
      if (j == i + 1) {
        // $( a command's output, $# $@ $* $? $$ $! $- special parameters: left as written, and not told.
        if (j < word.size() && std::strchr("(#@*?$!-", word[j]) && word[j] != '\0') unset_seen = true;
        out += '$';
        ++i;
        continue;
      }
      const std::string name = word.substr(i + 1, j - i - 1);
      auto it = vars.find(name);
      if (it != vars.end()) out += it->second;
      unset_seen = unset_seen || it == vars.end() || untold.count(name);
      i = j;
    }
    check_length(out);
    return out;
  }

  static std::string unquote(const std::string& s) {
    if (s.size() >= 2 && ((s.front() == '"' && s.back() == '"') || (s.front() == '\'' && s.back() == '\'')))
      return s.substr(1, s.size() - 2);
    return s;
  }
};

// Splits a line into words: quotes group (and are removed), '#' at a word start ends the line. `starts`, when given,
// receives each word's first byte in `line`.
std::vector<std::string> words(const std::string& line, std::vector<std::size_t>* starts = nullptr) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  if (starts) starts->clear();
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      continue;
    }
    if (!in_word && !std::isspace(static_cast<unsigned char>(c)) && !(c == '#') && starts) starts->push_back(i);
    if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) out.push_back(cur), cur.clear(), in_word = false;
      continue;
    }
    if (c == '#' && !in_word) break;
    // ${...} is one word whatever its spaces (`${M: -3}`, `${A:-a b}`).
    if (c == '$' && line.compare(i, 2, "${") == 0) {
      const auto end = line.find('}', i + 2);
      if (end != std::string::npos) {
        cur += line.substr(i, end + 1 - i);
        i = end;
        in_word = true;
        continue;
      }
    }
    // $(( ... )) is one word whatever its spaces (bash's arithmetic expansion: `$(( PP * 16 ))`).
    if (c == '$' && line.compare(i, 3, "$((") == 0) {
      const auto end = arith_end(line, i);
      if (end != std::string::npos) {
        cur += line.substr(i, end + 2 - i);
        i = end + 1;
        in_word = true;
        continue;
      }
    }
    cur += c;
    in_word = true;
  }
  if (in_word) out.push_back(cur);
  return out;
}

struct Extracted {
  std::vector<Arg> args;
  int torchrun_gpus = 0;   // nproc_per_node x nnodes
  std::string torchrun_source;
  std::string torchrun_problem;  // a torchrun count that is not one (refused unless --gpus gives the job's GPUs)
  int torchrun_problem_line = 0;
  int world_size = 0;      // Megatron log's world_size
  bool megatron_log = false;
  std::vector<std::string> warnings;  // a variable set differently on two branches of one if
};

// A word holding spaces that begins with a flag ("--fp8-format hybrid" quoted, or an unquoted $DISTRIBUTED_ARGS of
// "--nproc_per_node 8 --nnodes 4", which bash splits) is its flags and values.
std::vector<std::string> split_flag_words(const std::vector<std::string>& ws) {
  std::vector<std::string> t;
  for (const auto& w : ws) {
    if (w.rfind("--", 0) == 0 && w.find(' ') != std::string::npos) {
      std::istringstream ss(w);
      for (std::string p; ss >> p;) t.push_back(p);
    } else {
      t.push_back(w);
    }
  }
  return t;
}

void add_args_from_words(const std::vector<std::string>& ws, int line, std::vector<Arg>& args) {
  const std::vector<std::string> t = split_flag_words(ws);
  static const std::set<std::string> ops = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "\\"};
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::string& w = t[i];
    if (w.size() < 3 || w.rfind("--", 0) != 0 || !std::isalpha(static_cast<unsigned char>(w[2]))) continue;
    Arg a;
    a.line = line;
    std::string flag = w.substr(2);
    if (auto eq = flag.find('='); eq != std::string::npos) {
      a.value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    a.flag = flag;
    // Flags that take several values (argparse nargs='*' / '+').
    static const std::set<std::string> multi = {"recompute-modules", "data-path", "train-data-path", "valid-data-path",
                                                "test-data-path", "cuda-graph-scope", "cuda-graph-modules", "offload-modules",
                                                "cp-comm-type", "rampup-batch-size"};
    if (!a.value && !switches().count(flag) && i + 1 < t.size() && t[i + 1].rfind("--", 0) != 0 &&
        !ops.count(t[i + 1])) {
      a.value = t[i + 1];
      ++i;
      while (multi.count(flag) && i + 1 < t.size() && t[i + 1].rfind("--", 0) != 0 && !ops.count(t[i + 1]))
        *a.value += " " + t[++i];
    }
    args.push_back(a);
  }
}

// A script's lines, without a CR; 1-based ([0] is empty).
std::vector<std::string> physical_lines(const std::string& text) {
  std::vector<std::string> phys{""};
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    phys.push_back(line);
  }
  return phys;
}

// Whether a trimmed line ends in the "\" that continues its command onto the next line (not inside a comment).
bool continues_command(const std::string& trimmed) {
  return !trimmed.empty() && trimmed.back() == '\\' && trimmed.find('#') == std::string::npos;
}

// The flags of a "\"-continued command were numbered with the command's first line; each is moved to the physical line
// that holds it. Only where that is unambiguous: a flag whose literal occurrences in the command's lines are exactly its
// arguments (the k-th argument at the k-th occurrence); one that a variable's expansion gives, alone or beside a literal
// one, keeps the command's line, and moves no other flag.
void place_on_physical_lines(const std::vector<std::string>& phys, std::vector<Arg>& args) {
  const auto continues = [&](int l) { return continues_command(trim(phys[static_cast<std::size_t>(l)])); };
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  const int n = static_cast<int>(phys.size()) - 1;
  for (std::size_t i = 0; i < args.size();) {
    const int first = args[i].line;
    std::size_t j = i;
    while (j < args.size() && args[j].line == first) ++j;
    if (first < 1 || first > n || !continues(first)) {
      i = j;
      continue;
    }
    int last = first;
    while (last < n && continues(last)) ++last;
    // Each flag's literal occurrences, in order: "--flag" as a whole word (a blank, a quote or the line's start before
    // it; none of a flag's characters after it).
    std::map<std::string, int> wanted;
    for (std::size_t k = i; k < j; ++k) ++wanted[args[k].flag];
    std::map<std::string, std::vector<int>> occurrences;
    for (const auto& [flag, count] : wanted) {
      const std::string needle = "--" + flag;
      auto& at_lines = occurrences[flag];
      for (int l = first; l <= last; ++l) {
        const std::string& t = phys[static_cast<std::size_t>(l)];
        for (std::size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) {
          const std::size_t end = at + needle.size();
          const bool starts = at == 0 || t[at - 1] == ' ' || t[at - 1] == '\t' || t[at - 1] == '"' || t[at - 1] == '\'';
          if (starts && (end == t.size() || !word_char(t[end]))) at_lines.push_back(l);
        }
      }
    }
    std::map<std::string, std::size_t> seen;
    for (std::size_t k = i; k < j; ++k) {
      const auto& at_lines = occurrences[args[k].flag];
      const std::size_t nth = seen[args[k].flag]++;
      if (static_cast<int>(at_lines.size()) == wanted[args[k].flag]) args[k].line = at_lines[nth];
    }
    i = j;
  }
}

Extracted extract(const std::string& text) {
  Extracted ex;
  // Megatron's start-up print: "------------------------ arguments ------------------------".
  if (text.find("------------------------ arguments ------------------------") != std::string::npos) {
    ex.megatron_log = true;
    std::istringstream in(text);
    bool inside = false;
    int lineno = 0;
    // Dest names whose flag is spelled differently.
    static const std::map<std::string, std::string> renamed = {{"fp8", "fp8-format"}, {"fp4", "fp4-format"}};
    for (std::string line; std::getline(in, line);) {
      ++lineno;
      if (line.find("------------------------ arguments ------------------------") != std::string::npos) {
        inside = true;
        continue;
      }
      if (line.find("-------------------- end of arguments ---------------------") != std::string::npos) break;
      if (!inside) continue;
      // "  name ........................................ value" (possibly after a log prefix)
      const auto dots = line.find(" ..");
      if (dots == std::string::npos) continue;
      std::string name = trim(line.substr(0, dots));
      if (auto sp = name.find_last_of(" \t]"); sp != std::string::npos) name = name.substr(sp + 1);
      std::size_t v = dots;
      while (v < line.size() && (line[v] == '.' || line[v] == ' ')) ++v;
      const std::string value = trim(line.substr(v));
      if (name.empty()) continue;
      if (name == "world_size") {
        // A count, as torchrun's are checked (atoi had read 4294967304 as 8 and 8.9 as 8; -8 and abc as no count).
        if (const auto n = gpu_count(value)) {
          ex.world_size = *n;
        } else if (ex.torchrun_problem.empty()) {
          ex.torchrun_problem =
              fmt::format("world_size '{}': not a count of 1 to 1,048,576; give the job's GPUs with --gpus", value);
          ex.torchrun_problem_line = lineno;
        }
      }
      // A default-on switch printed off: the flag that turns it off.
      static const std::map<std::string, std::string> off_switch = {
          {"check_for_nan_in_loss_and_grad", "no-check-for-nan-in-loss-and-grad"},
          {"gradient_accumulation_fusion", "no-gradient-accumulation-fusion"},
          {"fp8_wgrad", "no-fp8-wgrad"}};
      if (auto off = off_switch.find(name); off != off_switch.end() && value == "False") {
        Arg a;
        a.flag = off->second;
        a.line = lineno;
        ex.args.push_back(a);
        continue;
      }
      if (value == "False" || value == "None") continue;
      std::string flag = name;
      if (auto it = renamed.find(name); it != renamed.end()) flag = it->second;
      std::replace(flag.begin(), flag.end(), '_', '-');
      Arg a;
      a.flag = flag;
      a.line = lineno;
      if (value != "True") a.value = value;
      ex.args.push_back(a);
    }
    return ex;
  }

  // A script or an argument list. Logical lines: "\" continuations joined.
  std::vector<std::pair<std::string, int>> lines;
  const std::vector<std::string> phys = physical_lines(text);
  {
    std::string acc;
    int start = 0;
    for (int lineno = 1; lineno < static_cast<int>(phys.size()); ++lineno) {
      const std::string& line = phys[static_cast<std::size_t>(lineno)];
      if (acc.empty()) start = lineno;
      const std::string t = trim(line);
      if (continues_command(t)) {
        acc += t.substr(0, t.size() - 1) + " ";
        continue;
      }
      acc += line;
      lines.push_back({acc, start});
      acc.clear();
    }
    if (!acc.empty()) lines.push_back({acc, start});
    // Statements a ';' separates on one line (`TP=4; PP=2`) are read one after the other (not inside quotes, nor
    // inside $((...)) or ${...}, nor after a comment).
    std::vector<std::pair<std::string, int>> statements;
    for (const auto& [l, n] : lines) {
      std::string cur;
      char quote = 0;
      int depth = 0;
      for (std::size_t i = 0; i < l.size(); ++i) {
        const char c = l[i];
        if (quote) {
          if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '(' || c == '{') {
          ++depth;
        } else if ((c == ')' || c == '}') && depth > 0) {
          --depth;
        } else if (c == '#' && (i == 0 || std::isspace(static_cast<unsigned char>(l[i - 1])))) {
          cur += l.substr(i);
          break;
        } else if (c == ';' && depth == 0) {
          statements.push_back({cur, n});
          cur.clear();
          // A case branch's end (`;;`, or bash's `;&` and `;;&`) is a statement of its own, which the reader below
          // takes as "a pattern may follow".
          const std::size_t len = l.compare(i, 3, ";;&") == 0 ? 3 : l.compare(i, 2, ";;") == 0 || l.compare(i, 2, ";&") == 0 ? 2 : 0;
          if (len > 0) {
            statements.push_back({l.substr(i, len), n});
            i += len - 1;
          }
          continue;
        }
        cur += c;
      }
      statements.push_back({cur, n});
    }
    lines = std::move(statements);
  }
  Shell sh;
  int nproc = 0, nnodes = 1;
  // The if and case blocks open at a line. racksim cannot evaluate an if's test, so it reads every branch, and a
  // variable set differently on two branches takes the last; that is said, since the script would have taken one. A
  // case whose word racksim can tell (every variable in it set, from values it can tell) is evaluated as bash does:
  // glob patterns and `|` alternatives, the first match, `;&` falling through, `;;&` testing on; only the branches
  // taken are read. A case on a word it cannot tell (a script argument, $SLURM_*, a command's output, a variable set
  // inside an if) is read like an if.
  struct Block {
    bool is_case = false;
    int line = 0, branch = 0;
    std::map<std::string, std::tuple<int, int, std::string>> set;  // name -> (branch, line, value)
    std::optional<std::string> word;  // a case's expanded word, when racksim can tell it
    bool testing = true;          // the next pattern is tested (until a branch taken ends with ;;)
    bool falls_through = false;   // the branch taken ended with ;&: the next one is taken untested
    bool reading = true;          // the current case branch is read
    bool expect_pattern = false;  // after `in` or a branch's end: a pattern may follow
    bool awaiting_in = false;     // `case WORD` with its `in` on the next line
    bool awaiting_then = false;   // `if TEST` before its `then`
  };
  std::vector<Block> blocks;
  int skipped_nesting = 0;  // if/case blocks opened inside a case branch not taken
  std::set<std::string> warned;
  const auto in_case = [&] { return !blocks.empty() && blocks.back().is_case; };
  // What follows a case branch's pattern list, when `stmt` begins with one, and the patterns as fnmatch takes them
  // (quoted characters escaped, `$VAR` expanded; nullopt where a variable in one cannot be told).
  struct Pattern {
    std::optional<std::vector<std::string>> globs;
    std::string rest;
  };
  const auto case_pattern = [&](const std::string& stmt) -> std::optional<Pattern> {
    std::size_t i = stmt.find_first_not_of(" \t");
    if (i == std::string::npos) return std::nullopt;
    if (stmt[i] == '(') ++i;
    std::vector<std::string> alts;
    std::string cur;
    char quote = 0;
    for (; i < stmt.size(); ++i) {
      const char c = stmt[i];
      if (quote) {
        if (c == quote) quote = 0;
        else if (quote == '"' && c == '$') cur += c;  // expanded below, inside double quotes as outside
        else cur += std::strchr("*?[]\\", c) ? std::string("\\") + c : std::string(1, c);
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '\\' && i + 1 < stmt.size()) {
        cur += c, cur += stmt[++i];
      } else if (c == '|' || c == ')') {
        alts.push_back(trim(cur));
        cur.clear();
        if (c == ')') {
          Pattern p{std::vector<std::string>{}, stmt.substr(i + 1)};
          bool told = true;
          for (const auto& a : alts) {
            bool this_told = true;
            p.globs->push_back(sh.expand(a, this_told));
            told = told && this_told;
          }
          if (!told) p.globs.reset();
          return p;
        }
      } else {
        cur += c;
      }
    }
    return std::nullopt;
  };
  for (const auto& [stmt, lineno] : lines) {
    sh.line = lineno;
    std::string line = stmt;
    std::vector<std::size_t> starts;
    auto ws = words(line, &starts);
    // The statement from here on is `rest` (after a keyword, a case header or a branch's pattern).
    const auto read_from = [&](std::string rest) {
      line = std::move(rest);
      ws = words(line, &starts);
    };
    if (ws.empty()) continue;
    if (ws[0] == ";;" || ws[0] == ";&" || ws[0] == ";;&") {
      if (in_case() && skipped_nesting == 0) {
        Block& c = blocks.back();
        c.expect_pattern = true;
        // Only a branch taken decides what follows it: ;; ends the case, ;& takes the next branch, ;;& tests on.
        if (c.word && c.reading) c.testing = ws[0] == ";;&", c.falls_through = ws[0] == ";&";
        else c.falls_through = false;
      }
      continue;
    }
    // An if is one when `then` follows its test (`if x; then` is two statements); a line of text that begins with the
    // word if (a heredoc's, a usage message's) is not, and must not leave a block open.
    if (!blocks.empty() && blocks.back().awaiting_then) {
      if (ws[0] == "then") blocks.back().awaiting_then = false;
      else blocks.pop_back();
    }
    if (in_case() && blocks.back().awaiting_in) {
      if (ws[0] == "in") {
        blocks.back().awaiting_in = false;
        blocks.back().expect_pattern = true;
        if (ws.size() == 1) continue;
        read_from(line.substr(starts[1]));
      } else {
        blocks.pop_back();  // `case` began a line of text (a heredoc's, a string's), not a case: no `in` follows
      }
    }
    // Inside a case branch that is not taken: only the case's own next pattern, its branch ends and its esac matter
    // (blocks opened inside it are counted, `do case ...` and `then if ...` too). A pattern found here is the one the
    // loop below takes.
    std::optional<Pattern> found;
    if (in_case() && !blocks.back().reading) {
      std::size_t k = 0;
      while (k + 1 < ws.size() && (ws[k] == "then" || ws[k] == "else" || ws[k] == "do")) ++k;
      const std::string& first = ws[k];
      if (first == "if" || (first == "case" && std::find(ws.begin() + k, ws.end(), "in") != ws.end())) ++skipped_nesting;
      else if ((first == "fi" || first == "esac") && skipped_nesting > 0) --skipped_nesting;
      else if (first == "esac") blocks.pop_back();
      if (first == "esac" || skipped_nesting > 0 || !blocks.back().expect_pattern || !(found = case_pattern(line))) continue;
    }
    if ((ws[0] == "elif" || ws[0] == "else") && !blocks.empty() && !blocks.back().is_case) ++blocks.back().branch;
    if (ws[0] == "then" || ws[0] == "else" || ws[0] == "do") {  // `then TP=8`, `else TP=1`, `else if` on one line
      if (ws.size() == 1) continue;
      read_from(line.substr(starts[1]));
      found.reset();  // (a pattern, if any, is read again from the rest)
    }
    // A case header and a branch's pattern may begin the statement, one after the other (`case $M in 7b) TP=1`,
    // `7b) case $N in x) PP=2`): each leaves the rest of the statement to read.
    bool skip = false;
    for (bool again = true; again && !skip && !ws.empty();) {
      again = false;
      if (in_case() && blocks.back().expect_pattern && ws[0] != "esac") {
        if (auto pat = found ? std::exchange(found, std::nullopt) : case_pattern(line)) {
          Block& c = blocks.back();
          ++c.branch;
          c.expect_pattern = false;
          if (c.word && !pat->globs) {
            // A pattern racksim cannot tell: from here on the case is read like an if.
            c.word.reset();
            c.reading = true;
          }
          if (c.word) {
            bool match = false;
            for (const auto& g : *pat->globs) match = match || fnmatch(g.c_str(), c.word->c_str(), 0) == 0;
            c.reading = c.falls_through || (c.testing && match);
            c.falls_through = false;
          }
          read_from(pat->rest);
          skip = !c.reading;
          again = true;
          continue;
        }
      }
      if (ws[0] == "case" && ws.size() >= 2) {
        Block b;
        b.is_case = true, b.line = lineno, b.branch = -1;
        const auto in = std::find(ws.begin() + 1, ws.end(), "in");
        bool told = true;
        std::string word = sh.expand(ws[1], told);
        // A word of more than one shell word (`$(echo 70b)` unquoted) is a command's output: not told.
        if (told && in == ws.begin() + 2) b.word = std::move(word);
        b.awaiting_in = in == ws.end();
        b.expect_pattern = !b.awaiting_in;
        blocks.push_back(std::move(b));
        const auto after = static_cast<std::size_t>(in - ws.begin()) + 1;
        if (in == ws.end() || after >= ws.size()) {
          skip = true;
        } else {
          read_from(line.substr(starts[after]));
          again = true;
        }
      }
    }
    if (skip || ws.empty()) continue;
    if (ws[0] == "fi" && !blocks.empty() && !blocks.back().is_case) blocks.pop_back();
    else if (ws[0] == "esac" && in_case()) blocks.pop_back();
    if (ws[0] == "if") {
      blocks.push_back({});
      blocks.back().line = lineno;
      blocks.back().awaiting_then = true;
    }
    std::vector<std::string> rest;
    std::size_t i = 0;
    if (ws[0] == "export" || ws[0] == "local" || ws[0] == "declare" || ws[0] == "readonly") i = 1;
    // VAR=value (not an array): remember it.
    if (i < ws.size()) {
      const std::string& w = ws[i];
      const auto eq = w.find('=');
      const bool is_name = eq != std::string::npos && eq > 0 &&
                           std::all_of(w.begin(), w.begin() + static_cast<long>(eq), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '+';
                           }) && w.rfind("--", 0) != 0;
      if (is_name) {
        std::string name = w.substr(0, eq);
        std::string value = w.substr(eq + 1);
        if (!name.empty() && name.back() == '+') name.pop_back();
        if (value.rfind('(', 0) == 0) {
          // An array: its items are arguments (read here, where they are written).
          value = value.substr(1);
          std::vector<std::string> items;
          if (!value.empty()) items.push_back(value);
          for (std::size_t k = i + 1; k < ws.size(); ++k) items.push_back(ws[k]);
          for (auto& it : items) {
            if (!it.empty() && it.back() == ')') it.pop_back();
            it = sh.expand(it);
          }
          add_args_from_words(items, lineno, ex.args);
          continue;
        }
        if (ws.size() == i + 1) {
          bool value_told = true;
          std::string v = sh.expand(value, value_told);
          // Set from something racksim cannot tell, or on a branch it cannot tell was taken: a case on it is read
          // like an if.
          const bool branch_told =
              std::none_of(blocks.begin(), blocks.end(), [](const Block& b) { return !b.is_case || !b.word; });
          // Both at once (`--tp=*) TP=${arg#*=}` in a loop over "$@", `if [ -n "$1" ]; then TP=$1`): the value it
          // would take is unknown and the branch may not run, so a value the variable already has is kept, and said.
          if (!value_told && !branch_told && sh.vars.count(name) && !sh.untold.count(name)) {
            ex.warnings.push_back(fmt::format("{}={} (line {}): a value racksim cannot tell, on a branch it cannot tell "
                                              "the run took; {} keeps '{}'",
                                              name, value, lineno, name, sh.vars[name]));
            sh.untold.insert(name);
            continue;
          }
          if (value_told && branch_told) sh.untold.erase(name);
          else sh.untold.insert(name);
          // In every enclosing block racksim reads every branch of (a set inside a nested one is on a branch of
          // each); a case it evaluated has one branch read.
          for (auto& blk : blocks) {
            if (blk.word) continue;
            auto it = blk.set.find(name);
            if (it != blk.set.end() && std::get<0>(it->second) != blk.branch && std::get<2>(it->second) != v &&
                warned.insert(name + "@" + std::to_string(blk.line)).second)
              ex.warnings.push_back(fmt::format(
                  "{} is set on two branches of the {} at line {} ('{}' at line {}, '{}' at line {}): racksim cannot "
                  "tell which the run took, reads every branch and keeps the last",
                  name, blk.is_case ? "case" : "if", blk.line, std::get<2>(it->second), std::get<1>(it->second), v,
                  lineno));
            blk.set[name] = {blk.branch, lineno, v};
          }
          sh.set_var(name, std::move(v));
          continue;
        }
      }
    }
    std::vector<std::string> words;
    for (; i < ws.size(); ++i) {
      if (ws[i] == ")" || ws[i] == "(") continue;
      std::string w = ws[i];
      if (!w.empty() && w.back() == ')' && w.find('(') == std::string::npos) w.pop_back();
      words.push_back(sh.expand(w));
    }
    const std::vector<std::string> expanded = split_flag_words(words);
    // torchrun / python -m torch.distributed.run (or .launch): the job's GPU count, from "--flag N" or "--flag=N". On
    // the launcher's command a value that is not a whole count (torchrun's "gpu"/"auto", an elastic "1:4", an unset
    // variable) is refused: the count would be a guess, and --gpus says it. Elsewhere (a script parsing its own
    // options, a usage text) only whole counts are taken, as before.
    bool launcher = false;
    for (std::size_t k = 0; k < expanded.size(); ++k) {
      const std::string& w = expanded[k];
      launcher = launcher || w == "torchrun" || w.ends_with("/torchrun") ||
                 (w == "-m" && k + 1 < expanded.size() &&
                  (expanded[k + 1] == "torch.distributed.run" || expanded[k + 1] == "torch.distributed.launch"));
    }
    for (std::size_t k = 0; k < expanded.size(); ++k) {
      const std::string& w = expanded[k];
      const auto eq = w.find('=');
      const std::string f = w.substr(0, eq);
      const bool per_node = f == "--nproc_per_node" || f == "--nproc-per-node";
      if (!per_node && f != "--nnodes") continue;
      const bool has_value = eq != std::string::npos || k + 1 < expanded.size();
      const std::string v = eq != std::string::npos ? w.substr(eq + 1) : has_value ? expanded[k + 1] : "";
      const auto n = gpu_count(v);
      if (!n) {
        if (launcher && ex.torchrun_problem.empty()) {
          ex.torchrun_problem = fmt::format("torchrun {} '{}': not a count of 1 to 1,048,576; give the job's GPUs with --gpus", f, v);
          ex.torchrun_problem_line = lineno;
        }
        continue;
      }
      (per_node ? nproc : nnodes) = *n;
    }
    add_args_from_words(expanded, lineno, ex.args);
  }
  // An unclosed case or if (bash: a syntax error) would have swallowed the rest of the script unread, or left every
  // later line on a branch racksim cannot tell was taken. (A last line of text beginning with `if` is not an if.)
  for (const auto& b : blocks)
    if (!b.awaiting_then)
      throw ScriptError(b.line, b.is_case ? "this case has no esac; bash refuses the script"
                                          : "this if has no fi; bash refuses the script");
  if (nproc > 0 && static_cast<long long>(nproc) * nnodes > 1'048'576 && ex.torchrun_problem.empty())
    ex.torchrun_problem = fmt::format("torchrun --nproc_per_node {} x --nnodes {}: more than racksim's bound of 1,048,576 "
                                      "GPUs; give the job's GPUs with --gpus",
                                      nproc, nnodes);
  if (nproc > 0 && ex.torchrun_problem.empty()) {
    ex.torchrun_gpus = nproc * nnodes;
    ex.torchrun_source = fmt::format("torchrun --nproc_per_node {} x --nnodes {}", nproc, nnodes);
  }
  place_on_physical_lines(phys, ex.args);
  return ex;
}

// ------------------------------------------------------------------ what each flag means

// Launcher flags (torchrun) and flags that do not change the step time.
bool ignorable(const std::string& f) {
  static const std::set<std::string> exact = {
      "nproc_per_node", "nproc-per-node", "nnodes", "node_rank", "node-rank", "master_addr", "master-addr",
      "master_port", "master-port", "rdzv_id", "rdzv_backend", "rdzv_endpoint", "rdzv-id", "rdzv-backend",
      "rdzv-endpoint", "standalone", "max_restarts", "use-mcore-models", "use-legacy-models",
      "mock-data", "split", "vocab-file", "merge-file", "seed", "clip-grad", "weight-decay", "min-lr", "lr",
      "optimizer", "norm-epsilon", "normalization", "apply-layernorm-1p",
      "disable-bias-linear", "add-bias-linear", "add-qkv-bias", "position-embedding-type",
      "no-position-embedding", "use-rotary-position-embeddings", "max-position-embeddings", "init-method-std",
      "no-masked-softmax-fusion", "no-bias-gelu-fusion", "no-bias-swiglu-fusion", "no-bias-dropout-fusion",
      "no-rope-fusion",
      "calculate-per-token-loss", "manual-gc-interval", "empty-unused-memory-level",
      "distributed-timeout-minutes", "distributed-backend", "attention-softmax-in-fp32", "accumulate-allreduce-grads-in-fp32",
      "moe-router-load-balancing-type", "moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-router-score-function",
      "moe-router-topk-scaling-factor", "moe-router-enable-expert-bias", "moe-router-bias-update-rate",
      "moe-router-dtype", "moe-router-pre-softmax", "moe-grouped-gemm", "moe-token-drop-policy",
      "moe-input-jitter-eps", "moe-per-layer-logging", "moe-use-legacy-grouped-gemm",
      "moe-use-upcycling", "use-flash-attn", "fp8-margin",
      "fp8-interval", "num-workers", "train-iters", "train-samples", "exit-interval", "exit-duration-in-mins",
      "use-checkpoint-args", "no-load-optim", "no-load-rng", "no-save-optim", "no-save-rng", "finetune",
      "rotary-base", "rotary-percent", "rotary-seq-len-interpolation-factor", "rotary-scaling-factor", "mscale",
      "mscale-all-dim", "use-precision-aware-optimizer", "te-rng-tracker", "use-te-rng-tracker", "bias-dropout-fusion",
      "no-persist-layer-norm", "defer-embedding-wgrad-compute", "async-save", "auto-detect-ckpt-format",
      "no-async-tensor-model-parallel-allreduce",
      "exit-on-missing-checkpoint", "decoupled-weight-decay", "untie-embeddings-and-output-weights-placeholder",
      "ddp-average-in-collective", "timing-log-level", "timing-log-option", "logging-level", "enable-experimental",
      "tiktoken-pattern", "no-mmap-bin-files", "no-create-attention-mask-in-dataloader", "squared-relu-placeholder",
      "kv-lora-rank-placeholder", "make-vocab-size-divisible-by", "mtp-loss-scaling-factor", "adam-eps",
      "initial-loss-scale", "min-loss-scale", "loss-scale-window", "hysteresis",  // the dynamic loss scaler's settings
      "rampup-batch-size",  // the first samples' smaller batches; racksim simulates a step at --global-batch-size
  };
  static const std::vector<std::string> prefixes = {
      "lr-", "decoupled-lr", "decoupled-min-lr", "adam-", "sgd-", "data-", "tokenizer-", "log-", "eval-", "save",
      "load", "tensorboard", "wandb-", "profile", "ckpt-", "dist-ckpt", "fp8-amax", "train-data", "valid-data",
      "test-data", "num-dataset", "override-opt", "non-persistent", "straggler", "rerun-", "one-logger",
      "init-model", "warmup", "start-weight-decay", "end-weight-decay", "weight-decay-incr", "use-dist-ckpt",
      "mid-level-dataset", "object-storage", "record-memory", "memory-snapshot", "inference-", "num-tokens-to-",
  };
  if (exact.count(f)) return true;
  for (const auto& p : prefixes)
    if (f.rfind(p, 0) == 0) return true;
  return false;
}

struct Flags {
  std::map<std::string, Arg> last;  // flag -> its last occurrence
  std::set<std::string> used;
  bool has(const std::string& f) const { return last.count(f) > 0; }
  std::optional<std::string> str(const std::string& f) {
    auto it = last.find(f);
    if (it == last.end()) return std::nullopt;
    used.insert(f);
    return it->second.value.value_or("");
  }
  bool on(const std::string& f) {
    if (!has(f)) return false;
    used.insert(f);
    return true;
  }
};

std::string shown(const Arg& a) { return a.value ? fmt::format("--{} {}", a.flag, *a.value) : "--" + a.flag; }

// A Megatron module list as written in a launch script ("moe_act layernorm", "[moe_act, layernorm]", "['mlp']").
std::vector<std::string> module_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      cur += c;
    } else if (!cur.empty()) {
      if (std::find(out.begin(), out.end(), cur) == out.end()) out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

// Megatron's --recompute-modules (selective) and --offload-modules (fine-grained activation offloading) as racksim's
// {save, offload} map over its activation names (docs/contracts.md). A recomputed module's outputs are not saved:
// layernorm the two norms' outputs (norm1, norm2; under MLA the latent norms are part of qkv's chain), mlp the dense
// MLP's (mlp_gate, mlp_up, mlp_act), moe the whole MoE block's (router, dispatch, expert_out, expert_act), moe_act the
// experts' activation output (expert_act), mla_up_proj MLA's up projections (racksim's qkv is the whole MLA chain). An
// offloaded module's input goes to the host (fine_grained_activation_offload.py): qkv_linear's is norm1's output,
// core_attn's the q/k/v (qkv), attn_proj's the attention output (attn), mlp_norm's the residual after the attention
// (attn_out), expert_fc1's the dispatched tokens (dispatch), moe_act's fc1's output (expert_out), fused_group_mlp's all
// three of the grouped MLP's. core_attn among other recomputed modules keeps the attention output (Megatron replays the
// attention kernel in the backward, which a name list cannot say): a warning.
std::string activation_name_policy(const std::vector<std::string>& recompute, const std::vector<std::string>& offload,
                                   bool moe, std::vector<std::string>& warnings) {
  // racksim's names a policy can keep (the fused attention writes no scores; the layer output is the next layer's input).
  std::vector<std::string> names;
  for (const std::string& n : activation_names())
    if (n != "attn_scores" && n != "mlp_out") names.push_back(n);
  if (moe) names.insert(names.end(), moe_activation_names().begin(), moe_activation_names().end());
  static const std::map<std::string, std::vector<std::string>> recomputed = {
      {"core_attn", {}},
      {"layernorm", {"norm1", "norm2"}},
      {"mlp", {"mlp_gate", "mlp_up", "mlp_act"}},
      {"moe", {"router", "dispatch", "expert_out", "expert_act"}},
      {"moe_act", {"expert_act"}},
      {"mla_up_proj", {"qkv"}},
      {"shared_experts", {}}};
  static const std::map<std::string, std::vector<std::string>> offloaded = {
      {"qkv_linear", {"norm1"}},  {"core_attn", {"qkv"}},           {"attn_proj", {"attn"}},
      {"mlp_norm", {"attn_out"}}, {"expert_fc1", {"dispatch"}},     {"moe_act", {"expert_out"}},
      {"fused_group_mlp", {"dispatch", "expert_out", "expert_act"}}, {"attn_norm", {}}};
  std::vector<std::string> drop, off;
  for (const std::string& m : recompute) {
    const auto it = recomputed.find(m);
    if (it == recomputed.end()) {
      warnings.push_back(fmt::format("--recompute-modules {}: not a module racksim knows; ignored", m));
      continue;
    }
    if (m == "core_attn" && recompute.size() > 1)
      warnings.push_back("--recompute-modules core_attn with other modules: the attention output stays saved (Megatron "
                         "replays the attention kernel in the backward; a name list cannot say that)");
    if (m == "shared_experts")
      warnings.push_back("--recompute-modules shared_experts: the shared experts are part of racksim's router step; "
                         "not recomputed");
    drop.insert(drop.end(), it->second.begin(), it->second.end());
  }
  for (const std::string& m : offload) {
    const auto it = offloaded.find(m);
    if (it == offloaded.end()) {
      warnings.push_back(fmt::format("--offload-modules {}: not a module racksim knows; ignored", m));
      continue;
    }
    if (m == "attn_norm")
      warnings.push_back("--offload-modules attn_norm: its input is the layer's input, which racksim always keeps; "
                         "not offloaded");
    off.insert(off.end(), it->second.begin(), it->second.end());
  }
  const auto in = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  std::vector<std::string> save, offl;
  for (const std::string& n : names) {
    if (in(off, n) && !in(drop, n)) offl.push_back(n);
    else if (!in(drop, n) && !in(off, n)) save.push_back(n);
  }
  return offl.empty() ? fmt::format("{{save: [{}]}}", fmt::join(save, ", "))
                      : fmt::format("{{save: [{}], offload: [{}]}}", fmt::join(save, ", "), fmt::join(offl, ", "));
}

using Writer = ScenarioWriter;  // workloads/importers/scenario_writer.h

// Megatron-Core's --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py
// parse_str_to_list at d98e8a64): commas dropped, "(...)*N" then "x*N" unrolled, stages split by '|', each a string of
// E (embedding), t (decoder layer), m (MTP layer), L (loss). Stage i is virtual stage i / pp of pipeline rank i % pp.
// Empty when the text has another character (the caller says which).
std::optional<std::vector<std::string>> parse_pipeline_layout(std::string text, std::string& bad) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  // Each unrolling repeats text, so a pathological layout could grow without bound: stop at a million characters.
  // (Scanned by hand: std::regex recurses per character and overflowed the stack on a layout of 300,000 layers.)
  constexpr std::size_t kMaxLayout = 1'000'000;
  const auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  // Python's re.sub of `pattern` over the text: at each position the leftmost match, its group repeated its count
  // times. `match(i)` gives where the group and its count are, or nothing.
  auto unroll = [&](auto match) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      if (const auto m = match(i)) {
        const auto [gb, ge, ds, de] = *m;
        const long long n = de - ds > 9 ? 1'000'000'000LL : std::stoll(text.substr(ds, de - ds));
        if ((ge - gb) * static_cast<std::size_t>(n) + out.size() > kMaxLayout) {
          bad = "more than a million layers";
          return false;
        }
        for (long long k = 0; k < n; ++k) out.append(text, gb, ge - gb);
        i = de;
      } else {
        out += text[i++];
      }
    }
    text = std::move(out);
    return true;
  };
  // The group's [begin, end), then its count's digits' [begin, end).
  using Match = std::optional<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>>;
  // The digits after "*" at `star`, or 0 when there are none.
  const auto digits_end = [&](std::size_t star) -> std::size_t {
    if (star >= text.size() || text[star] != '*' || star + 1 >= text.size() || !is_digit(text[star + 1])) return 0;
    std::size_t d = star + 1;
    while (d < text.size() && is_digit(text[d])) ++d;
    return d;
  };
  // \(([^)]+)\)\*(\d+): a parenthesis, one or more other characters to the first ')', then *N.
  // (The first ')' after i is kept between calls, i only growing: one pass over the text, not one per '('.)
  std::size_t close = 0;
  bool close_known = false;
  const auto parens = [&](std::size_t i) -> Match {
    if (text[i] != '(') return std::nullopt;
    if (!close_known || (close != std::string::npos && close <= i)) close = text.find(')', i + 1), close_known = true;
    if (close == std::string::npos || close == i + 1) return std::nullopt;
    if (const std::size_t d = digits_end(close + 1)) return std::make_tuple(i + 1, close, close + 2, d);
    return std::nullopt;
  };
  // (.)\*(\d+): one character, then *N.
  const auto single = [&](std::size_t i) -> Match {
    if (text[i] == '\n') return std::nullopt;
    if (const std::size_t d = digits_end(i + 1)) return std::make_tuple(i, i + 1, i + 2, d);
    return std::nullopt;
  };
  if (!unroll(parens) || !unroll(single)) return std::nullopt;
  std::vector<std::string> stages(1);
  for (char c : text) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      stages.back() += c;
    } else {
      bad = fmt::format("'{}' (Megatron-Core knows E, t, m and L)", c);
      return std::nullopt;
    }
  }
  return stages;
}

[[noreturn]] void fail(const std::string& label, const std::string& message) {
  throw input_error(label, 0, 0, "", message);
}
// A flag's value racksim refuses, named at the flag's line of the script or log.
[[noreturn]] void refuse(const std::string& label, const Arg& flag_arg, const std::string& flag,
                         const std::string& message) {
  throw input_error(label, flag_arg.line, 1, "--" + flag, message);
}

}  // namespace

MegatronImport import_megatron_args_text(const std::string& text, const std::string& label, const MegatronOptions& opt) {
  // Binary data where the arguments are read is refused; in a Megatron log only its arguments block is read, so NUL
  // padding after it (a killed job's log) is not.
  const auto end_of_args = text.find("-------------------- end of arguments ---------------------");
  if (const auto nul = text.find('\0'); nul != std::string::npos && (end_of_args == std::string::npos || nul < end_of_args))
    throw input_error(label, input::position_in(text, nul).first, 0, "",
                      "binary data (a NUL byte): expected a launch script, argument list or Megatron log");
  MegatronImport out;
  Extracted ex;
  try {
    ex = extract(text);
  } catch (const ScriptError& e) {
    throw input_error(label, e.line, 1, "", e.what());
  }
  if (ex.args.empty()) fail(label, "no Megatron arguments found (expected --flags, a launch script or Megatron's "
                                   "printed arguments block)");
  for (const auto& w : ex.warnings) out.warnings.push_back(w);
  Flags fl;
  std::map<std::string, std::string> conflicts;
  for (const auto& a : ex.args) {
    auto it = fl.last.find(a.flag);
    if (it != fl.last.end() && it->second.value != a.value)
      conflicts[a.flag] = fmt::format("{} given more than once ({} at line {}, then {} at line {}): the last is used",
                                      "--" + a.flag, shown(it->second), it->second.line, shown(a), a.line);
    fl.last[a.flag] = a;
  }
  for (const auto& [f, msg] : conflicts)
    if (!ignorable(f))
      out.warnings.push_back(msg + (ex.megatron_log ? "" : " (racksim reads every branch of a script's if, and of a case whose word it cannot tell)"));

  auto as_int = [&](const std::string& f) -> std::optional<long long> {
    auto v = fl.str(f);
    if (!v) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    // Every integer the import reads is a size or a count Megatron keeps in a Python int but racksim in an int:
    // a value past that range is refused as written (it used to wrap: 4294967304 layers imported as 8).
    if (v->empty() || end != v->c_str() + v->size() || n < 0 || errno == ERANGE ||
        n > std::numeric_limits<int>::max()) {
      refuse(label, fl.last[f], f,
             fmt::format("expected a non-negative integer of at most {}, got '{}'", std::numeric_limits<int>::max(),
                         *v));
    }
    return n;
  };
  // Sizes Megatron requires to be at least 1 (a parallel size or a divisor of 0 divides by zero).
  auto as_size = [&](const std::string& f) -> std::optional<long long> {
    auto n = as_int(f);
    if (n && *n < 1) {
      refuse(label, fl.last[f], f, fmt::format("must be at least 1, got '{}'", *fl.str(f)));
    }
    return n;
  };
  auto src = [&](const std::string& f) { return shown(fl.last[f]); };
  // The layout flag as shown, cut at 110 characters (a layout may be long).
  auto layout_src = [&] {
    const std::string full = src("pipeline-model-parallel-layout");
    return full.size() <= 113 ? full : full.substr(0, 110) + "...";
  };

  // ---- parallelism
  const int tp = static_cast<int>(as_size("tensor-model-parallel-size").value_or(1));
  const int pp = static_cast<int>(as_size("pipeline-model-parallel-size").value_or(1));
  const int cp = static_cast<int>(as_size("context-parallel-size").value_or(1));
  const int ep = static_cast<int>(as_size("expert-model-parallel-size").value_or(1));
  const auto etp = as_size("expert-tensor-parallel-size");

  // ---- GPUs and system
  int gpus = opt.gpus;
  std::string gpus_src = "racksim import --gpus";
  // (At the command's first line; a continued command's flag may be on a later one: column 0, unknown.)
  if (gpus <= 0 && !ex.torchrun_problem.empty()) throw input_error(label, ex.torchrun_problem_line, 0, "", ex.torchrun_problem);
  if (gpus <= 0 && ex.torchrun_gpus > 0) gpus = ex.torchrun_gpus, gpus_src = ex.torchrun_source;
  if (gpus <= 0 && ex.world_size > 0) gpus = ex.world_size, gpus_src = "Megatron's printed world_size";
  if (gpus <= 0) {
    long long model_parallel = 0;  // each size is at most INT_MAX, so their product may pass 64 bits
    if (__builtin_mul_overflow(static_cast<long long>(tp), static_cast<long long>(pp), &model_parallel) ||
        __builtin_mul_overflow(model_parallel, static_cast<long long>(cp), &model_parallel) || model_parallel > 1'048'576)
      fail(label, fmt::format("tp·pp·cp = {}·{}·{} GPUs without a GPU count: more than racksim simulates (1,048,576)",
                              tp, pp, cp));
    gpus = static_cast<int>(model_parallel);
    gpus_src = "tp·pp·cp: no GPU count in the arguments (data parallel 1); pass --gpus";
    out.warnings.push_back(fmt::format("no GPU count (torchrun --nproc_per_node/--nnodes, or --gpus): {} GPUs = "
                                       "tp·pp·cp, data parallel 1",
                                       gpus));
  }
  std::string system = opt.system, system_src = "racksim import --system";
  if (system.empty()) {
    std::string stem = fs::path(label).filename().string();
    std::transform(stem.begin(), stem.end(), stem.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const auto& [needle, preset] : std::vector<std::pair<std::string, std::string>>{
             {"gb300", "gb300-nvl72"}, {"gb200", "gb200-nvl72"}, {"b200", "b200"}, {"h200", "h200-sxm"},
             {"h800", "h800-sxm"}, {"h100", "h100-sxm"}}) {
      if (stem.find(needle) != std::string::npos) {
        system = preset;
        system_src = fmt::format("guessed from the file name ('{}'); pass --system", needle);
        break;
      }
    }
    if (system.empty()) {
      system = "h100-sxm";
      system_src = "no --system given: h100-sxm, Megatron-LM's reference GPU; pass --system";
    }
    out.warnings.push_back(fmt::format("system {}: {}", system, system_src));
  }

  // ---- model
  Writer w;
  const std::string name = !opt.name.empty() ? opt.name : fs::path(label).stem().string();
  std::ostringstream model_yaml;
  int layers = 0, heads = 0, hidden = 0, vocab_out = 0, ffn_hidden = 0;
  bool is_moe = false;
  int experts = 0;
  Writer mw;
  if (!opt.model.empty()) {
    mw.line(2, "preset", yaml_quoted(opt.model), "racksim import --model");
    for (const char* f : {"num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads", "num-query-groups",
                          "kv-channels", "vocab-size", "swiglu", "group-query-attention", "untie-embeddings-and-output-weights",
                          "num-experts", "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size",
                          "moe-layer-freq", "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-head-dim",
                          "qk-pos-emb-head-dim", "v-head-dim", "padded-vocab-size", "qk-layernorm"})
      if (fl.has(f)) fl.used.insert(f), out.ignored.push_back(shown(fl.last[f]) + " (the model is --model " + opt.model + ")");
    // An architecture flag that contradicts the preset is said, not only listed as ignored (the arguments may describe
    // another model than the one named).
    {
      input::LoadSession scratch;
      const input::Node where(YAML::Node(opt.model), "--model", "model.preset", "model.preset", scratch.ctx);
      ModelSpec preset;
      if (load_model_preset(opt.model, where, scratch.ctx, preset) && scratch.diag.empty()) {
        const std::array<std::pair<const char*, long long>, 5> dims = {{{"num-layers", preset.layers},
                                                                        {"hidden-size", preset.hidden},
                                                                        {"ffn-hidden-size", preset.ffn_hidden},
                                                                        {"num-attention-heads", preset.heads},
                                                                        {"num-query-groups", preset.kv_heads}}};
        for (const auto& [f, want] : dims) {
          // Megatron reads --num-query-groups only with --group-query-attention (its logs print the default, 1, for
          // every MHA or MLA model); MLA's heads are the preset's own.
          if (std::string_view(f) == "num-query-groups" &&
              (!fl.has("group-query-attention") || fl.has("multi-latent-attention")))
            continue;
          if (auto v = fl.str(f))
            if (std::to_string(want) != *v)
              out.warnings.push_back(fmt::format("{} disagrees with --model {} ({} there): the arguments describe another "
                                                 "model than the one named; the preset is used",
                                                 shown(fl.last[f]), opt.model, want));
        }
      }
    }
    if (auto l = as_int("num-layers")) layers = static_cast<int>(*l);
  } else {
    std::vector<std::string> missing;
    for (const char* f : {"num-layers", "hidden-size", "num-attention-heads"})
      if (!fl.has(f)) missing.push_back(std::string("--") + f);
    const bool have_vocab = fl.has("vocab-size") || fl.has("padded-vocab-size") || opt.vocab > 0;
    if (!have_vocab) missing.push_back("--vocab-size (or racksim import --vocab N)");
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      fail(label, fmt::format("the arguments do not describe the model: missing {}; give them, or name a model with "
                              "--model PRESET (racksim models list) or a file from `racksim models import`",
                              list));
    }
    layers = static_cast<int>(*as_int("num-layers"));
    hidden = static_cast<int>(*as_int("hidden-size"));
    heads = static_cast<int>(*as_int("num-attention-heads"));
    const bool swiglu = fl.on("swiglu");
    std::string ffn_src;
    if (auto f = as_int("ffn-hidden-size")) {
      ffn_hidden = static_cast<int>(*f);
      ffn_src = src("ffn-hidden-size");
    } else if (swiglu) {
      ffn_hidden = static_cast<int>(std::floor(4.0 * hidden * 2.0 / 3.0 / 64.0)) * 64;
      ffn_src = "Megatron's default with --swiglu: int(4·hidden·2/3 / 64)·64";
    } else {
      ffn_hidden = 4 * hidden;
      ffn_src = "Megatron's default: 4·hidden";
    }
    int kv = heads;
    std::string kv_src = "no --group-query-attention: one KV head per head";
    if (fl.on("group-query-attention")) {
      if (auto g = as_int("num-query-groups")) kv = static_cast<int>(*g), kv_src = "--group-query-attention " + src("num-query-groups");
      else kv = 1, kv_src = "--group-query-attention without --num-query-groups: Megatron's default 1";
    } else if (fl.has("num-query-groups")) {
      out.ignored.push_back(src("num-query-groups") + " (without --group-query-attention Megatron ignores it)");
      fl.used.insert("num-query-groups");
    }
    int vocab = 0;
    std::string vocab_src;
    if (auto pv = as_int("padded-vocab-size")) {
      vocab = static_cast<int>(*pv);
      vocab_src = src("padded-vocab-size");
    } else {
      long long v = opt.vocab > 0 ? opt.vocab : *as_int("vocab-size");
      const long long div = as_size("make-vocab-size-divisible-by").value_or(128) * tp;
      const long long padded = (v + div - 1) / div * div;
      if (padded > std::numeric_limits<int>::max())
        fail(label, fmt::format("--vocab-size {} padded to a multiple of {} is {}: more than racksim takes ({})", v, div,
                                padded, std::numeric_limits<int>::max()));
      vocab = static_cast<int>(padded);
      vocab_src = fmt::format("{}{}", opt.vocab > 0 ? fmt::format("racksim import --vocab {}", opt.vocab) : src("vocab-size"),
                              padded != v ? fmt::format(", padded to a multiple of {}·tp = {} as Megatron does", div / tp, div)
                                          : std::string());
    }
    vocab_out = vocab;
    mw.line(2, "layers", std::to_string(layers), src("num-layers"));
    mw.line(2, "hidden", std::to_string(hidden), src("hidden-size"));
    mw.line(2, "ffn_hidden", std::to_string(ffn_hidden), ffn_src);
    mw.line(2, "heads", std::to_string(heads), src("num-attention-heads"));
    const bool mla = fl.on("multi-latent-attention");
    mw.line(2, "kv_heads", std::to_string(mla ? heads : kv), mla ? "MLA: per-head K and V from the shared latent" : kv_src);
    if (mla) {
      const long long v_head = as_int("v-head-dim").value_or(128);
      mw.line(2, "head_dim", std::to_string(v_head), fl.has("v-head-dim") ? src("v-head-dim") : "MLA: Megatron's default --v-head-dim 128");
    } else if (auto kvc = as_int("kv-channels")) {
      mw.line(2, "head_dim", std::to_string(*kvc), src("kv-channels"));
    }
    mw.line(2, "vocab", std::to_string(vocab), vocab_src);
    mw.line(2, "ffn", swiglu ? "swiglu" : "gelu", swiglu ? "--swiglu" : "no --swiglu: Megatron's GeLU MLP");
    if (fl.on("squared-relu")) out.warnings.push_back("--squared-relu: modelled as the two-matrix (gelu) MLP");
    const bool untied = fl.on("untie-embeddings-and-output-weights");
    mw.line(2, "tied_embeddings", untied ? "false" : "true",
            untied ? "--untie-embeddings-and-output-weights" : "no --untie-embeddings-and-output-weights: Megatron ties them");
    // MLA's rotary embedding runs as Megatron-Core's fused kernels in racksim (its default); unfused it splits,
    // rotates and concatenates q and k in separate copies, which are not modelled.
    if (mla && fl.on("no-rope-fusion"))
      out.warnings.push_back("--no-rope-fusion with --multi-latent-attention: racksim models MLA's fused rotary kernels; "
                             "the unfused path's extra copies of q and k are not modelled (the step is a little short)");
    if (fl.has("qk-layernorm") && fl.has("multi-latent-attention")) {  // MLA's latent norms: part of mla
      fl.used.insert("qk-layernorm");
      out.ignored.push_back(shown(fl.last["qk-layernorm"]) + " (with --multi-latent-attention: the latent norms, part of mla)");
    } else if (fl.on("qk-layernorm")) {
      mw.line(2, "qk_norm", "true", "--qk-layernorm");
    }
    if (auto ne = as_int("num-experts"); ne && *ne > 0) {
      is_moe = true;
      experts = static_cast<int>(*ne);
      mw.line(2, "moe", "");
      mw.line(4, "experts", std::to_string(*ne), src("num-experts"));
      const long long topk = as_int("moe-router-topk").value_or(2);
      mw.line(4, "top_k", std::to_string(topk), fl.has("moe-router-topk") ? src("moe-router-topk") : "Megatron's default --moe-router-topk 2");
      const long long ew = as_int("moe-ffn-hidden-size").value_or(ffn_hidden);
      mw.line(4, "expert_ffn_hidden", std::to_string(ew),
              fl.has("moe-ffn-hidden-size") ? src("moe-ffn-hidden-size") : "no --moe-ffn-hidden-size: Megatron uses --ffn-hidden-size");
      long long shared = 0;
      std::string shared_src = "no --moe-shared-expert-intermediate-size: none";
      if (auto s = as_int("moe-shared-expert-intermediate-size")) {
        shared = ew > 0 ? (*s + ew / 2) / ew : 0;
        shared_src = src("moe-shared-expert-intermediate-size") + fmt::format(" / expert width {}", ew);
        if (ew > 0 && *s % ew != 0)
          out.warnings.push_back(fmt::format("--moe-shared-expert-intermediate-size {} is not a multiple of the expert "
                                             "width {}: counted as {} shared experts",
                                             *s, ew, shared));
      }
      mw.line(4, "shared_experts", std::to_string(shared), shared_src);
      // Group-limited routing: Megatron-Core runs it only with both --moe-router-num-groups and
      // --moe-router-group-topk (moe_utils.py topk_routing_with_score_function: `if group_topk`).
      if (auto g = as_int("moe-router-num-groups"); g && *g > 1) {
        const auto gt = as_int("moe-router-group-topk");
        const auto why = gt ? router_groups_problem(static_cast<int>(*ne), static_cast<int>(topk), static_cast<int>(*g),
                                                    static_cast<int>(*gt))
                            : std::optional<std::string>("no --moe-router-group-topk: Megatron-Core routes without groups");
        if (why) {
          out.warnings.push_back(fmt::format("--moe-router-num-groups {}: {}; a plain top-k router", *g, *why));
        } else {
          mw.line(4, "router_groups", std::to_string(*g), src("moe-router-num-groups"));
          mw.line(4, "router_group_top_k", std::to_string(*gt), src("moe-router-group-topk"));
        }
      }
      int dense = 0;
      std::string dense_src = "no --moe-layer-freq: every layer is MoE";
      if (auto f = fl.str("moe-layer-freq")) {
        // "([0]*3+[1]*58)" -> 3 leading dense layers; "1" -> none; "2" -> every other layer (not expressible)
        std::string s;
        for (char c : *f)
          if (!std::isspace(static_cast<unsigned char>(c)) && c != '\'' && c != '"') s += c;
        dense_src = src("moe-layer-freq");
        if (s == "1") {
          dense = 0;
        } else if (s.rfind("([0]*", 0) == 0 && s.find("+[1]*") != std::string::npos) {
          dense = std::atoi(s.c_str() + 5);
        } else if (s.rfind("([1]*", 0) == 0 && s.find('0') == std::string::npos) {
          dense = 0;
        } else {
          out.warnings.push_back(fmt::format("--moe-layer-freq {}: only leading dense layers are expressible; modelled as "
                                             "MoE in every layer",
                                             *f));
        }
      }
      mw.line(4, "first_dense_layers", std::to_string(dense), dense_src);
    }
    if (mla) {
      mw.line(2, "mla", "");
      auto q = as_int("q-lora-rank");
      if (!q)
        fail(label, "--multi-latent-attention without --q-lora-rank (no query compression) is not modelled; "
                    "racksim's MLA has the low-rank query projection");
      mw.line(4, "q_lora_rank", std::to_string(*q), src("q-lora-rank"));
      const long long kvr = as_int("kv-lora-rank").value_or(512);
      mw.line(4, "kv_lora_rank", std::to_string(kvr), fl.has("kv-lora-rank") ? src("kv-lora-rank") : "Megatron's default 512");
      const long long qk = as_int("qk-head-dim").value_or(128);
      mw.line(4, "qk_nope_head_dim", std::to_string(qk), fl.has("qk-head-dim") ? src("qk-head-dim") : "Megatron's default --qk-head-dim 128");
      const long long rope = as_int("qk-pos-emb-head-dim").value_or(64);
      mw.line(4, "qk_rope_head_dim", std::to_string(rope),
              fl.has("qk-pos-emb-head-dim") ? src("qk-pos-emb-head-dim") : "Megatron's default --qk-pos-emb-head-dim 64");
      const long long vh = as_int("v-head-dim").value_or(128);
      mw.line(4, "v_head_dim", std::to_string(vh), fl.has("v-head-dim") ? src("v-head-dim") : "Megatron's default --v-head-dim 128");
    }
  }
  (void)vocab_out;
  (void)experts;

  // ---- training
  Writer tw;
  const auto seq = as_int("seq-length");
  if (!seq) fail(label, "no --seq-length: the sequence length is needed");
  tw.line(2, "seq_len", std::to_string(*seq), src("seq-length"));
  const long long micro = as_int("micro-batch-size").value_or(1);
  if (!fl.has("micro-batch-size")) out.warnings.push_back("no --micro-batch-size: 1 is used");
  const long long mp = static_cast<long long>(tp) * pp * cp;
  const long long dp = mp > 0 && gpus % mp == 0 ? gpus / mp : 0;
  long long global = micro * std::max<long long>(dp, 1);
  std::string global_src = fmt::format("no --global-batch-size: micro-batch x data parallel ({} x {}), Megatron's default",
                                       micro, std::max<long long>(dp, 1));
  if (auto g = as_int("global-batch-size")) global = *g, global_src = src("global-batch-size");
  tw.line(2, "global_batch", std::to_string(global), global_src);
  tw.line(2, "micro_batch", std::to_string(micro), fl.has("micro-batch-size") ? src("micro-batch-size") : "default 1");

  // precision
  std::string precision = "bf16", prec_src, fp8_recipe, fp8_recipe_src;
  // Megatron-LM refuses the pair (arguments.py validate_args: with --fp16, `assert not args.bf16`); the importer had
  // taken --bf16 and called --fp16 an argument it does not know.
  if (fl.has("bf16") && fl.has("fp16"))
    refuse(label, fl.last["fp16"], "fp16", "--bf16 and --fp16 together: Megatron-LM refuses the pair (choose one)");
  if (auto fp4 = fl.str("fp4-format")) {
    // Megatron-LM refuses the pair (arguments.py at 932b7674: "--fp4-format and --fp8-format cannot be used
    // simultaneously"); the importer had taken fp4 and called --fp8-format unknown.
    if (fl.has("fp8-format"))
      refuse(label, fl.last["fp8-format"], "fp8-format",
             "--fp4-format and --fp8-format together: Megatron-LM refuses the pair (choose one)");
    precision = "nvfp4";
    prec_src = src("fp4-format") + (fl.has("fp4-recipe") ? " " + src("fp4-recipe") : "");
    fl.str("fp4-recipe");
    if (fl.on("bf16")) prec_src += " (GEMMs; --bf16 for the rest)";
  } else if (auto fp8 = fl.str("fp8-format")) {
    // Megatron's choices (transformer_config.py `fp8: Literal['e4m3', 'hybrid']`, --fp8-format): anything else never ran.
    if (*fp8 != "e4m3" && *fp8 != "hybrid")
      refuse(label, fl.last["fp8-format"], "fp8-format",
             fmt::format("unknown value '{}'; Megatron takes e4m3 | hybrid", *fp8));
    const std::string recipe = fl.str("fp8-recipe").value_or("");
    precision = recipe == "mxfp8" ? "mxfp8" : "fp8";
    prec_src = src("fp8-format") + (recipe.empty() ? "" : " " + src("fp8-recipe"));
    if (fl.on("bf16")) prec_src += " (GEMMs; --bf16 for the rest)";
    if (sim::parse_in(kFp8RecipeNames, recipe)) {
      fp8_recipe = recipe;
      fp8_recipe_src = src("fp8-recipe");
    } else if (!recipe.empty() && recipe != "mxfp8") {
      out.warnings.push_back(fmt::format("--fp8-recipe {}: not one racksim models ({}, mxfp8); per-tensor fp8 GEMM "
                                         "throughput used",
                                         recipe, fmt::join(sim::names_in(kFp8RecipeNames), ", ")));
    }
  } else if (fl.on("bf16")) {
    prec_src = "--bf16";
  } else if (fl.on("fp16")) {
    precision = "fp16";
    prec_src = "--fp16";
    // (arguments.py: --bf16 forces accumulate_allreduce_grads_in_fp32; under --fp16 the flag is the user's)
    if (fl.has("accumulate-allreduce-grads-in-fp32"))
      out.warnings.push_back("--fp16 with --accumulate-allreduce-grads-in-fp32: Megatron then keeps and reduces fp32 "
                             "gradients; racksim's precision fp16 keeps and reduces fp16 ones (Megatron's --fp16 default): "
                             "2 bytes per parameter less memory and half the data-parallel bytes of this run");
  } else {
    prec_src = "no --bf16/--fp16/--fp8-format: Megatron would train in fp32, which racksim does not model; bf16 used";
    out.warnings.push_back("no --bf16, --fp16 or --fp8-format: Megatron trains in fp32 then; racksim models bf16 and "
                           "narrower matmuls, so bf16 is used");
  }
  if (precision != "fp16" && precision != "bf16" && fl.on("fp16"))
    out.warnings.push_back(fmt::format("--{}-format with --fp16: racksim models {} GEMMs with bf16 parameters around them "
                                       "and the 16-bit gradient buffer (grad_reduce_in_bf16), without the loss scaler's "
                                       "work",
                                       precision == "nvfp4" ? "fp4" : "fp8", precision == "nvfp4" ? "fp4" : "fp8"));
  tw.line(2, "precision", precision, prec_src);
  if (!fp8_recipe.empty()) tw.line(2, "fp8_recipe", fp8_recipe, fp8_recipe_src);
  if (precision != "bf16" && fl.on("no-fp8-wgrad")) tw.line(2, "fp8_wgrad", "false", src("no-fp8-wgrad"));
  if (precision != "bf16" && fl.on("fp8-param-gather")) tw.line(2, "fp8_param_gather", "true", src("fp8-param-gather"));
  else if (fl.on("fp8-param-gather"))
    out.warnings.push_back("--fp8-param-gather without --fp8-format: Megatron keeps bf16 parameters; no effect");

  tw.line(2, "parallelism", "");
  tw.line(4, "tp", std::to_string(tp), fl.has("tensor-model-parallel-size") ? src("tensor-model-parallel-size") : "default 1");
  tw.line(4, "pp", std::to_string(pp), fl.has("pipeline-model-parallel-size") ? src("pipeline-model-parallel-size") : "default 1");
  // Megatron-Core counts the embedding and the loss as layers of the pipeline split when asked
  // (transformer_block.py get_num_layers_to_build): for the chunk size below and the end stages further down.
  const bool embedding_counted = fl.on("account-for-embedding-in-pipeline-split");
  const bool loss_counted = fl.on("account-for-loss-in-pipeline-split");
  const long long counted_layers = layers + embedding_counted + loss_counted;
  // Interleaving: --virtual-pipeline-model-parallel-size, --num-virtual-stages-per-pipeline-rank, or
  // --num-layers-per-virtual-pipeline-stage (layers per chunk).
  long long vp = 1;
  std::string vp_src = "default 1 (no interleaving)";
  if (auto v = as_size("virtual-pipeline-model-parallel-size")) vp = *v, vp_src = src("virtual-pipeline-model-parallel-size");
  else if (auto v2 = as_size("num-virtual-stages-per-pipeline-rank")) vp = *v2, vp_src = src("num-virtual-stages-per-pipeline-rank");
  else if (auto per = as_size("num-layers-per-virtual-pipeline-stage"); per && layers > 0) {
    // As Megatron-LM derives it (arguments.py, d98e8a64), with its refusals: not beside an uneven split, and the
    // layers (with the embedding and loss when they count) must split over pp, each rank's over the chunk size.
    if (fl.has("decoder-first-pipeline-num-layers") || fl.has("decoder-last-pipeline-num-layers"))
      fail(label, src("num-layers-per-virtual-pipeline-stage") + " with --decoder-first/last-pipeline-num-layers: "
                  "Megatron-LM refuses it ('please use --num-virtual-stages-per-pipeline-rank to specify virtual "
                  "pipeline parallel degree when enable uneven pipeline parallelism')");
    const long long counted = counted_layers;
    const long long ranks = std::max(pp, 1);
    if (counted % ranks != 0 || (counted / ranks) % *per != 0)
      fail(label, fmt::format("{}: {} layers over pp {} do not split into chunks of {} (Megatron-LM: 'number of "
                              "layers of the model must be divisible pipeline model parallel size' and 'number of layers "
                              "per pipeline stage must be divisible number of layers per virtual pipeline stage')",
                              src("num-layers-per-virtual-pipeline-stage"), counted, ranks, *per));
    vp = std::max<long long>(1, counted / ranks / *per);
    vp_src = src("num-layers-per-virtual-pipeline-stage") + fmt::format(": {} layers / ({} layers x pp {})", counted, *per, pp);
  }
  // A custom layout sets the virtual stages itself (Megatron-LM arguments.py: vp = its stages / pp) and, where its middle
  // stages hold equal numbers of decoder layers, racksim's first/last stage counts (written with the pipeline below).
  std::optional<std::vector<std::string>> layout;
  if (const auto text = fl.str("pipeline-model-parallel-layout")) {
    // Refused at the flag's line; the value is not repeated (a layout may be long).
    const Arg& layout_arg = fl.last["pipeline-model-parallel-layout"];
    const auto layout_refuse = [&](const std::string& msg) { refuse(label, layout_arg, "pipeline-model-parallel-layout", msg); };
    std::string bad;
    layout = parse_pipeline_layout(*text, bad);
    if (!layout) layout_refuse("not a layout Megatron-Core reads: " + bad);
    const auto count = [&](char c) {
      long long n = 0;
      for (const auto& st : *layout) n += std::count(st.begin(), st.end(), c);
      return n;
    };
    const long long stages = static_cast<long long>(layout->size());
    if (stages % pp != 0)
      layout_refuse(fmt::format("{} stages do not divide over pp {} (Megatron-Core: 'pipeline_model_parallel_layout "
                              "must be divisible by pipeline_model_parallel_size')",
                              stages, pp));
    if (layers > 0 && count('t') != layers)
      layout_refuse(fmt::format("{} decoder layers (t) where --num-layers is {} (Megatron-Core: 'Number of decoder "
                              "layers ... must match num_layers')",
                              count('t'), layers));
    if (const long long mtp = as_int("mtp-num-layers").value_or(0); count('m') != mtp)
      layout_refuse(fmt::format("{} MTP layers (m) where --mtp-num-layers is {} (Megatron-Core: 'Number of mtp layers "
                              "in layout must match mtp_num_layers')",
                              count('m'), mtp));
    if (count('E') != 1 || count('L') != 1 || layout->front().empty() || layout->front().front() != 'E' ||
        layout->back().empty() || layout->back().back() != 'L')
      layout_refuse(fmt::format("the embedding (E) must come first and the loss (L) last, once each (Megatron-Core "
                              "validate_layer_layout)"));
    const long long from_layout = stages / pp;
    if ((fl.has("virtual-pipeline-model-parallel-size") || fl.has("num-virtual-stages-per-pipeline-rank") ||
         fl.has("num-layers-per-virtual-pipeline-stage")) &&
        vp != from_layout)
      layout_refuse(fmt::format("{} stages over pp {} are {} virtual stages per rank, where {} gives {}",
                              stages, pp, from_layout, vp_src, vp));
    if (embedding_counted || loss_counted || fl.has("decoder-first-pipeline-num-layers") ||
        fl.has("decoder-last-pipeline-num-layers"))
      layout_refuse("with --account-for-*-in-pipeline-split or --decoder-first/last-pipeline-num-layers: Megatron-LM "
                    "refuses them together (the layout states the split)");
    vp = from_layout;
    vp_src = layout_src() + fmt::format(": {} stages / pp {}", stages, pp);
  }
  if (vp > 1) tw.line(4, "vp", std::to_string(vp), vp_src);
  tw.line(4, "cp", std::to_string(cp), fl.has("context-parallel-size") ? src("context-parallel-size") : "default 1");
  if (ep > 1 || fl.has("expert-model-parallel-size"))
    tw.line(4, "ep", std::to_string(ep), fl.has("expert-model-parallel-size") ? src("expert-model-parallel-size") : "default 1");
  if (etp) tw.line(4, "etp", std::to_string(*etp), src("expert-tensor-parallel-size"));
  tw.line(4, "dp", "auto", fmt::format("{} GPUs / (tp·pp·cp)", gpus));

  // optimizer state
  std::string sharding = "none", shard_src = "no --use-distributed-optimizer: every data-parallel rank holds the optimizer";
  if (fl.on("use-distributed-optimizer")) sharding = "zero1", shard_src = "--use-distributed-optimizer (ZeRO-1)";
  if (auto s = fl.str("data-parallel-sharding-strategy")) {
    if (*s == "optim") sharding = "zero1";
    else if (*s == "optim_grads") sharding = "zero2";
    else if (*s == "optim_grads_params") sharding = "fsdp";
    shard_src = src("data-parallel-sharding-strategy");
  }
  if (fl.on("use-torch-fsdp2") || fl.on("use-custom-fsdp") || fl.on("use-megatron-fsdp")) {
    if (sharding == "none" || sharding == "zero1") sharding = "fsdp";
    shard_src = "FSDP (" + shard_src + ")";
  }
  tw.line(2, "optimizer_sharding", sharding, shard_src);

  // recompute
  std::string recompute = "none", rc_src = "no --recompute-granularity";
  std::vector<std::string> recompute_modules;  // --recompute-modules under selective granularity
  long long block_layers = 0;  // --recompute-method block --recompute-num-layers
  if (auto g = fl.str("recompute-granularity")) {
    rc_src = src("recompute-granularity");
    if (*g == "full") {
      recompute = "full";
      const std::string method = fl.str("recompute-method").value_or("");
      const auto n = as_int("recompute-num-layers");
      if (!method.empty()) rc_src += " " + src("recompute-method");
      if (n) rc_src += " " + src("recompute-num-layers");
      // block: the first N layers of each model chunk (training.recompute_num_layers); uniform: every layer, in
      // checkpoints of N layers each (racksim checkpoints each layer: the same recompute, and one saved input per
      // layer where Megatron keeps one per group).
      if (method == "block" && n && *n > 0) {
        block_layers = *n;
      } else if (method == "block" && n && *n == 0) {
        recompute = "none";  // Megatron's block loop then checkpoints no layer
        out.warnings.push_back("--recompute-method block --recompute-num-layers 0: no layer is checkpointed (recompute: none)");
      } else if (method == "uniform" && n && *n > 1) {
        out.warnings.push_back(fmt::format("--recompute-method uniform --recompute-num-layers {}: modelled with one "
                                           "checkpoint per layer (the same recompute; Megatron keeps one input per {} "
                                           "layers)",
                                           *n, *n));
      }
    } else if (*g == "selective") {
      recompute = "selective";
      if (auto mods = fl.str("recompute-modules")) {
        rc_src += " " + src("recompute-modules");
        recompute_modules = module_list(*mods);
        // Megatron-Core refuses these (transformer_config.py at d98e8a64, __post_init__); racksim had mapped them.
        const auto listed = [&](const char* m) {
          return std::find(recompute_modules.begin(), recompute_modules.end(), m) != recompute_modules.end();
        };
        // (With --model the preset is the architecture, whose MLA the flags need not state.)
        if (listed("mla_up_proj") && !fl.on("multi-latent-attention") && opt.model.empty())
          refuse(label, fl.last["recompute-modules"], "recompute-modules",
                 "mla_up_proj without --multi-latent-attention: Megatron-Core refuses it ('mla_up_proj in "
                 "recompute_modules is only supported with multi_latent_attention.')");
        if (listed("moe_act") && !fl.on("moe-grouped-gemm"))
          refuse(label, fl.last["recompute-modules"], "recompute-modules",
                 "moe_act without --moe-grouped-gemm: Megatron-Core refuses it ('moe_act in recompute_modules is only "
                 "supported with moe_grouped_gemm.')");
      } else {
        recompute_modules = {"core_attn"};  // Megatron's default list
      }
    } else {
      out.warnings.push_back(fmt::format("--recompute-granularity {}: not known; no recompute", *g));
      recompute = "none";
    }
  } else if (fl.on("recompute-activations")) {
    recompute = "selective";
    rc_src = "--recompute-activations (selective)";
  }
  // Megatron's module lists as racksim's activation names: a selective list other than the attention core alone
  // (--recompute-modules), and Megatron-Core's fine-grained activation offloading (--fine-grained-activation-offloading
  // --offload-modules: each module's input goes to the host), become a {save, offload} map.
  std::vector<std::string> offload_modules;
  if (fl.on("fine-grained-activation-offloading")) {
    if (auto mods = fl.str("offload-modules")) offload_modules = module_list(*mods);
    rc_src += " --fine-grained-activation-offloading";
    if (fl.has("offload-modules")) rc_src += " " + src("offload-modules");
  } else {
    fl.str("offload-modules");  // (read: without the switch Megatron offloads nothing)
  }
  const bool names_policy = recompute != "full" && (!offload_modules.empty() ||
                                                    (recompute == "selective" && recompute_modules != std::vector<std::string>{"core_attn"}));
  if (names_policy) {
    recompute = activation_name_policy(recompute == "selective" ? recompute_modules : std::vector<std::string>{},
                                       offload_modules, is_moe, out.warnings);
  }
  tw.line(2, "recompute", recompute, rc_src);
  if (block_layers > 0)
    tw.line(2, "recompute_num_layers", std::to_string(block_layers), src("recompute-method") + " " + src("recompute-num-layers"));
  if (fl.on("optimizer-cpu-offload")) {
    tw.line(2, "offload", "");
    tw.line(4, "optimizer", "true", "--optimizer-cpu-offload");
  }
  if (fl.has("cpu-offloading") || fl.has("cpu-offloading-num-layers")) {
    fl.used.insert("cpu-offloading");
    fl.used.insert("cpu-offloading-num-layers");
    out.warnings.push_back("--cpu-offloading (activation offload of whole layers): not expressed; use "
                           "training.recompute: {save: [...], offload: [...]} to model an offload policy");
  }
  // attention implementation
  std::string attention = "flash", attn_src = "Megatron with Transformer Engine: fused (flash) attention";
  if (fl.has("transformer-impl") && fl.str("transformer-impl").value_or("") == "local") {
    attention = "materialized";  // Megatron-Core's local spec: its own DotProductAttention, unfused
    attn_src = src("transformer-impl") + ": Megatron's own DotProductAttention (scores materialized)";
  }
  if (auto b = fl.str("attention-backend")) {
    attn_src = src("attention-backend");
    if (*b == "unfused" || *b == "local") attention = "materialized";
  }
  tw.line(2, "attention", attention, attn_src);
  const bool graphs = fl.on("enable-cuda-graph") || fl.on("external-cuda-graph") ||
                      (fl.has("cuda-graph-impl") && fl.str("cuda-graph-impl").value_or("none") != "none");
  tw.line(2, "cuda_graphs", graphs ? "true" : "false",
          graphs ? "CUDA graphs (--enable-cuda-graph / --external-cuda-graph / --cuda-graph-impl)"
                 : "no --enable-cuda-graph / --cuda-graph-impl: eager launches");
  // --cuda-graph-scope (older scripts: --cuda-graph-modules): Transformer Engine graphs of those modules only.
  for (const char* flag : {"cuda-graph-scope", "cuda-graph-modules"}) {
    auto v = graphs ? fl.str(flag) : std::nullopt;
    if (!v) continue;
    std::vector<std::string> kept, dropped;
    std::istringstream words(*v);
    for (std::string w; words >> w;) {
      const bool modelled = std::any_of(kCudaGraphScopeNames.begin(), kCudaGraphScopeNames.end(),
                                        [&](const auto& entry) { return w == entry.first; });
      (modelled ? kept : dropped).push_back(w);
    }
    if (!dropped.empty())
      out.warnings.push_back(fmt::format("--{} {}: not modelled; racksim models attn, mlp, moe_router, moe_preprocess",
                                         flag, fmt::join(dropped, " ")));
    if (!kept.empty()) {
      if (std::find(kept.begin(), kept.end(), "moe_preprocess") != kept.end() &&
          std::find(kept.begin(), kept.end(), "moe_router") == kept.end()) {
        kept.insert(kept.begin(), "moe_router");  // Megatron-Core requires it with moe_preprocess
        out.warnings.push_back(fmt::format("--{} moe_preprocess without moe_router: Megatron-Core requires both; "
                                           "moe_router added",
                                           flag));
      }
      tw.line(2, "cuda_graph_scope", fmt::format("[{}]", fmt::join(kept, ", ")), src(flag));
    }
    break;
  }
  const bool sp = fl.on("sequence-parallel");
  tw.line(2, "sequence_parallel", sp ? "true" : "false", sp ? "--sequence-parallel" : "no --sequence-parallel (Megatron's default)");
  const bool tpo = fl.on("tp-comm-overlap");
  tw.line(2, "tp_comm_overlap", tpo ? "true" : "false", tpo ? "--tp-comm-overlap" : "no --tp-comm-overlap");
  const bool ogr = fl.on("overlap-grad-reduce");
  tw.line(2, "overlap_grad_reduce", ogr ? "true" : "false", ogr ? "--overlap-grad-reduce" : "no --overlap-grad-reduce");
  const bool opg = fl.on("overlap-param-gather");
  tw.line(2, "overlap_param_gather", opg ? "true" : "false", opg ? "--overlap-param-gather" : "no --overlap-param-gather");
  // (Without it a data-parallel group's gathers and reductions share one communicator: racksim's default, not written.)
  // Megatron-FSDP's flag: only its adapter reads the all-gather groups (Megatron-LM@d98e8a64
  // megatron/core/distributed/fsdp/mcore_fsdp_adapter.py); the distributed optimizer gathers and reduces on its
  // instance group either way, and torch FSDP2 ignores it.
  if (fl.on("create-all-gather-group")) {
    if (fl.on("use-megatron-fsdp") || fl.on("use-custom-fsdp"))
      tw.line(2, "dp_all_gather_group", "separate", "--create-all-gather-group");
    else
      out.warnings.push_back("--create-all-gather-group without --use-megatron-fsdp: no effect (only Megatron-FSDP "
                             "reads the all-gather groups); the data-parallel gathers share the reductions' communicator");
  }
  // Dropout and the loss: Megatron's defaults (0.1 each; cross entropy unfused) where the script is silent.
  for (const char* f : {"attention-dropout", "hidden-dropout"}) {
    std::string key = f;
    std::replace(key.begin(), key.end(), '-', '_');
    if (auto v = fl.str(f)) {
      char* end = nullptr;
      const double p = std::strtod(v->c_str(), &end);
      if (v->empty() || end != v->c_str() + v->size() || !(p >= 0 && p <= 1)) {
        refuse(label, fl.last[f], f, fmt::format("expected a probability in [0, 1], got '{}'", *v));
      }
      tw.line(2, key, *v, src(f));
    } else {
      tw.line(2, key, "0.1", std::string("no --") + f + ": Megatron's default");
    }
  }
  const bool cef = fl.on("cross-entropy-loss-fusion");
  tw.line(2, "cross_entropy_fusion", cef ? "true" : "false",
          cef ? "--cross-entropy-loss-fusion" : "no --cross-entropy-loss-fusion (Megatron's default: unfused)");
  // Megatron's NaN checks (training.check_for_nan): on by default; --no-check-for-nan-in-loss-and-grad turns them
  // off (--check-for-nan-in-loss-and-grad, older Megatron's switch, on). Given both, the later one holds.
  {
    const std::string* nan_flag = nullptr;
    for (const auto& a : ex.args)
      if (a.flag == "no-check-for-nan-in-loss-and-grad" || a.flag == "check-for-nan-in-loss-and-grad") nan_flag = &a.flag;
    fl.on("no-check-for-nan-in-loss-and-grad");
    fl.on("check-for-nan-in-loss-and-grad");
    // Under --fp16 without a static --loss-scale Megatron turns the check off whatever the flags say (arguments.py:
    // dynamic loss scaling's skipped steps are the NaN signal); with one, the check is on unless turned off, where
    // racksim's fp16 default is off (TrainingConfig::check_for_nan).
    // (Megatron reads --loss-scale as a float, 0 or less as none: `if not args.loss_scale`, `if config.loss_scale`.)
    std::optional<std::string> loss_scale = fl.str("loss-scale");
    if (loss_scale) {
      char* end = nullptr;
      const double v = std::strtod(loss_scale->c_str(), &end);
      if (end != loss_scale->c_str() && *end == '\0' && v <= 0) loss_scale.reset();
    }
    const bool fp16_params = fl.on("fp16");  // --fp16, also beside fp8/fp4 GEMMs: Megatron's check follows it
    if (loss_scale && !fp16_params)
      out.warnings.push_back("--loss-scale without --fp16: Megatron's constant grad scaler's unscale and inf check on the "
                             "optimizer's shard are modelled under precision fp16 only");
    if (fp16_params && !loss_scale) {
      // (precision fp16 defaults to off; beside fp8/fp4 GEMMs the precision is theirs, so it is written)
      if (precision != "fp16")
        tw.line(2, "check_for_nan", "false", "--fp16 without --loss-scale: Megatron turns the check off (dynamic loss scaling)");
      if (nan_flag && !nan_flag->starts_with("no-"))
        out.warnings.push_back("--check-for-nan-in-loss-and-grad with --fp16 and no --loss-scale: Megatron turns the "
                               "check off under dynamic loss scaling (arguments.py); so does racksim");
    } else if (nan_flag) {
      tw.line(2, "check_for_nan", nan_flag->starts_with("no-") ? "false" : "true", src(*nan_flag));
    } else if (precision == "fp16") {
      tw.line(2, "check_for_nan", "true", "--fp16 with --loss-scale " + *loss_scale + ": a static scaler, Megatron's check stays on");
    }
  }
  // The weight gradient's fp32 accumulate fused into its GEMM (training.gradient_accumulation_fusion; Megatron's default),
  // and whose linears run it (training.transformer_impl: Transformer Engine's by default, or Megatron's own).
  if (fl.on("no-gradient-accumulation-fusion"))
    tw.line(2, "gradient_accumulation_fusion", "false", src("no-gradient-accumulation-fusion"));
  // Megatron options racksim runs one way only: said, not dropped.
  if (fl.on("moe-shared-expert-overlap"))
    out.warnings.push_back("--moe-shared-expert-overlap: not modelled; the shared experts run on the compute stream "
                           "before the router (Megatron-Core without the flag), not beside the token exchange");
  // --delay-wgrad-compute belongs to the EP overlap's combined 1F1B order (training.moe.a2a_overlap), which racksim
  // builds with it: Megatron-Core refuses the flag alone (transformer_config.py since ae1c88296f, 2025-08-01), and
  // the overlap without it is said, since racksim's order delays the first layer's weight gradients regardless.
  const bool ep_overlap = fl.has("overlap-moe-expert-parallel-comm");
  if (fl.on("delay-wgrad-compute") && !ep_overlap)
    refuse(label, fl.last["delay-wgrad-compute"], "delay-wgrad-compute",
           "without --overlap-moe-expert-parallel-comm: Megatron-Core refuses it ('overlap_moe_expert_parallel_comm "
           "must be enabled when enabling delay_wgrad_compute', transformer_config.py)");
  if (ep_overlap && !fl.has("delay-wgrad-compute"))
    out.warnings.push_back("--overlap-moe-expert-parallel-comm without --delay-wgrad-compute: racksim's EP-overlap "
                           "order delays the first layer's weight gradients past the chunk's sends, as "
                           "--delay-wgrad-compute does (the ModelZoo's A2A_OVERLAP sets both)");
  if (fl.on("manual-gc"))
    out.warnings.push_back("--manual-gc: not modelled; racksim's host model has no Python garbage collector, so the "
                           "collections the flag aligns across ranks are in neither its prediction with the flag nor "
                           "without");
  if (auto bucket = fl.str("ddp-bucket-size"))
    out.warnings.push_back(fmt::format("--ddp-bucket-size {}: not modelled; racksim reduces and gathers the data-parallel "
                                       "gradients and parameters one bucket per layer, and takes Megatron's NaN checks "
                                       "per bucket of its default size, max(40M, 1M x dp) parameters, not {}",
                                       *bucket, *bucket));
  if (auto impl = fl.str("cross-entropy-fusion-impl"); impl && *impl != "native")
    out.warnings.push_back(fmt::format("--cross-entropy-fusion-impl {}: modelled as native (Megatron's fused cross "
                                       "entropy in its own kernels)", *impl));
  // Context parallelism's exchange (training.cp_comm): Megatron's --cp-comm-type, one type or one per layer.
  if (auto types = fl.str("cp-comm-type")) {
    std::istringstream words(*types);
    std::vector<std::string> each;
    for (std::string w; words >> w;) each.push_back(w);
    static const std::map<std::string, std::string> as_key = {{"p2p", "p2p"}, {"a2a", "a2a"}, {"allgather", "all_gather"}};
    const auto key = each.empty() ? as_key.end() : as_key.find(each.front());
    if (key == as_key.end())
      refuse(label, fl.last["cp-comm-type"], "cp-comm-type",
             fmt::format("'{}': racksim models p2p | a2a | allgather (not a2a+p2p, the hierarchical exchange)",
                         each.empty() ? *types : each.front()));
    if (std::any_of(each.begin(), each.end(), [&](const std::string& w) { return w != each.front(); }))
      out.warnings.push_back(fmt::format("--cp-comm-type {}: one type per layer; modelled as {} on every layer", *types,
                                         each.front()));
    tw.line(2, "cp_comm", key->second, src("cp-comm-type"));
  }
  if (auto impl = fl.str("transformer-impl")) {
    if (*impl != "transformer_engine" && *impl != "local")
      refuse(label, fl.last["transformer-impl"], "transformer-impl",
             fmt::format("unknown value '{}'; racksim models transformer_engine | local", *impl));
    tw.line(2, "transformer_impl", *impl, src("transformer-impl"));
  }
  if (fl.on("overlap-param-gather-with-optimizer-step"))
    out.warnings.push_back("--overlap-param-gather-with-optimizer-step: modelled as --overlap-param-gather");
  // Megatron applies --grad-reduce-in-bf16 under --bf16 only (arguments.py); --fp16's buffer is fp16 already. So is
  // --main-grads-dtype bf16 at HEAD (accumulate_allreduce_grads_in_fp32 is forced only with fp32 main gradients).
  const bool main_grads_bf16 = fl.str("main-grads-dtype").value_or("fp32") == "bf16" && !fl.has("fp16");
  // Megatron-FSDP's own switch (Megatron-LM HEAD; it "replaces --main-grads-dtype"): 'auto' is the model's gradient dtype,
  // bf16 under --bf16. Without the flag the code's version is unknown and racksim keeps fp32 (the custom FSDP of
  // Megatron-LM@1e057005, the Qwen3 row's code).
  const auto fsdp_grads = fl.str("megatron-fsdp-main-grads-dtype");
  const bool fsdp_grads_16bit = fsdp_grads && *fsdp_grads != "fp32" && !fl.has("fp16") && fl.has("use-megatron-fsdp");
  if (fsdp_grads && !fl.has("use-megatron-fsdp"))
    out.warnings.push_back("--megatron-fsdp-main-grads-dtype without --use-megatron-fsdp: no effect");
  if (auto comm = fl.str("megatron-fsdp-grad-comm-dtype"); comm && *comm != "auto")
    out.warnings.push_back(fmt::format("--megatron-fsdp-grad-comm-dtype {}: racksim reduces Megatron-FSDP's gradients "
                                       "in their buffer's dtype (the flag's auto)", *comm));
  if (fl.on("grad-reduce-in-bf16") && fl.has("fp16"))
    out.warnings.push_back("--grad-reduce-in-bf16 with --fp16: no effect (Megatron keeps and reduces fp16 gradients)");
  else if (fl.has("grad-reduce-in-bf16"))
    tw.line(2, "grad_reduce_in_bf16", "true", src("grad-reduce-in-bf16"));
  else if (main_grads_bf16)
    tw.line(2, "grad_reduce_in_bf16", "true", src("main-grads-dtype") + " (no fp32 accumulate and reduce is forced)");
  else if (fsdp_grads_16bit)
    tw.line(2, "grad_reduce_in_bf16", "true", src("megatron-fsdp-main-grads-dtype") + " (Megatron-FSDP's 16-bit buffer)");
  else if (fl.has("fp16") && precision != "fp16")  // --fp16 beside --fp8-format or --fp4-format GEMMs
    tw.line(2, "grad_reduce_in_bf16", "true", "--fp16 beside fp8/fp4 GEMMs: its 16-bit gradient buffer");

  // MoE training options
  // The router's padding under either name (both read, so neither is reported unread).
  const bool padding_named = fl.on("moe-router-padding-for-quantization"), padding_alias = fl.on("moe-router-padding-for-fp8");
  const char* const padding_flag = padding_named   ? "moe-router-padding-for-quantization"
                                   : padding_alias ? "moe-router-padding-for-fp8"
                                                   : nullptr;
  const bool router_padding = padding_flag != nullptr;
  const bool any_moe_flag = fl.has("moe-token-dispatcher-type") || fl.has("moe-enable-deepep") ||
                            fl.has("moe-router-group-topk") || fl.has("overlap-moe-expert-parallel-comm") ||
                            fl.has("moe-flex-dispatcher-backend") || fl.on("moe-router-fusion") ||
                            fl.on("moe-permute-fusion") || router_padding || fl.has("moe-expert-capacity-factor") ||
                            fl.on("moe-pad-expert-input-to-capacity") || fl.on("moe-router-force-load-balancing");
  if (any_moe_flag && (is_moe || !opt.model.empty())) {
    tw.line(2, "moe", "");
    std::string disp = "alltoall", disp_src = "Megatron's default dispatcher is allgather; modelled as alltoall";
    const std::string type = fl.str("moe-token-dispatcher-type").value_or("allgather");
    if (fl.has("moe-token-dispatcher-type")) disp_src = src("moe-token-dispatcher-type");
    // Megatron-Core's checks (transformer_config.py at d98e8a64): --moe-enable-deepep only with the flex dispatcher,
    // and not beside the hybridep backend. (racksim had imported both as DeepEP.)
    if (fl.on("moe-enable-deepep") && type != "flex")
      refuse(label, fl.last["moe-enable-deepep"], "moe-enable-deepep",
             fmt::format("with the {} dispatcher{}: Megatron-Core refuses it ('DeepEP backend is only supported with flex "
                         "token dispatcher.'); give --moe-token-dispatcher-type flex",
                         type, fl.has("moe-token-dispatcher-type") ? "" : " (Megatron's default)"));
    if (fl.on("moe-enable-deepep") && fl.str("moe-flex-dispatcher-backend").value_or("deepep") == "hybridep")
      refuse(label, fl.last["moe-enable-deepep"], "moe-enable-deepep",
             "with --moe-flex-dispatcher-backend hybridep: Megatron-Core refuses it ('Only one backend is supported for "
             "flex token dispatcher.')");
    if (type == "flex") {
      const std::string backend = fl.str("moe-flex-dispatcher-backend").value_or("deepep");
      disp = backend == "hybridep" ? "hybridep" : "deepep";
      disp_src += fl.has("moe-flex-dispatcher-backend") ? " " + src("moe-flex-dispatcher-backend")
                                                        : fl.has("moe-enable-deepep") ? " --moe-enable-deepep" : " (DeepEP)";
    } else if (type == "allgather") {
      out.warnings.push_back("--moe-token-dispatcher-type allgather: modelled as alltoall (racksim has no all-gather dispatcher)");
    } else if (type != "alltoall" && type != "alltoall_seq") {
      out.warnings.push_back(fmt::format("--moe-token-dispatcher-type {}: not known; modelled as alltoall", type));
    }
    tw.line(4, "dispatcher", disp, disp_src);
    // --moe-router-num-groups / --moe-router-group-topk are the model's group-limited routing (model.moe.router_groups,
    // router_group_top_k, written above): expert groups, not NVLink domains, so no max_nodes_per_token from them.
    fl.str("moe-router-num-groups");
    fl.str("moe-router-group-topk");
    if (fl.on("overlap-moe-expert-parallel-comm")) tw.line(4, "a2a_overlap", "true", "--overlap-moe-expert-parallel-comm");
    // The fusions change the host's work per layer; the router's padding the rows exchanged and the experts' copies.
    if (fl.on("moe-router-fusion")) tw.line(4, "router_fusion", "true", "--moe-router-fusion");
    if (fl.on("moe-permute-fusion")) tw.line(4, "permute_fusion", "true", "--moe-permute-fusion");
    if (router_padding) {
      if (precision == "bf16")
        fail(label, fmt::format("--{} without --fp8-format or --fp4-format: Megatron-Core refuses it ('fp8/fp4 must be "
                                "specified when moe_router_padding_for_quantization is True', transformer_config.py)",
                                padding_flag));
      tw.line(4, "router_padding", "true", std::string("--") + padding_flag);
    }
    // The benchmark's forced balancing: random router logits.
    if (fl.on("moe-router-force-load-balancing"))
      tw.line(4, "force_load_balancing", "true", "--moe-router-force-load-balancing");
    // Token dropping: the capacity factor (Megatron's default None: dropless) and the padding to capacity.
    auto cf = fl.str("moe-expert-capacity-factor");
    const bool pad = fl.on("moe-pad-expert-input-to-capacity");
    if (cf && *cf != "None") {
      // (written into the scenario as given: a value that is not a number had made the import's own YAML fail)
      char* end = nullptr;
      const double x = std::strtod(cf->c_str(), &end);
      if (cf->empty() || end != cf->c_str() + cf->size() || !std::isfinite(x) || x == 0)
        refuse(label, fl.last["moe-expert-capacity-factor"], "moe-expert-capacity-factor",
               fmt::format("expected a positive number, a negative one or None (dropless), got '{}'", *cf));
      if (x < 0) cf = std::nullopt;  // Megatron-Core's TransformerConfig turns a negative factor into None: dropless
      else tw.line(4, "capacity_factor", *cf, src("moe-expert-capacity-factor"));
    }
    if (pad) {
      if (!cf || *cf == "None")
        fail(label, "--moe-pad-expert-input-to-capacity without --moe-expert-capacity-factor: Megatron-Core refuses it "
                    "(the padding is to the expert capacity)");
      tw.line(4, "pad_to_capacity", "true", "--moe-pad-expert-input-to-capacity");
    }
  }
  if (auto mtp = as_int("mtp-num-layers"); mtp && *mtp > 0) tw.line(2, "mtp_layers", std::to_string(*mtp), src("mtp-num-layers"));
  // The precision-aware optimizer's moment dtypes (fp32 by default; only with --use-precision-aware-optimizer).
  {
    const bool aware = fl.on("use-precision-aware-optimizer");
    const std::string m1 = fl.str("exp-avg-dtype").value_or("fp32"), m2 = fl.str("exp-avg-sq-dtype").value_or("fp32");
    if (aware && m1 == "bf16" && m2 == "bf16")
      tw.line(2, "adam_moments", "bf16", src("exp-avg-dtype") + " " + src("exp-avg-sq-dtype"));
    else if (m1 != "fp32" || m2 != "fp32")
      out.warnings.push_back(fmt::format("--exp-avg-dtype {} --exp-avg-sq-dtype {}{}: racksim keeps both Adam moments "
                                         "in bf16 (training.adam_moments: bf16) or both in fp32; modelled as fp32",
                                         m1, m2, aware ? "" : " without --use-precision-aware-optimizer"));
    for (const char* f : {"main-params-dtype", "main-grads-dtype"})
      if (auto d = fl.str(f); d && *d != "fp32" && !(main_grads_bf16 && std::string_view(f) == "main-grads-dtype"))
        out.warnings.push_back(fmt::format("--{} {}: racksim keeps fp32 master weights and main gradients", f, *d));
  }
  // The scenario's training.pipeline section, opened by the first key that needs it.
  bool pipeline_opened = false;
  auto open_pipeline = [&] {
    if (!pipeline_opened) tw.line(2, "pipeline", "");
    pipeline_opened = true;
  };
  // Uneven pipeline ends.
  const auto first = as_int("decoder-first-pipeline-num-layers");
  const auto last = as_int("decoder-last-pipeline-num-layers");
  if ((embedding_counted || loss_counted) && (first || last))
    fail(label, "--account-for-embedding/loss-in-pipeline-split with --decoder-first/last-pipeline-num-layers: "
                "Megatron-Core refuses it ('Does not support standalone embedding stage and standalone loss stage with "
                "uneven pp', transformer_block.py get_num_layers_to_build)");
  if ((embedding_counted || loss_counted) && pp > 1 && layers <= 0)
    out.warnings.push_back("--account-for-embedding/loss-in-pipeline-split without --num-layers: the split is racksim's "
                           "default (give --num-layers to have the embedding and loss counted as Megatron counts them)");
  if ((embedding_counted || loss_counted) && pp > 1 && layers > 0) {
    // The first (last) virtual stage of the first (last) rank builds one transformer layer fewer.
    const long long counted = counted_layers;
    if (counted % pp != 0 || (counted / pp) % vp != 0)
      fail(label, fmt::format("{} layers with the embedding and loss counted do not split over pp {} x vp {} "
                              "(Megatron-Core: 'num_layers={} should be divisible by pipeline_model_parallel_size={}'"
                              "{})",
                              counted, pp, vp, counted, pp,
                              vp > 1 ? " and 'num_layers_per_pipeline_rank should be divisible by vp_size'" : ""));
    const long long per_stage = counted / pp / vp;
    open_pipeline();
    if (embedding_counted)
      tw.line(4, "first_stage_layers", std::to_string(per_stage - 1),
              fmt::format("--account-for-embedding-in-pipeline-split: ({} layers + embedding{}) / (pp {} x vp {}) - 1",
                          layers, loss_counted ? " + loss" : "", pp, vp));
    if (loss_counted)
      tw.line(4, "last_stage_layers", std::to_string(per_stage - 1),
              fmt::format("--account-for-loss-in-pipeline-split: ({} layers{} + loss) / (pp {} x vp {}) - 1", layers,
                          embedding_counted ? " + embedding" : "", pp, vp));
  }
  if (first || last) {
    open_pipeline();
    // Megatron's flags count a whole pipeline rank (split over its virtual stages): racksim's *_rank_layers.
    if (first) tw.line(4, "first_rank_layers", std::to_string(*first), src("decoder-first-pipeline-num-layers"));
    if (last) tw.line(4, "last_rank_layers", std::to_string(*last), src("decoder-last-pipeline-num-layers"));
  }
  // The interleaved schedule's micro-batch groups (the scenario loader checks Megatron's bounds on N).
  if (const auto group = as_int("microbatch-group-size-per-virtual-pipeline-stage")) {
    if (vp > 1) {
      open_pipeline();
      tw.line(4, "microbatch_group_size", std::to_string(*group), src("microbatch-group-size-per-virtual-pipeline-stage"));
    } else {
      out.warnings.push_back(src("microbatch-group-size-per-virtual-pipeline-stage") +
                             ": only the interleaved schedule groups micro-batches; without virtual stages it changes "
                             "nothing (Megatron ignores it too)");
    }
  }
  if (layout) {
    fl.used.insert("pipeline-model-parallel-layout");
    std::vector<long long> t;  // decoder layers per stage, in the layout's order
    for (const auto& st : *layout) t.push_back(std::count(st.begin(), st.end(), 't'));
    const bool even_middle = t.size() <= 2 || std::all_of(t.begin() + 1, t.end() - 1, [&](long long n) { return n == t[1]; });
    // The MTP layers go on the last stage in racksim (Megatron puts them where the layout says, after every decoder).
    const bool mtp_last = std::all_of(layout->begin(), layout->end() - 1,
                                      [](const std::string& st) { return st.find('m') == std::string::npos; });
    if (t.size() < 2) {
      out.warnings.push_back(layout_src() + ": one stage; nothing to split");
    } else if (even_middle) {
      open_pipeline();
      tw.line(4, "first_stage_layers", std::to_string(t.front()),
              layout_src() + fmt::format(": the first stage, '{}'", layout->front()));
      tw.line(4, "last_stage_layers", std::to_string(t.back()),
              layout_src() + fmt::format(": the last stage, '{}'", layout->back()));
      if (!mtp_last)
        out.warnings.push_back(layout_src() +
                               ": its MTP layers (m) are on a stage before the last; racksim puts them on the last "
                               "stage, with the loss");
    } else {
      out.warnings.push_back(layout_src() +
                             fmt::format(": its middle stages hold different numbers of decoder layers, which racksim's "
                                         "first/last stage counts cannot state; vp {} is the layout's, the layers split "
                                         "evenly",
                                         vp));
    }
  }

  // ---- everything else: ignored (known) or unknown (warning)
  for (const auto& [f, a] : fl.last) {
    if (fl.used.count(f)) {
      out.used.push_back(shown(a));
      continue;
    }
    if (ignorable(f) || ex.megatron_log) {
      out.ignored.push_back(shown(a));
      continue;
    }
    out.warnings.push_back(fmt::format("{} (line {}): not an argument racksim knows; ignored", shown(a), a.line));
  }

  // ---- the file
  std::ostringstream o;
  o << "# Imported by `racksim import megatron` from " << comment_text(label) << ".\n";
  o << "# Each key's comment names the Megatron-LM argument it came from (or the default it takes).\n";
  for (const auto& wmsg : out.warnings) o << "# warning: " << comment_text(wmsg) << "\n";
  if (!out.ignored.empty()) {
    o << "# ignored (no effect on the step time):";
    std::size_t col = 40;
    for (const auto& i : out.ignored) {
      if (col + i.size() > 110) o << "\n#  ", col = 3;
      o << " " << comment_text(i) << ";";
      col += i.size() + 2;
    }
    o << "\n";
  }
  o << "name: " << yaml_quoted(name) << "\n";
  o << "system:\n";
  Writer sw;
  sw.line(2, "preset", system, system_src);
  sw.line(2, "gpus", std::to_string(gpus), gpus_src);
  o << sw.o.str();
  o << "model:\n" << mw.o.str();
  o << "training:\n" << tw.o.str();
  out.yaml = yaml_safe_text(o.str());
  return out;
}

MegatronImport import_megatron_args(const std::string& path, const MegatronOptions& opt) {
  // Bounded as a measurement file is (a Megatron log of a long run is large; a device is read up to the bound, a
  // directory said to be one). Binary data stops the read at its block; what precedes it is read.
  return import_megatron_args_text(input::read_file_bounded(path, input::limits::kMaxMeasurementFileBytes,
                                                            "a launch script, argument list or Megatron log",
                                                            input::Binary::stop),
                                   path, opt);
}

}  // namespace racksim::workloads::importers
