// Predictions against measurements, as suites: the HLO replays of the measured H200 JAX steps
// (scenarios/validation/hlo.yaml, hlo-x2.yaml; the five reference steps' data in tests/data/reference/),
// the public at-scale suite (scenarios/validation/at_scale.yaml) and Megatron-LM's single MoE layer
// baselines. Each pins today's passes and known misses, so that a change that moves one is noticed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

#include "sim/cli/commands.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "tests/unit/cli_util.h"
#include "workloads/graph_builder.h"

using nlohmann::json;
using namespace racksim;
using namespace racksim::workloads;

namespace {

using racksim::testing::run_cli;
// Copies of the shared reference's H200 JAX steps (tests/data/reference/README.md).
const std::string kReference = std::string(RACKSIM_SOURCE_DIR) + "/tests/data/reference";

sim::Scenario load(const std::string& yaml) { return sim::load_scenario_text(yaml, "t.yaml", {}); }

}  // namespace

TEST(HloReplay, ReferenceModulesPeakMemoryWithinTenPercent) {
  const std::string dir = kReference + "/hlo";
  const std::string rows = kReference + "/h200/jax_training_steps.jsonl";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "reference data missing: " << dir;
  std::ifstream in(rows);
  ASSERT_TRUE(in) << "reference data missing: " << rows;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    const std::string file = dir + "/" + row["name"].get<std::string>() + ".hlo.txt.gz";
    const json rep = racksim::sim::run_hlo(file, "h200-sxm", 1, {}).report;
    const double peak = rep["peak_memory_bytes"].get<double>();
    const double measured = row["peak_bytes_in_use"].get<double>();
    EXPECT_LT(std::abs(peak / measured - 1), 0.10) << row["name"] << " predicted " << peak << " measured " << measured;
    EXPECT_TRUE(rep["fits"].get<bool>());
    // Model FLOPs: 6·N·tokens + attention, as the reference rows define them.
    const double model = row["model_flops_6N"].get<double>() + row["attn_flops"].get<double>();
    EXPECT_NEAR(rep["model_tflops_per_gpu"].get<double>() * 1e12 * rep["step_time_s"].get<double>() / model, 1.0, 0.01)
        << row["name"];
    ++n;
  }
  EXPECT_EQ(n, 5);
}

// Issue 7's acceptance: every measured H200 step (the 5 reference modules, our 19, and the 3
// runtime checks), replayed from its HLO on the calibrated H200, within 10% of the measured
// median step time and of peak_bytes_in_use. `racksim validate` exits 0 only if all 82 checks pass (4 steps also without command buffers, 3 with grouped-query attention, 3 more measured last, 2 at Llama 2 7B's layer shape measured 2026-12-04, the same layer with one parameter array per layer twice, 2026-12-07).
TEST(HloReplay, ValidationSuiteWithinTenPercent) {
  ASSERT_TRUE(std::filesystem::is_directory(kReference + "/hlo")) << "reference data missing: " << kReference << "/hlo";
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/hlo.yaml"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("82 checks: 82 pass"), std::string::npos) << r.out;
}

// The same JAX programs measured on an H100 (80 GB HBM3; calibration/data/h100-2026-12-05-jax-steps): the Hopper of
// the at-scale JAX rows, at the H200's calibration carried by the transfer rule. Every step time and peak within 10%,
// replayed from its HLO and built from its scenario (Llama 2 7B's layer at the MaxText rows' shape: scenario -0.6/-0.7%,
// replay +0.5/+0.9%), so the JAX rows' misses at scale are not the H100's kernels. Since 2026-12-06 also Llama 3 8B's
// layer in FP8 as MaxText's fp8_gpu runs it (flax's direct FP8 dot) and in bf16 (calibration/data/h100-2026-12-06-jax-fp8):
// FP8 scenario -3.3%, replay -3.1%; bf16 -1.6% and -0.3%. The scenario builder's memory of the three unrolled steps that
// missed by 11-13% (-0.6..+4.2% now) took the slices of each layer's fp32 weights out of train_step.py's stacked arrays,
// which XLA keeps for the checkpointed layer's backward (2026-12-07; docs/decisions.md, "XLA slices an unrolled layer's
// stacked weights"). The other branch of that key, one parameter array per layer (MaxText's unscanned layout), measured
// after it was built and predicted before (calibration/data/h100-2026-12-07-llama7b-per-layer): scenario -1.2/-1.9% in
// step, -1.9/-0.3% in peak memory; replay +0.1/-0.3%, -0.3/-0.3%.
TEST(HloReplay, H100JaxStepsWithinTenPercent) {
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/h100.yaml", "--json"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 40u);
  for (const auto& row : rows) {
    EXPECT_LT(std::abs(row["error"].get<double>()), 0.10) << row["case"] << " " << row["field"];
    EXPECT_TRUE(row["pass"].get<bool>()) << row["case"] << " " << row["field"];
  }
}

// Two-GPU steps (one process, data parallel and sharded parameters over NVLink), replayed from their SPMD
// HLO on the calibrated H200 (four of the eight steps measured after the mechanisms they check were
// built). All sixteen checks within 10% since XLA's loop fusions are bounded by their output indices
// (docs/decisions.md, "XLA's loop fusions write at most so many indices a second"). The small data-parallel
// step (x2_dp_s1_none_scan) is still the furthest, 7% fast: the host's dispatch between steps (as long as on
// one GPU) is not in the replay, and it waits longer for its in-loop gradient all-reduces than the replay says
// (calibration/data/h200x2-2026-11-29-mechanisms/README.md). Pinned between -10% and -5% so that a change that
// moves it is noticed.
TEST(HloReplay, TwoGpuStepsWithinTenPercent) {
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/hlo-x2.yaml"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("16 checks: 16 pass, 0 outside tolerance"), std::string::npos) << r.out;
  double s1_error = 0;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);)
    if (l.find("x2_dp_s1_none_scan") != std::string::npos && l.find("step_time_s") != std::string::npos) {
      const auto pct = l.rfind('%');
      const auto start = l.rfind(' ', pct);
      s1_error = std::stod(l.substr(start + 1, pct - start - 1));
    }
  EXPECT_GT(s1_error, -10.0) << r.out;
  EXPECT_LT(s1_error, -5.0) << r.out;
}

// XLA's own programs for the published JAX runs, compiled for their GPU counts through JAX's mock GPU topology and
// replayed (scenarios/validation/hlo-at-scale.yaml): the JAX-Toolbox step within 10% (-7.2%); the three MaxText A3
// steps 13.7-15.0% fast, all by about the same share (what the 1-VM program misses per GPU is in every row, the
// scale-out loss from one VM to two and to sixteen is reproduced: docs/validation.md). Pinned so that a change that
// moves them is noticed: each MaxText replay between -17% and -11%, their spread under 2 points.
TEST(HloReplay, AtScaleProgramsPinned) {
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/hlo-at-scale.yaml", "--json"});
  ASSERT_EQ(r.code, 4) << r.out << r.err;
  const json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);
  double lo = 1, hi = -1;
  for (const auto& row : rows) {
    const double e = row["error"].get<double>();
    if (row["case"].get<std::string>().rfind("JAX-Toolbox", 0) == 0) {
      EXPECT_TRUE(row["pass"].get<bool>()) << row;
      continue;
    }
    EXPECT_GT(e, -0.17) << row;
    EXPECT_LT(e, -0.11) << row;
    lo = std::min(lo, e);
    hi = std::max(hi, e);
  }
  EXPECT_LT(hi - lo, 0.02);
}

// The public at-scale suite (docs/validation.md): which rows are within 10% today, pinned, so that a
// change that moves any of them is noticed, and the mean error may not grow. The misses are known and
// their candidate mechanisms named in docs/validation.md.
namespace {
// `racksim validate` of the at-scale suite, run once per test binary (two tests read it).
const json& at_scale_suite() {
  static const json rows = [] {
    const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/at_scale.yaml", "--json"});
    EXPECT_EQ(r.code, 4) << r.err;  // some rows are outside their tolerance
    return r.code == 4 ? json::parse(r.out) : json::array();
  }();
  return rows;
}
}  // namespace

