// XLA's collective combiners in JAX mode (training.xla_combine_threshold): in an unrolled program the
// gradient reduce-scatters and hybrid sharding's replica all-reduces of consecutive layers merge, in backward
// order, while their bytes sum to at most the threshold (one larger than it stays alone). Checked against
// closed forms: the number of combined collectives and their bytes for a threshold, the total bytes, the
// dependencies (a combined collective waits for all its members' producers), a threshold of 0 reproducing
// the uncombined graph, scanned loops and Megatron mode untouched, bad values failing with the key's path.
#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "input/diagnostics.h"
#include "sim/engine/replay.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "scenario_text_util.h"
#include "workloads/importers/maxtext_config.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

sim::Scenario load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_from_text(yaml, "c.yaml", sets);
}
std::string error_text(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_error_text(yaml, "c.yaml", sets);
}

// 4 nodes of 8 H100, JAX FSDP8 x data 4 (hybrid sharding), unrolled layers. Per layer 202.4 M parameters:
// bf16 gradient reduce-scatter 405 MB, replica all-reduce of the 1/8 shard 50.6 MB; embedding and head
// 131 M parameters each (embedding in fp32: 524 MB and 65.5 MB; head in bf16: 262 MB and 32.8 MB).
const char* kHybrid = R"(system: {preset: h100-sxm, gpus: 32}
model: {layers: 4, hidden: 4096, ffn_hidden: 11008, heads: 32, kv_heads: 32, vocab: 32000}
training: {framework: jax, scan_layers: false, seq_len: 4096, global_batch: 32, micro_batch: 1,
           optimizer_sharding: fsdp, parallelism: {tp: 1, dp_shard: 8}}
)";

OpGraph graph(const sim::Scenario& sc) { return build_training_graph(sc.model, sc.training, sc.system.spec); }

// The collectives of one kind over one group, in graph order.
std::vector<OpId> collectives(const OpGraph& g, CommGroup grp, hw::CollectiveOp op) {
  std::vector<OpId> r;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == OpKind::collective && g.ops[i].group == grp && g.ops[i].coll == op) r.push_back(static_cast<OpId>(i));
  return r;
}
double bytes_of(const OpGraph& g, const std::vector<OpId>& ops) {
  double b = 0;
  for (OpId o : ops) b += g.ops[o].coll_bytes;
  return b;
}

// XLA's greedy grouping, closed form: consecutive sizes while the sum stays <= threshold.
std::vector<double> greedy(const std::vector<double>& sizes, double threshold) {
  std::vector<double> groups;
  double cur = 0;
  bool open = false;
  for (double s : sizes) {
    if (open && cur + s > threshold) {
      groups.push_back(cur);
      open = false;
      cur = 0;
    }
    cur += s;
    open = true;
  }
  if (open) groups.push_back(cur);
  return groups;
}

}  // namespace

