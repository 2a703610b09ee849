// Megatron-Core's tensor-parallel collectives outside the transformer layers, each against its closed form (issue
// #12, "right at scale"): the vocabulary-parallel embedding's reduction of its T x h lookup, the vocabulary-parallel
// loss's per-token fp32 all-reduces, and the end of finalize_model_grads (the tp all-reduce of the gradients of the
// parameters each tp rank holds whole, and the all-reduce of the word embeddings' gradients between the first and
// the last pipeline stage). Per-rank bytes are nccl-tests' bus bytes: (n-1)/n of the size for an all-gather or a
// reduce-scatter, 2(n-1)/n for an all-reduce.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hardware_models/collectives.h"
#include "sim/engine/replay.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;
using C = hw::CollectiveOp;

namespace {

sim::Scenario load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_from_text(yaml, "t.yaml", sets);
}
OpGraph graph_of(const sim::Scenario& sc) { return build_training_graph(sc.model, sc.training, sc.system.spec); }

// A small dense model on tp ranks of one node, 4 micro-batches of 2 sequences (T = 2 x 2048 tokens per rank and
// micro-batch), ZeRO-1 over 2 data-parallel replicas.
constexpr double kSeq = 2048, kMicro = 2, kT = kSeq * kMicro, kH = 1024, kVocab = 32768, kA = 2;
constexpr int kMicroSteps = 4;
std::string dense(int tp, int pp = 1) {
  return "system: {preset: h100-sxm, gpus: " + std::to_string(2 * tp * pp) + R"(}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 16, micro_batch: 2, optimizer_sharding: zero1,
           parallelism: {tp: )" + std::to_string(tp) + ", pp: " + std::to_string(pp) + "}}\n";
}

struct Found {
  std::vector<OpId> ids;
  double bytes = 0;  // coll_bytes (nccl-tests size) summed
};
// The ops whose name contains `infix`.
Found ops_named(const OpGraph& g, const std::string& infix) {
  Found f;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.op_name(static_cast<OpId>(i)).find(infix) != std::string::npos) {
      f.ids.push_back(static_cast<OpId>(i));
      f.bytes += g.ops[i].kind == OpKind::collective ? g.ops[i].coll_bytes : g.ops[i].hbm_bytes;
    }
  return f;
}
// What one rank moves for a collective of the graph (its bus bytes over a group of n).
double per_rank(const Op& o, int n) { return hw::busbw_factor(o.coll, n) * o.coll_bytes; }
bool waits_for(const Op& o, OpId d) {
  for (OpId x : o.deps)
    if (x == d) return true;
  return false;
}

}  // namespace