// Which calibration each at-scale row runs, by one rule (docs/validation.md): the calibration of the row's own GPU where
// racksim ships one (the H100 rows `h100`; the H800 row the H100's, the same die), else the H200's carried over (the
// Blackwell rows); named in the file, not left to the preset's default. And the seed claims' Hopper-vs-Blackwell pairs
// keep both sides on the presets' cited figures: their H100 sides say `none` (no Blackwell calibration exists). Before
// 2026-12-06 three Qwen3 H100 rows kept the H200's when the others moved.
TEST(ScaleMechanisms, EachRowNamesItsGpusCalibration) {
  const std::string dir = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/at_scale";
  const std::map<std::string, std::string> rule = {{"h100-sxm", "h100"}, {"h800-sxm", "h100"},
                                                   {"gb200-nvl72", "h200"}, {"gb300-nvl72", "h200"}};
  int rows = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    const auto sc = sim::load_scenario(e.path().string());
    ASSERT_TRUE(rule.count(sc.system.preset)) << e.path() << ": " << sc.system.preset;
    EXPECT_EQ(sc.system.calibration_source, "scenario") << e.path();
    EXPECT_EQ(sc.system.calibration.value_or("none"), rule.at(sc.system.preset)) << e.path();
    ++rows;
  }
  EXPECT_EQ(rows, 44);
  const std::string seeds = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/seed_claims/";
  for (const char* h100_side : {"01-h100-llama70b-bf16.yaml", "09-h100-fp8.yaml"}) {
    const auto sc = sim::load_scenario(seeds + h100_side);
    EXPECT_EQ(sc.system.calibration_source, "none") << h100_side;
  }
}

