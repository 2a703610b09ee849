// Builds the training step of one rank role as an OpGraph: forward, backward (with
// recomputation and activation offload per the recompute policy), gradient synchronisation
// per the optimizer-sharding mode, and the optimizer.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "hardware_models/system_spec.h"
#include "workloads/model_spec.h"
#include "workloads/op_graph.h"
#include "workloads/training_config.h"

namespace racksim::workloads {

// FLOPs the report calls "model FLOPs": 6·N·tokens plus causal attention
// (6·B·L·S²·D per step, i.e. 12·L·S²·D per sequence halved by the causal mask), no recompute.
double model_flops_per_step(const ModelSpec& m, const TrainingConfig& t);

// Bytes per element of the tensors the graph moves.
struct Precision {
  double matmul_input_bytes;   // weights/activations entering tensor cores (2 bf16, 1 fp8, ~0.5 nvfp4)
  double activation_bytes;     // saved activations (bf16)
  double master_weight_bytes;  // fp32
  double grad_bytes;           // the gradient buffer the backward accumulates into (Megatron's main_grad): fp32, fp16 under --fp16
  double main_grad_bytes;      // the gradients the optimizer reads (fp32; under --fp16 the optimizer's fp32 copy of its shard)
  double optimizer_bytes;      // Adam m and v: fp32 each, or bf16 each (training.adam_moments)
  double grad_reduce_bytes;    // data-parallel reduction dtype of the layers' and the head's weight gradients
  double embedding_grad_reduce_bytes;  // the same for the input embedding's gradient
  double head_grad_reduce_bytes;       // the same for the output layer's gradient
  double head_gather_bytes;            // the output layer's parameter all-gather dtype
  double param_gather_bytes;   // parameter all-gather dtype (bf16; fp8 where frameworks do it)
};
Precision precision_of(const TrainingConfig& t);

// Every pipeline stage is built (one simulated rank each); other ranks are symmetric.
OpGraph build_training_graph(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys);

// layer_templates: a layer's forward or backward that begins from the same builder state as an earlier
// micro-batch's is copied from it (the same graph, built with less work); false emits every op (tests
// compare the two). stamped_layers, when given, counts the copies.
struct BuildOptions {
  bool layer_templates = true;
  int* stamped_layers = nullptr;
};
OpGraph build_training_graph(const ModelSpec& m, const TrainingConfig& t, const hw::SystemSpec& sys,
                             const BuildOptions& options);

// The activation names a policy keeps in HBM / sends to host for one layer.
struct SavePlan {
  std::vector<std::string> saved;
  std::vector<std::string> offloaded;
  bool saves(std::string_view name) const { return std::find(saved.begin(), saved.end(), name) != saved.end(); }
  bool offloads(std::string_view name) const { return std::find(offloaded.begin(), offloaded.end(), name) != offloaded.end(); }
  bool keeps(std::string_view name) const { return saves(name) || offloads(name); }  // in HBM or on the host
};
SavePlan save_plan(const RecomputePolicy& p, bool materialized_attention, bool moe_layer);

}  // namespace racksim::workloads