// VocabParallelEmbedding over tp: every rank looks up all T tokens of the micro-batch in its vocabulary slice (2 T h a
// bytes), zeroes the rows of tokens outside it, and the partial rows are reduce-scattered to the rank's sequence shard
// (per rank (tp-1)/tp T h a), or without sequence parallelism all-reduced (2 (tp-1)/tp T h a); once per micro-batch,
// on the critical path. Backward: the reduce-scatter's all-gather of the output gradient (nothing without sequence
// parallelism), then the weight gradient over all T rows (EmbeddingWeightGradientIsDenseAndAddedIntoTheMainGradient).
TEST(TpReductions, VocabParallelEmbeddingReducesTheFullSequence) {
  for (int tp : {2, 4, 8})
    for (bool sp : {true, false}) {
      SCOPED_TRACE("tp " + std::to_string(tp) + (sp ? " with" : " without") + " sequence parallelism");
      const auto sc = load(dense(tp), {std::string("training.sequence_parallel=") + (sp ? "true" : "false")});
      ASSERT_EQ(sc.training.micro_steps(), kMicroSteps);
      const auto g = graph_of(sc);
      const Found rs = ops_named(g, "v0.embedding.tp_reduce_scatter"), ar = ops_named(g, "v0.embedding.tp_all_reduce");
      const Found& fwd = sp ? rs : ar;
      EXPECT_TRUE((sp ? ar : rs).ids.empty());
      ASSERT_EQ(fwd.ids.size(), static_cast<std::size_t>(kMicroSteps));  // one per micro-batch
      const double full = kT * kH * kA;                                   // the lookup's rows, all T tokens
      for (OpId id : fwd.ids) {
        const Op& o = g.ops[id];
        EXPECT_EQ(o.group, CommGroup::tp);
        EXPECT_EQ(o.coll, sp ? C::reduce_scatter : C::all_reduce);
        EXPECT_EQ(o.stream, StreamKind::comm);
        EXPECT_DOUBLE_EQ(o.coll_bytes, full);
        EXPECT_NEAR(per_rank(o, tp) / ((sp ? 1.0 : 2.0) * (tp - 1) / tp * full), 1.0, 1e-12);
        // The next op (the clone, or the first layer's norm) waits for it.
        EXPECT_TRUE(waits_for(g.ops[id + 1], id)) << g.op_name(id + 1);
      }
      // The lookup reads and writes T rows, the mask rewrites them; under sequence parallelism the clone copies the
      // shard.
      EXPECT_DOUBLE_EQ(ops_named(g, "v0.embedding").bytes - ops_named(g, "v0.embedding.").bytes,
                       kMicroSteps * 2 * full);
      EXPECT_DOUBLE_EQ(ops_named(g, "v0.embedding.mask").bytes,
                       kMicroSteps * 2 * (2 * full + kT));  // forward and backward, with the mask's bytes
      EXPECT_DOUBLE_EQ(ops_named(g, "v0.embedding.clone").bytes, sp ? kMicroSteps * 2 * full / tp : 0.0);
      // Backward.
      const Found ag = ops_named(g, "v0.embedding.bwd.tp_all_gather");
      ASSERT_EQ(ag.ids.size(), sp ? static_cast<std::size_t>(kMicroSteps) : 0u);
      for (OpId id : ag.ids) {
        EXPECT_EQ(g.ops[id].coll, C::all_gather);
        EXPECT_NEAR(per_rank(g.ops[id], tp) / ((tp - 1.0) / tp * full), 1.0, 1e-12);
      }
      double scatter_add = 0;
      for (OpId id : ops_named(g, "v0.embedding.bwd").ids)
        if (g.ops[id].kind == OpKind::kernel && g.op_name(id).ends_with("embedding.bwd")) scatter_add += g.ops[id].hbm_bytes;
      EXPECT_DOUBLE_EQ(scatter_add, kMicroSteps * kT * kH * (kA + 4));
    }
  // tp 1: one lookup of the rank's tokens and no exchange, as before.
  const auto g1 = graph_of(load(dense(1)));
  EXPECT_TRUE(ops_named(g1, "embedding.tp_").ids.empty());
  EXPECT_TRUE(ops_named(g1, "embedding.mask").ids.empty());
  EXPECT_DOUBLE_EQ(ops_named(g1, "v0.embedding").bytes - ops_named(g1, "v0.embedding.").bytes, kMicroSteps * 2 * kT * kH * kA);
}

// Megatron's MTP layer embeds its shifted tokens with the same module (multi_token_prediction.py _get_embeddings):
// the same reduction per depth and micro-batch.
TEST(TpReductions, MtpEmbeddingReducesLikeTheMainOne) {
  for (bool sp : {true, false}) {
    SCOPED_TRACE(sp ? "with sequence parallelism" : "without");
    const auto g = graph_of(load(dense(4), {"training.mtp_layers=2", std::string("training.sequence_parallel=") + (sp ? "true" : "false")}));
    const Found fwd = ops_named(g, sp ? "mtp.embedding.tp_reduce_scatter" : "mtp.embedding.tp_all_reduce");
    ASSERT_EQ(fwd.ids.size(), static_cast<std::size_t>(2 * kMicroSteps));
    EXPECT_DOUBLE_EQ(fwd.bytes, 2 * kMicroSteps * kT * kH * kA);
    EXPECT_EQ(ops_named(g, "mtp.embedding.bwd.tp_all_gather").ids.size(), sp ? static_cast<std::size_t>(2 * kMicroSteps) : 0u);
    EXPECT_EQ(ops_named(g, "v0.embedding.tp_").ids.size(), static_cast<std::size_t>(kMicroSteps));
  }
}

