// The framework's host work: Megatron-Core's measured host time per layer (launch.megatron_*,
// calibration/data/h200-2026-12-01-megatron-host) bounds small layers from below, CUDA graphs take it
// away, a large layer hides it, and the MoE token dispatchers make the host wait for the GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

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

// Host time of layer 1's forward and backward ops in micro-batch 0 of a scenario's training graph.
std::pair<double, double> layer1_host_s(const std::string& yaml, const std::vector<std::string>& sets) {
  const auto sc = load(yaml, sets);
  const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
  std::pair<double, double> fwd_bwd{0, 0};
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.op_name(static_cast<OpId>(i)).rfind("mb0.L1.", 0) == 0)
      (g.ops[i].phase == Phase::forward ? fwd_bwd.first : fwd_bwd.second) += g.ops[i].host_s;
  return fwd_bwd;
}

// torch.distributed's host path of one NCCL call the framework issues from Python, by kind, for an eager NCCL
// collective under layer graphs (the rule of the graph builder's charge_torch_nccl_calls in that mode, which
// TorchNcclCallsCostTheHostPerCall pins op by op); 0 for any other op.
double torch_call_s(const hw::LaunchSpec& l, const Op& op) {
  if (op.kind != OpKind::collective || op.comm_kernel != CommKernel::nccl || op.graph == GraphLaunch::captured) return 0.0;
  return op.coll == hw::CollectiveOp::all_reduce  ? l.torch_nccl_all_reduce_s
         : op.coll == hw::CollectiveOp::send_recv ? l.torch_nccl_p2p_pair_s
                                                  : l.torch_nccl_collective_s;
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
  // The backward also runs DDP's gradient hook on the layer's parameters: 4 GEMM weights (QKV, output, fc1, fc2) whose
  // gradients TE accumulates, and the 2 norms fused into QKV and fc1, which the hook adds into main_grad; no forward
  // pre-hooks without --overlap-param-gather.
  EXPECT_NEAR(bwd, l.megatron_layer_backward_s + 4 * l.megatron_ddp_grad_hook_s + 2 * l.megatron_ddp_grad_hook_add_s, 1e-12);
  // Megatron's full recompute re-runs the whole forward, the output projection included: each recomputed
  // op what it cost.
  ASSERT_GT(rec_ops, 0);
  EXPECT_EQ(rec_ops, fwd_ops);
  EXPECT_NEAR(rec, l.megatron_layer_forward_s * rec_ops / fwd_ops, 1e-12);
}

// Megatron-Core's all-to-all dispatcher waits on the host for the token counts (taken off the routing
// map and all-gathered over the EP group) before the EP all-to-all; DeepEP/HybridEP wait for the dispatch itself before the experts.
// Neither op is issued before the op it waits for has finished.
TEST(HostWork, MoeDispatchersMakeTheHostWait) {
  for (const char* dispatcher : {"alltoall", "deepep"}) {
    // (without Megatron's NaN checks, whose waits HostWork.MegatronNanChecksMakeTheHostWait counts)
    const auto r = sim::simulate(load(kMoe, {std::string("training.moe.dispatcher=") + dispatcher, "training.check_for_nan=false"}));
    int waits = 0;
    for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
      const Op& op = r.graph.ops[i];
      if (op.host_waits_for == kNoOp) continue;
      const std::string name = r.graph.op_name(static_cast<OpId>(i)), on = r.graph.op_name(op.host_waits_for);
      EXPECT_GE(r.replay.ops[i].launch_start_s, r.replay.ops[op.host_waits_for].end_s) << name;
      if (on.find("optimizer.grad_norm") != std::string::npos) continue;  // the optimizer's read of the norm
      ++waits;
      if (std::string(dispatcher) == "alltoall") {
        EXPECT_NE(name.find("dispatch.all_to_all"), std::string::npos) << name;
        EXPECT_NE(on.find("dispatch.counts_all_gather"), std::string::npos) << on;  // the counts, gathered over EP
      } else {
        // Inside the dispatch call for the notify's counts, then before the permutation for the routing map rebuilt
        // after the exchange (a compute-stream kernel that waits for it).
        const bool notify = on.find("dispatch.notify") != std::string::npos;
        EXPECT_TRUE(notify || on.find("dispatch.indices_to_multihot") != std::string::npos) << on;
        if (notify) {
          EXPECT_NE(name.find("dispatch.all_to_all"), std::string::npos) << name;
        }
      }
    }
    // Per MoE layer forward and micro-batch (4 layers x 2 micro-batches: 32 sequences over dp 16): one, or two for
    // DeepEP (the notify's counts and the exchange).
    EXPECT_EQ(waits, 4 * 2 * (std::string(dispatcher) == "alltoall" ? 1 : 2)) << dispatcher;
  }
}

// Megatron's NaN checks (on by default): the host reads each micro-batch's loss before issuing more, and
// in the last micro-batch each gradient bucket's norm before its reduction (buckets of at least 40M
// parameters, filled in backward order). Measured in Megatron's loop on the H200
// (calibration/data/h200-2026-12-02-megatron-loop-syncs): 4 loss and 26 bucket read-backs per step of the
// 1.7B job, and 70 ms less forward-backward without them.
TEST(HostWork, MegatronNanChecksMakeTheHostWait) {
  // 8 layers of 16.8M parameters (hidden 1024, gated MLP 4096); vocab 32,768 x 1,024 = 33.6M parameters
  // each in the embedding and the head (untied).
  const char* job = R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32768, tied_embeddings: false}
