#include "workloads/hlo/hlo_cost.h"

#include "workloads/hlo/hlo_parser.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string_view>

#include "input/diagnostics.h"
#include "workloads/bounded_json.h"

namespace racksim::workloads::hlo {

namespace {

const std::set<std::string, std::less<>>& elementwise_ops() {
  static const std::set<std::string, std::less<>> s = {
      "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "clz", "compare", "complex", "convert", "cosine",
      "divide", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one",
      "logistic", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real",
      "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left",
      "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt", "stochastic-convert", "subtract",
      "tan", "tanh", "xor"};
  return s;
}

const std::set<std::string, std::less<>>& transcendental_ops() {
  static const std::set<std::string, std::less<>> s = {
      "atan2", "cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one",
      "logistic", "power", "rsqrt", "sine", "sqrt", "tan", "tanh"};
  return s;
}

// The full HLO opcode set (xla/hlo/ir/hlo_opcode.h names as printed), for unknown-opcode warnings.
const std::set<std::string, std::less<>>& all_opcodes() {
  static const std::set<std::string, std::less<>> s = [] {
    std::set<std::string, std::less<>> k = {
        "add-dependency", "after-all", "all-gather", "all-gather-done", "all-gather-start", "all-reduce",
        "all-reduce-done", "all-reduce-start", "all-to-all", "async-done", "async-start", "async-update",
        "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert",
        "broadcast", "call", "cholesky", "collective-broadcast", "collective-permute", "collective-permute-done",
        "collective-permute-start", "concatenate", "conditional", "constant", "convolution", "copy", "copy-done",
        "copy-start", "custom-call", "domain", "dot", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice",
        "fft", "fusion", "gather", "get-dimension-size", "get-tuple-element", "infeed", "iota", "map",
        "opt-barrier", "optimization-barrier", "outfeed", "pad", "parameter", "partition-id", "ragged-all-to-all",
        "ragged-dot", "recv", "recv-done", "reduce", "reduce-scatter", "reduce-window", "replica-id", "reshape",
        "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state", "scatter", "select-and-scatter",
        "send", "send-done", "set-dimension-size", "slice", "sort", "topk", "transpose", "triangular-solve",
        "tuple", "while", "scaled-dot"};
    for (const auto& e : elementwise_ops()) k.insert(e);
    return k;
  }();
  return s;
}

double prod(const std::vector<int64_t>& dims, const std::vector<int64_t>& pick) {
  double p = 1;
  for (int64_t i : pick)
    if (i >= 0 && static_cast<std::size_t>(i) < dims.size()) p *= static_cast<double>(dims[static_cast<std::size_t>(i)]);
  return p;
}

double prod_except(const std::vector<int64_t>& dims, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double p = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto ii = static_cast<int64_t>(i);
    if (std::find(a.begin(), a.end(), ii) == a.end() && std::find(b.begin(), b.end(), ii) == b.end())
      p *= static_cast<double>(dims[i]);
  }
  return p;
}

const Shape& operand_shape(const Computation& c, const Instruction& inst, std::size_t k) {
  static const Shape empty;
  if (k >= inst.operands.size()) return empty;
  return c.instructions[static_cast<std::size_t>(inst.operands[k])].shape;
}

}  // namespace

[[noreturn]] void fail_at(const Module& m, const Instruction& inst, const std::string& msg) {
  input::Diagnostic d;
  d.where.file = m.file;
  d.where.line = inst.line;
  d.where.column = inst.column;
  d.message = "HLO: " + msg;
  throw input::InputError(std::vector<input::Diagnostic>{d});
}

namespace {

// A cuBLAS call's dot dimension numbers (its backend_config's, which the parser does not read) against its operands'
// shapes, as XLA's verifier holds them and as the parser holds a `dot` instruction's attributes (hlo_parser.cpp):
// every index within its operand's rank and none twice on one side, as many contracting (and batch) dimensions on
// each side, each pair of the same size. A damaged config would otherwise be costed as some other GEMM. Operands
// whose shape is not known here (element_type empty) are not checked.
void check_dot_dims(const Module& m, const Instruction& inst, const Shape& lhs, const Shape& rhs,
                    const std::vector<int64_t>& lc, const std::vector<int64_t>& rc, const std::vector<int64_t>& lb,
                    const std::vector<int64_t>& rb) {
  if (lhs.element_type.empty() || rhs.element_type.empty()) return;
  auto side = [&](const Shape& sh, const std::vector<int64_t>& c, const std::vector<int64_t>& b, const char* name) {
    std::vector<int64_t> all = c;
    all.insert(all.end(), b.begin(), b.end());
    for (int64_t i : all)
      if (i < 0 || static_cast<std::size_t>(i) >= sh.dims.size())
        fail_at(m, inst, fmt::format("{} dimension {} of the dot is outside its operand of rank {}", name, i, sh.dims.size()));
    std::sort(all.begin(), all.end());
    if (std::adjacent_find(all.begin(), all.end()) != all.end())
      fail_at(m, inst, fmt::format("the dot names one {} dimension twice in its contracting and batch dimensions", name));
  };
  side(lhs, lc, lb, "lhs");
  side(rhs, rc, rb, "rhs");
  if (lc.size() != rc.size() || lb.size() != rb.size())
    fail_at(m, inst, fmt::format("the dot has {} lhs and {} rhs contracting dimensions, {} and {} batch dimensions",
                                 lc.size(), rc.size(), lb.size(), rb.size()));
  for (std::size_t i = 0; i < lc.size(); ++i)
    if (lhs.dims[static_cast<std::size_t>(lc[i])] != rhs.dims[static_cast<std::size_t>(rc[i])])
      fail_at(m, inst, fmt::format("the dot contracts lhs dimension {} ({}) with rhs dimension {} ({})", lc[i],
                                   lhs.dims[static_cast<std::size_t>(lc[i])], rc[i], rhs.dims[static_cast<std::size_t>(rc[i])]));
}

// Dtype the tensor cores run for a dot of `lhs_type` (with XLA's algorithm / precision hints).
void dot_dtype(const std::string& lhs_type, const Instruction& inst, OpCost& out, double& multiplier) {
  multiplier = 1;
  const std::string* alg = inst.attr("algorithm");
  if (lhs_type.rfind("f8", 0) == 0 || lhs_type == "s8" || lhs_type == "u8") {
    out.dtype = sim::Dtype::fp8;
    return;
  }
  if (lhs_type.rfind("f4", 0) == 0) {
    out.dtype = sim::Dtype::nvfp4;
    return;
  }
  if (lhs_type == "bf16" || lhs_type == "f16") {
    out.dtype = sim::Dtype::bf16;
    return;
  }
  // f32 (or wider) inputs.
  if (alg) {
    if (alg->find("bf16_bf16_f32_x6") != std::string::npos) multiplier = 6;
    else if (alg->find("bf16_bf16_f32_x3") != std::string::npos) multiplier = 3;
    else if (alg->find("bf16_bf16_f32_x9") != std::string::npos) multiplier = 9;
    if (alg->find("bf16") != std::string::npos) {
      out.dtype = sim::Dtype::bf16;
      return;
    }
    if (alg->find("tf32") != std::string::npos) {
      if (alg->find("x3") != std::string::npos) multiplier = 3;
      out.dtype = sim::Dtype::tf32;
      return;
    }
    if (alg->find("f32_f32_f32") != std::string::npos) {
      out.fp32_vector = true;
      return;
    }
  }
  const std::string* prec = inst.attr("operand_precision");
  if (prec && prec->find("highest") != std::string::npos) {
    out.fp32_vector = true;
    return;
  }
  out.dtype = sim::Dtype::tf32;
}

nlohmann::json backend_config(const Instruction& inst) {
  const std::string* v = inst.attr("backend_config");
  if (!v) return nlohmann::json();
  std::string text = *v;
  if (!text.empty() && text.front() == '"') {
    // Quoted form: unescape \" and \\.
    std::string u;
    for (std::size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] == '\\' && i + 2 < text.size()) ++i;
      u += text[i];
    }
    text = u;
  }
  JsonBoundError refused;  // a config nested too deep reads as none, as a malformed one does
  return parse_bounded_json(text, refused, false);
}

