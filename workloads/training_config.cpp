#include "workloads/training_config.h"

namespace racksim::workloads {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"norm1",  "qkv",   "attn_scores", "attn",    "attn_out",
                                                 "norm2",  "mlp_gate", "mlp_up",   "mlp_act", "mlp_out"};
  return names;
}

const std::vector<std::string>& moe_activation_names() {
  static const std::vector<std::string> names = {"router", "dispatch", "expert_out"};
  return names;
}

std::string to_string(OptimizerSharding s) {
  switch (s) {
    case OptimizerSharding::none: return "none";
    case OptimizerSharding::zero1: return "zero1";
    case OptimizerSharding::zero2: return "zero2";
    case OptimizerSharding::fsdp: return "fsdp";
  }
  return "?";
}

std::string to_string(RecomputeMode m) {
  switch (m) {
    case RecomputeMode::none: return "none";
    case RecomputeMode::selective: return "selective";
    case RecomputeMode::full: return "full";
    case RecomputeMode::save_dots: return "save_dots";
    case RecomputeMode::names: return "names";
  }
  return "?";
}

std::string to_string(AttentionImpl a) { return a == AttentionImpl::flash ? "flash" : "materialized"; }
std::string to_string(Framework f) { return f == Framework::megatron ? "megatron" : "jax"; }

}  // namespace racksim::workloads