training: {seq_len: 2048, global_batch: 3, micro_batch: 1, parallelism: {tp: 1, pp: 1}, overlap_grad_reduce: true}
)";
  const auto r = sim::simulate(load(job));
  int loss_waits = 0, bucket_waits = 0;
  double checked_bytes = 0;
  for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
    const Op& op = r.graph.ops[i];
    const std::string name = r.graph.op_name(static_cast<OpId>(i));
    if (name.find("nan_check") != std::string::npos) {
      EXPECT_EQ(name.rfind("mb2.", 0), 0u) << name;  // the last micro-batch only
      checked_bytes += op.hbm_bytes;
    }
    if (op.host_waits_for == kNoOp) continue;
    const std::string on = r.graph.op_name(op.host_waits_for);
    if (on.find("cross_entropy") != std::string::npos) ++loss_waits;
    if (on.find("nan_check") != std::string::npos) ++bucket_waits;
    EXPECT_GE(r.replay.ops[i].launch_start_s, r.replay.ops[op.host_waits_for].end_s) << name;
  }
  EXPECT_EQ(loss_waits, 3);
  // In backward order, each bucket closing at 50.3M: the head and layer 7, layers 6..4, layers 3..1,
  // layer 0 and the embedding.
  EXPECT_EQ(bucket_waits, 4);
  const double params = 2 * 32768.0 * 1024 + 8 * 16.78e6;
  EXPECT_NEAR(checked_bytes / 4, params, 0.01 * params);  // every fp32 main grad read once
  // --no-check-for-nan-in-loss-and-grad: no waits (but the optimizer's read of the gradient norm), and the GPU no
  // longer idles behind them.
  const auto off = sim::simulate(load(job, {"training.check_for_nan=false"}));
  for (const auto& op : off.graph.ops) {
    if (op.host_waits_for != kNoOp) {
      EXPECT_NE(off.graph.op_name(op.host_waits_for).find("optimizer.grad_norm"), std::string::npos);
    }
  }
  EXPECT_GT(r.replay.step_time_s, off.replay.step_time_s);
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

// training.cuda_graph_scope (Megatron-Core's --cuda-graph-scope with Transformer Engine's graphs): the
// captured modules' ops carry no host work and start one graph launch per captured stretch; the rest of
// the layer keeps its eager share (the layer's host time over its ops), the MoE layer's own host work
// goes to its ops outside the graphs, less the routing when the router is captured. Ops outside every
// layer launch eagerly.
TEST(HostWork, CudaGraphScopeCapturesOnlyItsModules) {
  const auto sc = load(kMoe, {"training.cuda_graphs=true", "training.cuda_graph_scope=[attn, moe_router]"});
  const auto& l = sc.system.spec.launch;
  const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
  double fwd = 0, bwd = 0, fwd_calls = 0, bwd_calls = 0;  // calls: the eager NCCL calls' torch.distributed host path
  int fwd_ops = 0, fwd_eager = 0, bwd_ops = 0, bwd_eager = 0, starts = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const std::string name = g.op_name(static_cast<OpId>(i));
    ASSERT_NE(op.graph, GraphLaunch::step) << name;  // every op is captured or eager
    if (name.rfind("mb0.L1.", 0) != 0) {
      if (name.find(".L") == std::string::npos) {
        EXPECT_EQ(op.graph, GraphLaunch::eager) << name;
      }
      continue;
    }
    const std::string step = name.substr(7);
    const bool attention = step.rfind("norm1", 0) == 0 || step.rfind("qkv", 0) == 0 || step.rfind("attn", 0) == 0;
    const bool router = step.rfind("norm2", 0) == 0 || step.rfind("router", 0) == 0;
    EXPECT_EQ(op.graph == GraphLaunch::captured, attention || router) << name;
    if (op.graph == GraphLaunch::captured) {
      EXPECT_EQ(op.host_s, 0.0) << name;
    }
    starts += op.graph_start;
    const bool forward = op.phase == Phase::forward;
    (forward ? fwd : bwd) += op.host_s;
    (forward ? fwd_calls : bwd_calls) += torch_call_s(l, op);
    (forward ? fwd_ops : bwd_ops) += 1;
    (forward ? fwd_eager : bwd_eager) += op.graph == GraphLaunch::eager;
  }
  ASSERT_GT(fwd_eager, 0);
  ASSERT_LT(fwd_eager, fwd_ops);
  // Forward: the eager ops' share of the dense layer's host time, and the MoE host work less the routing; the
  // experts' grouped GEMMs (eager) their own (2 forward, 4 backward; 2 local experts).
  const double grouped = 2 * l.te_grouped_gemm_s + l.te_grouped_call_s - l.megatron_gemm_dispatch_s;
  ASSERT_GT(grouped, 0);
  EXPECT_NEAR(fwd, l.megatron_layer_forward_s * fwd_eager / fwd_ops + l.megatron_moe_forward_s - l.megatron_moe_routing_s +
                       2 * grouped + fwd_calls,
              1e-12);
  ASSERT_GT(fwd_calls, 0);  // the EP exchanges (alltoall dispatcher) stay eager
  // Backward: DDP's gradient hooks of every parameter of the layer, captured or not (they sit on the accumulators,
  // outside the graphs; HostWork.MegatronDdpHooksPerParameterAndModule counts them), on the eager ops.
  const double grad_hooks = 6 * l.megatron_ddp_grad_hook_s + 3 * l.megatron_ddp_grad_hook_add_s;
  EXPECT_NEAR(bwd, l.megatron_layer_backward_s * bwd_eager / bwd_ops + l.megatron_moe_backward_s + grad_hooks + 4 * grouped +
                       bwd_calls,
              1e-12);
  // One graph per pass: Megatron-Core's TransformerLayer._te_cuda_graph_capture captures the attention and
  // the router part in one Transformer Engine callable (one forward graph, one backward graph).
  EXPECT_EQ(starts, 2);
}

// What the host does per step falls between the whole-step graphs and eager launches, and capturing
// the router too takes more of it away (a small MoE model on 16 H100s, host-bound at these shapes).
TEST(HostWork, CudaGraphScopeLiesBetweenGraphsAndEager) {
  auto step = [&](std::vector<std::string> sets) { return sim::simulate(load(kMoe, sets)).replay.step_time_s; };
  const double whole = step({"training.cuda_graphs=true"});
  const double attn = step({"training.cuda_graphs=true", "training.cuda_graph_scope=[attn]"});
  const double attn_router = step({"training.cuda_graphs=true", "training.cuda_graph_scope=[attn, moe_router]"});
  const double eager = step({});
  EXPECT_LT(whole, attn_router);
  EXPECT_LT(attn_router, attn);
  EXPECT_LT(attn, eager);
}

