// Training-graph structure: FLOPs against closed forms, recompute adds exactly one forward,
// data-parallel collectives carry the bytes the algorithm says.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

sim::Scenario scenario(const std::string& training_extra, int gpus = 1, const std::string& par = "{tp: 1}") {
  return sim::load_scenario_text("system: {preset: h200-sxm, gpus: " + std::to_string(gpus) +
                                     "}\nmodel: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, "
                                     "vocab: 32768}\ntraining: {seq_len: 1024, global_batch: " +
                                     std::to_string(4 * gpus) + ", micro_batch: 2, parallelism: " + par + training_extra +
                                     "}\n",
                                 "g.yaml");
}

double tensor_flops(const OpGraph& g, Phase only = Phase::optimizer, bool filter = false) {
  double f = 0;
  for (const auto& op : g.ops)
    if (op.kind == OpKind::kernel && op.unit == ExecUnit::tensor && (!filter || op.phase == only)) f += op.flops;
  return f;
}

}  // namespace

// same_op compares every field that a kernel's time depends on: the layer templates rely on it to notice a
// recorded layer that differs (here an XLA loop kernel's output indices, which bound its time).
TEST(Graph, SameOpComparesTheLoopIndices) {
  workloads::Op a;
  a.hbm_bytes = 1e6;
  a.loop_indices = 1e6f;
  workloads::Op b = a;
  EXPECT_TRUE(workloads::same_op(a, b));
  b.loop_indices = 2e6f;
  EXPECT_FALSE(workloads::same_op(a, b));
}

TEST(Graph, FlopsMatchSixNTokensPlusFlashAttention) {
  auto sc = scenario("");
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  const double tokens = 4.0 * 1024;  // global batch 4 x seq 1024
  const double n = total_params(sc.model) - 32768.0 * 1024 /*input embedding: a gather, no FLOPs*/ -
                   1024 * (2 * 4 + 1) /*norm gains: vector work*/;
  // Flash attention, causal: forward 2·B·S²·D per layer, backward 2.5x forward (recomputes QK^T).
  const double attention = 7.0 * 4 * 1024.0 * 1024 * 1024 * 4 /*layers*/;
  EXPECT_NEAR(tensor_flops(g) / (6 * n * tokens + attention), 1.0, 1e-12);
}

