// FSDP under a pipeline schedule (training.fsdp_pipeline_gather, training.fsdp_grad_reduce).
// fsdp_pipeline_gather: per_step gathers a stage's weights once, at the
// start of the step; per_microbatch (Llama 3's: FSDP's reshard after backward kept, reshard after forward off) reshards
// a layer after each of its backwards, so the next forward or backward of that layer gathers again. In 1F1B every
// backward but the last is followed by a use of its layer: m - 1 regathers per layer and step, each of the layer's
// weights once more over the data-parallel group. The gradients reduce once either way.
// fsdp_grad_reduce: per_step reduces them in the last backward; per_microbatch (FSDP's own behaviour, Llama 3's) after
// every backward, in fp32, each layer's whole gradient held only until its reduce-scatter.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/engine/replay.h"
#include "sim/run/run.h"
#include "sim/scenario/limits.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

// 4 layers on 2 stages (2 per rank), 4 micro-batches, data parallel 4 (FSDP over 4 ranks).
sim::Scenario scenario(const std::string& extra, const std::string& pipeline = "pp: 2, vp: 1") {
  return racksim::testing::scenario_from_text(
      "system: {preset: h100-sxm, gpus: 8}\n"
      "model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32000, ffn: swiglu}\n"
      "training: {seq_len: 1024, global_batch: 16, micro_batch: 1, optimizer_sharding: fsdp, recompute: none, "
      "parallelism: {tp: 1, " + pipeline + ", dp: 4}" + extra + "}\n",
      "f.yaml");
}

struct Counts {
  std::map<int, int> regathers;  // rank -> the layers' regather collectives
  std::map<int, int> embedding, head;  // rank -> the embedding's and the output layer's
  double regather_bytes = 0;     // rank 0's layers'
  int grad_reductions = 0;       // rank 0's gradient collectives
};
Counts counts(const OpGraph& g) {
  Counts c;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind != OpKind::collective) continue;
    const std::string n = g.op_name(static_cast<OpId>(i));
    if (n.find("embedding.regather.param_all_gather") != std::string::npos) {
      ++c.embedding[op.rank];
    } else if (n.find("head.regather.param_all_gather") != std::string::npos) {
      ++c.head[op.rank];
    } else if (n.find("regather.param_all_gather") != std::string::npos) {
      ++c.regathers[op.rank];
      if (op.rank == 0) c.regather_bytes += op.coll_bytes;
    }
    if (op.rank == 0 && n.find("grad.") != std::string::npos) ++c.grad_reductions;
  }
  return c;
}

// Both halves per micro-batch, the data-parallel gathers on communicators of their own or not.
sim::Scenario per_microbatch(bool own_gather_communicator) {
  return scenario(std::string(", fsdp_pipeline_gather: per_microbatch, fsdp_grad_reduce: per_microbatch, "
                              "dp_all_gather_group: ") + (own_gather_communicator ? "separate" : "shared"));
}

}  // namespace

TEST(FsdpPipeline, PerMicrobatchRegathersEachLayerAfterEveryBackwardButTheLast) {
  const auto step = scenario("");
  const auto mb = scenario(", fsdp_pipeline_gather: per_microbatch");
  const OpGraph gs = build_training_graph(step.model, step.training, step.system.spec);
  const OpGraph gm = build_training_graph(mb.model, mb.training, mb.system.spec);
  const Counts cs = counts(gs), cm = counts(gm);
  EXPECT_TRUE(cs.regathers.empty());
  const int m = 4, layers_per_rank = 2;
  for (const auto& [rank, n] : cm.regathers) EXPECT_EQ(n, (m - 1) * layers_per_rank) << "rank " << rank;
  // FSDP wraps the embedding and the output layer too: each is resharded after its backward and gathered again.
  EXPECT_EQ(cm.embedding, (std::map<int, int>{{0, m - 1}}));
  EXPECT_EQ(cm.head, (std::map<int, int>{{1, m - 1}}));
  // Each regather moves one layer's weights in bf16: q, k, v, o (4 h^2), the SwiGLU's three (3 h f) and the two norms.
  const double h = 1024, f = 4096, layer_params = 4 * h * h + 3 * h * f + 2 * h;
  EXPECT_DOUBLE_EQ(cm.regather_bytes, (m - 1) * layers_per_rank * layer_params * 2);
  // The gradients are reduced once, as under per_step.
  EXPECT_EQ(cm.grad_reductions, cs.grad_reductions);
  // The step is no faster, and the report echoes the key.
  const auto rs = sim::simulate(step), rm = sim::simulate(mb);
  EXPECT_GE(rm.report["step_time_s"].get<double>(), rs.report["step_time_s"].get<double>());
  EXPECT_EQ(rm.report["scenario"]["training"]["fsdp_pipeline_gather"], "per_microbatch");
  bool noted = false;
  for (const auto& w : rm.report["warnings"])
    noted = noted || w.get<std::string>().find("fsdp with pp 2: a layer's weights are resharded") != std::string::npos;
  EXPECT_TRUE(noted);
}

