// Multi-token prediction (training.mtp_layers; DeepSeek-V3 sec. 2.2, Megatron-Core --mtp-num-layers): what each
// depth adds to the graph, the weights and the FLOP counter, in closed form; and the other part of DeepSeek-V3's
// memory recipe, bf16 Adam moments (training.adam_moments).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

sim::Scenario load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_from_text(yaml, "t.yaml", sets);
}

// A small MoE model whose last layer is an MoE layer: one GPU, one micro-batch.
const char* kMoe = R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 3, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768,
        moe: {experts: 8, top_k: 2, expert_ffn_hidden: 512, first_dense_layers: 1}}
training: {seq_len: 2048, global_batch: 1, micro_batch: 1, parallelism: {tp: 1, pp: 1}}
)";
constexpr double kTokens = 2048, kHidden = 1024, kVocab = 32768;

double flops_of(const OpGraph& g, const std::string& infix) {
  double f = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.op_name(static_cast<OpId>(i)).find(infix) != std::string::npos) f += g.ops[i].flops;
  return f;
}
double resident(const OpGraph& g, MemCategory c, int rank) {
  double b = 0;
  for (TensorId t : g.resident)
    if (g.tensors[t].category == c && g.tensors[t].rank == rank) b += g.tensors[t].bytes;
  return b;
}

}  // namespace

// One depth runs one more layer of the last layer's kind (its ops named L3, after the decoder's L0-L2), the
// projection eh_proj from 2h to h, and the output layer once more; forward and backward are 3x the forward's
// 2mnk each. Nothing else of the graph changes.
TEST(Mtp, OneDepthAddsALayerAProjectionAndAHead) {
  const auto base = load(kMoe);
  const auto sc = load(kMoe, {"training.mtp_layers=1"});
  const auto g0 = build_training_graph(base.model, base.training, base.system.spec);
  const auto g1 = build_training_graph(sc.model, sc.training, sc.system.spec);
  // The micro-batch's ops (the optimizer's update grows with the parameters: tested below by the weights).
  const double total0 = flops_of(g0, "mb0."), total1 = flops_of(g1, "mb0.");
  // The MTP layer's ops other than the module's own ("mtp.") match the last decoder layer's.
  double mtp_layer = 0;
  for (std::size_t i = 0; i < g1.ops.size(); ++i) {
    const std::string n = g1.op_name(static_cast<OpId>(i));
    if (n.find(".L3.") != std::string::npos && n.find(".mtp.") == std::string::npos) mtp_layer += g1.ops[i].flops;
  }
  EXPECT_DOUBLE_EQ(mtp_layer, flops_of(g0, ".L2."));
  EXPECT_DOUBLE_EQ(flops_of(g1, "mtp.eh_proj"), 3 * 2 * kTokens * kHidden * 2 * kHidden);
  EXPECT_DOUBLE_EQ(flops_of(g1, "mtp.logits"), 3 * 2 * kTokens * kVocab * kHidden);
  EXPECT_DOUBLE_EQ(flops_of(g1, ".v0.logits"), flops_of(g0, ".v0.logits"));
  const double norms_and_ce = flops_of(g1, ".mtp.") - flops_of(g1, "mtp.eh_proj") - flops_of(g1, "mtp.logits");
  EXPECT_DOUBLE_EQ(total1 - total0, mtp_layer + flops_of(g1, ".mtp."));
  EXPECT_LT(norms_and_ce, 0.02 * (total1 - total0));  // the norms and the loss are vector work
  // Its weights: one more layer, the projection and three norm gains (bf16 weights, fp32 gradients).
  const auto p = layer_params(sc.model, 2);
  const double added = p.total() + 2 * kHidden * kHidden + 3 * kHidden;
  EXPECT_DOUBLE_EQ(resident(g1, MemCategory::weights, 0) - resident(g0, MemCategory::weights, 0), 2 * added);
  EXPECT_DOUBLE_EQ(resident(g1, MemCategory::gradients, 0) - resident(g0, MemCategory::gradients, 0), 4 * added);
  // And the step takes longer, by about what the added work costs.
  const double t0 = sim::simulate(base).replay.step_time_s, t1 = sim::simulate(sc).replay.step_time_s;
  EXPECT_GT(t1 / t0, 1.15);
  EXPECT_LT(t1 / t0, 1.8);
}

