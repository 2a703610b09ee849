#include "workloads/hlo/hlo_lower.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <string_view>

#include "input/diagnostics.h"
#include "workloads/bounded_json.h"
#include "workloads/hlo/hlo_cost.h"

namespace racksim::workloads::hlo {

namespace {

constexpr double kMaxOpBytes = 1e15;   // one kernel moving a petabyte is not a training step
constexpr double kMaxOpFlops = 1e20;
constexpr int64_t kMaxTripCount = 1'000'000;
constexpr double kMaxTokensPerDevice = 1e9;

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
bool contains(std::string_view s, std::string_view t) { return s.find(t) != std::string_view::npos; }

nlohmann::json backend_config_json(const Instruction& inst) {
  const std::string* v = inst.attr("backend_config");
  if (!v || v->empty() || v->front() != '{') return nlohmann::json();
  JsonBoundError refused;  // a config nested too deep reads as none, as a malformed one does
  return parse_bounded_json(*v, refused, false);
}

// An integer as XLA's backend configs write one (a decimal string, or a JSON integer); the whole string must be it.
std::optional<int64_t> json_int(const nlohmann::json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (!j.is_string()) return std::nullopt;
  const std::string& s = j.get_ref<const std::string&>();
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool is_async_start(const Instruction& inst) {
  return inst.opcode == "async-start" || (inst.opcode.size() > 6 && ends_with(inst.opcode, "-start"));
}
bool is_async_done(const Instruction& inst) {
  return inst.opcode == "async-done" || (inst.opcode.size() > 5 && ends_with(inst.opcode, "-done"));
}

// Which tuple element of an async start's result is the operation's output: copy-start is
// (destination, source, context); the others are ((operands...), output, context...) or the
// output itself.
int async_output_index(const Instruction& start) {
  if (!start.shape.is_tuple || start.shape.tuple.size() < 2) return -1;
  if (start.opcode == "copy-start") return 0;
  return 1;
}

}  // namespace

class Lowerer {
 public:
  Lowerer(const Module& m, const LowerOptions& o) : m_(m), o_(o), cost_(m) {}

  ImportResult run() {
    s_.module_name = m_.name;
    s_.scheduled = m_.is_scheduled;
    s_.module_devices = m_.replica_count * m_.num_partitions;
    for (const auto& c : m_.computations)
      for (const auto& inst : c.instructions) {
        ++s_.opcodes[inst.opcode];
        if (inst.opcode == "custom-call") ++s_.custom_calls[inst.custom_call_target];
      }
    if (!m_.is_scheduled)
      s_.notes.push_back("the module is not scheduled (is_scheduled=true missing): replayed in text order");
    decide_groups();

    const Computation& entry = m_.entry_computation();
    // Entry parameters: resident for the whole step.
    std::vector<Value> args(entry.parameters.size());
    infer_params(entry);
    for (std::size_t i = 0; i < entry.parameters.size(); ++i) {
      const Instruction& p = entry.instructions[static_cast<std::size_t>(entry.parameters[i])];
      args[i] = new_value(p.shape, param_category(i, p), p.name);
      for (uint32_t b : args[i]) {
        bufs_[b].resident = true;
        s_.argument_bytes += bufs_[b].bytes;
      }
    }
    Value out = lower(entry, args);
    mark_outputs(entry, out, args);
    assign_host_work();
    finish_memory();
    infer_tokens(entry);
    infer_model_flops();
    for (const auto& [what, n] : s_.unknown)
      s_.notes.push_back(what.ends_with("(in a fusion)")
                             ? fmt::format("{} ({} in the step) is not modelled: the fusion is costed without its FLOPs "
                                           "(its other instructions' FLOPs and its bytes as usual)", what, n)
                             : fmt::format("{} ({} in the step) is not modelled: costed as a memory-bound kernel "
                                           "(operand + result bytes, no FLOPs)", what, n));
    if (s_.serialized_host_bytes > 0)
      s_.notes.push_back(fmt::format(
          "{:.3g} GB of host-memory transfers run on XLA's default stream (operation_queue_id 0), "
          "serialized with compute", s_.serialized_host_bytes / 1e9));
    for (const auto& l : s_.loops)
      if (l.source == "assumed")
        s_.notes.push_back(fmt::format("while loop '{}': no trip count found; ran its body once", l.name));
    g_.notes = s_.notes;
    ImportResult r;
    r.graph = std::move(g_);
    r.summary = std::move(s_);
    return r;
  }

 private:
  using Value = std::vector<uint32_t>;  // leaf buffers in shape order

  struct Buf {
    double bytes = 0;
    bool host = false;
    bool constant = false;  // no memory of its own (constants, tokens, contexts)
    bool resident = false;  // allocated for the whole step (arguments, outputs)
    bool output = false;    // reaches the entry computation's result
    int64_t first = -1;     // first op that touches it
    int64_t last = -1;      // last op that touches it
    int64_t writer = -1;    // op that last wrote it
    MemCategory cat = MemCategory::activations;
    std::string name;
  };

  const Module& m_;
  LowerOptions o_;
  CostModel cost_;
  OpGraph g_;
  ImportSummary s_;
  std::vector<Buf> bufs_;
  std::vector<OpId> compute_waits_;  // async ops the compute stream waits for before its next op
  int64_t last_main_ = -1;           // last op of XLA's default stream (compute, or serialized there)
  int segment_ = 0;                  // command-buffer segment (a CUDA graph per segment)
  bool in_repeat_ = false;           // inside a loop iteration after the first (same buffers again)
  std::map<int, bool> segment_repeat_;  // segment -> an execution of a command buffer already run this step
  int64_t loop_iterations_ = 0;         // every while loop's iterations lowered so far (nested trip counts multiply)
  std::vector<int> op_segment_;      // per op
  std::vector<int> op_refs_;         // per op: buffers it names (operand and result leaves)
  Phase phase_ = Phase::forward;
  bool seen_backward_ = false;
  std::vector<const Computation*> stack_;
  std::vector<MemCategory> param_cat_;
  int consecutive_group_ = 0;        // group size mapped to CommGroup::tp
  double loop_weight_ = 1;           // 1 / product of the trip counts of the enclosing loops

