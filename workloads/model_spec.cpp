#include "workloads/model_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/text.h"
#include "input/file_cache.h"
#include "input/files.h"

namespace racksim::workloads {

std::string to_string(FfnKind f) { return std::string(sim::name_in(kFfnKindNames, f)); }

std::optional<std::string> router_groups_problem(int experts, int top_k, int groups, int group_top_k) {
  if (groups <= 1) return std::nullopt;
  if (experts % groups != 0) return fmt::format("router_groups ({}) does not divide experts ({})", groups, experts);
  if (group_top_k < 1 || group_top_k > groups)
    return fmt::format("router_group_top_k ({}) is not between 1 and router_groups ({})", group_top_k, groups);
  if (group_top_k > top_k) return fmt::format("router_group_top_k ({}) exceeds top_k ({})", group_top_k, top_k);
  if (top_k > group_top_k * (experts / groups))
    return fmt::format("top_k ({}) exceeds the experts of the router_group_top_k ({}) groups chosen ({} each)", top_k,
                       group_top_k, experts / groups);
  return std::nullopt;
}

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;

LayerParams layer_params(const ModelSpec& m, int layer) {
  LayerParams p;
  const double h = m.hidden;
  const double hd = m.head_dim;
  if (m.mla) {
    // DeepSeek MLA: Q = W_uq(W_dq x) with rope/nope parts; KV compressed to kv_lora_rank plus a
    // shared rope key; per-head up-projections for K (nope) and V; output projection.
    const auto& a = *m.mla;
    const double qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
    p.attention = a.q_lora_rank * m.heads * qk_head                        // Q up
                  + a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim)  // K/V up
                  + m.heads * a.v_head_dim * h;                          // output
    p.attention_replicated = h * a.q_lora_rank                           // Q down
                             + h * (a.kv_lora_rank + a.qk_rope_head_dim);  // KV down + rope key
  } else {
    p.attention = h * (m.heads * hd)          // Q
                  + 2.0 * h * (m.kv_heads * hd)  // K, V
                  + (m.heads * hd) * h;       // O
  }
  const double ffn_mats = m.ffn == FfnKind::swiglu ? 3.0 : 2.0;
  if (m.is_moe_layer(layer)) {
    const auto& e = *m.moe;
    p.experts = static_cast<double>(e.experts) * ffn_mats * h * e.expert_ffn_hidden;
    p.mlp = static_cast<double>(e.shared_experts) * ffn_mats * h * e.expert_ffn_hidden;
    p.router = h * e.experts;
  } else {
    p.mlp = ffn_mats * h * m.ffn_hidden;
  }
  p.norms = 2.0 * h;  // RMSNorm gains before attention and before the MLP
  if (m.qk_norm) p.norms += 2.0 * hd;  // one gain vector for the query heads, one for the key heads
  if (m.mla) p.norms += m.mla->q_lora_rank + m.mla->kv_lora_rank;  // MLA's two latent norms
  return p;
}

double embedding_params(const ModelSpec& m) {
  const double table = static_cast<double>(m.vocab) * m.hidden;
  return (m.tied_embeddings ? table : 2.0 * table) + m.hidden;  // + final norm
}

double total_params(const ModelSpec& m) {
  double t = embedding_params(m);
  for (int l = 0; l < m.layers; ++l) t += layer_params(m, l).total();
  return t;
}

double active_params(const ModelSpec& m) {
  double t = embedding_params(m);
  for (int l = 0; l < m.layers; ++l) {
    LayerParams p = layer_params(m, l);
    if (m.is_moe_layer(l)) p.experts *= static_cast<double>(m.moe->top_k) / m.moe->experts;
    t += p.total();
  }
  return t;
}

std::string models_dir() { return input::data_dir() + "/workloads/models"; }

std::vector<std::string> list_model_presets() { return input::list_yaml_names(models_dir()); }

namespace {
template <class T, class U>
void set_if(std::optional<U> v, T& field) {
  if (v) field = static_cast<T>(*v);
}
}  // namespace