TEST(HostWork, CudaGraphScopeErrors) {
  const std::string base = kMoe;
  auto error = [&](const std::string& extra) {
    return racksim::testing::scenario_error_text(base.substr(0, base.size() - 2) + extra + "}\n", "t.yaml");
  };
  EXPECT_EQ(error(", cuda_graphs: true, cuda_graph_scope: [attn, atn]"),
            "t.yaml:4:141: error: training.cuda_graph_scope[1]: unknown value 'atn'; expected one of attn | mlp | "
            "moe_router | moe_preprocess (did you mean 'attn'?)");
  EXPECT_NE(error(", cuda_graphs: true, cuda_graph_scope: [moe]").find("graph scope 'moe' is Megatron-Core's but not modelled"),
            std::string::npos);
  EXPECT_NE(error(", cuda_graphs: true, cuda_graph_scope: [full_iteration_inference]")
                .find("graph scope 'full_iteration_inference' is Megatron-Core's but not modelled"),
            std::string::npos);
  EXPECT_NE(error(", cuda_graph_scope: [attn]").find("it needs cuda_graphs: true"), std::string::npos);
  EXPECT_NE(error(", cuda_graphs: true, cuda_graph_scope: [attn, moe_preprocess]").find("moe_preprocess needs moe_router"),
            std::string::npos);
  EXPECT_NE(error(", cuda_graphs: true, framework: jax, cuda_graph_scope: [attn]").find("XLA decides"), std::string::npos);
  // Megatron-Core asserts full recompute only with whole-iteration graphs (transformer_config.py at d98e8a64), so not
  // with Transformer Engine's partial ones (arguments.py had refused any CUDA graphs).
  EXPECT_NE(error(", cuda_graphs: true, recompute: full, cuda_graph_scope: [attn]").find("refuses CUDA graphs under full recompute"),
            std::string::npos);
}

