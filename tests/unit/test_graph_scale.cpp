// Training graphs at scale: pipeline schedules (the bubble emerges), ZeRO-1 vs FSDP traffic,
// MoE FLOPs from active parameters, memory against Megatron-LM's theoretical formula.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>

#include "hardware_models/collectives.h"
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

// A pipeline with (nearly) free communication: 100 TB/s links, a tiny vocabulary so the stages
// are balanced, and a narrow hidden size with a wide MLP so a stage's send (hidden x tokens) is small beside
// its compute: links alone do not make a pipeline send free, since NCCL's p2p CTAs move 21.4 GB/s each
// (collectives.cpp p2p_plan).
const char* kPipeline = R"(system:
  preset: h200-sxm
  gpus: 4
  overrides: {scale_up.bandwidth_per_direction: 100 TB/s, scale_out.nic_bandwidth: 100 TB/s}
model: {layers: 8, hidden: 1024, ffn_hidden: 131072, heads: 8, kv_heads: 8, vocab: 256}
training: {seq_len: 4096, global_batch: 8, micro_batch: 1, parallelism: {pp: 4}, cuda_graphs: true}
)";

// The op of that name (the first, in graph order), and whether `op` lists `on` among its dependencies.
OpId op_id(const OpGraph& g, const std::string& name) {
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.op_name(static_cast<OpId>(i)) == name) return static_cast<OpId>(i);
  ADD_FAILURE() << "no op " << name;
  return OpId{0};
}
bool waits_for(const OpGraph& g, OpId op, OpId on) {
  return std::find(g.ops[op].deps.begin(), g.ops[op].deps.end(), on) != g.ops[op].deps.end();
}

// The pipeline's own span: from the first micro-batch op's start on any stage to the last one's end (without the
// step's ends around it: the gradient buffers' memset, the optimizer, its gradient norm). Every micro-step replayed.
double pipeline_span_s(const sim::RunResult& r) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
    if (r.graph.op_name(static_cast<OpId>(i)).rfind("mb", 0) != 0) continue;
    lo = std::min(lo, r.replay.ops[i].start_s);
    hi = std::max(hi, r.replay.ops[i].end_s);
  }
  return hi - lo;
}
sim::RunResult simulate_exact(const sim::Scenario& sc) {
  sim::SimulateOptions o;
  o.exact = true;
  return sim::simulate(sc, o);
}

}  // namespace

TEST(GraphScale, OneFOneBBubbleMatchesClosedForm) {
  for (int m : {8, 16}) {
    auto r = simulate_exact(load(kPipeline, {"training.global_batch=" + std::to_string(m)}));
    const double p = 4;
    const double bubble = r.replay.breakdown.pipeline_bubble_s / pipeline_span_s(r);
    EXPECT_NEAR(bubble / ((p - 1) / (m + p - 1)), 1.0, 0.02) << "m=" << m;
  }
}

TEST(GraphScale, InterleavedScheduleShrinksTheBubble) {
  auto r = simulate_exact(load(kPipeline, {"training.global_batch=16", "training.parallelism.vp=2"}));
  const double p = 4, m = 16, v = 2;
  const double bubble = r.replay.breakdown.pipeline_bubble_s / pipeline_span_s(r);
  EXPECT_NEAR(bubble / ((p - 1) / (v * m + p - 1)), 1.0, 0.03);
  // More micro-batches in flight on the first stage: interleaving costs memory.
  auto plain = sim::simulate(load(kPipeline, {"training.global_batch=16"}));
  EXPECT_GT(r.replay.memory.peak_hbm_bytes, plain.replay.memory.peak_hbm_bytes);
}

TEST(GraphScale, ZeroOneVersusFsdpTrafficAtFourMicroSteps) {
  const char* base = R"(system: {preset: h200-sxm, gpus: 8}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 32768}
training: {seq_len: 2048, global_batch: 32, micro_batch: 1}
)";
  auto bytes = [&](const std::string& mode) {
    auto sc = load(base, {"training.optimizer_sharding=" + mode});
    EXPECT_EQ(sc.training.micro_steps(), 4);
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    double total = 0;
    for (const auto& o : g.ops)
      if (o.kind == OpKind::collective && o.group != CommGroup::world) total += o.coll_bytes;  // (the gradient norm's)
    return total;
  };
  const double n = total_params(load(base).model);
  // ZeRO-1: fp32 gradients reduce-scattered once, bf16 parameters all-gathered once.
  EXPECT_DOUBLE_EQ(bytes("zero1"), (4.0 + 2.0) * n);
  // FSDP: in each of 4 micro-steps, bf16 parameters gathered for forward and again for backward,
  // fp32 gradients reduce-scattered.
  EXPECT_DOUBLE_EQ(bytes("fsdp"), 4 * (2.0 + 2.0 + 4.0) * n);
}