// Interleaved (vp 2): each of the rank's layers is still used again after every backward but its last.
TEST(FsdpPipeline, PerMicrobatchUnderTheInterleavedSchedule) {
  const auto mb = scenario(", fsdp_pipeline_gather: per_microbatch", "pp: 2, vp: 2");
  const Counts c = counts(build_training_graph(mb.model, mb.training, mb.system.spec));
  for (const auto& [rank, n] : c.regathers) EXPECT_EQ(n, 3 * 2) << "rank " << rank;  // (m - 1) x 2 layers, one per chunk
}

// Without a pipeline, or without FSDP, the key changes nothing and the report says so.
TEST(FsdpPipeline, TheKeyNeedsFsdpUnderAPipeline) {
  const auto flat = scenario(", fsdp_pipeline_gather: per_microbatch", "pp: 1, vp: 1, cp: 2");
  const auto base = scenario("", "pp: 1, vp: 1, cp: 2");
  const auto rf = sim::simulate(flat), rb = sim::simulate(base);
  EXPECT_DOUBLE_EQ(rf.report["step_time_s"].get<double>(), rb.report["step_time_s"].get<double>());
  bool noted = false;
  for (const auto& w : rf.report["warnings"])
    noted = noted || w.get<std::string>().find("training.fsdp_pipeline_gather is FSDP's gather under a pipeline") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_NE(racksim::testing::scenario_error_text(
                "system: {preset: h100-sxm, gpus: 8}\nmodel: {preset: llama3-8b}\ntraining: {seq_len: 1024, "
                "global_batch: 16, fsdp_pipeline_gather: per_layer}\n",
                "f.yaml")
                .find("per_step"),
            std::string::npos);
}