  // ---- values and buffers

  uint32_t new_buf(const Shape& leaf, MemCategory cat, const std::string& name, bool constant) {
    Buf b;
    b.bytes = leaf.bytes();
    b.host = leaf.on_host();
    b.constant = constant || b.bytes <= 0;
    b.cat = b.host ? MemCategory::activations : cat;
    b.name = name;
    bufs_.push_back(std::move(b));
    return static_cast<uint32_t>(bufs_.size() - 1);
  }
  void leaves(const Shape& s, std::vector<const Shape*>& out, int depth = 0) {
    if (depth > 64) return;
    if (!s.is_tuple) {
      out.push_back(&s);
      return;
    }
    for (const auto& e : s.tuple) leaves(e, out, depth + 1);
  }
  Value new_value(const Shape& s, MemCategory cat, const std::string& name, bool constant = false) {
    std::vector<const Shape*> ls;
    leaves(s, ls);
    Value v;
    for (std::size_t i = 0; i < ls.size(); ++i)
      v.push_back(new_buf(*ls[i], cat, ls.size() > 1 ? fmt::format("{}.{}", name, i) : name, constant));
    return v;
  }

  // ---- module-level inference

  void decide_groups() {
    std::map<int, int> consecutive;
    for (const auto& c : m_.computations)
      for (const auto& inst : c.instructions) {
        if (is_async_done(inst)) continue;
        const auto ci = CostModel::collective(c, inst, m_);
        if (ci.is_collective && ci.consecutive && ci.group_size > 1 && ci.group_size < o_.gpus &&
            o_.gpus % ci.group_size == 0)
          ++consecutive[ci.group_size];
      }
    int best = 0, count = 0;
    for (const auto& [g, n] : consecutive)
      if (n > count) {
        best = g;
        count = n;
      }
    consecutive_group_ = best;
    s_.tp = best > 1 ? best : 1;
  }

  // Model parameters: optax's Adam state holds two moments shaped like the parameters, so the
  // floating-point arguments split into three runs with identical shapes (params, mu, nu).
  void infer_params(const Computation& entry) {
    param_cat_.assign(entry.parameters.size(), MemCategory::weights);
    std::vector<std::size_t> fl;
    for (std::size_t i = 0; i < entry.parameters.size(); ++i) {
      const Shape& s = entry.instructions[static_cast<std::size_t>(entry.parameters[i])].shape;
      if (!s.is_tuple && is_float_type(s.element_type) && !s.dims.empty()) fl.push_back(i);
      else param_cat_[i] = MemCategory::other;
    }
    auto shape_of = [&](std::size_t k) -> const Shape& {
      return entry.instructions[static_cast<std::size_t>(entry.parameters[fl[k]])].shape;
    };
    if (!fl.empty() && fl.size() % 3 == 0) {
      const std::size_t n = fl.size() / 3;
      bool same = true;
      for (std::size_t k = 0; k < n && same; ++k)
        same = shape_of(k).dims == shape_of(n + k).dims && shape_of(k).dims == shape_of(2 * n + k).dims;
      if (same) {
        double params = 0;
        for (std::size_t k = 0; k < n; ++k) params += shape_of(k).elements();
        s_.params = params;
        s_.params_source = fmt::format("{} arguments followed by two runs of the same shapes (Adam moments)", n);
        for (std::size_t k = n; k < fl.size(); ++k) param_cat_[fl[k]] = MemCategory::optimizer;
        // Scalars between the runs (the step count) are optimizer state too.
        for (std::size_t i = fl[n - 1] + 1; i < fl[n]; ++i) param_cat_[i] = MemCategory::optimizer;
        return;
      }
    }
    // Otherwise by name: moments and counts are optimizer state.
    for (std::size_t k : fl) {
      const Instruction& p = entry.instructions[static_cast<std::size_t>(entry.parameters[k])];
      const std::string n = p.name + " " + p.op_name;
      if (contains(n, "mu") || contains(n, "nu") || contains(n, "opt") || contains(n, "adam") || contains(n, "momentum"))
        param_cat_[k] = MemCategory::optimizer;
    }
  }

  MemCategory param_category(std::size_t i, const Instruction&) const {
    return i < param_cat_.size() ? param_cat_[i] : MemCategory::weights;
  }

  // Tokens of one step: a rank-2 integer argument [batch, sequence]; one named like token ids
  // wins, else the first.
  void infer_tokens(const Computation& entry) {
    const Instruction* pick = nullptr;
    for (int pi : entry.parameters) {
      const Instruction& p = entry.instructions[static_cast<std::size_t>(pi)];
      if (p.shape.is_tuple || !is_integer_type(p.shape.element_type) || p.shape.dims.size() != 2) continue;
      std::string n = p.name + " " + p.op_name;
      std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return std::tolower(ch); });
      const bool named = contains(n, "tok") || contains(n, "input") || contains(n, "ids");
      if (!pick || named) {
        pick = &p;
        if (named) break;
      }
    }
    if (!pick) return;
    // A step of more than a billion tokens on one device is not a training step: a token count
    // that large would only make tokens/s absurd (docs/decisions.md, "Input limits").
    if (pick->shape.elements() > kMaxTokensPerDevice)
      fail_at(m_, *pick,
              fmt::format("argument '{}' {} would be {:.3g} tokens per device and step, more than the {:.0e} racksim "
                          "takes (docs/decisions.md, \"Input limits\")",
                          pick->name, pick->shape.to_string(), pick->shape.elements(), kMaxTokensPerDevice));
    s_.tokens_per_device = pick->shape.elements();
    s_.tokens_source = fmt::format("argument '{}' {} (batch x sequence)", pick->name, pick->shape.to_string());
    if (const std::string* sh = pick->attr("sharding")) s_.token_shards = sharding_tiles(*sh, pick->shape.dims.size());
  }

