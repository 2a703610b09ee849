#include "sim/scenario/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "hardware_models/calibration.h"
#include "hardware_models/collectives.h"
#include "hardware_models/compute_model.h"
#include "hardware_models/system_preset.h"
#include "core/text.h"
#include "core/units.h"
#include "input/files.h"
#include "input/yaml_reader.h"
#include "sim/scenario/limits.h"

namespace racksim::sim {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using namespace racksim::workloads;

constexpr std::size_t kMaxSetKeyChars = 512;

std::vector<SetOverride> parse_set_overrides(const std::vector<std::string>& args, const std::string& option) {
  std::vector<SetOverride> out;
  input::Diagnostics diag;
  if (args.size() > input::limits::kMaxSetOverrides)
    throw input::input_error(option, 0, 0, "",
                             fmt::format("{} overrides, more than racksim's bound of {} (docs/decisions.md, \"Input "
                                         "limits\"): put them in a scenario file",
                                         args.size(), input::limits::kMaxSetOverrides));
  for (const auto& a : args) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      diag.error({option + " " + a, 0, 0}, "", fmt::format("expected KEY.PATH=VALUE (e.g. {} training.parallelism.tp=8)", option),
                 input::DiagnosticKind::malformed_value);
      continue;
    }
    const std::string key = a.substr(0, eq);
    // The longest key a scenario has is under 80 characters; a longer one is echoed three times in its error (a 120 KB
    // key had written 240 KB to stderr). Said without repeating it.
    if (key.size() > kMaxSetKeyChars) {
      std::size_t cut = 60;  // (at a character's first byte: a cut UTF-8 sequence would put an invalid byte on stderr)
      while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
      diag.error({option + " " + key.substr(0, cut) + "...", 0, 0}, "",
                 fmt::format("a key path of {} characters: no scenario key is longer than {}", key.size(), kMaxSetKeyChars));
      continue;
    }
    bool ok = !key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos;
    for (char c : key) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
    if (!ok) {
      diag.error({option + " " + a, 0, 0}, "", fmt::format("'{}' is not a key path (letters, digits, '_', '-' joined by '.')", key));
      continue;
    }
    // The same key twice in one option's list keeps the last, as it always has (a wrapper's `--set k=default "$@"`
    // relies on it), and now says so: it had been silent. (--set then --base-set / --variant-set of one key is compare's
    // layering, not this.)
    if (const auto prev = std::find_if(out.begin(), out.end(), [&](const SetOverride& o) { return o.key_path == key; });
        prev != out.end()) {
      spdlog::warn("{} {}: {} was given before ({} {}={}): the last is used", option, a, key, option, key, prev->value);
      out.erase(prev);
    }
    out.push_back({key, a.substr(eq + 1), option});
  }
  diag.throw_if_any();
  return out;
}

namespace {

template <class T, class U>
void set_if(std::optional<U> v, T& field) {
  if (v) field = static_cast<T>(*v);
}

// A set replaces what stands at its path: a mapping given for a mapping the file has does not merge into it. Said on
// stderr like the loader's other warnings, with the form that changes one entry; at every load that loses keys (a long
// Python session included), except a sweep's points, whose values were said once when the sweep was loaded.
void warn_of_dropped_keys(const SetOverride& s, const std::string& label, const std::vector<std::string>& dropped) {
  if (dropped.empty() || !s.warn_dropped) return;
  spdlog::warn("{}: replaces the whole mapping at {}, so its {} {} no longer set; to change one entry and keep the "
               "others, give {}.KEY its value instead",
               label, s.key_path, fmt::join(dropped, ", "), dropped.size() == 1 ? "is" : "are", s.key_path);
}

void apply_sets(YAML::Node root, const std::vector<SetOverride>& sets, const std::shared_ptr<input::LoadContext>& ctx) {
  for (const auto& s : sets) {
    // Errors about what a set made name where it was given: a file's line and column (a validate case's set:), or
    // the command-line option at its start.
    const bool in_file = !s.where.file.empty();
    const std::string label = in_file ? s.where.file : fmt::format("{} {}={}", s.option, s.key_path, s.value);
    // A command-line set has no line (-1, which its grafts keep): its errors read "--set KEY=VALUE: error: ...", not
    // "--set KEY=VALUE:1:1: error: ..." as if the option were a file.
    const int line = in_file ? s.where.line : -1, column = in_file ? s.where.column : 0;

    const std::string arg = s.key_path + "=" + s.value;
    if (const std::size_t bad = input::first_invalid_utf8(arg); bad != std::string::npos) {
      // (The label would carry the byte: the error names its place instead.)
      ctx->diag->error({s.option, 1, static_cast<int>(bad + 1)}, "",
                       fmt::format("byte 0x{:02X} is not UTF-8: racksim reads UTF-8 text",
                                   static_cast<unsigned char>(arg[bad])));
      continue;
    }
    YAML::Node value;
    try {
      value = YAML::Load(s.value);
    } catch (const YAML::Exception& e) {
      ctx->diag->error({label, line, column}, s.key_path, "malformed value: " + e.msg);
      continue;
    }
    if (!value.IsDefined() || value.IsNull()) value = YAML::Node("");
    if (!input::check_yaml_document(value, "", {label, line, column}, s.key_path, *ctx->diag)) continue;
    warn_of_dropped_keys(s,
                         !s.warn_label.empty() ? s.warn_label
                         : in_file             ? fmt::format("{}:{}:{}: set {}", label, line, column, s.key_path)
                                               : label,
                         input::keys_dropped_by_set(root, s.key_path, value));
    // The mappings this set creates on its way (training.moe where the file has no moe) are its own too: an error
    // about them (an unknown or misspelt key) names the set, not a place in the file that does not exist.
    std::vector<std::string> created;
    if (!input::set_by_path(root, s.key_path, value, &created)) {
      ctx->diag->error({label, line, column}, s.key_path, "cannot set: a part of this path is a value, not a mapping",
                       input::DiagnosticKind::unknown_key);
      continue;
    }
    for (const auto& c : created) ctx->grafts.emplace(c, input::Origin{label, c, line, column});
    ctx->grafts[s.key_path] = {label, s.key_path, line, column};
  }
}

// training.cuda_graph_scope: a list of Megatron-Core's --cuda-graph-scope names (CudaGraphScope in
// megatron/core/transformer/enums.py). moe (drop-and-pad MoE only), mamba and the full-iteration scopes
// are Megatron's too but not modelled: they are refused with the reason.
void parse_cuda_graph_scope(const Node& n, TrainingConfig::CudaGraphScope& g) {
  if (!n.yaml().IsSequence()) {
    n.error(fmt::format("expected a list of Megatron-Core graph scopes (attn, mlp, moe_router, moe_preprocess), got {}",
                        n.describe()),
            input::DiagnosticKind::malformed_value);
    return;
  }
  std::vector<std::string> names;
  for (const auto& [name, field] : kCudaGraphScopeNames) names.emplace_back(name);
  for (std::size_t i = 0; i < n.yaml().size(); ++i) {
    Node e = n.element(i);
    auto s = e.as_string();
    if (!s) continue;
    const auto* known = std::find_if(kCudaGraphScopeNames.begin(), kCudaGraphScopeNames.end(),
                                     [&](const auto& entry) { return *s == entry.first; });
    if (known != kCudaGraphScopeNames.end()) g.*(known->second) = true;
    else if (*s == "moe" || *s == "mamba" || *s == "full_iteration" || *s == "full_iteration_inference" || *s == "full")
      // ("full": older Megatron-Core's name for whole-layer capture, the default when no scope is given.)
      e.error(fmt::format("graph scope '{}' is Megatron-Core's but not modelled by racksim (moe captures drop-and-pad MoE "
                          "layers, mamba Mamba layers, full_iteration and full_iteration_inference a whole iteration; "
                          "for whole-layer graphs leave cuda_graph_scope out); modelled: attn, mlp, moe_router, "
                          "moe_preprocess",
                          *s));
    else e.error(MapReader::unknown_choice_message(*s, names), input::DiagnosticKind::malformed_value);
  }
}

RecomputePolicy parse_recompute(const Node& n, bool moe) {
  RecomputePolicy p;
  if (n.yaml().IsScalar()) {
    const std::string& got = n.yaml().Scalar();
    if (auto m = sim::parse_in(kRecomputeModeNames, got); m && *m != RecomputeMode::names) {
      p.mode = *m;
      return p;
    }
    // MaxText remat_policy and JAX checkpoint-policy names (docs/decisions.md, "Remat policy names").
    if (auto a = recompute_alias(got, moe)) {
      const auto w = n.where();
      if (!a->difference.empty())
        spdlog::warn("{}: {}: '{}' is modelled as {}; {}", input::format_location(w), n.path(), got,
                     a->policy.mode == RecomputeMode::names ? "a save/offload list" : to_string(a->policy.mode),
                     a->difference);
      return a->policy;
    }
    std::vector<std::string> names;
    for (const auto& m : kRecomputeModeNames)
      if (m.value != RecomputeMode::names) names.emplace_back(m.name);
    names.push_back("{save: [...], offload: [...]}");
    std::string msg = MapReader::unknown_choice_message(got, names);
    if (got == "custom")
      msg += "; MaxText's custom policy names each tensor: write it as {save: [...], offload: [...]}";
    else if (auto near = sim::nearest(got, recompute_alias_names(), std::max<std::size_t>(2, got.size() / 3));
             near && msg.find("did you mean") == std::string::npos)
      msg += fmt::format(" (or a MaxText/JAX remat policy name: did you mean '{}'?)", *near);
    n.error(msg, input::DiagnosticKind::malformed_value);
    return p;
  }
  p.mode = RecomputeMode::names;
  MapReader r(n);
  std::vector<std::string> valid = activation_names();
  if (moe) valid.insert(valid.end(), moe_activation_names().begin(), moe_activation_names().end());
  auto read_list = [&](const std::string& key, std::vector<std::string>& out) {
    auto l = r.get(key);
    if (!l) return;
    if (!l->yaml().IsSequence()) {
      l->error(fmt::format("expected a list of activation names, got {}", l->describe()), input::DiagnosticKind::malformed_value);
      return;
    }
    for (std::size_t i = 0; i < l->yaml().size(); ++i) {
      Node e = l->element(i);
      auto s = e.as_string();
      if (!s) continue;
      if (std::find(valid.begin(), valid.end(), *s) == valid.end()) {
        e.error(MapReader::unknown_choice_message(*s, valid), input::DiagnosticKind::malformed_value);
        continue;
      }
      out.push_back(*s);
    }
  };
  read_list("save", p.save);
  read_list("offload", p.offload);
  r.finish();
  for (const auto& s : p.save)
    if (std::find(p.offload.begin(), p.offload.end(), s) != p.offload.end())
      n.error(fmt::format("activation '{}' is both saved and offloaded; name it once", s));
  return p;
}

nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (auto it = n.begin(); it != n.end(); ++it) j[it->first.Scalar()] = yaml_to_json(it->second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : n) j.push_back(yaml_to_json(e));
    return j;
  }
  if (n.IsScalar()) return n.Scalar();
  return nullptr;
}