// Megatron-LM's FLOP counter (training.py num_floating_point_operations at d98e8a64), written out term by term:
// per depth a layer of the last layer's kind (attention projections, top-k routed experts, no router or norms), its
// attention core as racksim counts the decoder's, 3h + 2h^2 for the module's norms and projection, and one more
// logits pass; 6 FLOPs per multiply-add and token for forward and backward. racksim's layer also counts its router
// and norm gains (0.1% of this layer), hence the tolerance.
TEST(Mtp, ModelFlopsCountEachDepthAsMegatronDoes) {
  const auto base = load(kMoe);
  const auto sc = load(kMoe, {"training.mtp_layers=2"});
  const double f0 = model_flops_per_step(base.model, base.training);
  const double f2 = model_flops_per_step(sc.model, sc.training);
  const double h = kHidden, attention_proj = 4 * h * h;  // q, k, v, o with 8 heads of 128 = h
  const double routed = 2 * 3 * h * 512;                  // top-2 SwiGLU experts of 512
  const double core = 6 * kTokens * kTokens * h;          // the decoder layers' attention-core term, per layer
  const double per_depth = 6 * kTokens * (attention_proj + routed + 3 * h + 2 * h * h + kVocab * h) + core;
  EXPECT_NEAR((f2 - f0) / (2 * per_depth), 1.0, 0.002);
  EXPECT_GT((f2 - f0) / (2 * per_depth), 1.0);  // the router and norm gains on top
}

// Under a pipeline the last stage holds the depth's layer and a copy of the shared embedding; the first stage
// is unchanged. DeepSeek-V3 with its one depth then holds 683.6B parameters in all, against the published
// checkpoint's 685B "including the 14B multi-token-prediction module" (HF deepseek-ai/DeepSeek-V3 README), whose
// module also stores its own copy of the output head (0.93B), which training shares.
TEST(Mtp, LastStageHoldsTheDepthAndTheSharedEmbedding) {
  const char* ds = R"(system: {preset: h800-sxm, gpus: 16}
model: {preset: deepseek-v3}
training: {seq_len: 4096, global_batch: 16, micro_batch: 1, parallelism: {tp: 1, pp: 2, ep: 8}}
)";
  const auto base = load(ds);
  const auto sc = load(ds, {"training.mtp_layers=1"});
  const auto g0 = build_training_graph(base.model, base.training, base.system.spec);
  const auto g1 = build_training_graph(sc.model, sc.training, sc.system.spec);
  EXPECT_DOUBLE_EQ(resident(g1, MemCategory::weights, 0), resident(g0, MemCategory::weights, 0));
  // Parameters of the whole model: dense ones once per stage, routed experts over the 8 expert ranks.
  double params = 0;
  const auto& m = sc.model;
  for (int l = 0; l <= m.layers; ++l) {
    const auto p = layer_params(m, l);  // l == m.layers: the MTP layer (last layer's kind)
    params += p.total();
  }
  params += embedding_params(m) + m.hidden * 2.0 * m.hidden + 3.0 * m.hidden + static_cast<double>(m.vocab) * m.hidden;
  EXPECT_NEAR(params / 685e9, 1.0, 0.005);
  const double added_bytes = resident(g1, MemCategory::weights, 1) - resident(g0, MemCategory::weights, 1);
  const auto p = layer_params(m, m.layers);
  const double added = (p.total() - p.experts) + p.experts / 8 + 2.0 * m.hidden * m.hidden + 3.0 * m.hidden +
                       static_cast<double>(m.vocab) * m.hidden;
  EXPECT_NEAR(added_bytes / (2 * added), 1.0, 1e-12);
}

// Both keys are Megatron-Core's; XLA's MTP (MaxText mtp_num_layers) and optax's moment dtypes are not modelled.
TEST(Mtp, RefusedInJaxMode) {
  const std::string err = racksim::testing::scenario_error_text(R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 3, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 1, framework: jax, mtp_layers: 1}
)", "t.yaml");
  EXPECT_NE(err.find("t.yaml:3:"), std::string::npos) << err;
  EXPECT_NE(err.find("training.mtp_layers"), std::string::npos) << err;
  EXPECT_NE(err.find("in JAX mode"), std::string::npos) << err;
  const std::string moments = racksim::testing::scenario_error_text(R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 3, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 1, framework: jax, adam_moments: bf16}
)", "t.yaml");
  EXPECT_NE(moments.find("training.adam_moments"), std::string::npos) << moments;
  EXPECT_NE(moments.find("in JAX mode"), std::string::npos) << moments;
}