std::vector<int64_t> json_int_list(const nlohmann::json& j) {
  std::vector<int64_t> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    try {
      if (e.is_string()) out.push_back(std::stoll(e.get<std::string>()));
      else if (e.is_number_integer()) out.push_back(e.get<int64_t>());
    } catch (const std::exception&) {
    }
  }
  return out;
}

double json_number(const nlohmann::json& j) {
  try {
    if (j.is_string()) return std::stod(j.get<std::string>());
    if (j.is_number()) return j.get<double>();
  } catch (const std::exception&) {
  }
  return 0;
}

void add_gemm(OpCost& out, double b, double m, double n, double k, double multiplier) {
  const double f = 2.0 * b * m * n * k * multiplier;
  out.flops += f;
  if (!out.fp32_vector) out.tensor_flops += f;
  if (out.gemm_mnk[0] == 0 && !out.fp32_vector) {
    out.gemm_mnk = {m, n, k};
    out.gemm_batch = static_cast<int>(std::min(b, 1e9));
  }
  if (b > 1) out.batched_dot_flops += f;
}

bool is_slice_like(std::string_view op) { return op == "dynamic-slice" || op == "slice" || op == "gather"; }

// Splits "a, b ,c" at commas outside parentheses; drops blanks (the items of a mesh's axis or group lists).
std::vector<std::string> mesh_items(const std::string& t) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : t) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// An axis name as written, quoted or not.
std::string unquote_axis(std::string n) {
  if (n.size() >= 2 && n.front() == '\'' && n.back() == '\'') n = n.substr(1, n.size() - 2);
  return n;
}

// Mesh-axes replica groups, `mesh['x'=2,'y'=4] {'y'}` (XLA's MeshAxesReplicaGroupList): the devices of the
// mesh in iota order, grouped along the named axes; a sub-axis `'y':(pre)size` is the `size` part of axis y
// after its `pre` major part (y reshaped to [pre, size, rest]). Names may be quoted or not. A group is the
// product of its parts; its ids are consecutive when they are 0..g-1 in the group of device 0 (computed,
// as XLA reshapes and transposes the iota). A mesh with an explicit device order (anything between `]`
// and the groups) is taken as not consecutive. Returns what is wrong with `v`, or an empty string.
std::string mesh_axes_group(const std::string& v, int64_t devices, int& group_size, bool& consecutive) {
  constexpr int64_t kMax = 1'000'000;
  const auto bad = [&](const std::string& why) { return fmt::format("replica_groups '{}': {}", v, why); };
  const auto close = v.find(']');
  const auto open = v.find('{', close == std::string::npos ? 0 : close);
  const auto end = v.rfind('}');
  if (close == std::string::npos || open == std::string::npos || end == std::string::npos || end < open)
    return bad("expected mesh[AXIS=SIZE,...] {AXIS,...}");
  std::vector<std::pair<std::string, int64_t>> axes;  // major to minor
  if (const std::string why = parse_mesh_axes(v, axes); !why.empty()) return bad(why);
  const bool iota = v.substr(close + 1, open - close - 1).find_first_not_of(" \t") == std::string::npos;
  // Each axis as dims [pre, size, rest] per named part (a whole axis: one grouped dim).
  struct Part { int64_t pre, size; };
  std::vector<std::vector<Part>> parts(axes.size());
  std::vector<char> whole(axes.size(), 0);
  for (const auto& it : mesh_items(v.substr(open + 1, end - open - 1))) {
    const auto colon = it.find(':');
    const std::string name = unquote_axis(it.substr(0, colon));
    const auto ax = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == name; });
    if (ax == axes.end()) return bad(fmt::format("axis '{}' is not an axis of the mesh", name));
    const std::size_t k = static_cast<std::size_t>(ax - axes.begin());
    if (whole[k] || (colon == std::string::npos && !parts[k].empty()))
      return bad(fmt::format("axis '{}' is grouped more than once", name));
    if (colon == std::string::npos) {
      whole[k] = 1;
      continue;
    }
    const auto ints = parse_int_list(it.substr(colon + 1));  // (pre)size
    if (ints.size() != 2 || ints[0] < 1 || ints[1] < 1 || ints[0] > kMax || ints[1] > kMax ||
        ax->second % (ints[0] * ints[1]) != 0)
      return bad(fmt::format("sub-axis '{}' needs (PRE)SIZE with PRE x SIZE dividing {}'s size {}", it, name,
                             ax->second));
    parts[k].push_back({ints[0], ints[1]});
  }
  // Reindexed dims, major to minor, and which of them are grouped.
  std::vector<std::pair<int64_t, bool>> dims;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const int64_t n = axes[k].second;
    if (whole[k] || parts[k].empty()) {
      dims.push_back({n, whole[k] != 0});
      continue;
    }
    auto ps = parts[k];
    std::sort(ps.begin(), ps.end(), [](const Part& x, const Part& y) { return x.pre < y.pre; });
    int64_t prefix = 1;
    for (const auto& p : ps) {
      if (p.pre % prefix != 0 || p.pre < prefix) return bad(fmt::format("the sub-axes of '{}' overlap", axes[k].first));
      if (p.pre > prefix) dims.push_back({p.pre / prefix, false});
      dims.push_back({p.size, true});
      prefix = p.pre * p.size;
    }
    if (n % prefix != 0) return bad(fmt::format("the sub-axes of '{}' overlap", axes[k].first));
    if (n > prefix) dims.push_back({n / prefix, false});
  }
  // The group of device 0: every index of the grouped dims, the others 0.
  std::vector<int64_t> ids = {0};
  int64_t stride = 1;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    if (d->second) {
      std::vector<int64_t> next;
      next.reserve(ids.size() * static_cast<std::size_t>(d->first));
      for (int64_t j = 0; j < d->first; ++j)
        for (int64_t id : ids) next.push_back(id + j * stride);
      ids = std::move(next);
    }
    stride *= d->first;
  }
  if (ids.size() < 2) return bad("the groups name no axis of the mesh (one device per group)");
  group_size = static_cast<int>(ids.size());
  std::sort(ids.begin(), ids.end());
  consecutive = iota;
  for (std::size_t j = 0; j < ids.size() && consecutive; ++j)
    if (ids[j] != static_cast<int64_t>(j)) consecutive = false;
  int64_t mesh_devices = 1;
  for (const auto& a : axes) mesh_devices *= a.second;
  if (mesh_devices > devices)
    return bad(fmt::format("the mesh has {} devices, but the module runs on {} (replica_count x num_partitions)",
                           mesh_devices, devices));
  return "";
}

