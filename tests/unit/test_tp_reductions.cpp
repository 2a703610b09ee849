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
// parallelism), then the scatter-add of all T rows.
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
        // Unfused: the max's kernel before its reduction, the division after the sums.
        if (!fused) {
          EXPECT_TRUE(g.op_name(reductions[0] - 1).ends_with("cross_entropy.max"));
          EXPECT_TRUE(g.op_name(reductions[2] + 1).ends_with("cross_entropy.normalize"));
        }
        const double V = kVocab / tp;
        double kernels = 0;
        for (OpId id : ops_named(g, "v0.cross_entropy").ids)
          if (g.ops[id].kind == OpKind::kernel && g.ops[id].phase == Phase::forward) kernels += g.ops[id].hbm_bytes;
        EXPECT_DOUBLE_EQ(kernels, kMicroSteps * kT * V * (fused ? 8 : kA + 36));
      }
  // tp 1: none.
  EXPECT_TRUE(ops_named(graph_of(load(dense(1))), "tp_all_reduce").ids.empty());
}
