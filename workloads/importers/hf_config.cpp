#include "workloads/importers/hf_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "input/diagnostics.h"
#include "input/files.h"
#include "workloads/bounded_json.h"
#include "workloads/importers/scenario_writer.h"

namespace racksim::workloads::importers {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using input::input_error;

// transformers' config classes this importer knows, and what they default when a key is absent.
struct Family {
  const char* model_type;
  const char* config_class;
  bool moe;
  bool mla;
};
const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"llama", "LlamaConfig", false, false},         {"mistral", "MistralConfig", false, false},
      {"mixtral", "MixtralConfig", true, false},      {"qwen2", "Qwen2Config", false, false},
      {"qwen2_moe", "Qwen2MoeConfig", true, false},   {"qwen3", "Qwen3Config", false, false},
      {"qwen3_moe", "Qwen3MoeConfig", true, false},   {"deepseek_v2", "DeepseekV2Config", true, true},
      {"deepseek_v3", "DeepseekV3Config", true, true},
  };
  return f;
}

// Reads keys of one JSON object with their positions in the text, for diagnostics.
class Reader {
 public:
  Reader(const json& obj, const std::string& text, std::string label, std::string file_name)
      : obj_(obj), text_(text), label_(std::move(label)), file_name_(std::move(file_name)) {}

  bool has(const std::string& key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const json& at(const std::string& key) const { return obj_.at(key); }

  input::SourceLocation where(const std::string& key) const {
    const std::string quoted = "\"" + key + "\"";
    const auto pos = text_.find(quoted);
    if (pos == std::string::npos) return {label_, 0, 0};
    const auto [line, col] = input::position_in(text_, pos);
    return {label_, line, col};
  }

  void error(const std::string& key, const std::string& message) { diag.error(where(key), key, message); }
  // Said with a missing key when the model_type is not one racksim knows (gpt2's n_layer is not num_hidden_layers).
  std::string missing_hint;

  // A positive integer (JSON integer, or a float with an integral value).
  std::optional<int> integer(const std::string& key, bool required, int min = 1) {
    if (!has(key)) {
      if (required) diag.error({label_, 0, 0}, key, "missing: this key is needed for the model" + missing_hint);
      return std::nullopt;
    }
    const json& v = obj_.at(key);
    // (A float's integral value is compared as a double: a cast of 1e300 to an integer is undefined.)
    const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                    v.get<double>() == std::floor(v.get<double>()));
    if (!integral) {
      error(key, fmt::format("expected an integer, got {}", v.dump()));
      return std::nullopt;
    }
    constexpr long long kMax = 100'000'000;  // beyond any model's dimension or count; int arithmetic downstream
    const double d = v.is_number_unsigned() ? static_cast<double>(v.get<unsigned long long>()) : v.get<double>();
    if (d < min || d > static_cast<double>(kMax)) {
      error(key, fmt::format("expected an integer from {} to {}, got {}", min, kMax, v.dump()));
      return std::nullopt;
    }
    used_.push_back(key);
    return static_cast<int>(d);
  }

  std::optional<bool> boolean(const std::string& key) {
    if (!has(key)) return std::nullopt;
    const json& v = obj_.at(key);
    if (!v.is_boolean()) {
      error(key, fmt::format("expected true or false, got {}", v.dump()));
      return std::nullopt;
    }
    used_.push_back(key);
    return v.get<bool>();
  }

  std::optional<std::string> string(const std::string& key) {
    if (!has(key)) return std::nullopt;
    const json& v = obj_.at(key);
    if (!v.is_string()) {
      error(key, fmt::format("expected a string, got {}", v.dump()));
      return std::nullopt;
    }
    used_.push_back(key);
    return v.get<std::string>();
  }

  // "config.json num_hidden_layers = 32"
  std::string source(const std::string& key) const {
    return fmt::format("HF {} {} = {}", file_name_, key, has(key) ? obj_.at(key).dump() : "null");
  }
  const std::string& file_name() const { return file_name_; }

  input::Diagnostics diag;

