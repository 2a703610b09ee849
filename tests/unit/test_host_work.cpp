// The framework's host work: Megatron-Core's measured host time per layer (launch.megatron_*,
// calibration/data/h200-2026-12-01-megatron-host) bounds small layers from below, CUDA graphs take it
// away, a large layer hides it, and the MoE token dispatchers make the host wait for the GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/report/report.h"
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

// A tiny model on one H100: each kernel takes a few microseconds, so the host sets the pace.
const char* kTiny = R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 8, hidden: 256, ffn_hidden: 1024, heads: 4, kv_heads: 4, vocab: 256}
training: {seq_len: 128, global_batch: 4, micro_batch: 1, parallelism: {tp: 1, pp: 1}}
)";

// A layer whose GPU time (about 20 ms per micro-batch) is far above the host's 3.5 ms.
const char* kLarge = R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 2, hidden: 8192, ffn_hidden: 28672, heads: 64, kv_heads: 8, vocab: 256}
training: {seq_len: 8192, global_batch: 2, micro_batch: 1, parallelism: {tp: 1, pp: 1}}
)";

const char* kMoe = R"(system: {preset: h100-sxm, gpus: 16}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 4, vocab: 256,
        moe: {experts: 16, top_k: 2, expert_ffn_hidden: 1024}}
training: {seq_len: 4096, global_batch: 32, micro_batch: 1, parallelism: {tp: 1, pp: 1, ep: 8}}
)";

std::vector<std::string> no_host_work() {
  return {"system.overrides.launch.megatron_layer_forward=0 s", "system.overrides.launch.megatron_layer_backward=0 s",
          "system.overrides.launch.megatron_moe_forward=0 s", "system.overrides.launch.megatron_moe_backward=0 s"};
}

}  // namespace

// Host-bound: the step is the host's layers x micro-batches x (forward + backward) time, plus the
// head, embedding and optimizer; the GPU idles for the rest (launch overhead in the breakdown).
TEST(HostWork, SmallLayersRunAtTheHostsPace) {
  const auto sc = load(kTiny);
  const auto& l = sc.system.spec.launch;
  ASSERT_GT(l.megatron_layer_forward_s, 0);  // the shipped preset carries the measurement
  const auto r = sim::simulate(sc);
  const double host_s = 8 * 4 * (l.megatron_layer_forward_s + l.megatron_layer_backward_s);
  EXPECT_GT(r.replay.step_time_s, host_s);
  EXPECT_LT(r.replay.step_time_s, 1.05 * host_s);
  EXPECT_GT(r.replay.breakdown.launch_overhead_s, 0.8 * r.replay.step_time_s);
  // Without the framework's host work only the bare launches remain: an order of magnitude faster.
  const auto bare = sim::simulate(load(kTiny, no_host_work()));
  EXPECT_LT(bare.replay.step_time_s, 0.2 * r.replay.step_time_s);
}

// Megatron's CUDA graphs replay the dense layers: their host work goes, and with it most of the step.
TEST(HostWork, CudaGraphsRemoveTheDenseLayersHostWork) {
  const auto eager = sim::simulate(load(kTiny));
  const auto graphs = sim::simulate(load(kTiny, {"training.cuda_graphs=true"}));
  EXPECT_LT(graphs.replay.step_time_s, 0.2 * eager.replay.step_time_s);
  for (const auto& op : graphs.graph.ops) EXPECT_EQ(op.host_s, 0.0);
}

// The gain vanishes once a layer's GPU time exceeds its host time: the host runs ahead.
TEST(HostWork, LargeLayersHideTheHost) {
  const double with = sim::simulate(load(kLarge)).replay.step_time_s;
  const double without = sim::simulate(load(kLarge, no_host_work())).replay.step_time_s;
  EXPECT_NEAR(with / without, 1.0, 0.01);
}

// Each layer's forward ops carry its forward host time, the backward ops the backward's; recomputed
// ops what the forward's did.
TEST(HostWork, LayerHostTimeIsSpreadOverItsOps) {
  const auto sc = load(kTiny, {"training.recompute=full"});
  const auto& l = sc.system.spec.launch;
  const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
  double fwd = 0, bwd = 0, rec = 0;
  int fwd_ops = 0, rec_ops = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (g.op_name(static_cast<OpId>(i)).rfind("mb0.L3.", 0) != 0) continue;
    (op.phase == Phase::forward ? fwd : op.phase == Phase::recompute ? rec : bwd) += op.host_s;
    fwd_ops += op.phase == Phase::forward;
    rec_ops += op.phase == Phase::recompute;
  }
  EXPECT_NEAR(fwd, l.megatron_layer_forward_s, 1e-12);
  EXPECT_NEAR(bwd, l.megatron_layer_backward_s, 1e-12);
  // Full recompute re-runs the forward but the output projection: each recomputed op what it cost.
  ASSERT_GT(rec_ops, 0);
  EXPECT_LT(rec_ops, fwd_ops);
  EXPECT_NEAR(rec, l.megatron_layer_forward_s * rec_ops / fwd_ops, 1e-12);
}

// Megatron-Core's all-to-all dispatcher waits on the host for the token counts (taken off the routing
// map) before the EP all-to-all; DeepEP/HybridEP wait for the dispatch itself before the experts.
// Neither op is issued before the op it waits for has finished.
TEST(HostWork, MoeDispatchersMakeTheHostWait) {
  for (const char* dispatcher : {"alltoall", "deepep"}) {
    const auto r = sim::simulate(load(kMoe, {std::string("training.moe.dispatcher=") + dispatcher}));
    int waits = 0;
    for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
      const Op& op = r.graph.ops[i];
      if (op.host_waits_for == kNoOp) continue;
      ++waits;
      const std::string name = r.graph.op_name(static_cast<OpId>(i)), on = r.graph.op_name(op.host_waits_for);
      if (std::string(dispatcher) == "alltoall") {
        EXPECT_NE(name.find("dispatch.all_to_all"), std::string::npos) << name;
        EXPECT_NE(on.find("router.topk"), std::string::npos) << on;
      } else {
        EXPECT_NE(on.find("dispatch.all_to_all"), std::string::npos) << on;
      }
      EXPECT_GE(r.replay.ops[i].launch_start_s, r.replay.ops[op.host_waits_for].end_s) << name;
    }
    // One per MoE layer forward and micro-batch: 4 layers x 2 micro-batches (32 sequences over dp 16).
    EXPECT_EQ(waits, 4 * 2) << dispatcher;
  }
}

// JAX: XLA's static shapes need no host read-back, and its runtime is modelled by launch.xla_*.
TEST(HostWork, JaxHasNoMegatronHostWork) {
  const auto sc = load(kMoe, {"training.framework=jax"});
  const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
  for (const auto& op : g.ops) {
    EXPECT_EQ(op.host_s, 0.0);
    EXPECT_EQ(op.host_waits_for, kNoOp);
  }
}