TEST(ScaleMechanisms, AtScaleSuitePinned) {
  const json& rows = at_scale_suite();
  ASSERT_EQ(rows.size(), 44u);
  std::set<std::string> passing;
  double sum = 0;
  for (const auto& row : rows) {
    sum += std::fabs(row["error"].get<double>());
    if (row["pass"].get<bool>()) passing.insert(row["case"].get<std::string>());
  }
  const std::set<std::string> expected = {
      // +5.0% since Megatron-Core DDP's hooks on the host (calibration/data/h200-2026-12-05-megatron-ddp-host): a
      // gradient hook per parameter and backward, a pre-hook per module and forward under --overlap-param-gather; its
      // host-bound forward pays them (+12.1% before).
      "Megatron GPT 1.7B, 48 H100 (TP1 PP1 DP48)",
      "Megatron GPT 16B, 192 H100 (TP4 PP1 DP48)",
      "Megatron GPT 70B, 768 H100 (TP8 PP2 DP48)",
      "Megatron GPT 119B, 1536 H100 (TP8 PP4 DP48)",
      "Megatron GPT 177B, 2304 H100 (TP8 PP6 DP48)",
      "Megatron GPT 314B, 3072 H100 (TP8 PP8 DP48)",
      "Megatron GPT 462B, 6144 H100 (TP8 PP16 DP48)",
      // -5.1% and -7.6% (were +11.6% and +0.6%, neither fitting in 80 GB): the least Megatron block recompute that fits
      // racksim's memory model (training.recompute_num_layers 2 and 1; docs/decisions.md, "Block recompute").
      // (The two Llama 3 405B 8K rows, -5.7% and -8.2% under a block recompute and vp 2 chosen by rule, are +18.7% and
      // +22.6% since they run as the paper's sec. 3.3.2 says: no activation checkpointing at 8K, one layer per model
      // chunk (vp 8, the first chunk the embedding only), FSDP regathering per micro-batch; a source audit, 2026-12-07,
      // twenty-third stop.)
      // Back in (+9.5%, +5.9%, +4.7%; they were +12.6%, +10.3%, +10.1%) since flash attention is fitted to the kernels a
      // training step runs, at the power cap, on keys of 1K-128K (calibration/data/h200-2026-12-04-attention-train): its
      // backward levels off near 0.53 of peak from 16K keys on, where the curve fitted on keys up to 8K gave 0.61.
      // +9.7% (was +10.9%) since a wgrad that adds into the fp32 main gradient pays its epilogue (gpu.wgrad_accumulate_
      // serial_bytes, measured on an H100: calibration/data/h100-2026-12-06-wgrad-fp32-accumulate).
      "Qwen3-235B seq 16K forced balance, 256 H100 (TP4 CP1 PP8 VPP4 EP8)",
      "Qwen3-235B seq 32K forced balance, 256 H100 (TP4 CP2 PP8 VPP4 EP8)",
      "Qwen3-235B seq 64K forced balance, 256 H100 (TP4 CP4 PP8 VPP4 EP8)",
      "Qwen3-235B seq 128K forced balance, 256 H100 (TP4 CP8 PP8 VPP4 EP8)",
      // (Pax GPT-126M, a step-time row 9.9% slow on the H200's calibration carried over, is 10.9% slow on the H100's
      // own since 2026-12-06: its materialized attention's softmax runs as XLA row kernels, which the H100 measured at
      // 0.91 of the H200's rate (k 683 against 753 TB/s per byte a thread), and its GEMMs at a 1% lower ceiling.)
      // In since 2026-12-04 (later): XLA gathers FSDP weights array by array, each collective paying its ring latency
      // (MaxText's and Llama 3 70B's programs compiled for 8-512 GPUs; docs/decisions.md, "XLA gathers FSDP weights
      // array by array"): JAX-Toolbox 7B -10.5% -> -9.0%, Pax 5B BF16 -19.0% -> -9.0%, TE FP8 -18.2% -> -3.6%.
      "JAX-Toolbox MaxText Llama2-7B, 8 H100 (FSDP8)",
      // +9.3% (was +11.7%): MaxText's one-hot embedding and fp32 logits (docs/decisions.md, "MaxText's one-hot
      // embedding and fp32 logits").
      "MaxText Llama2-7B, 64 H100 (A3 8 VMs, FSDP8 x data 8)",
      "Pax GPT-5B, 256 H100 (FSDP256)",
      "Pax GPT-5B TE FP8, 256 H100 (FSDP256)",
      // (Qwen3 128K MXFP8 on GB200, -7.0%, is -18.8% since Blackwell's BF16 ceiling, and flash attention carried as a
      // ratio to it, took the sustained state FP8's had (2026-12-07, twenty-first stop): its step is 128K attention.)
      // In since then: +6.4% (was +10.0%; +11.7% before MXFP8's GEMMs at 0.951 of FP8's rate, the same stop).
      "Qwen3-235B MXFP8 offload, 256 GB200 (TP1 PP4 VPP6 EP64, HybridEP)",
      // +9.8% (was +10.0%) since forced balancing routes on random logits (training.moe.force_load_balancing): the
      // busiest of its 8 EP ranks receives x1.007 the mean by chance.
      "Qwen3-235B BF16, 256 GB200 (TP1 PP8 EP8, HybridEP)",
      // (The MaxText 16-VM row, once -0.2% by cancelling errors, is +19.7% since its scale-out loss follows XLA's
      // program: MaxTextA3StepsFollowXlasCompiledPrograms; what is left of the MaxText rows is the 1-VM step's miss.)
      // +8.0%: the embeddings' dense weight gradient and Megatron's fused loss as it runs (was +16.5%).
      "DeepSeek-V3 FP8, 2048 H800 (PP16 EP64 ZeRO-1; run average)",
      // (Qwen3-235B TP2 EP8 DP128 Megatron-FSDP, +9.8% until 2026-12-07, twenty-fourth stop, is +12.6% since a
      // data-parallel group's gathers and reductions share its one communicator, in issue order, as Megatron-FSDP
      // runs them without --create-all-gather-group.)
      // -1.3% (was -9.7%), -7.1% (was -25.3%) and +3.6% (was -21.5%) since Megatron-Core@1e057005's NVTX ranges, which
      // look up their caller's name on the host with profiling off (2025-05-16..06-09; training.megatron_nvtx_lookup,
      // measured A/B against @d98e8a64: calibration/data/h100-2026-12-05-megatron-nvtx-host).
      "Qwen3-235B, 256 H100 (TP2 PP8 VPP4 EP32, DeepEP)",
      "Qwen3-235B, 256 H100 (TP2 PP8 VPP4 EP32, DeepEP, 1F1B A2A overlap)",
      "Qwen3-235B, 256 H100 (TP4 PP8 VPP4 EP8, DeepEP)"};
  EXPECT_EQ(passing, expected);
  // What fp8 buys on the same layout, measured against predicted, within 5% (three pairs of the suite):
  // the absolute misses of these rows are their BF16 baselines'. While the wgrad ran in bf16 under fp8
  // (before 2026-12-02) the predicted gains were 7-15% short: 1.41 for 1.65, 1.24 for 1.43, 1.12 for 1.20.
  auto field = [&](const std::string& name, const char* key) {
    for (const auto& row : rows)
      if (row["case"] == name) return row[key].get<double>();
    ADD_FAILURE() << name;
    return 1.0;
  };
  struct Pair {
    std::string bf16, fp8;
    bool step_time;  // the rows give s/step (the speedup is bf16 / fp8), else tokens/s
  };
  for (const Pair& p : {Pair{"Pax GPT-175B, 256 H100 (FSDP256)", "Pax GPT-175B TE FP8, 256 H100 (FSDP256)", true},
                        Pair{"Pax GPT-5B, 256 H100 (FSDP256)", "Pax GPT-5B TE FP8, 256 H100 (FSDP256)", true},
                        Pair{"Mixtral 8x22B forced balance, 128 H100 (TP2 PP8 VPP7 EP8)",
                             "Mixtral 8x22B blockwise FP8, 128 H100 (TP2 PP8 VPP7 EP8)", false}}) {
    auto speedup = [&](const char* key) {
      const double b = field(p.bf16, key), f = field(p.fp8, key);
      return p.step_time ? b / f : f / b;
    };
    // Pax 5B: 0.941 since its one-hot embedding (2026-12-05, tenth: bf16 GEMMs in both precisions); 0.944 since XLA's
    // per-array FSDP gathers (2026-12-04, latest; 0.991 before them, 0.984 before the bf16
    // gradient reductions): six ring latencies per layer and pass (q, k, v, o, two GELU matrices) on a 256-rank ring
    // cost both precisions the same time, which is a larger share of the FP8
    // step (its gathers move fp8, half the bytes). Bound 6% for that row, 5% for the others.
    // Mixtral: 1.042 since the router padding's host wait comes before the permutation, where Megatron-Core's alltoall
    // dispatcher puts it for a dynamic output size (2026-12-06, eleventh stop); 1.050 with the wait at the exchange,
    // after the FP8 row took its script's router padding (whose removed Fp8Padding copies only the FP8 side had paid),
    // 1.044 before that.
    // Mixtral: 1.012 since the blockwise recipe's weight gradients run at their own measured rate (both operands
    // 1x128-scaled: 0.652 of per-tensor fp8, where the forward's is 0.854) and the fp32 main-gradient accumulate is
    // measured by kernel family (2026-12-06, fourteenth stop; calibration/data/h100-2026-12-06-wgrad-te-path); 1.042
    // before.
    const double bound = p.bf16 == "Pax GPT-5B, 256 H100 (FSDP256)" ? 0.06 : 0.05;
    EXPECT_NEAR(speedup("predicted") / speedup("measured"), 1.0, bound) << p.fp8;
  }
  // 16.6% today on 41 rows, 18 within 10% (XLA's bf16 gradient reductions, scheduler windows and per-array FSDP gathers,
  // read off programs compiled for 8-512 GPUs: docs/validation.md's history); 17.6% before, 16 within 10% (the scanned JAX forward as XLA compiles it: the Pax FSDP256 rows 0.6-2.2
  // points faster; the weights' recast in the backward, -0.004 points); 17.5% before (flash attention as a training step runs it, at the power cap, keys 1K-128K,
  // calibration/data/h200-2026-12-04-attention-train; the earlier sets timed the inference forward and accumulated
  // gradients in the backward: Qwen3 H100 16K..128K +13.9/+12.6/+10.3/+10.1% -> +11.9/+9.5/+5.9/+4.7%, Llama 3 405B
  // 131K +27.5% -> +22.4%, 128K GB200 +0.1% -> -6.5%, the 4K rows 0.1-1.7 points faster); CUDA_DEVICE_MAX_CONNECTIONS 32
  // under the EP overlap: Qwen3 H100 A2A overlap -29.5% -> -28.7%, GB300 +29.3% -> +26.9%; 17.8% before; 18.7% (the four Qwen3 H100 long-context rows without TP comm overlap, as their table's
  // publishing commit ran them, ModelZoo@b0b92ff: 16K/32K/64K/128K +20.4/+16.5/+9.6/+7.0% -> +14.1/+11.5/+6.5/+5.2%);
  // 19.1% before (the five Qwen3 H100 4K rows at the configuration published with their table,
  // ModelZoo@31c56861: no TP comm overlap, no router fusion, unfused cross entropy: EP32 -16.2% -> -10.9%, its A2A
  // overlap row -35.7% -> -30.3%, PP32 -38.0% -> -25.7%, TP4 PP8 EP8 -35.1% -> -30.6%; away: Megatron-FSDP +19.7% ->
  // +21.7%); 19.7% before (Transformer Engine's grouped-GEMM host time per local expert, measured on the H200's
  // host: Qwen3 H100 TP4 PP8 EP8 -45.1% -> -35.1%, 16K/32K/64K/128K +22.7/+18.4/+10.8/+7.7% -> +20.4/+16.5/+9.6/+7.0%,
  // GB200 BF16 +28.5% -> +17.6%, DeepSeek-V3 GB200 final +34.0% -> +32.5%, EP32 -16.6% -> -16.2%; away: Megatron-FSDP
  // +17.8% -> +19.7%); 20.3% before (four mechanisms together, 22.9% -> 20.3%: GPUDirect-TCPX at 0.667 of line
  // rate and XLA's gathers and gradient reductions on one stream: MaxText A3 2-16 VMs +38.3/+39.5/+29.7/+39.8% ->
  // +36.7/+32.2/+15.9/-0.3%, the 16-VM row within 10% only by two errors cancelling (docs/validation.md);
  // Megatron's NaN checks as host waits: 1.7B +22.1% -> +12.4%, 7.1B +23.9% -> +21.3%,
  // 70B -1.0% -> -1.9%, the passing set unchanged; DeepEP and HybridEP at their measured link rates, not NCCL's, on 20 / 32 SMs: Qwen3
  // H100 EP32 -19.7% -> -16.7%, 16K +26.9% -> +23.7%, GB300 +40.3% -> +35.7%, DeepSeek-V3 GB200 final +36.7% -> +34.5%;
  // away: Megatron-FSDP +17.2% -> +17.7%, 128K GB200 -0.6% -> -1.0%, EP32 A2A overlap -35.7% -> -35.9%, H800 +27.7% -> +28.5%); 22.9% before (JAX's output head in bf16 under fp8, as MaxText and Pax run it: Pax TE FP8 5B -15.0% ->
  // -13.7%, 175B -12.1% -> -11.9%, 22.93% -> 22.89%; before it, Qwen3's per-head q/k RMSNorm, every Qwen3 row 0.2-2.3 points slower; the fp8/mxfp8
  // GEMM ceiling carried to Blackwell by one source's sustained rates, 0.723 -> 0.611: DeepSeek-V3 GB200 final
  // +46.4% -> +36.7%, baseline +144.7% -> +130.1%, GB300 +52.1% -> +40.3%); 23.9% before
  // (the wgrad GEMM in fp8 under fp8-class training, and Megatron's output layer
  // in bf16: every fp8 row faster, +2.2 points, the two Pax TE FP8 rows out of 10% (+3.1% -> -12.1%, -2.7% ->
  // -15.0%), Mixtral FP8 +12.0% -> +23.7%, DeepSeek-V3 GB200 final +31.4% -> +46.4%, H800 +21.1% -> +27.7%, GB300
  // +35.3% -> +52.1%; the fp8-over-bf16 gains above now within 3% where they were 7-15% short);
  // 21.7% before (a collective's SMs held from its kernel's start, latency included,
  // -0.04 points, no row by more than 0.6: Megatron 7.1B +24.5% -> +23.9%, 70B -0.5% -> -1.0%; 21.7% before: a checkpointed MoE layer replays its combine: Qwen3 H100 16K..128K 0.8-2.9 points
  // closer, Megatron-FSDP +16.5% -> +16.7%, -0.2 points; 21.9% before: TE's bulk TP exchanges beside the dgrad and the wgrad, -0.001 points: 32B -20.2% -> -19.1%,
  // 70B -1.4% -> -0.5%, the passing set unchanged; TE's weight-cast cache, weights cast on the first micro-batch only, +0.4 points:
  // the fp8-class rows faster, Mixtral FP8 +9.0% -> +12.0%, out of 10% again; 21.5% before: Megatron-Core's MoE kernels, issue #12: bf16 dispatch under fp8, every expert's
  // cast in a grouped GEMM, fp8 chunk padding, the alltoall dispatcher's counts gather and probs all-to-all
  // -1.2 points: DeepSeek-V3 GB200 baseline +141.0% -> +117.3%, final +35.8% -> +28.0%, H800 +27.5% -> +18.8%,
  // Qwen3 GB300 +40.4% -> +34.3%, Mixtral FP8 +11.1% -> +9.0% (now within 10%); 22.7% before: the alltoall dispatcher's chunk sort -0.2 points; NCCL's p2p schedule for all-to-all inside a domain -0.1 points: DeepSeek-V3 GB200
  // baseline +150.8% -> +147.6%; blockwise FP8 at its measured rate -0.2; Blackwell: MXFP8 GEMMs on FP8's shape
  // curve and flash attention at the H200's measured ratio to the GEMM ceiling -1.9 points, the 128K GB200 row
  // +22.4% -> +0.1%; 25.1% before; the history of earlier moves is in docs/validation.md).
  // 11.29% on 44 rows since the Qwen3 H100 script comment "H100 config, 320 TFLOPS" became a row (2026-12-07,
  // seventeenth stop; ModelZoo@1ed4179f run_h100_235b.sh: the EP32 A2A-overlap layout with TP overlap, the fusions and
  // the router's CUDA graphs, on 2026 code without the NVTX lookup): -18.3%, racksim 12.39 s against 15.16 s.
  // 10.97% since Blackwell's BF16 ceiling moved with FP8's to the sustained state and MXFP8 and GB300's NVFP4 took
  // Transformer Engine's B300 ratios (2026-12-07, twenty-first stop; 11.27% before). 10.96% since the DeepSeek-V3 GB200
  // rows run without the NaN check and with router padding, as the reproduce guide's command (twenty-second stop).
  // 11.93% since the Llama 3 rows' FSDP regathers each module (layers, embedding, output layer) after every backward but
  // its last, as the paper's sec. 3.3.2 has it (training.fsdp_pipeline_gather: per_microbatch; +18.7/+22.6/+18.2%),
  // and Transformer Engine's softmax runs at its measured GB/s (Pax GPT-126M -21.3%). Before them:
  // 12.19% since a source audit of thirty rows (2026-12-07, twenty-third stop): the Llama 3 rows as the paper's sec.
  // 3.3.2 has them (8K without recompute, one layer per chunk: +25.3/+26.6/+20.5%, from -5.7/-8.2/+13.7%), Pax
  // GPT-126M's softmax as Transformer Engine's fused kernel, which its TE layers run, at its rate measured on an H100
  // (-20.1%, from +10.9%), DeepSeek-V3 H800's SwiGLU recompute (-1.2%). Inputs and a mechanism corrected toward their sources, every one away from the
  // measurement.
  EXPECT_LT(sum / rows.size(), 0.1250);  // was 0.1100 (10.96%); 0.1132 on 44 rows, 0.1116 on 43:
  // 11.13% on 43 rows since a bf16 wgrad through Transformer Engine runs in its NT layout at the measured time against
  // the TN products the shape curve is fitted on (gpu.bf16_wgrad_nt_time_ratio, 0.93-0.95 at 2-8K tokens; 2026-12-06,
  // fifteenth stop; calibration/data/h100-2026-12-06-wgrad-te-path runs 1-4): the BF16 Megatron rows 0.1-2 points
  // faster, toward their measurements where racksim was slow (32B, 70B, Llama 3 8K), away where it was fast (Mixtral
  // BF16 +18.1% -> +20.2%, 7.1B +15.4% -> +17.1%). Before it: 0.1090: 10.88% on 43 rows (2026-12-06, fourteenth stop: measured on H100s through
  // Transformer Engine's own cuBLASLt descriptors, calibration/data/h100-2026-12-06-wgrad-te-path: the fp32
  // main-gradient accumulate by kernel family, bf16 wgrads 3.90 bytes per weight element (2.585 before, through
  // PyTorch's call), per-tensor fp8 1.72, the blockwise recipe's 0; and the blockwise recipe's weight gradients, both
  // operands 1x128-scaled, at 0.652 of the per-tensor fp8 rate where the forward's runs at 0.854: Mixtral blockwise FP8
  // +17.3% -> +12.8%, BF16 rows 1.2 points slower (dropless +19.3% -> +18.1%), H800 +1.4% -> -0.7%; away: 32B -21.3% ->
  // -21.7%, 70B -4.7% -> -5.4%, Llama 3 8K -6.5/-9.0% -> -6.9/-9.4%);
  // 11.19% on 43 rows (2026-12-06, thirteenth stop, later: a weight-gradient GEMM
  // that adds into the fp32 main gradient, as Transformer Engine fuses it under Megatron, pays its epilogue's 2.585 bytes
  // per weight element at the HBM rate, measured on an H100; Hopper Megatron-mode rows 0.4-3.1 points slower: Mixtral
  // dropless +21.8% -> +19.3% and FP8 +20.4% -> +17.3% (both within 20%), Megatron 7.1B +18.4% -> +16.4%, Qwen3 16K
  // +10.9% -> +9.7% (within 10%); away: 32B -20.6% -> -21.3%, 70B -3.3% -> -4.7%, Llama 3 8K -5.7/-8.2% -> -6.5/-9.0%);
  // 11.75% on 43 rows (2026-12-06, thirteenth stop: the H100 and H800 rows on the
  // H100's own calibration, calibration/data/h100-2026-12-06-calibration, where they had the H200's carried over: the
  // too-fast Megatron, Mixtral, MaxText and Pax rows 0.3-0.7 points slower, Pax 126M +9.9% -> +10.9%);
  // 11.85% on 43 rows (2026-12-06, eleventh stop, latest: forced balancing as
  // Megatron-Core runs it, random router logits, so the busiest EP rank receives more than the mean by chance
  // (training.moe.force_load_balancing, hw::random_routing_busiest_load): the 17 forced-balance rows 0-1.5 points
  // slower, Mixtral forced balance +17.1% -> +15.6%, FP8 +22.1% -> +20.7%, Qwen3 GB200 BF16 +10.0% -> +9.8% (within
  // 10%), DeepSeek-V3 GB200 final +26.1% -> +25.4%);
  // 11.99% on 43 rows (2026-12-06, eleventh stop, later: Megatron's token dropping,
  // training.moe.capacity_factor and pad_to_capacity, and the Mixtral token-drop row, +17.4%, added; the router padding's
  // host wait before the permutation, Mixtral FP8 +23.0% -> +22.1%);
  // 11.88% on 42 rows (2026-12-06, eleventh stop: the Qwen3 GB200 MXFP8 row with
  // Megatron's fine-grained activation offloading, +11.8%, added (+12.1% after a review's fixes: the
  // kept groups under EP overlap, the D2H after the reader, a module's input as the group); the other rows unchanged);
  // 11.88% on 41 (2026-12-06, latest (2): Megatron's router padding on the Mixtral FP8 row,
  // its Fp8Padding copies gone, +22.4% -> +23.0%);
  // 11.87% (2026-12-06, latest: HybridEP@3f601f7's host wait after its dispatch kernel,
  // as the DeepSeek-V3 GB200 guide installs it, GB200 final +32.3% -> +28.3%; and MLA's fused rotary kernels, every
  // DeepSeek-V3 row: final -> +26.1%, baseline +61.7% -> +60.4%, H800 +4.4% -> +3.1%);
  // 12.08% (2026-12-06, later: DeepSeek-V3's group-limited routing counted in
  // DeepEP's and HybridEP's exchanges, a token reaching the GPUs of its 4 groups: GB200 final +29.6% -> +32.3%; the
  // H800 row's permutation rows by its node limit as its exchanges count them, +4.4% either way);
  // 12.01% (2026-12-06: the JAX rows' scripts' CUDA_DEVICE_MAX_CONNECTIONS=1 and
  // JAX-Toolbox's combine thresholds, read off the scripts: MaxText A3 +0.1-0.2 points, JAX-Toolbox -8.3% -> -9.96%);
  // 11.96% (2026-12-05, tenth, latest: the H100's TF32 ceiling measured, 0.632
  // of peak, the A3 rows' fp32 logits 0.4-0.6 points slower); 12.02% (2026-12-05, tenth, later: Pax's GPU GPT configs embed by a one-hot
  // matmul too, EMBEDDING_LOOKUP_STYLE 'matmul': 126M +7.2% -> +9.9%, 5B -9.6% -> -8.2%, 5B FP8 -4.5% -> -2.4%);
  // 12.04% (2026-12-05, tenth: MaxText's one-hot embedding and fp32 logits as its
  // A3 scripts and JAX-Toolbox's run script set them, the MaxText A3 rows +20.7/+20.1/+16.1/+11.7/+19.6% ->
  // +17.9/+17.7/+13.9/+9.7/+17.5%, JAX-Toolbox -9.0% -> -8.3%); 12.33% (2026-12-05, ninth, later: MLA's core attention at its measured rate
  // per FLOP, DeepSeek-V3 GB200 final +31.8% -> +29.6%, H800 +5.2% -> +4.4%); 12.40% (2026-12-05, ninth: the Llama 3 rows
  // under the least block recompute
  // that fits 80 GB, 8K on 8,192 / 16,384 H100 +11.6% / +0.6% -> -5.1% / -7.6%, 131K +22.4% -> +13.4%); 12.61%
  // (2026-12-05, eighth: DeepSeek-V3's MLA, group-limited router and
  // shared expert on the host, measured: the GB200 baseline +130.6% -> +61.7%, every other row unchanged);
  // 14.29% (2026-12-05, seventh: the schedule's per-chunk host work by paired
  // runs, PP32 -16.4% -> -15.3%); 14.33% (2026-12-05, sixth: Megatron-Core@1e057005's NVTX ranges on the
  // host, the five Qwen3 H100 4K rows at that code: EP32 -9.4% -> -1.3%, A2A overlap -25.3% -> -7.1%, PP32 -24.2% ->
  // -16.4%, TP4 PP8 -21.5% -> +3.6%, Megatron-FSDP unchanged); 15.60% before (2026-12-05, third: torch.distributed's host path per NCCL call;
                                          // 15.86% before: Megatron-Core DDP's gradient hooks and
                                          // --overlap-param-gather's pre-hooks on the host, measured on the H200's host;
                                          // 16.52% before: DeepEP's routing-map sync, the flex dispatchers' unpermutation
                                          // rows, the step's ends in Megatron-Core)
}