// Whole-step CUDA graphs with full recompute: Megatron-LM refuses the pair but with whole-iteration graphs
// (--cuda-graph-impl full_iteration at d98e8a64; arguments.py refused any before); racksim simulates it (the
// capacity-planning sweeps vary recompute around a graphed base) and says so in the report's notes.
TEST(HostWork, CudaGraphsWithFullRecomputeAreFlagged) {
  auto notes_of = [&](std::vector<std::string> sets) {
    const auto sc = load(kTiny, sets);
    return build_training_graph(sc.model, sc.training, sc.system.spec).notes;
  };
  auto flagged = [](const std::vector<std::string>& notes) {
    for (const auto& n : notes)
      if (n.find("Megatron-LM refuses CUDA graphs under full recompute") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(flagged(notes_of({"training.cuda_graphs=true", "training.recompute=full"})));
  EXPECT_FALSE(flagged(notes_of({"training.cuda_graphs=true", "training.recompute=selective"})));
  EXPECT_FALSE(flagged(notes_of({"training.recompute=full"})));
  EXPECT_FALSE(flagged(notes_of({"training.cuda_graphs=true", "training.recompute=full", "training.framework=jax"})));
}

// Transformer Engine's grouped GEMM (calibration/data/h200-2026-12-03-te-grouped-gemm-host): each grouped
// expert GEMM op carries launch.te_grouped_gemm per local expert and launch.te_grouped_call once, less the dense
// GEMM dispatch (launch.megatron_gemm_dispatch) that the layer's host figures hold, on top of its share of the
// layer's host time. Per MoE layer pass: 2 grouped calls forward (fc1, fc2), 4 backward (their dgrad and wgrad),
// so host time per layer pass = (local experts x per-GEMM + per-call - dispatch) x 6.
TEST(HostWork, GroupedExpertGemmsCarryTheirPerGemmHostTime) {
  ASSERT_GT(load(kMoe).system.spec.launch.te_grouped_gemm_s, 0);  // the shipped preset carries the measurement
  const std::vector<std::string> on = {"system.overrides.launch.te_grouped_gemm=20 us",
                                       "system.overrides.launch.te_grouped_call=7 us",
                                       "system.overrides.launch.megatron_gemm_dispatch=12 us"};
  const std::vector<std::string> off = {"system.overrides.launch.te_grouped_gemm=0 s",
                                        "system.overrides.launch.te_grouped_call=0 s",
                                        "system.overrides.launch.megatron_gemm_dispatch=0 s"};
  auto graph = [&](std::vector<std::string> sets, std::vector<std::string> more = {}) {
    sets.insert(sets.end(), more.begin(), more.end());
    const auto sc = load(kMoe, sets);
    return build_training_graph(sc.model, sc.training, sc.system.spec);
  };
  const OpGraph with = graph(on), without = graph(off);
  ASSERT_EQ(with.ops.size(), without.ops.size());
  const double local_experts = 16.0 / 8, per_call = local_experts * 20e-6 + 7e-6 - 12e-6;
  double fwd = 0, bwd = 0;
  int changed = 0;
  for (std::size_t i = 0; i < with.ops.size(); ++i) {
    const double d = with.ops[i].host_s - without.ops[i].host_s;
    if (d == 0) continue;
    ++changed;
    const std::string name = with.op_name(static_cast<OpId>(i));
    EXPECT_NE(name.find(".experts."), std::string::npos) << name;
    EXPECT_NEAR(d, per_call, 1e-15) << name;
    if (name.rfind("mb0.L1.", 0) == 0) (with.ops[i].phase == Phase::forward ? fwd : bwd) += d;
  }
  EXPECT_NEAR(fwd, 2 * per_call, 1e-15);
  EXPECT_NEAR(bwd, 4 * per_call, 1e-15);
  EXPECT_EQ(changed, 6 * 4 * 2);  // 6 grouped GEMMs x 4 MoE layers x 2 micro-batches
  // Whole-step CUDA graphs replay the GEMMs, and XLA has no such host path: nothing charged.
  for (const auto& more : {std::vector<std::string>{"training.cuda_graphs=true"},
                           std::vector<std::string>{"training.framework=jax"}}) {
    const OpGraph a = graph(on, more), b = graph(off, more);
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (std::size_t i = 0; i < a.ops.size(); ++i) EXPECT_EQ(a.ops[i].host_s, b.ops[i].host_s) << more[0];
  }
}

// Megatron-Core's DDP wrapper on the host (calibration/data/h200-2026-12-05-megatron-ddp-host): each backward a
// hook per parameter tensor (a GEMM weight's gradient already in main_grad; a norm's or the router's added there by the
// hook), and under --overlap-param-gather with the distributed optimizer each forward a pre-hook per module called plus
// its walk over the module's own parameters. Counted from Megatron-Core's TE layer spec (gpt_layer_specs.py at
// 1e057005): per layer the TransformerLayer, input norm, pre-cross-attention norm, cross attention and its
// bias-dropout-add (IdentityFuncOp), pre-MLP norm (6 modules); attention, QKV, q and k norms (identities without
// qk_norm), TE's attention and its backend module, output (7); an MoE layer's MoE module, router, grouped MLP and its
// fc1 and fc2 (5), the shared experts' MLP, fc1 and fc2 (3).
namespace {
struct DdpCounts {
  double gemm_weights, added, modules;
};
const std::vector<std::string> kNoDdpHooks = {"system.overrides.launch.megatron_ddp_grad_hook=0 s",
                                              "system.overrides.launch.megatron_ddp_grad_hook_add=0 s",
                                              "system.overrides.launch.megatron_ddp_module_prehook=0 s",
                                              "system.overrides.launch.megatron_ddp_param_prehook=0 s"};
void expect_ddp_hooks(const char* yaml, const std::vector<std::string>& extra, const DdpCounts& c) {
  auto layer_host = [&](std::vector<std::string> sets, bool hooks) {
    sets.insert(sets.end(), extra.begin(), extra.end());
    if (!hooks) sets.insert(sets.end(), kNoDdpHooks.begin(), kNoDdpHooks.end());
    return layer1_host_s(yaml, sets);
  };
  const auto& l = load(yaml, extra).system.spec.launch;
  const std::vector<std::string> zero1 = {"training.optimizer_sharding=zero1", "training.overlap_grad_reduce=true",
                                          "training.overlap_param_gather=true"};
  for (const auto& sets : {std::vector<std::string>{}, zero1}) {
    const auto with = layer_host(sets, true), without = layer_host(sets, false);
    const double prehooks =
        sets.empty() ? 0.0
                     : c.modules * l.megatron_ddp_module_prehook_s + (c.gemm_weights + c.added) * l.megatron_ddp_param_prehook_s;
    EXPECT_NEAR(with.first - without.first, prehooks, 1e-12) << sets.size();
    EXPECT_NEAR(with.second - without.second,
                c.gemm_weights * l.megatron_ddp_grad_hook_s + c.added * l.megatron_ddp_grad_hook_add_s, 1e-12)
        << sets.size();
  }
}
}  // namespace

TEST(HostWork, MegatronDdpHooksPerParameterAndModule) {
  const auto& l = load(kMoe).system.spec.launch;
  ASSERT_GT(l.megatron_ddp_grad_hook_s, 0);  // the shipped preset carries the measurement
  ASSERT_GT(l.megatron_ddp_grad_hook_add_s, l.megatron_ddp_grad_hook_s);
  ASSERT_GT(l.megatron_ddp_module_prehook_s, 0);
  ASSERT_GT(l.megatron_ddp_param_prehook_s, 0);
  // kMoe's MoE layer (2 local experts): GEMM weights QKV, output, 2 x (fc1, fc2); added: the norm fused into QKV,
  // the pre-MLP norm, the router; modules 6 + 7 + 5.
  expect_ddp_hooks(kMoe, {}, {6, 3, 18});
  // With Qwen3's q and k norms (TENorm: two more added parameters; the modules were identities before) and one
  // shared expert (fc1, fc2; its MLP module and two linears).
  expect_ddp_hooks(kMoe, {"model.qk_norm=true", "model.moe.shared_experts=1"}, {8, 5, 21});
  // Multi-latent attention with a q LoRA: GEMM weights q down and up, kv down and up, output (5) and the experts'
  // 4; added: the input norm, the latent norms fused into the up projections (3), the pre-MLP norm and the router;
  // modules: attention, q down/up, kv down/up, the rotary embedding, q/kv norm identities, TE's attention and its
  // backend, output (11).
  expect_ddp_hooks(kMoe,
                   {"model.mla={q_lora_rank: 256, kv_lora_rank: 128, qk_nope_head_dim: 64, qk_rope_head_dim: 32, "
                    "v_head_dim: 64}"},
                   {9, 5, 22});
  // Megatron-FSDP has hooks of its own (not measured), and XLA none: nothing charged.
  for (const auto& sets : {std::vector<std::string>{"training.optimizer_sharding=fsdp"},
                           std::vector<std::string>{"training.framework=jax"}}) {
    std::vector<std::string> off = sets;
    off.insert(off.end(), kNoDdpHooks.begin(), kNoDdpHooks.end());
    const auto a = load(kMoe, sets), b = load(kMoe, off);
    const OpGraph ga = build_training_graph(a.model, a.training, a.system.spec);
    const OpGraph gb = build_training_graph(b.model, b.training, b.system.spec);
    ASSERT_EQ(ga.ops.size(), gb.ops.size());
    for (std::size_t i = 0; i < ga.ops.size(); ++i) EXPECT_EQ(ga.ops[i].host_s, gb.ops[i].host_s) << sets[0];
  }
}

// Under Transformer Engine's layer graphs the hooks still fire: a layer whose every op is captured (attn and mlp
// scopes on a dense model) carries its gradient hooks on the backward pass's first op, with or without a selective
// recompute (whose replayed ops come first in the pass), and under --overlap-param-gather the forward pre-hooks that
// Megatron-Core calls by hand for the modules owning parameters (QKV, output, fc1, fc2) on the forward's first op.
TEST(HostWork, MegatronDdpHooksFireUnderLayerGraphs) {
  const std::vector<std::string> graphs = {"training.cuda_graphs=true", "training.cuda_graph_scope=[attn, mlp]"};
  auto pass_host = [&](std::vector<std::string> sets) {
    sets.insert(sets.begin(), graphs.begin(), graphs.end());
    const auto sc = load(kTiny, sets);
    const OpGraph g = build_training_graph(sc.model, sc.training, sc.system.spec);
    std::pair<double, double> fwd_bwd{0, 0};
    int eager = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      if (g.op_name(static_cast<OpId>(i)).rfind("mb0.L1.", 0) != 0) continue;
      const Op& op = g.ops[i];
      eager += op.graph == GraphLaunch::eager;
      if (op.phase == Phase::forward) fwd_bwd.first += op.host_s;
      if (op.phase == Phase::backward) fwd_bwd.second += op.host_s;
    }
    EXPECT_EQ(eager, 0);
    return fwd_bwd;
  };
  const auto& l = load(kTiny).system.spec.launch;
  const double grad_hooks = 4 * l.megatron_ddp_grad_hook_s + 2 * l.megatron_ddp_grad_hook_add_s;
  EXPECT_NEAR(pass_host({}).second, grad_hooks, 1e-12);
  EXPECT_NEAR(pass_host({"training.recompute=selective"}).second, grad_hooks, 1e-12);
  const auto zero1 = pass_host({"training.optimizer_sharding=zero1", "training.overlap_grad_reduce=true",
                                "training.overlap_param_gather=true"});
  EXPECT_NEAR(zero1.first, 4 * l.megatron_ddp_module_prehook_s + 6 * l.megatron_ddp_param_prehook_s, 1e-12);
  EXPECT_NEAR(zero1.second, grad_hooks, 1e-12);
}

namespace {
// The job's graph and each op's host time gained from torch.distributed's per-call figures: the same graph built with
// them zeroed (the ops are the same in both) subtracted op by op.
struct TorchCallGains {
  OpGraph graph;
  std::vector<double> gain_s;  // per op
};
TorchCallGains torch_call_gains(const char* yaml, const std::vector<std::string>& sets) {
  std::vector<std::string> without = sets;
  for (const char* key : {"torch_nccl_collective", "torch_nccl_all_reduce", "torch_nccl_p2p_pair"})
    without.push_back(std::string("system.overrides.launch.") + key + "=0 s");
  const auto sc = load(yaml, sets), sc0 = load(yaml, without);
  TorchCallGains r{build_training_graph(sc.model, sc.training, sc.system.spec), {}};
  const OpGraph b = build_training_graph(sc0.model, sc0.training, sc0.system.spec);
  EXPECT_EQ(r.graph.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < r.graph.ops.size() && i < b.ops.size(); ++i)
    r.gain_s.push_back(r.graph.ops[i].host_s - b.ops[i].host_s);
  return r;
}
}  // namespace

// torch.distributed's host path per NCCL call (calibration/data/h100-2026-12-05-torch-nccl-call-host): every collective
// Megatron-Core issues from Python (tensor- and sequence-parallel gathers and scatters, the alltoall dispatcher's
// exchanges and counts, the pipeline's batch_isend_irecv, the gradient reductions and parameter gathers, the
// embedding and norm all-reduces) costs its host the measured call on top of its share of the layer's host work;
// Transformer Engine's userbuffer exchanges, DeepEP's exchanges, collectives replayed from CUDA graphs (under
// whole-step graphs all but the MoE dispatcher's) and XLA's do not pass through torch.distributed and cost nothing
// more. Pinned by name, independently of the builder's rule: which calls one MoE layer and the step outside the
// layers are charged, and with which figure.
TEST(HostWork, TorchNcclCallsCostTheHostPerCall) {
  const char* yaml = R"(system: {preset: h100-sxm, gpus: 64}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 4, vocab: 256,
        moe: {experts: 16, top_k: 2, expert_ffn_hidden: 1024}}
training: {seq_len: 4096, global_batch: 32, micro_batch: 1, optimizer_sharding: zero1,
           parallelism: {tp: 2, pp: 2, ep: 8}}
)";
  const auto& l = load(yaml).system.spec.launch;
  ASSERT_GT(l.torch_nccl_collective_s, 0);  // the shipped preset carries the measurement
  ASSERT_GT(l.torch_nccl_all_reduce_s, 0);
  ASSERT_GT(l.torch_nccl_p2p_pair_s, l.torch_nccl_collective_s);
  // The host time each op gains from the figures (the same graph with them zeroed), by name: micro-batch 0's
  // layer 1 (an MoE layer of stage 0) in full, and per name outside the layers how many ops gain what.
  auto gains = [&](const std::vector<std::string>& sets) {
    const auto [a, gain_s] = torch_call_gains(yaml, sets);
    std::map<std::string, double> layer;
    std::map<std::string, std::pair<int, double>> other;  // name without its micro-batch: count, gain each
    for (std::size_t i = 0; i < gain_s.size(); ++i) {
      const double d = gain_s[i];
      if (std::fabs(d) < 1e-12) continue;
      const std::string name = a.op_name(static_cast<OpId>(i));
      if (name.rfind("mb0.L1.", 0) == 0) {
        layer[name.substr(7)] = d;
      } else if (name.find(".L") == std::string::npos) {
        auto& o = other[name.rfind("mb", 0) == 0 ? name.substr(name.find('.') + 1) : name];
        ++o.first;
        o.second = d;
      }
    }
    return std::make_pair(layer, other);
  };
  using Layer = std::map<std::string, double>;
  using Other = std::map<std::string, std::pair<int, double>>;
  const double coll = l.torch_nccl_collective_s, ar = l.torch_nccl_all_reduce_s, pair = l.torch_nccl_p2p_pair_s;
  // The attention's tensor-parallel calls (sequence parallel): the QKV input's gather and the output's reduce-scatter
  // forward; the output's gather, the QKV weight-gradient's gather and its input-gradient's reduce-scatter backward.
  const Layer attention = {{"qkv.tp_all_gather", coll},       {"attn_out.tp_reduce_scatter", coll},
                           {"attn_out.tp_all_gather", coll},  {"qkv.wgrad.tp_all_gather", coll},
                           {"qkv.dgrad.tp_reduce_scatter", coll}};
  // The alltoall dispatcher (EP 8, expert TP 2): the counts' gather, the tokens' and probabilities' exchanges, the
  // expert-TP gather and scatter around the experts, and their backward twins.
  const Layer dispatcher = {
      {"dispatch.counts_all_gather", coll},    {"dispatch.all_to_all", coll},          {"dispatch.probs_all_to_all", coll},
      {"dispatch.etp_all_gather", coll},       {"combine.etp_reduce_scatter", coll},   {"combine.all_to_all", coll},
      {"combine.bwd.all_to_all", coll},        {"combine.bwd.etp_all_gather", coll},   {"dispatch.bwd.etp_reduce_scatter", coll},
      {"dispatch.bwd.all_to_all", coll},       {"dispatch.bwd.probs_all_to_all", coll}};
  // Outside the layers (2 micro-batches, 2 stages): the pipeline's sends, each one rank's send-receive exchange; the
  // embedding's and the output layer's TP calls and the vocabulary-parallel loss's all-reduces; the gradient
  // reductions and parameter gathers of the distributed optimizer; the finalize and gradient-norm all-reduces.
  const Other step = {{"v0.pp.send_activation", {2, pair}},
                      {"v1.pp.send_grad", {2, pair}},
                      {"v0.embedding.tp_reduce_scatter", {2, coll}},
                      {"v0.embedding.bwd.tp_all_gather", {2, coll}},
                      {"v1.logits.tp_all_gather", {2, coll}},
                      {"v1.logits.wgrad.tp_all_gather", {2, coll}},
                      {"v1.logits.dgrad.tp_reduce_scatter", {2, coll}},
                      {"v1.cross_entropy.max.tp_all_reduce", {2, ar}},
                      {"v1.cross_entropy.predicted_sum_exp.tp_all_reduce", {2, ar}},
                      {"v0.grad.embedding.reduce_scatter", {1, coll}},
                      {"v1.grad.head.reduce_scatter", {1, coll}},
                      {"rank0.param.all_gather", {1, coll}},
                      {"rank0.param.all_gather.experts", {1, coll}},
                      {"rank1.param.all_gather", {1, coll}},
                      {"rank1.param.all_gather.experts", {1, coll}},
                      {"rank0.finalize.tp_grads.tp_all_reduce", {1, ar}},
                      {"rank1.finalize.tp_grads.tp_all_reduce", {1, ar}},
                      {"rank0.optimizer.grad_norm.all_reduce", {1, ar}},
                      {"rank1.optimizer.grad_norm.all_reduce", {1, ar}}};
  auto both = [](Layer a, const Layer& b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  struct Case {
    std::vector<std::string> sets;
    Layer layer;
    Other other;
  };
  for (const Case& c : {
           Case{{}, both(attention, dispatcher), step},
           // Transformer Engine's userbuffers carry the attention's exchanges; the output layer is Megatron's own linear.
           Case{{"training.tp_comm_overlap=true"}, dispatcher, step},
           // DeepEP's exchanges and its notify are its own C++ calls.
           Case{{"training.moe.dispatcher=deepep", "training.parallelism.etp=1"}, attention, step},
           // The attention's graph replays its exchanges.
           Case{{"training.cuda_graphs=true", "training.cuda_graph_scope=[attn]"}, dispatcher, step},
           // Whole-step graphs: only the MoE dispatcher stays eager.
           Case{{"training.cuda_graphs=true"}, dispatcher, {}},
           Case{{"training.framework=jax", "training.parallelism.pp=1", "system.gpus=32"}, {}, {}}}) {
    SCOPED_TRACE(c.sets.empty() ? std::string("base") : c.sets.front());
    const auto [layer, other] = gains(c.sets);
    EXPECT_EQ(layer.size(), c.layer.size());
    for (const auto& [name, s] : c.layer) {
      ASSERT_TRUE(layer.count(name)) << name;
      EXPECT_NEAR(layer.at(name), s, 1e-12) << name;
    }
    EXPECT_EQ(other.size(), c.other.size());
    for (const auto& [name, n_s] : c.other) {
      ASSERT_TRUE(other.count(name)) << name;
      EXPECT_EQ(other.at(name).first, n_s.first) << name;
      EXPECT_NEAR(other.at(name).second, n_s.second, 1e-12) << name;
    }
  }
}

