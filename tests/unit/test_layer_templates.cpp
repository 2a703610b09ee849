// The builder's layer templates (workloads/training_graph/layer_templates.cpp): a graph built with
// layers stamped from earlier micro-batches is the graph built op by op, field by field, for every shipped
// scenario and for variants that exercise the state a layer carries (overlapped TP exchanges, pipelined
// reduce-scatters, recompute, context parallelism, fp8's first-micro-batch casts, interleaved pipelines).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

// Every op, tensor and name the same; returns the first difference, empty when none.
std::string difference(const OpGraph& a, const OpGraph& b) {
  if (a.ops.size() != b.ops.size()) return "op count " + std::to_string(a.ops.size()) + " vs " + std::to_string(b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    if (!same_op(a.ops[i], b.ops[i])) return "op " + std::to_string(i) + " " + a.op_name(i) + " vs " + b.op_name(i);
  if (a.tensors.size() != b.tensors.size()) return "tensor count";
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i], &y = b.tensors[i];
    if (a.tensor_name(i) != b.tensor_name(i) || x.rank != y.rank || x.category != y.category || x.bytes != y.bytes ||
        x.on_host != y.on_host)
      return "tensor " + std::to_string(i) + " " + a.tensor_name(i);
  }
  if (a.names.size() != b.names.size()) return "name table size";
  for (std::size_t i = 0; i < a.names.size(); ++i)
    if (a.names.str(static_cast<uint32_t>(i)) != b.names.str(static_cast<uint32_t>(i))) return "name " + std::to_string(i);
  if (a.resident != b.resident || a.notes != b.notes || a.ranks != b.ranks || a.xla_program != b.xla_program ||
      a.model_flops_per_step != b.model_flops_per_step || a.tokens_per_step != b.tokens_per_step)
    return "graph fields";
  return {};
}

// Builds the scenario's graph both ways and compares; returns the layers stamped.
int check(const sim::Scenario& sc, const std::string& label) {
  int stamped = 0;
  const OpGraph with = build_training_graph(sc.model, sc.training, sc.system.spec, BuildOptions{true, &stamped});
  const OpGraph without = build_training_graph(sc.model, sc.training, sc.system.spec, BuildOptions{false, nullptr});
  EXPECT_EQ(difference(with, without), "") << label;
  return stamped;
}

sim::Scenario small(const std::string& training_extra, const std::string& par, int gpus = 8) {
  return sim::load_scenario_text("system: {preset: h100-sxm, gpus: " + std::to_string(gpus) +
                                     "}\nmodel: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 2, "
                                     "vocab: 32768}\ntraining: {seq_len: 2048, global_batch: 16, micro_batch: 1, "
                                     "parallelism: " + par + training_extra + "}\n",
                                 "t.yaml");
}

}  // namespace

TEST(LayerTemplates, ShippedScenariosBuildTheSameGraph) {
  namespace fs = std::filesystem;
  const fs::path src = RACKSIM_SOURCE_DIR;
  int files = 0, stamped = 0;
  for (const char* dir : {"scenarios", "scenarios/validation/at_scale", "scenarios/seed_claims"}) {
    for (const auto& e : fs::directory_iterator(src / dir)) {
      if (e.path().extension() != ".yaml" || e.path().filename() == "suite.yaml") continue;
      sim::Scenario sc;
      try {
        sc = sim::load_scenario(e.path().string());
      } catch (const std::exception&) {
        continue;  // (not a scenario: a suite or a sweep)
      }
      if (sc.model.moe) continue;  // (MoE layers are never stamped; their graphs are the largest to build)
      stamped += check(sc, e.path().string());
      ++files;
    }
  }
  EXPECT_GT(files, 30);
  EXPECT_GT(stamped, 1000);  // the templates are used, not only checked
}

TEST(LayerTemplates, VariantsBuildTheSameGraph) {
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"", "{tp: 2, pp: 2}"},
      {", recompute: selective", "{tp: 2, pp: 2}"},
      {", recompute: full", "{tp: 4, pp: 2}"},
      {", tp_comm_overlap: true, sequence_parallel: true", "{tp: 4, pp: 2}"},
      {", tp_comm_overlap: true, sequence_parallel: true, recompute: full", "{tp: 4, pp: 1}"},
      {", sequence_parallel: false", "{tp: 2, pp: 2, vp: 2}"},
      {", attention: materialized", "{tp: 2, pp: 2}"},
      {", attention: materialized, recompute: full", "{tp: 2, pp: 1}"},
      {", precision: fp8", "{tp: 2, pp: 2}"},
      {", precision: fp8, tp_comm_overlap: true, sequence_parallel: true", "{tp: 2, pp: 2, vp: 2}"},
      {", optimizer_sharding: zero1, overlap_param_gather: true, overlap_grad_reduce: true", "{tp: 2, pp: 2, vp: 2}"},
      {", optimizer_sharding: zero2", "{tp: 2, pp: 2}"},
      {", optimizer_sharding: fsdp", "{tp: 2, pp: 2}"},
      {", cp_comm: p2p", "{tp: 2, cp: 2, pp: 2}"},
      {", cp_comm: all_gather", "{tp: 2, cp: 2, pp: 1}"},
      {", cp_comm: a2a", "{tp: 1, cp: 2, pp: 2}"},
      {", hidden_dropout: 0.1, attention_dropout: 0.1", "{tp: 2, pp: 2}"},
      {", cuda_graphs: true", "{tp: 2, pp: 2}"},
      // Megatron's NaN checks place host waits at micro-batch ends and gradient-bucket closes (review11's list).
      {", check_for_nan: false", "{tp: 2, pp: 2}"},
      {", overlap_grad_reduce: true, optimizer_sharding: zero1, check_for_nan: true", "{tp: 2, pp: 2, vp: 2}"},
  };
  int stamped = 0;
  for (const auto& [extra, par] : variants) stamped += check(small(extra, par), extra + " " + par);
  EXPECT_GT(stamped, 100);
}