// The vocabulary-parallel loss over tp reduces per-token fp32 statistics of all T tokens (the logits are gathered
// to the full sequence): unfused (cross_entropy.py) the max, then predicted_logits and sum_exp_logits in two more
// all-reduces, each T x 4 bytes; fused (fused_cross_entropy.py) the max, then one all-reduce of the two concatenated
// (2T x 4 bytes). Once per micro-batch and loss (an MTP depth has its own), with or without sequence parallelism,
// each waited for by the op after it. The loss kernels keep their bytes (unfused, split where the source reduces).
TEST(TpReductions, VocabParallelCrossEntropyReducesPerTokenStatistics) {
  for (int tp : {2, 4, 8})
    for (bool fused : {false, true})
      for (bool sp : {true, false}) {
        SCOPED_TRACE("tp " + std::to_string(tp) + (fused ? " fused" : " unfused") + (sp ? " with SP" : " without SP"));
        const auto g = graph_of(load(dense(tp), {std::string("training.cross_entropy_fusion=") + (fused ? "true" : "false"),
                                                 std::string("training.sequence_parallel=") + (sp ? "true" : "false"),
                                                 "training.mtp_layers=1"}));
        // In issue order, per micro-batch: the MTP depth's loss, then the main one.
        const std::vector<std::pair<std::string, double>> want =
            fused ? std::vector<std::pair<std::string, double>>{{"cross_entropy.max.tp_all_reduce", kT},
                                                                {"cross_entropy.predicted_sum_exp.tp_all_reduce", 2 * kT}}
                  : std::vector<std::pair<std::string, double>>{{"cross_entropy.max.tp_all_reduce", kT},
                                                                {"cross_entropy.predicted.tp_all_reduce", kT},
                                                                {"cross_entropy.sum_exp.tp_all_reduce", kT}};
        std::vector<OpId> reductions;
        for (std::size_t i = 0; i < g.ops.size(); ++i)
          if (g.ops[i].kind == OpKind::collective && g.op_name(static_cast<OpId>(i)).find("cross_entropy") != std::string::npos)
            reductions.push_back(static_cast<OpId>(i));
        ASSERT_EQ(reductions.size(), 2 * want.size() * kMicroSteps);
        for (std::size_t k = 0; k < reductions.size(); ++k) {
          const OpId id = reductions[k];
          const Op& o = g.ops[id];
          const auto& [name, values] = want[k % want.size()];
          const std::string n = g.op_name(id);
          EXPECT_TRUE(n.ends_with(name)) << n;
          EXPECT_EQ(n.find(".mtp.") != std::string::npos, (k / want.size()) % 2 == 0) << n;
          EXPECT_EQ(o.group, CommGroup::tp);
          EXPECT_EQ(o.coll, C::all_reduce);
          EXPECT_EQ(o.phase, Phase::forward);
          EXPECT_DOUBLE_EQ(o.coll_bytes, values * 4);
          EXPECT_NEAR(per_rank(o, tp) / (2.0 * (tp - 1) / tp * values * 4), 1.0, 1e-12);
          EXPECT_TRUE(waits_for(g.ops[id + 1], id)) << g.op_name(id + 1) << " after " << n;
        }
        // The max's kernel before its reduction, the division after the sums (fused or not).
        EXPECT_TRUE(g.op_name(reductions[0] - 1).ends_with("cross_entropy.max"));
        EXPECT_TRUE(g.op_name(reductions.back() + 1).ends_with("cross_entropy.normalize"));
        const double V = kVocab / tp;
        double kernels = 0;
        for (OpId id : ops_named(g, "v0.cross_entropy").ids)
          if (g.ops[id].kind == OpKind::kernel && g.ops[id].phase == Phase::forward) kernels += g.ops[id].hbm_bytes;
        EXPECT_DOUBLE_EQ(kernels, kMicroSteps * kT * V * (fused ? kA + 20 : kA + 36));
      }
  // tp 1: none.
  EXPECT_TRUE(ops_named(graph_of(load(dense(1))), "tp_all_reduce").ids.empty());
}