// A reader of XLA's brace lists of device ids, `{{0,1},{2,3}}` (replica groups, source-target pairs): blanks skipped,
// an id a non-negative integer of at most 7 digits (beyond any device count racksim takes).
struct IdListReader {
  const std::string& v;
  std::size_t i = 0;
  void skip_blanks() {
    while (i < v.size() && std::isspace(static_cast<unsigned char>(v[i]))) ++i;
  }
  bool eat(char ch) {
    skip_blanks();
    if (i >= v.size() || v[i] != ch) return false;
    ++i;
    return true;
  }
  std::optional<int64_t> id() {
    skip_blanks();
    const std::size_t start = i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    if (i == start || i - start > 7) return std::nullopt;
    return std::stoll(v.substr(start, i - start));
  }
  bool at_end() {
    skip_blanks();
    return i == v.size();
  }
};

// Replica groups as a list, `{{0,1},{2,3}}` or XLA's iota form `[G,S]<=[D0,D1]T(1,0)`, with checks XLA's HLO verifier
// makes (openxla/xla hlo_verifier.cc, CheckReplicaGroups): every id a device of the module, none in two groups, all
// groups one size where the op needs it (`uniform`: all-gather, reduce-scatter, all-to-all); the iota
// form's G x S the product of its reshape, its transpose a permutation of that reshape's dimensions. Sets the first
// group's size and whether its ids are consecutive. `{}` is every device (group_size 0). Returns what is wrong, or "".
std::string list_groups(const std::string& v, int64_t devices, bool uniform, int& group_size, bool& consecutive) {
  const auto bad = [&](const std::string& why) { return fmt::format("replica_groups '{}': {}", v, why); };
  if (!v.empty() && v[0] == '[') {
    const auto arrow = v.find("<=");
    const auto close = v.find(']');
    if (arrow == std::string::npos || close == std::string::npos || close > arrow || v.size() < arrow + 3 ||
        v[arrow + 2] != '[')
      return bad("expected [GROUPS,SIZE]<=[DIMS] or [GROUPS,SIZE]<=[DIMS]T(PERM)");
    const auto shape = parse_int_list(v.substr(1, close - 1));
    const auto rclose = v.find(']', arrow);
    if (rclose == std::string::npos) return bad("the reshape after '<=' has no closing ']'");
    const auto reshape = parse_int_list(v.substr(arrow + 3, rclose - arrow - 3));
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1)
      return bad("the groups' shape must be [GROUPS,SIZE], both at least 1");
    if (reshape.empty()) return bad("the reshape after '<=' names no dimension");
    int64_t n = 1;
    for (int64_t d : reshape) {
      if (d < 1 || d > hw::kMaxGpus) return bad(fmt::format("reshape dimension {} is not from 1 to {}", d, hw::kMaxGpus));
      n *= d;
      if (n > hw::kMaxGpus) return bad(fmt::format("the reshape names more than {} devices", hw::kMaxGpus));
    }
    if (shape[0] > hw::kMaxGpus || shape[1] > hw::kMaxGpus || shape[0] * shape[1] != n)
      return bad(fmt::format("{} groups of {} are not the {} ids of the reshape", shape[0], shape[1], n));
    if (n > devices)
      return bad(fmt::format("{} ids, but the module runs on {} devices (replica_count x num_partitions)", n, devices));
    const std::string rest = v.substr(rclose + 1);
    if (!rest.empty()) {
      const auto perm = parse_int_list(rest);
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool ok = rest.size() >= 3 && rest[0] == 'T' && rest[1] == '(' && rest.back() == ')' && perm.size() == reshape.size();
      for (std::size_t k = 0; ok && k < sorted.size(); ++k) ok = sorted[k] == static_cast<int64_t>(k);
      if (!ok)
        return bad(fmt::format("'{}' after the reshape is not T(...) with a permutation of its {} dimensions", rest,
                               reshape.size()));
      bool identity = true;
      for (std::size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int64_t>(k);
      consecutive = identity;
    } else {
      consecutive = true;
    }
    group_size = static_cast<int>(shape[1]);
    return "";
  }
  // Explicit list: '{' [ '{' [id {',' id}] '}' {',' '{' ... '}'} ] '}'.
  IdListReader r{v};
  if (!r.eat('{')) return bad("expected {{ID,...},...}");
  std::vector<char> seen(static_cast<std::size_t>(std::min<int64_t>(devices, hw::kMaxGpus)), 0);
  std::vector<std::size_t> sizes;
  bool first = true;
  if (!r.eat('}')) {
    do {
      if (!r.eat('{')) return bad("expected '{' to open a group");
      std::vector<int64_t> ids;
      if (!r.eat('}')) {
        do {
          const auto read = r.id();
          if (!read) return bad("a device id must be a non-negative integer");
          const int64_t id = *read;
          if (id >= devices)
            return bad(fmt::format("device {} is not one of the module's {} (replica_count x num_partitions)", id, devices));
          if (seen[static_cast<std::size_t>(id)]) return bad(fmt::format("device {} is in more than one group", id));
          seen[static_cast<std::size_t>(id)] = 1;
          ids.push_back(id);
        } while (r.eat(','));
        if (!r.eat('}')) return bad("expected ',' or '}' in a group");
      }
      if (ids.empty()) return bad("a group is empty");
      if (first) {
        group_size = static_cast<int>(ids.size());
        consecutive = true;
        for (std::size_t k = 1; k < ids.size(); ++k)
          if (ids[k] != ids[k - 1] + 1) consecutive = false;
        first = false;
      }
      sizes.push_back(ids.size());
    } while (r.eat(','));
    if (!r.eat('}')) return bad("expected ',' or '}' after a group");
  }
  if (!r.at_end()) return bad(fmt::format("unexpected '{}' after the groups", v.substr(r.i, 16)));
  if (uniform && std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end())
    return bad("the groups differ in size, which this collective does not allow");
  return "";
}

// source_target_pairs `{{0,1},{1,2}}`, with the checks XLA's verifier makes of a collective-permute's: pairs of two
// device ids of the module, and (`distinct`) no source and no target twice. The group is the set of devices named.
std::string permute_pairs(const std::string& v, int64_t devices, bool distinct, int& group_size) {
  const auto bad = [&](const std::string& why) { return fmt::format("source_target_pairs '{}': {}", v, why); };
  std::vector<std::pair<int64_t, int64_t>> pairs;
  IdListReader r{v};
  const std::string form = "expected {{SOURCE,TARGET},...} of device ids";
  if (!r.eat('{')) return bad(form);
  if (!r.eat('}')) {
    do {
      if (!r.eat('{')) return bad(form);
      const auto a = r.id();
      if (!a || !r.eat(',')) return bad(form);
      const auto b = r.id();
      if (!b || !r.eat('}')) return bad(form);
      pairs.emplace_back(*a, *b);
    } while (r.eat(','));
    if (!r.eat('}')) return bad(form);
  }
  if (!r.at_end()) return bad(form);
  std::set<int64_t> sources, targets, named;
  for (const auto& [src, dst] : pairs) {
    for (int64_t d : {src, dst})
      if (d >= devices) return bad(fmt::format("device {} is not one of the module's {}", d, devices));
    if (distinct && !sources.insert(src).second) return bad(fmt::format("source {} appears more than once", src));
    if (distinct && !targets.insert(dst).second) return bad(fmt::format("target {} appears more than once", dst));
    named.insert(src);
    named.insert(dst);
  }
  group_size = static_cast<int>(named.size());
  return "";
}

}  // namespace