  void infer_model_flops() {
    if (s_.params > 0 && s_.tokens_per_device > 0 && s_.module_devices == 1) {
      // 6·N·tokens plus attention: the forward attention matmuls counted three times (forward
      // and backward), halved for the causal mask when XLA materialized the full square (fused
      // attention already skips the masked half).
      s_.model_flops_per_device = 6.0 * s_.params * s_.tokens_per_device + 3.0 * s_.forward_attention_flops;
      s_.model_flops_source = "6·N·tokens + attention (N from the arguments, tokens from the token-id argument)";
    } else {
      s_.model_flops_per_device = s_.tensor_flops - s_.recompute_tensor_flops;
      s_.model_flops_source = "the module's own matmul FLOPs without recomputation";
    }
  }

  // ---- phases

  Phase phase_of(const Instruction& inst) {
    const std::string& n = inst.op_name;
    if (n.empty()) return phase_;
    if (contains(n, "rematted_computation")) phase_ = Phase::recompute;
    else if (contains(n, "transpose(")) {
      phase_ = Phase::backward;
      seen_backward_ = true;
    } else if (contains(n, "jvp(")) phase_ = Phase::forward;
    else phase_ = seen_backward_ ? Phase::optimizer : Phase::forward;
    return phase_;
  }

  // ---- lowering

  Value lower(const Computation& c, const std::vector<Value>& args) {
    // The parser has rejected call cycles and chains deeper than kMaxCallDepth; kept as a guard.
    if (std::find(stack_.begin(), stack_.end(), &c) != stack_.end())
      fail_at(m_, c.instructions.front(), fmt::format("computation '{}' calls itself (recursion)", c.name));
    if (stack_.size() >= static_cast<std::size_t>(kMaxCallDepth))
      fail_at(m_, c.instructions.front(),
              fmt::format("calls nest more than {} deep at computation '{}'", kMaxCallDepth, c.name));
    stack_.push_back(&c);
    const std::size_t n = c.instructions.size();
    std::vector<Value> env(n);
    std::vector<int64_t> op_of(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const Instruction& inst = c.instructions[i];
      auto val = [&](std::size_t k) -> const Value& {
        if (k >= inst.operands.size())
          fail_at(m_, inst, fmt::format("'{}' ({}) needs at least {} operands", inst.name, inst.opcode, k + 1));
        return env[static_cast<std::size_t>(inst.operands[k])];
      };
      const std::string& op = inst.opcode;
      if (op == "parameter") {
        const auto pn = static_cast<std::size_t>(inst.parameter_number);
        if (pn >= args.size())
          fail_at(m_, inst, fmt::format("parameter({}) of '{}' but the caller passes {} operands", pn, c.name, args.size()));
        env[i] = args[pn].size() == static_cast<std::size_t>(inst.shape.leaf_count())
                     ? args[pn]
                     : new_value(inst.shape, MemCategory::activations, inst.name);
      } else if (op == "get-tuple-element") {
        env[i] = gte_value(c, inst, val(0));
      } else if (op == "tuple") {
        Value v;
        for (std::size_t k = 0; k < inst.operands.size(); ++k) v.insert(v.end(), val(k).begin(), val(k).end());
        env[i] = v.size() == static_cast<std::size_t>(inst.shape.leaf_count()) ? v : new_value(inst.shape, MemCategory::activations, inst.name);
      } else if (op == "bitcast" || op == "opt-barrier" || op == "optimization-barrier" || op == "add-dependency" ||
                 op == "domain") {
        env[i] = (!inst.operands.empty() && val(0).size() == static_cast<std::size_t>(inst.shape.leaf_count()))
                     ? val(0)
                     : new_value(inst.shape, MemCategory::activations, inst.name);
      } else if (op == "constant" || op == "after-all" || op == "partition-id" || op == "replica-id" ||
                 op == "get-dimension-size") {
        env[i] = new_value(inst.shape, MemCategory::other, inst.name, /*constant=*/true);
      } else if (op == "custom-call" && inst.custom_call_target == "AllocateBuffer") {
        env[i] = new_value(inst.shape, MemCategory::activations, inst.name);
      } else if (op == "while") {
        env[i] = lower_while(c, inst, inst.operands.empty() ? Value{} : val(0));
      } else if (op == "call") {
        std::vector<Value> a;
        for (std::size_t k = 0; k < inst.operands.size(); ++k) a.push_back(val(k));
        const Computation* callee = inst.called.empty() ? nullptr : m_.find(inst.called[0]);
        if (!callee) fail_at(m_, inst, "call without a computation (to_apply=)");
        env[i] = fit(lower(*callee, a), inst);
      } else if (op == "conditional") {
        env[i] = lower_conditional(c, inst, env);
      } else if (is_async_done(inst)) {
        env[i] = async_done(c, inst, env, op_of);
      } else if (op == "async-update" || ends_with(op, "-update")) {
        env[i] = inst.operands.empty() ? new_value(inst.shape, MemCategory::other, inst.name, true) : val(0);
      } else {
        std::vector<const Value*> ops;
        for (std::size_t k = 0; k < inst.operands.size(); ++k) ops.push_back(&val(k));
        op_of[i] = emit(c, inst, ops, env[i]);
      }
    }
    stack_.pop_back();
    return env[static_cast<std::size_t>(c.root)];
  }