// Gradients reduced per micro-batch: every backward reduce-scatters its layers' (and the embedding's) gradients in fp32
// over the data-parallel group, m times per step where per_step does it once; the resident gradients are the fp32
// shard (1/dp), so the step's gradient memory falls.
TEST(FsdpPipeline, GradReducePerMicrobatchReduceScattersAfterEveryBackward) {
  const auto step = scenario("");
  const auto mb = scenario(", fsdp_grad_reduce: per_microbatch");
  const OpGraph gs = build_training_graph(step.model, step.training, step.system.spec);
  const OpGraph gm = build_training_graph(mb.model, mb.training, mb.system.spec);
  const auto reductions = [](const OpGraph& g) {
    std::pair<int, double> r{0, 0.0};  // rank 0's gradient reduce-scatters and their bytes
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (op.kind != OpKind::collective || op.rank != 0) continue;
      const std::string n = g.op_name(static_cast<OpId>(i));
      if (n.find("grad.") == std::string::npos || op.coll != hw::CollectiveOp::reduce_scatter) continue;
      ++r.first;
      r.second += op.coll_bytes;
    }
    return r;
  };
  const int m = 4;
  const double h = 1024, f = 4096, layer_params = 4 * h * h + 3 * h * f + 2 * h, embedding_params = 32000 * h;
  const double once = (2 * layer_params + embedding_params) * 4;  // rank 0: two layers and the embedding, fp32
  const auto [ns, bs] = reductions(gs);
  const auto [nm, bm] = reductions(gm);
  EXPECT_EQ(ns, 3);
  EXPECT_DOUBLE_EQ(bs, once);
  EXPECT_EQ(nm, m * 3);
  EXPECT_DOUBLE_EQ(bm, m * once);
  const auto rs = sim::simulate(step), rm = sim::simulate(mb);
  const double grads_step = rs.report["memory_breakdown_bytes"]["gradients"].get<double>();
  const double grads_mb = rm.report["memory_breakdown_bytes"]["gradients"].get<double>();
  // per_step holds the stage's whole fp32 gradients (rank 0: two layers and the embedding); per_microbatch the fp32
  // shard of them and at most the whole gradients the reduce-scatter queue holds.
  EXPECT_GE(grads_step, once);
  EXPECT_LT(grads_mb, grads_step);
  // At its peak a rank holds at least its fp32 shard (1/dp) and one module's whole fp32 gradient waiting for its
  // reduce-scatter (a layer's, or the embedding's on rank 0).
  EXPECT_GE(grads_mb, once / 4 + layer_params * 4);
  EXPECT_EQ(rm.report["scenario"]["training"]["fsdp_grad_reduce"], "per_microbatch");
  bool noted = false;
  for (const auto& w : rm.report["warnings"])
    noted = noted || w.get<std::string>().find("reduce-scattered after every backward") != std::string::npos;
  EXPECT_TRUE(noted);
  // Without a pipeline the key changes nothing, and the report says so.
  const auto flat = sim::simulate(scenario(", fsdp_grad_reduce: per_microbatch", "pp: 1, vp: 1, cp: 2"));
  const auto base = sim::simulate(scenario("", "pp: 1, vp: 1, cp: 2"));
  EXPECT_DOUBLE_EQ(flat.report["step_time_s"].get<double>(), base.report["step_time_s"].get<double>());
  noted = false;
  for (const auto& w : flat.report["warnings"])
    noted = noted || w.get<std::string>().find("training.fsdp_grad_reduce is FSDP's gradient reduction") != std::string::npos;
  EXPECT_TRUE(noted);
}

// One communicator per data-parallel group (training.dp_all_gather_group shared, Megatron's and PyTorch's default): its
// operations run one after another in issue order, so a regather issued after a backward's reduce-scatter starts only
// once that has ended, and no two of the group's collectives on a rank overlap in time. With the gathers on
// communicators of their own (separate: Megatron's --create-all-gather-group) a gather runs beside a reduce-scatter.
TEST(FsdpPipeline, OneDataParallelCommunicatorRunsItsCollectivesInIssueOrder) {
  for (const bool own : {false, true}) {
    SCOPED_TRACE(own ? "separate" : "shared");
    const auto sc = per_microbatch(own);
    const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
    const auto r = sim::replay(g, sim::job_of(sc));
    const auto dense_dp = [](const Op& o) {
      return o.kind == OpKind::collective && (o.group == CommGroup::dp || o.group == CommGroup::dp_cp);
    };
    int overlaps = 0, gathers = 0, reductions = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const Op& a = g.ops[i];
      if (!dense_dp(a)) continue;
      (a.coll == hw::CollectiveOp::all_gather ? gathers : reductions) += a.rank == 0;
      for (std::size_t j = i + 1; j < g.ops.size(); ++j) {
        const Op& b = g.ops[j];
        if (!dense_dp(b) || b.rank != a.rank) continue;
        const double lo = std::max(r.ops[i].start_s, r.ops[j].start_s), hi = std::min(r.ops[i].end_s, r.ops[j].end_s);
        overlaps += hi > lo + 1e-9;
      }
    }
    EXPECT_GT(gathers, 0);
    EXPECT_GT(reductions, 0);
    if (own) EXPECT_GT(overlaps, 0);
    else EXPECT_EQ(overlaps, 0);
  }
  // JAX mode: XLA places its collectives; the key changes nothing and the report says so.
  const auto jax = sim::simulate(scenario(", framework: jax, dp_all_gather_group: separate", "pp: 1, vp: 1, cp: 2"));
  const auto jax_default = sim::simulate(scenario(", framework: jax", "pp: 1, vp: 1, cp: 2"));
  EXPECT_DOUBLE_EQ(jax.report["step_time_s"].get<double>(), jax_default.report["step_time_s"].get<double>());
  bool noted = false;
  for (const auto& w : jax.report["warnings"])
    noted = noted || w.get<std::string>().find("dp_all_gather_group separate: no effect in JAX mode") != std::string::npos;
  EXPECT_TRUE(noted);
}

