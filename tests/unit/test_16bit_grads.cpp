// Megatron's 16-bit gradient buffers: --fp16 (training.precision: fp16: bf16's tensor-core rate, the gradient buffer in
// fp16 and reduced in fp16, the dynamic loss scaler's work on the optimizer's shard, the NaN check off) and
// --grad-reduce-in-bf16 (training.grad_reduce_in_bf16: the bf16 buffer reduced in bf16). Checked against the closed forms
// Megatron's code and README give: the data-parallel bytes, the README's "4 + 16/d" bytes per parameter, the fp32 copy
// and the scaler's kernels, the host's wait for its flag; the imports; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hardware_models/compute_model.h"
#include "sim/engine/replay.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "workloads/importers/megatron_args.h"
#include "graph_state_util.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;
using racksim::testing::resident_state;

namespace {

// 4 nodes of 8 H100, TP 8 inside a node and data parallelism across the nodes (the Megatron README 32B row's shape).
const char* kDense = R"(system: {preset: h100-sxm, gpus: 32}
model: {layers: 4, hidden: 4096, ffn_hidden: 16384, heads: 32, kv_heads: 32, vocab: 32768}
training: {seq_len: 4096, global_batch: 16, micro_batch: 1, optimizer_sharding: zero1, parallelism: {tp: 8, dp: 4}}
)";

sim::Scenario load(const std::vector<std::string>& sets = {}) {
  return racksim::testing::scenario_from_text(kDense, "f.yaml", sets);
}

OpGraph graph_of(const sim::Scenario& sc) { return build_training_graph(sc.model, sc.training, sc.system.spec); }

// The data-parallel collectives' bytes of one kind on simulated rank 0.
double dp_bytes(const OpGraph& g, hw::CollectiveOp c) {
  double b = 0;
  for (const Op& o : g.ops)
    if (o.rank == 0 && o.kind == OpKind::collective &&
        (o.group == CommGroup::dp || o.group == CommGroup::dp_cp) && o.coll == c) b += o.coll_bytes;
  return b;
}

// Bytes of rank 0's tensors whose name ends with `suffix`.
double tensor_bytes(const OpGraph& g, const std::string& suffix) {
  double b = 0;
  for (std::size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].rank == 0 && g.tensor_name(static_cast<TensorId>(t)).ends_with(suffix)) b += g.tensors[t].bytes;
  return b;
}

// Parameters of rank 0 (tp 8: the layers' matrices and the vocabulary-parallel tables' 1/8, the norms whole).
double local_params(const sim::Scenario& sc) {
  const auto& m = sc.model;
  const double tp = sc.training.parallelism.tp;
  double n = 2.0 * m.vocab * m.hidden / tp + m.hidden;
  for (int l = 0; l < m.layers; ++l) {
    const auto p = layer_params(m, l);
    n += (p.attention + p.mlp) / tp + p.norms;
  }
  return n;
}

std::string error_text(const std::vector<std::string>& sets) {
  return racksim::testing::scenario_error_text(kDense, "f.yaml", sets);
}

// A small dense model's Megatron arguments, without a precision flag, and their import onto 16 H100s.
const std::string kArgs = "--num-layers 4\n--hidden-size 1024\n--num-attention-heads 16\n--seq-length 2048\n"
                          "--micro-batch-size 1\n--global-batch-size 64\n--vocab-size 32000\n";
importers::MegatronImport import_args(const std::string& extra) {
  importers::MegatronOptions opt;
  opt.system = "h100-sxm";
  opt.gpus = 16;
  return importers::import_megatron_args_text(kArgs + extra, "a.txt", opt);
}

}  // namespace