  Value fit(Value v, const Instruction& inst) {
    if (v.size() == static_cast<std::size_t>(inst.shape.leaf_count())) return v;
    return new_value(inst.shape, MemCategory::activations, inst.name);
  }

  Value gte_value(const Computation& c, const Instruction& inst, const Value& t) {
    const std::string* idx_s = inst.attr("index");
    const auto idx = idx_s ? parse_int_list(*idx_s) : std::vector<int64_t>{};
    if (inst.operands.empty()) fail_at(m_, inst, "get-tuple-element without an operand");
    const Shape& ts = c.instructions[static_cast<std::size_t>(inst.operands[0])].shape;
    if (idx.empty() || !ts.is_tuple || idx[0] < 0 || static_cast<std::size_t>(idx[0]) >= ts.tuple.size())
      fail_at(m_, inst, fmt::format("get-tuple-element index {} is outside the tuple {}", idx_s ? *idx_s : "(none)",
                                    ts.to_string()));
    const int off = ts.leaf_offset(static_cast<int>(idx[0]));
    const int cnt = ts.tuple[static_cast<std::size_t>(idx[0])].leaf_count();
    if (static_cast<std::size_t>(off + cnt) > t.size()) return new_value(inst.shape, MemCategory::activations, inst.name);
    return Value(t.begin() + off, t.begin() + off + cnt);
  }

  std::optional<int64_t> constant_int(const Computation& c, int idx, int depth = 0) {
    if (idx < 0 || depth > 16) return std::nullopt;
    const Instruction& x = c.instructions[static_cast<std::size_t>(idx)];
    if (x.opcode == "constant") {
      const auto v = parse_int_list(x.literal);
      if (v.size() == 1 && x.literal.find('.') == std::string::npos) return v[0];
      return std::nullopt;
    }
    if ((x.opcode == "copy" || x.opcode == "bitcast" || x.opcode == "convert" || x.opcode == "reshape") && !x.operands.empty())
      return constant_int(c, x.operands[0], depth + 1);
    return std::nullopt;
  }

  // The trip count from the loop condition: compare(induction variable, constant).
  std::optional<int64_t> trip_from_condition(const Computation& cond, int64_t init) {
    const Computation* comp = &cond;
    const Instruction* cmp = &cond.root_instruction();
    const Computation* outer = nullptr;
    const Instruction* fusion = nullptr;
    if (cmp->opcode == "fusion" && !cmp->called.empty()) {
      if (const Computation* f = m_.find(cmp->called[0])) {
        outer = comp;
        fusion = cmp;
        comp = f;
        cmp = &f->root_instruction();
      }
    }
    if (cmp->opcode != "compare" || cmp->operands.size() != 2) return std::nullopt;
    auto value_of = [&](int idx) -> std::optional<int64_t> {
      if (auto v = constant_int(*comp, idx)) return v;
      const Instruction& x = comp->instructions[static_cast<std::size_t>(idx)];
      if (outer && x.opcode == "parameter" && static_cast<std::size_t>(x.parameter_number) < fusion->operands.size())
        return constant_int(*outer, fusion->operands[static_cast<std::size_t>(x.parameter_number)]);
      return std::nullopt;
    };
    const auto lhs = value_of(cmp->operands[0]);
    const auto rhs = value_of(cmp->operands[1]);
    const std::string* dir = cmp->attr("direction");
    if (!dir || (lhs && rhs) || (!lhs && !rhs)) return std::nullopt;
    std::string d = *dir;
    int64_t bound = rhs ? *rhs : *lhs;
    if (lhs) {  // constant on the left: flip the comparison
      if (d == "GT") d = "LT";
      else if (d == "GE") d = "LE";
      else if (d == "LT") d = "GT";
      else if (d == "LE") d = "GE";
    }
    if (d == "LT" || d == "NE") return std::max<int64_t>(0, bound - init);
    if (d == "LE") return std::max<int64_t>(0, bound - init + 1);
    return std::nullopt;
  }