namespace {

// An MoE model with q/k norms on two pipeline stages (layers 0-1 and 2-3, layer 0 dense) and one MTP depth on the
// last: every kind of parameter finalize_model_grads reduces over tp.
std::string moe_qk(int tp, int pp = 2, bool moe = true) {
  return "system: {preset: h100-sxm, gpus: " + std::to_string(2 * tp * pp) + R"(}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768, qk_norm: true)" +
         std::string(moe ? ",\n        moe: {experts: 8, top_k: 2, expert_ffn_hidden: 512, first_dense_layers: 1}" : "") +
         R"(}
training: {seq_len: 2048, global_batch: 16, micro_batch: 2, optimizer_sharding: zero1, mtp_layers: 1,
           overlap_grad_reduce: true, parallelism: {tp: )" + std::to_string(tp) + ", pp: " + std::to_string(pp) + "}}\n";
}

// A data-parallel gradient reduction.
// (A data-parallel collective that is not a gather: under one communicator per group the parameter gathers share the
// gradient reductions' stream.)
bool gradient_reduction(const Op& o) {
  return o.kind == OpKind::collective && (o.stream == StreamKind::comm_grad || o.stream == StreamKind::comm_dp) &&
         o.coll != C::all_gather;
}
// Every op `id` depends on, directly or not.
std::vector<bool> ancestors(const OpGraph& g, OpId id) {
  std::vector<bool> seen(g.ops.size(), false);
  std::vector<OpId> todo{id};
  while (!todo.empty()) {
    const OpId x = todo.back();
    todo.pop_back();
    for (OpId d : g.ops[x].deps)
      if (!seen[d]) {
        seen[d] = true;
        todo.push_back(d);
      }
  }
  return seen;
}

}  // namespace

