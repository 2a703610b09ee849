// Hybrid sharding (training.parallelism.dp_shard, HSDP): state sharded over a shard group of dp_shard ranks
// inside a node and replicated over dp/dp_shard groups across nodes. Checked against closed forms: the
// shard-group gathers and reduce-scatters move what plain FSDP moves, the replica all-reduce moves the
// 1/dp_shard shard, per-GPU state is params·bytes/dp_shard, dp_shard = dp is plain FSDP, bad values fail.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "hardware_models/collectives.h"
#include "hardware_models/topology.h"
#include "input/diagnostics.h"
#include "sim/engine/replay.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "graph_state_util.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;
using racksim::testing::resident_state;

namespace {

sim::Scenario load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_from_text(yaml, "h.yaml", sets);
}
std::string error_text(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_error_text(yaml, "h.yaml", sets);
}

// 4 nodes of 8 H100 (NVLink inside, NICs between): FSDP over 32 ranks, or sharded in a node (dp_shard 8).
const char* kDense = R"(system: {preset: h100-sxm, gpus: 32}
model: {layers: 4, hidden: 4096, ffn_hidden: 11008, heads: 32, kv_heads: 32, vocab: 32000}
training: {seq_len: 4096, global_batch: 64, micro_batch: 1, optimizer_sharding: fsdp, parallelism: {tp: 1}}
)";

double volume(const OpGraph& g, CommGroup grp, hw::CollectiveOp op) {
  double b = 0;
  for (const Op& o : g.ops)
    if (o.kind == OpKind::collective && o.group == grp && o.coll == op) b += o.coll_bytes;
  return b;
}
int count(const OpGraph& g, CommGroup grp) {
  int n = 0;
  for (const Op& o : g.ops) n += o.kind == OpKind::collective && o.group == grp;
  return n;
}

// Every parameter (tp 1, pp 1): the layers, the untied embedding and head, the final norm.
double params_of(const ModelSpec& m) {
  double n = 2.0 * m.vocab * m.hidden + m.hidden;
  for (int l = 0; l < m.layers; ++l) {
    const auto p = layer_params(m, l);
    n += p.attention + p.mlp + p.norms;
  }
  return n;
}

}  // namespace