ModelSpec parse_model(const Node& node, bool is_preset_file) {
  ModelSpec m;
  m.name = "inline";
  MapReader r(node);
  if (!r.ok()) return m;
  if (!is_preset_file) set_if(r.string("name"), m.name);  // a label (a report's embedded scenario names its model)
  if (is_preset_file) {
    set_if(r.string("name", true), m.name);
    set_if(r.string("summary"), m.summary);
    set_if(r.number("params", false, 0, 1e15), m.published_params);
    set_if(r.number("active_params", false, 0, 1e15), m.published_active_params);
    if (auto s = r.get("sources", true)) {
      if (s->yaml().IsMap())
        for (auto it = s->yaml().begin(); it != s->yaml().end(); ++it)
          if (it->first.IsScalar() && it->second.IsScalar()) m.sources[it->first.Scalar()] = it->second.Scalar();
    }
  }
  constexpr int64_t kBig = 100'000'000;
  set_if(r.integer("layers", true, 1, 100000), m.layers);
  set_if(r.integer("hidden", true, 1, kBig), m.hidden);
  set_if(r.integer("ffn_hidden", true, 1, kBig), m.ffn_hidden);
  set_if(r.integer("heads", true, 1, 1'000'000), m.heads);
  m.kv_heads = m.heads;
  set_if(r.integer("kv_heads", false, 1, 1'000'000), m.kv_heads);
  set_if(r.integer("head_dim", false, 1, 1'000'000), m.head_dim);
  set_if(r.integer("vocab", true, 1, kBig), m.vocab);
  set_if(r.choice("ffn", kFfnKindNames), m.ffn);
  set_if(r.boolean("tied_embeddings"), m.tied_embeddings);
  set_if(r.boolean("qk_norm"), m.qk_norm);
  if (auto e = r.get("moe")) {
    MapReader er(*e);
    MoeSpec moe;
    set_if(er.integer("experts", true, 1, 1'000'000), moe.experts);
    set_if(er.integer("top_k", true, 1, 1'000'000), moe.top_k);
    set_if(er.integer("expert_ffn_hidden", true, 1, kBig), moe.expert_ffn_hidden);
    set_if(er.integer("shared_experts", false, 0, 1'000'000), moe.shared_experts);
    set_if(er.integer("first_dense_layers", false, 0, 100000), moe.first_dense_layers);
    set_if(er.integer("router_groups", false, 1, 1'000'000), moe.router_groups);
    set_if(er.integer("router_group_top_k", false, 1, 1'000'000), moe.router_group_top_k);
    er.finish();
    if (er.ok()) {
      if (moe.top_k > moe.experts) e->child("top_k").error(fmt::format("top_k ({}) exceeds experts ({})", moe.top_k, moe.experts));
      else if (moe.router_group_top_k > 1 && moe.router_groups <= 1)
        e->child("router_group_top_k").error("router_group_top_k without router_groups > 1");
      else if (auto why = router_groups_problem(moe.experts, moe.top_k, moe.router_groups, moe.router_group_top_k))
        e->child(moe.experts % moe.router_groups != 0 ? "router_groups" : "router_group_top_k").error(*why);
      m.moe = moe;
    }
  }
  if (auto a = r.get("mla")) {
    MapReader ar(*a);
    MlaSpec mla;
    set_if(ar.integer("q_lora_rank", true, 1, kBig), mla.q_lora_rank);
    set_if(ar.integer("kv_lora_rank", true, 1, kBig), mla.kv_lora_rank);
    set_if(ar.integer("qk_nope_head_dim", true, 1, kBig), mla.qk_nope_head_dim);
    set_if(ar.integer("qk_rope_head_dim", true, 0, kBig), mla.qk_rope_head_dim);
    set_if(ar.integer("v_head_dim", true, 1, kBig), mla.v_head_dim);
    ar.finish();
    if (ar.ok()) m.mla = mla;
  }
  r.finish();
  if (m.head_dim == 0 && m.heads > 0) m.head_dim = m.hidden / m.heads;
  return m;
}

void validate_model(const ModelSpec& m, const Node& where) {
  if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0)
    where.child("kv_heads").error(fmt::format("heads ({}) must be a multiple of kv_heads ({})", m.heads, m.kv_heads));
  // head_dim defaults to hidden / heads, which must then be exact.
  if (m.heads > 0 && !m.mla && m.hidden % m.heads != 0 && m.head_dim == m.hidden / m.heads)
    where.child("heads").error(fmt::format("hidden ({}) is not divisible by heads ({}); give head_dim", m.hidden, m.heads));
  if (m.qk_norm && m.mla)
    where.child("qk_norm").error("qk_norm is for per-head query/key norms; MLA's latent norms are part of mla");
  // (Equal leaves no MoE layer: the scenario would take expert parallelism, dispatchers and routing for a dense model.)
  if (m.moe && m.moe->first_dense_layers > m.layers)
    where.child("moe").error(fmt::format("first_dense_layers ({}) exceeds layers ({})", m.moe->first_dense_layers, m.layers));
  else if (m.moe && m.moe->first_dense_layers == m.layers)
    where.child("moe").error(fmt::format("first_dense_layers ({}) equals layers: no layer is a mixture of experts; "
                                         "leave moe out for a dense model", m.layers));
}

bool load_model_preset(const std::string& name, const Node& where_named, const std::shared_ptr<input::LoadContext>& ctx,
                       ModelSpec& out) {
  // A name under workloads/models/, or a path to a model file (contains '/' or ends in .yaml,
  // relative to the file that names it), e.g. one written by `racksim models import`.
  const bool is_path = names_model_file(name);
  std::string path = models_dir() + "/" + name + ".yaml";
  if (is_path) {
    path = input::path_beside(where_named.file(), name);
    if (const auto why = input::why_not_a_file(path, "model")) {
      where_named.error(*why, input::DiagnosticKind::unknown_name);
      return false;
    }
  }
  std::error_code ec;  // a name the file system refuses (too long, ...) is an unknown model
  if (!fs::exists(path, ec)) {
    const auto names = list_model_presets();
    std::string msg = fmt::format("unknown model preset '{}'", name);
    if (auto near = sim::nearest(name, names, 4)) msg += fmt::format("; did you mean '{}'?", *near);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    msg += fmt::format(" (available: {})", list);
    where_named.error(msg, input::DiagnosticKind::unknown_name);
    return false;
  }
  // A preset loaded before without errors (and unchanged since) is reused as it was.
  static input::FileCache<ModelSpec> loaded;
  if (auto m = loaded.get(path)) {
    out = std::move(*m);
    return true;
  }
  auto saved = std::move(ctx->grafts);
  ctx->grafts.clear();
  const std::size_t errors_before = ctx->diag->size();
  auto root = input::load_yaml_file(path, ctx);
  if (root) {
    out = parse_model(*root, true);
    validate_model(out, *root);
    if (ctx->diag->size() == errors_before)
      loaded.put(path, out);
    else
      input::forget_parsed_yaml(path);
  }
  ctx->grafts = std::move(saved);
  return root.has_value();
}

}  // namespace racksim::workloads