  Value lower_while(const Computation& c, const Instruction& inst, const Value& init) {
    const std::string* cn = inst.attr("condition");
    const std::string* bn = inst.attr("body");
    const Computation* cond = nullptr;
    const Computation* body = nullptr;
    for (const auto& callee : inst.called) {
      if (cn && contains(*cn, callee)) cond = m_.find(callee);
      if (bn && contains(*bn, callee)) body = m_.find(callee);
    }
    if (!body) fail_at(m_, inst, "while without a body computation");
    LoopInfo li;
    li.name = inst.name;
    std::optional<int64_t> trips;
    int64_t init_v = 0, step = 1;
    const auto cfg = backend_config_json(inst);
    if (cfg.is_object()) {
      if (cfg.contains("known_trip_count") && cfg["known_trip_count"].is_object() && cfg["known_trip_count"].contains("n")) {
        trips = json_int(cfg["known_trip_count"]["n"]);
        if (!trips)  // XLA writes it as a decimal string; anything else is a damaged config, not a count to guess
          fail_at(m_, inst, fmt::format("while loop '{}': known_trip_count n is {}, not an integer", inst.name,
                                        cfg["known_trip_count"]["n"].dump()));
      }
      if (cfg.contains("known_init_step") && cfg["known_init_step"].is_object()) {
        if (auto v = json_int(cfg["known_init_step"].value("init", nlohmann::json()))) init_v = *v;
        if (auto v = json_int(cfg["known_init_step"].value("step", nlohmann::json())); v && *v != 0) step = *v;
      }
    }
    if (trips) {
      li.source = "known_trip_count";
    } else if (cond) {
      if (auto t = trip_from_condition(*cond, init_v)) {
        trips = (*t + std::abs(step) - 1) / std::abs(step);
        li.source = "condition";
      }
    }
    if (!trips) {
      trips = 1;
      li.source = "assumed";
    }
    if (*trips < 0)
      fail_at(m_, inst, fmt::format("while loop '{}' has a negative trip count ({})", inst.name, *trips));
    if (*trips > kMaxTripCount)
      fail_at(m_, inst, fmt::format("while loop '{}' has trip count {}, beyond {} (not a training step)", inst.name,
                                    *trips, kMaxTripCount));
    li.trip_count = *trips;
    s_.loops.push_back(li);
    (void)c;
    Value cur = init.size() == static_cast<std::size_t>(inst.shape.leaf_count()) ? init
                                                                                    : new_value(inst.shape, MemCategory::activations, inst.name);
    const bool eval_condition = li.source != "known_trip_count";  // XLA skips it when the count is known
    const double outer_weight = loop_weight_;
    loop_weight_ = outer_weight / static_cast<double>(std::max<int64_t>(1, *trips));
    const bool outer_repeat = in_repeat_;
    for (int64_t t = 0; t < *trips; ++t) {
      // Loops whose bodies emit no kernels would run up no op count: the iterations are bounded as the ops are.
      if (++loop_iterations_ > static_cast<int64_t>(o_.max_ops))
        fail_at(m_, inst, fmt::format("the step's while loops run more than {} iterations in all (nested trip counts "
                                      "multiply; loop '{}' of {} trips): not a training step",
                                      o_.max_ops, inst.name, *trips));
      ++segment_;
      in_repeat_ = outer_repeat || t > 0;
      segment_repeat_[segment_] = in_repeat_;
      if (eval_condition && cond) lower(*cond, {cur});
      Value next = lower(*body, {cur});
      if (next.size() == cur.size()) cur = std::move(next);
    }
    ++segment_;
    in_repeat_ = outer_repeat;
    segment_repeat_[segment_] = in_repeat_;
    loop_weight_ = outer_weight;
    return cur;
  }

  Value lower_conditional(const Computation& c, const Instruction& inst, const std::vector<Value>& env) {
    // The branch taken is data-dependent: replay the first branch, and say so.
    if (inst.called.empty()) fail_at(m_, inst, "conditional without branch computations");
    const Computation* br = m_.find(inst.called[0]);
    std::vector<Value> a;
    if (inst.operands.size() >= 2) a.push_back(env[static_cast<std::size_t>(inst.operands[1])]);
    static_cast<void>(c);
    const std::string note = fmt::format("conditional '{}': replayed its first branch ({})", inst.name, inst.called[0]);
    if (std::find(s_.notes.begin(), s_.notes.end(), note) == s_.notes.end() && s_.notes.size() < 200) s_.notes.push_back(note);
    if (!br) fail_at(m_, inst, "conditional branch not found");
    if (a.size() < br->parameters.size()) a.resize(br->parameters.size());
    return fit(lower(*br, a), inst);
  }

  Value async_done(const Computation& c, const Instruction& inst, const std::vector<Value>& env,
                   const std::vector<int64_t>& op_of) {
    if (inst.operands.empty()) return new_value(inst.shape, MemCategory::other, inst.name, true);
    const auto si = static_cast<std::size_t>(inst.operands[0]);
    const Instruction& start = c.instructions[si];
    const Value& sv = env[si];
    Value out;
    const int oi = async_output_index(start);
    if (oi >= 0 && start.shape.is_tuple && static_cast<std::size_t>(oi) < start.shape.tuple.size()) {
      const int off = start.shape.leaf_offset(oi);
      const int cnt = start.shape.tuple[static_cast<std::size_t>(oi)].leaf_count();
      if (static_cast<std::size_t>(off + cnt) <= sv.size()) out.assign(sv.begin() + off, sv.begin() + off + cnt);
    } else {
      out = sv;
    }
    if (out.size() != static_cast<std::size_t>(inst.shape.leaf_count()))
      out = sv.size() == static_cast<std::size_t>(inst.shape.leaf_count()) ? sv : new_value(inst.shape, MemCategory::activations, inst.name);
    // The compute stream waits for the async operation here.
    const int64_t sop = op_of[si];
    if (sop >= 0 && g_.ops[static_cast<std::size_t>(sop)].stream != StreamKind::compute)
      compute_waits_.push_back(static_cast<OpId>(sop));
    return out;
  }

  // operation_queue_id of an instruction: its own backend_config, else that of the computation
  // it wraps (the root, or the root fusion). 0 when none is given.
  static int64_t queue_id_of(const Instruction& inst) {
    const auto cfg = backend_config_json(inst);
    if (cfg.is_object() && cfg.contains("operation_queue_id"))
      if (auto v = json_int(cfg["operation_queue_id"])) return *v;
    return -1;
  }
  int64_t queue_id(const Computation& c, const Instruction& inst) const {
    static_cast<void>(c);
    if (const int64_t q = queue_id_of(inst); q >= 0) return q;
    if (!inst.called.empty())
      if (const Computation* w = m_.find(inst.called[0])) {
        if (const int64_t q = queue_id_of(w->root_instruction()); q >= 0) return q;
      }
    return 0;
  }

  // Communicator of a collective: groups of consecutive devices of the size chosen for tp map
  // to tp; everything else to dp (gpus / tp ranks). A group of another size is approximated
  // by the dp communicator, and said so.
  CommGroup group_for(const CollectiveInfo& ci) {
    if (consecutive_group_ > 1 && ci.group_size == consecutive_group_ && ci.consecutive) return CommGroup::tp;
    const int dp = std::max(1, o_.gpus / std::max(1, consecutive_group_));
    const int size = ci.group_size > 0 ? ci.group_size : o_.gpus;
    if (size != dp) {
      const std::string note = fmt::format(
          "collectives over groups of {} devices are modelled on the data-parallel communicator of {} ranks", size, dp);
      if (std::find(s_.notes.begin(), s_.notes.end(), note) == s_.notes.end()) s_.notes.push_back(note);
    }
    return CommGroup::dp;
  }