// Context parallelism's calls (Transformer Engine, context_parallel.py): the ring's forward exchanges K/V cp - 1 times,
// its backward cp times (the last returns dK/dV to their owner), each one rank's send and receive; the all-to-all
// variant calls all_to_all_single per tensor: Q, K, V and the output forward, the output's gradient and dQ, dK, dV
// backward; the all-gather variant gathers K and V, and reduce-scatters dK and dV, one call each.
TEST(HostWork, ContextParallelCallsAsTransformerEngineMakesThem) {
  const char* yaml = R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 16, vocab: 256}
training: {seq_len: 16384, global_batch: 2, micro_batch: 1, parallelism: {cp: 4}}
)";
  const auto& l = load(yaml).system.spec.launch;
  // The host time the calls add to layer 1's CP exchanges of micro-batch 0, forward and backward.
  auto added = [&](const std::string& variant) {
    const auto [a, gain_s] = torch_call_gains(yaml, {"training.cp_comm=" + variant});
    std::pair<double, double> fwd_bwd{0, 0};
    for (std::size_t i = 0; i < gain_s.size(); ++i) {
      if (a.ops[i].kind != OpKind::collective || a.ops[i].group != CommGroup::cp) continue;
      if (a.op_name(static_cast<OpId>(i)).rfind("mb0.L1.", 0) != 0) continue;
      (a.ops[i].phase == Phase::forward ? fwd_bwd.first : fwd_bwd.second) += gain_s[i];
    }
    return fwd_bwd;
  };
  const auto ring = added("p2p");
  EXPECT_NEAR(ring.first, 3 * l.torch_nccl_p2p_pair_s, 1e-12);
  EXPECT_NEAR(ring.second, 4 * l.torch_nccl_p2p_pair_s, 1e-12);
  const auto a2a = added("a2a");
  EXPECT_NEAR(a2a.first, 4 * l.torch_nccl_collective_s, 1e-12);
  EXPECT_NEAR(a2a.second, 4 * l.torch_nccl_collective_s, 1e-12);
  // The all-gather variant: K and V gathered one call each, again in the backward, and dK and dV reduce-scattered.
  const auto gather = added("all_gather");
  EXPECT_NEAR(gather.first, 2 * l.torch_nccl_collective_s, 1e-12);
  EXPECT_NEAR(gather.second, 4 * l.torch_nccl_collective_s, 1e-12);
}