// Per micro-batch, FSDP gathers every weight (bf16) before its forward and its backward and reduce-scatters
// every fp32 gradient: the same nccl-tests sizes over the shard group as over all of dp. Hybrid adds one
// all-reduce of the reduced 1/s shard over the r = dp/s replicas. On the links: a ring all-gather moves
// (s-1)/s of the gathered size per rank over NVLink (the 8 shard ranks are one node), a ring all-reduce
// 2(r-1)/r of its size over the NICs (the 4 replicas are 4 nodes).
TEST(HybridSharding, CollectiveVolumesAndPlacementMatchTheTextbook) {
  const auto plain = load(kDense);
  const auto hsdp = load(kDense, {"training.parallelism.dp_shard=8"});
  const int m = hsdp.training.micro_steps();
  ASSERT_EQ(m, 2);
  const auto gp = build_training_graph(plain.model, plain.training, plain.system.spec);
  const auto gh = build_training_graph(hsdp.model, hsdp.training, hsdp.system.spec);
  const double n = params_of(hsdp.model);
  EXPECT_NEAR(volume(gp, CommGroup::dp_cp, hw::CollectiveOp::reduce_scatter) / (4.0 * n * m), 1.0, 1e-12);
  EXPECT_NEAR(volume(gh, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter) / (4.0 * n * m), 1.0, 1e-12);
  EXPECT_NEAR(volume(gh, CommGroup::dp_shard, hw::CollectiveOp::all_gather) / volume(gp, CommGroup::dp_cp, hw::CollectiveOp::all_gather), 1.0,
              1e-12);
  EXPECT_NEAR(volume(gh, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce) / (4.0 * n * m / 8), 1.0, 1e-12);
  EXPECT_EQ(count(gh, CommGroup::dp_cp), 0);
  EXPECT_EQ(count(gp, CommGroup::dp_replicate), 0);
  EXPECT_EQ(count(gh, CommGroup::dp_replicate), count(gh, CommGroup::dp_shard) / 3);  // one per reduce-scatter

  // Placement: the shard group is one node, the replicas one rank per node.
  const auto& sys = hsdp.system.spec;
  const auto shard = hw::place_group(sys, 8, 1), replicas = hw::place_group(sys, 4, 8);
  EXPECT_EQ(shard.domains(), 1);
  EXPECT_EQ(replicas.domains(), 4);
  EXPECT_EQ(replicas.ranks_per_domain, 1);
  hw::CollectiveOptions ring;
  ring.algorithm = hw::CollectiveAlgorithm::ring;
  ring.nvls_enabled = false;
  const double size = 256e6;
  const auto ag = hw::estimate_collective(sys, hw::CollectiveOp::all_gather, size, shard, ring);
  EXPECT_NEAR(ag.bytes_per_rank_nvlink / (size * 7 / 8), 1.0, 1e-9);
  EXPECT_EQ(ag.bytes_per_rank_nic, 0);
  const auto ar = hw::estimate_collective(sys, hw::CollectiveOp::all_reduce, size, replicas, ring);
  EXPECT_NEAR(ar.bytes_per_rank_nic / (2 * size * 3 / 4), 1.0, 1e-9);

  // In the replay the engine places them so: reduce-scatters on NVLink, all-reduces on the NICs.
  const auto res = sim::replay(gh, sim::job_of(hsdp));
  int nic = 0, nvlink = 0;
  for (std::size_t i = 0; i < gh.ops.size(); ++i) {
    const Op& o = gh.ops[i];
    if (o.kind != OpKind::collective) continue;
    if (o.group == CommGroup::dp_replicate) nic += res.ops[i].bound_by == "nic";
    if (o.group == CommGroup::dp_shard && o.coll == hw::CollectiveOp::reduce_scatter) nvlink += res.ops[i].bound_by != "nic";
  }
  EXPECT_EQ(nic, count(gh, CommGroup::dp_replicate));
  EXPECT_EQ(nvlink, count(gh, CommGroup::dp_replicate));
}

// Megatron: bf16 weights, fp32 gradients, fp32 master + Adam moments = 2 + 4 + 12 bytes per parameter, all
// sharded over the shard group under FSDP (1/s); under ZeRO-1 with dp_shard (Megatron's distributed-optimizer
// instances) only the 12 optimizer bytes are. JAX: fp32 parameters and moments (4 + 8), sharded over s.
TEST(HybridSharding, StateIsShardedOverTheShardGroup) {
  for (const int s : {1, 2, 8, 32}) {
    const std::vector<std::string> sets = {"training.parallelism.dp_shard=" + std::to_string(s)};
    const auto sc = load(kDense, sets);
    const double n = params_of(sc.model);
    EXPECT_NEAR(resident_state(build_training_graph(sc.model, sc.training, sc.system.spec)) / (n * 18 / s), 1.0, 1e-12)
        << s;
    auto z = load(kDense, {sets[0], "training.optimizer_sharding=zero1"});
    EXPECT_NEAR(resident_state(build_training_graph(z.model, z.training, z.system.spec)) / (n * (6 + 12.0 / s)), 1.0, 1e-12)
        << s;
    auto j = load(kDense, {sets[0], "training.framework=jax"});
    EXPECT_NEAR(resident_state(build_training_graph(j.model, j.training, j.system.spec)) / (n * 12 / s), 1.0, 1e-12) << s;
  }
}