// Megatron-FSDP (custom FSDP, optim_grads_params) issues the next layer's gather from the current layer's
// pre-forward (pre-backward) hook: on the host before the layer's own kernels and host waits, and the layer's compute
// does not wait for it (fully_sharded_data_parallel.py _pre_forward_param_unshard / _pre_backward, all_gather_params
// with prefetch). On the GPU it waits for the work issued before it (ProcessGroupNCCL's stream sync), so the gathered
// weights in flight stay bounded. Before 2026-12-03 the gather of layer l + 1 came after all of layer l's ops in host
// order, so a host wait in layer l (DeepEP's token counts, NaN checks) held it back until the GPU reached that point.
TEST(GraphScale, MegatronFsdpPrefetchesTheNextLayerFromTheLayerHook) {
  const auto sc = load(R"(system: {preset: h200-sxm, gpus: 8}
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 32768}
training: {seq_len: 2048, global_batch: 16, micro_batch: 1, optimizer_sharding: fsdp}
)");
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  auto find = [&](const std::string& name, Phase phase) {
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.ops[i].phase == phase && g.op_name(static_cast<OpId>(i)) == name) return static_cast<OpId>(i);
    ADD_FAILURE() << "no op " << name;
    return OpId{0};
  };
  // The last kernel emitted before `op`: the work issued before it.
  auto issued_before = [&](OpId op) {
    for (OpId i = op; i-- > 0;)
      if (g.ops[i].stream == StreamKind::compute) return i;
    return OpId{0};
  };
  for (int mb : {0, 1}) {
    const std::string m = "mb" + std::to_string(mb) + ".";
    // Forward: layer 1's gather is issued before layer 0's first kernel and waits for what was issued before it;
    // layer 0 does not wait for it, layer 1 does.
    const OpId ag1 = find(m + "L1.fsdp.param_all_gather", Phase::forward);
    const OpId l0 = find(m + "L0.norm1", Phase::forward);
    const OpId l1 = find(m + "L1.norm1", Phase::forward);
    EXPECT_LT(ag1, l0) << m;
    EXPECT_TRUE(waits_for(g, ag1, issued_before(ag1))) << m;
    for (OpId i = l0; i < l1; ++i) EXPECT_FALSE(waits_for(g, i, ag1)) << m << g.op_name(i);
    EXPECT_TRUE(waits_for(g, l1, ag1)) << m;
    // Backward (layers 3, 2, 1, 0): layer 2's gather is issued from layer 3's hook, before layer 3's
    // backward kernels and its gradient reduce-scatter.
    const OpId ag2 = find(m + "L2.fsdp.param_all_gather", Phase::backward);
    EXPECT_LT(ag2, find(m + "L3.mlp_out.residual.bwd", Phase::backward)) << m;
    EXPECT_LT(ag2, find(m + "L3.grad.reduce_scatter", Phase::backward)) << m;
    EXPECT_TRUE(waits_for(g, ag2, issued_before(ag2))) << m;
  }
  // The gathered weights in flight stay bounded: at the peak, the rank's shards and at most three gathered units
  // (the one in use, the next, the one after it starting). Without the wait for issued work the gathers ran ahead of
  // compute as far as the host went (the quickstart's model on 16 GPUs: 13.65 GB of weights at the peak, not 2.05).
  const auto q = load(R"(system: {preset: h200-sxm, gpus: 16}
model: {preset: llama3-8b}
training: {seq_len: 8192, global_batch: 32, micro_batch: 1, optimizer_sharding: fsdp, recompute: full}
)");
  const auto qg = build_training_graph(q.model, q.training, q.system.spec);
  double shards = 0, unit = 0;
  for (TensorId t : qg.resident)
    if (qg.tensors[t].category == MemCategory::weights) shards += qg.tensors[t].bytes;
  for (TensorId t = 0; t < qg.tensors.size(); ++t)
    if (qg.tensor_name(t).ends_with("fsdp.params")) unit = std::max(unit, qg.tensors[t].bytes);
  const auto r = sim::simulate(q);
  EXPECT_LE(r.replay.memory.at_peak[static_cast<int>(MemCategory::weights)], shards + 3 * unit);
}