  int64_t emit(const Computation& c, const Instruction& inst, const std::vector<const Value*>& operands, Value& result) {
    const bool async = is_async_start(inst);
    OpCost k = cost_.cost(c, inst);
    const CollectiveInfo ci = CostModel::collective(c, inst, m_);
    if (!ci.invalid.empty()) fail_at(m_, inst, ci.invalid);
    const double host_bytes = std::max(k.host_read, k.host_written);
    const double hbm = k.bytes_read + k.bytes_written;
    if (!(hbm <= kMaxOpBytes) || !(host_bytes <= kMaxOpBytes) || !(k.flops <= kMaxOpFlops) || !(ci.bytes <= kMaxOpBytes))
      fail_at(m_, inst, fmt::format("instruction '{}' is implausibly large ({:.3g} bytes, {:.3g} FLOPs)", inst.name,
                                    std::max(hbm, std::max(host_bytes, ci.bytes)), k.flops));

    Op op;
    op.name = Name{g_.names.intern(inst.name), NamePrefix::command_buffer, static_cast<uint32_t>(segment_)};
    op.phase = phase_of(inst);
    if (ci.is_collective) {
      op.kind = OpKind::collective;
      op.stream = StreamKind::comm;
      op.queues_behind_compute = true;
      op.coll = ci.op;
      op.group = group_for(ci);
      const int g = ci.group_size > 0 ? ci.group_size : o_.gpus;
      op.coll_bytes = ci.op == hw::CollectiveOp::all_gather ? ci.operand_bytes * g : ci.bytes;
      ++s_.collectives;
    } else if (host_bytes > 0) {
      const bool d2h = k.host_written >= k.host_read;
      op.kind = d2h ? OpKind::copy_d2h : OpKind::copy_h2d;
      op.stream = d2h ? StreamKind::d2h : StreamKind::h2d;
      op.copy_bytes = host_bytes;
      s_.host_bytes += host_bytes;
      ++s_.host_copies;
    } else {
      op.kind = OpKind::kernel;
      op.stream = StreamKind::compute;
      const bool tensor = k.tensor_flops > 0 && !k.fp32_vector;
      op.unit = tensor ? ExecUnit::tensor : ExecUnit::vector;
      op.dtype = k.dtype;
      op.flops = tensor ? k.tensor_flops : k.flops;
      op.hbm_bytes = hbm;
      op.sfu_ops = k.sfu_ops;
      op.thread_bytes = k.thread_bytes;
      op.loop_indices = static_cast<float>(k.loop_indices);
      if (k.attention_flops > 0) {
        op.attention = k.attention_forward ? 1 : 2;
        op.attention_causal = k.attention_causal;
        op.attention_seq = k.attention_seq;
      }
      if (tensor) {
        op.gemm_mnk = k.gemm_mnk;
        op.gemm_batch = std::max(1, k.gemm_batch);
      }
      s_.flops += k.flops;
      if (tensor) {
        s_.tensor_flops += k.tensor_flops;
        if (op.phase == Phase::recompute) s_.recompute_tensor_flops += k.tensor_flops;
        if (k.dtype == sim::Dtype::fp8) s_.fp8 = true;
      }
      if (op.phase == Phase::forward) {
        s_.forward_attention_flops += k.attention_forward ? k.attention_flops : 0.5 * k.batched_dot_flops;
      }
      s_.hbm_bytes += hbm;
      ++s_.kernels;
    }
    if (k.unknown) ++s_.unknown[k.unknown_what];
    if (inst.opcode != "custom-call") s_.xla_convention_flops += k.flops * loop_weight_;
    s_.xla_convention_bytes += (hbm + k.host_read + k.host_written) * loop_weight_;

    // Result buffers: new, except in-place updates (alias an operand) and, for async starts,
    // the operand part of the result tuple (aliases the operands).
    result = new_value(inst.shape, MemCategory::activations, inst.name);
    std::vector<char> is_output(result.size(), 1);
    int out_off = 0;
    if (async && inst.shape.is_tuple) {
      const int oi = async_output_index(inst);
      std::vector<char> keep(result.size(), 0);
      for (auto& f : is_output) f = 0;
      if (oi >= 0 && static_cast<std::size_t>(oi) < inst.shape.tuple.size()) {
        out_off = inst.shape.leaf_offset(oi);
        const int cnt = inst.shape.tuple[static_cast<std::size_t>(oi)].leaf_count();
        for (int j = out_off; j < out_off + cnt && static_cast<std::size_t>(j) < result.size(); ++j)
          is_output[static_cast<std::size_t>(j)] = keep[static_cast<std::size_t>(j)] = 1;
      }
      // Operand part: element 0 of ((operands...), output, ...), element 1 of copy-start.
      const int opnd_el = inst.opcode == "copy-start" ? 1 : 0;
      if (static_cast<std::size_t>(opnd_el) < inst.shape.tuple.size() && opnd_el != oi) {
        Value flat;
        for (const Value* v : operands) flat.insert(flat.end(), v->begin(), v->end());
        const int off = inst.shape.leaf_offset(opnd_el);
        const int cnt = inst.shape.tuple[static_cast<std::size_t>(opnd_el)].leaf_count();
        if (static_cast<std::size_t>(cnt) == flat.size())
          for (int j = 0; j < cnt; ++j) {
            bufs_[result[static_cast<std::size_t>(off + j)]].constant = true;
            result[static_cast<std::size_t>(off + j)] = flat[static_cast<std::size_t>(j)];
            keep[static_cast<std::size_t>(off + j)] = 1;
          }
      }
      for (std::size_t j = 0; j < result.size(); ++j)
        if (!keep[j]) bufs_[result[j]].constant = true;  // contexts and bookkeeping scalars
    }
    // Workspaces of library calls (trailing byte arrays) are "other" memory.
    if (inst.opcode == "custom-call" && inst.shape.is_tuple)
      for (std::size_t j = 1; j < inst.shape.tuple.size(); ++j) {
        const Shape& e = inst.shape.tuple[j];
        if ((e.element_type == "s8" || e.element_type == "u8") && e.dims.size() == 1)
          bufs_[result[static_cast<std::size_t>(inst.shape.leaf_offset(static_cast<int>(j)))]].cat = MemCategory::other;
      }
    for (auto [leaf, k_op] : cost_.inplace_aliases(c, inst)) {
      const std::size_t j = static_cast<std::size_t>(leaf + out_off);
      if (k_op < 0 || static_cast<std::size_t>(k_op) >= operands.size() || j >= result.size()) continue;
      const Value& src = *operands[static_cast<std::size_t>(k_op)];
      if (src.size() != 1) continue;
      if (bufs_[src[0]].resident && !bufs_[src[0]].constant) continue;  // arguments are never updated in place
      if (std::abs(bufs_[src[0]].bytes - bufs_[result[j]].bytes) > 0.5) continue;
      bufs_[result[j]].constant = true;  // the fresh buffer is not used
      result[j] = src[0];
    }

    // Dependencies: the producers of what it reads, on other streams.
    std::set<OpId> deps;
    auto add_dep = [&](int64_t w) {
      if (w >= 0 && g_.ops[static_cast<std::size_t>(w)].stream != op.stream) deps.insert(static_cast<OpId>(w));
    };
    for (const Value* v : operands)
      for (uint32_t b : *v) add_dep(bufs_[b].writer);
    for (uint32_t b : result) add_dep(bufs_[b].writer);
    // An async wrapper that is not a collective or a copy-start runs on the stream its
    // operation_queue_id names; 0 (or none) is XLA's default stream, the one compute runs on
    // (Thunk::ThunkInfo: execution_stream_id = max(0, operation_queue_id)). Host-memory
    // dynamic-(update-)slices wrapped that way are therefore serialized with compute, as the
    // H200 profile of m1_off shows (MemcpyD2H/MemcpyH2D on the compute stream).
    const bool on_default_stream =
        async && !ci.is_collective && inst.opcode != "copy-start" && queue_id(c, inst) == 0;
    const bool sync_other_stream = op.stream != StreamKind::compute && (!async || on_default_stream);
    if (sync_other_stream && op.kind != OpKind::collective) s_.serialized_host_bytes += op.copy_bytes;
    if (op.stream == StreamKind::compute) {
      for (OpId w : compute_waits_) add_dep(w);
      compute_waits_.clear();
    } else if (last_main_ >= 0) {
      // Work on another stream starts after what the default stream issued before it.
      add_dep(last_main_);
    }
    op.deps.assign(deps.begin(), deps.end());
    if (g_.ops.size() >= o_.max_ops)
      fail_at(m_, inst, fmt::format("the unrolled step exceeds {} operations", o_.max_ops));
    const OpId id = g_.add(std::move(op));
    op_segment_.push_back(segment_);
    {
      std::size_t refs = result.size();
      for (const Value* v : operands) refs += v->size();
      op_refs_.push_back(static_cast<int>(refs));
    }
    if (g_.ops[id].stream == StreamKind::compute || sync_other_stream) last_main_ = id;
    if (sync_other_stream) compute_waits_.push_back(id);  // a synchronous collective/copy blocks compute

    auto touch = [&](uint32_t b) {
      Buf& x = bufs_[b];
      if (x.first < 0) x.first = id;
      x.last = std::max<int64_t>(x.last, id);
    };
    for (const Value* v : operands)
      for (uint32_t b : *v) touch(b);
    for (std::size_t j = 0; j < result.size(); ++j) {
      touch(result[j]);
      if (is_output[j]) bufs_[result[j]].writer = id;
    }
    return id;
  }