// Megatron-Core's schedule step per model chunk and micro-batch (launch.megatron_chunk_*, megatron_moe_chunk_*;
// calibration/data/h200-2026-12-05-megatron-chunk-host): forward_step and backward_step with the wrappers around the
// block, once per chunk's forward and backward, on the chunk's first op after its input (or gradient) has arrived,
// whatever its layers; the MoE figures for an MoE model; nothing under whole-step CUDA graphs or in JAX mode.
namespace {
// The host time each op gains from chunk figures of 1 ms forward and 0.25 ms backward (dense) or 3 ms and 0.75 ms
// (MoE), against all four at 0, by op name.
std::map<std::string, double> chunk_gains(const char* yaml, const std::vector<std::string>& sets) {
  auto with = [&](const char* f, const char* b, const char* mf, const char* mb) {
    std::vector<std::string> s = sets;
    s.push_back(fmt::format("system.overrides.launch.megatron_chunk_forward={}", f));
    s.push_back(fmt::format("system.overrides.launch.megatron_chunk_backward={}", b));
    s.push_back(fmt::format("system.overrides.launch.megatron_moe_chunk_forward={}", mf));
    s.push_back(fmt::format("system.overrides.launch.megatron_moe_chunk_backward={}", mb));
    const auto sc = load(yaml, s);
    return build_training_graph(sc.model, sc.training, sc.system.spec);
  };
  const OpGraph a = with("1 ms", "0.25 ms", "3 ms", "0.75 ms"), b = with("0 s", "0 s", "0 s", "0 s");
  EXPECT_EQ(a.ops.size(), b.ops.size());
  std::map<std::string, double> gains;
  for (std::size_t i = 0; i < a.ops.size() && i < b.ops.size(); ++i)
    if (const double d = a.ops[i].host_s - b.ops[i].host_s; std::fabs(d) > 1e-12)
      gains[a.op_name(static_cast<OpId>(i))] += d;
  return gains;
}
}  // namespace