// Megatron keeps a copy of the word embeddings on a last stage that needs them: the tied output layer's table
// (shared_embedding_or_output_weight), or under MTP the shifted tokens' embedding; one copy serves both.
TEST(Mtp, LastStageKeepsOneCopyOfTheEmbeddingsWhereItNeedsThem) {
  const char* tied = R"(system: {preset: h100-sxm, gpus: 2}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768, tied_embeddings: true}
training: {seq_len: 2048, global_batch: 2, micro_batch: 1, parallelism: {tp: 1, pp: 2}}
)";
  const auto sc = load(tied), one_stage = load(tied, {"training.parallelism.pp=1", "system.gpus=1"});
  const auto mtp = load(tied, {"training.mtp_layers=1"});
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  const auto g1 = build_training_graph(one_stage.model, one_stage.training, one_stage.system.spec);
  const auto gm = build_training_graph(mtp.model, mtp.training, mtp.system.spec);
  const double table_bytes = 2 * kVocab * kHidden;  // bf16 weights
  const double layer_bytes = 2 * layer_params(sc.model, 0).total();
  // Two layers and the final norm gain on the last stage, and the table's copy; one stage holds the table once.
  EXPECT_DOUBLE_EQ(resident(g, MemCategory::weights, 1), 2 * layer_bytes + 2 * kHidden + table_bytes);
  EXPECT_DOUBLE_EQ(resident(g1, MemCategory::weights, 0), 4 * layer_bytes + 2 * kHidden + table_bytes);
  // MTP on top: its layer and projection, and no second copy.
  EXPECT_DOUBLE_EQ(resident(gm, MemCategory::weights, 1) - resident(g, MemCategory::weights, 1),
                   layer_bytes + 2 * (2 * kHidden * kHidden + 3 * kHidden));
}

namespace {
// Every activation the step allocates is allocated once and freed once, not before it was allocated.
void expect_each_tensor_allocated_and_freed_once(const OpGraph& g, const std::string& what) {
  std::vector<int> allocs(g.tensors.size(), 0), frees(g.tensors.size(), 0);
  std::vector<std::size_t> at(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    for (TensorId t : g.ops[i].allocs) ++allocs[t], at[t] = i;
    for (TensorId t : g.ops[i].frees) {
      ++frees[t];
      EXPECT_GE(i, at[t]) << what << ": " << g.tensor_name(t) << " freed before it is made";
    }
  }
  std::vector<char> resident(g.tensors.size(), 0);
  for (TensorId t : g.resident) resident[t] = 1;
  for (TensorId t = 0; t < g.tensors.size(); ++t) {
    if (resident[t] || g.tensors[t].category != MemCategory::activations) continue;
    EXPECT_EQ(allocs[t], 1) << what << ": " << g.tensor_name(t);
    EXPECT_EQ(frees[t], 1) << what << ": " << g.tensor_name(t);
  }
}
std::size_t index_of(const OpGraph& g, const std::string& name) {
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.op_name(static_cast<OpId>(i)) == name) return i;
  ADD_FAILURE() << "no op " << name;
  return 0;
}
std::size_t freed_at(const OpGraph& g, const std::string& tensor) {
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    for (TensorId t : g.ops[i].frees)
      if (g.tensor_name(t) == tensor) return i;
  ADD_FAILURE() << "never freed: " << tensor;
  return 0;
}
}  // namespace

// Two depths: every loss's backward runs before any depth's layer (Megatron's process_mtp_loss), so a depth's
// output outlives its own head's backward and dies with the next depth's hnorm backward; and across layouts each
// activation is made and released exactly once.
TEST(Mtp, TwoDepthsKeepEachOutputUntilItsLastReader) {
  const auto sc = load(kMoe, {"training.mtp_layers=2"});
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  EXPECT_GT(freed_at(g, "mb0.L3.mlp_out"), index_of(g, "mb0.L3.mtp.final_norm.bwd"));
  EXPECT_EQ(freed_at(g, "mb0.L3.mlp_out"), index_of(g, "mb0.L4.mtp.hnorm.bwd"));
  EXPECT_LT(index_of(g, "mb0.L3.mtp.final_norm.bwd"), index_of(g, "mb0.L4.mlp_out.residual.bwd"));
  const char* wide = R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768,
        moe: {experts: 8, top_k: 2, expert_ffn_hidden: 512, first_dense_layers: 1}}
training: {seq_len: 2048, global_batch: 8, micro_batch: 1, mtp_layers: 2,
           parallelism: {tp: 2, pp: 2, vp: 2, ep: 2}}
)";
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {},
           {"training.optimizer_sharding=fsdp"},
           {"training.recompute=full"},
           {"training.pipeline.first_stage_layers=0", "training.pipeline.last_stage_layers=0"}}) {
    const auto s2 = load(wide, sets);
    expect_each_tensor_allocated_and_freed_once(build_training_graph(s2.model, s2.training, s2.system.spec),
                                                sets.empty() ? "tp 2 pp 2 vp 2" : sets.front());
  }
}