TEST(GraphScale, MoeFlopsFollowActiveParameters) {
  auto sc = load(R"(system: {preset: h200-sxm, gpus: 1}
model:
  layers: 4
  hidden: 1024
  ffn_hidden: 4096
  heads: 8
  vocab: 32768
  moe: {experts: 8, top_k: 2, expert_ffn_hidden: 2048, shared_experts: 1, first_dense_layers: 1}
training: {seq_len: 1024, global_batch: 2, micro_batch: 2}
)");
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  double flops = 0;
  for (const auto& op : g.ops)
    if (op.kind == OpKind::kernel && op.unit == ExecUnit::tensor) flops += op.flops;
  const double tokens = 2048;
  const double n = active_params(sc.model) - 32768.0 * 1024 /*input embedding*/ - (2 * 4 + 1) * 1024 /*norms*/;
  const double attention = 7.0 * 2 * 1024.0 * 1024 * 1024 * 4;  // flash: 2 fwd + 5 bwd, B·S²·D per layer
  EXPECT_NEAR(flops / (6 * n * tokens + attention), 1.0, 0.01);
}

// Megatron-LM's theoretical memory (megatron/training/theoretical_memory_usage.py, with the
// distributed optimizer, sequence parallelism and selective recompute): weights and optimizer
// = params on the most loaded shard x (6 + 12/dp) bytes; activations = s·b·h·(18 + 4·ffn/h)·L/tp
// plus the embedding terms (the first stage holds pp micro-batches of L/pp layers).
double megatron_memory(const sim::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.training.parallelism;
  const double h = m.hidden, s = sc.training.seq_len, b = sc.training.micro_batch;
  const double kv_ratio = static_cast<double>(m.kv_heads) / m.heads;
  const double layer = 2 * h * h * (1 + kv_ratio) + 2 * h * (m.ffn_hidden * 1.5 + 1);
  const double block = layer * m.layers + h;
  const double emb = h * m.vocab;
  double shard = (block / p.pp + emb) / p.tp;
  if (p.pp == 1) shard += emb / p.tp;
  const double weights = shard * (6 + 12.0 / p.dp);
  double act = s * b * h * (18 + 4 * m.ffn_hidden / h) * m.layers + 8 * s * b * p.pp + s * b * h * p.pp;
  if (p.pp > 1) act *= std::min(1.0, static_cast<double>(sc.training.micro_steps()) / p.pp);
  if (p.pp == 1) act += s * b * h * 4 * (1 + m.vocab / h);
  return weights + act / p.tp;
}

TEST(GraphScale, MemoryWithinTenPercentOfMegatronFormula) {
  for (const auto& [preset, gpus, tp, pp] :
       {std::tuple{"llama3-70b", 512, 8, 4}, std::tuple{"llama3-405b", 16384, 8, 16}}) {
    auto sc = load(std::string("system: {preset: h100-sxm, gpus: ") + std::to_string(gpus) + "}\nmodel: {preset: " +
                   preset + "}\ntraining: {seq_len: 8192, global_batch: " + std::to_string(gpus / (tp * pp) * 16) +
                   ", micro_batch: 1, optimizer_sharding: zero1, recompute: selective, parallelism: {tp: " +
                   std::to_string(tp) + ", pp: " + std::to_string(pp) + "}}\n");
    auto r = sim::simulate(sc);
    const double ours = r.replay.memory.peak_hbm_bytes;
    const double megatron = megatron_memory(sc);
    std::cout << preset << ": racksim " << ours / 1e9 << " GB, Megatron formula " << megatron / 1e9 << " GB\n";
    EXPECT_NEAR(ours / megatron, 1.0, 0.10) << preset;
  }
}