 private:
  const json& obj_;
  const std::string& text_;
  std::string label_, file_name_;
  std::vector<std::string> used_;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A model name from a path or a repository id: its last component, lowercase, [a-z0-9._-].
std::string slug(const std::string& s) {
  std::string base = s;
  if (auto slash = base.find_last_of('/'); slash != std::string::npos) base = base.substr(slash + 1);
  std::string out;
  for (char c : lower(base)) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string pretty_count(double n) { return n >= 1e9 ? fmt::format("{:.2f}B", n / 1e9) : fmt::format("{:.1f}M", n / 1e6); }

[[noreturn]] void fail(const std::string& label, int line, int col, const std::string& message) {
  throw input_error(label, line, col, "", message);
}

}  // namespace

HfImport import_hf_config_text(const std::string& text, const std::string& file_label, const std::string& name_in) {
  json root;
  JsonBoundError refused;
  try {
    root = parse_bounded_json(text, refused, true, true);
  } catch (const json::parse_error& e) {
    // nlohmann counts the byte it stopped at from 1.
    const auto [line, col] = input::position_in(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string msg = e.what();
    if (auto p = msg.find("syntax error"); p != std::string::npos) msg = msg.substr(p);
    fail(file_label, line, col, "not valid JSON (a Hugging Face config.json is expected): " + msg);
  } catch (const json::out_of_range& e) {
    // A number past a double's range (nlohmann: "number overflow parsing '1e400'"): placed where the number stands.
    std::string number = e.what();
    const auto a = number.find('\''), b = number.rfind('\'');
    number = a != std::string::npos && b > a ? number.substr(a + 1, b - a - 1) : std::string();
    const auto at = number.empty() ? std::string::npos : text.find(number);
    const auto [line, col] = input::position_in(text, at == std::string::npos ? 0 : at);
    fail(file_label, line, col, fmt::format("the number {} is out of range (beyond a double's)", number));
  }
  if (!refused.message.empty()) {
    const auto [line, col] = input::position_in(text, refused.offset);
    fail(file_label, line, col, "not accepted: " + refused.message);
  }
  if (!root.is_object()) fail(file_label, 1, 1, "expected a JSON object (a Hugging Face config.json)");

  HfImport out;
  const std::string file_name = fs::path(file_label).filename().string();
  // Multimodal configs keep the language model in text_config.
  const json* obj = &root;
  if (!root.contains("hidden_size") && root.contains("text_config") && root["text_config"].is_object()) {
    obj = &root["text_config"];
    out.warnings.push_back(
        "a multimodal config: only the language model (text_config) is imported; the vision or audio tower is left out");
  }
  Reader r(*obj, text, file_label, file_name);
  Reader top(root, text, file_label, file_name);

  if (auto arch = top.has("architectures") && root["architectures"].is_array() && !root["architectures"].empty() &&
                          root["architectures"][0].is_string()
                      ? std::optional<std::string>(root["architectures"][0].get<std::string>())
                      : std::nullopt)
    out.architecture = *arch;
  std::string model_type;
  if (auto mt = r.string("model_type")) model_type = *mt;
  else if (auto mt2 = top.string("model_type")) model_type = *mt2;
  out.model_type = model_type;
  const Family* fam = nullptr;
  for (const auto& f : families())
    if (model_type == f.model_type) fam = &f;
  if (!fam) {
    std::string known;
    for (const auto& f : families()) known += (known.empty() ? "" : ", ") + std::string(f.model_type);
    out.warnings.push_back(fmt::format(
        "model_type '{}' is not one racksim knows ({}): read with the Llama-style keys; check every field",
        model_type.empty() ? "(none)" : model_type, known));
    r.missing_hint = fmt::format(" (model_type '{}' is not one racksim knows: it reads the Llama-style keys of {})",
                                 model_type.empty() ? "(none)" : model_type, known);
  }
  const std::string cls = fam ? fam->config_class : "the transformers config class";

  ModelSpec& m = out.model;
  auto& src = m.sources;
  auto take = [&](const std::string& field, const std::string& key, int& dst, bool required, int min = 1) {
    if (auto v = r.integer(key, required, min)) {
      dst = *v;
      src[field] = r.source(key);
      return true;
    }
    return false;
  };
  take("layers", "num_hidden_layers", m.layers, true);
  take("hidden", "hidden_size", m.hidden, true);
  take("heads", "num_attention_heads", m.heads, true);
  take("vocab", "vocab_size", m.vocab, true);
  take("ffn_hidden", "intermediate_size", m.ffn_hidden, true);
  if (!take("kv_heads", "num_key_value_heads", m.kv_heads, false)) {
    m.kv_heads = m.heads;
    src["kv_heads"] = fmt::format("HF {} has no num_key_value_heads: multi-head attention (= num_attention_heads {})",
                                  file_name, m.heads);
  }
  const bool has_head_dim = r.has("head_dim");
  if (has_head_dim) take("head_dim", "head_dim", m.head_dim, false);

  // The MLP: these families use a gated MLP (gate_proj, up_proj, down_proj: three matrices).
  const std::string act = r.string("hidden_act").value_or("silu");
  m.ffn = FfnKind::swiglu;
  src["ffn"] = fmt::format("HF {} hidden_act = \"{}\"; {} uses a gated MLP (gate_proj, up_proj, down_proj)", file_name,
                           act, fam ? fam->config_class : "the model");
  if (act != "silu" && act != "swish")
    out.warnings.push_back(fmt::format("hidden_act '{}': counted as a gated three-matrix MLP (ffn: swiglu); the "
                                       "activation's own cost is the same class of element-wise work",
                                       act));
  if (auto tied = r.boolean("tie_word_embeddings")) {
    m.tied_embeddings = *tied;
    src["tied_embeddings"] = r.source("tie_word_embeddings");
  } else if (auto tied_top = top.boolean("tie_word_embeddings")) {
    m.tied_embeddings = *tied_top;
    src["tied_embeddings"] = top.source("tie_word_embeddings");
  } else {
    m.tied_embeddings = false;
    src["tied_embeddings"] =
        fmt::format("HF {} has no tie_word_embeddings: {} defaults to false", file_name, cls);
  }

  // Qwen3's attention normalizes every query and key head (Qwen3Attention q_norm/k_norm); no config key says so.
  if (model_type == "qwen3" || model_type == "qwen3_moe") {
    m.qk_norm = true;
    src["qk_norm"] = fmt::format("HF {} model_type {}: {}'s attention has per-head q_norm/k_norm (RMSNorm of head_dim)",
                                 file_name, model_type, fam ? fam->config_class : "the model");
  }

  // Mixture of experts.
  const bool mixtral = model_type == "mixtral";
  const bool qwen_moe = model_type == "qwen2_moe" || model_type == "qwen3_moe";
  const bool deepseek = model_type == "deepseek_v2" || model_type == "deepseek_v3";
  if (mixtral || qwen_moe || deepseek) {
    MoeSpec e;
    const std::string n_key = mixtral ? "num_local_experts" : deepseek ? "n_routed_experts" : "num_experts";
    if (auto v = r.integer(n_key, true)) e.experts = *v, src["moe.experts"] = r.source(n_key);
    if (auto v = r.integer("num_experts_per_tok", true)) e.top_k = *v, src["moe.top_k"] = r.source("num_experts_per_tok");
    const std::string w_key = mixtral ? "intermediate_size" : "moe_intermediate_size";
    if (auto v = r.integer(w_key, true)) e.expert_ffn_hidden = *v, src["moe.expert_ffn_hidden"] = r.source(w_key);
    if (mixtral) {
      src["ffn_hidden"] = r.source("intermediate_size") + " (each expert's width; Mixtral has no dense FFN layer)";
      src["moe.shared_experts"] = "Mixtral has no shared expert (MixtralSparseMoeBlock)";
      src["moe.first_dense_layers"] = "Mixtral: every layer is a sparse MoE block";
    }
    if (deepseek) {
      if (auto v = r.integer("n_shared_experts", false, 0)) e.shared_experts = *v, src["moe.shared_experts"] = r.source("n_shared_experts");
      else src["moe.shared_experts"] = fmt::format("HF {} has no n_shared_experts: none", file_name);
      if (auto v = r.integer("first_k_dense_replace", false, 0))
        e.first_dense_layers = *v, src["moe.first_dense_layers"] = r.source("first_k_dense_replace");
      else src["moe.first_dense_layers"] = fmt::format("HF {} has no first_k_dense_replace: {} defaults to 0", file_name, cls);
      src["ffn_hidden"] = r.source("intermediate_size") + " (the dense FFN of the first_k_dense_replace layers)";
      if (auto f = r.integer("moe_layer_freq", false); f && *f > 1)
        out.warnings.push_back(fmt::format("moe_layer_freq {}: MoE in every {}-th layer is not expressible; modelled as "
                                           "MoE in every layer after the first {}",
                                           *f, *f, e.first_dense_layers));
      if (auto mtp = r.integer("num_nextn_predict_layers", false, 0); mtp && *mtp > 0)
        out.warnings.push_back(fmt::format(
            "num_nextn_predict_layers {0}: {0} multi-token-prediction module{1} (one more transformer layer and a "
            "projection each) {2} not part of the model preset; a scenario trains with {3} under training.mtp_layers: "
            "{0} (Megatron-Core's --mtp-num-layers)",
            *mtp, *mtp == 1 ? "" : "s", *mtp == 1 ? "is" : "are", *mtp == 1 ? "it" : "them"));
      if (r.has("n_group") && r.has("topk_group")) {
        const auto groups = r.integer("n_group", false), topk = r.integer("topk_group", false);
        if (groups && topk && *groups > 1) {
          if (auto why = router_groups_problem(e.experts, e.top_k, static_cast<int>(*groups), static_cast<int>(*topk))) {
            out.warnings.push_back(fmt::format("n_group {}, topk_group {}: {}; a plain top-k router", *groups, *topk, *why));
          } else {
            e.router_groups = static_cast<int>(*groups), src["moe.router_groups"] = r.source("n_group");
            e.router_group_top_k = static_cast<int>(*topk), src["moe.router_group_top_k"] = r.source("topk_group");
          }
        }
        if (groups && topk)
          out.notes.push_back(fmt::format(
              "routing is group-limited: {} expert groups, each token's experts in at most {} of them (n_group, "
              "topk_group; model.moe.router_groups / router_group_top_k: DeepEP's and HybridEP's exchanges count the "
              "GPUs a token's groups reach)",
              *groups, *topk));
      }
    }
    if (qwen_moe) {
      src["ffn_hidden"] = r.source("intermediate_size") + " (dense MLP width, used only by layers listed in mlp_only_layers)";
      e.shared_experts = 0;
      if (r.has("shared_expert_intermediate_size")) {
        if (auto s = r.integer("shared_expert_intermediate_size", false, 0); s && e.expert_ffn_hidden > 0) {
          e.shared_experts = static_cast<int>(std::lround(static_cast<double>(*s) / e.expert_ffn_hidden));
          src["moe.shared_experts"] = fmt::format("HF {} shared_expert_intermediate_size = {} / moe_intermediate_size = {}",
                                                  file_name, *s, e.expert_ffn_hidden);
          if (*s % e.expert_ffn_hidden != 0)
            out.warnings.push_back(fmt::format("shared_expert_intermediate_size {} is not a multiple of "
                                               "moe_intermediate_size {}: counted as {} shared experts",
                                               *s, e.expert_ffn_hidden, e.shared_experts));
          out.notes.push_back("the shared expert's sigmoid gate (hidden_size x 1) is not counted");
        }
      } else {
        src["moe.shared_experts"] = fmt::format("HF {} has no shared_expert_intermediate_size: no shared expert", file_name);
      }
      // Dense layers: mlp_only_layers must be a prefix 0..k-1; MoE every decoder_sparse_step-th layer.
      int first_dense = 0;
      if (r.has("mlp_only_layers") && r.at("mlp_only_layers").is_array()) {
        std::vector<int> dense;
        for (const auto& v : r.at("mlp_only_layers"))
          if (v.is_number_integer()) dense.push_back(v.get<int>());
        std::sort(dense.begin(), dense.end());
        bool prefix = true;
        for (std::size_t i = 0; i < dense.size(); ++i) prefix = prefix && dense[i] == static_cast<int>(i);
        if (prefix) {
          first_dense = static_cast<int>(dense.size());
        } else {
          first_dense = 0;
          out.warnings.push_back(fmt::format("mlp_only_layers {} is not a leading run of layers: modelled as MoE in "
                                             "every layer",
                                             r.at("mlp_only_layers").dump()));
        }
        src["moe.first_dense_layers"] = r.source("mlp_only_layers");
      } else {
        src["moe.first_dense_layers"] = fmt::format("HF {} has no mlp_only_layers: every layer is MoE", file_name);
      }
      e.first_dense_layers = first_dense;
      if (auto step = r.integer("decoder_sparse_step", false); step && *step > 1)
        out.warnings.push_back(fmt::format("decoder_sparse_step {}: MoE in every {}-th layer is not expressible; "
                                           "modelled as MoE in every layer",
                                           *step, *step));
    }
    if (!src.count("moe.shared_experts")) src["moe.shared_experts"] = "none";
    if (!src.count("moe.first_dense_layers")) src["moe.first_dense_layers"] = "every layer is MoE";
    if (e.experts > 0 && e.top_k > e.experts)
      r.error("num_experts_per_tok", fmt::format("num_experts_per_tok ({}) exceeds the experts ({})", e.top_k, e.experts));
    m.moe = e;
  }

  // DeepSeek multi-head latent attention.
  if (deepseek) {
    MlaSpec a;
    if (!r.has("q_lora_rank"))
      r.error("q_lora_rank", "null or missing: MLA without a low-rank query projection (DeepSeek-V2-Lite) is not "
                             "modelled; racksim's MLA has the q_lora_rank projection");
    else if (auto v = r.integer("q_lora_rank", true)) a.q_lora_rank = *v, src["mla.q_lora_rank"] = r.source("q_lora_rank");
    if (auto v = r.integer("kv_lora_rank", true)) a.kv_lora_rank = *v, src["mla.kv_lora_rank"] = r.source("kv_lora_rank");
    if (auto v = r.integer("qk_nope_head_dim", true)) a.qk_nope_head_dim = *v, src["mla.qk_nope_head_dim"] = r.source("qk_nope_head_dim");
    if (auto v = r.integer("qk_rope_head_dim", true, 0)) a.qk_rope_head_dim = *v, src["mla.qk_rope_head_dim"] = r.source("qk_rope_head_dim");
    if (auto v = r.integer("v_head_dim", true)) {
      a.v_head_dim = *v;
      src["mla.v_head_dim"] = r.source("v_head_dim");
      m.head_dim = *v;
      src["head_dim"] = r.source("v_head_dim") + " (MLA: the value head width; Q/K heads are qk_nope_head_dim + qk_rope_head_dim)";
    }
    m.mla = a;
  }

  // What the model file does not describe.
  const bool sliding_on = !r.has("use_sliding_window") || (r.has("use_sliding_window") && r.at("use_sliding_window").is_boolean() &&
                                                           r.at("use_sliding_window").get<bool>());
  if (r.has("sliding_window") && r.at("sliding_window").is_number_integer() && sliding_on)
    out.warnings.push_back(fmt::format("sliding_window {}: attention is modelled over the whole sequence (the same for "
                                       "seq_len up to {})",
                                       r.at("sliding_window").get<long long>(), r.at("sliding_window").get<long long>()));
  if (top.has("quantization_config"))
    out.notes.push_back(fmt::format("the weights are published quantized ({}); the simulated precision is the "
                                    "scenario's training.precision",
                                    root["quantization_config"].value("quant_method", std::string("quantization_config"))));
  if (model_type == "qwen2") out.notes.push_back("Qwen2's Q/K/V biases (attention) are not counted (about 0.01% of the parameters)");
  if (r.has("attention_bias") && r.at("attention_bias").is_boolean() && r.at("attention_bias").get<bool>())
    out.notes.push_back("attention_bias true: the projection biases are not counted");

  r.diag.throw_if_any();
  top.diag.throw_if_any();
  if (!has_head_dim && !m.mla && m.heads > 0) {
    if (m.hidden % m.heads != 0)
      fail(file_label, 0, 0,
           fmt::format("hidden_size {} is not divisible by num_attention_heads {} and there is no head_dim", m.hidden, m.heads));
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0)
    fail(file_label, r.where("num_key_value_heads").line, r.where("num_key_value_heads").column,
         fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}", m.heads, m.kv_heads));

  // Name and summary.
  std::string name = name_in;
  if (name.empty() && top.has("_name_or_path") && root["_name_or_path"].is_string())
    name = slug(root["_name_or_path"].get<std::string>());
  if (name.empty()) {
    const fs::path p(file_label);
    name = slug(p.stem().string() == "config" && p.has_parent_path() ? p.parent_path().filename().string()
                                                                      : p.stem().string());
  }
  if (name.empty()) name = model_type.empty() ? "imported" : model_type;
  m.name = name;
  std::string shape = fmt::format("{} layers, hidden {}, {} heads", m.layers, m.hidden, m.heads);
  if (m.mla) shape += " (MLA)";
  else if (m.kv_heads != m.heads) shape += fmt::format(" / {} KV (GQA)", m.kv_heads);
  if (m.moe)
    shape += fmt::format("; MoE {} experts top-{}{}{}", m.moe->experts, m.moe->top_k,
                         m.moe->shared_experts ? fmt::format(" + {} shared", m.moe->shared_experts) : "",
                         m.moe->first_dense_layers ? fmt::format(", first {} layers dense", m.moe->first_dense_layers) : "");
  m.summary = fmt::format("{} imported from {} ({})", out.architecture.empty() ? model_type : out.architecture,
                          file_name, shape);
  return out;
}

HfImport import_hf_config(const std::string& path, const std::string& name) {
  // Bounded as a YAML input is (a device or a huge file is refused; a directory said to be one).
  return import_hf_config_text(input::read_file_bounded(path, input::limits::kMaxYamlFileBytes, "a JSON file",
                                                        input::Binary::stop),
                               path, name);
}

std::string to_model_yaml(const HfImport& m, const std::string& source_label) {
  const ModelSpec& s = m.model;
  std::ostringstream o;
  // A comment line holds the config's own strings (its model_type, architecture, file name): a line break or other
  // control byte in one would end the comment and be read as YAML, so they are written escaped.
  auto comment = [&o](const std::string& text) { o << '#' << comment_text(text) << '\n'; };
  comment(" Imported by `racksim models import` from " + source_label);
  comment(fmt::format(" (model_type {}, architectures {}). Each field's source is the config key it came from.",
                      m.model_type.empty() ? "?" : m.model_type, m.architecture.empty() ? "?" : m.architecture));
  comment(fmt::format(" Parameters (derived by racksim from these fields): {} total, {} active per token.",
                      pretty_count(total_params(s)), pretty_count(active_params(s))));
  for (const auto& w : m.warnings) comment(" warning: " + w);
  for (const auto& n : m.notes) comment(" note: " + n);
  o << "name: " << yaml_quoted(s.name) << "\n";
  o << "summary: " << yaml_quoted(s.summary) << "\n";
  o << "layers: " << s.layers << "\n";
  o << "hidden: " << s.hidden << "\n";
  o << "ffn_hidden: " << s.ffn_hidden << "\n";
  o << "heads: " << s.heads << "\n";
  o << "kv_heads: " << s.kv_heads << "\n";
  if (s.sources.count("head_dim")) o << "head_dim: " << s.head_dim << "\n";
  o << "vocab: " << s.vocab << "\n";
  o << "ffn: " << to_string(s.ffn) << "\n";
  o << "tied_embeddings: " << (s.tied_embeddings ? "true" : "false") << "\n";
  if (s.qk_norm) o << "qk_norm: true\n";
  if (s.moe) {
    o << "moe:\n";
    o << "  experts: " << s.moe->experts << "\n";
    o << "  top_k: " << s.moe->top_k << "\n";
    o << "  expert_ffn_hidden: " << s.moe->expert_ffn_hidden << "\n";
    o << "  shared_experts: " << s.moe->shared_experts << "\n";
    o << "  first_dense_layers: " << s.moe->first_dense_layers << "\n";
    if (s.moe->router_groups > 1) {
      o << "  router_groups: " << s.moe->router_groups << "\n";
      o << "  router_group_top_k: " << s.moe->router_group_top_k << "\n";
    }
  }
  if (s.mla) {
    o << "mla:\n";
    o << "  q_lora_rank: " << s.mla->q_lora_rank << "\n";
    o << "  kv_lora_rank: " << s.mla->kv_lora_rank << "\n";
    o << "  qk_nope_head_dim: " << s.mla->qk_nope_head_dim << "\n";
    o << "  qk_rope_head_dim: " << s.mla->qk_rope_head_dim << "\n";
    o << "  v_head_dim: " << s.mla->v_head_dim << "\n";
  }
  o << "sources:\n";
  static const std::vector<std::string> order = {
      "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn", "tied_embeddings",
      "qk_norm", "moe.experts", "moe.top_k", "moe.expert_ffn_hidden", "moe.shared_experts", "moe.first_dense_layers",
      "moe.router_groups", "moe.router_group_top_k", "mla.q_lora_rank", "mla.kv_lora_rank", "mla.qk_nope_head_dim",
      "mla.qk_rope_head_dim", "mla.v_head_dim"};
  for (const auto& k : order)
    if (auto it = s.sources.find(k); it != s.sources.end()) o << "  " << k << ": " << yaml_quoted(it->second) << "\n";
  return yaml_safe_text(o.str());
}

}  // namespace racksim::workloads::importers