std::string parse_mesh_axes(const std::string& v, std::vector<std::pair<std::string, int64_t>>& axes) {
  constexpr int64_t kMax = 1'000'000;
  const auto close = v.find(']');
  if (!v.starts_with("mesh[") || close == std::string::npos) return "expected mesh[AXIS=SIZE,...]";
  axes.clear();
  int64_t devices = 1;
  for (const auto& it : mesh_items(v.substr(5, close - 5))) {
    const auto eq = it.find('=');
    const auto sizes = eq == std::string::npos ? std::vector<int64_t>{} : parse_int_list(it.substr(eq + 1));
    if (eq == std::string::npos || eq == 0) return fmt::format("mesh axis '{}' is not NAME=SIZE", it);
    if (sizes.size() != 1 || sizes[0] < 1 || sizes[0] > kMax)
      return fmt::format("mesh axis '{}' needs a size from 1 to {}", unquote_axis(it.substr(0, eq)), kMax);
    const std::string name = unquote_axis(it.substr(0, eq));
    for (const auto& ax : axes)
      if (ax.first == name) return fmt::format("mesh axis '{}' appears twice", name);
    axes.emplace_back(name, sizes[0]);
    devices *= sizes[0];
    if (devices > kMax) return fmt::format("the mesh has more than {} devices", kMax);
  }
  if (axes.empty()) return "the mesh has no axes";
  return "";
}

double sharding_tiles(const std::string& sh, std::size_t rank) {
  if (sh.find("maximal") != std::string::npos) return 1;
  if (const auto m = sh.find("mesh["); m != std::string::npos) {
    // Named: {mesh['data'=2,'fsdp'=8], [{'data', 'fsdp'}, {}]}, one set of axes per dimension.
    std::vector<std::pair<std::string, int64_t>> axes;
    if (!parse_mesh_axes(sh.substr(m), axes).empty()) return 0;
    const auto open = sh.find("[{", sh.find(']', m));
    const auto stop = open == std::string::npos ? std::string::npos : sh.find("}]", open);
    if (stop == std::string::npos) return 0;
    std::string names = sh.substr(open + 2, stop - open - 2);
    std::replace(names.begin(), names.end(), '{', ',');
    std::replace(names.begin(), names.end(), '}', ',');
    double tiles = 1;
    for (const auto& item : mesh_items(names)) {
      if (item.empty()) continue;  // (between the dimensions' sets, or an unsharded dimension's {})
      const std::string name = unquote_axis(item);
      const auto ax = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == name; });
      if (ax == axes.end()) return 0;  // (a sub-axis, `'y':(2)4`, or a name the mesh lacks)
      tiles *= static_cast<double>(ax->second);
    }
    return tiles;
  }
  if (const auto d = sh.find("devices=["); d != std::string::npos) {
    // Tiled: {devices=[16,1]<=[16]} or an explicit device list; tile dimensions past the array's rank replicate.
    const auto close = sh.find(']', d);
    if (close == std::string::npos) return 0;
    const auto dims = parse_int_list(sh.substr(d + 9, close - d - 9));
    if (dims.size() < rank) return 0;
    double tiles = 1;
    for (std::size_t k = 0; k < rank; ++k) {
      if (dims[k] < 1) return 0;
      tiles *= static_cast<double>(dims[k]);
    }
    return tiles;
  }
  return sh.find("replicated") != std::string::npos ? 1 : 0;
}

bool is_elementwise(const std::string& opcode) { return elementwise_ops().count(opcode) > 0; }
bool is_transcendental(const std::string& opcode) { return transcendental_ops().count(opcode) > 0; }

std::vector<int64_t> parse_int_list(const std::string& v) {
  std::vector<int64_t> out;
  std::size_t i = 0;
  while (i < v.size()) {
    if (std::isdigit(static_cast<unsigned char>(v[i])) || (v[i] == '-' && i + 1 < v.size() && std::isdigit(static_cast<unsigned char>(v[i + 1])))) {
      std::size_t e = i + 1;
      while (e < v.size() && std::isdigit(static_cast<unsigned char>(v[e]))) ++e;
      try {
        out.push_back(std::stoll(v.substr(i, e - i)));
      } catch (const std::exception&) {
      }
      i = e;
    } else {
      ++i;
    }
  }
  return out;
}

bool CostModel::known_opcode(const std::string& opcode) {
  if (all_opcodes().count(opcode)) return true;
  // Async sugar: "<op>-start", "<op>-update", "<op>-done" for a wrapped op.
  for (std::string_view suffix : {"-start", "-update", "-done"}) {
    if (opcode.size() > suffix.size() && opcode.compare(opcode.size() - suffix.size(), suffix.size(), suffix) == 0)
      return all_opcodes().count(opcode.substr(0, opcode.size() - suffix.size())) > 0;
  }
  return false;
}

bool CostModel::is_free_opcode(const std::string& opcode) {
  static const std::set<std::string, std::less<>> s = {
      "parameter", "get-tuple-element", "tuple", "bitcast", "constant", "after-all", "add-dependency",
      "opt-barrier", "optimization-barrier", "domain", "partition-id", "replica-id", "get-dimension-size"};
  return s.count(opcode) > 0;
}

