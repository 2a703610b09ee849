#include "workloads/training_config.h"

namespace racksim::workloads {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"norm1",  "qkv",   "attn_scores", "attn",    "attn_out",
                                                 "norm2",  "mlp_gate", "mlp_up",   "mlp_act", "mlp_out"};
  return names;
}

const std::vector<std::string>& moe_activation_names() {
  static const std::vector<std::string> names = {"router", "dispatch", "expert_out", "expert_act"};
  return names;
}

std::string to_string(OptimizerSharding s) { return std::string(sim::name_in(kOptimizerShardingNames, s)); }
std::string to_string(RecomputeMode m) { return std::string(sim::name_in(kRecomputeModeNames, m)); }
std::string to_string(AttentionImpl a) { return std::string(sim::name_in(kAttentionImplNames, a)); }
std::string to_string(Framework f) { return std::string(sim::name_in(kFrameworkNames, f)); }
std::string to_string(MoeDispatcher d) { return std::string(sim::name_in(kMoeDispatcherNames, d)); }
std::string to_string(CpComm c) { return std::string(sim::name_in(kCpCommNames, c)); }
std::string to_string(Fp8Recipe r) { return std::string(sim::name_in(kFp8RecipeNames, r)); }
std::string to_string(Fp8Casts c) { return std::string(sim::name_in(kFp8CastsNames, c)); }
std::string to_string(TransformerImpl i) { return std::string(sim::name_in(kTransformerImplNames, i)); }
std::string to_string(AdamMoments a) { return std::string(sim::name_in(kAdamMomentsNames, a)); }

}  // namespace racksim::workloads

namespace racksim::workloads {

namespace {

// MoE layers: MaxText names the experts' gate/up/down outputs mlpwi_0/mlpwi_1/mlpwo as the dense MLP's
// (layers/moe.py), so a policy saving those keeps every expert's intermediates; racksim's MoE layer
// names the router logits, the dispatched tokens, the experts' gate/up output (expert_out; in JAX mode with
// the down projection's output, as MaxText's names) and their activation's output (expert_act).
const char* kMoeExperts =
    "MoE layers: the policy keeps the experts' gate/up/down outputs (mlpwi_0, mlpwi_1, mlpwo), racksim's expert_out "
    "(in JAX mode the gate, up and down outputs); the experts' activation (expert_act) is recomputed";

}  // namespace

const std::vector<std::string>& recompute_alias_names() {
  static const std::vector<std::string> names = {
      "minimal",        "minimal_with_context",          "minimal_flash",      "save_dot_with_context_except_mlp",
      "save_dot_except_mlpwi", "save_dot_except_mlp",    "save_qkv_proj",      "save_out_proj",
      "qkv_proj_offloaded",    "minimal_offloaded",      "nothing_saveable",   "everything_saveable",
      "dots_saveable",         "checkpoint_dots",        "dots_with_no_batch_dims_saveable",
      "checkpoint_dots_with_no_batch_dims"};
  return names;
}

std::optional<RecomputeAlias> recompute_alias(const std::string& name, bool moe) {
  RecomputeAlias a;
  auto save = [&](std::vector<std::string> names) {
    a.policy.mode = RecomputeMode::names;
    a.policy.save = std::move(names);
  };
  if (name == "nothing_saveable") {
    a.policy.mode = RecomputeMode::full;
    a.source = "JAX nothing_saveable: nothing inside the layer";
  } else if (name == "everything_saveable") {
    a.policy.mode = RecomputeMode::none;
    a.source = "JAX everything_saveable: every intermediate";
  } else if (name == "minimal" || name == "dots_with_no_batch_dims_saveable" ||
             name == "checkpoint_dots_with_no_batch_dims") {
    a.policy.mode = RecomputeMode::save_dots;
    a.source = name == "minimal" ? "MaxText minimal: query/key/value/qkv/kv_proj, out_proj, mlpwi_0, mlpwi_1, mlpwi, mlpwo"
                                 : "JAX " + name + ": outputs of matmuls without batch dimensions (the weight matmuls)";
    if (moe && name == "minimal") a.difference = kMoeExperts;
  } else if (name == "minimal_with_context" || name == "minimal_flash") {
    save({"qkv", "attn", "attn_out", "mlp_gate", "mlp_up"});
    if (moe) a.policy.save.push_back("expert_out"), a.difference = kMoeExperts;
    a.source = "MaxText " + name + ": minimal's names and the attention output (context)";
  } else if (name == "save_dot_with_context_except_mlp") {
    save({"qkv", "attn", "attn_out"});
    a.source = "MaxText save_dot_with_context_except_mlp: query/key/value/qkv/kv_proj, context, out_proj";
  } else if (name == "save_dot_except_mlpwi") {
    // mlpwo is the MLP's output: racksim keeps it as the next layer's input under every policy.
    save({"qkv", "attn_out"});
    if (moe) a.policy.save.push_back("expert_out"), a.difference = kMoeExperts;
    a.source = "MaxText save_dot_except_mlpwi: query/key/value/qkv/kv_proj, out_proj, mlpwo";
  } else if (name == "save_dot_except_mlp") {
    save({"qkv", "attn_out"});
    a.source = "MaxText save_dot_except_mlp: query/key/value/qkv/kv_proj, out_proj";
  } else if (name == "save_qkv_proj") {
    save({"qkv"});
    a.source = "MaxText save_qkv_proj: query/key/value/qkv/kv_proj";
  } else if (name == "save_out_proj") {
    save({"attn_out"});
    a.source = "MaxText save_out_proj: out_proj";
  } else if (name == "qkv_proj_offloaded") {
    a.policy.mode = RecomputeMode::names;
    a.policy.offload = {"qkv"};
    a.source = "MaxText qkv_proj_offloaded: query/key/value/kv_proj offloaded to host, nothing else saved";
  } else if (name == "minimal_offloaded") {
    a.policy.mode = RecomputeMode::names;
    a.policy.offload = {"qkv", "attn_out", "mlp_gate", "mlp_up"};
    if (moe) a.policy.offload.push_back("expert_out"), a.difference = kMoeExperts;
    a.source = "MaxText minimal_offloaded: minimal's names offloaded to host, nothing saved on the device";
  } else if (name == "dots_saveable" || name == "checkpoint_dots") {
    save({"qkv", "attn_scores", "attn", "attn_out", "mlp_gate", "mlp_up"});
    if (moe) a.policy.save.insert(a.policy.save.end(), {"router", "expert_out"});
    a.source = "JAX " + name + ": outputs of every matmul, the attention's two batched ones (scores, context) included";
    a.difference = "under flash attention the scores are never written (racksim saves the kernel's output, attn); a "
                   "fused attention kernel is not a matmul to JAX, so whether its output is saved depends on the kernel";
  } else {
    return std::nullopt;
  }
  return a;
}

}  // namespace racksim::workloads