// Megatron keeps its gradient buffer in the parameters' dtype under --fp16 and in fp32 under --bf16 (arguments.py forces
// accumulate_allreduce_grads_in_fp32 for bf16 only): the distributed optimizer's reduce-scatter moves 2 bytes per
// parameter instead of 4, once per step; the parameter all-gather moves the 2-byte weights either way.
TEST(Fp16, MegatronReducesFp16GradientsWhereBf16ReducesFp32Ones) {
  const auto bf16 = load(), fp16 = load({"training.precision=fp16"});
  ASSERT_TRUE(fp16.training.fp16);
  EXPECT_EQ(fp16.training.precision, sim::Dtype::bf16);  // bf16's tensor-core rate
  const double n = local_params(bf16);
  const auto gb = graph_of(bf16), gf = graph_of(fp16);
  EXPECT_NEAR(dp_bytes(gb, hw::CollectiveOp::reduce_scatter) / (4 * n), 1.0, 1e-12);
  EXPECT_NEAR(dp_bytes(gf, hw::CollectiveOp::reduce_scatter) / (2 * n), 1.0, 1e-12);
  EXPECT_NEAR(dp_bytes(gb, hw::CollectiveOp::all_gather) / (2 * n), 1.0, 1e-12);
  EXPECT_NEAR(dp_bytes(gf, hw::CollectiveOp::all_gather) / (2 * n), 1.0, 1e-12);
}

// Megatron-LM README (distributed optimizer): "fp16 param, fp16 grads: 20 | 4 + 16/d", "bf16 param, fp32 grads: 18 |
// 6 + 12/d" bytes per parameter. racksim holds the weights, the gradient buffer and the sharded master weights and
// moments for the whole step, and the fp32 copy of the shard's gradients (the 4/d fp16 adds) while the optimizer runs.
TEST(Fp16, StateMatchesMegatronsBytesPerParameter) {
  for (const char* mode : {"zero1", "none"}) {
    const std::string sharding = std::string("training.optimizer_sharding=") + mode;
    const auto bf16 = load({sharding}), fp16 = load({sharding, "training.precision=fp16"});
    const double n = local_params(bf16), d = std::string(mode) == "zero1" ? 4.0 : 1.0;
    const auto gb = graph_of(bf16), gf = graph_of(fp16);
    EXPECT_NEAR(resident_state(gb) / (n * (6 + 12 / d)), 1.0, 1e-12) << mode;
    EXPECT_NEAR(resident_state(gf) / (n * (4 + 12 / d)), 1.0, 1e-12) << mode;
    EXPECT_NEAR(tensor_bytes(gf, "optimizer.main_grads.fp32") / (n * 4 / d), 1.0, 1e-12) << mode;
    EXPECT_EQ(tensor_bytes(gb, "optimizer.main_grads.fp32"), 0.0) << mode;
    EXPECT_NEAR((resident_state(gf) + tensor_bytes(gf, "optimizer.main_grads.fp32")) / (n * (4 + 16 / d)), 1.0, 1e-12)
        << mode;
  }
}

// MixedPrecisionOptimizer.prepare_grads under --fp16: the shard's fp16 gradients copied to fp32 (2 + 4 bytes per
// element), unscaled and checked in one pass (4 + 4), the found-inf flag all-reduced (4 bytes) and read by the host,
// whose next launch waits for it; the Adam step reads the fp32 copy. Under bf16 none of it.
TEST(Fp16, TheLossScalerRunsOnTheShardAndTheHostWaitsForItsFlag) {
  const auto fp16 = load({"training.precision=fp16"}), bf16 = load();
  const double shard = local_params(fp16) / 4;
  const auto g = graph_of(fp16);
  double copy = -1, unscale = -1, adam = -1;
  OpId found_inf = kNoOp;
  bool host_waits = false;
  for (OpId i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].rank != 0) continue;
    const std::string name = g.op_name(i);
    if (name.ends_with("optimizer.copy_model_grads_to_main")) copy = g.ops[i].hbm_bytes;
    if (name.ends_with("optimizer.unscale_and_check_inf")) unscale = g.ops[i].hbm_bytes;
    if (name.ends_with("optimizer.adamw")) adam = g.ops[i].hbm_bytes;
    if (name.ends_with("optimizer.found_inf.all_reduce")) {
      found_inf = i;
      EXPECT_EQ(g.ops[i].coll_bytes, 4.0);
      EXPECT_EQ(g.ops[i].group, CommGroup::world);
    }
    host_waits |= found_inf != kNoOp && g.ops[i].host_waits_for == found_inf;
  }
  EXPECT_NEAR(copy / (6 * shard), 1.0, 1e-12);
  EXPECT_NEAR(unscale / (8 * shard), 1.0, 1e-12);
  EXPECT_NEAR(adam / ((4 + 2 * (4 + 8)) * shard), 1.0, 1e-12);  // fp32 gradient, master weight and moments
  ASSERT_NE(found_inf, kNoOp);
  EXPECT_TRUE(host_waits);
  const auto gb = graph_of(bf16);
  for (OpId i = 0; i < gb.ops.size(); ++i) {
    const std::string name = gb.op_name(i);
    EXPECT_FALSE(name.find("found_inf") != std::string::npos || name.find("copy_model_grads") != std::string::npos)
        << name;
  }
}