// _allreduce_non_tensor_model_parallel_grads: once per step, after every data-parallel gradient reduction of the rank
// (finish_grad_sync) and before its optimizer step, one coalesced all-reduce over tp of the fp32 main gradients of
// the parameters marked sequence_parallel (each layer's two norms and q/k norms, the MoE router, the final norm, the
// MTP depth's three norms), or without sequence parallelism of the q/k layernorms only.
TEST(TpReductions, FinalizeModelGradsReducesReplicatedGradientsOverTp) {
  for (int tp : {2, 4, 8})
    for (bool sp : {true, false}) {
      SCOPED_TRACE("tp " + std::to_string(tp) + (sp ? " with" : " without") + " sequence parallelism");
      // Megatron-Core refuses MoE under tensor parallelism without sequence parallelism: that case is the dense model.
      const auto sc = load(moe_qk(tp, 2, sp), {std::string("training.sequence_parallel=") + (sp ? "true" : "false")});
      const auto g = graph_of(sc);
      const double h = kH, hd = 128, E = 8;
      // Per stage: layers 0-1 (dense, MoE) and 2-3 plus the MTP layer (MoE); norms 2h + 2hd, router h·E.
      const double layer = 2 * h + 2 * hd;
      const double want[2] = {sp ? 2 * layer + h * E : 2 * 2 * hd,
                              sp ? 3 * (layer + h * E) + h + 3 * h : 3 * 2 * hd};
      const Found ar = ops_named(g, "finalize.tp_grads.tp_all_reduce");
      ASSERT_EQ(ar.ids.size(), 2u);  // once per step on each stage
      for (OpId id : ar.ids) {
        const Op& o = g.ops[id];
        EXPECT_EQ(o.group, CommGroup::tp);
        EXPECT_EQ(o.coll, C::all_reduce);
        EXPECT_EQ(o.phase, Phase::optimizer);
        EXPECT_DOUBLE_EQ(o.coll_bytes, 4 * want[o.rank]) << "rank " << o.rank;
        EXPECT_NEAR(per_rank(o, tp) / (2.0 * (tp - 1) / tp * 4 * want[o.rank]), 1.0, 1e-12);
        // After every data-parallel gradient reduction of its rank, and before its optimizer step.
        const auto before = ancestors(g, id);
        int grads = 0;
        for (std::size_t i = 0; i < g.ops.size(); ++i)
          if (g.ops[i].rank == o.rank && gradient_reduction(g.ops[i])) {
            ++grads;
            EXPECT_TRUE(before[i]) << g.op_name(static_cast<OpId>(i)) << " not before " << g.op_name(id);
          }
        EXPECT_GT(grads, 0);
        bool optimizer_after = false;
        for (std::size_t i = id + 1; i < g.ops.size() && g.ops[i].rank == o.rank; ++i)
          if (g.op_name(static_cast<OpId>(i)).ends_with("optimizer.adamw")) optimizer_after = ancestors(g, static_cast<OpId>(i))[id];
        EXPECT_TRUE(optimizer_after);
      }
    }
  // Without q/k norms and sequence parallelism, nothing to reduce; at tp 1 neither.
  EXPECT_TRUE(ops_named(graph_of(load(dense(4), {"training.sequence_parallel=false"})), "finalize.").ids.empty());
  EXPECT_TRUE(ops_named(graph_of(load(moe_qk(1))), "finalize.tp_grads").ids.empty());
}