// eh_proj over tp 2 as Megatron-Core runs it: column-parallel (with sequence parallelism its input gathered, its
// input gradient reduce-scattered and the input gathered again for the wgrad; without, an all-reduce), its output
// gathered along the hidden size either way; NCCL kernels, no userbuffer overlap.
TEST(Mtp, ProjectionExchangesOverTensorParallelRanks) {
  const char* tp2 = R"(system: {preset: h100-sxm, gpus: 2}
model: {layers: 2, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 1, micro_batch: 1, mtp_layers: 1, tp_comm_overlap: true,
           parallelism: {tp: 2, pp: 1}}
)";
  auto exchanges = [](const OpGraph& g) {
    std::map<std::string, std::pair<hw::CollectiveOp, double>> out;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const std::string n = g.op_name(static_cast<OpId>(i));
      if (g.ops[i].kind == OpKind::collective && n.find(".mtp.eh_proj") != std::string::npos) {
        EXPECT_EQ(g.ops[i].group, CommGroup::tp) << n;
        EXPECT_EQ(g.ops[i].comm_kernel, CommKernel::nccl) << n;
        out[n.substr(n.find("mtp."))] = {g.ops[i].coll, g.ops[i].coll_bytes};
      }
    }
    return out;
  };
  const double a = 2, th = kTokens * kHidden * a;
  const auto sp = load(tp2), nosp = load(tp2, {"training.sequence_parallel=false", "training.tp_comm_overlap=false"});
  const auto e_sp = exchanges(build_training_graph(sp.model, sp.training, sp.system.spec));
  const auto e_no = exchanges(build_training_graph(nosp.model, nosp.training, nosp.system.spec));
  using C = hw::CollectiveOp;
  const std::map<std::string, std::pair<C, double>> want_sp = {
      {"mtp.eh_proj.tp_all_gather", {C::all_gather, 2 * th}},
      {"mtp.eh_proj.out_all_gather", {C::all_gather, th}},
      {"mtp.eh_proj.out_scatter.bwd", {C::all_gather, th}},
      {"mtp.eh_proj.dgrad.tp_reduce_scatter", {C::reduce_scatter, 2 * th}},
      {"mtp.eh_proj.wgrad.tp_all_gather", {C::all_gather, 2 * th}}};
  const std::map<std::string, std::pair<C, double>> want_no = {
      {"mtp.eh_proj.out_all_gather", {C::all_gather, th}},
      {"mtp.eh_proj.dgrad.tp_reduce_scatter", {C::all_reduce, 2 * th}}};
  EXPECT_EQ(e_sp, want_sp);
  EXPECT_EQ(e_no, want_no);
}

// training.adam_moments: bf16 (Megatron's precision-aware optimizer with bf16 exp_avg and exp_avg_sq): the optimizer
// state per parameter of the shard is the fp32 master copy and two bf16 moments, 8 bytes instead of 12, and the
// AdamW kernel reads and writes 8 bytes fewer per parameter.
TEST(AdamMoments, Bf16MomentsHalveTheMomentsBytes) {
  const auto fp32 = load(kMoe, {"system.gpus=4", "training.parallelism.dp=4", "training.global_batch=4",
                                "training.optimizer_sharding=zero1"});
  const auto bf16 = load(kMoe, {"system.gpus=4", "training.parallelism.dp=4", "training.global_batch=4",
                                "training.optimizer_sharding=zero1", "training.adam_moments=bf16"});
  const auto g0 = build_training_graph(fp32.model, fp32.training, fp32.system.spec);
  const auto g1 = build_training_graph(bf16.model, bf16.training, bf16.system.spec);
  const double o0 = resident(g0, MemCategory::optimizer, 0), o1 = resident(g1, MemCategory::optimizer, 0);
  EXPECT_NEAR(o1 / o0, 8.0 / 12.0, 1e-12);
  auto op_bytes = [](const OpGraph& g, const std::string& name) {
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.op_name(static_cast<OpId>(i)).find(name) != std::string::npos) return g.ops[i].hbm_bytes;
    return 0.0;
  };
  const double shard = o0 / 12;  // parameters of this rank's shard
  // fp32 moments: Adam reads and writes the master weights and moments (28 bytes) and a copy of its own then reads
  // the master weights and writes the bf16 working copy (6). bf16 moments: the precision-aware kernel writes the
  // working copy itself (20 + 2).
  EXPECT_DOUBLE_EQ(op_bytes(g0, "optimizer.adamw"), 28 * shard);
  EXPECT_DOUBLE_EQ(op_bytes(g0, "optimizer.copy_main_to_model"), 6 * shard);
  EXPECT_DOUBLE_EQ(op_bytes(g1, "optimizer.adamw"), 22 * shard);
  EXPECT_DOUBLE_EQ(op_bytes(g1, "optimizer.copy_main_to_model"), 0.0);
  EXPECT_EQ(sim::scenario_to_json(bf16)["training"]["adam_moments"], "bf16");  // echoed only when bf16
  EXPECT_FALSE(sim::scenario_to_json(fp32)["training"].contains("adam_moments"));
}