// Megatron turns the NaN check off under --fp16's dynamic loss scaler (arguments.py); a scenario may keep it on (a
// static --loss-scale's run).
TEST(Fp16, NanCheckIsOffByDefaultAsUnderMegatronsDynamicScaler) {
  EXPECT_TRUE(load().training.check_for_nan);
  EXPECT_FALSE(load({"training.precision=fp16"}).training.check_for_nan);
  EXPECT_TRUE(load({"training.precision=fp16", "training.check_for_nan=true"}).training.check_for_nan);
  // The report's scenario says so, or it would rerun without the checks (a review's finding: 14.043284 s became
  // 14.043210 s).
  for (bool on : {true, false}) {
    const auto sc = load({"training.precision=fp16", std::string("training.check_for_nan=") + (on ? "true" : "false")});
    const auto echoed = sim::scenario_to_json(sc)["training"];
    ASSERT_TRUE(echoed.contains("check_for_nan"));
    EXPECT_EQ(echoed["check_for_nan"].get<bool>(), on);
    EXPECT_EQ(sim::load_scenario_text(sim::scenario_to_json(sc).dump(), "again.json").training.check_for_nan, on);
  }
}

// The fused wgrad accumulation adds into the fp16 main gradient: flagged fp16, not fp32, and timed at the preset's fp16
// figure, or where the preset has none half the fp32 one (the epilogue's read and write at 2 bytes instead of 4, which
// an H100's measurement does not refute: hw::kWgradAccumulate16bitFraction).
TEST(Fp16, WgradsAccumulateIntoTheFp16MainGradient) {
  const auto sc = load({"training.precision=fp16"});
  const auto g = graph_of(sc);
  int fp16_flags = 0, fp32_flags = 0;
  for (const Op& o : g.ops) {
    fp16_flags += o.accumulate_16bit;
    fp32_flags += o.accumulate_fp32;
  }
  EXPECT_GT(fp16_flags, 0);
  EXPECT_EQ(fp32_flags, 0);
  const auto& spec = sc.system.spec;
  ASSERT_GT(spec.gpu.wgrad_accumulate_serial_bytes, 0);
  EXPECT_DOUBLE_EQ(hw::wgrad_accumulate_serial_bytes(spec, sim::Dtype::bf16, true),
                   0.5 * spec.gpu.wgrad_accumulate_serial_bytes);
  const auto set = load({"training.precision=fp16", "system.overrides.gpu.wgrad_accumulate_serial_bytes_16bit=1.25"});
  EXPECT_DOUBLE_EQ(hw::wgrad_accumulate_serial_bytes(set.system.spec, sim::Dtype::bf16, true), 1.25);
}

// The report names the precision as given; JAX mode refuses fp16 (MaxText and Pax train bf16).
TEST(Fp16, ReportSaysFp16AndJaxModeRefusesIt) {
  const auto r = sim::simulate(load({"training.precision=fp16"}));
  EXPECT_EQ(r.report["scenario"]["training"]["precision"], "fp16");
  EXPECT_EQ(r.report["scenario"]["training"]["check_for_nan"], false);
  EXPECT_EQ(error_text({"training.precision=fp16", "training.framework=jax"}),
            "--set training.precision=fp16: error: training.precision: precision fp16 is modelled as Megatron-LM runs "
            "it (--fp16: fp16 gradients and a dynamic loss scaler); JAX mode (MaxText, Pax) trains bf16: use precision "
            "bf16, or training.framework: megatron");
  EXPECT_NE(error_text({"training.precision=fp61"}).find("expected one of bf16 | fp16 | fp8 | mxfp8 | nvfp4"),
            std::string::npos)
      << error_text({"training.precision=fp61"});
}