TEST(HostWork, MegatronScheduleStepPerChunk) {
  // 8 layers over pp 2 x vp 2 (2 layers a chunk), 4 micro-batches: every rank runs 2 chunks x 4 micro-batches, each
  // forward and backward once.
  const char* dense = R"(system: {preset: h100-sxm, gpus: 2}
model: {layers: 8, hidden: 256, ffn_hidden: 1024, heads: 4, kv_heads: 4, vocab: 256}
training: {seq_len: 128, global_batch: 4, micro_batch: 1, parallelism: {tp: 1, pp: 2, vp: 2}}
)";
  const auto g = chunk_gains(dense, {});
  double fwd = 0, bwd = 0;
  int charged = 0;
  for (const auto& [name, s] : g) {
    ++charged;
    (std::fabs(s - 1e-3) < 1e-12 ? fwd : bwd) += s;
    EXPECT_TRUE(std::fabs(s - 1e-3) < 1e-12 || std::fabs(s - 0.25e-3) < 1e-12) << name << " " << s;
  }
  // 2 ranks x 2 chunks x 4 micro-batches, forward and backward: one op each.
  EXPECT_EQ(charged, 32);
  EXPECT_NEAR(fwd, 16 * 1e-3, 1e-9);
  EXPECT_NEAR(bwd, 16 * 0.25e-3, 1e-9);
  // Where, micro-batch 0 (layers 0-1 | 2-3 on rank 0 and 1 as chunk 0, 4-5 | 6-7 as chunk 1): the first chunk's forward
  // from its embedding (no input to wait for), every other forward on the op after its receive (its first layer's first
  // op: after the p2p wait, before the layer's kernels); the last chunk's backward from the loss's, every other on its
  // last layer's first backward op.
  std::map<std::string, double> mb0;
  for (const auto& [name, s] : g)
    if (name.rfind("mb0.", 0) == 0) mb0[name] = s;
  const std::map<std::string, double> expected = {
      {"mb0.v0.embedding", 1e-3},  {"mb0.L2.norm1", 1e-3},  {"mb0.L4.norm1", 1e-3},
      {"mb0.L6.norm1", 1e-3},      {"mb0.v3.cross_entropy.bwd", 0.25e-3}, {"mb0.L5.mlp_out.residual.bwd", 0.25e-3},
      {"mb0.L3.mlp_out.residual.bwd", 0.25e-3}, {"mb0.L1.mlp_out.residual.bwd", 0.25e-3}};
  ASSERT_EQ(mb0.size(), expected.size());
  for (const auto& [name, s] : expected) EXPECT_NEAR(mb0[name], s, 1e-12) << name;
  // An MoE model takes the MoE figures.
  const char* moe = R"(system: {preset: h100-sxm, gpus: 16}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 4, vocab: 256,
        moe: {experts: 16, top_k: 2, expert_ffn_hidden: 1024}}
training: {seq_len: 4096, global_batch: 32, micro_batch: 1, parallelism: {tp: 1, pp: 2, ep: 8}}
)";
  double moe_total = 0;
  for (const auto& [name, s] : chunk_gains(moe, {})) moe_total += s;
  // 2 ranks x 1 chunk x 4 micro-batches (32 sequences over dp 8) x (3 + 0.75 ms).
  EXPECT_NEAR(moe_total, 2 * 4 * 3.75e-3, 1e-9);
  // Whole-step CUDA graphs: no Python per chunk. JAX: XLA's runtime instead.
  EXPECT_TRUE(chunk_gains(dense, {"training.cuda_graphs=true"}).empty());
  EXPECT_TRUE(chunk_gains(R"(system: {preset: h100-sxm, gpus: 1}
model: {layers: 2, hidden: 256, ffn_hidden: 1024, heads: 4, kv_heads: 4, vocab: 256}
training: {framework: jax, seq_len: 128, global_batch: 2, micro_batch: 1, parallelism: {tp: 1, pp: 1}}
)", {}).empty());
}

// DeepSeek-V3's parts on the host beyond the measured layer figures (launch.megatron_mla_*, megatron_group_router_*,
// megatron_shared_expert_*; calibration/data/h100-2026-12-05-megatron-dsv3-host), in closed form over one MoE layer
// pass: MLA's and the shared expert's with the layer, the group-limited router's with the MoE part; the fused router
// removes the router's; a captured attention (and router scope) removes MLA's (and the router's and the shared
// expert's); whole-layer graphs replay MLA and the shared expert, not the router; a dense layer pays MLA's only; in an
// eager MoE layer the forward parts land before the token-count wait. Nothing of it for a softmax top-k router
// without a shared expert and a standard attention. Routings Megatron-Core cannot run are refused.
TEST(HostWork, DeepSeekV3PartsOnTheHost) {
  const char* dsv3 = R"(system: {preset: h100-sxm, gpus: 16}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 16, vocab: 256,
        moe: {experts: 16, top_k: 4, expert_ffn_hidden: 1024, shared_experts: 1, router_groups: 4, router_group_top_k: 2},
        mla: {q_lora_rank: 512, kv_lora_rank: 256, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128}}