// dp_shard = dp is plain FSDP: the same step, the same memory, in both framework modes.
TEST(HybridSharding, WholeDataParallelGroupIsPlainFsdp) {
  for (const char* fw : {"megatron", "jax"}) {
    const std::string f = std::string("training.framework=") + fw;
    const auto plain = load(kDense, {f});
    const auto full = load(kDense, {f, "training.parallelism.dp_shard=32"});
    const auto gp = build_training_graph(plain.model, plain.training, plain.system.spec);
    const auto gf = build_training_graph(full.model, full.training, full.system.spec);
    ASSERT_EQ(gp.ops.size(), gf.ops.size()) << fw;
    const auto rp = sim::replay(gp, sim::job_of(plain)), rf = sim::replay(gf, sim::job_of(full));
    EXPECT_EQ(rp.step_time_s, rf.step_time_s) << fw;
    EXPECT_EQ(rp.memory.peak_hbm_bytes, rf.memory.peak_hbm_bytes) << fw;
    // and hybrid sharding is not: the replica all-reduces cross the NICs.
    const auto h = load(kDense, {f, "training.parallelism.dp_shard=8"});
    EXPECT_GT(sim::replay(build_training_graph(h.model, h.training, h.system.spec), sim::job_of(h)).memory.peak_hbm_bytes,
              rp.memory.peak_hbm_bytes)
        << fw;
  }
}

// JAX with scanned layers: the replica all-reduce is part of the layer's loop iteration like the
// reduce-scatter (XLA's data-axis all-reduce of the scattered gradient). Unpipelined (XLA's default flags
// pipeline only a reduce-scatter whose user is the loop output, which here is the all-reduce) the next
// layer's iteration (its first op, the weight gather) waits for it; with the all-reduce pipelined it is
// carried into the next iteration and the one after waits for it.
TEST(HybridSharding, JaxScannedLayersEndTheIterationWithTheReplicaAllReduce) {
  for (const bool pipelined : {false, true}) {
    std::vector<std::string> sets = {"training.framework=jax", "training.scan_layers=true",
                                     "training.parallelism.dp_shard=8"};
    if (pipelined) sets.push_back("training.xla_pipelined_collectives=true");
    const auto sc = load(kDense, sets);
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    std::optional<OpId> ar;
    for (std::size_t i = 0; i < g.ops.size() && !ar; ++i)
      if (g.op_name(static_cast<OpId>(i)) == "mb0.L2.grad.replica_all_reduce") ar = static_cast<OpId>(i);
    ASSERT_TRUE(ar);
    std::string waiter;
    for (std::size_t i = *ar + 1; i < g.ops.size() && waiter.empty(); ++i)
      for (OpId d : g.ops[i].deps)
        if (d == *ar) waiter = g.op_name(static_cast<OpId>(i));
    EXPECT_EQ(waiter.rfind(pipelined ? "mb0.L0." : "mb0.L1.", 0), 0u) << waiter;
  }
}