// The seed claims (issue #13): docs/seed_claims.md states each case's predicted speedup and whether it is in
// the claimed range; those must be what `racksim validate scenarios/seed_claims/suite.yaml` prints now (its
// table's six significant digits), in the summary table, the headline count and each claim's heading, so a
// change that moves a seed case fails here until the document says so.
namespace {
// |doc - predicted| within the rounding of a number printed to six significant digits.
bool same_printed(double doc, double predicted) {
  const double ulp = std::pow(10.0, std::floor(std::log10(std::fabs(predicted))) - 5);
  return std::fabs(doc - predicted) <= 0.5 * ulp + 1e-12;
}
json seed_suite() {
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/seed_claims/suite.yaml", "--json"});
  EXPECT_EQ(r.code, 4) << r.err;  // some cases are outside their range
  return json::parse(r.out);
}
}  // namespace

TEST(SeedClaims, DocumentStatesTheSuitesPredictions) {
  const json rows = seed_suite();
  ASSERT_EQ(rows.size(), 10u);
  std::ifstream in(std::string(RACKSIM_SOURCE_DIR) + "/docs/seed_claims.md");
  ASSERT_TRUE(in) << "docs/seed_claims.md missing";
  std::map<int, std::pair<double, bool>> table, heading;
  int headline = -1;
  std::string line;
  const std::regex table_row(R"(^\| (\d+) \| [^|]+ \| ([0-9.]+) \| \[[^\]]+\] \| (yes|no) \|)");
  const std::regex heading_row(R"(^## (\d+)\. .*: ([0-9.]+)x? \((pass|fail)\))");
  const std::regex headline_row(R"(\*\*(\d+) of 10 in range\*\*)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, table_row)) table[std::stoi(m[1])] = {std::stod(m[2]), m[3] == "yes"};
    else if (std::regex_search(line, m, heading_row)) heading[std::stoi(m[1])] = {std::stod(m[2]), m[3] == "pass"};
    if (headline < 0 && std::regex_search(line, m, headline_row)) headline = std::stoi(m[1]);
  }
  int passing = 0;
  for (const auto& row : rows) {
    const std::string name = row["case"].get<std::string>();
    const int k = std::stoi(name.substr(0, name.find(' ')));
    const double predicted = row["predicted"].get<double>();
    const bool pass = row["pass"].get<bool>();
    passing += pass;
    for (const auto* where : {&table, &heading}) {
      const char* what = where == &table ? "table" : "heading";
      ASSERT_TRUE(where->count(k)) << "docs/seed_claims.md has no " << what << " entry for claim " << k;
      EXPECT_TRUE(same_printed(where->at(k).first, predicted))
          << what << ", claim " << k << ": doc " << where->at(k).first << ", suite " << predicted;
      EXPECT_EQ(where->at(k).second, pass) << what << ", claim " << k;
    }
  }
  EXPECT_EQ(headline, passing) << "the headline's count of claims in range";
}