// _allreduce_word_embedding_grads: only where the last stage keeps a copy of the word embeddings (pp > 1 with tied
// embeddings or MTP), the two copies' fp32 gradients (V/tp x h) all-reduced over the embedding group: the first and
// the last stage, across nodes here. Both stages wait for it, and it starts when both have reached it.
TEST(TpReductions, EmbeddingGradientsAllReducedBetweenFirstAndLastStage) {
  const char* base = R"(system: {preset: h100-sxm, gpus: 32}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 16, micro_batch: 2, optimizer_sharding: zero1, overlap_grad_reduce: true,
           parallelism: {tp: 4, pp: 4}}
)";
  auto embd_ops = [](const OpGraph& g) {
    std::vector<OpId> ids;
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.ops[i].kind == OpKind::collective && g.ops[i].group == CommGroup::embd) ids.push_back(static_cast<OpId>(i));
    return ids;
  };
  EXPECT_TRUE(embd_ops(graph_of(load(base))).empty());  // untied, no MTP: nothing shared
  EXPECT_TRUE(embd_ops(graph_of(load(base, {"model.tied_embeddings=true", "training.parallelism.pp=1", "system.gpus=8"}))).empty());
  const double table = kVocab * kH / 4;  // this tp rank's rows
  for (const auto& sets : {std::vector<std::string>{"model.tied_embeddings=true"}, std::vector<std::string>{"training.mtp_layers=1"},
                           std::vector<std::string>{"model.tied_embeddings=true", "training.optimizer_sharding=zero2"}}) {
    SCOPED_TRACE(sets.back());
    const auto sc = load(base, sets);
    const auto g = graph_of(sc);
    const auto ids = embd_ops(g);
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(g.ops[ids[0]].rank, 0);
    EXPECT_EQ(g.ops[ids[1]].rank, 3);
    const bool zero2 = sets.back() == "training.optimizer_sharding=zero2";  // gradients held as dp shards
    for (OpId id : ids) {
      const Op& o = g.ops[id];
      EXPECT_EQ(o.coll, C::all_reduce);
      EXPECT_EQ(o.stream, StreamKind::comm);
      EXPECT_DOUBLE_EQ(o.coll_bytes, 4 * table / (zero2 ? 2 : 1));
      EXPECT_DOUBLE_EQ(per_rank(o, 2), o.coll_bytes);  // 2 (n-1)/n = 1 over two ranks
      // After the rank's tp all-reduce of finalize (and so after its gradient reductions), before its optimizer.
      EXPECT_TRUE(ancestors(g, id)[ops_named(g, "rank" + std::to_string(o.rank) + ".finalize.tp_grads.tp_all_reduce").ids.at(0)]);
      EXPECT_TRUE(ancestors(g, ops_named(g, "rank" + std::to_string(o.rank) + ".optimizer.adamw").ids.at(0))[id]);
    }
    // In the replay: across nodes (stage 0 and stage 3 are 24 ranks apart), one collective on both ranks.
    const auto res = sim::replay(g, sim::job_of(sc));
    EXPECT_EQ(res.ops[ids[0]].bound_by, "nic");
    EXPECT_DOUBLE_EQ(res.ops[ids[0]].start_s, res.ops[ids[1]].start_s);
    EXPECT_DOUBLE_EQ(res.ops[ids[0]].end_s, res.ops[ids[1]].end_s);
    // ... once both ranks' hosts have issued it (each rank's launch includes torch.distributed's host path).
    // (to the last bit: the two times are sums of the same terms in different orders)
    EXPECT_GE(res.ops[ids[0]].start_s + 1e-12, std::max(res.ops[ids[0]].launch_end_s, res.ops[ids[1]].launch_end_s));
    // The gradient norm's all-reduce over every stage likewise: one start on the four ranks, after the last launch.
    std::vector<OpId> norm;
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.ops[i].kind == OpKind::collective && g.ops[i].group == CommGroup::world) norm.push_back(static_cast<OpId>(i));
    ASSERT_EQ(norm.size(), 4u);
    double last_launch = 0;
    for (OpId id : norm) last_launch = std::max(last_launch, res.ops[id].launch_end_s);
    for (OpId id : norm) {
      EXPECT_DOUBLE_EQ(res.ops[id].start_s, res.ops[norm[0]].start_s);
      EXPECT_GE(res.ops[id].start_s, last_launch);
    }
    // The last stage ends its backward long before the first: it waits for the first stage's reductions.
    EXPECT_GT(res.ops[ids[1]].start_s, res.ops[ids[1] - 1].end_s);
  }
}