// XLA runs every asynchronous collective on one stream (AsyncStreamKind::kCollective, openxla/xla
// xla/service/gpu/runtime/nccl_clique_key.h in 2024, later backends/gpu/collectives/gpu_clique_key.h): weight
// gathers, gradient reduce-scatters and the replica all-reduce queue behind each other. Its latency-hiding
// scheduler issues a layer's gather (it needs only the weights) before the gradient collectives of the layer
// after it in the backward, which wait for that layer's wgrad. Unrolled layers: on the one stream, L1's gather
// comes before L2's reduce-scatter and all-reduce, and L2's all-reduce before L0's gather. Megatron mode keeps a
// group's gathers and reductions on its one communicator's stream too, unless the gathers have communicators of their
// own (training.dp_all_gather_group separate: Megatron's --create-all-gather-group).
TEST(HybridSharding, JaxDataParallelCollectivesShareOneStreamGathersFirst) {
  const auto sc = load(kDense, {"training.framework=jax", "training.scan_layers=false", "training.parallelism.dp_shard=8"});
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  auto find = [&](const std::string& name) -> std::optional<OpId> {
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.op_name(static_cast<OpId>(i)) == name) return static_cast<OpId>(i);
    return std::nullopt;
  };
  std::optional<OpId> ag1, ag0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& o = g.ops[i];
    if (o.kind != OpKind::collective || o.phase != Phase::backward || o.coll != hw::CollectiveOp::all_gather) continue;
    const std::string n = g.op_name(static_cast<OpId>(i));
    if (n.rfind("mb0.L1.", 0) == 0) ag1 = static_cast<OpId>(i);
    if (n.rfind("mb0.L0.", 0) == 0) ag0 = static_cast<OpId>(i);
  }
  const auto rs2 = find("mb0.L2.grad.reduce_scatter"), ar2 = find("mb0.L2.grad.replica_all_reduce");
  ASSERT_TRUE(ag1 && ag0 && rs2 && ar2);
  EXPECT_EQ(g.ops[*ag1].stream, g.ops[*rs2].stream);
  EXPECT_EQ(g.ops[*ag1].stream, g.ops[*ar2].stream);
  EXPECT_LT(*ag1, *rs2);
  EXPECT_LT(*rs2, *ar2);
  EXPECT_LT(*ar2, *ag0);
  for (const bool own : {false, true}) {
    const auto mg = load(kDense, {"training.parallelism.dp_shard=8",
                                  std::string("training.dp_all_gather_group=") + (own ? "separate" : "shared")});
    const auto gm = build_training_graph(mg.model, mg.training, mg.system.spec);
    int gathers = 0, reductions = 0;
    for (const Op& o : gm.ops) {
      const bool dense_dp = o.group == CommGroup::dp || o.group == CommGroup::dp_cp || o.group == CommGroup::dp_shard ||
                            o.group == CommGroup::dp_replicate;
      if (o.kind != OpKind::collective || !dense_dp) continue;
      if (o.coll == hw::CollectiveOp::all_gather) {
        ++gathers;
        EXPECT_EQ(o.stream, own ? StreamKind::comm_dp : StreamKind::comm_grad);
      } else {
        ++reductions;
        // (HSDP's replica all-reduce: the replica group's own communicator, on the other data-parallel stream.)
        const bool replica = o.group == CommGroup::dp_replicate;
        EXPECT_EQ(o.stream, replica && !own ? StreamKind::comm_dp : StreamKind::comm_grad) << to_string(o.coll);
      }
    }
    EXPECT_GT(gathers, 0);
    EXPECT_GT(reductions, 0);
  }
}

TEST(HybridSharding, BadValuesNameTheKey) {
  EXPECT_EQ(error_text(kDense, {"training.parallelism.dp_shard=6"}),
            "--set training.parallelism.dp_shard=6: error: training.parallelism.dp_shard: dp_shard (6) must divide "
            "dp (32)");
  EXPECT_EQ(error_text(kDense, {"training.optimizer_sharding=none", "training.parallelism.dp_shard=8"}),
            "--set training.parallelism.dp_shard=8: error: training.parallelism.dp_shard: dp_shard (hybrid "
            "sharding) needs sharded state: set training.optimizer_sharding to fsdp (HSDP), zero1 or zero2 "
            "(distributed optimizer instances); with none every data-parallel rank holds the whole state");
  EXPECT_NE(error_text(kDense, {"training.parallelism.dp_shard=0"}).find("training.parallelism.dp_shard"),
            std::string::npos);
  EXPECT_NE(error_text(kDense, {"training.parallelism.dp_sahrd=8"}).find("did you mean 'dp_shard'"), std::string::npos);
  // MoE: the replicas must split the expert-data-parallel group (edp = 32 / ep 16 = 2 here, 4 replicas).
  const auto moe = error_text(R"(system: {preset: h100-sxm, gpus: 32}
model: {preset: deepseek-v3}
training: {seq_len: 4096, global_batch: 32, optimizer_sharding: fsdp, parallelism: {tp: 1, ep: 16, dp_shard: 8}}
)");
  EXPECT_NE(moe.find("h.yaml:3:110: error: training.parallelism.dp_shard: dp / dp_shard = 4 replica groups must divide"),
            std::string::npos)
      << moe;
}