// Weak scaling (claim 10): the same per-GPU work on 8 racks as on one, with every FSDP ring 8x longer and
// crossing the NICs, is never faster. racksim gave 1.0045 before a collective's SMs were held from its
// kernel's start (sim/engine/replay.cpp begin_collective): the 512-rank ring's long latency phase then cost
// the GEMMs beside it nothing.
TEST(SeedClaims, WeakScalingEfficiencyIsAtMostOne) {
  const json rows = seed_suite();
  bool found = false;
  for (const auto& row : rows)
    if (row["case"].get<std::string>().rfind("10 ", 0) == 0) {
      found = true;
      EXPECT_LE(row["predicted"].get<double>(), 1.0);
    }
  EXPECT_TRUE(found);
}

// The scenario builder's JAX mode against XLA's own program for the same job: MaxText's Llama 2 7B A3 rows
// (8, 16 and 128 H100: FSDP 8 in a VM, data parallel across VMs over GPUDirect-TCPX) compiled for those GPU
// counts through JAX's mock GPU topology (calibration/data/h200-2026-12-04-mock-compile) and replayed on the
// same system. Three mechanisms read off those programs make the builder follow them: the weight gradients
// reduced in bf16 (it reduced them in fp32), XLA's scheduler waiting for each gradient collective five kernels
// after its start (it let them overlap as much compute as they needed), and the weights gathered array by array. Without them the builder's
// step grew by 0.03 s from one VM to two where the replay grows 0.19 s (measured: 0.24 s), and by 0.70 s to
// sixteen where the replay grows 0.38 s (measured 0.45 s). Since the one-hot embedding (2026-12-05, tenth stop), which
// the programs compile to two cuBLAS GEMMs, the builder has it too. Bound: each step within 6% of the replay (today
// -3.1, -1.5, -2.3%; -3.9, -2.0, -2.5% before the one-hot embedding), each growth over one VM within 0.05 s of the
// replay's.
TEST(ScaleMechanisms, MaxTextA3StepsFollowXlasCompiledPrograms) {
  const std::string dir = std::string(RACKSIM_SOURCE_DIR) + "/calibration/data/h200-2026-12-04-mock-compile/";
  const std::string scen = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/at_scale/maxtext-llama2-7b-";
  const std::vector<std::string> a3 = {"system.calibration=h200",
                                       "system.overrides={scale_out.nic_bandwidth: 100 Gb/s, scale_out.nics_per_gpu: 1, "
                                       "scale_out.nic_efficiency: 0.667}"};
  struct Row {
    const char* program;
    int gpus;
  };
  double replay0 = 0, scenario0 = 0;
  for (const Row& row : {Row{"mt_1vm", 8}, Row{"mt_2vm", 16}, Row{"mt_16vm", 128}}) {
    const double replay =
        sim::run_hlo(dir + row.program + ".hlo.txt.gz", "h100-sxm", row.gpus, a3).report["step_time_s"].get<double>();
    // The programs were compiled with MaxText's one-hot embedding (mock_compile.py --iota-embed) and a bf16 logits dot:
    // the rows' fp32 logits (logits_dot_in_fp32 at their commit) are set aside for the like-for-like comparison.
    const double scenario = sim::simulate(sim::load_scenario(scen + std::to_string(row.gpus) + "xh100.yaml",
                                                             sim::parse_set_overrides({"training.logits_fp32=false"})))
                                .report["step_time_s"]
                                .get<double>();
    std::cout << row.program << ": scenario " << scenario << " s, replay of XLA's program " << replay << " s\n";
    EXPECT_LT(std::abs(scenario / replay - 1), 0.06) << row.program;
    if (row.gpus == 8) {
      replay0 = replay;
      scenario0 = scenario;
    } else {
      EXPECT_NEAR(scenario - scenario0, replay - replay0, 0.05) << row.program << ": the step's growth over one VM";
    }
  }
}