// Issue order on the one communicator: FSDP issues the next layer's gather from the current layer's pre-backward hook,
// before that layer's reduce-scatter, so with two layers on a stage a backward that regathers (1F1B at pp 2, m 4: the
// last micro-batch's, whose backward follows another backward) issues its second layer's regather before its first
// layer's gradient reduce-scatter; with the gathers on communicators of their own
// (separate) racksim keeps the reduce-scatter first, which there delays nothing.
TEST(FsdpPipeline, TheNextLayersRegatherIsIssuedBeforeThisLayersReduceScatter) {
  for (const bool own : {false, true}) {
    SCOPED_TRACE(own ? "separate" : "shared");
    const auto sc = per_microbatch(own);
    const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
    std::map<std::string, OpId> by_name;  // rank 0's backward ops (a forward regathers under the same name)
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.ops[i].rank == 0 && g.ops[i].phase == Phase::backward) by_name[g.op_name(static_cast<OpId>(i))] = static_cast<OpId>(i);
    int pairs = 0;
    for (int mb = 0; mb < 4; ++mb) {
      const auto rs = by_name.find(fmt::format("mb{}.L1.grad.reduce_scatter", mb));
      const auto ag = by_name.find(fmt::format("mb{}.L0.regather.param_all_gather", mb));
      if (rs == by_name.end() || ag == by_name.end()) continue;
      ++pairs;
      if (own) EXPECT_GT(ag->second, rs->second) << "mb " << mb;
      else EXPECT_LT(ag->second, rs->second) << "mb " << mb;
    }
    EXPECT_GE(pairs, 1);
  }
}

// One communicator per group with experts: the expert-data-parallel group's collectives on a stream of their own
// (comm_dp), the dense group's on comm_grad, under shared.
TEST(FsdpPipeline, TheExpertGroupHasAStreamOfItsOwn) {
  const auto sc = sim::load_scenario(std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/corpus/megatron_moe_keys.yaml",
                                     {{"training.dp_all_gather_group", "shared"}});
  const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
  int expert = 0, dense = 0;
  for (const Op& o : g.ops) {
    if (o.kind != OpKind::collective) continue;
    if (o.group == CommGroup::edp || o.group == CommGroup::edp_shard) {
      ++expert;
      EXPECT_EQ(o.stream, StreamKind::comm_dp);
    } else if (o.group == CommGroup::dp || o.group == CommGroup::dp_cp || o.group == CommGroup::dp_shard) {
      ++dense;
      EXPECT_EQ(o.stream, StreamKind::comm_grad);
    }
  }
  EXPECT_GT(expert, 0);
  EXPECT_GT(dense, 0);
}

// A Megatron-mode step that regathers or reduces per micro-batch under a pipeline is replayed whole (never
// extrapolated); in JAX mode, where neither key does anything, the step keeps its extrapolated window.
TEST(FsdpPipeline, OnlyMegatronModeStepsAreReplayedWhole) {
  const auto text = [](const std::string& framework) {
    return "system: {preset: h100-sxm, gpus: 8}\n"
           "model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32000, ffn: swiglu}\n"
           "training: {framework: " + framework + ", seq_len: 1024, global_batch: 64, micro_batch: 1, "
           "optimizer_sharding: fsdp, recompute: none, fsdp_grad_reduce: per_microbatch, "
           "parallelism: {tp: 1, pp: 2, vp: 1, dp: 4}}\n";
  };
  EXPECT_FALSE(sim::steady_state_plan(racksim::testing::scenario_from_text(text("megatron"), "f.yaml")));
  EXPECT_TRUE(sim::steady_state_plan(racksim::testing::scenario_from_text(text("jax"), "f.yaml")));
}