void CostModel::add_instruction_flops(const Computation& c, const Instruction& inst, OpCost& out, int depth) {
  if (depth > kMaxCallDepth) return;  // (unreachable: the parser bounds how deep calls nest)
  const std::string& op = inst.opcode;
  const double out_elems = inst.shape.is_tuple ? 0 : inst.shape.elements();
  if (op == "dot" || op == "scaled-dot" || op == "ragged-dot") {
    const Shape& lhs = operand_shape(c, inst, 0);
    const Shape& rhs = operand_shape(c, inst, 1);
    const auto lc = parse_int_list(inst.attr("lhs_contracting_dims") ? *inst.attr("lhs_contracting_dims") : "");
    const auto lb = parse_int_list(inst.attr("lhs_batch_dims") ? *inst.attr("lhs_batch_dims") : "");
    const auto rc = parse_int_list(inst.attr("rhs_contracting_dims") ? *inst.attr("rhs_contracting_dims") : "");
    const auto rb = parse_int_list(inst.attr("rhs_batch_dims") ? *inst.attr("rhs_batch_dims") : "");
    double mult = 1;
    OpCost dt;
    dot_dtype(lhs.element_type, inst, dt, mult);
    if (out.tensor_flops == 0 && out.gemm_mnk[0] == 0) {
      out.dtype = dt.dtype;
      out.fp32_vector = dt.fp32_vector;
    }
    add_gemm(out, prod(lhs.dims, lb), prod_except(lhs.dims, lb, lc), prod_except(rhs.dims, rb, rc), prod(lhs.dims, lc),
             mult);
    return;
  }
  if (op == "convolution") {
    const Shape& kernel = operand_shape(c, inst, 1);
    double kernel_out = 1;
    if (const std::string* dl = inst.attr("dim_labels")) {
      // b01f_01io->b01f: the kernel part is between '_' and "->"; 'o' is its output-feature dim.
      const auto us = dl->find('_');
      const auto ar = dl->find("->");
      if (us != std::string::npos && ar != std::string::npos && ar > us) {
        const std::string kl = dl->substr(us + 1, ar - us - 1);
        const auto o = kl.find('o');
        if (o != std::string::npos && o < kernel.dims.size()) kernel_out = static_cast<double>(kernel.dims[o]);
      }
    }
    double mult = 1;
    OpCost dt;
    dot_dtype(operand_shape(c, inst, 0).element_type, inst, dt, mult);
    if (out.tensor_flops == 0) out.dtype = dt.dtype;
    const double f = 2.0 * out_elems * kernel.elements() / std::max(1.0, kernel_out) * mult;
    out.flops += f;
    out.tensor_flops += f;
    return;
  }
  if (is_elementwise(op)) {
    out.flops += out_elems;
    if (is_transcendental(op)) out.sfu_ops += out_elems;
    return;
  }
  if (op == "reduce" || op == "reduce-window" || op == "select-and-scatter") {
    double in = 0;
    const std::size_t n_inputs = op == "reduce" ? std::max<std::size_t>(1, inst.operands.size() / 2) : 1;
    for (std::size_t k = 0; k < n_inputs; ++k) in += operand_shape(c, inst, k).elements();
    if (op == "reduce-window") {
      double window = 1;
      if (const std::string* w = inst.attr("window")) {
        const auto pos = w->find("size=");
        if (pos != std::string::npos) {
          std::size_t e = pos + 5;
          std::string sz;
          while (e < w->size() && (std::isdigit(static_cast<unsigned char>((*w)[e])) || (*w)[e] == 'x')) sz += (*w)[e++];
          for (auto d : parse_int_list(sz)) window *= static_cast<double>(std::max<int64_t>(1, d));
        }
      }
      in = out_elems * window;
    }
    out.flops += in;
    return;
  }
  if (op == "sort") {
    const Shape& s0 = operand_shape(c, inst, 0);
    const double n = s0.dims.empty() ? 1 : static_cast<double>(std::max<int64_t>(2, s0.dims.back()));
    out.flops += s0.elements() * std::log2(n);
    return;
  }
  if (op == "scatter") {
    out.flops += operand_shape(c, inst, inst.operands.size() >= 3 ? inst.operands.size() - 1 : 0).elements();
    return;
  }
  if (op == "fusion" || op == "call" || op == "map") {
    for (const auto& callee : inst.called) {
      const Computation* f = m_.find(callee);
      if (!f) continue;
      for (const auto& i2 : f->instructions) add_instruction_flops(*f, i2, out, depth + 1);
    }
    if (op == "map") out.flops += out_elems;
    return;
  }
}

double CostModel::read_bytes_of_param(const Computation& fused, int param_index, double full_bytes, int depth) {
  // Users of each instruction of the fused computation.
  std::vector<std::vector<int>> users(fused.instructions.size());
  for (std::size_t i = 0; i < fused.instructions.size(); ++i)
    for (int o : fused.instructions[i].operands) users[static_cast<std::size_t>(o)].push_back(static_cast<int>(i));
  // Bytes read through value v, or -1 if some use reads all of it.
  std::function<double(int, int)> access = [&](int v, int d) -> double {
    if (d > 64 || v == fused.root) return -1;  // the root's value is written out whole
    double total = 0;
    for (int u : users[static_cast<std::size_t>(v)]) {
      const Instruction& ui = fused.instructions[static_cast<std::size_t>(u)];
      for (std::size_t k = 0; k < ui.operands.size(); ++k) {
        if (ui.operands[k] != v) continue;
        if (ui.opcode == "bitcast") {
          const double sub = access(u, d + 1);
          if (sub < 0) return -1;
          total += sub;
        } else if (k == 0 && is_slice_like(ui.opcode)) {
          total += ui.shape.bytes();
        } else if (k == 0 && ui.opcode == "dynamic-update-slice") {
          // Updated in place: the rest of the buffer is neither read nor written.
        } else if (k == 0 && ui.opcode == "scatter") {
          // In place; the combiner reads the rows it updates.
          total += operand_shape(fused, ui, ui.operands.size() - 1).bytes();
        } else if (is_elementwise(ui.opcode) && !ui.shape.is_tuple && ui.shape.elements() > 0 &&
                   ui.shape.elements() == fused.instructions[static_cast<std::size_t>(v)].shape.elements()) {
          // A fused element-wise op (a convert, a scale) is computed index by index where its result is used, so an
          // operand that reaches only slices or gathers through it is read only there (the loss's f32 convert of
          // the bf16 logits before the target logit's gather reads 8,192 of 268M elements), in its own dtype.
          const double sub = access(u, d + 1);
          if (sub < 0) return -1;
          const Shape& from = fused.instructions[static_cast<std::size_t>(v)].shape;
          total += sub * (from.bytes() / from.elements()) / (ui.shape.bytes() / ui.shape.elements());
        } else {
          return -1;
        }
      }
    }
    return total;
  };
  (void)depth;
  const int p = fused.parameters[static_cast<std::size_t>(param_index)];
  const double a = access(p, 0);
  return a < 0 ? full_bytes : std::min(full_bytes, a);
}

// Operand bytes per thread of a Triton block-level fusion: every program (one CTA of
// 32·num_warps threads) loads the tile of each operand that its output tile needs, so the
// operands' bytes spread evenly over programs = output elements / output tile elements.
// 0 when the fusion is not one (no "__triton" kind, no tile, or a GEMM fusion).
double triton_thread_bytes(const Instruction& inst, const Computation& fused, double operand_bytes) {
  const auto cfg = backend_config(inst);
  if (!cfg.is_object() || !cfg.contains("fusion_backend_config")) return 0;
  const auto& f = cfg["fusion_backend_config"];
  if (!f.is_object() || f.value("kind", std::string()) != "__triton" || !f.contains("block_level_fusion_config")) return 0;
  const auto& b = f["block_level_fusion_config"];
  if (!b.is_object() || !b.contains("output_tiles") || !b["output_tiles"].is_array() || b["output_tiles"].empty()) return 0;
  const double warps = json_number(b.value("num_warps", nlohmann::json()));
  if (!(warps >= 1)) return 0;
  const auto& tile = b["output_tiles"][0];
  if (!tile.is_object() || !tile.contains("sizes") || !tile["sizes"].is_array()) return 0;
  const std::vector<int64_t> sizes = json_int_list(tile["sizes"]);
  // The output tile is a tile of the root's (first) output: one program per tile, the last tile
  // of a dimension padded (ceil), when the tile names every dimension.
  const Instruction& root = fused.instructions[static_cast<std::size_t>(fused.root)];
  const Shape& out = root.shape.is_tuple && !root.shape.tuple.empty() ? root.shape.tuple[0] : root.shape;
  double programs = 1;
  if (sizes.size() == out.dims.size()) {
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] > 0) programs *= std::ceil(static_cast<double>(out.dims[i]) / static_cast<double>(sizes[i]));
  } else {
    double tile_elems = 1;
    for (const int64_t n : sizes)
      if (n > 0) tile_elems *= static_cast<double>(n);
    programs = out.elements() / tile_elems;
  }
  programs = std::max(1.0, programs);
  return operand_bytes / programs / (32.0 * warps);
}