TEST(GraphScale, TooLargeDoesNotFit) {
  // The JAX m1_none configuration at twice the batch: ~245 GB of activations on a 141 GB H200.
  auto r = sim::simulate(load(R"(system: {preset: h200-sxm, gpus: 1}
model: {layers: 16, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 32768}
training: {seq_len: 2048, global_batch: 16, micro_batch: 16, attention: materialized, framework: jax}
)"));
  EXPECT_FALSE(r.report["fits"].get<bool>());
}

TEST(GraphScale, TensorParallelOverlapAndSequenceParallelism) {
  const char* base = R"(system: {preset: gb200-nvl72, gpus: 8}
model: {preset: llama3-8b}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, cuda_graphs: true}
)";
  // Userbuffers put the forward's exchanges beside the GEMMs; the backward's run beside them either way (TE's
  // asynchronous NCCL calls without userbuffers). On H100 that gains ~8%. On GB200 racksim has the userbuffer
  // step 2.7% slower: its backward exchanges move on 16 SMs set aside for the whole GEMM (NCCL's take theirs only
  // while they run) and NVLink at 900 GB/s leaves little forward exchange to hide.
  const double plain = sim::simulate(load(base, {"system.preset=h100-sxm"})).replay.step_time_s;
  const double overlapped =
      sim::simulate(load(base, {"system.preset=h100-sxm", "training.tp_comm_overlap=true"})).replay.step_time_s;
  EXPECT_LT(overlapped, 0.95 * plain);
  // Without sequence parallelism: all-reduces instead of all-gather + reduce-scatter pairs.
  auto sc = load(base, {"training.sequence_parallel=false"});
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  int ar = 0, ag = 0;
  for (const auto& o : g.ops)
    if (o.kind == OpKind::collective && o.group == CommGroup::tp) (o.coll == hw::CollectiveOp::all_reduce ? ar : ag) += 1;
  EXPECT_GT(ar, 0);
  EXPECT_EQ(ag, 0);
  // Megatron-LM refuses --tp-comm-overlap without --sequence-parallel (arguments.py): Transformer Engine's
  // userbuffers overlap the sequence-parallel gathers and scatters, and there are none to overlap.
  const std::string bad = R"(system: {preset: gb200-nvl72, gpus: 8}
model: {preset: llama3-8b}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, sequence_parallel: false, tp_comm_overlap: true}
)";
  EXPECT_EQ(racksim::testing::scenario_error_text(bad, "t.yaml"),
            "t.yaml:3:109: error: training.tp_comm_overlap: tp_comm_overlap needs sequence_parallel: true (Megatron-LM "
            "refuses --tp-comm-overlap without --sequence-parallel: Transformer Engine's userbuffers overlap the "
            "sequence-parallel all-gathers and reduce-scatters)");
  EXPECT_EQ(racksim::testing::scenario_error_text(std::string(bad).replace(bad.find("tp: 8"), 5, "tp: 1"), "t.yaml"), "");
}