TEST(Graph, FullRecomputeRepeatsTheLayerForward) {
  auto none = scenario("");
  auto full = scenario(", recompute: full");
  auto jax_none = scenario(", framework: jax");
  auto jax_full = scenario(", recompute: full, framework: jax");
  const auto gn = build_training_graph(none.model, none.training, none.system.spec);
  const auto gf = build_training_graph(full.model, full.training, full.system.spec);
  const auto gjn = build_training_graph(jax_none.model, jax_none.training, jax_none.system.spec);
  const auto gjf = build_training_graph(jax_full.model, jax_full.training, jax_full.system.spec);
  const double T = 2 * 1024, h = 1024, f = 4096;
  const double logits = 2.0 * T * 32768 * h * 2 /*micro-steps*/;
  const double mlp_out = 2.0 * T * f * h * 4 /*layers*/ * 2 /*micro-steps*/;
  // Megatron's reentrant checkpoint re-runs every layer's whole forward, the last projection included.
  const double fwd_layers = tensor_flops(gn, Phase::forward, true) - logits;
  EXPECT_NEAR(tensor_flops(gf, Phase::recompute, true) / fwd_layers, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(tensor_flops(gn, Phase::recompute, true), 0.0);
  // XLA removes the last projection, whose output the backward does not need, from the
  // rematerialized computation.
  const double jax_fwd_layers = tensor_flops(gjn, Phase::forward, true) - logits;
  EXPECT_NEAR(tensor_flops(gjf, Phase::recompute, true) / (jax_fwd_layers - mlp_out), 1.0, 1e-12);
}

// Megatron's --recompute-method block --recompute-num-layers N (training.recompute_num_layers): under full recompute
// only the first N layers of each model chunk are checkpointed (recompute.py: `layer_idx < recompute_num_layers` over
// the chunk's own layers). 8 layers on pp 2 x vp 2 make four chunks of two: N = 1 recomputes layers 0, 2, 4 and 6,
// half of full recompute's work, and keeps the other layers' activations; N = 2 is full recompute.
TEST(Graph, BlockRecomputeChecksTheFirstLayersOfEachChunk) {
  const auto sc_of = [](const std::string& rc, const std::string& layers = "8") {
    return sim::load_scenario_text(
        "system: {preset: h200-sxm, gpus: 2}\nmodel: {layers: " + layers + ", hidden: 1024, ffn_hidden: 4096, heads: 8, "
        "kv_heads: 8, vocab: 32768}\ntraining: {seq_len: 1024, global_batch: 8, micro_batch: 1, parallelism: {pp: 2, "
        "vp: 2}" + rc + "}\n", "b.yaml");
  };
  // The layers whose forward the backward reruns (their ops' names carry ".L<layer>.").
  const auto recomputed_layers = [](const OpGraph& g) {
    std::set<int> out;
    for (const auto& op : g.ops)
      if (op.phase == Phase::recompute) {
        const std::string name = g.name(op.name);
        const auto at = name.find(".L");
        EXPECT_NE(at, std::string::npos) << name;
        if (at != std::string::npos) out.insert(std::stoi(name.substr(at + 2)));
      }
    return out;
  };
  const auto graph_of = [&](const std::string& rc, const std::string& layers = "8") {
    const auto sc = sc_of(rc, layers);
    return build_training_graph(sc.model, sc.training, sc.system.spec);
  };
  const auto full = sc_of(", recompute: full");
  const double full_flops = tensor_flops(graph_of(", recompute: full"), Phase::recompute, true);
  ASSERT_GT(full_flops, 0.0);
  for (int n : {1, 2, 5}) {
    const auto g = graph_of(", recompute: full, recompute_num_layers: " + std::to_string(n));
    const std::set<int> want = n == 1 ? std::set<int>{0, 2, 4, 6} : std::set<int>{0, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_EQ(recomputed_layers(g), want) << "N = " << n;
    EXPECT_NEAR(tensor_flops(g, Phase::recompute, true) / full_flops, n == 1 ? 0.5 : 1.0, 1e-12) << "N = " << n;
  }
  // Chunk by chunk, whatever their sizes: 7 layers split 1 / 3 / 3 / 0 (the embedding's stage one layer, the loss's
  // none) recompute {0, 1, 4} at N = 1 and {0, 1, 2, 4, 5} at N = 2; the multi-token prediction layer (layer 8 after the
  // decoder's 8) is never recomputed under the block method, as Megatron-Core skips it.
  const std::string uneven = ", recompute: full, pipeline: {first_stage_layers: 1, last_stage_layers: 0}, recompute_num_layers: ";
  EXPECT_EQ(recomputed_layers(graph_of(uneven + "1", "7")), (std::set<int>{0, 1, 4}));
  EXPECT_EQ(recomputed_layers(graph_of(uneven + "2", "7")), (std::set<int>{0, 1, 2, 4, 5}));
  EXPECT_EQ(recomputed_layers(graph_of(", recompute: full, mtp_layers: 1, recompute_num_layers: 3")),
            (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // (full recompute of every layer: the MTP one too)
  EXPECT_EQ(recomputed_layers(graph_of(", recompute: full, mtp_layers: 1")).count(8), 1u);
  // Memory: the chunks' second layers keep what recompute: none keeps, so the peak lies between the two.
  const auto none = sim::simulate(sc_of(""));
  const auto half = sim::simulate(sc_of(", recompute: full, recompute_num_layers: 1"));
  const auto all = sim::simulate(full);
  const auto peak = [](const auto& r) { return r.report["peak_memory_bytes"].template get<double>(); };
  EXPECT_LT(peak(all), peak(half));
  EXPECT_LT(peak(half), peak(none));
  EXPECT_NE(half.report["warnings"].dump().find("recompute_num_layers 1: Megatron's block method"), std::string::npos);
  // A count of at least every chunk's layers recomputes them all (Megatron does not refuse it), and the note says so
  // rather than speaking of layers that keep their activations.
  const auto over = sim::simulate(sc_of(", recompute: full, recompute_num_layers: 5"));
  EXPECT_DOUBLE_EQ(peak(over), peak(all));
  EXPECT_NE(over.report["warnings"].dump().find("recompute_num_layers 5: at least every model chunk's layer count, so "
                                                "Megatron's block method recomputes all 8 layers"),
            std::string::npos)
      << over.report["warnings"].dump();
  // Beside another recompute the key is ignored with a note (a sweep over training.recompute keeps its base's count);
  // 0 means every layer.
  const auto ignored = sim::simulate(sc_of(", recompute: none, recompute_num_layers: 1"));
  EXPECT_DOUBLE_EQ(peak(ignored), peak(none));
  EXPECT_NE(ignored.report["warnings"].dump().find("recompute_num_layers 1 ignored"), std::string::npos);
  EXPECT_DOUBLE_EQ(peak(sim::simulate(sc_of(", recompute: full, recompute_num_layers: 0"))), peak(all));
}

TEST(Graph, DataParallelGradientBytes) {
  for (auto [mode, op] : {std::pair{"none", hw::CollectiveOp::all_reduce}, std::pair{"zero1", hw::CollectiveOp::reduce_scatter}}) {
    auto sc = scenario(std::string(", optimizer_sharding: ") + mode, 8);
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    double grad_bytes = 0, gather_bytes = 0;
    for (const auto& o : g.ops) {
      if (o.kind != OpKind::collective || o.group == CommGroup::world) continue;  // (the optimizer's gradient norm)
      if (o.coll == op) grad_bytes += o.coll_bytes;
      if (o.coll == hw::CollectiveOp::all_gather) gather_bytes += o.coll_bytes;
    }
    // Once per optimizer step (not per micro-step), fp32 gradients of every parameter.
    EXPECT_DOUBLE_EQ(grad_bytes, 4.0 * total_params(sc.model)) << mode;
    EXPECT_DOUBLE_EQ(gather_bytes, std::string(mode) == "zero1" ? 2.0 * total_params(sc.model) : 0.0) << mode;
  }
}

TEST(Graph, SavePlans) {
  RecomputePolicy p;
  p.mode = RecomputeMode::save_dots;
  EXPECT_EQ(save_plan(p, true, false).saved, (std::vector<std::string>{"qkv", "attn_out", "mlp_gate", "mlp_up"}));
  p.mode = RecomputeMode::selective;
  const auto sel = save_plan(p, true, false).saved;
  EXPECT_EQ(std::count(sel.begin(), sel.end(), "attn_scores"), 0);
  EXPECT_EQ(std::count(sel.begin(), sel.end(), "qkv"), 1);
  p.mode = RecomputeMode::full;
  EXPECT_TRUE(save_plan(p, true, false).saved.empty());
}

// JAX without donation packs temporaries into the optimizer's outputs; with the optimizer state
// sharded those outputs are 1/dp as large, so packing can never make "no donation" cheaper
// than donation. A step that saves everything recomputes nothing (the scan's stack copies are
// backward work).
TEST(Graph, JaxPackingRespectsShardingAndStackCopiesAreNotRecompute) {
  const std::string base =
      "system: {preset: h200-sxm, gpus: 8}\n"
      "model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 16, vocab: 32768, ffn: swiglu}\n"
      "training: {seq_len: 2048, global_batch: 16, micro_batch: 2, parallelism: {dp: 8}, optimizer_sharding: fsdp,\n"
      "           recompute: none, attention: materialized, framework: jax, donate_state: ";
  const auto nodonate = sim::simulate(sim::load_scenario_text(base + "false}\n", "a.yaml"));
  const auto donate = sim::simulate(sim::load_scenario_text(base + "true}\n", "b.yaml"));
  EXPECT_GE(nodonate.report["peak_memory_bytes"].get<double>(), donate.report["peak_memory_bytes"].get<double>());
  EXPECT_EQ(nodonate.report["breakdown_s"]["recompute"].get<double>(), 0.0);
}

// Megatron's fused softmax backward works in place on dP: no separate dS buffer.
TEST(Graph, MegatronMaterializedAttentionHasNoSeparateDs) {
  const auto sc = sim::load_scenario_text(
      "system: {preset: h100-sxm, gpus: 8}\nmodel: {preset: llama3-8b}\n"
      "training: {seq_len: 2048, global_batch: 8, micro_batch: 1, parallelism: {tp: 8}, attention: materialized}\n",
      "m.yaml");
  const auto g = workloads::build_training_graph(sc.model, sc.training, sc.system.spec);
  int dp = 0, ds = 0;
  for (std::size_t t = 0; t < g.tensors.size(); ++t) {
    dp += g.tensor_name(static_cast<workloads::TensorId>(t)).ends_with("attn.dP");
    ds += g.tensor_name(static_cast<workloads::TensorId>(t)).ends_with("attn_scores.dS");
  }
  EXPECT_GT(dp, 0);
  EXPECT_EQ(ds, 0);
}

// Megatron's fused weight-gradient accumulation: every wgrad GEMM (dense and grouped experts) adds into the fp32 main
// gradient in its epilogue and is flagged so (gpu.wgrad_accumulate_serial_bytes times it); no other op is; in JAX mode
// XLA's dot writes the gradient and no GEMM is flagged. Under training.gradient_accumulation_fusion false no GEMM is
// flagged and each wgrad is followed by its own add into the main gradient: 2 + 4 + 4 bytes per weight element. Every
// weight-gradient GEMM, and nothing else, carries the wgrad bit (the blockwise fp8 recipe times it at its own rate).
// Transformer Engine's wgrads (every one but the output layer's, Megatron's own ColumnParallelLinear, fused or not)
// carry wgrad_te_layout (gpu.bf16_wgrad_nt_time_ratio); JAX's and those of training.transformer_impl local do not.
TEST(Graph, MegatronWgradsAccumulateIntoFp32MainGradsJaxOnesDoNot) {
  const std::string base =
      "system: {preset: h100-sxm, gpus: 8}\nmodel: {preset: mixtral-8x7b}\n"
      "training: {seq_len: 4096, global_batch: 8, micro_batch: 1, parallelism: {tp: 1, ep: 8, dp: 8}, framework: ";
  for (const char* fw : {"megatron", "jax", "megatron, gradient_accumulation_fusion: false",
                         "megatron, transformer_impl: local"}) {
    const auto sc = sim::load_scenario_text(base + fw + "}\n", "w.yaml");
    const auto g = workloads::build_training_graph(sc.model, sc.training, sc.system.spec);
    int flagged = 0, wgrads = 0, experts = 0, adds = 0, wgrad_bits = 0, te_layout = 0, output_layer = 0;
    double weight_elements = 0, add_bytes = 0;
    for (const auto& op : g.ops) {
      const std::string name = g.op_name(static_cast<workloads::OpId>(&op - g.ops.data()));
      if (name.ends_with(".main_grad_add") && name.find(".wgrad.") != std::string::npos) {
        ++adds;
        add_bytes += op.hbm_bytes;
        continue;
      }
      const bool wgrad = op.unit == workloads::ExecUnit::tensor && name.find(".wgrad") != std::string::npos &&
                         name.find("router") == std::string::npos;
      wgrads += wgrad;
      if (wgrad) weight_elements += op.gemm_mnk[0] * op.gemm_mnk[1] * op.gemm_batch;
      flagged += op.accumulate_fp32;
      wgrad_bits += op.wgrad;
      te_layout += op.wgrad_te_layout;
      if (name.find("logits.wgrad") != std::string::npos) {
        ++output_layer;
        EXPECT_FALSE(op.wgrad_te_layout) << name;
      }
      if (op.wgrad_te_layout) {
        EXPECT_TRUE(wgrad) << name;
      }
      if (op.wgrad) {
        EXPECT_TRUE(wgrad) << name;
      }
      experts += op.accumulate_fp32 && name.find("experts.") != std::string::npos;
      if (op.accumulate_fp32) {
        EXPECT_TRUE(wgrad) << name;
      }
    }
    EXPECT_GT(wgrads, 0) << fw;
    EXPECT_EQ(wgrad_bits, wgrads) << fw;
    if (std::string(fw) == "megatron") {
      EXPECT_EQ(flagged, wgrads);
      EXPECT_GT(output_layer, 0);
      EXPECT_EQ(te_layout, wgrads - output_layer);
      EXPECT_GT(experts, 0);
      EXPECT_EQ(adds, 0);
    } else if (std::string(fw) == "jax") {
      EXPECT_EQ(te_layout, 0);
      EXPECT_EQ(flagged, 0);
      EXPECT_EQ(adds, 0);
    } else if (std::string(fw).find("local") != std::string::npos) {
      // The report says what of the job stays Transformer Engine's (here the grouped experts' host time).
      bool said = false;
      for (const auto& n : g.notes)
        said |= n.find("training.transformer_impl local") != std::string::npos &&
                n.find("grouped expert GEMM's host time") != std::string::npos;
      EXPECT_TRUE(said);
      EXPECT_EQ(te_layout, 0);  // Megatron's own linears: the fused accumulate, not TE's GEMM
      EXPECT_EQ(flagged, wgrads);
      EXPECT_EQ(adds, 0);
    } else {
      EXPECT_EQ(te_layout, wgrads - output_layer);  // TE's NT wgrad writing bf16
      EXPECT_EQ(flagged, 0);
      EXPECT_EQ(adds, wgrads);
      EXPECT_NEAR(add_bytes, 10.0 * weight_elements, 1e-6 * add_bytes);
    }
  }
}

// XLA's collective pipeliner on a scanned FSDP step (xla/service/collective_pipeliner.h): without it each
// layer's all-gather runs in its own loop iteration before the layer's compute, so every forward gather is
// exposed; with it (MaxText's GPU recipes: --xla_gpu_enable_pipelined_{all_gather,reduce_scatter,all_reduce})
// a layer's gather runs beside the previous layer and its gradient reduce-scatter beside the next, so what
// stays exposed is at most the first layer's gather, the last layer's reduce-scatter and the collectives
// outside the loop (embedding, head).
TEST(Graph, JaxPipelinedCollectivesHideScannedFsdpLayers) {
  const std::string base =
      "system: {preset: h200-sxm, gpus: 8}\n"
      "model: {layers: 8, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768, ffn: swiglu}\n"
      "training: {seq_len: 4096, global_batch: 16, micro_batch: 2, parallelism: {dp: 8}, optimizer_sharding: fsdp,\n"
      "           recompute: none, attention: flash, framework: jax, scan_layers: true, xla_pipelined_collectives: ";
  const auto off = sim::simulate(sim::load_scenario_text(base + "false}\n", "off.yaml"));
  const auto on = sim::simulate(sim::load_scenario_text(base + "true}\n", "on.yaml"));
  auto dur = [](const sim::RunResult& r, OpId i) { return r.replay.ops[i].end_s - r.replay.ops[i].start_s; };
  double fwd_layer_gathers_off = 0;
  for (OpId i = 0; i < off.graph.ops.size(); ++i) {
    const auto n = off.graph.op_name(i);
    if (off.graph.ops[i].phase == Phase::forward && n.find(".L") != std::string::npos &&
        n.find("fsdp.param_all_gather") != std::string::npos)
      fwd_layer_gathers_off += dur(off, i);
  }
  // A layer's gather is XLA's per-array all-gathers (fsdp.param_all_gather.0, .1, ...): summed per layer and pass.
  std::map<std::pair<std::string, int>, double> layer_gather;
  double max_layer_rs = 0, outside_loop = 0;
  for (OpId i = 0; i < on.graph.ops.size(); ++i) {
    if (on.graph.ops[i].kind != OpKind::collective) continue;
    const auto n = on.graph.op_name(i);
    const bool layer = n.find(".L") != std::string::npos;
    const auto at = n.find("fsdp.param_all_gather");
    if (layer && at != std::string::npos)
      layer_gather[{n.substr(0, at), static_cast<int>(on.graph.ops[i].phase)}] += dur(on, i);
    else if (layer && n.ends_with("reduce_scatter")) max_layer_rs = std::max(max_layer_rs, dur(on, i));
    else outside_loop += dur(on, i);
  }
  double max_layer_gather = 0;
  for (const auto& [key, d] : layer_gather) max_layer_gather = std::max(max_layer_gather, d);
  const double exposed_off = off.report["breakdown_s"]["exposed_communication"].get<double>();
  const double exposed_on = on.report["breakdown_s"]["exposed_communication"].get<double>();
  ASSERT_GT(fwd_layer_gathers_off, 0.0);
  // Unpipelined: every forward layer waits for its own gather, which runs alone.
  EXPECT_GE(exposed_off, 0.99 * fwd_layer_gathers_off);
  // Pipelined: the first layer's gather, the last layer's reduce-scatter and the embedding's and head's.
  EXPECT_LE(exposed_on, max_layer_gather + max_layer_rs + outside_loop + 1e-9);
  EXPECT_LT(exposed_on, 0.5 * exposed_off);
  EXPECT_LT(on.report["step_time_s"].get<double>(), off.report["step_time_s"].get<double>());
}