// What any schedule of the A3 program's collectives can cost (docs/validation.md, "The one-node JAX rows"): XLA's own
// 1-VM program rewritten by calibration/jax/serialize_collectives.py so that each of its 286 collectives overlaps
// nothing (its start moved to just before its done) replays 20-60 ms slower than as compiled (36 ms on 2026-12-06),
// under a quarter of the 0.20 s by which the compiled program misses the measured 1.454 s step: the 1-VM row's miss
// is in the kernels' time, not in how XLA's scheduler (memory-pressured or not) placed the collectives.
TEST(ScaleMechanisms, NoScheduleOfTheA3CollectivesExplainsTheOneVmMiss) {
  namespace fs = std::filesystem;
  const std::string src = std::string(RACKSIM_SOURCE_DIR);
  const std::string program = src + "/calibration/data/h200-2026-12-04-mock-compile/mt_1vm.hlo.txt.gz";
  const fs::path serialized =
      fs::temp_directory_path() / ("racksim_mt_1vm_serialized_" + std::to_string(::getpid()) + ".hlo.txt.gz");
  const std::string cmd = "python3 " + src + "/calibration/jax/serialize_collectives.py " + program + " " +
                          serialized.string() + " all-gather,reduce-scatter,all-reduce > " + serialized.string() + ".log";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_NE(racksim::testing::read_file(serialized.string() + ".log").find("moved 286 starts"), std::string::npos);
  const std::vector<std::string> a3 = {"system.calibration=h200",
                                       "system.overrides={scale_out.nic_bandwidth: 100 Gb/s, scale_out.nics_per_gpu: 1, "
                                       "scale_out.nic_efficiency: 0.667}"};
  const double compiled = sim::run_hlo(program, "h100-sxm", 8, a3).report["step_time_s"].get<double>();
  const double no_overlap = sim::run_hlo(serialized.string(), "h100-sxm", 8, a3).report["step_time_s"].get<double>();
  fs::remove(serialized);
  fs::remove(serialized.string() + ".log");
  const double measured = 1.454;  // derive_measured.py: 492 TFLOP/s/chip with MaxText's counter at efb6d9e4
  EXPECT_GT(no_overlap - compiled, 0.02);
  EXPECT_LT(no_overlap - compiled, 0.06);
  EXPECT_LT(no_overlap - compiled, 0.25 * (measured - compiled));
}

// One MoE layer on 8 H100 (TP 1, EP 8, 4,096 tokens, BF16, forced balance) against Megatron-LM's MoE
// performance baselines (shared reference at_scale_measurements.md §1b: Megatron-LM@d98e8a64
// tests/functional_tests/test_cases/common/moe_perf/baseline.json, mean of 20 iterations): the layer's
// forward and backward, router to combine, with the alltoall and the DeepEP dispatcher. racksim's MoE
// layer (grouped GEMMs on the calibrated shape curve, permutation, exchanges) is within 30% on each, and
// slow where it misses (+26% at most, the DeepEP backward), while the whole MoE steps are fast: the at-scale MoE
// misses are therefore not the layer's own kernels or exchanges (docs/validation.md). The DeepSeek proxy routes as
// the CI's does, each token within 4 of 8 expert groups (moe_router_num_groups 8, group_topk 4, test_cases.py), a
// group being one GPU's 4 experts: DeepEP's bytes and its unpermutation's rows count the 3.85 GPUs a token reaches
// there (hw::expected_expert_reach); with uniform top-8 (5.64 GPUs) the case needed 38% (before 2026-12-06).
TEST(ScaleMechanisms, MoeLayerMatchesMegatronsSingleLayerBaselines) {
  struct Row {
    const char* name;
    const char* model;
    const char* dispatcher;
    double fwd_ms, bwd_ms;
  };
  const char* deepseek = "{layers: 1, hidden: 7168, ffn_hidden: 18432, heads: 56, kv_heads: 56, vocab: 128, moe: "
                         "{experts: 32, top_k: 8, expert_ffn_hidden: 2048, shared_experts: 1, router_groups: 8, "
                         "router_group_top_k: 4}}";
  const char* mixtral = "{layers: 1, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 128, moe: "
                        "{experts: 8, top_k: 2, expert_ffn_hidden: 14336}}";
  for (const Row& row : {Row{"deepseek a2a", deepseek, "alltoall", 7.12, 10.48},
                         Row{"deepseek deepep", deepseek, "deepep", 5.68, 9.06},
                         Row{"mixtral a2a", mixtral, "alltoall", 4.33, 7.68},
                         Row{"mixtral deepep", mixtral, "deepep", 4.64, 7.85}}) {
    const auto r = sim::simulate(load(std::string("system: {preset: h100-sxm, gpus: 8, calibration: h200}\nmodel: ") +
                                      row.model +
                                      "\ntraining: {seq_len: 4096, global_batch: 8, micro_batch: 1, "
                                      "parallelism: {ep: 8}, moe: {dispatcher: " + row.dispatcher +
                                      ", router_fusion: true, permute_fusion: true}}\n"));  // the CI runs fused
    double window[2][2] = {{1e300, 0}, {1e300, 0}};  // [forward, backward][start, end]
    for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
      const auto& o = r.graph.ops[i];
      const std::string name = r.graph.op_name(static_cast<OpId>(i));
      const bool moe = name.rfind("mb0.L0.", 0) == 0 &&
                       (name.find("router") != std::string::npos || name.find("dispatch") != std::string::npos ||
                        name.find("experts") != std::string::npos || name.find("combine") != std::string::npos ||
                        name.find("shared") != std::string::npos || name.find("mlp_out") != std::string::npos);
      if (!moe || (o.phase != Phase::forward && o.phase != Phase::backward)) continue;
      auto& w = window[o.phase == Phase::backward];
      w[0] = std::min(w[0], r.replay.ops[i].start_s);
      w[1] = std::max(w[1], r.replay.ops[i].end_s);
    }
    const double fwd_ms = (window[0][1] - window[0][0]) * 1e3, bwd_ms = (window[1][1] - window[1][0]) * 1e3;
    std::cout << row.name << ": forward " << fwd_ms << " ms (measured " << row.fwd_ms << "), backward " << bwd_ms
              << " ms (measured " << row.bwd_ms << ")\n";
    EXPECT_NEAR(fwd_ms / row.fwd_ms, 1.0, 0.30) << row.name;
    EXPECT_NEAR(bwd_ms / row.bwd_ms, 1.0, 0.30) << row.name;
  }
}