// Transformer Engine's userbuffer overlaps (tp_comm_overlap, Megatron mode), as TE's defaults set them:
// the all-gathers a GEMM consumes go over the copy engines (no SMs) and that GEMM runs in tp chunks; the
// forward reduce-scatters run on 16 SMs set aside, after a GEMM in 4 chunks; the backward's bulk exchanges
// on 16 SMs. The output layer's collectives (Megatron's own linear) stay NCCL kernels.
TEST(GraphScale, TensorParallelOverlapUsesTransformerEnginesUserbuffers) {
  const char* base = R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, tp_comm_overlap: true, sequence_parallel: true}
)";
  auto sc = load(base);
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  const double T = 4096;
  auto find = [&](const std::string& name) -> const Op& {
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      if (g.op_name(static_cast<OpId>(i)) == name) return g.ops[i];
    ADD_FAILURE() << "no op " << name;
    return g.ops.front();
  };
  EXPECT_EQ(find("mb0.L0.qkv.tp_all_gather").comm_kernel, CommKernel::copy_engine);
  EXPECT_EQ(find("mb0.L0.mlp.tp_all_gather").comm_kernel, CommKernel::copy_engine);
  EXPECT_EQ(find("mb0.L0.attn_out.tp_reduce_scatter").comm_kernel, CommKernel::dedicated_sms);
  EXPECT_EQ(find("mb0.L0.attn_out.tp_reduce_scatter").comm_sms, 16);
  EXPECT_EQ(find("mb0.L0.qkv.dgrad.tp_reduce_scatter").comm_kernel, CommKernel::dedicated_sms);
  EXPECT_EQ(find("mb0.L0.mlp_out.tp_all_gather").comm_kernel, CommKernel::copy_engine);  // fc2 dgrad
  EXPECT_EQ(find("mb0.v0.logits.tp_all_gather").comm_kernel, CommKernel::nccl);
  // Ring-exchange GEMMs in tp chunks of T/8 rows, pipelined ones in 4; FLOPs stay the whole GEMM's.
  EXPECT_DOUBLE_EQ(find("mb0.L0.qkv").gemm_mnk[0], T / 8);
  EXPECT_DOUBLE_EQ(find("mb0.L0.qkv").flops, 2 * T * (4096 + 2 * 1024) / 8 * 4096);
  EXPECT_DOUBLE_EQ(find("mb0.L0.mlp_gate").gemm_mnk[0], T / 8);
  EXPECT_DOUBLE_EQ(find("mb0.L0.mlp_up").gemm_mnk[0], T / 8);
  EXPECT_DOUBLE_EQ(find("mb0.L0.attn_out").gemm_mnk[0], T / 4);
  EXPECT_DOUBLE_EQ(find("mb0.L0.mlp_out").gemm_mnk[0], T / 4);
  EXPECT_DOUBLE_EQ(find("mb0.L0.mlp_out.dgrad").gemm_mnk[0], T / 8);
  EXPECT_DOUBLE_EQ(find("mb0.L0.qkv.wgrad").gemm_mnk[0], 4096);  // wgrad: no chunks (m is the hidden)
  // The pipeline method: the GEMM as 4 chunk kernels, each chunk's output reduce-scattered (a quarter of the
  // bytes, on the 16 SMs set aside) while the next chunk computes; the residual add waits for all four.
  std::vector<OpId> chunks, pieces;
  OpId residual = kNoOp;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const std::string n = g.op_name(static_cast<OpId>(i));
    if (n == "mb0.L0.attn_out") chunks.push_back(static_cast<OpId>(i));
    if (n == "mb0.L0.attn_out.tp_reduce_scatter") pieces.push_back(static_cast<OpId>(i));
    if (n == "mb0.L0.attn_out.residual") residual = static_cast<OpId>(i);
  }
  ASSERT_EQ(chunks.size(), 4u);
  ASSERT_EQ(pieces.size(), 4u);
  ASSERT_NE(residual, kNoOp);
  double flops = 0;
  for (std::size_t c = 0; c < 4; ++c) {
    flops += g.ops[chunks[c]].flops;
    EXPECT_DOUBLE_EQ(g.ops[pieces[c]].coll_bytes, T * 4096 * 2 / 4);
    EXPECT_EQ(g.ops[pieces[c]].deps.size(), 1u);
    EXPECT_EQ(g.ops[pieces[c]].deps[0], chunks[c]);
    if (c > 0) {
      for (OpId d : g.ops[chunks[c]].deps) EXPECT_NE(d, pieces[c - 1]);  // the next chunk does not wait for the scatter
    }
    EXPECT_NE(std::find(g.ops[residual].deps.begin(), g.ops[residual].deps.end(), pieces[c]), g.ops[residual].deps.end());
  }
  EXPECT_DOUBLE_EQ(flops, 2 * T * 4096 * 4096 / 8);
  // Replayed: a copy-engine all-gather beside its GEMM takes its time alone (the NCCL slowdown beside
  // compute, 2.03x on this preset, does not apply).
  const auto r = sim::simulate(sc);
  int checked = 0;
  for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
    if (r.graph.op_name(static_cast<OpId>(i)) != "mb0.L0.qkv.tp_all_gather") continue;
    ++checked;
    const auto& o = r.replay.ops[i];
    const auto alone = hw::estimate_collective(sc.system.spec, hw::CollectiveOp::all_gather, r.graph.ops[i].coll_bytes,
                                               hw::place_group(sc.system.spec, 8, 1));
    EXPECT_NEAR((o.end_s - o.start_s) / alone.time_s, 1.0, 0.02);
  }
  EXPECT_EQ(checked, 1);
}