// The output indices of a fusion that XLA's loop emitter generates (kind=kLoop): one per element of
// the root's first output (a multi-output loop fusion's outputs share their shape), looked through
// bitcasts. An in-place dynamic-update-slice root covers its update's indices, one thread each, as the
// loop emitter does (the scan stacks' per-iteration writes: 67M bf16 indices in 85-92 us on the H200,
// calibration/data/h200x2-2026-11-29-mechanisms x2b profiles). Roots with emitters of their own (scatter;
// concatenate, which covers its largest operand with its own unrolling) get 0, as does every other
// fusion kind (Triton fusions are kind=kCustom).
double loop_emitter_indices(const Instruction& inst, const Computation& fused) {
  const std::string* kind = inst.attr("kind");
  if (!kind || *kind != "kLoop" || fused.root < 0) return 0;
  int v = fused.root;
  for (int d = 0; d < 64; ++d) {
    const Instruction& r = fused.instructions[static_cast<std::size_t>(v)];
    if (r.opcode == "bitcast" && !r.operands.empty()) {
      v = r.operands[0];
      continue;
    }
    if (r.opcode == "tuple") {
      if (r.operands.empty()) return 0;
      v = r.operands[0];
      continue;
    }
    if (r.opcode == "dynamic-update-slice") return r.operands.size() > 1 ? operand_shape(fused, r, 1).elements() : 0;
    if (r.opcode == "scatter" || r.opcode == "concatenate") return 0;
    const Shape& s = r.shape.is_tuple && !r.shape.tuple.empty() ? r.shape.tuple[0] : r.shape;
    return s.elements();
  }
  return 0;
}

OpCost CostModel::fusion_cost(const Computation& caller, const Instruction& inst, const Computation& fused) {
  OpCost out;
  for (const auto& fi : fused.instructions) {
    // An opcode racksim does not know inside a fusion is counted and said as at the top level (its FLOPs are not in
    // the cost): a newer XLA's op in a fusion had been passed over without a word (a review's finding).
    if (!known_opcode(fi.opcode) && !out.unknown) {
      out.unknown = true;
      out.unknown_what = "opcode " + fi.opcode + " (in a fusion)";
    }
    add_instruction_flops(fused, fi, out, 1);
  }
  // Reads, once per distinct operand.
  std::map<int, std::pair<double, bool>> per_operand;  // caller operand -> (bytes, host)
  for (std::size_t i = 0; i < fused.parameters.size(); ++i) {
    const Shape& ps = fused.instructions[static_cast<std::size_t>(fused.parameters[i])].shape;
    const bool host = ps.on_host() || (i < inst.operands.size() && operand_shape(caller, inst, i).on_host());
    const double r = read_bytes_of_param(fused, static_cast<int>(i), ps.bytes(), 0);
    const int key = i < inst.operands.size() ? inst.operands[i] : -1 - static_cast<int>(i);
    auto& slot = per_operand[key];
    slot.first = std::max(slot.first, r);
    slot.second = slot.second || host;
  }
  for (const auto& [k, v] : per_operand) (v.second ? out.host_read : out.bytes_read) += v.first;
  // Writes, from the root.
  std::function<void(int, int)> written = [&](int v, int d) {
    const Instruction& r = fused.instructions[static_cast<std::size_t>(v)];
    if (d > 64) return;
    if (r.opcode == "bitcast" && !r.operands.empty()) return written(r.operands[0], d + 1);
    if (r.opcode == "tuple") {
      for (int o : r.operands) written(o, d + 1);
      return;
    }
    double b = r.shape.bytes();
    if (r.opcode == "dynamic-update-slice") b = operand_shape(fused, r, 1).bytes();
    if (r.opcode == "scatter") b = operand_shape(fused, r, r.operands.size() - 1).bytes();
    (r.shape.on_host() ? out.host_written : out.bytes_written) += b;
  };
  written(fused.root, 0);
  out.thread_bytes = triton_thread_bytes(inst, fused, out.bytes_read);
  out.loop_indices = loop_emitter_indices(inst, fused);
  return out;
}