// What the documents say about the at-scale suite is what it prints now: every row's error in
// docs/validation.md's table (report.py's output, one decimal), its summary line, the README's headline
// (rows within 10%, mean |error|), the README's figure for the published DeepSeek-V3 GB200 run, and the
// README's step times of the two shipped at-scale what-ifs. A change that moves a row fails here until
// the documents say so (the README once kept a stale "46% fast" after the row had moved to +36.7%).
namespace {
std::string read_doc(const std::string& relative) {
  std::ifstream in(std::string(RACKSIM_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in) << relative;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::string flat(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');  // sentences wrap across lines
  return s;
}
// The step time of scenarios/<scenario>, with `--set` overrides.
double run_step_s(const std::string& scenario, const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {"run", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/" + scenario, "--json"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  const auto r = run_cli(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out)["step_time_s"].get<double>();
}
}  // namespace

// The routing-imbalance mechanism (training.expert_imbalance X) against the published forced/dropless pairs of the
// Qwen3 H100 long-context runs (shared reference at_scale_measurements.md sec. 1b: 295/237, 335/277, 368/320, 389/357
// TFLOP/s): one X reproduces all four ratios, as attention dilutes the experts' share with the sequence (X is fitted
// to these pairs, 1.58-1.63 each; what is checked is that one value serves all four). Not used by any suite row.
TEST(ScaleMechanisms, OneImbalanceReproducesTheFourDroplessRatios) {
  const std::vector<std::pair<std::string, double>> pairs = {{"qwen3-235b-h100-16k-cp1.yaml", 237.0 / 295},
                                                             {"qwen3-235b-h100-32k-cp2.yaml", 277.0 / 335},
                                                             {"qwen3-235b-h100-64k-cp4.yaml", 320.0 / 368},
                                                             {"qwen3-235b-h100-128k-cp8.yaml", 357.0 / 389}};
  for (const auto& [file, measured] : pairs) {
    const std::string scenario = "validation/at_scale/" + file;
    const double forced = run_step_s(scenario);
    const double dropless =
        run_step_s(scenario, {"training.moe.force_load_balancing=false", "training.expert_imbalance=1.61"});
    EXPECT_NEAR(forced / dropless, measured, 0.01) << file;
  }
}

TEST(ScaleMechanisms, DocumentsStateTheAtScaleSuitesErrors) {
  const json& rows = at_scale_suite();
  ASSERT_FALSE(rows.empty());
  const std::string validation_md = read_doc("docs/validation.md");
  std::map<std::string, double> doc_error_pct;
  {
    std::istringstream in(validation_md);
    const std::regex table_row(R"(^\| ([^|]+) \| [^|]+ \| [^|]+ \| ([+-][0-9.]+)% \|)");
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, table_row)) doc_error_pct.emplace(m[1], std::stod(m[2]));
  }
  double sum_pct = 0;
  int within10 = 0, within20 = 0;
  double deepseek_final_pct = 0;
  for (const auto& row : rows) {
    const std::string name = row["case"].get<std::string>();
    const double pct = 100 * row["error"].get<double>();
    sum_pct += std::fabs(pct);
    within10 += row["pass"].get<bool>();
    within20 += std::fabs(pct) <= 20;
    if (name == "DeepSeek-V3 MXFP8 final, 256 GB200 (HybridEP)") deepseek_final_pct = pct;
    ASSERT_TRUE(doc_error_pct.count(name)) << "docs/validation.md has no table row for " << name;
    EXPECT_NEAR(doc_error_pct.at(name), pct, 0.051) << name;
  }
  const double mean_pct = sum_pct / rows.size();
  std::smatch m;
  const std::string validation = flat(validation_md);
  ASSERT_TRUE(std::regex_search(validation, m,
                                std::regex(R"((\d+) checks: (\d+) within 10%, (\d+) within 20%, mean \|error\| ([0-9.]+)%)")));
  EXPECT_EQ(std::stoul(m[1]), rows.size());
  EXPECT_EQ(std::stoi(m[2]), within10);
  EXPECT_EQ(std::stoi(m[3]), within20);
  EXPECT_NEAR(std::stod(m[4]), mean_pct, 0.051);

  const std::string readme = flat(read_doc("README.md"));
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(within 10% on (\d+) of (\d+) rows, mean \|error\| ([0-9.]+)%)")));
  EXPECT_EQ(std::stoi(m[1]), within10);
  EXPECT_EQ(std::stoul(m[2]), rows.size());
  EXPECT_NEAR(std::stod(m[3]), mean_pct, 0.051);
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(on the nearest one .*? racksim is ([0-9.]+)% fast)")));
  EXPECT_NEAR(std::stod(m[1]), deepseek_final_pct, 0.5);
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(`llama3-405b-h100\.yaml` \([^)]*\): ([0-9.]+) s per step)")));
  EXPECT_NEAR(std::stod(m[1]), run_step_s("llama3-405b-h100.yaml"), 0.0051);
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(`deepseek-v3-gb200\.yaml` \([^)]*\): ([0-9.]+) s per step)")));
  EXPECT_NEAR(std::stod(m[1]), run_step_s("deepseek-v3-gb200.yaml"), 0.0051);
}

// The README's command list states each validation suite's pass count ("N/M within 10%") and shows the
// quickstart's report; both are checked against what the program prints now (the at-scale count once read
// 11/41 after the suite had reached 13/41, and the quickstart block drifted by a rounding digit).
TEST(ScaleMechanisms, ReadmeStatesEachSuitesPassCountAndTheQuickstartReport) {
  const std::string readme = read_doc("README.md");
  const std::regex suite_line(R"(racksim validate (scenarios/\S+\.yaml) +#[^\n]*?(\d+)/(\d+) within 10%)");
  int suites = 0;
  for (std::sregex_iterator it(readme.begin(), readme.end(), suite_line), end; it != end; ++it) {
    const std::string suite = (*it)[1];
    json rows;
    if (suite == "scenarios/validation/at_scale.yaml") {
      rows = at_scale_suite();
    } else {
      const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/" + suite, "--json"});
      ASSERT_TRUE(r.code == 0 || r.code == 4) << suite << ": " << r.err;
      rows = json::parse(r.out);
    }
    int passing = 0;
    for (const auto& row : rows) passing += row["pass"].get<bool>();
    EXPECT_EQ(std::stoi((*it)[2]), passing) << suite;
    EXPECT_EQ(std::stoul((*it)[3]), rows.size()) << suite;
    ++suites;
  }
  EXPECT_GE(suites, 4);  // hlo, hlo-x2, h200x2, at_scale

  // The block after "It ends with the prediction for `scenarios/quickstart.yaml`": its first lines are `run`'s.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(```\n(scenario +llama3-8b[^`]*?)```)")));
  const std::string shown = m[1];
  const auto r = run_cli({"run", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, shown.size()), shown);
}

