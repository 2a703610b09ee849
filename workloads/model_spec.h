// The architecture of a decoder-only transformer: from a preset (workloads/models/NAME.yaml)
// or from inline fields in a scenario. Parameter and FLOP counts are derived here, once.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/names.h"
#include "input/yaml_reader.h"

namespace racksim::workloads {

enum class FfnKind { swiglu, gelu };
inline constexpr std::array<sim::EnumName<FfnKind>, 2> kFfnKindNames = {{{FfnKind::swiglu, "swiglu"}, {FfnKind::gelu, "gelu"}}};
std::string to_string(FfnKind f);

struct MoeSpec {
  int experts = 0;             // routed experts
  int top_k = 1;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  int first_dense_layers = 0;  // leading layers that keep a dense FFN of ffn_hidden
  // Group-limited routing (DeepSeek-V3: the experts in router_groups groups, a token's top_k chosen within the
  // router_group_top_k best groups). 1: a plain top-k router.
  int router_groups = 1;
  int router_group_top_k = 1;
};

// Why a group-limited routing cannot run as Megatron-Core runs it (moe_utils.py group_limited_topk: the best
// top_k / group_top_k scores of each group rank the groups, the top_k chosen within the group_top_k best), or nothing:
// the groups must divide the experts, 1 <= group_top_k <= groups, group_top_k <= top_k, and top_k must fit in the
// chosen groups. groups <= 1 is a plain top-k router.
std::optional<std::string> router_groups_problem(int experts, int top_k, int groups, int group_top_k);

// DeepSeek multi-head latent attention (low-rank Q and KV projections).
struct MlaSpec {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

struct ModelSpec {
  std::string name;      // preset name or "inline"
  std::string summary;
  int layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;      // default hidden / heads
  int vocab = 0;
  FfnKind ffn = FfnKind::swiglu;
  bool tied_embeddings = false;
  // RMSNorm over each query and key head before attention (Qwen3's q_norm/k_norm; Megatron --qk-layernorm).
  bool qk_norm = false;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  double published_params = 0;         // for cross-checking; 0 = not given
  double published_active_params = 0;
  std::map<std::string, std::string> sources;

  // Indices past the last layer are multi-token-prediction layers (training.mtp_layers): the last layer's kind.
  bool is_moe_layer(int layer) const { return moe && std::min(layer, layers - 1) >= moe->first_dense_layers; }
};

// Per-layer weight counts (elements), used by the graph builder and the memory model.
struct LayerParams {
  double attention = 0;   // Q, K, V, O projections (MLA: its up- and output projections), split over tp
  // MLA's down projections (W_dq, W_dkv with the rope key): duplicated on every tp rank under Transformer Engine
  // (multi_latent_attention.py builds them TELinear parallel_mode='duplicated').
  double attention_replicated = 0;
  double mlp = 0;         // dense FFN, or shared experts in an MoE layer
  double experts = 0;     // all routed experts of an MoE layer
  double router = 0;
  double norms = 0;       // norm gains (MLA's two latent norms too), replicated over tp
  double total() const { return attention + attention_replicated + mlp + experts + router + norms; }
};

LayerParams layer_params(const ModelSpec& m, int layer);
double embedding_params(const ModelSpec& m);  // input embedding + output projection (once if tied) + final norm
double total_params(const ModelSpec& m);
// Parameters touched per token: routed experts count top_k of them.
double active_params(const ModelSpec& m);

std::string models_dir();
std::vector<std::string> list_model_presets();

// Reads model fields from `node` (strict). `allow_meta` accepts name/summary/params/sources
// (preset files); inline scenario models give only the architecture.
ModelSpec parse_model(const input::Node& node, bool is_preset_file);
// Whether a model preset `name` is a file path (contains '/' or ends in .yaml or .yml) rather than the name of a shipped
// one: the rule load_model_preset reads it by.
inline bool names_model_file(const std::string& name) {
  return name.find('/') != std::string::npos || name.ends_with(".yaml") || name.ends_with(".yml");
}
// Loads workloads/models/NAME.yaml; records an error at `where_named` if unknown.
bool load_model_preset(const std::string& name, const input::Node& where_named,
                       const std::shared_ptr<input::LoadContext>& ctx, ModelSpec& out);
// Cross-field checks (heads divisible by kv_heads, ...) recorded at `where`.
void validate_model(const ModelSpec& m, const input::Node& where);

}  // namespace racksim::workloads