OpCost CostModel::custom_call_cost(const Computation& c, const Instruction& inst) {
  OpCost out;
  const std::string& t = inst.custom_call_target;
  // Result leaves that are traffic: drop workspace/scratch (trailing s8/u8 byte arrays of a tuple).
  auto result_bytes = [&]() {
    if (!inst.shape.is_tuple) return inst.shape.bytes();
    double b = 0;
    for (std::size_t i = 0; i < inst.shape.tuple.size(); ++i) {
      const Shape& e = inst.shape.tuple[i];
      if (i > 0 && (e.element_type == "s8" || e.element_type == "u8") && e.dims.size() == 1) continue;
      b += e.bytes();
    }
    return b;
  };
  double operands = 0;
  for (std::size_t k = 0; k < inst.operands.size(); ++k) operands += operand_shape(c, inst, k).bytes();
  out.bytes_read = operands;
  out.bytes_written = result_bytes();
  if (t.rfind("__cublas$", 0) == 0 || t == "__cublas$gemm") {
    const Shape& lhs = operand_shape(c, inst, 0);
    const Shape& rhs = operand_shape(c, inst, 1);
    std::vector<int64_t> lc = {static_cast<int64_t>(lhs.dims.size()) - 1}, rc = {0}, lb, rb;
    bool dims_given = false;  // checked only as the config states them (a triangular solve states none)
    const auto cfg = backend_config(inst);
    double mult = 1;
    dot_dtype(lhs.element_type, inst, out, mult);
    if (cfg.is_object() && cfg.contains("gemm_backend_config")) {
      const auto& g = cfg["gemm_backend_config"];
      if (g.is_object() && g.contains("dot_dimension_numbers")) {
        const auto& d = g["dot_dimension_numbers"];
        if (d.is_object()) {
          dims_given = true;
          if (d.contains("lhs_contracting_dimensions")) lc = json_int_list(d["lhs_contracting_dimensions"]);
          if (d.contains("rhs_contracting_dimensions")) rc = json_int_list(d["rhs_contracting_dimensions"]);
          if (d.contains("lhs_batch_dimensions")) lb = json_int_list(d["lhs_batch_dimensions"]);
          if (d.contains("rhs_batch_dimensions")) rb = json_int_list(d["rhs_batch_dimensions"]);
        }
      }
      if (g.is_object() && g.contains("precision_config")) {
        const auto& pc = g["precision_config"];
        if (pc.is_object() && pc.contains("algorithm") && pc["algorithm"].is_string()) {
          const std::string a = pc["algorithm"].get<std::string>();
          if (a.find("BF16_BF16_F32") != std::string::npos) out.dtype = sim::Dtype::bf16;
          if (a.find("X3") != std::string::npos) mult = 3;
          if (a.find("X6") != std::string::npos) mult = 6;
          if (a.find("TF32") != std::string::npos) out.dtype = sim::Dtype::tf32;
        }
        if (pc.is_object() && pc.contains("operand_precision") && pc["operand_precision"].dump().find("HIGHEST") != std::string::npos &&
            lhs.element_type == "f32" && out.dtype == sim::Dtype::tf32)
          out.fp32_vector = true;
      }
    }
    if (dims_given) check_dot_dims(m_, inst, lhs, rhs, lc, rc, lb, rb);
    add_gemm(out, prod(lhs.dims, lb), prod_except(lhs.dims, lb, lc), prod_except(rhs.dims, rb, rc), prod(lhs.dims, lc),
             mult);
    return out;
  }
  if (t.rfind("__cudnn$fmha", 0) == 0 || t.rfind("__cudnn$fhma", 0) == 0) {
    const auto cfg = backend_config(inst);
    const nlohmann::json* f = nullptr;
    if (cfg.is_object() && cfg.contains("cudnn_fmha_backend_config")) f = &cfg["cudnn_fmha_backend_config"];
    const Shape& q = operand_shape(c, inst, 0);
    const Shape& k = operand_shape(c, inst, 1);
    double b = 1, h = 1, sq = 1, sk = 1, d = q.dims.empty() ? 1 : static_cast<double>(q.dims.back());
    bool have_dims = false;
    bool causal = false;
    if (f && f->is_object()) {
      if (f->contains("intermediate_tensor_shape")) {
        const auto& its = (*f)["intermediate_tensor_shape"];
        if (its.is_object() && its.contains("dimensions")) {
          const auto dims = json_int_list(its["dimensions"]);
          if (dims.size() == 4) {
            b = static_cast<double>(dims[0]);
            h = static_cast<double>(dims[1]);
            sq = static_cast<double>(dims[2]);
            sk = static_cast<double>(dims[3]);
            have_dims = true;
          }
        }
      }
      if (f->contains("bmm1_dot_dimension_numbers")) {
        const auto& dd = (*f)["bmm1_dot_dimension_numbers"];
        if (dd.is_object() && dd.contains("lhs_contracting_dimensions")) {
          const auto lc = json_int_list(dd["lhs_contracting_dimensions"]);
          if (!lc.empty() && lc[0] >= 0 && static_cast<std::size_t>(lc[0]) < q.dims.size())
            d = static_cast<double>(q.dims[static_cast<std::size_t>(lc[0])]);
        }
      }
      if (f->contains("mask_type") && f->at("mask_type").is_string() &&
          f->at("mask_type").get<std::string>().find("CAUSAL") != std::string::npos)
        causal = true;
      if (f->contains("is_causal_mask") && f->at("is_causal_mask").is_boolean() && f->at("is_causal_mask").get<bool>())
        causal = true;
    }
    if (!have_dims && q.dims.size() == 4 && k.dims.size() == 4) {
      // [B, S, H, D] as JAX passes them.
      b = static_cast<double>(q.dims[0]);
      sq = static_cast<double>(q.dims[1]);
      h = static_cast<double>(q.dims[2]);
      sk = static_cast<double>(k.dims[1]);
    }
    const bool backward = t.find("Backward") != std::string::npos;
    const double mask = causal ? 0.5 : 1.0;
    const double f_att = (backward ? 10.0 : 4.0) * b * h * sq * sk * d * mask;
    out.flops = out.tensor_flops = out.attention_flops = f_att;
    out.attention_forward = !backward;
    out.attention_causal = causal;
    out.attention_seq = sk;
    out.sfu_ops = b * h * sq * sk * mask;
    out.dtype = q.element_type.rfind("f8", 0) == 0 ? sim::Dtype::fp8 : sim::Dtype::bf16;
    return out;
  }
  if (t == "AllocateBuffer" || t == "MoveToHost" || t == "MoveToDevice" || t == "Sharding" ||
      t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape" || t == "annotate_device_placement") {
    out.bytes_read = out.bytes_written = 0;
    return out;
  }
  out.unknown = true;
  out.unknown_what = "custom-call " + t;
  return out;
}

OpCost CostModel::cost(const Computation& c, const Instruction& inst) {
  const std::string& op = inst.opcode;
  // Async sugar for a wrapped computation (fusion-start, custom-call-start, async-start).
  const bool wrapped = !inst.called.empty() && (op == "async-start" || (op.size() > 6 && op.ends_with("-start")));
  if (op == "fusion" || (wrapped && op == "fusion-start")) {
    const Computation* f = inst.called.empty() ? nullptr : m_.find(inst.called[0]);
    if (f) return fusion_cost(c, inst, *f);
  }
  if (wrapped) {
    const Computation* w = m_.find(inst.called[0]);
    if (w && w->root >= 0) {
      const Instruction& r = w->root_instruction();
      if (r.opcode == "fusion" && !r.called.empty())
        if (const Computation* f = m_.find(r.called[0])) return fusion_cost(*w, r, *f);
      return cost(*w, r);
    }
  }
  OpCost out;
  double operand_bytes = 0;
  bool operand_host = false;
  for (std::size_t k = 0; k < inst.operands.size(); ++k) {
    const Shape& s = operand_shape(c, inst, k);
    operand_bytes += s.bytes();
    operand_host = operand_host || s.on_host();
  }
  if (op == "custom-call") return custom_call_cost(c, inst);
  if (op == "copy" || op == "copy-start") {
    const Shape& src = operand_shape(c, inst, 0);
    const Shape& dst = (op == "copy-start" && inst.shape.is_tuple && !inst.shape.tuple.empty()) ? inst.shape.tuple[0] : inst.shape;
    (src.on_host() ? out.host_read : out.bytes_read) += src.bytes();
    (dst.on_host() ? out.host_written : out.bytes_written) += dst.bytes();
    return out;
  }
  if (is_slice_like(op)) {
    double idx = 0;
    for (std::size_t k = 1; k < inst.operands.size(); ++k) idx += operand_shape(c, inst, k).bytes();
    (operand_shape(c, inst, 0).on_host() ? out.host_read : out.bytes_read) += inst.shape.bytes();
    out.bytes_read += idx;
    (inst.shape.on_host() ? out.host_written : out.bytes_written) += inst.shape.bytes();
    return out;
  }
  if (op == "dynamic-update-slice" || op == "scatter") {
    const std::size_t upd_k = op == "scatter" ? (inst.operands.empty() ? 0 : inst.operands.size() - 1) : 1;
    const Shape& upd = operand_shape(c, inst, upd_k);
    double idx = 0;
    for (std::size_t k = 1; k < inst.operands.size(); ++k)
      if (k != upd_k) idx += operand_shape(c, inst, k).bytes();
    (upd.on_host() ? out.host_read : out.bytes_read) += upd.bytes() * (op == "scatter" ? 2 : 1);
    out.bytes_read += idx;
    (inst.shape.on_host() ? out.host_written : out.bytes_written) += upd.bytes();
    if (op == "scatter") add_instruction_flops(c, inst, out, 0);
    return out;
  }
  if (!known_opcode(op)) {
    out.unknown = true;
    out.unknown_what = "opcode " + op;
  } else {
    add_instruction_flops(c, inst, out, 0);
  }
  (operand_host ? out.host_read : out.bytes_read) += operand_bytes;
  (inst.shape.on_host() ? out.host_written : out.bytes_written) += inst.shape.bytes();
  return out;
}