// The defaults are XLA's (30 MiB + 7 bytes): every member here is larger, so nothing combines, and a
// threshold of 0 gives the same graph op for op, and the same step.
TEST(XlaCombiner, ThresholdZeroAndDefaultGiveTheUncombinedGraph) {
  const auto def = load(kHybrid);
  EXPECT_EQ(def.training.xla_combine_threshold.all_reduce_bytes, 30.0 * 1024 * 1024 + 7);
  const auto zero = load(kHybrid, {"training.xla_combine_threshold={all_reduce: 0 B, reduce_scatter: 0 B, all_gather: 0 B}"});
  const auto gd = graph(def), gz = graph(zero);
  ASSERT_EQ(gd.ops.size(), gz.ops.size());
  for (std::size_t i = 0; i < gd.ops.size(); ++i) {
    ASSERT_EQ(gd.op_name(static_cast<OpId>(i)), gz.op_name(static_cast<OpId>(i)));
    ASSERT_EQ(std::vector<OpId>(gd.ops[i].deps.begin(), gd.ops[i].deps.end()),
              std::vector<OpId>(gz.ops[i].deps.begin(), gz.ops[i].deps.end()))
        << gd.op_name(static_cast<OpId>(i));
  }
  // One replica all-reduce per reduce-scatter: head, 4 layers, embedding (one micro-batch per rank).
  const auto ar = collectives(gz, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
  EXPECT_EQ(ar.size(), 6u);
  EXPECT_EQ(collectives(gz, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter).size(), 6u);
  EXPECT_EQ(sim::replay(gd, sim::job_of(def)).step_time_s, sim::replay(gz, sim::job_of(zero)).step_time_s);
}

// All-reduce threshold 125 MB: per backward the six shards (32.8, 50.6, 50.6, 50.6, 50.6, 65.5 MB: the weights'
// gradients reduced in bf16 as XLA does, the embedding's in fp32) group as {head, L3}, {L2, L1}, {L0, embedding};
// 1 GiB takes all six in one. Bytes are conserved, and a combined all-reduce waits for every member's reduce-scatter.
TEST(XlaCombiner, ReplicaAllReducesGroupGreedilyUpToTheThreshold) {
  const auto base = load(kHybrid, {"training.xla_combine_threshold={all_reduce: 0 B}"});
  const auto gb = graph(base);
  const auto uncombined = collectives(gb, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
  ASSERT_EQ(uncombined.size(), 6u);
  std::vector<double> sizes;  // the backward pass
  for (std::size_t i = 0; i < 6; ++i) sizes.push_back(gb.ops[uncombined[i]].coll_bytes);
  EXPECT_NEAR(sizes[1] / (sizes[0]), 202.4 / 131.1, 0.01);

  for (const auto& [value, threshold, expected_groups] :
       {std::tuple{"125 MB", 125e6, 3u}, std::tuple{"1 GiB", 1073741824.0, 1u}}) {
    const auto sc = load(kHybrid, {std::string("training.xla_combine_threshold={all_reduce: ") + value + "}"});
    const auto g = graph(sc);
    const auto ar = collectives(g, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
    const auto want = greedy(sizes, threshold);
    ASSERT_EQ(want.size(), expected_groups);
    ASSERT_EQ(ar.size(), expected_groups) << value;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(g.ops[ar[i]].coll_bytes / want[i], 1.0, 1e-12) << value << " group " << i;
      EXPECT_LE(g.ops[ar[i]].coll_bytes, threshold);
    }
    EXPECT_NEAR(bytes_of(g, ar) / bytes_of(gb, uncombined), 1.0, 1e-12);
    // The reduce-scatters are untouched (405, 262 and 524 MB, over the 30 MiB default).
    EXPECT_EQ(collectives(g, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter).size(), 6u);
    // The first group waits for the reduce-scatters of all its members: 2 (125 MB) or 6 (1 GiB).
    int rs_deps = 0;
    for (OpId d : g.ops[ar[0]].deps) rs_deps += g.ops[d].kind == OpKind::collective && g.ops[d].coll == hw::CollectiveOp::reduce_scatter;
    EXPECT_EQ(rs_deps, expected_groups == 3u ? 2 : 6) << value;
    if (expected_groups == 3u) {
      EXPECT_EQ(g.op_name(ar[0]), "mb0.v0.grad.head.combined_2.replica_all_reduce");
    }
  }
  // (Which step is longer, combined or not, follows XLA's scheduler windows: each all-reduce is waited for five
  // kernels after it starts, TheSixthKernelAfterAGradientCollectiveWaitsForIt; no order is asserted here.)
}

// Reduce-scatters combine too, measured by their output, the 1/8 shard (as XLA: 125 MB groups {head, L3},
// {L2, L1}, {L0, embedding}), and the replica all-reduces of their members wait for the combined
// reduce-scatter, not cutting it.
TEST(XlaCombiner, ReduceScattersCombineAndTheirAllReducesFollow) {
  const auto base = load(kHybrid, {"training.xla_combine_threshold={reduce_scatter: 0 B}"});
  const auto sc = load(kHybrid, {"training.xla_combine_threshold={reduce_scatter: 125 MB}"});
  const auto gb = graph(base), g = graph(sc);
  const auto rs0 = collectives(gb, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter);
  const auto rs = collectives(g, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter);
  std::vector<double> sizes;
  for (std::size_t i = 0; i < 6; ++i) sizes.push_back(gb.ops[rs0[i]].coll_bytes / 8);
  const auto want = greedy(sizes, 125e6);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(rs.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(g.ops[rs[i]].coll_bytes / (8 * want[i]), 1.0, 1e-12);
  EXPECT_NEAR(bytes_of(g, rs) / bytes_of(gb, rs0), 1.0, 1e-12);
  // 6 all-reduces still (each over the 30 MiB default); the head's and L3's wait for the first combined one.
  const auto ar = collectives(g, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
  ASSERT_EQ(ar.size(), 6u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(g.ops[ar[i]].deps.size(), 1u);
    EXPECT_EQ(g.ops[ar[i]].deps[0], rs[0]);
    EXPECT_GT(ar[i], rs[0]);
  }
}

// XLA reduces a weight's gradient on the weight-gradient dot's output, in bf16, before its convert to the fp32
// parameter's dtype (every compiled data-parallel and FSDP program: calibration/data/h200x2-2026-11-29-mechanisms,
// h200-2026-12-04-mock-compile); the embedding's, a scatter-add into the fp32 table, in fp32. Megatron reduces its
// fp32 main gradients. Bytes per parameter of each reduction, from the graph, against those dtypes.
TEST(XlaCombiner, GradientReductionDtypesAreXlasAndMegatrons) {
  const double layer = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096;  // attention, SwiGLU, two norms
  const double table = 32000.0 * 4096;
  for (const bool jax : {true, false}) {
    const auto sc = load(kHybrid, {"training.xla_combine_threshold={all_reduce: 0 B, reduce_scatter: 0 B}",
                                   std::string("training.framework=") + (jax ? "jax" : "megatron")});
    const auto g = graph(sc);
    const auto rs = collectives(g, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter);
    const auto ar = collectives(g, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
    ASSERT_EQ(rs.size(), 6u) << jax;
    ASSERT_EQ(ar.size(), 6u) << jax;
    const double w = jax ? 2.0 : 4.0;  // bf16 or fp32 per weight-gradient element
    // backward order: head, L3..L0, embedding
    EXPECT_NEAR(g.ops[rs[0]].coll_bytes / (table * w), 1.0, 1e-4) << jax;  // (and the final norm)
    for (int i = 1; i <= 4; ++i) {
      EXPECT_NEAR(g.ops[rs[i]].coll_bytes / (layer * w), 1.0, 1e-3) << jax << " " << g.op_name(rs[i]);
      EXPECT_NEAR(g.ops[ar[i]].coll_bytes / (layer * w / 8), 1.0, 1e-3) << jax << " " << g.op_name(ar[i]);
    }
    EXPECT_NEAR(g.ops[rs[5]].coll_bytes / (table * 4.0), 1.0, 1e-9) << jax << " " << g.op_name(rs[5]);
    EXPECT_NEAR(g.ops[ar[5]].coll_bytes / (table * 4.0 / 8), 1.0, 1e-9) << jax;
  }
}

// XLA's latency hiding scheduler places every collective's done five medium-cost ops after its start
// (GpuLatencyEstimator: latency 5000, a GEMM or loop fusion 1000). A gradient reduce-scatter or replica
// all-reduce has no user in the backward, so in an unrolled program the sixth compute kernel after it waits for
// it, and the five before do not.
TEST(XlaCombiner, TheSixthKernelAfterAGradientCollectiveWaitsForIt) {
  const auto g = graph(load(kHybrid));
  std::vector<OpId> grads = collectives(g, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter);
  const auto ar = collectives(g, CommGroup::dp_replicate, hw::CollectiveOp::all_reduce);
  grads.insert(grads.end(), ar.begin(), ar.end());
  ASSERT_EQ(grads.size(), 12u);
  int bounded = 0;
  for (OpId c : grads) {
    int seen = 0;
    for (auto i = static_cast<std::size_t>(c) + 1; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (op.kind != OpKind::kernel || op.stream != StreamKind::compute) continue;
      const bool waits = std::find(op.deps.begin(), op.deps.end(), c) != op.deps.end();
      if (op.phase == Phase::optimizer) {  // the gradient's user: it waits for it anyway
        EXPECT_TRUE(waits) << g.op_name(c);
        break;
      }
      if (++seen <= 5) {
        EXPECT_FALSE(waits) << g.op_name(c) << " kernel " << seen << " " << g.op_name(static_cast<OpId>(i));
        continue;
      }
      EXPECT_TRUE(waits) << g.op_name(c) << " " << g.op_name(static_cast<OpId>(i));
      bounded += waits;
      break;
    }
  }
  // The last ones (L0's and the embedding's, issued at the end of the backward) meet the optimizer first.
  EXPECT_EQ(bounded, 8);
  // Under gradient accumulation (4 micro-batches) a window never reaches into the next micro-batch: each gradient
  // collective is waited for in its own micro-batch, or by the next micro-batch's first kernel.
  {
    const auto ga = graph(load(kHybrid, {"training.global_batch=128"}));
    int checked = 0;
    for (std::size_t c = 0; c < ga.ops.size(); ++c) {
      const Op& co = ga.ops[c];
      if (co.kind != OpKind::collective || co.phase != Phase::backward || co.coll != hw::CollectiveOp::reduce_scatter) continue;
      const std::string cn = ga.op_name(static_cast<OpId>(c));
      const std::string micro = cn.substr(0, cn.find('.') + 1);  // "mbN."
      bool first_of_next = true;
      for (std::size_t i = c + 1; i < ga.ops.size(); ++i) {
        const Op& op = ga.ops[i];
        if (op.kind != OpKind::kernel || op.stream != StreamKind::compute) continue;
        const std::string n = ga.op_name(static_cast<OpId>(i));
        const bool same = n.rfind(micro, 0) == 0;
        if (std::find(op.deps.begin(), op.deps.end(), static_cast<OpId>(c)) != op.deps.end()) {
          EXPECT_TRUE(same || first_of_next) << cn << " waited for by " << n;
          ++checked;
          break;
        }
        if (!same && n.rfind("mb", 0) == 0) first_of_next = false;
      }
    }
    EXPECT_GE(checked, 18);  // 6 reduce-scatters in each of the first three micro-batches at least
  }
  // Scanned, the loop's iterations bound them: no window deps.
  const auto gs = graph(load(kHybrid, {"training.scan_layers=true"}));
  for (OpId c : collectives(gs, CommGroup::dp_shard, hw::CollectiveOp::reduce_scatter)) {
    int seen = 0;
    for (auto i = static_cast<std::size_t>(c) + 1; i < gs.ops.size() && seen < 6; ++i) {
      const Op& op = gs.ops[i];
      if (op.kind != OpKind::kernel || op.stream != StreamKind::compute) continue;
      ++seen;
      if (seen == 6) {
        EXPECT_EQ(std::count(op.deps.begin(), op.deps.end(), c), 0) << gs.op_name(c);
      }
    }
  }
}

// XLA gathers an FSDP layer's weights array by array (one all-gather per sharded weight from the SPMD partitioner),
// merged by the all-gather combiner only while the gathered outputs sum to at most its threshold: MaxText's programs
// compiled for 8-512 GPUs (calibration/data/h200-2026-12-04-mock-compile) have seven per layer at the 30 MiB default
// for Llama 3 70B and four at A3's 128 MiB for Llama 2 7B. Here (D 4096, F 11008): q, k, v, o 33.6 MB each and the
// three MLP matrices 90.2 MB each in bf16; 128 MiB takes q, k, v, o (exactly 128 MiB) into one. Megatron's FSDP
// (PyTorch's flat parameter, Megatron-FSDP's buckets) gathers a layer in one collective.
TEST(XlaCombiner, FsdpGathersAreXlasPerWeightArrays) {
  const double a = 4096.0 * 4096 * 2, f = 4096.0 * 11008 * 2, norms = 2 * 4096.0 * 2;
  auto layer_gathers = [&](std::vector<std::string> sets) {
    sets.push_back("training.fused_qkv=false");  // MaxText's q, k and v projections apart
    const auto g = graph(load(kHybrid, sets));
    std::vector<double> bytes;  // layer 2's forward gathers, in graph order (the backward gathers it again)
    for (std::size_t i = 0; i < g.ops.size() && g.ops[i].phase == Phase::forward; ++i)
      if (g.ops[i].kind == OpKind::collective && g.ops[i].coll == hw::CollectiveOp::all_gather &&
          g.op_name(static_cast<OpId>(i)).rfind("mb0.L2.fsdp.param_all_gather", 0) == 0)
        bytes.push_back(g.ops[i].coll_bytes);
    return bytes;
  };
  const auto def = layer_gathers({});
  ASSERT_EQ(def.size(), 7u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(def[i] / a, 1.0, 1e-9) << i;
  for (int i = 4; i < 6; ++i) EXPECT_NEAR(def[i] / f, 1.0, 1e-9) << i;
  EXPECT_NEAR(def[6] / (f + norms), 1.0, 1e-9);
  const auto big = layer_gathers({"training.xla_combine_threshold={all_gather: 128 MiB}"});
  ASSERT_EQ(big.size(), 4u);
  EXPECT_NEAR(big[0] / (4 * a), 1.0, 1e-9);
  EXPECT_NEAR(big[3] / (f + norms), 1.0, 1e-9);
  const auto meg = layer_gathers({"training.framework=megatron"});
  ASSERT_EQ(meg.size(), 1u);
  EXPECT_NEAR(meg[0] / (4 * a + 3 * f + norms), 1.0, 1e-9);
  // Grouped-query attention (8 KV heads): k and v, 8.4 MB each, merge under the 30 MiB default; the pieces stay in
  // program order, q, k+v, o, then the MLP.
  const auto gqa = layer_gathers({"model.kv_heads=8"});
  ASSERT_EQ(gqa.size(), 6u);
  EXPECT_NEAR(gqa[0] / a, 1.0, 1e-9);
  EXPECT_NEAR(gqa[1] / (a / 2), 1.0, 1e-9);
  EXPECT_NEAR(gqa[2] / a, 1.0, 1e-9);
  EXPECT_NEAR(gqa[5] / (f + norms), 1.0, 1e-9);
}

// Scanned layers: one gradient collective per kind in the loop body, nothing to combine (XLA does not
// combine across iterations); Megatron mode has no XLA. Both build the same graph whatever the thresholds.
TEST(XlaCombiner, ScannedLoopsAndMegatronAreUnchanged) {
  for (const std::vector<std::string>& mode : {std::vector<std::string>{"training.scan_layers=true"},
                                              std::vector<std::string>{"training.framework=megatron"}}) {
    auto sets = mode;
    const auto a = load(kHybrid, sets);
    sets.push_back("training.xla_combine_threshold={all_reduce: 1 GiB, reduce_scatter: 4 GB}");
    const auto b = load(kHybrid, sets);
    const auto ga = graph(a), gb = graph(b);
    ASSERT_EQ(ga.ops.size(), gb.ops.size()) << mode[0];
    EXPECT_EQ(sim::replay(ga, sim::job_of(a)).step_time_s, sim::replay(gb, sim::job_of(b)).step_time_s) << mode[0];
  }
}

TEST(XlaCombiner, BadValuesNameTheKey) {
  EXPECT_EQ(error_text(kHybrid, {"training.xla_combine_threshold={all_reduce: 1 GB/s}"}),
            "--set training.xla_combine_threshold={all_reduce: 1 GB/s}:1:14: error: training.xla_combine_threshold.all_reduce: "
            "wrong unit: expected a size (e.g. 141 GB), got a bandwidth '1 GB/s'");
  EXPECT_EQ(error_text(kHybrid, {"training.xla_combine_threshold={reduce_scatter: -1 MB}"}),
            "--set training.xla_combine_threshold={reduce_scatter: -1 MB}:1:18: error: "
            "training.xla_combine_threshold.reduce_scatter: negative size '-1 MB'");
  EXPECT_NE(error_text(kHybrid, {"training.xla_combine_threshold={all_reduse: 1 GB}"}).find("did you mean 'all_reduce'"),
            std::string::npos);
}

// `racksim import maxtext --xla-flags` maps XLA's three flags (MaxText's A3 scripts set them) to the key.
TEST(XlaCombiner, MaxTextImportReadsTheThresholdFlags) {
  workloads::importers::MaxTextOptions opt;
  opt.system = "h100-sxm";
  opt.system_given = true;
  opt.domain_size = 8;
  opt.xla_flags =
      "--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_all_reduce_combine_threshold_bytes=1073741824 "
      "--xla_gpu_all_gather_combine_threshold_bytes=134217728\n--xla_gpu_reduce_scatter_combine_threshold_bytes=67108864";
  const auto r = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml", {}, opt);
  const auto sc = sim::load_scenario_text(r.yaml, "imported.yaml");
  EXPECT_EQ(sc.training.xla_combine_threshold.all_reduce_bytes, 1073741824.0);
  EXPECT_EQ(sc.training.xla_combine_threshold.all_gather_bytes, 134217728.0);
  EXPECT_EQ(sc.training.xla_combine_threshold.reduce_scatter_bytes, 67108864.0);
  // Without the flags the key is not written: XLA's defaults.
  opt.xla_flags = "--xla_gpu_enable_pipelined_all_gather=true";
  const auto plain = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml", {}, opt);
  EXPECT_EQ(plain.yaml.find("xla_combine_threshold"), std::string::npos);
  EXPECT_TRUE(sim::load_scenario_text(plain.yaml, "imported.yaml").training.cuda_graphs);  // XLA's default
  // `--xla_gpu_enable_command_buffer=` (empty, as JAX-Toolbox's and MaxText's GPU scripts pass it) turns XLA's
  // command buffers off; a list of command types keeps them on.
  opt.xla_flags = "--xla_gpu_enable_latency_hiding_scheduler=true\n  --xla_gpu_enable_command_buffer=\n";
  const auto off = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml", {}, opt);
  EXPECT_FALSE(sim::load_scenario_text(off.yaml, "imported.yaml").training.cuda_graphs);
  EXPECT_NE(off.yaml.find("XLA_FLAGS: --xla_gpu_enable_command_buffer= (empty"), std::string::npos) << off.yaml;
  opt.xla_flags = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS";
  const auto on = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml", {}, opt);
  EXPECT_TRUE(sim::load_scenario_text(on.yaml, "imported.yaml").training.cuda_graphs);
  // A pipeliner flag that is not true or false keeps XLA's default (reduce-scatter pipelined) and says so.
  opt.xla_flags = "--xla_gpu_enable_pipelined_reduce_scatter=banana";
  const auto banana = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml", {}, opt);
  EXPECT_EQ(banana.yaml.find("xla_pipelined_collectives"), std::string::npos) << banana.yaml;
  EXPECT_TRUE(std::any_of(banana.warnings.begin(), banana.warnings.end(), [](const std::string& w) {
    return w == "XLA_FLAGS: --xla_gpu_enable_pipelined_reduce_scatter=banana is not true or false; XLA's default is kept";
  }));
  // A slice (the ICI axes' product) larger than the NVLink domain says its ICI axes cross the NICs.
  opt.xla_flags.clear();
  const auto wide = workloads::importers::import_maxtext(std::string(RACKSIM_SOURCE_DIR) + "/tests/data/maxtext/base.yml",
                                                         {"ici_tensor_parallelism=16", "ici_fsdp_parallelism=1"}, opt);
  EXPECT_TRUE(std::any_of(wide.warnings.begin(), wide.warnings.end(), [](const std::string& w) {
    return w.find("a slice of 16 GPUs") != std::string::npos && w.find("NVLink domain of 8") != std::string::npos;
  }));
}