training: {seq_len: 4096, global_batch: 32, micro_batch: 1, parallelism: {tp: 1, pp: 1, ep: 8}}
)";
  const std::vector<std::string> zeroed = {
      "system.overrides.launch.megatron_mla_forward=0 s", "system.overrides.launch.megatron_mla_backward=0 s",
      "system.overrides.launch.megatron_group_router_forward=0 s", "system.overrides.launch.megatron_group_router_backward=0 s",
      "system.overrides.launch.megatron_shared_expert_forward=0 s", "system.overrides.launch.megatron_shared_expert_backward=0 s"};
  auto layer_host = [&](const std::vector<std::string>& sets) { return layer1_host_s(dsv3, sets); };
  const auto& l = load(dsv3).system.spec.launch;
  ASSERT_GT(l.megatron_mla_forward_s, 0);
  ASSERT_GT(l.megatron_group_router_forward_s, 0);
  ASSERT_GT(l.megatron_shared_expert_forward_s, 0);
  auto with = [](std::vector<std::string> v, const std::vector<std::string>& more) {
    v.insert(v.end(), more.begin(), more.end());
    return v;
  };
  const auto eager = layer_host({}), bare = layer_host(zeroed);
  EXPECT_NEAR(eager.first - bare.first,
              l.megatron_mla_forward_s + l.megatron_group_router_forward_s + l.megatron_shared_expert_forward_s, 1e-12);
  EXPECT_NEAR(eager.second - bare.second,
              l.megatron_mla_backward_s + l.megatron_group_router_backward_s + l.megatron_shared_expert_backward_s, 1e-12);
  const std::vector<std::string> fused = {"training.moe.router_fusion=true"};
  const auto f = layer_host(fused), fb = layer_host(with(zeroed, fused));
  EXPECT_NEAR(f.first - fb.first, l.megatron_mla_forward_s + l.megatron_shared_expert_forward_s, 1e-12);
  EXPECT_NEAR(f.second - fb.second, l.megatron_mla_backward_s + l.megatron_shared_expert_backward_s, 1e-12);
  const std::vector<std::string> attn = {"training.cuda_graphs=true", "training.cuda_graph_scope=[attn]"};
  const auto a = layer_host(attn), ab = layer_host(with(zeroed, attn));
  EXPECT_NEAR(a.first - ab.first, l.megatron_group_router_forward_s + l.megatron_shared_expert_forward_s, 1e-12);
  EXPECT_NEAR(a.second - ab.second, l.megatron_group_router_backward_s + l.megatron_shared_expert_backward_s, 1e-12);
  const std::vector<std::string> router = {"training.cuda_graphs=true", "training.cuda_graph_scope=[moe_router]"};
  const auto r = layer_host(router), rb = layer_host(with(zeroed, router));
  EXPECT_NEAR(r.first - rb.first, l.megatron_mla_forward_s, 1e-12);
  EXPECT_NEAR(r.second - rb.second, l.megatron_mla_backward_s, 1e-12);
  // Whole-layer graphs: MLA and the shared expert replay; the router stays eager, as the routing does.
  const std::vector<std::string> whole = {"training.cuda_graphs=true"};
  const auto w = layer_host(whole), wb = layer_host(with(zeroed, whole));
  EXPECT_NEAR(w.first - wb.first, l.megatron_group_router_forward_s, 1e-12);
  EXPECT_NEAR(w.second - wb.second, l.megatron_group_router_backward_s, 1e-12);
  // A dense layer (layer 1, with moe.first_dense_layers 2) pays MLA's only.
  const std::vector<std::string> dense_first = {"model.moe.first_dense_layers=2"};
  const auto d = layer_host(dense_first), db = layer_host(with(zeroed, dense_first));
  EXPECT_NEAR(d.first - db.first, l.megatron_mla_forward_s, 1e-12);
  EXPECT_NEAR(d.second - db.second, l.megatron_mla_backward_s, 1e-12);
  // In the eager MoE layer the forward parts go to the ops the host issues before the token-count wait (up to the
  // router's), none after it.
  {
    const auto with_parts = load(dsv3), bare_sc = load(dsv3, zeroed);
    const OpGraph g1 = build_training_graph(with_parts.model, with_parts.training, with_parts.system.spec);
    const OpGraph g0 = build_training_graph(bare_sc.model, bare_sc.training, bare_sc.system.spec);
    ASSERT_EQ(g1.ops.size(), g0.ops.size());
    bool after_router = false;
    double before = 0, after = 0;
    for (std::size_t i = 0; i < g1.ops.size(); ++i) {
      const std::string name = g1.op_name(static_cast<OpId>(i));
      if (name.rfind("mb0.L1.", 0) != 0 || g1.ops[i].phase != Phase::forward) continue;
      (after_router ? after : before) += g1.ops[i].host_s - g0.ops[i].host_s;
      if (name.find("router.topk") != std::string::npos) after_router = true;
    }
    EXPECT_TRUE(after_router);
    EXPECT_NEAR(before, l.megatron_mla_forward_s + l.megatron_group_router_forward_s + l.megatron_shared_expert_forward_s,
                1e-12);
    EXPECT_NEAR(after, 0.0, 1e-12);
  }
  const std::vector<std::string> attn_router = {"training.cuda_graphs=true", "training.cuda_graph_scope=[attn, moe_router]"};
  const auto ar = layer_host(attn_router), arb = layer_host(with(zeroed, attn_router));
  EXPECT_NEAR(ar.first - arb.first, 0.0, 1e-12);
  EXPECT_NEAR(ar.second - arb.second, 0.0, 1e-12);
  // A standard attention, softmax top-k router, no shared expert: none of it.
  const auto plain = load(kMoe);
  const auto plain_zeroed = load(kMoe, zeroed);
  const OpGraph g1 = build_training_graph(plain.model, plain.training, plain.system.spec);
  const OpGraph g0 = build_training_graph(plain_zeroed.model, plain_zeroed.training, plain_zeroed.system.spec);
  ASSERT_EQ(g1.ops.size(), g0.ops.size());
  for (std::size_t i = 0; i < g1.ops.size(); ++i) EXPECT_EQ(g1.ops[i].host_s, g0.ops[i].host_s);
  EXPECT_EQ(router_groups_problem(256, 8, 8, 4), std::nullopt);  // DeepSeek-V3
  EXPECT_EQ(*router_groups_problem(16, 4, 8, 1), "top_k (4) exceeds the experts of the router_group_top_k (1) groups chosen (2 each)");
  EXPECT_EQ(*router_groups_problem(16, 2, 8, 4), "router_group_top_k (4) exceeds top_k (2)");
  EXPECT_EQ(*router_groups_problem(16, 2, 3, 1), "router_groups (3) does not divide experts (16)");
}