// `racksim import megatron`: --fp16 is precision fp16 (it had been bf16 "at the same tensor-core rate", with bf16's
// fp32 gradients); without --loss-scale the NaN check stays off whatever the flags say, with one it is on.
TEST(Fp16, MegatronImportMapsFp16AndItsLossScale) {
  const std::string base = "--fp16\n";
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v)
      if (x.find(s) != std::string::npos) return true;
    return false;
  };
  const auto dyn = import_args(base);
  EXPECT_NE(dyn.yaml.find("precision: fp16"), std::string::npos) << dyn.yaml;
  EXPECT_EQ(dyn.yaml.find("check_for_nan"), std::string::npos) << dyn.yaml;
  EXPECT_FALSE(sim::load_scenario_text(dyn.yaml, "imported.yaml").training.check_for_nan);
  const auto forced = import_args(base + "--check-for-nan-in-loss-and-grad\n");
  EXPECT_TRUE(has(forced.warnings, "Megatron turns the check off under dynamic loss scaling")) << forced.yaml;
  const auto fixed = import_args(base + "--loss-scale 4096\n");
  EXPECT_NE(fixed.yaml.find("check_for_nan: true"), std::string::npos) << fixed.yaml;
  EXPECT_TRUE(sim::load_scenario_text(fixed.yaml, "imported.yaml").training.check_for_nan);
  const auto fp32 = import_args(base + "--accumulate-allreduce-grads-in-fp32\n");
  EXPECT_TRUE(has(fp32.warnings, "--fp16 with --accumulate-allreduce-grads-in-fp32")) << fp32.yaml;
}

// --grad-reduce-in-bf16 (Megatron under --bf16: accumulate_allreduce_grads_in_fp32 = False): the bf16 buffer reduced in
// bf16, 2 bytes per parameter held, the distributed optimizer's fp32 copy of its shard while it runs (the same 4 + 16/d
// as fp16's), no loss scaler and the NaN check as it was; Megatron-Core's precision-aware optimizer (adam_moments bf16)
// reads the bf16 shard itself (its decoupled_grad): no copy, Adam reads 2 bytes per element.
TEST(GradReduceInBf16, Bf16BufferReducedInBf16WithTheOptimizersFp32Copy) {
  const auto sc = load({"training.grad_reduce_in_bf16=true"});
  EXPECT_FALSE(sc.training.fp16);
  EXPECT_TRUE(sc.training.check_for_nan);
  const double n = local_params(sc), d = 4;
  const auto g = graph_of(sc);
  EXPECT_NEAR(dp_bytes(g, hw::CollectiveOp::reduce_scatter) / (2 * n), 1.0, 1e-12);
  EXPECT_NEAR(resident_state(g) / (n * (4 + 12 / d)), 1.0, 1e-12);
  EXPECT_NEAR(tensor_bytes(g, "optimizer.main_grads.fp32") / (n * 4 / d), 1.0, 1e-12);
  int accumulate_16bit = 0, accumulate_fp32 = 0;
  for (OpId i = 0; i < g.ops.size(); ++i) {
    const std::string name = g.op_name(i);
    EXPECT_EQ(name.find("found_inf"), std::string::npos) << name;
    EXPECT_EQ(name.find("unscale"), std::string::npos) << name;
    accumulate_16bit += g.ops[i].accumulate_16bit;
    accumulate_fp32 += g.ops[i].accumulate_fp32;
  }
  EXPECT_GT(accumulate_16bit, 0);
  EXPECT_EQ(accumulate_fp32, 0);

  const auto pa = load({"training.grad_reduce_in_bf16=true", "training.adam_moments=bf16"});
  const auto gp = graph_of(pa);
  EXPECT_EQ(tensor_bytes(gp, "optimizer.main_grads.fp32"), 0.0);
  for (OpId i = 0; i < gp.ops.size(); ++i) {
    if (gp.ops[i].rank != 0) continue;
    const std::string name = gp.op_name(i);
    EXPECT_EQ(name.find("copy_model_grads"), std::string::npos) << name;
    // Adam reads the bf16 gradient, the fp32 master weight and bf16 moments and writes both (and the bf16 weights:
    // TE's FusedAdam writes the model's copy).
    if (name.ends_with("optimizer.adamw")) {
      EXPECT_NEAR(gp.ops[i].hbm_bytes / ((2 + 2 * (4 + 4) + 2) * local_params(pa) / d), 1.0, 1e-12);
    }
  }
  // A preset's 16-bit figure is for bf16-rate operands; an fp8 wgrad into a bf16 buffer pays half its own fp32 figure.
  const auto set = load({"system.overrides.gpu.wgrad_accumulate_serial_bytes_16bit=1.25"});
  EXPECT_DOUBLE_EQ(hw::wgrad_accumulate_serial_bytes(set.system.spec, sim::Dtype::bf16, true), 1.25);
  ASSERT_NE(set.system.spec.gpu.wgrad_accumulate_serial_bytes_fp8, 2.5);
  EXPECT_DOUBLE_EQ(hw::wgrad_accumulate_serial_bytes(set.system.spec, sim::Dtype::fp8, true),
                   0.5 * set.system.spec.gpu.wgrad_accumulate_serial_bytes_fp8);
  // Megatron-FSDP (fsdp, and zero2 in Megatron mode) reads its own buffer: no fp32 copy.
  for (const char* mode : {"zero2", "fsdp"}) {
    const auto fs = load({"training.grad_reduce_in_bf16=true", std::string("training.optimizer_sharding=") + mode});
    EXPECT_EQ(tensor_bytes(graph_of(fs), "optimizer.main_grads.fp32"), 0.0) << mode;
  }
  // The precision-aware optimizer reads it only without an fp8-class recipe other than delayed scaling.
  const auto mx = load({"training.grad_reduce_in_bf16=true", "training.adam_moments=bf16", "training.precision=mxfp8",
                        "system.preset=b200"});
  EXPECT_GT(tensor_bytes(graph_of(mx), "optimizer.main_grads.fp32"), 0.0);
}