// Loads a file a scenario key names (a model preset file, a calibration file); errors inside that file carry its own
// file:line:column, so one more names the key that named it (`system.calibration: /etc/passwd` had said only
// "/etc/passwd:1:1: error: expected a mapping").
template <class Load>
void named_file_errors(const Node& key, const char* what, Load&& load) {
  input::Diagnostics& diag = key.diag();
  const std::size_t before = diag.size();
  load();
  for (std::size_t i = before; i < diag.size(); ++i)
    if (diag.list()[i].where.file != key.file()) {
      key.error(fmt::format("the {} file it names has errors (above)", what));
      return;
    }
}

// The system section: the preset, its overrides and the calibration applied.
void parse_system(const Node& sys, const std::string& file, SystemConfig& out) {
  auto ctx = sys.context();
  MapReader r(sys);
  set_if(r.string("preset", true), out.preset);
  set_if(r.integer("gpus", true, 1, hw::kMaxGpus), out.gpus);
  if (auto c = r.string("calibration")) out.calibration = *c;
  auto overrides = r.get("overrides");
  if (overrides) out.overrides = yaml_to_json(overrides->yaml());
  // A report's embedded scenario carries the resolved preset as a record (docs/contracts.md, "Self-describing"), so that
  // the scenario runs again as it is; the preset, its overrides and the calibration decide, not the record.
  if (r.get("resolved"))
    spdlog::warn("{}: system.resolved is a report's record of the resolved preset and is not read; to change the system, "
                 "set system.overrides",
                 file);
  r.finish();
  if (out.preset.empty()) {
    // Given but empty (""): said here, at the key, where it would otherwise surface as a system with no GPU. (A null,
    // `preset:` or `preset: ~`, MapReader has said already: no value.)
    if (sys.yaml().IsMap() && sys.yaml()["preset"] && !sys.yaml()["preset"].IsNull()) {
      const Node given = sys.child("preset");
      hw::load_system_preset("", &given, overrides, ctx, out.spec);
    }
    return;
  }
  Node named = sys.child("preset");
  if (!hw::load_system_preset(out.preset, &named, overrides, ctx, out.spec)) return;
  spdlog::info("{}: system preset {} ({}/{}.yaml){}", file, out.preset, hw::presets_dir(), out.preset,
               overrides ? " with system.overrides" : "");
  if (out.calibration == "none") {  // explicitly uncalibrated
    out.calibration.reset();
    out.calibration_source = "none";
    spdlog::info("{}: no calibration (system.calibration: none): the preset's cited figures", file);
  } else if (out.calibration) {
    out.calibration_source = "scenario";
    named_file_errors(sys.child("calibration"), "calibration", [&] {
      hw::load_and_apply_calibration(*out.calibration, sys.child("calibration"), ctx, out.spec);
    });
  } else if (auto d = hw::default_calibration_for(out.preset, ctx)) {
    // Calibrated by default where a calibration of this preset ships (`calibration: none` turns it off).
    out.calibration = *d;
    out.calibration_source = "default";
    spdlog::info("{}: system.calibration not set: {} (fitted against {}) applied by default; "
                 "`system.calibration: none` for the preset's cited figures",
                 file, *d, out.preset);
    hw::load_and_apply_calibration(*d, named, ctx, out.spec);
  } else {
    spdlog::info("{}: no calibration (none fitted against {}): the preset's cited figures", file, out.preset);
  }
  hw::apply_framework_speed(out.spec);  // last: it scales the launch figures as the preset, overrides and calibration set them
}