// Under fp8 each GEMM is preceded by its cast; the cast is not the kernel beside a ring exchange (TE casts the
// local shard and exchanges fp8 data): the GEMM still runs beside the all-gather, the op after it waits.
TEST(GraphScale, TensorParallelOverlapKeepsTheGemmBesideItsGatherUnderFp8) {
  auto sc = load(R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768}
training: {seq_len: 4096, global_batch: 8, precision: fp8, parallelism: {tp: 8}, tp_comm_overlap: true}
)");
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  auto id = [&](const std::string& name) { return op_id(g, name); };
  auto waits = [&](OpId op, OpId on) { return waits_for(g, op, on); };
  for (const char* layer : {"mb0.L0.qkv", "mb0.L0.mlp_gate"}) {
    const OpId gemm = id(layer);
    const OpId ag = id(std::string(layer == std::string("mb0.L0.qkv") ? "mb0.L0.qkv" : "mb0.L0.mlp") + ".tp_all_gather");
    EXPECT_EQ(g.op_name(gemm - 1), std::string(layer) + ".quantize");
    EXPECT_FALSE(waits(gemm - 1, ag)) << layer;
    EXPECT_FALSE(waits(gemm, ag)) << layer;
    bool joined = false;  // the next kernel after the GEMM, casts aside, waits for the gather
    for (OpId i = gemm + 1; i < g.ops.size(); ++i) {
      const std::string n = g.op_name(i);
      if (g.ops[i].kind != OpKind::kernel || (n.size() > 9 && n.compare(n.size() - 9, 9, ".quantize") == 0)) continue;
      joined = waits(i, ag);
      break;
    }
    EXPECT_TRUE(joined) << layer;
  }
}

// Transformer Engine's LayerNormLinear backward under tp_comm_overlap (TE v1.8 layernorm_linear.py, the
// release beside Megatron-Core r0.8): the bulk all-gather of the layer's input (for the wgrad) runs beside the
// dgrad GEMM, the bulk reduce-scatter of the dgrad beside the wgrad GEMM. Both were beside the wgrad before,
// the dgrad alone and the gather exposed after the wgrad. GELU MLP (fc1 one GEMM) and SwiGLU (gate and up):
// the gather goes beside the first dgrad, the reduce-scatter after fc1's last dgrad, beside the last wgrad.
// Under tp_comm_overlap on userbuffers (bulk); without it Transformer Engine's column-parallel modules issue the same
// two exchanges as asynchronous NCCL calls beside the same GEMMs (TE 07afda98 layernorm_linear.py, layernorm_mlp.py,
// linear.py backward: async_op=True); before 2026-12-03 racksim ran them inline without tp_comm_overlap.
TEST(GraphScale, BulkTensorParallelExchangesRunBesideTheDgradAndTheWgrad) {
  for (const bool ub : {true, false})
  for (const char* ffn : {"gelu", "swiglu"}) {
    auto sc = load(std::string(R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768, ffn: )") + ffn + R"(}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, sequence_parallel: true, tp_comm_overlap: )" +
                   (ub ? "true" : "false") + "}\n");
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    auto id = [&](const std::string& name) { return op_id(g, name); };
    auto waits = [&](OpId op, OpId on) { return waits_for(g, op, on); };
    // The first kernel after `op` on the compute stream waits for it (the op after the GEMM beside it).
    auto joined_after = [&](OpId gemm, OpId on) {
      for (OpId i = gemm + 1; i < g.ops.size(); ++i)
        if (g.ops[i].kind == OpKind::kernel) return waits(i, on);
      return false;
    };
    const bool swiglu = std::string(ffn) == "swiglu";
    struct Case { std::string ag, first_dgrad, first_wgrad, rs, last_dgrad, last_wgrad; };
    std::vector<Case> cases = {{"mb0.L0.qkv.wgrad.tp_all_gather", "mb0.L0.qkv.dgrad", "mb0.L0.qkv.wgrad",
                                "mb0.L0.qkv.dgrad.tp_reduce_scatter", "mb0.L0.qkv.dgrad", "mb0.L0.qkv.wgrad"}};
    if (swiglu)
      cases.push_back({"mb0.L0.mlp_gate.wgrad.tp_all_gather", "mb0.L0.mlp_up.dgrad", "mb0.L0.mlp_up.wgrad",
                       "mb0.L0.mlp.dgrad.tp_reduce_scatter", "mb0.L0.mlp_gate.dgrad", "mb0.L0.mlp_gate.wgrad"});
    else
      cases.push_back({"mb0.L0.mlp_up.wgrad.tp_all_gather", "mb0.L0.mlp_up.dgrad", "mb0.L0.mlp_up.wgrad",
                       "mb0.L0.mlp.dgrad.tp_reduce_scatter", "mb0.L0.mlp_up.dgrad", "mb0.L0.mlp_up.wgrad"});
    for (const auto& c : cases) {
      const OpId ag = id(c.ag), d1 = id(c.first_dgrad), w1 = id(c.first_wgrad), rs = id(c.rs), d2 = id(c.last_dgrad),
                 w2 = id(c.last_wgrad);
      const CommKernel kernel = ub ? CommKernel::dedicated_sms : CommKernel::nccl;
      EXPECT_EQ(g.ops[ag].comm_kernel, kernel) << c.ag;
      EXPECT_EQ(g.ops[rs].comm_kernel, kernel) << c.rs;
      EXPECT_LT(ag, d1) << c.ag;           // issued before the dgrad ...
      EXPECT_FALSE(waits(d1, ag)) << c.ag;  // ... which runs beside it
      EXPECT_TRUE(waits(w1, ag)) << c.ag;   // the wgrad consumes the gathered input
      EXPECT_TRUE(waits(rs, d2)) << c.rs;   // the dgrad's reduce-scatter after fc1's (or qkv's) last dgrad ...
      EXPECT_LT(rs, w2) << c.rs;
      EXPECT_FALSE(waits(w2, rs)) << c.rs;      // ... beside the wgrad
      EXPECT_TRUE(joined_after(w2, rs)) << c.rs;  // the next kernel waits for it
    }
  }
}