  // ---- host work of the XLA runtime (docs/architecture.md, "The HLO importer")

  // Each segment is one command-buffer execution: before its first kernel can run, the host
  // processes every command in it, and re-records those the first time the command buffer runs
  // in a step when the arguments moved (no donation: XLA allocates new output buffers every
  // step and the next step's arguments are those). Later iterations of a loop run the same
  // command buffer on the same buffers. The per-command costs are the system's (calibrated).
  void assign_host_work() {
    bool donated = false;
    for (const auto& a : m_.header) donated |= a.name == "input_output_alias";
    std::size_t first = 0;
    for (std::size_t i = 0; i <= g_.ops.size(); ++i) {
      if (i < g_.ops.size() && op_segment_[i] == op_segment_[first]) continue;
      if (first < g_.ops.size()) {
        Op& head = g_.ops[first];
        head.host_commands = static_cast<int>(i - first);
        int refs = 0;
        for (std::size_t j = first; j < i; ++j) refs += op_refs_[j];
        head.host_buffer_refs = refs;
        const auto rep = segment_repeat_.find(op_segment_[first]);
        head.host_rerecord = !donated && !(rep != segment_repeat_.end() && rep->second);
        ++s_.command_buffer_executions;
        if (head.host_rerecord) s_.rerecorded_buffer_refs += refs;
      }
      first = i;
    }
    if (!g_.ops.empty()) g_.ops.front().host_program_start = true;
    g_.xla_program = true;
  }

  // ---- memory

