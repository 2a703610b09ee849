#include "workloads/importers/maxtext_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/text.h"
#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "workloads/model_spec.h"
#include "workloads/training_config.h"
#include "workloads/importers/scenario_writer.h"

namespace racksim::workloads::importers {

namespace fs = std::filesystem;

namespace {

using input::input_error;

// One key's value and where it was set.
struct Entry {
  YAML::Node value;
  input::SourceLocation where;
  std::string origin;  // "base.yml:114" or "command line"
};

// Keys whose value does not change the step time (learning schedule, data, checkpoints, logging,
// numerics that keep the FLOPs and bytes): not listed as unmodelled when changed.
bool no_effect(const std::string& k) {
  static const std::set<std::string> exact = {
      "run_name", "model_name", "override_model_config", "base_config", "steps", "log_period", "enable_dropout",
      "dropout_rate", "normalization_layer_epsilon", "rope_max_timescale", "rope_min_timescale", "rope_type",
      "rope_factor", "rope_interleave", "rope_truncate", "rope_attention_scaling", "beta_fast", "beta_slow", "mscale",
      "max_position_embeddings", "original_max_position_embeddings", "routed_scaling_factor", "routed_score_func",
      "routed_bias", "logical_axis_rules", "enable_checkpointing", "async_checkpointing", "reuse_example_batch",
      "max_segments_per_seq", "packing", "fused_mlp", "hf_access_token",
      "norm_topk_prob", "load_balance_loss_weight", "tokenizer_type", "add_bos", "add_eos", "enable_goodput_recording",
      "monitor_goodput", "metrics_file", "gcs_metrics", "save_config_to_gcs", "skip_first_n_steps_for_profiler",
      "profiler_steps", "upload_all_profiler_results", "checkpoint_period", "adam_b1", "adam_b2", "adam_eps",
      "adam_eps_root", "adam_weight_decay", "max_target_length_eval", "decoder_layer_input"};
  static const std::vector<std::string> prefixes = {
      "learning_rate", "cosine_", "warmup_", "dataset", "train_", "eval_", "hf_", "grain_", "tfds_", "tokenizer",
      "base_output", "checkpoint", "load_", "profiler", "log", "metrics", "tensorboard", "gradient_clipping",
      "max_checkpoints", "enable_tensorboard", "enable_data_shuffling", "data_", "jax_", "per_device_batch_size_",
      "rampup_", "colocated_python", "inference_", "prefill_", "decode_", "quantization_local", "kv_quant",
      "checkpoint_", "dump_", "remat_policy_for_vit", "vision_", "audio_"};
  if (exact.count(k)) return true;
  for (const auto& p : prefixes)
    if (k.rfind(p, 0) == 0) return true;
  return k.find("_for_vit") != std::string::npos || k.find("_for_audio") != std::string::npos;
}

// The MaxText mesh axes (base.yml: ici_*_parallelism and dcn_*_parallelism).
const std::vector<std::string>& mesh_axes() {
  static const std::vector<std::string> a = {"diloco",  "data",   "fsdp",  "fsdp_transpose", "sequence",
                                             "context", "context_usp_ulysses", "context_autoregressive",
                                             "tensor",  "tensor_sequence", "autoregressive", "pipeline", "expert"};
  return a;
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// The field names of MaxText's config schema, configs/types.py beside base.yml (AI-Hypercomputer/maxtext@e591f30):
// `class MaxTextConfig(RunInfo, Checkpointing, ...)` aggregates pydantic classes whose fields are `  name: type ...`
// at the class body's two-space indent; the keys are those classes' fields and its own (nested models' fields, e.g.
// LoRA's, are not top-level keys). Where no MaxTextConfig is found, every class's fields. Empty where the checkout has
// no types.py (MaxText before its schema checked keys against base.yml). Read as text, bounded.
std::set<std::string> schema_fields(const fs::path& types_py) {
  std::error_code ec;
  if (!fs::is_regular_file(types_py, ec) || fs::file_size(types_py, ec) > (16u << 20)) return {};
  std::ifstream in(types_py);
  const auto ident_char = [](char ch) {
    return std::islower(static_cast<unsigned char>(ch)) || std::isupper(static_cast<unsigned char>(ch)) ||
           std::isdigit(static_cast<unsigned char>(ch)) || ch == '_';
  };
  std::map<std::string, std::set<std::string>> fields;  // class -> its fields
  std::vector<std::string> bases;                        // MaxTextConfig's base classes
  std::string cls;
  bool in_header = false;  // inside `class MaxTextConfig(` ... `):`
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("class ", 0) == 0) {
      std::size_t i = 6;
      while (i < line.size() && ident_char(line[i])) ++i;
      cls = line.substr(6, i - 6);
      in_header = cls == "MaxTextConfig" && line.find("):") == std::string::npos;
      continue;
    }
    if (in_header) {
      const std::string code = line.substr(0, line.find('#'));
      if (code.find("):") != std::string::npos) in_header = false;
      for (std::size_t i = 0; i < code.size();) {
        if (!ident_char(code[i])) {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < code.size() && ident_char(code[j])) ++j;
        bases.push_back(code.substr(i, j - i));
        i = j;
      }
      continue;
    }
    if (cls.empty() || line.size() < 4 || line[0] != ' ' || line[1] != ' ' ||
        !(std::islower(static_cast<unsigned char>(line[2])) || line[2] == '_'))
      continue;
    std::size_t i = 2;
    while (i < line.size() && ident_char(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] == ' ') ++j;
    // `name: type`: a colon and a type after it (`  else:` or `  try:` in module code have none).
    if (j + 2 < line.size() && line[j] == ':' && line[j + 1] == ' ' && line[j + 2] != ' ' && line[j + 2] != '#') {
      const std::string name = line.substr(2, i - 2);
      if (name != "model_config") fields[cls].insert(name);
    }
  }
  std::set<std::string> out;
  if (fields.count("MaxTextConfig") == 0 && bases.empty()) {
    for (const auto& [c, f] : fields) out.insert(f.begin(), f.end());
    return out;
  }
  bases.push_back("MaxTextConfig");
  for (const auto& b : bases)
    if (auto it = fields.find(b); it != fields.end()) out.insert(it->second.begin(), it->second.end());
  return out;
}

class Config {
 public:
  std::map<std::string, Entry> e;
  std::set<std::string> base_keys;       // keys of the base config chain
  // The fields of MaxText's config schema (configs/types.py beside base.yml, pydantic with extra="forbid"), which is
  // what MaxText validates keys against since it has one: valid though base.yml does not list them (a review found
  // vision_encoder_block, log_moe_bias_norms and base_config refused, 16 of MaxText's model configs with them).
  std::set<std::string> schema_keys;
  bool valid_key(const std::string& k) const { return base_keys.count(k) > 0 || schema_keys.count(k) > 0; }
  // "not a key of the base config ...", with the nearest valid key.
  [[noreturn]] void unknown_key(const std::string& file, int line, int column, const std::string& k,
                                const std::string& base) const {
    std::vector<std::string> valid(base_keys.begin(), base_keys.end());
    valid.insert(valid.end(), schema_keys.begin(), schema_keys.end());
    const auto near = sim::nearest(k, valid, std::max<std::size_t>(2, k.size() / 3));
    throw input_error(file, line, column, k,
                      fmt::format("not a key of the base config {}{}{}", base,
                                  schema_keys.empty() ? "" : " nor of MaxText's config schema (types.py)",
                                  near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
  }
  std::map<std::string, std::string> base_value;  // their values there, as text
  std::set<std::string> model_keys;
  std::set<std::string> read;

  bool has(const std::string& k) const { return e.count(k) > 0; }
  const Entry& at(const std::string& k) {
    read.insert(k);
    return e.at(k);
  }
  std::string label;  // the config file, for keys no file sets
  // A value's error points at the value where the file has it (its key's line otherwise: a command-line value).
  [[noreturn]] void bad(const std::string& k, const std::string& msg) const {
    auto it = e.find(k);
    if (it == e.end()) throw input_error(label, 0, 0, k, msg);
    const auto& en = it->second;
    const YAML::Mark m = en.value.Mark();
    if (en.where.line > 0 && !m.is_null()) throw input_error(en.where.file, m.line + 1, m.column + 1, k, msg);
    throw input_error(en.where.file, en.where.line, en.where.column, k, msg);
  }
  // "key: value (origin)" for a scenario comment.
  std::string src(const std::string& k) {
    if (!has(k)) return k + " (not set)";
    const auto& en = at(k);
    return fmt::format("{} {} ({})", k, scalar_text(en.value), en.origin);
  }
  std::optional<double> number_opt(const std::string& k) {
    if (!has(k)) return std::nullopt;
    const auto& en = at(k);
    std::string s = en.value.IsScalar() ? en.value.Scalar() : "";
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
      bad(k, fmt::format("expected a number, got '{}'", scalar_text(en.value)));
    return v;
  }
  double number(const std::string& k, double def) { return number_opt(k).value_or(def); }
  long long integer(const std::string& k, long long def, long long lo = -1, long long hi = 100'000'000) {
    if (!has(k)) return def;
    const double v = *number_opt(k);
    if (v != std::floor(v)) bad(k, fmt::format("expected an integer, got '{}'", scalar_text(e.at(k).value)));
    if (v < static_cast<double>(lo) || v > static_cast<double>(hi))
      bad(k, fmt::format("{} is out of range [{}, {}]", scalar_text(e.at(k).value), lo, hi));
    return static_cast<long long>(v);
  }
  // A key MaxText's base.yml always sets (a model dimension): a config chain that does not reach base.yml and does not
  // set it is refused here, where a default would be 0 and divide by it.
  long long required_integer(const std::string& k, long long lo, long long hi) {
    if (!has(k))
      bad(k, fmt::format("{} is not set: MaxText's base.yml sets it, so the config (or the chain of base_config it names) "
                         "should reach MaxText's base.yml or set the model dimensions itself",
                         k));
    return integer(k, lo, lo, hi);
  }
  std::string str(const std::string& k, const std::string& def = "") {
    if (!has(k)) return def;
    const auto& en = at(k);
    if (en.value.IsNull()) return "";
    if (!en.value.IsScalar()) bad(k, fmt::format("expected a string, got '{}'", scalar_text(en.value)));
    return en.value.Scalar();
  }
  bool boolean(const std::string& k, bool def = false) {
    if (!has(k)) return def;
    const std::string s = str(k);
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    bad(k, fmt::format("expected true or false, got '{}'", s));
  }
  std::vector<std::string> strings(const std::string& k) {
    std::vector<std::string> out;
    if (!has(k)) return out;
    const auto& en = at(k);
    if (en.value.IsScalar()) return {en.value.Scalar()};
    if (!en.value.IsSequence()) bad(k, "expected a list of names");
    for (const auto& x : en.value) {
      if (!x.IsScalar()) bad(k, "expected a list of names");
      out.push_back(x.Scalar());
    }
    return out;
  }
  bool changed(const std::string& k) const {
    if (!has(k)) return false;
    auto it = base_value.find(k);
    return it == base_value.end() || it->second != scalar_text(e.at(k).value);
  }
};

using Writer = ScenarioWriter;  // workloads/importers/scenario_writer.h

std::string shown_path(const fs::path& p) { return p.lexically_normal().generic_string(); }

// Reads one YAML file's top-level keys into `out` (later files override earlier ones).
YAML::Node read_file(const std::string& path, std::map<std::string, Entry>& out, std::set<std::string>* keys,
                     std::map<std::string, std::string>* values) {
  input::LoadSession session;
  auto root = input::load_yaml_file(path, session.ctx);
  session.diag.throw_if_any();
  if (!root) throw input_error(path, 0, 0, "", "cannot read file");
  if (root->yaml().IsNull()) return root->yaml();
  if (!root->yaml().IsMap())
    throw input_error(path, 1, 1, "", fmt::format("expected a MaxText config (a mapping of keys), got {}", root->describe()));
  std::map<std::string, int> first_line;  // MaxText's loader (OmegaConf.load) refuses a key given twice
  for (auto it = root->yaml().begin(); it != root->yaml().end(); ++it) {
    const std::string k = it->first.Scalar();
    const YAML::Mark m = it->first.Mark();
    if (auto [at, fresh] = first_line.emplace(k, m.line + 1); !fresh)
      throw input_error(path, m.line + 1, m.column + 1, k,
                        fmt::format("duplicate key (first set at line {}); MaxText's loader (OmegaConf) refuses it too",
                                    at->second));
    Entry en{it->second, {path, m.line + 1, m.column + 1}, fmt::format("{}:{}", path, m.line + 1)};
    out[k] = en;
    if (keys) keys->insert(k);
    if (values) (*values)[k] = scalar_text(it->second);
  }
  return root->yaml();
}

// Loads a config and its base_config chain (MaxText pyconfig._load_config): the base first. A relative
// base_config is looked up beside the file, then in the folders above it (MaxText: the configs folder).
void load_chain(const std::string& path, Config& c, int depth, std::vector<std::string>& sources, fs::path& root_dir) {
  if (depth > 8) throw input_error(path, 0, 0, "base_config", "base_config chain deeper than 8 files (a cycle?)");
  std::map<std::string, Entry> mine;
  read_file(path, mine, nullptr, nullptr);
  auto bc = mine.find("base_config");
  if (bc != mine.end() && bc->second.value.IsScalar() && !bc->second.value.Scalar().empty()) {
    const std::string name = bc->second.value.Scalar();
    fs::path found;
    if (fs::path(name).is_absolute()) {
      found = name;
    } else {
      fs::path dir = fs::path(path).parent_path();
      for (int up = 0; up < 64; ++up, dir = dir.parent_path()) {
        if (fs::is_regular_file(dir / name)) {
          found = dir / name;
          break;
        }
        if (dir.empty() || dir == dir.parent_path()) break;
      }
    }
    if (found.empty() || !fs::is_regular_file(found))
      throw input_error(bc->second.where.file, bc->second.where.line, bc->second.where.column, "base_config",
                        fmt::format("'{}' not found beside {} or in the folders above it", name, path));
    load_chain(shown_path(found), c, depth + 1, sources, root_dir);
  } else {
    root_dir = fs::path(path).parent_path();
  }
  sources.push_back(path);
  // The first file of the chain (the base) defines the valid keys and their defaults.
  if (c.base_keys.empty()) {
    for (const auto& [k, en] : mine) c.base_keys.insert(k), c.base_value[k] = scalar_text(en.value);
    c.schema_keys = schema_fields(fs::path(path).parent_path() / "types.py");
  } else {
    for (const auto& [k, en] : mine)
      if (!c.valid_key(k) && k != "base_config") c.unknown_key(en.where.file, en.where.line, en.where.column, k, sources.front());
  }
  for (auto& [k, en] : mine) c.e[k] = en;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string policy_yaml(const RecomputePolicy& p) {
  if (p.mode != RecomputeMode::names) return to_string(p.mode);
  std::string s = "{save: [" + join(p.save, ", ") + "]";
  if (!p.offload.empty()) s += ", offload: [" + join(p.offload, ", ") + "]";
  return s + "}";
}

}  // namespace

MaxTextImport import_maxtext(const std::string& config_path, const std::vector<std::string>& overrides,
                             const MaxTextOptions& opt) {
  MaxTextImport out;
  Config c;
  c.label = config_path;
  fs::path root_dir;
  if (std::error_code ec; fs::is_directory(config_path, ec))
    throw input_error(config_path, 0, 0, "", "is a directory; expected a MaxText YAML config");
  if (!fs::is_regular_file(config_path)) throw input_error(config_path, 0, 0, "", "cannot read file");
  load_chain(config_path, c, 0, out.sources, root_dir);

  // ---- command-line overrides: key=value, the value read as YAML (OmegaConf.from_cli does)
  std::map<std::string, Entry> cli;
  for (const auto& a : overrides) {
    const auto eq = a.find('=');
    const std::string label = "command line '" + a + "'";
    if (eq == std::string::npos || eq == 0)
      throw input_error(label, 0, 0, "", "expected KEY=VALUE as MaxText's command line takes it (e.g. per_device_batch_size=4)");
    const std::string k = a.substr(0, eq);
    if (!c.valid_key(k)) c.unknown_key(label, 0, 0, k, out.sources.front());
    YAML::Node v;
    try {
      v = YAML::Load(a.substr(eq + 1));
    } catch (const YAML::Exception& ex) {
      throw input_error(label, 0, 0, k, "malformed value: " + ex.msg);
    }
    if (!v.IsDefined()) v = YAML::Node("");
    Entry en;
    en.value = v;
    en.where.file = label;
    en.origin = "command line";
    cli[k] = en;
  }

  // ---- the model config (pyconfig: models/NAME.yml beside the config, one folder up, or in the configs folder)
  std::string model_name = c.str("model_name", "default");
  if (auto it = cli.find("model_name"); it != cli.end()) model_name = it->second.value.Scalar(), c.e["model_name"] = it->second;
  if (auto p = model_name.find("-Instruct"); p != std::string::npos) model_name.erase(p, 9);
  bool override_model = c.boolean("override_model_config");
  if (auto it = cli.find("override_model_config"); it != cli.end()) {
    c.e["override_model_config"] = it->second;
    override_model = c.boolean("override_model_config");
  }
  if (model_name != "default") {
    const fs::path cfg_dir = fs::path(config_path).parent_path();
    std::vector<fs::path> tries = {cfg_dir / "models" / (model_name + ".yml"),
                                   cfg_dir.parent_path() / "models" / (model_name + ".yml"),
                                   root_dir / "models" / (model_name + ".yml")};
    fs::path found;
    for (const auto& t : tries)
      if (fs::is_regular_file(t)) {
        found = t;
        break;
      }
    const Entry& mn = c.e.at("model_name");
    if (found.empty()) {
      std::vector<std::string> names;
      for (const auto& t : tries) {
        std::error_code ec;
        if (fs::is_directory(t.parent_path(), ec))
          for (const auto& f : fs::directory_iterator(t.parent_path(), ec))
            if (f.path().extension() == ".yml") names.push_back(f.path().stem().string());
      }
      const auto near = sim::nearest(model_name, names, std::max<std::size_t>(2, model_name.size() / 3));
      throw input_error(mn.where.file, mn.where.line, mn.where.column, "model_name",
                        fmt::format("no model config {} (looked in {}){}", model_name + ".yml",
                                    join({shown_path(tries[0].parent_path()), shown_path(tries[1].parent_path()),
                                          shown_path(tries[2].parent_path())},
                                         ", "),
                                    near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
    }
    std::map<std::string, Entry> model;
    const std::string mpath = shown_path(found);
    read_file(mpath, model, nullptr, nullptr);
    out.sources.push_back(mpath);
    for (auto& [k, en] : model) {
      if (!c.valid_key(k)) c.unknown_key(en.where.file, en.where.line, en.where.column, k, out.sources.front());
      auto ci = cli.find(k);
      if (ci != cli.end() && !override_model && scalar_text(ci->second.value) != scalar_text(en.value))
        throw input_error(ci->second.where.file, 0, 0, k,
                          fmt::format("{} sets {}: {}; MaxText refuses a different value from the command line unless "
                                      "override_model_config=true",
                                      en.origin, k, scalar_text(en.value)));
      if (ci != cli.end() && override_model) continue;
      c.e[k] = en;
      c.model_keys.insert(k);
    }
  }
  for (auto& [k, en] : cli) c.e[k] = en;
  c.read.insert("model_name");
  c.read.insert("override_model_config");
  c.read.insert("base_config");
  c.read.insert("hardware");

  auto warn = [&](std::string w) { out.warnings.push_back(std::move(w)); };

  // ---- hardware
  const std::string hardware = c.str("hardware", "tpu");
  if (hardware == "cpu") c.bad("hardware", "hardware=cpu: racksim models GPU systems; use hardware=gpu and --system");
  if (hardware != "gpu" && hardware != "gpu_multiprocess")
    warn(fmt::format("{}: racksim models the GPU system {} (MaxText's mesh, batch and model as given; no TPU "
                     "interconnect or kernels)",
                     c.src("hardware"), opt.system));
  if (!opt.system_given)
    warn(fmt::format("system {}: no --system given, racksim import maxtext's default; pass --system", opt.system));

  // ---- model
  const double scale = c.number("global_parameter_scale", 1);
  if (scale != 1)
    c.bad("global_parameter_scale", "global_parameter_scale other than 1 is not supported: set base_emb_dim, "
                                    "base_num_query_heads, base_mlp_dim, base_num_decoder_layers instead");
  Writer mw;
  const long long layers = c.required_integer("base_num_decoder_layers", 1, 65'536);
  const long long hidden = c.required_integer("base_emb_dim", 1, 1'000'000);
  const long long heads = c.required_integer("base_num_query_heads", 1, 100'000);
  long long kv_heads = c.integer("base_num_kv_heads", heads, 1, 100'000);
  const long long mlp = c.required_integer("base_mlp_dim", 1, 10'000'000);
  const long long vocab = c.required_integer("vocab_size", 1, 100'000'000);
  const std::string attention_type = c.str("attention_type", "global");
  const bool mla = attention_type == "mla";
  if (heads % kv_heads != 0)
    c.bad("base_num_kv_heads", fmt::format("base_num_kv_heads ({}) must divide base_num_query_heads ({})", kv_heads, heads));
  // MaxText's gemma2 decoder layer is two transformer layers, a local (sliding-window) and a global attention layer
  // each with its MLP (AI-Hypercomputer/maxtext@e591f30 models/gemma2.py Gemma2DecoderLayer; configs/models/gemma2-27b.yml:
  // "half of the real number of layers because we merge [local_attention, global_attention] into one layer").
  const bool merged_pairs = c.str("decoder_block", "llama2") == "gemma2";
  mw.line(2, "layers", std::to_string(merged_pairs ? 2 * layers : layers),
          c.src("base_num_decoder_layers") +
              (merged_pairs ? ", x 2: decoder_block gemma2 merges a local and a global attention layer into one" : ""));
  mw.line(2, "hidden", std::to_string(hidden), c.src("base_emb_dim"));
  mw.line(2, "ffn_hidden", std::to_string(mlp), c.src("base_mlp_dim"));
  mw.line(2, "heads", std::to_string(heads), c.src("base_num_query_heads"));
  mw.line(2, "kv_heads", std::to_string(mla ? heads : kv_heads), mla ? "MLA: per-head K and V from the shared latent" : c.src("base_num_kv_heads"));
  if (mla) {
    mw.line(2, "head_dim", std::to_string(c.integer("v_head_dim", 128, 1, 100'000)), c.src("v_head_dim") + " (MLA)");
  } else {
    mw.line(2, "head_dim", std::to_string(c.integer("head_dim", hidden / heads, 1, 100'000)), c.src("head_dim"));
  }
  mw.line(2, "vocab", std::to_string(vocab), c.src("vocab_size"));
  const auto acts = c.strings("mlp_activations");
  const bool gated = acts.size() >= 2;
  if (acts.empty() || acts.size() > 2) c.bad("mlp_activations", "expected one or two activation names");
  mw.line(2, "ffn", gated ? "swiglu" : "gelu",
          c.src("mlp_activations") + (gated ? ": gated, three matrices" : ": one activation, two matrices"));
  if (!acts.empty() && acts[0] != "silu" && acts[0] != "gelu" && acts[0] != "relu")
    warn(fmt::format("{}: modelled with the {} MLP's FLOPs and bytes (the activation function's own cost as silu/gelu)",
                     c.src("mlp_activations"), gated ? "gated" : "two-matrix"));
  const bool tied = c.boolean("logits_via_embedding");
  mw.line(2, "tied_embeddings", tied ? "true" : "false", c.src("logits_via_embedding"));
  // Per-head RMSNorm of queries and keys (Qwen3): its gains are parameters; under JAX racksim charges its
  // kernels no time (docs/decisions.md, "Per-head query/key RMSNorm").
  if (c.boolean("use_qk_norm")) mw.line(2, "qk_norm", "true", c.src("use_qk_norm"));
  const long long experts = c.integer("num_experts", 1, 1, 1'000'000);
  const bool moe = experts > 1;
  if (moe) {
    mw.line(2, "moe", "");
    mw.line(4, "experts", std::to_string(experts), c.src("num_experts"));
    mw.line(4, "top_k", std::to_string(c.integer("num_experts_per_tok", 1, 1, experts)), c.src("num_experts_per_tok"));
    long long moe_mlp = c.integer("base_moe_mlp_dim", -1, -1, 10'000'000);
    std::string moe_src = c.src("base_moe_mlp_dim");
    if (moe_mlp <= 0) moe_mlp = mlp, moe_src += ": not set, base_mlp_dim";
    mw.line(4, "expert_ffn_hidden", std::to_string(moe_mlp), moe_src);
    mw.line(4, "shared_experts", std::to_string(c.integer("shared_experts", 0, 0, 1'000'000)), c.src("shared_experts"));
    mw.line(4, "first_dense_layers", std::to_string(c.integer("first_num_dense_layers", 0, 0, layers)),
            c.src("first_num_dense_layers"));
    // Group-limited routing (DeepSeek-V3: n_routing_groups 8, topk_routing_group 4); -1 in base.yml: off.
    if (const long long g = c.integer("n_routing_groups", -1, -1, 1'000'000); g > 1) {
      const long long gt = c.integer("topk_routing_group", -1, -1, 1'000'000);
      const long long k = c.integer("num_experts_per_tok", 1, 1, experts);
      if (auto why = router_groups_problem(static_cast<int>(experts), static_cast<int>(k), static_cast<int>(g),
                                           static_cast<int>(gt))) {
        warn(c.src("n_routing_groups") + ": " + *why + "; a plain top-k router");
      } else {
        mw.line(4, "router_groups", std::to_string(g), c.src("n_routing_groups"));
        mw.line(4, "router_group_top_k", std::to_string(gt), c.src("topk_routing_group"));
      }
    }
    if (c.integer("interleave_moe_layer_step", 1, 1, 1'000'000) != 1)
      warn(c.src("interleave_moe_layer_step") + ": MoE in every k-th layer is not expressible; modelled as MoE in every "
                                                "layer after the leading dense ones");
    if (c.number("capacity_factor", -1) > 0)
      warn(c.src("capacity_factor") + ": token dropping is not modelled; every token reaches its top-k experts");
    if (!c.boolean("sparse_matmul", true))
      warn(c.src("sparse_matmul") + ": MaxText's dense (einsum with capacity) MoE path is modelled as grouped GEMMs over "
                                    "the routed tokens");
  } else if (c.integer("first_num_dense_layers", 0, 0, layers) > 0 || c.integer("shared_experts", 0, 0, 1'000'000) > 0) {
    warn("first_num_dense_layers / shared_experts without num_experts > 1: a dense model; ignored");
  }
  if (mla) {
    mw.line(2, "mla", "");
    const long long q = c.integer("q_lora_rank", 0, 0, 1'000'000);
    if (q <= 0)
      c.bad("q_lora_rank", "attention_type mla without a query low-rank projection (q_lora_rank 0) is not modelled; "
                           "racksim's MLA has the low-rank query projection");
    mw.line(4, "q_lora_rank", std::to_string(q), c.src("q_lora_rank"));
    mw.line(4, "kv_lora_rank", std::to_string(c.integer("kv_lora_rank", 512, 1, 1'000'000)), c.src("kv_lora_rank"));
    mw.line(4, "qk_nope_head_dim", std::to_string(c.integer("qk_nope_head_dim", 128, 1, 100'000)), c.src("qk_nope_head_dim"));
    mw.line(4, "qk_rope_head_dim", std::to_string(c.integer("qk_rope_head_dim", 64, 1, 100'000)), c.src("qk_rope_head_dim"));
    mw.line(4, "v_head_dim", std::to_string(c.integer("v_head_dim", 128, 1, 100'000)), c.src("v_head_dim"));
  } else if (attention_type != "global" && attention_type != "full") {
    warn(c.src("attention_type") + ": modelled as global causal attention over the whole sequence (attention FLOPs "
                                   "and bytes overstated)");
  }
  const std::string block = c.str("decoder_block", "llama2");
  static const std::set<std::string> llama_like = {"llama2", "mistral", "mixtral", "deepseek", "default", "qwen3",
                                                   "qwen3_moe"};
  if (!llama_like.count(block))
    warn(c.src("decoder_block") + ": modelled as a pre-norm block (norm, attention, norm, MLP or MoE); the block's own "
                                  "extra norms, soft-capping or local layers are not");
  if (c.integer("mtp_num_layers", 0, 0, 1'000) > 0)
    warn(c.src("mtp_num_layers") + ": multi-token prediction is not modelled in JAX mode (training.mtp_layers is "
                                   "Megatron-Core's): its layers' parameters and compute are left out");
  if (c.integer("num_vocab_tiling", 1, 1, 1'000'000) > 1)
    warn(c.src("num_vocab_tiling") + ": racksim keeps the whole logits tensor (peak memory overstated)");
  if (c.boolean("enable_dropout") && c.number("dropout_rate", 0) > 0)
    warn(c.src("dropout_rate") + ": dropout is not modelled");

  // ---- the mesh: ICI axes inside a slice, DCN axes across slices; one -1 per kind fills the rest
  std::map<std::string, long long> ici, dcn;
  std::string ici_fill, dcn_fill;
  long long ici_known = 1, dcn_known = 1;
  for (const auto& a : mesh_axes()) {
    for (auto* kind : {"ici", "dcn"}) {
      const std::string k = fmt::format("{}_{}_parallelism", kind, a);
      const long long v = c.integer(k, 1, -1, 1'048'576);
      if (v == 0) c.bad(k, "0 is not a parallelism degree (1: unsharded, -1: fill the rest)");
      const bool is_ici = std::string(kind) == "ici";
      std::string& fill = is_ici ? ici_fill : dcn_fill;
      if (v == -1) {
        if (!fill.empty())
          c.bad(k, fmt::format("{} and {} are both -1: at most one {} axis can be unspecified (MaxText "
                               "fill_unspecified_mesh_axes)",
                               fill, k, is_ici ? "ICI" : "DCN"));
        fill = k;
      } else {
        (is_ici ? ici_known : dcn_known) *= v;
      }
      (is_ici ? ici : dcn)[a] = v;
    }
  }
  const long long num_slices_key = c.integer("num_slices", -1, -1, 1'048'576);
  if (num_slices_key == 0) c.bad("num_slices", "0 slices: num_slices is a count of slices (-1: from the dcn_* axes or --gpus)");
  long long slices = 0, per_slice = 0;
  std::string slices_src, per_slice_src;
  const long long G = opt.gpus;
  if (num_slices_key > 0) {
    slices = num_slices_key, slices_src = c.src("num_slices");
  } else if (dcn_fill.empty()) {
    slices = dcn_known, slices_src = "the product of the dcn_* axes";
  } else if (G > 0) {
    const long long d0 = ici_fill.empty() ? ici_known : opt.domain_size;
    if (G % d0 != 0)
      throw input_error("--gpus", 0, 0, "",
                        fmt::format("{} GPUs are not a whole number of slices of {} GPUs ({})", G, d0,
                                    ici_fill.empty() ? "the product of the ici_* axes"
                                                     : fmt::format("{}'s NVLink domain, which {} fills", opt.system, ici_fill)));
    slices = G / d0;
    slices_src = fmt::format("--gpus {} / {} GPUs per slice", G, d0);
  } else {
    slices = 1, slices_src = "no --gpus and num_slices -1: one slice";
    warn(fmt::format("{} is -1 and neither --gpus nor num_slices is given: one slice", dcn_fill));
  }
  if (ici_fill.empty()) {
    per_slice = ici_known, per_slice_src = "the product of the ici_* axes";
  } else if (G > 0) {
    if (G % slices != 0)
      throw input_error("--gpus", 0, 0, "", fmt::format("{} GPUs do not split into {} slices ({})", G, slices, slices_src));
    per_slice = G / slices, per_slice_src = fmt::format("--gpus {} / {} slices", G, slices);
  } else {
    per_slice = opt.domain_size;
    per_slice_src = fmt::format("{}'s NVLink domain ({} GPUs): no --gpus", opt.system, opt.domain_size);
  }
  auto fill_axes = [&](std::map<std::string, long long>& axes, const std::string& fill, long long known, long long target,
                       const std::string& kind, const std::string& target_src) {
    if (!fill.empty()) {
      if (target % known != 0) {
        // Which axes make the product, and where each was set (a red-team pass: ici_tensor_parallelism=64 on the
        // command line was reported at base.yml's ici_fsdp_parallelism line alone).
        std::string made_of;
        for (const auto& [a, v] : axes)
          if (v > 1) made_of += (made_of.empty() ? ": " : ", ") + c.src(fmt::format("{}_{}_parallelism", kind == "ICI" ? "ici" : "dcn", a));
        c.bad(fill, fmt::format("cannot fill: {} {} ({}) is not a multiple of the other {} axes' product {}{}", target,
                                kind == "ICI" ? "GPUs per slice" : "slices", target_src, kind, known, made_of));
      }
      axes[fill.substr(4, fill.size() - 4 - std::string("_parallelism").size())] = target / known;
    } else if (known != target) {
      throw input_error(c.e.count("num_slices") ? c.e.at("num_slices").where.file : "--gpus", 0, 0, "",
                        fmt::format("the {} axes' product {} does not match the {} {} ({})", kind, known,
                                    kind == "ICI" ? "GPUs per slice" : "slices", target, target_src));
    }
  };
  fill_axes(ici, ici_fill, ici_known, per_slice, "ICI", per_slice_src);
  fill_axes(dcn, dcn_fill, dcn_known, slices, "DCN", slices_src);
  const long long gpus = slices * per_slice;
  if (G > 0 && G != gpus)
    throw input_error("--gpus", 0, 0, "", fmt::format("--gpus {} but the mesh has {} GPUs ({} slices of {})", G, gpus, slices, per_slice));
  if (gpus > 1'048'576) throw input_error("--gpus", 0, 0, "", fmt::format("{} GPUs: more than racksim's bound 1,048,576", gpus));
  // A slice is the ICI part of the mesh, meant to sit in one NVLink domain: a larger one crosses NICs on its ICI axes.
  if (per_slice > opt.domain_size)
    warn(fmt::format("a slice of {} GPUs ({}) is larger than {}'s NVLink domain of {}: its ICI axes cross the NICs",
                     per_slice, per_slice_src, opt.system, opt.domain_size));
  auto total = [&](const std::string& a) { return ici[a] * dcn[a]; };
  auto axis_src = [&](const std::string& a) {
    return fmt::format("ici_{0}_parallelism {1} x dcn_{0}_parallelism {2}", a, ici[a], dcn[a]);
  };
  for (const char* a : {"diloco", "autoregressive", "context_autoregressive"})
    if (total(a) > 1) {
      const std::string k = ici[a] > 1 ? fmt::format("ici_{}_parallelism", a) : fmt::format("dcn_{}_parallelism", a);
      c.bad(k, std::string(a) == "diloco"
                   ? "DiLoCo (infrequent data-parallel synchronisation) is not modelled by racksim"
                   : "the autoregressive axes shard decoding; racksim simulates training steps");
    }

  const long long tensor = total("tensor"), tensor_seq = total("tensor_sequence");
  const long long tp = tensor * tensor_seq;
  const long long cp = total("sequence") * total("context") * total("context_usp_ulysses");
  const long long pp = total("pipeline");
  const long long expert = total("expert");
  const long long fsdp = total("fsdp") * total("fsdp_transpose");
  const long long data = total("data");
  const long long dp = data * fsdp * expert;
  const long long ep = moe ? expert : 1;
  if (!moe && expert > 1)
    warn(fmt::format("{} on a dense model: the expert axis acts as data parallelism (folded into dp)", axis_src("expert")));
  if (total("sequence") > 1)
    warn(fmt::format("{}: MaxText's sequence axis shards the activations along the sequence (and the weights "
                     "FSDP-style); modelled as context parallelism",
                     axis_src("sequence")));
  for (const char* a : {"tensor", "tensor_sequence", "sequence", "context", "context_usp_ulysses", "expert"})
    if (dcn[a] > 1)
      warn(fmt::format("dcn_{}_parallelism {}: racksim orders ranks tp, cp, dp (with ep), pp from the innermost; this "
                       "axis across slices is placed by that order, not MaxText's mesh",
                       a, dcn[a]));
  if (ici["pipeline"] > 1 && dcn["pipeline"] == 1 && slices > 1)
    warn(fmt::format("ici_pipeline_parallelism {}: racksim places pipeline stages outermost (across NVLink domains "
                     "when the job spans several), not inside a slice",
                     ici["pipeline"]));

  // ---- batch
  const long long seq = c.integer("max_target_length", 2048, 1, 100'000'000);
  const double pdbs = c.number("per_device_batch_size", 12);
  const long long ga = c.integer("gradient_accumulation_steps", 1, 1, 1'000'000);
  const double step_seqs = pdbs * static_cast<double>(gpus);
  // At most the scenario's own bound on a step's sequences (1e9): beyond it llround is undefined (1e300 per device
  // printed a negative batch).
  if (pdbs <= 0 || step_seqs > 1e9)
    c.bad("per_device_batch_size", fmt::format("per_device_batch_size {} x {} GPUs = {:g} sequences: must be more than 0 "
                                               "and at most 1e9 sequences a step",
                                               scalar_text(c.e.at("per_device_batch_size").value), gpus, step_seqs));
  if (std::abs(step_seqs - std::round(step_seqs)) > 1e-9)
    c.bad("per_device_batch_size", fmt::format("per_device_batch_size {} x {} GPUs = {} sequences: not a positive whole "
                                               "number",
                                               scalar_text(c.e.at("per_device_batch_size").value), gpus, step_seqs));
  const long long seqs = std::llround(step_seqs);
  if (seqs % dp != 0)
    c.bad("per_device_batch_size",
          fmt::format("per_device_batch_size {} x {} GPUs = {} sequences per micro-step do not split over {} data-parallel "
                      "ranks (data·fsdp·fsdp_transpose·expert = {}·{}·{})",
                      scalar_text(c.e.at("per_device_batch_size").value), gpus, seqs, dp, data, fsdp, expert));
  long long micro = seqs / dp;
  std::string micro_src = fmt::format("per_device_batch_size {} x {} GPUs / dp {}", pdbs, gpus, dp);
  long long vp = 1;
  std::string vp_src;
  long long pipe_micro = 1;
  if (pp > 1) {
    pipe_micro = c.integer("num_pipeline_microbatches", -1, -1, 1'000'000);
    std::string pm_src = c.src("num_pipeline_microbatches");
    if (pipe_micro <= 0) {
      pipe_micro = c.boolean("pipeline_delay_activation_forwarding") ? 2 * pp : pp;
      pm_src += fmt::format(": MaxText's default, {} stages", pipe_micro == pp ? "the" : "2 x the");
    }
    if (micro % pipe_micro != 0)
      c.bad(c.has("num_pipeline_microbatches") ? "num_pipeline_microbatches" : "per_device_batch_size",
            fmt::format("{} sequences per data-parallel rank do not split into {} pipeline microbatches", micro, pipe_micro));
    micro /= pipe_micro;
    micro_src += fmt::format(" / {} pipeline microbatches ({})", pipe_micro, pm_src);
    long long pl_layers = c.integer("pipeline_parallel_layers", -1, -1, layers);
    if (pl_layers == -1) pl_layers = block == "deepseek" ? layers - c.integer("first_num_dense_layers", 0, 0, layers) : layers;
    if (pl_layers != layers)
      warn(fmt::format("pipeline_parallel_layers {} of {} layers (MaxText's default for decoder_block deepseek leaves the "
                       "dense layers out): racksim pipelines every layer",
                       pl_layers, layers));
    const long long per_stage = c.integer("num_layers_per_pipeline_stage", 1, 1, layers);
    long long repeats = c.integer("num_pipeline_repeats", -1, -1, layers);
    vp_src = c.src("num_pipeline_repeats");
    if (repeats <= 0) {
      if (pl_layers % (pp * per_stage) != 0)
        c.bad("num_layers_per_pipeline_stage",
              fmt::format("{} pipelined layers are not a multiple of {} stages x {} layers per stage", pl_layers, pp, per_stage));
      repeats = pl_layers / (pp * per_stage);
      vp_src = fmt::format("num_pipeline_repeats: {} layers / ({} stages x {})", pl_layers, pp, c.src("num_layers_per_pipeline_stage"));
    }
    vp = repeats;
    if (vp > 1)
      warn(fmt::format("MaxText's circular pipeline ({} repeats of {} stages, {} microbatches) is modelled as racksim's "
                       "interleaved 1F1B schedule with vp {}",
                       repeats, pp, pipe_micro, vp));
  }
  const long long global = seqs * ga;

  // ---- precision
  Writer tw;
  tw.line(2, "framework", "jax", "MaxText runs on JAX/XLA");
  tw.line(2, "seq_len", std::to_string(seq), c.src("max_target_length"));
  tw.line(2, "global_batch", std::to_string(global),
          fmt::format("per_device_batch_size {} x {} GPUs x gradient_accumulation_steps {}", pdbs, gpus, ga));
  tw.line(2, "micro_batch", std::to_string(micro), micro_src);
  const std::string quant = c.str("quantization", "");
  std::string precision = "bf16", prec_src = c.src("quantization");
  if (quant.empty()) {
    prec_src = c.src("dtype") + ", no quantization";
  } else if (quant == "fp8" || quant == "fp8_gpu" || quant == "fp8_full" || quant == "te_fp8_delayedscaling" ||
             quant == "te_fp8_currentscaling" || quant == "fp8_e4m3" || quant == "fp8_e5m2") {
    precision = "fp8";
  } else if (quant == "nanoo_fp8" || quant == "fp8_nanoo") {
    precision = "fp8";
    warn(c.src("quantization") + ": AMD's fp8 formats (OCP/FNUZ) on the NVIDIA system " + opt.system +
         ": modelled as fp8 GEMMs");
  } else if (quant == "te_mxfp8") {
    precision = "mxfp8";
  } else if (quant == "te_nvfp4" || quant == "te_nvfp4_no_rht" || quant == "fp4") {
    precision = "nvfp4";
    if (quant == "fp4") warn(c.src("quantization") + ": modelled as NVFP4 GEMMs");
  } else if (quant == "int8" || quant == "intmp") {
    if (opt.system.rfind("gb300", 0) == 0 || opt.system.rfind("b300", 0) == 0)
      c.bad("quantization", fmt::format("{}: racksim has no int8 precision, and on {} int8 runs far below fp8", quant, opt.system));
    precision = "fp8";
    warn(c.src("quantization") + ": racksim has no int8 precision; modelled as fp8 GEMMs (1-byte operands at the "
                                 "fp8 tensor-core rate, which equals int8's on Hopper and B200)");
  } else if (quant == "int4" ) {
    c.bad("quantization", "int4: racksim has no 4-bit integer precision (bf16, fp8, mxfp8, nvfp4)");
  } else {
    std::vector<std::string> known = {"", "fp8", "fp8_gpu", "fp8_full", "nanoo_fp8", "fp8_nanoo", "te_fp8_delayedscaling",
                                      "te_fp8_currentscaling", "te_mxfp8", "te_nvfp4", "int8", "int4", "intmp", "fp4"};
    const auto near = sim::nearest(quant, known, std::max<std::size_t>(2, quant.size() / 3));
    c.bad("quantization", fmt::format("unknown quantization '{}'{}", quant,
                                      near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
  }
  tw.line(2, "precision", precision, prec_src);
  // fp8 and fp8_gpu are flax's direct FP8 dot (layers/quantizations.py at e591f30: fp8 through Fp8Quantization.
  // dot_general_cls, fp8_gpu through qwix's NvidaFp8Provider, both nn.Fp8DirectDotGeneralOp), whose casts and
  // transposes XLA writes; the te_* recipes cast in Transformer Engine's kernels.
  if (quant == "fp8" || quant == "fp8_gpu")
    tw.line(2, "fp8_casts", "xla", c.src("quantization") + ": flax's Fp8DirectDotGeneralOp, lowered by XLA");
  // fp8_gpu is qwix's provider only: without use_qwix_quantization MaxText's configure_quantization raises
  // "Invalid value configured for quantization fp8_gpu" (_get_quant_config, maxtext@e591f30).
  if (quant == "fp8_gpu" && !c.boolean("use_qwix_quantization", false))
    warn(c.src("quantization") + ": fp8_gpu without use_qwix_quantization: true, which MaxText (e591f30) refuses; "
                                 "modelled as the FP8 dot it reaches through qwix");
  const std::string dtype = c.str("dtype", "bfloat16");
  if (dtype != "bfloat16")
    warn(c.src("dtype") + ": racksim models bf16 activations and matmuls (and narrower); " + dtype +
         " compute is not modelled");
  const std::string wdtype = c.str("weight_dtype", "float32");
  if (wdtype != "float32")
    warn(c.src("weight_dtype") + ": racksim keeps fp32 parameters under framework jax (4 bytes per parameter)");

  // ---- parallelism
  tw.line(2, "parallelism", "");
  auto ixd = [&](const std::string& a) { return fmt::format("{} {}x{}", a, ici[a], dcn[a]); };
  tw.line(4, "tp", std::to_string(tp), fmt::format("{} · {} (ici x dcn)", ixd("tensor"), ixd("tensor_sequence")));
  tw.line(4, "pp", std::to_string(pp), ixd("pipeline") + " (ici x dcn)");
  if (vp > 1) tw.line(4, "vp", std::to_string(vp), vp_src);
  tw.line(4, "cp", std::to_string(cp),
          fmt::format("{} · {} · {} (ici x dcn)", ixd("sequence"), ixd("context"), ixd("context_usp_ulysses")));
  if (moe) tw.line(4, "ep", std::to_string(ep), ixd("expert") + " (ici x dcn)");
  tw.line(4, "dp", std::to_string(dp),
          fmt::format("{} · {} · {} · {} (ici x dcn)", ixd("data"), ixd("fsdp"), ixd("fsdp_transpose"), ixd("expert")));
  // Hybrid sharding: MaxText's logical_axis_rules shard the weights' embed dimension over fsdp, fsdp_transpose,
  // context and expert (embed_moe: fsdp, context) and never over data, so with an fsdp axis and a data axis the
  // state is sharded over dp / data ranks and replicated over the data axis (XLA: reduce-scatter over fsdp, then
  // all-reduce over data). The data axis is the mesh's outermost, as racksim's replicas are.
  const bool hybrid = fsdp > 1 && data > 1;
  if (hybrid) {
    tw.line(4, "dp_shard", std::to_string(dp / data),
            fmt::format("fsdp x fsdp_transpose x expert = {}: state sharded over them, replicated over {} (hybrid)",
                        dp / data, ixd("data")));
    if (ici["data"] > 1 && dcn["fsdp"] * dcn["fsdp_transpose"] > 1)
      warn(fmt::format("ici_data_parallelism {} with a dcn fsdp axis: racksim places the shard group innermost "
                       "(inside a slice), MaxText's mesh puts this data axis inside the slice",
                       ici["data"]));
  }
  // shard_optimizer_over_data (base.yml: "Enable ZeRO-1 optimizer sharding over data axis"): the optimizer state
  // sharded over the data axis, weights and gradients not; racksim's zero1.
  const bool zero1 = c.boolean("shard_optimizer_over_data", false) && fsdp == 1 && dp > 1;
  std::string sharding = fsdp > 1 ? "fsdp" : zero1 ? "zero1" : "none";
  tw.line(2, "optimizer_sharding", sharding,
          fsdp > 1 ? fmt::format("fsdp x fsdp_transpose = {}: weights, gradients and optimizer state sharded", fsdp)
          : zero1  ? c.src("shard_optimizer_over_data") + ": ZeRO-1, optimizer state sharded over the data axis"
                   : "no fsdp axis: every data-parallel rank holds the whole state");
  if (fsdp == 1 && (cp > 1 || (moe && expert > 1)))
    warn("MaxText's logical_axis_rules also shard the weights over the sequence/context/expert axes; racksim "
         "replicates the dense weights over them (memory overstated)");

  // ---- recompute
  const std::string remat = c.str("remat_policy", "full");
  RecomputePolicy rp;
  std::string rp_src = c.src("remat_policy");
  if (remat == "full") {
    rp.mode = RecomputeMode::full;
    rp_src += ": only each layer's input saved";
  } else if (remat == "none") {
    // MaxText wraps every layer in nn.remat; policy None saves nothing inside the layer (layers/decoders.py).
    rp.mode = RecomputeMode::full;
    rp_src += ": MaxText still rematerializes with policy None, which saves nothing (as full)";
  } else if (remat == "custom") {
    // The per-tensor keys: remat | device | offload.
    static const std::vector<std::pair<std::string, std::string>> names = {
        {"query_proj", "qkv"},  {"key_proj", "qkv"},   {"value_proj", "qkv"}, {"qkv_proj", "qkv"},
        {"kv_proj", "qkv"},     {"context", "attn"},   {"out_proj", "attn_out"}, {"mlpwi_0", "mlp_gate"},
        {"mlpwi_1", "mlp_up"},  {"mlpwi", "mlp_up"},   {"moe_mlpwo", "expert_out"}};
    std::map<std::string, std::set<std::string>> where_of;  // racksim name -> {remat, device, offload}
    std::map<std::string, std::string> loc;
    for (const auto& [k, n] : names) {
      if (n == "expert_out" && !moe) continue;
      const std::string v = c.str(k, "remat");
      if (v != "remat" && v != "device" && v != "offload") c.bad(k, fmt::format("expected remat, device or offload, got '{}'", v));
      where_of[n].insert(v);
    }
    for (const char* k : {"mlpwo", "moe_mlpwi_0", "moe_mlpwi_1", "query_wa_proj", "kv_wa_proj", "mla_q", "mla_kv",
                          "attention_out", "indexer_cutoff_threshold", "engram"})
      if (c.has(k) && c.str(k) != "remat" && !(std::string(k) == "mlpwo"))
        warn(fmt::format("{}: not a tensor racksim names; recomputed in the scenario", c.src(k)));
    if (c.has("decoder_layer_input") && c.str("decoder_layer_input") != "device")
      warn(c.src("decoder_layer_input") + ": racksim keeps every layer's input on the device");
    rp.mode = RecomputeMode::names;
    for (const auto& [n, ws] : where_of) {
      if (ws.size() > 1)
        warn(fmt::format("remat_policy custom: the MaxText tensors racksim calls '{}' are set differently ({}); the "
                         "scenario uses the first of offload, device",
                         n, join(std::vector<std::string>(ws.begin(), ws.end()), ", ")));
      if (ws.count("offload")) rp.offload.push_back(n);
      else if (ws.count("device")) rp.save.push_back(n);
    }
    rp_src += ": the per-tensor keys (query/key/value/out_proj, context, mlpwi_0/1, ...)";
  } else if (auto a = recompute_alias(remat, moe)) {
    rp = a->policy;
    rp_src += ": " + a->source;
    if (!a->difference.empty()) warn(fmt::format("remat_policy {}: {}", remat, a->difference));
  } else {
    std::vector<std::string> known = {"full", "none", "custom"};
    known.insert(known.end(), recompute_alias_names().begin(), recompute_alias_names().end());
    const auto near = sim::nearest(remat, known, std::max<std::size_t>(2, remat.size() / 3));
    c.bad("remat_policy", fmt::format("unknown remat_policy '{}'{}", remat,
                                      near ? fmt::format(" (did you mean '{}'?)", *near) : std::string()));
  }
  tw.line(2, "recompute", policy_yaml(rp), rp_src);
  if (c.boolean("optimizer_memory_host_offload")) {
    tw.line(2, "offload", "");
    tw.line(4, "optimizer", "true", c.src("optimizer_memory_host_offload"));
  }
  if (c.boolean("parameter_memory_host_offload"))
    warn(c.src("parameter_memory_host_offload") + ": parameter offload to host memory is not modelled (weights stay in HBM)");

  // ---- attention, launch, XLA conventions
  const std::string attn = c.str("attention", "autoselected");
  std::string attn_impl = "flash";
  // autoselected below 128 tokens is MaxText's dot-product attention (layers/attention_op.py at e591f30:
  // apply_attention_dot when attention_kernel == "autoselected" and length < 128).
  if (attn == "dot_product" || (attn == "autoselected" && seq < 128)) attn_impl = "materialized";
  else if (attn != "flash" && attn != "autoselected" && attn != "cudnn_flash_te" && attn != "cudnn_flash_jax")
    warn(c.src("attention") + ": modelled as a flash (fused) attention kernel");
  tw.line(2, "attention", attn_impl,
          c.src("attention") + (attn != "autoselected" ? ""
                                : seq < 128        ? ": MaxText's dot-product attention below 128 tokens"
                                                   : ": the GPU flash kernel for training sequences of 128 and more"));
  if (cp > 1) {
    const std::string strat = c.str("context_parallel_strategy", "all_gather");
    std::string cc = "all_gather";
    if (strat == "ring") cc = "p2p";
    else if (strat == "ulysses") cc = "a2a";
    else if (strat == "usp") {
      cc = "a2a";
      warn(c.src("context_parallel_strategy") + ": the Ulysses x ring hybrid is modelled as all-to-all (Ulysses) over all "
                                                "cp ranks");
    } else if (strat != "all_gather") {
      c.bad("context_parallel_strategy", fmt::format("unknown context_parallel_strategy '{}' (all_gather, ring, ulysses, usp)", strat));
    }
    tw.line(2, "cp_comm", cc, c.src("context_parallel_strategy"));
  }
  const bool scanned = c.boolean("scan_layers", true);
  tw.line(2, "scan_layers", scanned ? "true" : "false", c.src("scan_layers"));
  // Unscanned, MaxText's decoder builds one block per layer (layers_0, layers_1, ...): one parameter array per layer,
  // none stacked, so XLA has no slice to copy for a checkpointed layer.
  if (!scanned)
    tw.line(2, "stacked_layer_params", "false", c.src("scan_layers") + ": one parameter subtree per layer (layers_N)");
  tw.line(2, "fused_qkv", c.boolean("fused_qkv", false) ? "true" : "false", c.src("fused_qkv"));
  // The embedding as a one-hot matmul (layers/embeddings.py) and the logits dot in fp32 (logits_dense's dtype):
  // written only when set, so scenarios of configs without them stay as they were.
  if (c.boolean("use_iota_embed", false))
    tw.line(2, "one_hot_embedding", "true", c.src("use_iota_embed") + ": the one-hot matrix times the table, two GEMMs");
  if (c.boolean("logits_dot_in_fp32", false))
    tw.line(2, "logits_fp32", "true", c.src("logits_dot_in_fp32") + ": the output layer's GEMMs at TF32 on fp32 operands");
  tw.line(2, "donate_state", "true", "MaxText donates the train state to the step (maxtext_utils: donate_argnums=0)");
  // XLA's command buffers: on by default (its default command types) unless the run's flags turn them off.
  bool command_buffers = true;
  std::string command_buffer_where;
  {
    // XLA's collective pipeliner: XLA's defaults (reduce-scatter only) unless the run's flags say otherwise.
    bool ag = false, rs = true, ar = false, any = false;
    std::string where;
    // XLA's combine thresholds (--xla_gpu_*_combine_threshold_bytes), in bytes, as given.
    static const char* const kCombineKinds[3] = {"all_reduce", "reduce_scatter", "all_gather"};
    std::string combine[3];
    std::string combine_where;
    auto read_flags = [&](const std::string& flags, const std::string& src) {
      std::istringstream in(flags);
      for (std::string tok; in >> tok;) {
        while (!tok.empty() && (tok.back() == '"' || tok.back() == '\'')) tok.pop_back();
        while (!tok.empty() && (tok.front() == '"' || tok.front() == '\'')) tok.erase(0, 1);
        const auto eq = tok.find('=');
        const std::string key = tok.substr(0, eq);
        const std::string val = eq == std::string::npos ? "true" : tok.substr(eq + 1);
        const bool on = val == "true" || val == "True" || val == "1";
        bool combine_flag = false;
        for (int k = 0; k < 3; ++k)
          if (key == fmt::format("--xla_gpu_{}_combine_threshold_bytes", kCombineKinds[k])) {
            combine_flag = true;
            if (val.empty() || !std::all_of(val.begin(), val.end(), [](unsigned char ch) { return std::isdigit(ch); }))
              warn(fmt::format("{}: {}={} is not a byte count; XLA's default is kept", src, key, val));
            else
              combine[k] = val;
            if (combine_where.find(src) == std::string::npos) combine_where += (combine_where.empty() ? "" : ", ") + src;
          }
        if (combine_flag) continue;
        if (key == "--xla_gpu_enable_command_buffer") {
          // A list of command types; empty (the scripts' `--xla_gpu_enable_command_buffer=`) turns them off.
          command_buffers = !val.empty();
          command_buffer_where = src + ": --xla_gpu_enable_command_buffer=" + val;
          continue;
        }
        bool* which[3] = {nullptr, nullptr, nullptr};
        if (key == "--xla_gpu_enable_pipelined_all_gather") which[0] = &ag;
        else if (key == "--xla_gpu_enable_pipelined_reduce_scatter") which[0] = &rs;
        else if (key == "--xla_gpu_enable_pipelined_all_reduce") which[0] = &ar;
        else if (key == "--xla_gpu_enable_pipelined_collectives") which[0] = &ag, which[1] = &rs, which[2] = &ar;
        else continue;
        // XLA's boolean flags take true/false (absl: also 1/0, yes/no, t/f); anything else XLA rejects, so
        // the flag is left at XLA's default here and the import says so.
        const bool off = val == "false" || val == "False" || val == "0";
        if (!on && !off) {
          warn(fmt::format("{}: {}={} is not true or false; XLA's default is kept", src, key, val));
          continue;
        }
        for (bool* w : which)
          if (w) *w = on;
        any = true;
        if (where.find(src) == std::string::npos) where += (where.empty() ? "" : ", ") + src;
      }
    };
    read_flags(opt.xla_flags, "XLA_FLAGS");
    if (c.e.count("compile_xla_flags")) read_flags(c.str("compile_xla_flags"), c.src("compile_xla_flags"));
    if (any && !(ag == false && rs == true && ar == false)) {
      std::string v;
      if (ag && rs && ar) v = "true";
      else if (!ag && !rs && !ar) v = "false";
      else {
        std::vector<std::string> l;
        if (ag) l.push_back("all_gather");
        if (rs) l.push_back("reduce_scatter");
        if (ar) l.push_back("all_reduce");
        v = "[" + join(l, ", ") + "]";
      }
      tw.line(2, "xla_pipelined_collectives", v, where + ": --xla_gpu_enable_pipelined_*");
    }
    std::vector<std::string> thresholds;
    for (int k = 0; k < 3; ++k)
      if (!combine[k].empty()) thresholds.push_back(fmt::format("{}: {} B", kCombineKinds[k], combine[k]));
    if (!thresholds.empty())
      tw.line(2, "xla_combine_threshold", "{" + join(thresholds, ", ") + "}",
              combine_where + ": --xla_gpu_*_combine_threshold_bytes");
  }
  if (command_buffer_where.empty())
    tw.line(2, "cuda_graphs", "true",
            "XLA's default command buffers (MaxText's GPU scripts turn them off with --xla_gpu_enable_command_buffer=''; "
            "XLA_FLAGS are not in the config)");
  else
    tw.line(2, "cuda_graphs", command_buffers ? "true" : "false",
            command_buffer_where + (command_buffers ? "" : " (empty: every thunk launched by the host)"));
  const bool sp = tensor_seq > 1 && tensor == 1;
  tw.line(2, "sequence_parallel", sp ? "true" : "false",
          tensor_seq > 1 ? "tensor_sequence: activations sharded along the sequence between the tensor-parallel regions"
                         : "tensor axis: GSPMD all-reduces after the row-parallel matmuls");
  if (tensor > 1 && tensor_seq > 1)
    warn(fmt::format("tensor {} and tensor_sequence {} together: modelled as tp {} without sequence parallelism", tensor,
                     tensor_seq, tp));
  const std::string opt_type = c.str("opt_type", "adamw");
  if (opt_type != "adamw" && opt_type != "adam_pax")
    warn(c.src("opt_type") + ": racksim models Adam (two fp32 moments per parameter, 8 bytes) and its update");

  // ---- the rest: keys changed from the base config that racksim does not read
  std::vector<std::string> unread;
  for (const auto& [k, en] : c.e) {
    if (c.read.count(k)) {
      if (c.changed(k) || c.model_keys.count(k)) out.used.push_back(k + "=" + scalar_text(en.value));
      continue;
    }
    if (!c.changed(k) || no_effect(k)) continue;
    unread.push_back(fmt::format("{}={}", k, scalar_text(en.value)));
  }
  if (!unread.empty())
    warn("changed from the base config but not read by racksim (their effect on the step time, if any, is not "
         "modelled): " + join(unread, "; "));

  // ---- the file
  std::string name = opt.name;
  if (name.empty()) {
    const std::string run = c.has("run_name") ? c.str("run_name") : "";
    name = !run.empty() ? run : model_name != "default" ? model_name : fs::path(config_path).stem().string();
  }
  std::ostringstream o;
  o << "# Imported by `racksim import maxtext` from " << comment_text(join(out.sources, ", "));
  if (!overrides.empty()) o << " and the command line: " << comment_text(join(overrides, " "));
  o << ".\n";
  o << "# Each key's comment names the MaxText key (value, file:line or command line) it came from.\n";
  o << "# " << comment_text(fmt::format("mesh: {} slice{} of {} GPUs ({}; {}) = {} GPUs", slices, slices == 1 ? "" : "s",
                                        per_slice, slices_src, per_slice_src, gpus))
    << "\n";
  for (const auto& w : out.warnings) o << "# warning: " << comment_text(w) << "\n";
  o << "name: " << yaml_quoted(name) << "\n";
  o << "system:\n";
  Writer sw;
  sw.line(2, "preset", opt.system, opt.system_given ? "racksim import --system" : "default (no --system)");
  sw.line(2, "gpus", std::to_string(gpus), fmt::format("{} slice(s) x {} GPUs", slices, per_slice));
  // A slice's GPUs are the ICI (NVLink) part of the mesh: on racks with more GPUs than a slice, a job of
  // several slices takes one slice's GPUs from each rack, so its NVLink domains hold per_slice of its ranks
  // (racksim places the ranks in domains in order; docs/decisions.md, "Groups that straddle NVLink domains").
  if (slices > 1 && per_slice < opt.domain_size)
    sw.line(2, "overrides", fmt::format("{{scale_up.domain_size: {}}}", per_slice),
            fmt::format("the job's GPUs per NVLink domain: one slice of {} per {}-GPU domain", per_slice, opt.domain_size));
  o << sw.o.str();
  o << "model:\n" << mw.o.str();
  o << "training:\n" << tw.o.str();
  out.yaml = yaml_safe_text(o.str());
  return out;
}

}  // namespace racksim::workloads::importers