// Many micro-steps are simulated at two lengths and extended at the steady-state period; the
// result must agree with simulating every micro-step.
// Megatron-Core's output layer is its own ColumnParallelLinear (tensor_parallel/layers.py
// LinearWithGradAccumulationAndAsyncCommunication): the forward gathers the sequence-parallel input synchronously,
// userbuffers or not; the backward gathers it again beside the dgrad GEMM for the wgrad and reduce-scatters the
// dgrad beside the wgrad, both asynchronous NCCL calls. Without sequence parallelism a column-parallel dgrad is
// all-reduced beside the wgrad. Before 2026-12-03 the forward gather ran beside the logits GEMM under
// tp_comm_overlap, the backward had no gather, and without tp_comm_overlap the reduce-scatter was inline.
TEST(GraphScale, OutputLayerAndColumnParallelBackwardExchangesAsMegatronIssuesThem) {
  for (const bool ub : {true, false}) {
    const auto sc = load(std::string(R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768, ffn: swiglu}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, sequence_parallel: true, tp_comm_overlap: )") +
                         (ub ? "true" : "false") + "}\n");
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    auto id = [&](const std::string& name) { return op_id(g, name); };
    auto waits = [&](OpId op, OpId on) { return waits_for(g, op, on); };
    const OpId fwd_ag = id("mb0.v0.logits.tp_all_gather"), logits = id("mb0.v0.logits");
    EXPECT_TRUE(waits(logits, fwd_ag)) << ub;  // synchronous
    const OpId ag = id("mb0.v0.logits.wgrad.tp_all_gather"), dgrad = id("mb0.v0.logits.dgrad"),
               rs = id("mb0.v0.logits.dgrad.tp_reduce_scatter"), wgrad = id("mb0.v0.logits.wgrad");
    const double T = 4096, h = 4096, a = 2;
    EXPECT_DOUBLE_EQ(g.ops[ag].coll_bytes, T * h * a);
    EXPECT_EQ(g.ops[ag].comm_kernel, CommKernel::nccl);
    EXPECT_LT(ag, dgrad);
    EXPECT_FALSE(waits(dgrad, ag));
    EXPECT_TRUE(waits(wgrad, ag));
    EXPECT_LT(rs, wgrad);
    EXPECT_FALSE(waits(wgrad, rs));
    EXPECT_EQ(g.ops[rs].comm_kernel, CommKernel::nccl);
  }
  // No sequence parallelism: qkv's dgrad all-reduced beside its wgrad, the next kernel waiting for it.
  const auto sc = load(R"(system: {preset: h100-sxm, gpus: 8}
model: {layers: 2, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 32768}
training: {seq_len: 4096, global_batch: 8, parallelism: {tp: 8}, sequence_parallel: false}
)");
  const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
  OpId ar = 0, wgrad = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const std::string n = g.op_name(static_cast<OpId>(i));
    if (n == "mb0.L0.qkv.dgrad.tp_reduce_scatter") ar = static_cast<OpId>(i);
    if (n == "mb0.L0.qkv.wgrad") wgrad = static_cast<OpId>(i);
  }
  ASSERT_NE(ar, 0u);
  ASSERT_NE(wgrad, 0u);
  EXPECT_EQ(g.ops[ar].coll, hw::CollectiveOp::all_reduce);
  EXPECT_LT(ar, wgrad);
  EXPECT_TRUE(std::find(g.ops[wgrad].deps.begin(), g.ops[wgrad].deps.end(), ar) == g.ops[wgrad].deps.end());
  bool joined = false;
  for (OpId i = wgrad + 1; i < g.ops.size() && !joined; ++i)
    if (g.ops[i].kind == OpKind::kernel) {
      joined = std::find(g.ops[i].deps.begin(), g.ops[i].deps.end(), ar) != g.ops[i].deps.end();
      break;
    }
  EXPECT_TRUE(joined);
}