// The DeepSeek-V3 GB200 optimization ladder (scenarios/validation/at_scale/ladder/: ladder.json, ladder.py;
// docs/validation.md, "The DeepSeek-V3 GB200 optimization ladder"): 13 published rungs from 494 to 970 TFLOP/s,
// of which racksim can express five by scenario keys. Diagnostics, not validation targets: this pins each
// expressible rung's predicted gain (tokens/s over the rung before; the FLOP counter is the same on every rung,
// so it is the TFLOP/s ratio) within 0.005, and whether racksim credits it less or more than measured, so a
// mechanism that moves a rung shows up here. It also checks that each rung's scenario changes only what the
// rung changes.
TEST(ScaleMechanisms, DeepSeekV3Gb200LadderPinned) {
  const std::string dir = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/at_scale/ladder/";
  std::ifstream in(dir + "ladder.json");
  ASSERT_TRUE(in) << dir << "ladder.json";
  const json ladder = json::parse(in);
  struct Pin {
    double gain;           // predicted, over the rung before
    bool under;            // racksim's gain below the measured one
    std::set<std::string> changes;  // training keys that differ from the rung before
  };
  // Rung 2 router fusion: removes the routing's and DeepSeek-V3's group-limited router's host time (4.4 ms per MoE
  // layer pass on Grace, measured unfused), all on the critical path of racksim's host-bound baseline, where the run
  // gained 2% (over-credited since 2026-12-05: before DeepSeek-V3's router was measured it hid behind GPU work, 1.000).
  // Rung 3 DeepEP: its
  // exchanges at the doc's EP32 rates (257.6 GB/s) are slower than NCCL's all-to-all, and the host time it saves
  // is not on racksim's critical path, and its host waits for the notify's counts inside the dispatch call. Rung 4: the MLA chain's recompute, GPU time only. Rung 5: partial CUDA
  // graphs, whose host time racksim does not see as exposed (the eager MoE ops carry it; and DDP's hooks fire for the
  // captured modules too, whose time now goes with the eager ops: 0.987 -> 0.986 since 2026-12-05; 0.989 -> 0.994 with the
  // group-limited routing, 2026-12-06). Rung 10 HybridEP:
  // 2.6x DeepEP's rate, against the tuned DeepEP of rungs 6-9 in the run (their rates are not published). Since
  // DeepSeek-V3's group-limited routing is counted (2026-12-06) both libraries send a token to the 6.60 GPUs of its 4
  // groups it reaches, not 7.27: rung 3 0.880 -> 0.909, rung 10 1.345 -> 1.321. Since MLA's fused rotary kernels
  // (2026-12-06, latest: GPU time on every rung, which weighs more where the host is not the bound) rungs 2-5 1.321,
  // 0.909, 1.018, 0.994 -> 1.320, 0.901, 1.025, 0.990; and HybridEP@3f601f7's host wait after its dispatch kernel
  // (training.moe.hybridep_dispatch_sync, the final row's) rung 10 -> 1.277 (measured 1.137). Since every rung routes as
  // the doc's forced balancing does, on random logits (training.moe.force_load_balancing, 2026-12-06, eleventh stop: the
  // busiest of 32 ranks x1.017 the mean), rungs 3, 4, 5, 10 0.901, 1.025, 0.990, 1.277 -> 0.896, 1.026, 0.989, 1.278.
  // Since MXFP8's GEMMs run at 0.951 of per-tensor FP8's (2026-12-07, twenty-first stop: Transformer Engine's B300
  // measurement; GPU time on every rung, which weighs more where the host is not the bound) rungs 2, 3, 5, 10 1.320,
  // 0.896, 0.989, 1.278 -> 1.318, 0.886, 0.987, 1.273.
  // Since Blackwell's BF16 ceiling took the sustained state (the same stop, later) rungs 2, 3, 4, 5, 10 1.318, 0.886,
  // 1.026, 0.987, 1.273 -> 1.311, 0.869, 1.025, 0.986, 1.264.
  // Since every rung runs without the NaN check and with the router's padding for quantization, as the reproduce guide's
  // command (--no-check-for-nan-in-loss-and-grad, --moe-router-padding-for-quantization; 2026-12-07, twenty-second stop:
  // one host wait per step fewer; the AlltoAll rungs' expert splits padded by the router, not by TE's Fp8Padding copy)
  // rungs 2, 3, 4, 10 -> 1.291, 0.894, 1.023, 1.266.
  const std::map<int, Pin> pins = {{2, {1.291, false, {"moe"}}},
                                   {3, {0.894, true, {"moe"}}},
                                   {4, {1.023, true, {"recompute"}}},
                                   {5, {0.986, true, {"cuda_graphs", "cuda_graph_scope"}}},
                                   {10, {1.266, false, {"moe"}}}};
  double prev_tps = 0, prev_tflops = 0, first_tps = 0;
  json prev_scenario;
  int expressible = 0;
  for (const auto& rung : ladder["rungs"]) {
    const int n = rung["rung"].get<int>();
    const double tflops = rung["tflops"].get<double>();
    if (!rung["scenario"].is_null()) {
      const auto r = run_cli({"run", dir + rung["scenario"].get<std::string>(), "--json"});
      ASSERT_EQ(r.code, 0) << r.err;
      const json rep = json::parse(r.out);
      const double tps = rep["tokens_per_s_per_gpu"].get<double>();
      const json& sc = rep["scenario"];
      if (n == 0) {
        first_tps = tps;
      } else {
        ++expressible;
        ASSERT_TRUE(pins.count(n)) << "rung " << n << " has a scenario but no pin";
        const Pin& p = pins.at(n);
        const double gain = tps / prev_tps, measured = tflops / prev_tflops;
        EXPECT_NEAR(gain, p.gain, 0.005) << "rung " << n << " " << rung["step"];
        EXPECT_EQ(gain < measured, p.under) << "rung " << n << ": predicted " << gain << ", measured " << measured;
        EXPECT_EQ(sc["system"], prev_scenario["system"]) << "rung " << n;
        EXPECT_EQ(sc["model"], prev_scenario["model"]) << "rung " << n;
        std::set<std::string> changed;
        for (const auto& [key, value] : sc["training"].items())
          if (!prev_scenario["training"].contains(key) || prev_scenario["training"][key] != value) changed.insert(key);
        for (const auto& [key, value] : prev_scenario["training"].items())
          if (!sc["training"].contains(key)) changed.insert(key);
        EXPECT_EQ(changed, p.changes) << "rung " << n;
      }
      prev_tps = tps;
      prev_scenario = sc;
    }
    prev_tflops = tflops;
  }
  EXPECT_EQ(expressible, static_cast<int>(pins.size()));
  // The whole ladder: 1.962x measured, racksim 1.474x (1.458x before the NaN check and the router's padding were set as
  // the guide's command sets them, 2026-12-07, twenty-second stop; 1.504x before Blackwell's BF16 ceiling took the sustained state,
  // 2026-12-07, later; 1.534x before MXFP8's GEMMs ran at 0.951 of FP8's rate, 2026-12-07;
  // 1.541x before the forced balancing's random routing; 1.605x before HybridEP@3f601f7's dispatch wait and MLA's
  // rotary kernels, 2026-12-06, latest; 1.572x before DeepSeek-V3's group-limited routing was counted,
  // 2026-12-06; 1.599x before MLA's core attention ran at its measured rate per
  // FLOP, 2026-12-05, ninth stop: the GPU-bound final row slower, the host-bound baseline not; 1.121x before DeepSeek-V3's
  // own host work was measured, 2026-12-05, eighth stop; 1.128x before 2026-12-05, when DeepEP's and HybridEP's
  // unpermutation came to write a row per GPU a token reaches).
  EXPECT_NEAR(prev_tps / first_tps, 1.474, 0.005);
  EXPECT_NEAR(prev_tflops / ladder["rungs"][0]["tflops"].get<double>(), 1.962, 0.001);
}