std::vector<std::pair<int, int>> CostModel::inplace_aliases(const Computation& c, const Instruction& inst) {
  static_cast<void>(c);
  std::vector<std::pair<int, int>> out;
  const std::string& op = inst.opcode;
  if (op == "dynamic-update-slice" || op == "scatter") {
    out.emplace_back(0, 0);
    return out;
  }
  if (op == "custom-call") {
    if (const std::string* a = inst.attr("output_to_operand_aliasing")) {
      // {{0}: (0, {}), {1}: (2, {})}  or  {{}: (0, {})}
      std::size_t i = 0;
      while ((i = a->find(':', i)) != std::string::npos) {
        const auto ob = a->rfind('{', i);
        const auto lp = a->find('(', i);
        if (ob == std::string::npos || lp == std::string::npos) break;
        const auto out_idx = parse_int_list(a->substr(ob, i - ob));
        const auto opnd = parse_int_list(a->substr(lp, a->find_first_of(",)", lp) - lp));
        if (!opnd.empty()) {
          int leaf = 0;
          if (!out_idx.empty() && inst.shape.is_tuple) leaf = inst.shape.leaf_offset(static_cast<int>(out_idx[0]));
          out.emplace_back(leaf, static_cast<int>(opnd[0]));
        }
        i = lp;
      }
    }
    return out;
  }
  const Computation* f = nullptr;
  const bool wrapped = !inst.called.empty() && (op == "async-start" || (op.size() > 6 && op.ends_with("-start")));
  if (op == "fusion" || wrapped) f = inst.called.empty() ? nullptr : m_.find(inst.called[0]);
  if (!f) return out;
  if (wrapped && op != "fusion-start") {
    // async-start wrapping one instruction whose operands are the wrapper's parameters.
    const Instruction& r = f->root_instruction();
    std::vector<std::pair<int, int>> inner;
    if (r.opcode == "fusion" && !r.called.empty()) {
      inner = inplace_aliases(*f, r);
    } else {
      inner = inplace_aliases(*f, r);
    }
    for (auto [leaf, k] : inner) {
      if (k < 0 || static_cast<std::size_t>(k) >= r.operands.size()) continue;
      const Instruction& p = f->instructions[static_cast<std::size_t>(r.operands[static_cast<std::size_t>(k)])];
      if (p.opcode == "parameter") out.emplace_back(leaf, static_cast<int>(p.parameter_number));
    }
    return out;
  }
  // A fusion: root (or a root tuple element) that is an in-place update of a parameter.
  auto trace_param = [&](int v) -> int {
    for (int d = 0; d < 64; ++d) {
      const Instruction& x = f->instructions[static_cast<std::size_t>(v)];
      if (x.opcode == "parameter") return static_cast<int>(x.parameter_number);
      if (x.opcode != "bitcast" || x.operands.empty()) return -1;
      v = x.operands[0];
    }
    return -1;
  };
  auto inplace_of = [&](int v) -> int {
    for (int d = 0; d < 64; ++d) {
      const Instruction& x = f->instructions[static_cast<std::size_t>(v)];
      if ((x.opcode == "dynamic-update-slice" || x.opcode == "scatter") && !x.operands.empty())
        return trace_param(x.operands[0]);
      if (x.opcode != "bitcast" || x.operands.empty()) return -1;
      v = x.operands[0];
    }
    return -1;
  };
  const Instruction& root = f->root_instruction();
  if (root.opcode == "tuple") {
    for (std::size_t i = 0; i < root.operands.size(); ++i) {
      const int p = inplace_of(root.operands[i]);
      if (p >= 0) out.emplace_back(root.shape.leaf_offset(static_cast<int>(i)), p);
    }
  } else {
    const int p = inplace_of(f->root);
    if (p >= 0) out.emplace_back(0, p);
  }
  return out;
}

CollectiveInfo CostModel::collective(const Computation& c, const Instruction& inst, const Module& m) {
  CollectiveInfo ci;
  std::string op = inst.opcode;
  const Computation* cc = &c;
  const Instruction* in = &inst;
  if ((op == "async-start") && !inst.called.empty()) {
    if (const Computation* w = m.find(inst.called[0])) {
      cc = w;
      in = &w->root_instruction();
      op = in->opcode;
    }
  }
  for (std::string_view suffix : {"-start", "-done"})
    if (op.size() > suffix.size() && op.ends_with(suffix)) op = op.substr(0, op.size() - suffix.size());
  double operand_bytes = 0;
  for (std::size_t k = 0; k < in->operands.size(); ++k) operand_bytes += operand_shape(*cc, *in, k).bytes();
  using hw::CollectiveOp;
  if (op == "all-reduce") ci.op = CollectiveOp::all_reduce;
  else if (op == "all-gather") ci.op = CollectiveOp::all_gather;
  else if (op == "reduce-scatter") ci.op = CollectiveOp::reduce_scatter;
  else if (op == "all-to-all" || op == "ragged-all-to-all") ci.op = CollectiveOp::all_to_all;
  else if (op == "collective-permute" || op == "send" || op == "recv") ci.op = CollectiveOp::send_recv;
  else if (op == "collective-broadcast") ci.op = CollectiveOp::broadcast;
  else return ci;
  ci.is_collective = true;
  if (op == "ragged-all-to-all") operand_bytes = operand_shape(*cc, *in, 0).bytes();
  if (op == "recv") operand_bytes = in->shape.is_tuple && !in->shape.tuple.empty() ? in->shape.tuple[0].bytes() : in->shape.bytes();
  // Group size.
  // The module's devices bound the ids; a header without replica_count or num_partitions (both default 1) states no
  // count, and XLA's verifier then skips the bound, as here.
  const int64_t stated = static_cast<int64_t>(m.replica_count) * m.num_partitions;
  const int64_t devices = stated > 1 ? stated : hw::kMaxGpus;
  if (const std::string* rg = in->attr("replica_groups")) {
    const std::string& v = *rg;
    const bool uniform = ci.op != CollectiveOp::all_reduce;  // XLA lets an all-reduce's groups differ in size
    ci.invalid = v.starts_with("mesh[") ? mesh_axes_group(v, devices, ci.group_size, ci.consecutive)
                                        : list_groups(v, devices, uniform, ci.group_size, ci.consecutive);
  } else if (const std::string* stp = in->attr("source_target_pairs")) {
    // (An in-place collective-permute-start, with its 4 operands, may name a pair more than once.)
    ci.invalid = permute_pairs(*stp, devices, in->operands.size() <= 2, ci.group_size);
  }
  ci.operand_bytes = operand_bytes;
  const double g = std::max(1, ci.group_size);
  ci.bytes = ci.op == hw::CollectiveOp::all_gather ? operand_bytes * (ci.group_size > 0 ? g : 1) : operand_bytes;
  return ci;
}

}  // namespace racksim::workloads::hlo