TEST(GraphScale, SteadyStateExtrapolationMatchesTheFullReplay) {
  const std::string quick = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"training.global_batch=512"},
           {"training.global_batch=256", "training.parallelism.pp=4", "training.parallelism.tp=2"},
           {"training.global_batch=512", "training.parallelism.pp=4", "training.parallelism.tp=2",
            "training.parallelism.vp=2"}}) {
    const auto sc = sim::load_scenario(quick, sim::parse_set_overrides(sets));
    const auto fast = sim::simulate(sc);
    const auto g = build_training_graph(sc.model, sc.training, sc.system.spec);
    const auto full = sim::replay(g, sim::job_of(sc));
    ASSERT_GT(sc.training.micro_steps(), 40);
    EXPECT_NEAR(fast.replay.step_time_s / full.step_time_s, 1.0, 0.005) << sets.back();
    EXPECT_NEAR(fast.replay.memory.peak_hbm_bytes / full.memory.peak_hbm_bytes, 1.0, 0.005) << sets.back();
    EXPECT_NEAR(fast.replay.breakdown.compute_s / full.breakdown.compute_s, 1.0, 0.01) << sets.back();
  }
}

// Megatron's micro-batch groups (training.pipeline.microbatch_group_size N, --microbatch-group-size-per-virtual-
// pipeline-stage): the first stage runs (vp - 1)·(N - pp) more warm-up forwards, each holding one micro-batch's
// activations through one chunk, so its activation peak grows by exactly that many chunks; the bubble of uniform
// stages stays (p - 1) / (v·m + p - 1) of the pipeline's span.
TEST(GraphScale, MicroBatchGroupsHoldMoreChunksNotMoreBubble) {
  const double p = 4, m = 16, v = 2;
  auto run = [&](int n) {
    std::vector<std::string> sets = {"training.global_batch=16", "training.parallelism.vp=2"};
    if (n > 0) sets.push_back("training.pipeline.microbatch_group_size=" + std::to_string(n));
    return simulate_exact(load(kPipeline, sets));
  };
  const auto base = run(0), n6 = run(6), n8 = run(8), n16 = run(16);
  auto acts = [](const sim::RunResult& r) {
    return r.replay.memory.at_peak[static_cast<int>(MemCategory::activations)];
  };
  const double chunk = (acts(n8) - acts(base)) / 4;  // N 8: 4 chunks more than N 4
  EXPECT_GT(chunk, 1e9);
  EXPECT_NEAR((acts(n6) - acts(base)) / chunk, 2.0, 1e-6);
  EXPECT_NEAR((acts(n16) - acts(base)) / chunk, 12.0, 1e-6);
  for (const auto* r : {&base, &n6, &n8, &n16})
    EXPECT_NEAR(r->replay.breakdown.pipeline_bubble_s / pipeline_span_s(*r) / ((p - 1) / (v * m + p - 1)), 1.0, 0.03);
}