Scenario parse_scenario(Node root) {
  Scenario sc;
  sc.file = root.file();
  auto ctx = root.context();
  if (input::refuse_other_kind_of_file(root, "scenario")) return sc;
  MapReader top(root);
  if (!top.ok()) return sc;
  set_if(top.string("name"), sc.name);
  if (sc.name.empty()) sc.name = fs::path(sc.file).stem().string();

  // --- system
  if (auto sys = top.get("system", true)) parse_system(*sys, sc.file, sc.system);

  // --- model
  if (auto mn = top.get("model", true)) {
    if (mn->yaml().IsMap() && mn->yaml()["preset"]) {
      // A preset and inline fields together would be ambiguous: each field is refused with what to do instead. A key
      // that is no model field at all (a typo) is said as an inline model says it, with the nearest field: the fields
      // beside the preset are read as an inline model in a scratch load, and its unknown-key errors kept.
      std::map<std::string, std::string> unknown;  // key -> the inline model's message for it
      {
        YAML::Node fields_only(YAML::NodeType::Map);
        for (auto it = mn->yaml().begin(); it != mn->yaml().end(); ++it)
          if (it->first.IsScalar() && it->first.Scalar() != "preset") fields_only[it->first.Scalar()] = it->second;
        input::LoadSession scratch;
        const Node probe(fields_only, mn->file(), mn->path(), mn->internal_path(), scratch.ctx);
        (void)parse_model(probe, false);
        for (const auto& d : scratch.diag.list())
          if (d.kind == input::DiagnosticKind::unknown_key)
            for (auto it = mn->yaml().begin(); it != mn->yaml().end(); ++it)
              if (it->first.IsScalar() &&
                  d.key_path == (mn->path().empty() ? "" : mn->path() + ".") + it->first.Scalar())
                unknown.emplace(it->first.Scalar(), d.message);
      }
      bool fields = false;
      for (auto it = mn->yaml().begin(); it != mn->yaml().end(); ++it)
        if (it->first.IsScalar() && it->first.Scalar() != "preset") {
          fields = true;
          const std::string key = it->first.Scalar();
          const Node at = it->second.IsNull() ? mn->key_of(key) : mn->child(key);
          if (auto u = unknown.find(key); u != unknown.end()) {
            at.error(u->second + " (and beside a preset no model field is set: write the model inline)",
                     input::DiagnosticKind::unknown_key);
            continue;
          }
          at.error(fmt::format(
              "a model preset's fields are not set beside it (model: {{preset: ...}} takes nothing else): write the model "
              "inline instead, its fields as `racksim models show {}` prints them, with {} changed",
              mn->yaml()["preset"].IsScalar() ? mn->yaml()["preset"].Scalar() : "NAME", key));
        }
      MapReader r(*mn);
      auto preset = r.string("preset", true);
      if (!fields) r.finish();
      if (preset)
        named_file_errors(mn->child("preset"), "model", [&] { load_model_preset(*preset, mn->child("preset"), ctx, sc.model); });
    } else {
      sc.model = parse_model(*mn, false);
      validate_model(sc.model, *mn);
    }
  }

  // --- training
  auto& t = sc.training;
  std::optional<Node> tn = top.get("training", true);
  std::optional<Node> par_node, moe_node, pipe_node, scope_node, tpo_node, fp8_recipe_node, fp8_casts_node, sp_node,
      fp8_wgrad_node, rc_layers_node;
  std::optional<bool> check_for_nan_given;
  if (tn) {
    MapReader r(*tn);
    set_if(r.integer("seq_len", true, 1, 100'000'000), t.seq_len);
    set_if(r.integer("global_batch", true, 1, 1'000'000'000), t.global_batch);
    set_if(r.integer("micro_batch", false, 1, 1'000'000'000), t.micro_batch);
    if (auto p = r.get("precision")) {
      auto s = p->as_string();
      if (s) {
        // The matmul precisions a training step runs in (fp32 and tf32 are the preset's, not a choice).
        // fp16 is Megatron's --fp16: bf16's tensor-core rate, with Megatron's fp16 gradients and loss scaler
        // (TrainingConfig::fp16).
        static constexpr std::array<sim::Dtype, 4> kPrecisions = {sim::Dtype::bf16, sim::Dtype::fp8, sim::Dtype::mxfp8,
                                                                   sim::Dtype::nvfp4};
        auto d = *s == "fp16" ? std::optional<sim::Dtype>(sim::Dtype::bf16) : sim::dtype_from_string(*s);
        if (!d || std::find(kPrecisions.begin(), kPrecisions.end(), *d) == kPrecisions.end()) {
          std::vector<std::string> allowed;
          for (auto a : kPrecisions) allowed.push_back(sim::to_string(a));
          allowed.insert(allowed.begin() + 1, "fp16");
          p->error(MapReader::unknown_choice_message(*s, allowed), input::DiagnosticKind::malformed_value);
        } else {
          t.precision = *d;
          t.fp16 = *s == "fp16";
        }
      }
    }
    if ((par_node = r.get("parallelism"))) {
      MapReader pr(*par_node);
      set_if(pr.integer("tp", false, 1, 1'000'000), t.parallelism.tp);
      set_if(pr.integer("pp", false, 1, 1'000'000), t.parallelism.pp);
      set_if(pr.integer("vp", false, 1, 1'000'000), t.parallelism.vp);
      set_if(pr.integer("cp", false, 1, 1'000'000), t.parallelism.cp);
      set_if(pr.integer("ep", false, 1, 1'000'000), t.parallelism.ep);
      set_if(pr.integer("etp", false, 1, 1'000'000), t.parallelism.etp);
      set_if(pr.integer("dp_shard", false, 1, hw::kMaxGpus), t.parallelism.dp_shard);
      if (auto dp = pr.get("dp")) {
        if (dp->yaml().IsScalar() && dp->yaml().Scalar() == "auto") {
          t.parallelism.dp_auto = true;
        } else if (auto v = dp->as_integer(1, hw::kMaxGpus)) {
          t.parallelism.dp = static_cast<int>(*v);
          t.parallelism.dp_auto = false;
        }
      }
      pr.finish();
    }
    set_if(r.choice("optimizer_sharding", kOptimizerShardingNames), t.optimizer_sharding);
    if (auto rc = r.get("recompute")) t.recompute = parse_recompute(*rc, sc.model.moe.has_value());
    if ((rc_layers_node = r.get("recompute_num_layers")))
      set_if(r.integer("recompute_num_layers", false, 0, 1'000'000), t.recompute_num_layers);  // 0: every layer
    if (auto off = r.get("offload")) {
      MapReader or_(*off);
      set_if(or_.boolean("optimizer"), t.offload_optimizer);
      or_.finish();
    }
    set_if(r.integer("mtp_layers", false, 0, 16), t.mtp_layers);
    set_if(r.choice("adam_moments", kAdamMomentsNames), t.adam_moments);
    set_if(r.choice("attention", kAttentionImplNames), t.attention);
    set_if(r.boolean("cuda_graphs"), t.cuda_graphs);
    if ((scope_node = r.get("cuda_graph_scope"))) parse_cuda_graph_scope(*scope_node, t.cuda_graph_scope);
    set_if(r.boolean("nvls"), t.nvls);
    set_if(r.choice("framework", kFrameworkNames), t.framework);
    set_if(r.boolean("donate_state"), t.donate_state);
    if (auto mc = r.integer("cuda_device_max_connections", false, 1, TrainingConfig::kMaxConnections))
      t.cuda_device_max_connections = static_cast<int>(*mc);
    set_if(r.boolean("scan_layers"), t.scan_layers);
    set_if(r.boolean("fused_qkv"), t.fused_qkv);
    set_if(r.boolean("stacked_layer_params"), t.stacked_layer_params);
    set_if(r.boolean("one_hot_embedding"), t.one_hot_embedding);
    set_if(r.boolean("logits_fp32"), t.logits_fp32);
    set_if(r.boolean("fused_softmax"), t.fused_softmax);
    set_if(r.choice("fsdp_pipeline_gather", TrainingConfig::kFsdpPipelineGatherNames), t.fsdp_pipeline_gather);
    set_if(r.choice("fsdp_grad_reduce", TrainingConfig::kFsdpGradReduceNames), t.fsdp_grad_reduce);
    set_if(r.choice("dp_all_gather_group", TrainingConfig::kDpAllGatherGroupNames), t.dp_all_gather_group);
    if (auto f = r.number("xla_client_mem_fraction", false, TrainingConfig::kMinMemFraction,
                          TrainingConfig::kMaxMemFraction))
      t.xla_client_mem_fraction = *f;
    if (auto xp = r.get("xla_pipelined_collectives")) {
      // true: all three (MaxText's and JAX-Toolbox's GPU recipes); false: none; or a list of them.
      auto& x = t.xla_pipelined;
      if (xp->yaml().IsSequence()) {
        x = {false, false, false};
        static const std::vector<std::string> names = {"all_gather", "reduce_scatter", "all_reduce"};
        for (std::size_t i = 0; i < xp->yaml().size(); ++i) {
          Node e = xp->element(i);
          auto s = e.as_string();
          if (!s) continue;
          if (*s == "all_gather") x.all_gather = true;
          else if (*s == "reduce_scatter") x.reduce_scatter = true;
          else if (*s == "all_reduce") x.all_reduce = true;
          else e.error(MapReader::unknown_choice_message(*s, names), input::DiagnosticKind::malformed_value);
        }
      } else if (auto b = r.boolean("xla_pipelined_collectives")) {
        x = {*b, *b, *b};
      }
    }
    if (auto ct = r.get("xla_combine_threshold")) {
      MapReader cr(*ct);
      auto& x = t.xla_combine_threshold;
      for (auto [key, field] : {std::pair{"all_reduce", &x.all_reduce_bytes}, std::pair{"reduce_scatter", &x.reduce_scatter_bytes},
                                std::pair{"all_gather", &x.all_gather_bytes}}) {
        if (auto v = cr.quantity(key, QuantityKind::bytes)) *field = *v;  // (a negative size is a unit error)
      }
      cr.finish();
    }
    if ((sp_node = r.get("sequence_parallel"))) set_if(r.boolean("sequence_parallel"), t.sequence_parallel);
    if ((tpo_node = r.get("tp_comm_overlap"))) set_if(r.boolean("tp_comm_overlap"), t.tp_comm_overlap);
    // A number, or the word `chance` (the layout's random-routing excess: TrainingConfig::expert_imbalance_chance).
    const auto imbalance = r.get("expert_imbalance");
    const std::string word = imbalance && imbalance->yaml().IsScalar() ? imbalance->yaml().Scalar() : std::string();
    if (word == "chance")
      t.expert_imbalance_chance = true;
    else if (!word.empty() && std::isalpha(static_cast<unsigned char>(word.front())))
      imbalance->error(fmt::format("expected a number of at least 1 or chance, got '{}'{}", word,
                                   sim::nearest(word, {"chance"}, 3) ? "; did you mean 'chance'?" : ""),
                       input::DiagnosticKind::malformed_value);
    else
      set_if(r.number("expert_imbalance", false, 1.0, 1e6), t.expert_imbalance);
    set_if(r.choice("cp_comm", kCpCommNames), t.cp_comm);
    if ((fp8_recipe_node = r.get("fp8_recipe"))) set_if(r.choice("fp8_recipe", kFp8RecipeNames), t.fp8_recipe);
    if ((fp8_casts_node = r.get("fp8_casts"))) set_if(r.choice("fp8_casts", kFp8CastsNames), t.fp8_casts);
    if ((fp8_wgrad_node = r.get("fp8_wgrad"))) set_if(r.boolean("fp8_wgrad"), t.fp8_wgrad);
    set_if(r.boolean("fp8_param_gather"), t.fp8_param_gather);
    set_if(r.boolean("overlap_grad_reduce"), t.overlap_grad_reduce);
    set_if(r.boolean("overlap_param_gather"), t.overlap_param_gather);
    set_if(r.number("attention_dropout", false, 0.0, 1.0), t.attention_dropout);
    set_if(r.number("hidden_dropout", false, 0.0, 1.0), t.hidden_dropout);
    set_if(r.boolean("cross_entropy_fusion"), t.cross_entropy_fusion);
    set_if(r.boolean("grad_reduce_in_bf16"), t.grad_reduce_in_bf16);
    check_for_nan_given = r.boolean("check_for_nan");
    set_if(check_for_nan_given, t.check_for_nan);
    set_if(r.boolean("gradient_accumulation_fusion"), t.gradient_accumulation_fusion);
    set_if(r.choice("transformer_impl", kTransformerImplNames), t.transformer_impl);
    set_if(r.boolean("megatron_nvtx_lookup"), t.megatron_nvtx_lookup);
    if ((moe_node = r.get("moe"))) {
      MapReader mr(*moe_node);
      set_if(mr.choice("dispatcher", kMoeDispatcherNames), t.moe.dispatcher);
      set_if(mr.integer("max_nodes_per_token", false, 0, 1'000'000), t.moe.max_nodes_per_token);
      set_if(mr.boolean("a2a_overlap"), t.moe.a2a_overlap);
      set_if(mr.boolean("router_fusion"), t.moe.router_fusion);
      set_if(mr.boolean("permute_fusion"), t.moe.permute_fusion);
      if (auto v = mr.boolean("dispatch_fp8")) t.moe.dispatch_fp8 = *v;
      set_if(mr.boolean("hybridep_combine_sync"), t.moe.hybridep_combine_sync);
      set_if(mr.boolean("hybridep_dispatch_sync"), t.moe.hybridep_dispatch_sync);
      set_if(mr.boolean("router_padding"), t.moe.router_padding);
      set_if(mr.number("capacity_factor", false, 0.0, 1e3), t.moe.capacity_factor);
      set_if(mr.boolean("pad_to_capacity"), t.moe.pad_to_capacity);
      set_if(mr.boolean("force_load_balancing"), t.moe.force_load_balancing);
      mr.finish();
    }
    if ((pipe_node = r.get("pipeline"))) {
      MapReader plr(*pipe_node);
      set_if(plr.integer("first_stage_layers", false, 0, 1'000'000), t.pipeline.first_stage_layers);
      set_if(plr.integer("last_stage_layers", false, 0, 1'000'000), t.pipeline.last_stage_layers);
      set_if(plr.integer("first_rank_layers", false, 0, 1'000'000), t.pipeline.first_rank_layers);
      set_if(plr.integer("last_rank_layers", false, 0, 1'000'000), t.pipeline.last_rank_layers);
      set_if(plr.integer("microbatch_group_size", false, 1, 1'000'000), t.pipeline.microbatch_group_size);
      plr.finish();
    }
    r.finish();
  }
  top.finish();

  // --- cross-field checks (only when the parts themselves were valid)
  if (!ctx->diag->empty() || !tn) return sc;
  auto& p = t.parallelism;
  const Node at_par = par_node ? *par_node : tn->child("parallelism");
  const Node gpus_node = root.child("system").child("gpus");
  const int64_t model_parallel = static_cast<int64_t>(p.tp) * p.pp * p.cp;
  if (sc.system.gpus % model_parallel != 0) {
    gpus_node.error(fmt::format("gpus ({}) must be a multiple of tp·pp·cp = {}·{}·{} = {}", sc.system.gpus, p.tp,
                                p.pp, p.cp, model_parallel));
  } else if (p.dp_auto) {
    p.dp = static_cast<int>(sc.system.gpus / model_parallel);
  } else if (model_parallel * p.dp != sc.system.gpus) {
    at_par.child("dp").error(fmt::format("tp·pp·cp·dp = {}·{}·{}·{} = {} but system.gpus is {}", p.tp, p.pp, p.cp, p.dp,
                                         model_parallel * p.dp, sc.system.gpus));
  }
  const auto& m = sc.model;
  if (m.heads > 0 && m.heads % p.tp != 0)
    at_par.child("tp").error(fmt::format("tp ({}) must divide the model's heads ({})", p.tp, m.heads));
  else if (m.kv_heads > 0 && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0)
    at_par.child("tp").error(fmt::format("tp ({}) and kv_heads ({}) must divide one another", p.tp, m.kv_heads));
  if (m.ffn_hidden % p.tp != 0)
    at_par.child("tp").error(fmt::format("tp ({}) must divide ffn_hidden ({})", p.tp, m.ffn_hidden));
  // Virtual stages without decoder layers exist only at the ends, when the uneven split says so.
  const int empty_ends = (t.pipeline.first_stage_layers == 0) + (t.pipeline.last_stage_layers == 0);
  if (static_cast<int64_t>(p.pp) * p.vp > static_cast<int64_t>(m.layers) + empty_ends)
    at_par.child("pp").error(fmt::format("pp·vp = {}·{} exceeds the model's {} layers", p.pp, p.vp, m.layers));
  if (p.vp > 1 && p.pp == 1) at_par.child("vp").error("vp > 1 (interleaved stages) needs pp > 1");
  if (t.seq_len % p.cp != 0 || (p.cp > 1 && t.seq_len % (2 * p.cp) != 0))
    at_par.child("cp").error(fmt::format("seq_len ({}) must be divisible by 2·cp = {} (load-balanced ring attention)",
                                         t.seq_len, 2 * p.cp));
  // Megatron's sequence-parallel scatter of the [s/cp, b, h] activations asserts "First dimension of the tensor should
  // be divisible by tensor parallel size" (megatron/core/tensor_parallel/mappings.py at d98e8a64).
  if (t.framework == Framework::megatron && t.sequence_parallel && p.tp > 1 && p.cp > 0 && t.seq_len % p.cp == 0 &&
      (t.seq_len / p.cp) % p.tp != 0 && m.heads % p.tp == 0)  // (a tp that splits no heads is said above)
    tn->child("seq_len").error(fmt::format("seq_len/cp = {}/{} must be divisible by tp ({}) under sequence parallelism "
                                           "(Megatron scatters the sequence over the tensor-parallel ranks)",
                                           t.seq_len, p.cp, p.tp));
  // MaxText shards every expert's FFN ('mlp') over the tensor axis: in JAX mode the expert-tensor-parallel group is
  // the tensor group.
  if (t.framework == Framework::jax && m.moe && p.etp > 0 && p.etp != p.tp)
    at_par.child("etp").error(fmt::format("in JAX mode the experts' FFN is sharded over the tensor axis, as MaxText "
                                          "shards it ('mlp' on 'tensor'): etp must equal tp ({}), or be left out",
                                          p.tp));
  if (p.ep > 1) {
    if (!m.moe) at_par.child("ep").error("ep > 1 needs a mixture-of-experts model (model.moe)");
    else if (m.moe->experts % p.ep != 0)
      at_par.child("ep").error(fmt::format("ep ({}) must divide the model's experts ({})", p.ep, m.moe->experts));
  }
  if (p.etp > 0 && !m.moe) at_par.child("etp").error("etp needs a mixture-of-experts model (model.moe)");
  // Node-limited routing must leave the top-k distinct experts to choose from: the domains a token may reach hold
  // experts·M/D of them (an EP group of ep ranks over D NVLink domains, ep/D per domain, as its ranks pack).
  if (m.moe && t.moe.max_nodes_per_token > 0 && p.ep > 1 && m.moe->experts % p.ep == 0 && moe_node) {
    const int64_t per_domain = std::clamp<int64_t>(sc.system.spec.scale_up.domain_size / std::max(1, p.expert_tp()), 1, p.ep);
    const int64_t domains = (p.ep + per_domain - 1) / per_domain;
    const int64_t reach = std::min<int64_t>(t.moe.max_nodes_per_token, domains);
    const double reachable = static_cast<double>(m.moe->experts) * reach / domains;
    if (m.moe->top_k > reachable)
      moe_node->child("max_nodes_per_token")
          .error(fmt::format("max_nodes_per_token {}: a token may reach {} of its EP group's {} NVLink domains, {:g} of the "
                             "{} experts, fewer than its top-{} distinct ones: raise it or lower top_k",
                             t.moe.max_nodes_per_token, reach, domains, reachable, m.moe->experts, m.moe->top_k));
  }

  if (m.moe && t.expert_imbalance > 1.0 && m.moe->top_k > 0 && m.moe->experts % p.ep == 0) {
    // The busiest EP rank receives at most min(top_k, experts/ep) copies of every token of its EP group (one per
    // expert it hosts), against top_k/ep on average: X <= ep·min(top_k, E/ep)/top_k. With ep 1 that is 1 (a rank
    // runs all copies of its own tokens, balanced or not).
    const double x_max = static_cast<double>(p.ep) * std::min(m.moe->top_k, m.moe->experts / p.ep) / m.moe->top_k;
    if (t.expert_imbalance > x_max + 1e-9)
      tn->child("expert_imbalance")
          .error(fmt::format("{:g} is more than the busiest expert-parallel rank can receive: ep·min(top_k, experts/ep)/"
                             "top_k = {}·min({}, {}/{})/{} = {:g}",
                             t.expert_imbalance, p.ep, m.moe->top_k, m.moe->experts, p.ep, m.moe->top_k, x_max));
  }
  if (p.dp_shard > 0 && p.dp > 0) {
    // Hybrid sharding: ZeRO/FSDP inside a shard group of dp_shard ranks, replicated over dp/dp_shard groups.
    if (t.optimizer_sharding == OptimizerSharding::none)
      at_par.child("dp_shard").error(
          "dp_shard (hybrid sharding) needs sharded state: set training.optimizer_sharding to fsdp (HSDP), zero1 or "
          "zero2 (distributed optimizer instances); with none every data-parallel rank holds the whole state");
    else if (p.dp % p.dp_shard != 0)
      at_par.child("dp_shard").error(fmt::format("dp_shard ({}) must divide dp ({})", p.dp_shard, p.dp));
    else if (m.moe && p.expert_dp() % (p.dp / p.dp_shard) != 0)
      // The replica groups stride over whole shard groups in both of Megatron's rank grids.
      at_par.child("dp_shard").error(fmt::format(
          "dp / dp_shard = {} replica groups must divide the expert-data-parallel group tp·cp·dp/(ep·etp) = {}",
          p.dp / p.dp_shard, p.expert_dp()));
  }
  if (m.moe && p.dp > 0) {
    // Megatron folds the expert grid etp·ep·edp onto the tp·cp·dp ranks of each stage.
    const int64_t stage = static_cast<int64_t>(p.tp) * p.cp * p.dp, expert_mp = static_cast<int64_t>(p.ep) * p.expert_tp();
    if (stage % expert_mp != 0)
      at_par.child(p.etp > 0 ? "etp" : "ep")
          .error(fmt::format("ep·etp = {}·{} = {} must divide tp·cp·dp = {}·{}·{} = {}", p.ep, p.expert_tp(), expert_mp,
                             p.tp, p.cp, p.dp, stage));
    if (m.moe->expert_ffn_hidden % p.expert_tp() != 0)
      at_par.child(p.etp > 0 ? "etp" : "tp")
          .error(fmt::format("etp ({}) must divide the experts' ffn hidden size ({})", p.expert_tp(),
                             m.moe->expert_ffn_hidden));
  }
  // Megatron-LM asserts --sequence-parallel under --tp-comm-overlap (arguments.py): Transformer Engine's
  // userbuffers overlap the sequence-parallel all-gathers and reduce-scatters, and there are none without it.
  if (tpo_node && t.tp_comm_overlap && !t.sequence_parallel && p.tp > 1 && t.framework != Framework::jax)
    tpo_node->error("tp_comm_overlap needs sequence_parallel: true (Megatron-LM refuses --tp-comm-overlap without "
                    "--sequence-parallel: Transformer Engine's userbuffers overlap the sequence-parallel all-gathers "
                    "and reduce-scatters)");
  // Megatron-Core's MoELayer raises a ValueError in training when tensor parallelism runs without sequence
  // parallelism (moe_layer.py at d98e8a64: "During training, performance may degrade if MoE and tensor parallelism
  // are enabled without also enabling sequence parallelism."): each TP rank would route every token.
  if (sp_node && m.moe && !t.sequence_parallel && p.tp > 1 && t.framework != Framework::jax)
    sp_node->error(fmt::format("an MoE model with tp = {} needs sequence_parallel: true in Megatron mode (Megatron-Core's "
                               "MoELayer refuses to train MoE under tensor parallelism without sequence parallelism)",
                               p.tp));
  if (scope_node && t.cuda_graph_scope.any()) {
    const auto& g = t.cuda_graph_scope;
    if (!t.cuda_graphs)
      scope_node->error("cuda_graph_scope selects what Transformer Engine's CUDA graphs capture: it needs cuda_graphs: true");
    else if (t.framework == Framework::jax)
      scope_node->error("cuda_graph_scope is Megatron-Core's (--cuda-graph-scope); in JAX mode XLA decides what runs as "
                        "command buffers (training.cuda_graphs alone)");
    else if (g.moe_preprocess && !g.moe_router)
      scope_node->error("moe_preprocess needs moe_router in the same scope (Megatron-Core: the preprocessing is captured "
                        "after the router)");
    else if ((g.moe_router || g.moe_preprocess) && !m.moe)
      scope_node->error("moe_router / moe_preprocess capture parts of MoE layers: the model has none (model.moe)");
    else if (t.recompute.mode == RecomputeMode::full)
      scope_node->error("cuda_graph_scope with recompute: full: Megatron-LM refuses CUDA graphs under full recompute "
                        "(arguments.py: recompute_granularity must not be full when CUDA Graphs are enabled)");
  }
  // (Beside a recompute other than full the key is ignored with a note, so that a sweep over training.recompute keeps
  // its base's block count.)
  if (rc_layers_node && t.recompute_num_layers > 0 && t.framework == Framework::jax)
    rc_layers_node->error("recompute_num_layers is Megatron's --recompute-method block --recompute-num-layers; in JAX "
                          "mode a remat policy applies to every layer (training.recompute); leave it out or set 0");
  if (t.mtp_layers > 0 && t.framework == Framework::jax)
    tn->child("mtp_layers").error("mtp_layers is modelled as Megatron-Core runs it (--mtp-num-layers); in JAX mode "
                                  "(MaxText's mtp_num_layers) it is not: set training.mtp_layers: 0");
  if (t.fp16 && t.framework == Framework::jax)
    tn->child("precision").error("precision fp16 is modelled as Megatron-LM runs it (--fp16: fp16 gradients and a dynamic "
                                 "loss scaler); JAX mode (MaxText, Pax) trains bf16: use precision bf16, or "
                                 "training.framework: megatron");
  // Megatron turns its NaN checks off under --fp16's dynamic loss scaler (TrainingConfig::check_for_nan).
  if (t.fp16 && !check_for_nan_given) t.check_for_nan = false;
  if (t.adam_moments != AdamMoments::fp32 && t.framework == Framework::jax)
    tn->child("adam_moments").error("adam_moments is Megatron-Core's precision-aware optimizer (--exp-avg-dtype, "
                                    "--exp-avg-sq-dtype); in JAX mode (optax's mu_dtype) it is not modelled: set "
                                    "training.adam_moments: fp32");
  if (moe_node && !m.moe) moe_node->error("training.moe needs a mixture-of-experts model (model.moe)");
  // Likewise the routing's imbalance (it had been taken and changed nothing on a dense model). 1, the default, may stay
  // in a base that a sweep runs over dense and MoE models.
  if (!m.moe && tn && tn->yaml().IsMap() && tn->yaml()["expert_imbalance"] &&
      (t.expert_imbalance != 1.0 || t.expert_imbalance_chance))
    tn->child("expert_imbalance").error("expert_imbalance is the MoE routing's load on the busiest expert rank: it needs a "
                                        "mixture-of-experts model (model.moe); drop it");
  if (moe_node && m.moe) {
    if (t.moe.a2a_overlap && p.ep < 2)
      moe_node->child("a2a_overlap").error("a2a_overlap overlaps the expert-parallel exchanges: it needs ep > 1");
    // Megatron-Core's (and DualPipe's) overlap pairs one micro-batch's exchanges with another's compute; XLA
    // schedules a step's all-to-alls inside its own program (the latency-hiding scheduler) and MaxText's GPU
    // configurations pair no micro-batches (its DeepSeek batch-split schedule is written for TPUs), so JAX mode has
    // nothing to switch on.
    if (t.moe.a2a_overlap && t.framework == Framework::jax)
      moe_node->child("a2a_overlap")
          .error("a2a_overlap is Megatron-Core's EP overlap (--overlap-moe-expert-parallel-comm), pairing one micro-batch's "
                 "exchanges with another's compute; in JAX mode XLA schedules the all-to-alls within the step and "
                 "MaxText's GPU configurations pair no micro-batches: leave it out");
    if (t.moe.a2a_overlap && t.framework == Framework::megatron && t.max_connections() == 1)
      tn->child("cuda_device_max_connections")
          .error("Megatron-Core's EP all-to-all overlap (training.moe.a2a_overlap) requires CUDA_DEVICE_MAX_CONNECTIONS > 1 "
                 "(megatron/core/transformer/moe/README.md; Megatron-MoE-ModelZoo exports 32): set "
                 "training.cuda_device_max_connections above 1, or leave it out");
    // DeepEP and HybridEP are Megatron-Core's (PyTorch) dispatchers; MaxText dispatches through XLA's collectives.
    if (t.moe.hierarchical() && t.framework == Framework::jax)
      moe_node->child("dispatcher").error(fmt::format(
          "{} is Megatron-Core's dispatcher (a PyTorch library); in JAX mode XLA exchanges the tokens with its own "
          "collectives: use alltoall, or training.framework: megatron",
          to_string(t.moe.dispatcher)));
    // Megatron-Core's flex dispatcher asserts "Flex token dispatcher requires TPxEP > 1" (token_dispatcher.py at
    // Megatron-LM@1e057005 and 932b7674; its TP is the experts' etp): with ep 1 there is nothing to exchange.
    if (t.moe.hierarchical() && t.framework == Framework::megatron && p.ep * p.expert_tp() <= 1)
      moe_node->child("dispatcher").error(fmt::format(
          "the {} dispatcher needs ep x etp > 1 (Megatron-Core asserts \"Flex token dispatcher requires TPxEP > 1\"); "
          "with ep 1 no token leaves its GPU: use alltoall",
          to_string(t.moe.dispatcher)));
    // DeepEP/HybridEP (Megatron's flex dispatcher) exchange over one tp x ep group with no separate etp
    // collectives; racksim models them over the EP group with etp 1 only.
    if (t.moe.hierarchical() && p.expert_tp() > 1)
      moe_node->child("dispatcher").error(fmt::format(
          "the deepep/hybridep dispatcher is modelled with expert tensor parallelism 1 only; set "
          "training.parallelism.etp: 1 (etp is {})",
          p.expert_tp()));
    // DeepEP's normal mode has configs for some EP sizes only and asserts on the others (deep_ep/buffers/legacy.py).
    if (t.moe.dispatcher == MoeDispatcher::deepep && p.ep > 1 && !hw::deepep_supports_ep(p.ep))
      moe_node->child("dispatcher").error(fmt::format(
          "DeepEP has no configuration for EP {} (its dispatch and combine configs cover 2, 4, 8, 16, 24, 32, 48, 64, "
          "96, 128, 144 and 160 ranks: 'Unsupported number of EP ranks'); choose one of those or another dispatcher",
          p.ep));
    // An fp8 dispatch is modelled through DeepEP only, DeepSeek-V3's own FP8 dispatch (its training framework, which
    // Megatron mode stands in for). Megatron-Core itself dispatches bf16 through all three (fused_a2a.py at d98e8a64
    // hands DeepEP the bf16 hidden states; HybridEP asserts "HybridEP dispatcher does not support fp8 dispatch now";
    // alltoall has no fp8 path; its one fp8 dispatch is the ncclep backend's moe_dispatch_fwd_dtype).
    if (t.framework == Framework::megatron && t.moe.dispatch_fp8.value_or(false) &&
        t.moe.dispatcher != MoeDispatcher::deepep)
      moe_node->child("dispatch_fp8").error(fmt::format(
          "dispatch_fp8 with the {} dispatcher: an fp8 dispatch is modelled through DeepEP only (DeepSeek-V3's own); "
          "Megatron-Core's HybridEP refuses it (\"HybridEP dispatcher does not support fp8 dispatch now\") and its "
          "alltoall has no fp8 path; use dispatcher: deepep or drop dispatch_fp8",
          to_string(t.moe.dispatcher)));
    // HybridEP's host waits, one version's or another's: properties of HybridEP as Megatron-Core calls it.
    for (const auto& [key, set, call] : {std::tuple{"hybridep_combine_sync", t.moe.hybridep_combine_sync, "combine"},
                                         std::tuple{"hybridep_dispatch_sync", t.moe.hybridep_dispatch_sync, "dispatch"}})
      if (set && (t.framework != Framework::megatron || t.moe.dispatcher != MoeDispatcher::hybridep))
        moe_node->child(key).error(fmt::format(
            "{} is a property of HybridEP's {} as Megatron-Core calls it: it needs dispatcher: hybridep in Megatron "
            "mode (here {} in {} mode); drop it",
            key, call, to_string(t.moe.dispatcher), t.framework == Framework::jax ? "JAX" : "Megatron"));
    if (t.moe.capacity_factor > 0 && t.framework != Framework::megatron)
      moe_node->child("capacity_factor").error(
          "capacity_factor is Megatron-Core's token dropping (--moe-expert-capacity-factor); in JAX mode MaxText drops "
          "tokens through a different dispatch (einsum masks over [experts, capacity]), which racksim does not model; "
          "drop it (every token then reaches its top-k experts)");
    if (t.moe.force_load_balancing && (t.expert_imbalance != 1.0 || t.expert_imbalance_chance))
      moe_node->child("force_load_balancing")
          .error(fmt::format("force_load_balancing routes on random logits, which sets the busiest rank's load; "
                             "training.expert_imbalance {} says otherwise: drop one of them",
                             t.expert_imbalance_chance ? std::string("chance") : fmt::format("{:g}", t.expert_imbalance)));
    if (t.moe.pad_to_capacity && t.moe.dispatcher == MoeDispatcher::deepep)
      moe_node->child("pad_to_capacity").error(
          "pad_to_capacity with dispatcher: deepep: Megatron-Core refuses it (\"Flex token dispatcher with deepep backend "
          "does not support moe_pad_expert_input_to_capacity\", transformer_config.py); use alltoall or hybridep, or drop it");
    // Padded, every expert must take exactly C of a rank's tokens; a capacity above them cannot be filled (Megatron's
    // router then maps every token to every expert, and its permutation's per-expert view of C rows fails).
    if (t.moe.pad_to_capacity && t.moe.capacity_factor > 0 && m.moe->experts > 0 && p.cp > 0 && p.tp > 0) {
      const double tokens = static_cast<double>(t.micro_batch) * t.seq_len / p.cp / (t.sequence_parallel ? p.tp : 1);
      const double capacity = t.moe.expert_capacity(tokens, m.moe->top_k, m.moe->experts);
      if (capacity > tokens)
        moe_node->child("capacity_factor")
            .error(fmt::format("capacity {:g} (ceil({:g} tokens x top-{} / {} experts x {:g})) exceeds the {:g} tokens a rank "
                               "routes: padded to capacity, an expert cannot take more than every token (Megatron's "
                               "permutation then fails); lower it to at most experts/top_k = {:g}, or drop pad_to_capacity",
                               capacity, tokens, m.moe->top_k, m.moe->experts, t.moe.capacity_factor, tokens,
                               static_cast<double>(m.moe->experts) / m.moe->top_k));
    }
    if (t.moe.pad_to_capacity && t.moe.capacity_factor <= 0)
      moe_node->child("pad_to_capacity").error(
          "pad_to_capacity pads every expert's tokens to its capacity, which needs training.moe.capacity_factor > 0 "
          "(Megatron-LM: --moe-pad-expert-input-to-capacity requires --moe-expert-capacity-factor); set one or drop it");
    if (t.moe.router_padding && (t.framework != Framework::megatron || !t.fp8_class()))
      moe_node->child("router_padding").error(fmt::format(
          "router_padding is Megatron-Core's --moe-router-padding-for-quantization, which pads to the alignment of "
          "quantized expert GEMMs: it needs precision fp8, mxfp8 or nvfp4 in Megatron mode (here {} in {} mode; "
          "Megatron-LM: \"fp8/fp4 must be specified when moe_router_padding_for_quantization is True\"); drop it",
          t.precision_name(), t.framework == Framework::jax ? "JAX" : "Megatron"));
  }
  if (tn && tn->yaml().IsMap()) {
    // Given, and not at its default: a report echoes some of these whatever the mode (donate_state, scan_layers, the
    // overlap switches), and its scenario run again must not grow notes.
    const TrainingConfig d{};
    const std::array<std::pair<const char*, bool>, 10> jax_only = {{
        {"donate_state", t.donate_state != d.donate_state},
        {"scan_layers", t.scan_layers != d.scan_layers},
        {"fused_qkv", t.fused_qkv != d.fused_qkv},
        {"stacked_layer_params", t.stacked_layer_params.has_value()},
        {"one_hot_embedding", t.one_hot_embedding != d.one_hot_embedding},
        {"logits_fp32", t.logits_fp32 != d.logits_fp32},
        {"fused_softmax", t.fused_softmax != d.fused_softmax},
        {"xla_client_mem_fraction", t.xla_client_mem_fraction.has_value()},
        {"xla_pipelined_collectives", !(t.xla_pipelined == d.xla_pipelined)},
        {"xla_combine_threshold", !(t.xla_combine_threshold == d.xla_combine_threshold)},
    }};
    const std::array<std::pair<const char*, bool>, 8> megatron_only = {{
        {"tp_comm_overlap", t.tp_comm_overlap != d.tp_comm_overlap},
        {"gradient_accumulation_fusion", t.gradient_accumulation_fusion != d.gradient_accumulation_fusion},
        {"transformer_impl", t.transformer_impl != d.transformer_impl},
        {"overlap_grad_reduce", t.overlap_grad_reduce != d.overlap_grad_reduce},
        {"overlap_param_gather", t.overlap_param_gather != d.overlap_param_gather},
        {"check_for_nan", t.check_for_nan != d.check_for_nan},
        {"megatron_nvtx_lookup", t.megatron_nvtx_lookup != d.megatron_nvtx_lookup},
        {"grad_reduce_in_bf16", t.grad_reduce_in_bf16 != d.grad_reduce_in_bf16},
    }};
    const YAML::Node& given = tn->yaml();
    const auto note_given = [&](const auto& keys) {
      for (const auto& [key, changed] : keys)
        if (changed && given[key].IsDefined()) t.other_framework_keys.emplace_back(key);
    };
    if (t.framework == Framework::jax) note_given(megatron_only);
    else note_given(jax_only);
  }
  if (t.framework == Framework::jax && t.scan_layers && !t.layer_params_stacked())
    tn->child("stacked_layer_params")
        .error("false is one array per layer (MaxText's scan_layers: false); lax.scan runs over arrays stacked over "
               "the layers: set scan_layers: false, or drop stacked_layer_params");
  if (t.fp8_param_gather) {
    const Node at = tn->child("fp8_param_gather");
    if (t.framework == Framework::jax)
      at.error("fp8_param_gather is Megatron's --fp8-param-gather; in JAX mode the gathers follow the precision");
    else if (!t.fp8_class())
      at.error(fmt::format("fp8_param_gather needs an fp8-class precision (fp8, mxfp8, nvfp4); precision is {}",
                           t.precision_name()));
    else if (t.optimizer_sharding == OptimizerSharding::none)
      at.error("fp8_param_gather needs sharded parameters (Megatron-LM: '--fp8-param-gather only supported with "
               "distributed optimizer, torch fsdp2, megatron fsdp'): set optimizer_sharding");
  }
  // Megatron-LM gathers parameters early only beside an early gradient reduction (arguments.py at d98e8a64: "Must use
  // --overlap-param-gather with --overlap-grad-reduce"). Without a sharded optimizer there is no gather: a note.
  if (t.framework == Framework::megatron && t.overlap_param_gather && !t.overlap_grad_reduce &&
      t.optimizer_sharding != OptimizerSharding::none)
    tn->child("overlap_param_gather")
        .error("overlap_param_gather needs overlap_grad_reduce (Megatron-LM: 'Must use --overlap-param-gather with "
               "--overlap-grad-reduce'): set training.overlap_grad_reduce: true, or leave overlap_param_gather out");
  if (t.pipeline.by_rank()) {
    const Node at_pipe = pipe_node ? *pipe_node : tn->child("pipeline");
    const int first = t.pipeline.first_rank_layers, last = t.pipeline.last_rank_layers;
    const int64_t ends = static_cast<int64_t>(std::max(first, 0)) + std::max(last, 0);
    const int middle_ranks = p.pp - (first >= 0) - (last >= 0);
    if (t.pipeline.by_stage()) {
      at_pipe.error("first_rank_layers / last_rank_layers (Megatron's --decoder-first/last-pipeline-num-layers, a whole "
                    "pipeline rank) and first_stage_layers / last_stage_layers (one virtual stage) state the same split "
                    "two ways: give one pair");
    } else if (p.pp < 2) {
      at_pipe.error("first_rank_layers / last_rank_layers need pp > 1");
    } else if (first == 0 || last == 0) {
      at_pipe.error("first_rank_layers / last_rank_layers must be at least 1 (Megatron-LM: "
                    "'num_layers_in_first_pipeline_stage must be larger than 0'); a stage of only the embedding or the "
                    "loss is first_stage_layers / last_stage_layers: 0");
    } else if (ends > m.layers || (middle_ranks > 0 && ((m.layers - ends) % middle_ranks != 0 || m.layers - ends < middle_ranks)) ||
               (middle_ranks == 0 && ends != m.layers)) {
      at_pipe.error(fmt::format("the model's {} layers less the first and last ranks' {} must split evenly over the "
                                "other {} pipeline ranks, at least one each (Megatron-LM: 'the left over layers must be "
                                "divisible by left over stages')",
                                m.layers, ends, middle_ranks));
    } else {
      const int64_t middle = middle_ranks > 0 ? (m.layers - ends) / middle_ranks : 0;
      for (const auto& [what, n] : {std::pair<const char*, int64_t>{"first rank's", first}, {"last rank's", last},
                                    {"other ranks'", middle_ranks > 0 ? middle : -1}})
        if (n >= 0 && n % p.vp != 0) {
          at_pipe.error(fmt::format("the {} {} layers must split evenly over each rank's vp = {} virtual stages (Megatron-LM: "
                                    "'num_layers_per_pipeline_rank should be divisible by vp_size')",
                                    what, n, p.vp));
          break;
        }
    }
  } else if (t.pipeline.uneven()) {
    const Node at_pipe = pipe_node ? *pipe_node : tn->child("pipeline");
    const int first = t.pipeline.first_stage_layers, last = t.pipeline.last_stage_layers;
    const int64_t stages = static_cast<int64_t>(p.pp) * p.vp;
    const int64_t ends = static_cast<int64_t>(std::max(first, 0)) + std::max(last, 0);
    const int64_t middle_stages = stages - (first >= 0) - (last >= 0);
    if (p.pp < 2) at_pipe.error("first_stage_layers / last_stage_layers need pp > 1");
    else if (ends > m.layers || (middle_stages > 0 && ((m.layers - ends) % middle_stages != 0 || m.layers - ends < middle_stages)) ||
             (middle_stages == 0 && ends != m.layers))
      at_pipe.error(fmt::format("the model's {} layers less the first and last stages' {} must split evenly over the "
                                "other {} virtual stages (pp·vp = {})",
                                m.layers, ends, middle_stages, stages));
  }
  if (p.dp > 0) {
    const int64_t per_step = static_cast<int64_t>(t.micro_batch) * p.dp;
    if (t.global_batch % per_step != 0)
      tn->child("global_batch")
          .error(fmt::format("global_batch ({}) must be a multiple of micro_batch·dp = {}·{} = {}", t.global_batch,
                             t.micro_batch, p.dp, per_step));
  }
  // The interleaved schedule's micro-batch groups, as Megatron checks them (schedules.py at d98e8a64,
  // forward_backward_pipelining_with_interleaving): N in [pp, micro-steps], the last group empty or of at least pp
  // (a shorter one leaves dependency bubbles, and Megatron refuses it). With N = pp, Megatron's default, that is
  // micro-steps divisible by pp.
  if (p.vp > 1 && p.dp > 0 && t.global_batch % (static_cast<int64_t>(t.micro_batch) * p.dp) == 0) {
    const int m_steps = t.micro_steps(), n = t.pipeline.group(p.pp);
    auto at_group = [&] { return (pipe_node ? *pipe_node : tn->child("pipeline")).child("microbatch_group_size"); };
    if (t.pipeline.microbatch_group_size <= 0) {
      if (m_steps % p.pp != 0)
        at_par.child("vp").error(fmt::format("the interleaved schedule (vp > 1) needs micro-steps ({}) divisible by pp "
                                             "({}), or training.pipeline.microbatch_group_size N with the last group "
                                             "(micro-steps mod N) empty or of at least pp",
                                             m_steps, p.pp));
    } else if (n < p.pp || n > m_steps) {
      at_group().error(fmt::format("the micro-batches per group must lie between pp ({}) and the micro-steps ({}), as "
                                   "Megatron's --microbatch-group-size-per-virtual-pipeline-stage",
                                   p.pp, m_steps));
    } else if (m_steps % n != 0 && m_steps % n < p.pp) {
      at_group().error(fmt::format("the last group holds micro-steps mod N = {} mod {} = {} micro-batches, fewer than "
                                   "pp ({}): Megatron refuses it (dependency bubbles); choose N dividing {} or leaving "
                                   "at least {}",
                                   m_steps, n, m_steps % n, p.pp, m_steps, p.pp));
    }
  }
  if (p.cp > 1 && t.cp_comm == CpComm::a2a && m.heads > 0 &&
      (m.heads % (static_cast<int64_t>(p.tp) * p.cp) != 0 || m.kv_heads < p.tp || (m.kv_heads / p.tp) % p.cp != 0))
    tn->child("cp_comm").error(fmt::format("cp_comm a2a splits the query and the key/value heads of each tp rank over cp: "
                                           "tp·cp = {}·{} must divide the model's heads ({}) and its kv_heads ({})",
                                           p.tp, p.cp, m.heads, m.kv_heads));
  if (p.cp > 1 && t.attention == AttentionImpl::materialized)
    at_par.child("cp").error("context parallelism (ring attention) needs attention: flash");
  if (!sc.system.spec.gpu.peak_dense_flops_per_s.count(t.precision))
    tn->child("precision").error(fmt::format("{} ({}) has no {} tensor cores", sc.system.spec.name,
                                             sc.system.spec.gpu.model, t.precision_name()));
  // delayed, the default, changes nothing and may stay in a base that a sweep runs at other precisions.
  if (fp8_recipe_node && t.precision != sim::Dtype::fp8 && t.fp8_recipe != Fp8Recipe::delayed)
    fp8_recipe_node->error(fmt::format("fp8_recipe {} applies to precision fp8 (here {}): mxfp8 and nvfp4 scale their "
                                       "blocks in the tensor cores, bf16 has no scales",
                                       to_string(t.fp8_recipe), t.precision_name()));
  else if (t.fp8_recipe == Fp8Recipe::blockwise) hw::apply_fp8_blockwise_recipe(sc.system.spec);
  // flax's FP8 dot scales per tensor from its amax history (delayed scaling) and runs all three GEMMs in fp8.
  if (fp8_casts_node && t.fp8_casts == Fp8Casts::xla &&
      (t.framework != Framework::jax || t.precision != sim::Dtype::fp8 || t.fp8_recipe != Fp8Recipe::delayed ||
       !t.fp8_wgrad))
    fp8_casts_node->error(fmt::format(
        "fp8_casts xla is flax's FP8 dot as XLA lowers it (MaxText's fp8 and fp8_gpu): it needs framework jax, precision "
        "fp8, fp8_recipe delayed and fp8_wgrad true (here {}, {}, {}, {})",
        to_string(t.framework), t.precision_name(), to_string(t.fp8_recipe), t.fp8_wgrad ? "true" : "false"));
  // Likewise fp8_wgrad: false (true, the default, may stay in such a base).
  if (fp8_wgrad_node && !t.fp8_wgrad && !t.fp8_class())
    fp8_wgrad_node->error(fmt::format("fp8_wgrad: false keeps the weight-gradient GEMMs of an fp8-class precision in bf16; "
                                      "precision is {}, whose weight gradients are {} already",
                                      t.precision_name(), t.precision_name()));
  if (ctx->diag->empty()) check_replay_size(sc.model, t, root.child("model"), root.child("training"));  // limits.h
  return sc;
}

Scenario finish_load(std::optional<Node> root, input::Diagnostics& diag, const std::vector<SetOverride>& sets) {
  if (!root) diag.throw_if_any();
  apply_sets(root->yaml(), sets, root->context());
  Scenario sc = parse_scenario(*root);
  diag.throw_if_any();
  return sc;
}

}  // namespace

Scenario load_scenario(const std::string& path, const std::vector<SetOverride>& sets) {
  bool cached = false;
  try {
    input::LoadSession session;
    return finish_load(input::load_yaml_file(path, session.ctx, &cached), session.diag, sets);
  } catch (const input::InputError&) {
    if (!cached) throw;
    // A file read before comes from the cache as a clone, and yaml-cpp's clone keeps no line or column: read it
    // again so that the errors say where (the same errors, on this error path only; the sets' warnings were said).
    std::vector<SetOverride> again = sets;
    for (auto& s : again) s.warn_dropped = false;
    input::LoadSession session;
    return finish_load(input::read_yaml_file(path, session.ctx), session.diag, again);
  }
}

Scenario load_scenario_text(const std::string& text, const std::string& file_label, const std::vector<SetOverride>& sets) {
  input::LoadSession session;
  return finish_load(input::load_yaml_text(text, file_label, session.ctx), session.diag, sets);
}

std::vector<SetOverride> side_overrides(const std::vector<std::string>& both, const std::vector<std::string>& own,
                                        const std::string& own_option) {
  auto all = parse_set_overrides(both);
  auto mine = parse_set_overrides(own, own_option);
  all.insert(all.end(), mine.begin(), mine.end());
  return all;
}

Job job_of(const Scenario& s) {
  Job job;
  job.system = s.system;
  job.parallelism = s.training.parallelism;
  job.precision = s.training.precision;
  job.cuda_graphs = s.training.cuda_graphs;
  job.nvls = s.training.nvls;
  job.cuda_device_max_connections = s.training.max_connections();
  if (s.training.framework == Framework::jax && s.training.xla_client_mem_fraction)
    job.allocator_fraction = *s.training.xla_client_mem_fraction;
  if (s.model.moe) {
    job.moe_experts = s.model.moe->experts;
    job.moe_router_groups = s.model.moe->router_groups;
    job.moe_router_group_top_k = s.model.moe->router_group_top_k;
  }
  return job;
}

Job load_job(const std::string& preset, int gpus, int tp, sim::Dtype precision, const std::vector<SetOverride>& sets,
             const std::string& label) {
  input::LoadSession session;
  // The document a scenario would hold for this job; --set grafts into it as into a scenario file.
  YAML::Node doc;
  doc["system"]["preset"] = preset;
  doc["system"]["gpus"] = gpus;
  doc["training"]["cuda_graphs"] = true;  // XLA runs fusions and library calls as command buffers (CUDA graphs)
  doc["training"]["nvls"] = true;
  apply_sets(doc, sets, session.ctx);
  Job job;
  job.precision = precision;
  Node root(doc, label, "", "", session.ctx);
  MapReader top(root);
  if (auto sys = top.get("system", true)) parse_system(*sys, label, job.system);
  if (auto tn = top.get("training")) {
    MapReader r(*tn);
    set_if(r.boolean("cuda_graphs"), job.cuda_graphs);
    set_if(r.boolean("nvls"), job.nvls);
    if (auto mc = r.integer("cuda_device_max_connections", false, 1, TrainingConfig::kMaxConnections))
      job.cuda_device_max_connections = static_cast<int>(*mc);
    // An imported program is XLA's: JAX's allocator pool applies as in a JAX-mode scenario.
    set_if(r.number("xla_client_mem_fraction", false, TrainingConfig::kMinMemFraction, TrainingConfig::kMaxMemFraction),
           job.allocator_fraction);
    r.finish();
  }
  top.finish();
  session.diag.throw_if_any();
  auto& p = job.parallelism;
  p.tp = std::max(1, tp);
  if (job.system.gpus % p.tp != 0)
    session.diag.error({label, 0, 0}, "system.gpus",
                       fmt::format("gpus ({}) must be a multiple of the workload's tensor-parallel group ({})",
                                   job.system.gpus, p.tp));
  else
    p.dp = job.system.gpus / p.tp;
  if (!job.system.spec.gpu.peak_dense_flops_per_s.count(precision))
    session.diag.error({label, 0, 0}, "training.precision",
                       fmt::format("{} ({}) has no {} tensor cores", job.system.spec.name, job.system.spec.gpu.model,
                                   sim::to_string(precision)));
  session.diag.throw_if_any();
  return job;
}

nlohmann::json system_to_json(const SystemConfig& sc) {
  using nlohmann::json;
  json sys = {{"preset", sc.preset}, {"gpus", sc.gpus}};
  // The calibration applied (named or by default), or "none" when the scenario said so: the
  // report's scenario reruns to the same numbers.
  // A calibration named by a file as an absolute path: the scenario named it beside itself, and the report's scenario
  // saved elsewhere must find the same file (a review's finding).
  if (sc.calibration)
    sys["calibration"] = hw::names_preset_file(*sc.calibration) && sc.spec.calibration &&
                                 !sc.spec.calibration->absolute_path.empty()
                             ? sc.spec.calibration->absolute_path
                             : *sc.calibration;
  else if (sc.calibration_source == "none")
    sys["calibration"] = "none";
  if (!sc.overrides.empty()) sys["overrides"] = sc.overrides;
  const auto& g = sc.spec;
  json peaks = json::object();
  for (const auto& [d, v] : g.gpu.peak_dense_flops_per_s) peaks[sim::to_string(d)] = format_quantity(v, QuantityKind::flops_per_second);
  // The resolved hardware, so a report says exactly what was simulated.
  sys["resolved"] = {
      {"gpu", {{"model", g.gpu.model},
               {"sm_count", g.gpu.sm_count},
               {"peak_dense", peaks},
               {"hbm_capacity", format_quantity(g.gpu.hbm_capacity_bytes, QuantityKind::bytes)},
               {"hbm_bandwidth", format_quantity(g.gpu.hbm_bandwidth_Bps, QuantityKind::bytes_per_second)}}},
      {"launch", json::object()},
      {"host", {{"link_bandwidth_per_direction", format_quantity(g.host.link_bandwidth_per_direction_Bps, QuantityKind::bytes_per_second)},
                {"link_bandwidth_both_directions", format_quantity(g.host.link_bandwidth_both_directions_Bps, QuantityKind::bytes_per_second)},
                {"copy_efficiency", g.host.copy_efficiency},
                {"gpus_per_link", g.host.gpus_per_link}}},
      {"scale_up", {{"bandwidth_per_direction", format_quantity(g.scale_up.bandwidth_per_direction_Bps, QuantityKind::bytes_per_second)},
                    {"domain_size", g.scale_up.domain_size},
                    {"nvls", g.scale_up.nvls}}},
      {"scale_out", {{"nic_bandwidth", format_quantity(g.scale_out.nic_bandwidth_Bps, QuantityKind::bytes_per_second)},
                     {"nics_per_gpu", g.scale_out.nics_per_gpu}}},
      {"memory", {{"reserved", format_quantity(g.memory.reserved_bytes, QuantityKind::bytes)}}}};
  // Every host figure simulated (an optional one only where it is modelled: 0 is "not modelled"), so that a user can
  // see, and scale with system.overrides.launch.*, what the step's host side was built from.
  for (const auto& f : hw::kLaunchFields)
    if (f.required || g.launch.*f.member > 0)
      sys["resolved"]["launch"][f.name] = format_quantity(g.launch.*f.member, QuantityKind::seconds);
  // Which calibration produced the numbers, where it came from and how it reached this preset.
  json cal = {{"source", sc.calibration_source}};
  if (g.calibration) {
    cal["name"] = g.calibration->name;
    cal["transfer"] = g.calibration->transfer;
  }
  sys["resolved"]["calibration"] = cal;
  // Echoed only when below line rate (other reports keep their bytes).
  if (g.scale_out.nic_efficiency < 1.0) sys["resolved"]["scale_out"]["nic_efficiency"] = g.scale_out.nic_efficiency;
  if (g.host.framework_speed != 1.0) sys["resolved"]["host"]["framework_speed"] = g.host.framework_speed;
  return sys;
}

nlohmann::json moe_to_json(const workloads::MoeSpec& e) {
  nlohmann::json j = {{"experts", e.experts},
                      {"top_k", e.top_k},
                      {"expert_ffn_hidden", e.expert_ffn_hidden},
                      {"shared_experts", e.shared_experts},
                      {"first_dense_layers", e.first_dense_layers}};
  if (e.router_groups > 1) {
    j["router_groups"] = e.router_groups;
    j["router_group_top_k"] = e.router_group_top_k;
  }
  return j;
}

nlohmann::json scenario_to_json(const Scenario& s) {
  using nlohmann::json;
  const json sys = system_to_json(s.system);

  const auto& m = s.model;
  json model = {{"name", m.name},           {"layers", m.layers}, {"hidden", m.hidden},
                {"ffn_hidden", m.ffn_hidden}, {"heads", m.heads},   {"kv_heads", m.kv_heads},
                {"head_dim", m.head_dim},   {"vocab", m.vocab},   {"ffn", to_string(m.ffn)},
                {"tied_embeddings", m.tied_embeddings}};
  // Echoed only when set (other reports keep their bytes). It must be here: the report's scenario reruns to
  // the same numbers, and a sweep's replay cache is keyed by this JSON.
  if (m.qk_norm) model["qk_norm"] = true;
  if (m.moe) model["moe"] = moe_to_json(*m.moe);
  if (m.mla)
    model["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                    {"kv_lora_rank", m.mla->kv_lora_rank},
                    {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                    {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                    {"v_head_dim", m.mla->v_head_dim}};
  const auto& t = s.training;
  json recompute;
  if (t.recompute.mode == RecomputeMode::names)
    recompute = {{"save", t.recompute.save}, {"offload", t.recompute.offload}};
  else
    recompute = to_string(t.recompute.mode);
  json training = {
      {"seq_len", t.seq_len},
      {"global_batch", t.global_batch},
      {"micro_batch", t.micro_batch},
      {"precision", t.precision_name()},
      {"parallelism",
       {{"tp", t.parallelism.tp}, {"pp", t.parallelism.pp}, {"vp", t.parallelism.vp}, {"cp", t.parallelism.cp},
        {"ep", t.parallelism.ep}, {"dp", t.parallelism.dp}}},
      {"optimizer_sharding", to_string(t.optimizer_sharding)},
      {"recompute", recompute},
      {"offload", {{"optimizer", t.offload_optimizer}}},
      {"attention", to_string(t.attention)},
      {"cuda_graphs", t.cuda_graphs},
      {"nvls", t.nvls},
      {"framework", to_string(t.framework)},
      {"donate_state", t.donate_state},
      {"scan_layers", t.scan_layers},
      {"sequence_parallel", t.sequence_parallel},
      {"tp_comm_overlap", t.tp_comm_overlap},
      {"expert_imbalance", t.expert_imbalance_chance ? json("chance") : json(t.expert_imbalance)},
      {"cp_comm", to_string(t.cp_comm)},
      {"overlap_grad_reduce", t.overlap_grad_reduce},
      {"overlap_param_gather", t.overlap_param_gather}};
  // Echoed only when set, so reports of scenarios without them keep their bytes.
  if (t.attention_dropout > 0) training["attention_dropout"] = t.attention_dropout;
  if (t.hidden_dropout > 0) training["hidden_dropout"] = t.hidden_dropout;
  if (!t.cross_entropy_fusion) training["cross_entropy_fusion"] = false;
  // (Its default is off under fp16 (the loss scaler's): an fp16 step with the checks on says so, or its scenario would
  // rerun without them; a review's finding.)
  if (!t.check_for_nan || t.fp16) training["check_for_nan"] = t.check_for_nan;
  if (t.grad_reduce_in_bf16) training["grad_reduce_in_bf16"] = true;
  if (!t.gradient_accumulation_fusion) training["gradient_accumulation_fusion"] = false;
  if (t.transformer_impl != TransformerImpl::transformer_engine) training["transformer_impl"] = to_string(t.transformer_impl);
  if (t.megatron_nvtx_lookup) training["megatron_nvtx_lookup"] = true;
  if (!t.fused_qkv) training["fused_qkv"] = false;
  if (t.stacked_layer_params) training["stacked_layer_params"] = *t.stacked_layer_params;
  if (t.one_hot_embedding) training["one_hot_embedding"] = true;
  if (t.logits_fp32) training["logits_fp32"] = true;
  if (t.fused_softmax) training["fused_softmax"] = true;
  if (t.fsdp_pipeline_gather != TrainingConfig::FsdpPipelineGather::per_step)
    training["fsdp_pipeline_gather"] = "per_microbatch";
  if (t.fsdp_grad_reduce != TrainingConfig::FsdpGradReduce::per_step) training["fsdp_grad_reduce"] = "per_microbatch";
  if (t.dp_all_gather_group != TrainingConfig::DpAllGatherGroup::shared) training["dp_all_gather_group"] = "separate";
  if (t.xla_client_mem_fraction) training["xla_client_mem_fraction"] = *t.xla_client_mem_fraction;
  if (t.mtp_layers > 0) training["mtp_layers"] = t.mtp_layers;
  if (t.recompute_num_layers > 0) training["recompute_num_layers"] = t.recompute_num_layers;
  if (t.adam_moments != AdamMoments::fp32) training["adam_moments"] = to_string(t.adam_moments);
  if (t.fp8_recipe != Fp8Recipe::delayed) training["fp8_recipe"] = to_string(t.fp8_recipe);
  if (t.fp8_casts != Fp8Casts::transformer_engine) training["fp8_casts"] = to_string(t.fp8_casts);
  if (!t.fp8_wgrad) training["fp8_wgrad"] = false;
  if (t.fp8_param_gather) training["fp8_param_gather"] = true;
  if (t.cuda_device_max_connections) training["cuda_device_max_connections"] = *t.cuda_device_max_connections;
  if (t.cuda_graph_scope.any()) {  // (only when set)
    auto& l = training["cuda_graph_scope"] = nlohmann::json::array();
    for (const auto& [name, field] : kCudaGraphScopeNames)
      if (t.cuda_graph_scope.*field) l.push_back(name);
  }
  if (!(t.xla_pipelined == TrainingConfig::XlaPipelined{})) {  // (only when not XLA's default: reports stay as they were)
    auto& l = training["xla_pipelined_collectives"] = nlohmann::json::array();
    if (t.xla_pipelined.all_gather) l.push_back("all_gather");
    if (t.xla_pipelined.reduce_scatter) l.push_back("reduce_scatter");
    if (t.xla_pipelined.all_reduce) l.push_back("all_reduce");
  }
  if (!(t.xla_combine_threshold == TrainingConfig::XlaCombineThreshold{})) {  // (only when set)
    const auto& x = t.xla_combine_threshold;
    // Whole bytes as given (XLA's flags are byte counts; a rounded "1.074 GB" would regroup on reload).
    auto exact = [](double b) {
      return b == std::floor(b) && b < 1e18 ? fmt::format("{:.0f} B", b) : format_quantity(b, QuantityKind::bytes);
    };
    training["xla_combine_threshold"] = {{"all_reduce", exact(x.all_reduce_bytes)},
                                         {"reduce_scatter", exact(x.reduce_scatter_bytes)},
                                         {"all_gather", exact(x.all_gather_bytes)}};
  }
  if (t.pipeline.first_stage_layers >= 0) training["pipeline"]["first_stage_layers"] = t.pipeline.first_stage_layers;
  if (t.pipeline.last_stage_layers >= 0) training["pipeline"]["last_stage_layers"] = t.pipeline.last_stage_layers;
  if (t.pipeline.first_rank_layers >= 0) training["pipeline"]["first_rank_layers"] = t.pipeline.first_rank_layers;
  if (t.pipeline.last_rank_layers >= 0) training["pipeline"]["last_rank_layers"] = t.pipeline.last_rank_layers;
  if (t.pipeline.microbatch_group_size > 0)
    training["pipeline"]["microbatch_group_size"] = t.pipeline.microbatch_group_size;
  if (m.moe) training["parallelism"]["etp"] = t.parallelism.expert_tp();
  if (t.parallelism.dp_shard > 0) training["parallelism"]["dp_shard"] = t.parallelism.dp_shard;  // (only when set)
  if (m.moe)
    training["moe"] = {{"dispatcher", to_string(t.moe.dispatcher)},
                       {"max_nodes_per_token", t.moe.max_nodes_per_token},
                       {"a2a_overlap", t.moe.a2a_overlap},
                       {"router_fusion", t.moe.router_fusion},
                       {"permute_fusion", t.moe.permute_fusion}};
  if (m.moe && t.moe.dispatch_fp8) training["moe"]["dispatch_fp8"] = *t.moe.dispatch_fp8;  // (only when set)
  if (m.moe && t.moe.hybridep_combine_sync) training["moe"]["hybridep_combine_sync"] = true;  // (only when set)
  if (m.moe && t.moe.hybridep_dispatch_sync) training["moe"]["hybridep_dispatch_sync"] = true;  // (only when set)
  if (m.moe && t.moe.router_padding) training["moe"]["router_padding"] = true;  // (only when set)
  if (m.moe && t.moe.capacity_factor > 0) training["moe"]["capacity_factor"] = t.moe.capacity_factor;  // (only when set)
  if (m.moe && t.moe.pad_to_capacity) training["moe"]["pad_to_capacity"] = true;                     // (only when set)
  if (m.moe && t.moe.force_load_balancing) training["moe"]["force_load_balancing"] = true;           // (only when set)
  return {{"name", s.name}, {"system", sys}, {"model", model}, {"training", training}};
}

}  // namespace racksim::sim