  void mark_outputs(const Computation& entry, const Value& out, const std::vector<Value>& args) {
    // Donated arguments (input_output_alias) hold their outputs; other outputs get their own
    // buffers for the whole step (XLA allocates them before running).
    std::set<std::size_t> donated_leaves;
    for (const auto& a : m_.header)
      if (a.name == "input_output_alias") {
        // { {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }
        std::size_t i = 0;
        while ((i = a.value.find('{', i + 1)) != std::string::npos) {
          const auto close = a.value.find('}', i);
          if (close == std::string::npos) break;
          const auto idx = parse_int_list(a.value.substr(i, close - i));
          if (!idx.empty() && a.value.find(':', close) == close + 1 && entry.root_instruction().shape.is_tuple)
            donated_leaves.insert(static_cast<std::size_t>(entry.root_instruction().shape.leaf_offset(static_cast<int>(idx[0]))));
          i = close;
        }
      }
    std::set<uint32_t> arg_bufs;
    for (const auto& v : args) arg_bufs.insert(v.begin(), v.end());
    std::set<uint32_t> seen;
    const Shape& rs = entry.root_instruction().shape;
    std::vector<const Shape*> ls;
    leaves(rs, ls);
    for (std::size_t j = 0; j < out.size(); ++j) {
      const uint32_t b = out[j];
      if (bufs_[b].constant && !(j < ls.size() && ls[j]->bytes() > 0)) continue;
      if (donated_leaves.count(j)) {
        if (!arg_bufs.count(b)) bufs_[b].constant = true;  // written into the donated argument
        continue;
      }
      MemCategory cat = MemCategory::other;
      if (j < param_cat_.size() && j < args.size() && args[j].size() == 1 && std::abs(bufs_[args[j][0]].bytes - bufs_[b].bytes) < 0.5)
        cat = param_cat_[j];
      if (arg_bufs.count(b) || seen.count(b) || bufs_[b].constant) {
        // Passed through (or repeated): XLA copies it into an output buffer.
        const uint32_t nb = j < ls.size() ? new_buf(*ls[j], cat, fmt::format("output.{}", j), false) : b;
        bufs_[nb].resident = true;
        bufs_[nb].output = true;
        s_.output_bytes += bufs_[nb].bytes;
        continue;
      }
      seen.insert(b);
      bufs_[b].resident = true;
      bufs_[b].output = true;
      bufs_[b].cat = bufs_[b].host ? bufs_[b].cat : cat;
      s_.output_bytes += bufs_[b].bytes;
    }
  }

  // XLA's buffer assignment (buffer_assignment.cc) gives every output its own allocation for
  // the whole execution, then places each temporary, largest first, into an existing
  // allocation that is large enough and whose buffers' live ranges do not overlap it -- which
  // includes the allocation of an output that is only defined later. Temporaries that find
  // no such place go to the heap-simulated temp allocation. The replay mirrors this: outputs
  // are resident, temporaries packed into an output's allocation cost nothing more, and the
  // others are allocated at their first use and freed after their last.
  void finish_memory() {
    struct OutAlloc {
      double bytes;
      int64_t def;                              // first op that writes the output
      std::map<int64_t, int64_t> used;          // first -> last of temporaries placed here
    };
    std::vector<OutAlloc> outs;
    for (const auto& b : bufs_)
      if (b.output && b.resident && !b.constant && !b.host && b.bytes > 0)
        outs.push_back({b.bytes, b.first < 0 ? 0 : b.first, {}});
    std::sort(outs.begin(), outs.end(), [](const OutAlloc& a, const OutAlloc& b) { return a.bytes < b.bytes; });
    std::vector<uint32_t> temps;
    for (uint32_t i = 0; i < bufs_.size(); ++i) {
      const Buf& b = bufs_[i];
      if (!b.constant && !b.resident && !b.host && b.bytes > 0 && b.first >= 0) temps.push_back(i);
    }
    std::stable_sort(temps.begin(), temps.end(), [&](uint32_t a, uint32_t b) {
      if (bufs_[a].bytes != bufs_[b].bytes) return bufs_[a].bytes > bufs_[b].bytes;
      return bufs_[a].first < bufs_[b].first;
    });
    std::vector<char> packed(bufs_.size(), 0);
    for (uint32_t ti : temps) {
      const Buf& t = bufs_[ti];
      const int64_t lo = t.first, hi = std::max(t.first, t.last);
      auto it = std::lower_bound(outs.begin(), outs.end(), t.bytes,
                                 [](const OutAlloc& o, double v) { return o.bytes < v; });
      for (; it != outs.end(); ++it) {
        if (hi >= it->def) continue;  // the output is defined before the temporary dies
        auto nx = it->used.upper_bound(lo);
        if (nx != it->used.end() && nx->first <= hi) continue;
        if (nx != it->used.begin() && std::prev(nx)->second >= lo) continue;
        it->used.emplace(lo, hi);
        packed[ti] = 1;
        ++s_.temps_in_outputs;
        break;
      }
    }
    for (uint32_t i = 0; i < bufs_.size(); ++i) {
      const Buf& b = bufs_[i];
      if (b.constant || b.bytes <= 0) continue;
      if (b.resident) {
        g_.resident.push_back(g_.tensor(b.name, b.cat, b.bytes, b.host));
        continue;
      }
      if (b.first < 0 || packed[i]) continue;  // never used, or inside an output's allocation
      const TensorId t = g_.tensor(b.name, b.cat, b.bytes, b.host);
      g_.ops[static_cast<std::size_t>(b.first)].allocs.push_back(t);
      g_.ops[static_cast<std::size_t>(std::max(b.first, b.last))].frees.push_back(t);
    }
  }
};

ImportResult lower_module(const Module& module, const LowerOptions& options) {
  Lowerer l(module, options);
  return l.run();
}

}  // namespace racksim::workloads::hlo