// The epilogue's cost reaches the step: a wgrad GEMM flagged accumulate_16bit runs longer than the same GEMM unflagged by
// half what the fp32 accumulate adds (hw::kernel_timing), and the replay passes the flag on (the step's wgrads, cleared,
// run shorter).
TEST(GradReduceInBf16, TheSixteenBitAccumulateCostsHalfTheFp32OneInTheReplay) {
  const auto sc = load({"training.grad_reduce_in_bf16=true"});
  hw::KernelWork w;
  w.tensor_core = true;
  w.dtype = sim::Dtype::bf16;
  w.m = 4096, w.n = 16384, w.k = 4096, w.batch = 1;
  w.flops = 2 * w.m * w.n * w.k;
  const double plain = hw::kernel_timing(sc.system.spec, w).compute_s;
  w.accumulate_16bit = true;
  const double part = hw::kernel_timing(sc.system.spec, w).compute_s;
  w.accumulate_16bit = false;
  w.accumulate_fp32 = true;
  const double full = hw::kernel_timing(sc.system.spec, w).compute_s;
  EXPECT_GT(part, plain);
  EXPECT_NEAR((part - plain) / (full - plain), 0.5, 1e-9);

  const auto g = graph_of(sc);
  auto cleared = g;
  double flagged = 0, with = 0, without = 0;
  for (auto& o : cleared.ops) {
    flagged += o.accumulate_16bit;
    o.accumulate_16bit = 0;
  }
  ASSERT_GT(flagged, 0);
  const auto a = sim::replay(g, sim::job_of(sc)), b = sim::replay(cleared, sim::job_of(sc));
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].accumulate_16bit) {
      with += a.ops[i].end_s - a.ops[i].start_s;
      without += b.ops[i].end_s - b.ops[i].start_s;
    }
  EXPECT_GT(with, without * 1.001);
}