// The embedding's weight gradient as PyTorch and Megatron make it (dense, in the weights' dtype, then added into the
// fp32 main gradient by the DDP hook), every micro-batch, at any tp: the zero fill of the V/tp x h table, the T rows,
// the add (read the bf16 table, read and write the fp32 one). Before 2026-12-03 racksim charged a scatter of the T rows
// into the main gradient alone, which undercounted the table's traffic by about V/(tp·T) x 2 (8x here at tp 1).
// A joined collective (OpGraph::joined) moves its data only once every member's kernel has its SMs: here rank 0's
// member becomes ready while a compute kernel holds rank 0's SMs (a collective queued behind compute, as with more
// than one hardware queue), rank 1's while its GPU is free. Both begin when rank 0's kernel gets its SMs, and end
// together; a malformed group is refused.
TEST(TpReductions, JoinedCollectiveBeginsWhenEveryMemberHasItsSms) {
  const auto sc = load(R"(system: {preset: h100-sxm, gpus: 16}
model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768}
training: {seq_len: 2048, global_batch: 16, micro_batch: 2, parallelism: {tp: 8, pp: 2}}
)");
  auto kernel = [](OpGraph& g, const char* name, int rank, double flops, SmallVec<OpId, 3> deps) {
    Op o;
    o.name = name;
    o.rank = static_cast<uint16_t>(rank);
    o.unit = ExecUnit::tensor;
    o.flops = flops;
    o.deps = std::move(deps);
    return g.add(std::move(o));
  };
  auto all_reduce = [](OpGraph& g, const char* name, int rank, SmallVec<OpId, 3> deps) {
    Op o;
    o.name = name;
    o.rank = static_cast<uint16_t>(rank);
    o.kind = OpKind::collective;
    o.stream = StreamKind::comm;
    o.group = CommGroup::embd;
    o.coll = C::all_reduce;
    o.coll_bytes = 64e6;
    o.queues_behind_compute = true;
    o.deps = std::move(deps);
    return g.add(std::move(o));
  };
  OpGraph g;
  g.ranks = 2;
  const OpId k0 = kernel(g, "k0", 0, 1e13, {});
  const OpId k1 = kernel(g, "k1", 1, 1e11, {});
  const OpId m0 = all_reduce(g, "m0", 0, {k0, k1});
  const OpId busy = kernel(g, "busy", 0, 1e13, {});  // on rank 0's compute stream after k0: resident when m0 is ready
  const OpId m1 = all_reduce(g, "m1", 1, {k0, k1});
  g.joined = {{m0, m1}};
  const auto res = sim::replay(g, sim::job_of(sc));
  EXPECT_GT(res.ops[m0].start_s, res.ops[k0].end_s);  // rank 0's waited for the compute kernel's SMs
  EXPECT_GE(res.ops[m0].start_s, res.ops[busy].end_s);
  EXPECT_DOUBLE_EQ(res.ops[m1].start_s, res.ops[m0].start_s);
  EXPECT_DOUBLE_EQ(res.ops[m1].end_s, res.ops[m0].end_s);
  // Malformed groups: a member listed twice, one out of range, a kernel, two members on one rank.
  OpGraph h = g;
  const OpId x0 = all_reduce(h, "x0", 0, {});
  for (const std::vector<OpId>& bad : {std::vector<OpId>{m0, m0}, std::vector<OpId>{m0, 99}, std::vector<OpId>{m0, busy},
                                       std::vector<OpId>{m0, x0}}) {
    h.joined = {bad};
    EXPECT_THROW(sim::replay(h, sim::job_of(sc)), std::logic_error);
  }
}

TEST(TpReductions, EmbeddingWeightGradientIsDenseAndAddedIntoTheMainGradient) {
  for (int tp : {1, 2, 4}) {
    const auto g = graph_of(load(dense(tp)));
    const double table = kVocab / tp * kH;
    const Found zero = ops_named(g, ".embedding.bwd.zero"), add = ops_named(g, ".embedding.bwd.main_grad_add");
    ASSERT_EQ(zero.ids.size(), static_cast<std::size_t>(kMicroSteps)) << "tp " << tp;
    ASSERT_EQ(add.ids.size(), static_cast<std::size_t>(kMicroSteps)) << "tp " << tp;
    EXPECT_DOUBLE_EQ(zero.bytes, kMicroSteps * table * kA) << "tp " << tp;
    EXPECT_DOUBLE_EQ(add.bytes, kMicroSteps * table * (kA + 2 * 4)) << "tp " << tp;
    // The rows: the whole micro-batch's tokens on every tp rank (the gradient was gathered), read once, the rows read
    // and written.
    double rows = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const std::string n = g.op_name(static_cast<OpId>(i));
      if (n.size() > 14 && n.compare(n.size() - 14, 14, ".embedding.bwd") == 0) rows += g.ops[i].hbm_bytes;
    }
    EXPECT_DOUBLE_EQ(rows, kMicroSteps * kT * kH * 3 * kA) << "tp " << tp;
    // The bf16 table lives from the zero fill to the add.
    ASSERT_EQ(g.ops[zero.ids[0]].allocs.size(), 1u);
    ASSERT_EQ(g.ops[add.ids[0]].frees.size(), 1u);
    const TensorId grad = g.ops[zero.ids[0]].allocs[0];
    EXPECT_DOUBLE_EQ(g.tensors[grad].bytes, table * kA);
    EXPECT_EQ(g.ops[add.ids[0]].frees[0], grad);
  }
}