// Megatron ignores --grad-reduce-in-bf16 under --fp16 and JAX has no such switch: both say so in the report (a sweep over
// precision or framework keeps its base's key), neither fails.
TEST(GradReduceInBf16, NotedBesideFp16AndInJaxModeAndImportedFromMegatron) {
  const auto noted = sim::simulate(load({"training.grad_reduce_in_bf16=true", "training.precision=fp16"}));
  EXPECT_NE(noted.report["warnings"].dump().find("training.grad_reduce_in_bf16 with precision fp16: no effect"),
            std::string::npos);
  const auto jax = load({"training.grad_reduce_in_bf16=true", "training.framework=jax"});
  EXPECT_FALSE(jax.training.grads_16bit());
  EXPECT_NE(std::find(jax.training.other_framework_keys.begin(), jax.training.other_framework_keys.end(),
                      "grad_reduce_in_bf16"),
            jax.training.other_framework_keys.end());
  const std::string base = "--grad-reduce-in-bf16\n";
  const auto bf16 = import_args(base + "--bf16\n");
  EXPECT_TRUE(sim::load_scenario_text(bf16.yaml, "imported.yaml").training.grad_reduce_in_bf16) << bf16.yaml;
  const auto fp16 = import_args(base + "--fp16\n");
  EXPECT_EQ(fp16.yaml.find("grad_reduce_in_bf16"), std::string::npos) << fp16.yaml;
  bool warned = false;
  for (const auto& w : fp16.warnings) warned |= w.find("--grad-reduce-in-bf16 with --fp16: no effect") != std::string::npos;
  EXPECT_TRUE(warned);
  // --main-grads-dtype bf16 under --bf16 leaves the same bf16 buffer (Megatron forces fp32 only for fp32 main grads).
  const auto mg = import_args("--bf16\n--main-grads-dtype bf16\n");
  EXPECT_TRUE(sim::load_scenario_text(mg.yaml, "imported.yaml").training.grad_reduce_in_bf16) << mg.yaml;
  for (const auto& w : mg.warnings) EXPECT_EQ(w.find("--main-grads-dtype"), std::string::npos) << w;
  // Megatron-FSDP's own switch: auto is the model's dtype (bf16 here); fp32 keeps fp32.
  const std::string fsdp = "--bf16\n--use-megatron-fsdp\n--use-distributed-optimizer\n";
  for (const auto& [value, bf16_buffer] : {std::pair{"auto", true}, std::pair{"bf16", true}, std::pair{"fp32", false}}) {
    const auto f = import_args(fsdp + "--megatron-fsdp-main-grads-dtype " + value + "\n");
    EXPECT_EQ(sim::load_scenario_text(f.yaml, "imported.yaml").training.grad_reduce_in_bf16, bf16_buffer) << f.yaml;
  }
  // --fp16 beside fp8 GEMMs: its 16-bit buffer and the NaN check off (no --loss-scale; 0 is none).
  for (const char* ls : {"", "--loss-scale 0\n"}) {
    const auto f8 = import_args(std::string("--fp16\n--fp8-format hybrid\n") + ls);
    const auto t = sim::load_scenario_text(f8.yaml, "imported.yaml").training;
    EXPECT_EQ(t.precision, sim::Dtype::fp8) << f8.yaml;
    EXPECT_TRUE(t.grad_reduce_in_bf16) << f8.yaml;
    EXPECT_FALSE(t.check_for_nan) << f8.yaml;
  }
}

// The loss scaler's flag is read once per optimizer part (a dense and an expert optimizer, chained, under MoE), and its
// all-reduce starts on every pipeline stage together (it spans them all).
TEST(Fp16, FoundInfPerOptimizerPartJoinedAcrossStages) {
  const auto moe = sim::load_scenario_text(
      "system: {preset: h100-sxm, gpus: 16}\nmodel: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 4, "
      "vocab: 256, moe: {experts: 16, top_k: 2, expert_ffn_hidden: 1024}}\n"
      "training: {seq_len: 2048, global_batch: 16, micro_batch: 1, precision: fp16, optimizer_sharding: zero1, "
      "parallelism: {tp: 1, pp: 2, ep: 8, dp: 8}}\n",
      "m.yaml");
  const auto g = graph_of(moe);
  std::vector<OpId> dense, experts;
  for (OpId i = 0; i < g.ops.size(); ++i) {
    const std::string name = g.op_name(i);
    if (name.ends_with("optimizer.found_inf.all_reduce")) dense.push_back(i);
    if (name.ends_with("optimizer.found_inf.experts.all_reduce")) experts.push_back(i);
  }
  ASSERT_EQ(dense.size(), 2u);  // one per stage
  ASSERT_EQ(experts.size(), 2u);
  const auto r = sim::replay(g, sim::job_of(moe));
  EXPECT_DOUBLE_EQ(r.ops[dense[0]].start_s, r.ops[dense[1]].start_s);
  EXPECT_DOUBLE_EQ(r.ops[experts[0]].start_s, r.ops[experts[1]].start_s);
}

// Offloaded, the optimizer steps fp32 copies of its parameters on the host with torch's AdamW (fp32 moments, whatever
// adam_moments says), with pinned fp32 gradients (HybridDeviceOptimizer, param_update_in_fp32). Megatron requires the
// precision-aware optimizer with the offload, which reads the 16-bit buffer itself: no shard-sized fp32 copy on the GPU,
// under any recipe. A 16-bit gradient is copied into the host's non-blocking, which PyTorch converts on the GPU first:
// a conversion pass, then 4 bytes per parameter over the link, the copy after the pass. The parameters come back the
// same way: 4 bytes over the link, converted on the GPU into the 2-byte weights. An fp32 buffer needs no conversion.
TEST(GradReduceInBf16, OffloadedOptimizerTakesFp32GradientsConvertedOnTheGpu) {
  const auto sc = load({"training.grad_reduce_in_bf16=true", "training.adam_moments=bf16", "training.offload.optimizer=true"});
  const double shard = local_params(sc) / 4;
  const auto g = graph_of(sc);
  OpId convert = kNoOp, d2h = kNoOp;
  double h2d = -1, cast = -1, adam = -1;
  for (OpId i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].rank != 0) continue;
    const std::string name = g.op_name(i);
    if (name.ends_with("optimizer.grads_to_fp32")) convert = i;
    if (name.ends_with("optimizer.grads_to_host")) d2h = i;
    if (name.ends_with("optimizer.cpu_adam")) adam = g.ops[i].copy_bytes;
    if (name.ends_with("optimizer.weights_from_host")) h2d = g.ops[i].copy_bytes;
    if (name.ends_with("optimizer.cast_weights")) cast = g.ops[i].hbm_bytes;
  }
  ASSERT_NE(convert, kNoOp);
  ASSERT_NE(d2h, kNoOp);
  EXPECT_NEAR(g.ops[convert].hbm_bytes / ((2 + 4) * shard), 1.0, 1e-12);
  EXPECT_NEAR(g.ops[d2h].copy_bytes / (4 * shard), 1.0, 1e-12);
  const auto& deps = g.ops[d2h].deps;
  EXPECT_NE(std::find(deps.begin(), deps.end(), convert), deps.end());  // the copy reads what the pass wrote
  // Adam on the host: the fp32 gradient, master weight and moments read, master and moments written.
  EXPECT_NEAR(adam / ((4 + 2 * (4 + 8)) * shard), 1.0, 1e-12);
  EXPECT_NEAR(h2d / (4 * shard), 1.0, 1e-12);
  EXPECT_NEAR(cast / ((4 + 2) * shard), 1.0, 1e-12);
  EXPECT_NEAR(tensor_bytes(g, "optimizer.grads_host") / (4 * shard), 1.0, 1e-12);
  EXPECT_NEAR(tensor_bytes(g, "optimizer.master_m_v") / ((4 + 8) * shard), 1.0, 1e-12);
  EXPECT_EQ(tensor_bytes(g, "optimizer.main_grads.fp32"), 0.0);  // a parameter at a time, not the shard at once
  // With fp32 moments asked, or an fp8 recipe other than delayed scaling, still no fp32 copy on the GPU.
  for (const std::vector<std::string>& more : {std::vector<std::string>{},
                                              {"training.precision=fp8", "training.fp8_recipe=blockwise"}}) {
    std::vector<std::string> sets = {"training.grad_reduce_in_bf16=true", "training.offload.optimizer=true"};
    sets.insert(sets.end(), more.begin(), more.end());
    const auto g2 = graph_of(load(sets));
    EXPECT_EQ(tensor_bytes(g2, "optimizer.main_grads.fp32"), 0.0);
    for (OpId i = 0; i < g2.ops.size(); ++i) EXPECT_FALSE(g2.op_name(i).ends_with("copy_model_grads_to_main"));
  }

  const auto fp32 = graph_of(load({"training.offload.optimizer=true"}));
  for (OpId i = 0; i < fp32.ops.size(); ++i) {
    EXPECT_FALSE(fp32.op_name(i).ends_with("optimizer.grads_to_fp32"));
    if (fp32.ops[i].rank == 0 && fp32.op_name(i).ends_with("optimizer.grads_to_host")) {
      EXPECT_NEAR(fp32.ops[i].copy_bytes / (4 * shard), 1.0, 1e-12);
    }
  }
}
