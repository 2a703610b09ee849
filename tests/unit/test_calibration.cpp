// Calibration (hardware_models/calibration.h, docs/calibration.md): the committed H200 file is
// what a re-fit of the committed measurements writes; its effect on a prediction; the transfer
// rule; strict loading; the nccl-tests importer. The fitted models against every measured row are
// in tests/calibration/test_calibration_accuracy.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "calibration/fit/calibration_fit.h"
#include "calibration/fit/nccl_tests.h"
#include "hardware_models/calibration.h"
#include "workloads/graph_builder.h"
#include "workloads/hlo/hlo_cost.h"
#include "hardware_models/collectives.h"
#include "hardware_models/compute_model.h"
#include "hardware_models/topology.h"
#include "hardware_models/system_preset.h"
#include "sim/cli/cli.h"
#include "input/diagnostics.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "tests/unit/cli_util.h"
#include "tests/unit/preset_util.h"

using namespace racksim;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = RACKSIM_SOURCE_DIR;
const std::string kBench = kSrc + "/calibration/data/h200-2026-11-29";
const std::string kGemm = kSrc + "/calibration/data/h200-2026-11-29-gemm";
const std::string kPair = kSrc + "/calibration/data/h200x2-2026-11-29";  // 2 GPUs: NCCL, contention
const std::string kXla = kSrc + "/calibration/data/h200-2026-11-29-xla";   // XLA kernels and dispatch
const std::string kNoCb = kSrc + "/calibration/data/h200-2026-11-29-nocb";  // XLA without command buffers
const std::string kGap = kSrc + "/calibration/data/h200-2026-12-03-kernel-gap";  // eager vs graph kernel boundaries
const std::string kAttn = kSrc + "/calibration/data/h200-2026-12-04-attention-train";  // fused attention, 1K-128K keys, at the power cap
const std::string kLoops = kSrc + "/calibration/data/h200-2026-12-04-loop-fusions";  // XLA loop fusions: fills, element-wise
const std::string kCommitted = kSrc + "/hardware_models/calibrated/h200.yaml";

std::string slurp(const std::string& path) { return racksim::testing::read_file(path); }

std::shared_ptr<const hw::Calibration> committed() {
  static auto c = hw::load_calibration_file(kCommitted);
  return c;
}

// All diagnostics of loading `text` as a calibration file.
std::string load_errors(const std::string& text) {
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  if (auto root = input::load_yaml_text(text, "cal.yaml", ctx)) hw::parse_calibration(*root);
  std::string all;
  for (const auto& d : diag.list()) all += d.format() + "\n";
  return all;
}

hw::SystemSpec preset(const std::string& name) { return racksim::testing::shipped_preset(name); }

}  // namespace

// The committed file is exactly what `racksim calibrate fit` writes from the committed data.
TEST(CalibFit, RefitReproducesCommittedFileByteForByte) {
  calib::FitOptions opt;
  opt.from_dirs = {kBench, kGemm, kPair, kXla, kNoCb, kAttn, kGap, kLoops};
  opt.base_preset = "h200-sxm";
  opt.xla_kernel_cost = calib::hlo_kernel_cost();
  opt.xla_program = calib::hlo_program_host_work();
  const std::string text = hw::write_calibration_yaml(calib::fit_calibration(opt));
  EXPECT_EQ(text, slurp(kCommitted)) << "re-fit differs from hardware_models/calibrated/h200.yaml; run: racksim "
                                        "calibrate fit --from calibration/data/h200-2026-11-29 --from "
                                        "calibration/data/h200-2026-11-29-gemm --from calibration/data/h200x2-2026-11-29 --from "
                                        "calibration/data/h200-2026-11-29-xla --from calibration/data/h200-2026-11-29-nocb --from "
                                        "calibration/data/h200-2026-12-04-attention-train --from "
                                        "calibration/data/h200-2026-12-03-kernel-gap --from "
                                        "calibration/data/h200-2026-12-04-loop-fusions --base h200-sxm --out "
                                        "hardware_models/calibrated/h200.yaml";
  // The order of --from does not matter.
  opt.from_dirs = {kLoops, kGap, kAttn, kNoCb, kXla, kPair, kGemm, kBench};
  EXPECT_EQ(hw::write_calibration_yaml(calib::fit_calibration(opt)), text);
}

// The H100's calibration, taken by calibration/bench/calibrate_one_gpu.sh in two device calls on one card: single-GPU
// inputs only (no NCCL fits, no collective beside a GEMM), so a re-fit of the same folders writes the same file.
TEST(CalibFit, RefitReproducesTheH100File) {
  const std::string d = kSrc + "/calibration/data/h100-2026-12-06-calibration/";
  calib::FitOptions opt;
  for (const char* part : {"attention", "bench", "gemm", "kernel-gap", "loops", "nocb", "xla"}) opt.from_dirs.push_back(d + part);
  opt.base_preset = "h100-sxm";
  opt.xla_kernel_cost = calib::hlo_kernel_cost();
  opt.xla_program = calib::hlo_program_host_work();
  const std::string text = hw::write_calibration_yaml(calib::fit_calibration(opt));
  EXPECT_EQ(text, slurp(kSrc + "/hardware_models/calibrated/h100.yaml"))
      << "re-fit differs from hardware_models/calibrated/h100.yaml; run the fitted_by line of that file";
  const auto c = hw::load_calibration_file(kSrc + "/hardware_models/calibrated/h100.yaml");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->base_preset, "h100-sxm");
  EXPECT_TRUE(c->nccl.empty());  // one GPU: the collective model stays the preset's
}

// Card-to-card: the same inputs taken on a second H100 (calibration/data/h100-2026-12-06-second-card, serial
// 1752624002011; h100.yaml is serial 1651224062277's) fit to the same ceilings within 1% and the same flash-attention
// curves within 2.5%: on these cards one card's calibration stands for the SKU to about that much.
TEST(CalibFit, TwoH100CardsAgree) {
  const std::string d = kSrc + "/calibration/data/h100-2026-12-06-second-card/";
  calib::FitOptions opt;
  for (const char* part : {"attention", "bench", "gemm", "loops", "nocb", "xla"}) opt.from_dirs.push_back(d + part);
  opt.base_preset = "h100-sxm";
  opt.xla_kernel_cost = calib::hlo_kernel_cost();
  opt.xla_program = calib::hlo_program_host_work();
  const hw::Calibration b = calib::fit_calibration(opt);
  const auto a = hw::load_calibration_file(kSrc + "/hardware_models/calibrated/h100.yaml");
  ASSERT_TRUE(a);
  for (const auto dt : {sim::Dtype::bf16, sim::Dtype::fp8}) {
    ASSERT_TRUE(a->gemm.count(dt) && b.gemm.count(dt));
    EXPECT_NEAR(b.gemm.at(dt).e_max / a->gemm.at(dt).e_max, 1.0, 0.01);
  }
  ASSERT_TRUE(a->hbm && b.hbm);
  EXPECT_NEAR(b.hbm->bandwidth_Bps / a->hbm->bandwidth_Bps, 1.0, 0.01);
  ASSERT_TRUE(a->attention && b.attention);
  EXPECT_NEAR(b.attention->forward_causal.e_max / a->attention->forward_causal.e_max, 1.0, 0.025);
  EXPECT_NEAR(b.attention->backward_causal.e_max / a->attention->backward_causal.e_max, 1.0, 0.025);
}

TEST(CalibFit, CommandWritesTheSameFile) {
  const std::string out = (fs::temp_directory_path() / "racksim_calib_refit.yaml").string();
  std::ostringstream o, e;
  const int rc = cli::run({"calibrate", "fit", "--from", kBench, "--from", kGemm, "--from", kPair, "--from", kXla, "--from", kNoCb, "--from", kAttn, "--from", kGap, "--from", kLoops, "--base", "h200-sxm", "--out", out,
                           "--quiet"},
                          o, e);
  ASSERT_EQ(rc, cli::kOk) << e.str();
  EXPECT_EQ(slurp(out), slurp(kCommitted));
  fs::remove(out);
}

TEST(CalibFit, WrittenFileReadsBackToTheSameText) {
  auto c = committed();
  ASSERT_TRUE(c);
  EXPECT_EQ(hw::write_calibration_yaml(*c), slurp(kCommitted));
}

// On the device measured, a collective of a measured op and GPU count takes the measured time
// (latency + size / algbw of the nccl-tests fit); other GPU counts keep the model.
TEST(CalibNccl, MeasuredCollectivesReplaceTheModelOnTheSameDevice) {
  auto c = committed();
  ASSERT_TRUE(c);
  hw::SystemSpec sys = preset("h200-sxm");
  const hw::SystemSpec plain = sys;
  hw::apply_calibration(sys, *c);
  const hw::NcclFit* fit = nullptr;
  for (const auto& f : c->nccl)
    if (f.op == hw::CollectiveOp::all_reduce && f.gpus == 2) fit = &f;
  ASSERT_NE(fit, nullptr);
  const auto g2 = hw::place_group(sys, 2, 1);
  const double bytes = 1073741824.0;
  const auto r = hw::estimate_collective(sys, hw::CollectiveOp::all_reduce, bytes, g2);
  EXPECT_DOUBLE_EQ(r.time_s, fit->latency_s + bytes / fit->algbw_Bps);
  EXPECT_EQ(r.bound_by, "measured");
  EXPECT_NE(hw::estimate_collective(plain, hw::CollectiveOp::all_reduce, bytes, g2).time_s, r.time_s);
  // 8 GPUs were not measured: the model, as without the calibration.
  const auto g8 = hw::place_group(sys, 8, 1);
  EXPECT_DOUBLE_EQ(hw::estimate_collective(sys, hw::CollectiveOp::all_reduce, bytes, g8).time_s,
                   hw::estimate_collective(plain, hw::CollectiveOp::all_reduce, bytes, g8).time_s);
  // Another device (H100) with the H200 calibration: the model.
  hw::SystemSpec h100 = preset("h100-sxm");
  const hw::SystemSpec h100_plain = h100;
  hw::apply_calibration(h100, *c);
  EXPECT_DOUBLE_EQ(hw::estimate_collective(h100, hw::CollectiveOp::all_reduce, bytes, hw::place_group(h100, 2, 1)).time_s,
                   hw::estimate_collective(h100_plain, hw::CollectiveOp::all_reduce, bytes, hw::place_group(h100_plain, 2, 1)).time_s);
}

// A scenario that changes the NVLink, or a calibrated XLA cost, keeps its own value: measured
// collectives and calibrated runtime costs never cancel a what-if.
TEST(CalibApply, OverridesWinOverMeasuredCollectivesAndXlaCosts) {
  auto c = committed();
  ASSERT_TRUE(c && c->xla_runtime);
  hw::SystemSpec sys = preset("h200-sxm");
  sys.sources["scale_up.bandwidth_per_direction"] = "scenario override at s.yaml:3:5";
  sys.launch.xla_command_s = 0;
  sys.sources["launch.xla_command"] = "scenario override at s.yaml:4:5";
  hw::apply_calibration(sys, *c);
  EXPECT_FALSE(sys.calibration->applied_nccl);
  EXPECT_EQ(sys.launch.xla_command_s, 0.0);
  EXPECT_DOUBLE_EQ(sys.launch.xla_rerecord_ref_s, c->xla_runtime->rerecord_ref_s);
  hw::SystemSpec plain = preset("h200-sxm");
  hw::apply_calibration(plain, *c);
  EXPECT_TRUE(plain.calibration->applied_nccl);
  EXPECT_DOUBLE_EQ(plain.launch.xla_thunk_launch_s, c->xla_runtime->thunk_launch_s);
}

// Physical sanity of the fitted parameters (none of them is set by hand).
TEST(CalibGemm, FittedParametersArePhysical) {
  auto c = committed();
  for (const auto& [d, m] : c->gemm) {
    EXPECT_GT(m.e_max, 0.5);
    EXPECT_LT(m.e_max, 1.0);
    EXPECT_GE(m.k0, 0);
    EXPECT_GT(m.t0_s, 0);
    EXPECT_LT(m.t0_s, 20e-6);
    // Efficiency grows with K at a fixed large M, N (the 1/K tile overhead).
    EXPECT_LT(m.efficiency(8192, 8192, 128, 1, m.peak_flops_per_s, m.e_max),
              m.efficiency(8192, 8192, 8192, 1, m.peak_flops_per_s, m.e_max));
    EXPECT_LE(m.efficiency(65536, 65536, 65536, 1, m.peak_flops_per_s, m.e_max), m.e_max);
  }
  EXPECT_NEAR(c->hbm_efficiency, 0.81, 0.05);          // copy kernel, 3.9 TB/s of 4.8
  EXPECT_NEAR(c->copy_efficiency, 0.87, 0.03);         // ~55 GB/s of 63
  EXPECT_NEAR(c->host_both->bandwidth_Bps, 99e9, 3e9);  // both directions at once
  EXPECT_NEAR(c->launch->eager_kernel_launch_s, 4.7e-6, 0.2e-6);
  EXPECT_NEAR(c->launch->graph_kernel_launch_s, 0.51e-6, 0.05e-6);
}

// system.calibration: h200 makes the m1_full prediction slower (the measured GEMM ceiling, HBM
// fraction and graph node cost are all below the preset's cited figures) and so closer to the
// measured 0.4016 s (calibration/data/h200-2026-11-29/jax_steps.jsonl m1_full).
TEST(CalibApply, H200ChangesM1FullStepTimeInTheExpectedDirection) {
  const std::string scen = kSrc + "/scenarios/validation/h200-m1-full.yaml";
  // The scenario names the calibration; the uncalibrated side is the same file without it.
  std::ifstream in(scen);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cal = text.find("  calibration: h200");
  ASSERT_NE(cal, std::string::npos);
  const std::string uncalibrated = text.substr(0, cal) + "  calibration: none\n" + text.substr(text.find('\n', cal) + 1);
  const auto off = sim::simulate(sim::load_scenario_text(uncalibrated, scen));
  const auto on = sim::simulate(sim::load_scenario(scen));
  const double t_off = off.report["step_time_s"].get<double>();
  const double t_on = on.report["step_time_s"].get<double>();
  std::printf("m1_full step time: uncalibrated %.4f s, calibrated %.4f s, measured 0.4016 s\n", t_off, t_on);
  EXPECT_GT(t_on, t_off * 1.03);
  EXPECT_LT(std::fabs(t_on - 0.4016), std::fabs(t_off - 0.4016));
  const auto& spec = on.job.system.spec;
  ASSERT_TRUE(spec.calibration);
  EXPECT_TRUE(spec.calibration->same_device);
  EXPECT_TRUE(spec.calibration->applied_hbm && spec.calibration->applied_host && spec.calibration->applied_launch);
  EXPECT_DOUBLE_EQ(spec.gpu.hbm_efficiency, committed()->hbm_efficiency);
  EXPECT_DOUBLE_EQ(spec.gpu.matmul_efficiency.at(sim::Dtype::bf16), committed()->gemm.at(sim::Dtype::bf16).e_max);
  EXPECT_EQ(spec.sources.at("gpu.hbm_efficiency").rfind("calibrated: hardware_models/calibrated/h200.yaml", 0), 0u);
  EXPECT_EQ(spec.sources.at("launch.eager_kernel_launch").rfind("calibrated: ", 0), 0u);
  // The engine's both-directions cap (field x copy_efficiency) is the measured total.
  EXPECT_NEAR(spec.host.link_bandwidth_both_directions_Bps * spec.host.copy_efficiency,
              committed()->host_both->bandwidth_Bps, 1e-5 * committed()->host_both->bandwidth_Bps);
  EXPECT_FALSE(spec.calibration->warnings.empty());
  for (const auto& w : spec.calibration->warnings) std::printf("warning: %s\n", w.c_str());
  // Uncalibrated, nothing changed.
  EXPECT_FALSE(off.job.system.spec.calibration);
  EXPECT_DOUBLE_EQ(off.job.system.spec.gpu.hbm_efficiency, 0.88);
}

TEST(CalibApply, GemmEfficiencyFollowsTheShapeOnlyWithCalibration) {
  hw::SystemSpec s = preset("h200-sxm");
  hw::KernelWork big{true, sim::Dtype::bf16, 2.0 * 8192 * 8192 * 8192, 0, 8192, 8192, 8192, 1, 0};
  hw::KernelWork attn{true, sim::Dtype::bf16, 2.0 * 128 * 2048 * 2048 * 128, 0, 2048, 2048, 128, 128, 0};
  EXPECT_DOUBLE_EQ(hw::gemm_efficiency(s, big), 0.803);
  EXPECT_DOUBLE_EQ(hw::gemm_efficiency(s, attn), 0.803);
  hw::apply_calibration(s, *committed());
  const double e_big = hw::gemm_efficiency(s, big), e_attn = hw::gemm_efficiency(s, attn);
  EXPECT_NEAR(e_big, 0.73, 0.02);     // measured 8192^3: 709-771 TFLOP/s
  EXPECT_LT(e_attn, 0.6 * e_big);     // K = 128: the per-tile prologue/epilogue about halves it
  EXPECT_DOUBLE_EQ(hw::kernel_timing(s, big).min_s, committed()->launch->min_kernel_duration_s);
  // fp32/tf32 were not measured: the preset's (bf16) ceiling, no shape factor.
  hw::KernelWork tf{true, sim::Dtype::tf32, 2.0 * 1024 * 1024 * 1024, 0, 1024, 1024, 1024, 1, 0};
  EXPECT_DOUBLE_EQ(hw::gemm_efficiency(s, tf), s.gpu.matmul_efficiency.at(sim::Dtype::bf16));
}

// Calibrated by default where a calibration exists: a scenario on h200-sxm that names none gets
// calibrated/h200.yaml (fitted against h200-sxm), the same numbers as naming it; `none` is the
// preset's cited figures; a preset no calibration was fitted against (b200) is unchanged.
TEST(CalibApply, DefaultCalibrationOfThePreset) {
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const auto with = [&](const std::string& preset, const std::string& cal) {
    std::vector<sim::SetOverride> sets{{"system.preset", preset}};
    if (!cal.empty()) sets.push_back({"system.calibration", cal});
    return sim::simulate(sim::load_scenario(quick, sets));
  };
  const auto dflt = with("h200-sxm", ""), named = with("h200-sxm", "h200"), none = with("h200-sxm", "none");
  ASSERT_TRUE(dflt.job.system.spec.calibration);
  EXPECT_EQ(dflt.job.system.spec.calibration->name, "h200");
  EXPECT_EQ(dflt.job.system.calibration_source, "default");
  EXPECT_EQ(named.job.system.calibration_source, "scenario");
  EXPECT_EQ(none.job.system.calibration_source, "none");
  EXPECT_FALSE(none.job.system.spec.calibration);
  EXPECT_FALSE(none.job.system.calibration);
  for (const char* k : {"step_time_s", "mfu", "tokens_per_s_per_gpu", "peak_memory_bytes"})
    EXPECT_EQ(dflt.report[k], named.report[k]) << k;
  EXPECT_EQ(dflt.report["breakdown_s"], named.report["breakdown_s"]);
  EXPECT_LT(dflt.report["mfu"].get<double>(), none.report["mfu"].get<double>());  // the measured GEMM ceiling
  // The report says which calibration and how it reached the preset (system.resolved.calibration),
  // and its scenario reruns to the same numbers (system.calibration: the one applied, or none).
  const auto& sys = dflt.report["scenario"]["system"];
  EXPECT_EQ(sys["calibration"], "h200");
  EXPECT_EQ(sys["resolved"]["calibration"]["source"], "default");
  EXPECT_EQ(sys["resolved"]["calibration"]["name"], "h200");
  EXPECT_EQ(sys["resolved"]["calibration"]["transfer"].get<std::string>().rfind("same device", 0), 0u);
  EXPECT_EQ(named.report["scenario"]["system"]["resolved"]["calibration"]["source"], "scenario");
  const auto& nsys = none.report["scenario"]["system"];
  EXPECT_EQ(nsys["calibration"], "none");
  EXPECT_EQ(nsys["resolved"]["calibration"], (nlohmann::json{{"source", "none"}}));
  bool warned = false;
  for (const auto& w : none.report["warnings"]) warned |= w.get<std::string>().rfind("uncalibrated", 0) == 0;
  EXPECT_TRUE(warned);
  // b200: no calibration fitted against it, so nothing applies by default.
  const auto b200 = with("b200", ""), b200_none = with("b200", "none");
  EXPECT_FALSE(b200.job.system.spec.calibration);
  EXPECT_EQ(b200.job.system.calibration_source, "unavailable");
  for (const char* k : {"step_time_s", "mfu", "peak_memory_bytes", "breakdown_s", "warnings"})
    EXPECT_EQ(b200.report[k], b200_none.report[k]) << k;
  EXPECT_FALSE(b200.report["scenario"]["system"].contains("calibration"));
  EXPECT_EQ(b200.report["scenario"]["system"]["resolved"]["calibration"], (nlohmann::json{{"source", "unavailable"}}));
  // h100-sxm has its own since 2026-12-06 (calibrated/h100.yaml, one lent H100), so it is the default there.
  const auto h100 = with("h100-sxm", "");
  ASSERT_TRUE(h100.job.system.spec.calibration);
  EXPECT_EQ(h100.job.system.spec.calibration->name, "h100");
  EXPECT_EQ(h100.job.system.calibration_source, "default");
}

// A field the scenario overrides keeps the scenario's value.
TEST(CalibApply, ScenarioOverrideWins) {
  auto sc = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 1, calibration: h200, overrides: {hbm_efficiency: 0.5}}\n"
      "model: {preset: llama3-8b}\ntraining: {seq_len: 1024, global_batch: 1}\n",
      "t.yaml");
  EXPECT_DOUBLE_EQ(sc.system.spec.gpu.hbm_efficiency, 0.5);
  EXPECT_NEAR(sc.system.spec.launch.eager_kernel_launch_s, committed()->launch->eager_kernel_launch_s, 1e-15);
}

// Transfer (docs/calibration.md): to GB200 the shape curve carries over as a ratio to its
// ceiling; datasheet peaks stay; the fp8 ceiling (and MXFP8's, the same datapath) is the measured
// one times the ratio of the sustained FP8 rates one source measured on both GPUs, per unit of
// peak; bf16's cited burst MAMF moves with it (the power limit's share; since 2026-12-07), nvfp4,
// on its own datapath, keeps the preset's cited ceiling; HBM,
// host link and launch stay the preset's (different architecture and host link). To H100 (same
// architecture, same PCIe host) the fractions carry over too.
TEST(CalibTransfer, Gb200KeepsItsPeaksAndTakesTheSustainedFp8Ceiling) {
  const hw::SystemSpec before = preset("gb200-nvl72");
  const hw::SystemSpec h200 = preset("h200-sxm");
  hw::SystemSpec s = before;
  hw::apply_calibration(s, *committed());
  ASSERT_TRUE(s.calibration);
  EXPECT_FALSE(s.calibration->same_device);
  EXPECT_TRUE(s.calibration->applied_gemm_ceiling);
  EXPECT_FALSE(s.calibration->applied_hbm || s.calibration->applied_host || s.calibration->applied_launch);
  EXPECT_EQ(s.gpu.peak_dense_flops_per_s, before.gpu.peak_dense_flops_per_s);
  EXPECT_DOUBLE_EQ(s.gpu.matmul_efficiency.at(sim::Dtype::nvfp4), before.gpu.matmul_efficiency.at(sim::Dtype::nvfp4));
  // Closed form from the two presets' tables: geometric mean of GB200 / H200 over their common shapes.
  const auto& g = before.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8);
  const auto& h = h200.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8);
  double log_sum = 0;
  int shapes = 0;
  for (const auto& [shape, rate] : g) {
    ASSERT_TRUE(h.count(shape)) << shape;
    log_sum += std::log(rate / h.at(shape));
    ++shapes;
  }
  EXPECT_EQ(shapes, 5);
  const double ratio = std::exp(log_sum / shapes);
  EXPECT_NEAR(ratio, 2.18, 0.01);  // 2,834.6..2,906.9 against 1,249.1..1,366.3 TFLOP/s
  const double fp8 = committed()->gemm.at(sim::Dtype::fp8).e_max * ratio * 1979e12 / 5000e12;
  EXPECT_NEAR(s.gpu.matmul_efficiency.at(sim::Dtype::fp8), fp8, 1e-12);
  EXPECT_LT(fp8, 0.9 * before.gpu.matmul_efficiency.at(sim::Dtype::fp8));  // below the cited burst MAMF (0.723)
  EXPECT_NEAR(s.gpu.matmul_efficiency.at(sim::Dtype::mxfp8),
              before.gpu.matmul_efficiency.at(sim::Dtype::mxfp8) * fp8 / before.gpu.matmul_efficiency.at(sim::Dtype::fp8),
              1e-12);
  EXPECT_NEAR(s.gpu.matmul_efficiency.at(sim::Dtype::bf16),
              before.gpu.matmul_efficiency.at(sim::Dtype::bf16) * fp8 / before.gpu.matmul_efficiency.at(sim::Dtype::fp8),
              1e-12);
  // Without a common source the cited ceiling stays.
  hw::SystemSpec other = before;
  other.gpu.sustained_gemm_source = "another-benchmark";
  hw::apply_calibration(other, *committed());
  EXPECT_EQ(other.gpu.matmul_efficiency, before.gpu.matmul_efficiency);
  EXPECT_DOUBLE_EQ(s.gpu.hbm_efficiency, before.gpu.hbm_efficiency);
  EXPECT_DOUBLE_EQ(s.host.copy_efficiency, before.host.copy_efficiency);
  EXPECT_DOUBLE_EQ(s.host.link_bandwidth_both_directions_Bps, before.host.link_bandwidth_both_directions_Bps);
  EXPECT_DOUBLE_EQ(s.launch.eager_kernel_launch_s, before.launch.eager_kernel_launch_s);
  EXPECT_DOUBLE_EQ(hw::kernel_timing(s, {}).min_s, hw::kMinKernelDuration_s);
  // A large GEMM runs near the carried ceiling on the preset's peak; a K=128 one well below.
  const double ceil = s.gpu.matmul_efficiency.at(sim::Dtype::bf16);
  hw::KernelWork big{true, sim::Dtype::bf16, 2.0 * 16384 * 16384 * 16384, 0, 16384, 16384, 16384, 1, 0};
  const double e = hw::gemm_efficiency(s, big);
  EXPECT_LT(e, ceil);
  EXPECT_GT(e, 0.95 * ceil);
  const auto t = hw::kernel_timing(s, big);
  EXPECT_NEAR(t.compute_s, big.flops / (before.gpu.peak_dense_flops_per_s.at(sim::Dtype::bf16) * e), 1e-15);
  // The report's warnings say what was transferred, what was not, and what was not measured.
  std::string all;
  for (const auto& w : s.calibration->warnings) all += w + "\n";
  std::printf("warnings on gb200-nvl72:\n%s", all.c_str());
  EXPECT_NE(all.find("transferred from NVIDIA H200"), std::string::npos) << all;
  EXPECT_NE(all.find("HBM, host link, launch figures kept"), std::string::npos) << all;
  EXPECT_NE(all.find("nvfp4"), std::string::npos) << all;
}

// The sustained-rate transfer and system.overrides: an overridden ceiling stays as set (and mxfp8 then keeps its
// cited figure), an overridden sustained rate enters the ratio, and another source tag keeps the cited ceilings;
// the report's transfer line and warnings say which ceiling came from where.
TEST(CalibTransfer, SustainedRateTransferFollowsOverridesAndSaysWhy) {
  auto gb200 = [](const std::string& overrides) {
    return sim::load_scenario_text("system: {preset: gb200-nvl72, gpus: 8, calibration: h200, overrides: {" + overrides +
                                       "}}\nmodel: {preset: llama3-8b}\ntraining: {seq_len: 1024, global_batch: 8}\n",
                                   "t.yaml");
  };
  auto warnings = [](const sim::Scenario& sc) {
    std::string all;
    for (const auto& w : sc.system.spec.calibration->warnings) all += w + "\n";
    return all;
  };
  const hw::SystemSpec cited = preset("gb200-nvl72");
  const auto plain = gb200("");
  const auto& e = plain.system.spec.gpu.matmul_efficiency;
  EXPECT_NEAR(e.at(sim::Dtype::fp8), 0.611, 0.001);
  // The preset cites MXFP8 at 0.951 of FP8's figure (6.812 / 7.161 ms, Transformer Engine's B300 measurement), and the
  // transfer moves both alike (until 2026-12-07 the preset cited fp8's figure for both).
  EXPECT_NEAR(e.at(sim::Dtype::mxfp8), e.at(sim::Dtype::fp8) * 6.812 / 7.161, 1e-3);
  // BF16's cited burst MAMF moves with FP8's ceiling (since 2026-12-07); NVFP4 keeps its own.
  EXPECT_NEAR(e.at(sim::Dtype::bf16),
              cited.gpu.matmul_efficiency.at(sim::Dtype::bf16) * e.at(sim::Dtype::fp8) / cited.gpu.matmul_efficiency.at(sim::Dtype::fp8),
              1e-12);
  EXPECT_DOUBLE_EQ(e.at(sim::Dtype::nvfp4), cited.gpu.matmul_efficiency.at(sim::Dtype::nvfp4));
  EXPECT_NE(plain.system.spec.calibration->transfer.find(
                "with the measured fp8, mxfp8 ceiling scaled by both GPUs' sustained GEMM rates"),
            std::string::npos)
      << plain.system.spec.calibration->transfer;
  const std::string w = warnings(plain);
  EXPECT_NE(w.find("bf16 0.616 = cited 0.729 x fp8's 0.846"), std::string::npos) << w;
  EXPECT_EQ(w.find("bf16 0.729 (cited"), std::string::npos) << w;  // the entry it replaces
  EXPECT_NE(plain.system.spec.calibration->transfer.find("and the cited bf16 ceiling moved with fp8's"), std::string::npos);
  EXPECT_NE(w.find("no mxfp8, nvfp4 GEMM measurements: those use the preset's matmul_efficiency as their ceiling "
                   "(mxfp8's moved with fp8's, above)"),
            std::string::npos)
      << w;

  const auto set_fp8 = gb200("gpu.matmul_efficiency.fp8: 0.5");
  EXPECT_DOUBLE_EQ(set_fp8.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8), 0.5);
  EXPECT_DOUBLE_EQ(set_fp8.system.spec.gpu.matmul_efficiency.at(sim::Dtype::mxfp8),
                   cited.gpu.matmul_efficiency.at(sim::Dtype::mxfp8));
  EXPECT_NE(warnings(set_fp8).find("fp8 0.5 (system.overrides)"), std::string::npos) << warnings(set_fp8);
  // With FP8's ceiling set by the scenario nothing moved it, so BF16 keeps its cited figure; a BF16 set stays as set.
  EXPECT_DOUBLE_EQ(set_fp8.system.spec.gpu.matmul_efficiency.at(sim::Dtype::bf16), cited.gpu.matmul_efficiency.at(sim::Dtype::bf16));
  EXPECT_DOUBLE_EQ(gb200("gpu.matmul_efficiency.bf16: 0.7").system.spec.gpu.matmul_efficiency.at(sim::Dtype::bf16), 0.7);

  // Every GB200 rate 10% higher: the ceiling 10% higher (the geometric mean of the ratios).
  std::string faster;
  for (const auto& [shape, rate] : cited.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8))
    faster += fmt::format("{}gpu.sustained_gemm.fp8.{}: {} TFLOP/s", faster.empty() ? "" : ", ", shape, 1.1 * rate / 1e12);
  EXPECT_NEAR(gb200(faster).system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8), 1.1 * e.at(sim::Dtype::fp8), 1e-9);

  // Rates at the peak would carry the ceiling above 1: held at 1, with a warning.
  std::string at_peak;
  for (const auto& [shape, rate] : cited.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8))
    at_peak += fmt::format("{}gpu.sustained_gemm.fp8.{}: 5000 TFLOP/s", at_peak.empty() ? "" : ", ", shape);
  const auto held = gb200(at_peak);
  EXPECT_DOUBLE_EQ(held.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8), 1.0);
  EXPECT_NE(warnings(held).find("the sustained-rate transfer gives gb200-nvl72 a fp8 ceiling of 1.0"), std::string::npos)
      << warnings(held);

  // Blockwise FP8 slows the carried ceiling (applied after the calibration), here with a ratio set for GB200.
  const auto blockwise = sim::load_scenario_text(
      "system: {preset: gb200-nvl72, gpus: 8, calibration: h200, overrides: {gpu.fp8_blockwise_rate_ratio: 0.8}}\n"
      "model: {preset: llama3-8b}\ntraining: {seq_len: 1024, global_batch: 8, precision: fp8, fp8_recipe: blockwise}\n",
      "b.yaml");
  EXPECT_NEAR(blockwise.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8), 0.8 * e.at(sim::Dtype::fp8), 1e-12);

  // A calibration whose base preset has no table (or cannot be loaded: a user's own preset file) keeps the cited
  // ceilings on a target that has one.
  hw::Calibration no_base = *committed();
  no_base.base_gpu.sustained_gemm_source.clear();
  no_base.base_gpu.sustained_gemm_flops_per_s.clear();
  hw::SystemSpec kept = cited;
  hw::apply_calibration(kept, no_base);
  EXPECT_EQ(kept.gpu.matmul_efficiency, cited.gpu.matmul_efficiency);

  const auto other = gb200("gpu.sustained_gemm.source: another-benchmark");
  EXPECT_EQ(other.system.spec.gpu.matmul_efficiency, cited.gpu.matmul_efficiency);
  EXPECT_EQ(other.system.spec.calibration->transfer.find("sustained"), std::string::npos);
  EXPECT_NE(warnings(other).find("fp8 0.723 (cited: no gpu.sustained_gemm fp8 rates"), std::string::npos) << warnings(other);
}

// Block-scaled MXFP8 and NVFP4 have no measurements: on GB200 they take the measured FP8 shape curve under
// their own ceiling, NVFP4's per-tile overhead k0 doubled (its main loop runs twice FP8's rate per K
// element). Before, they ran at the ceiling at every shape, faster than FP8 at the same shape.
TEST(CalibTransfer, BlockScaledGemmsTakeFp8ShapeCurve) {
  hw::SystemSpec s = preset("gb200-nvl72");
  hw::apply_calibration(s, *committed());
  const hw::GemmModel& fp8 = committed()->gemm.at(sim::Dtype::fp8);
  const double m = 4096, n = 4096, k = 2048;  // a DeepSeek-V3 expert down projection (K = 2048)
  auto work = [&](sim::Dtype d) { return hw::KernelWork{true, d, 2.0 * m * n * k, 0, m, n, k, 1, 0}; };
  const double ceil_fp8 = s.gpu.matmul_efficiency.at(sim::Dtype::fp8);
  const double ceil_mx = s.gpu.matmul_efficiency.at(sim::Dtype::mxfp8);
  const double e_fp8 = hw::gemm_efficiency(s, work(sim::Dtype::fp8));
  const double e_mx = hw::gemm_efficiency(s, work(sim::Dtype::mxfp8));
  const double e_fp4 = hw::gemm_efficiency(s, work(sim::Dtype::nvfp4));
  // Same datapath, same peak (5,000 TFLOP/s) and FP8's curve under its own ceiling (0.951 of FP8's, Transformer
  // Engine's B300 measurement): the closed form with FP8's k0, and slower than FP8 at the same shape.
  const double p8 = s.gpu.peak_dense_flops_per_s.at(sim::Dtype::mxfp8);
  EXPECT_NEAR(e_mx, ceil_mx / (1.0 + fp8.k0 / k + fp8.t0_s * p8 * ceil_mx / (2.0 * m * n * k)), 1e-12);
  EXPECT_LT(e_mx, e_fp8);
  EXPECT_LT(e_mx, 0.9 * ceil_mx);  // 1 / (1 + 347 / 2048 + t0 term) ~ 0.83
  // NVFP4 (10,000 TFLOP/s): the closed form with k0 doubled and its own peak in the fixed-cost term.
  const double p4 = s.gpu.peak_dense_flops_per_s.at(sim::Dtype::nvfp4);
  const double ceil4 = s.gpu.matmul_efficiency.at(sim::Dtype::nvfp4);
  const double expected = ceil4 / (1.0 + 2.0 * fp8.k0 / k + fp8.t0_s * p4 * ceil4 / (2.0 * m * n * k));
  EXPECT_NEAR(e_fp4, expected, 1e-12);
  EXPECT_LT(e_fp4 / ceil4, e_fp8 / ceil_fp8);
}

// On the H200 itself the engine times every measured flash-attention row (calibration/data/
// h200-2026-12-04-attention-train: the training forward and the backward at the power cap, 1K-128K keys, causal and
// not) within 5% of its measured time, and the long-key backward near 0.53 of peak, not the 0.61 that a curve
// fitted on keys up to 8K extrapolated to.
TEST(CalibAttention, EngineTimesEveryMeasuredRowWithinFivePercent) {
  hw::SystemSpec s = preset("h200-sxm");
  hw::apply_calibration(s, *committed());
  ASSERT_TRUE(s.calibration->applied_attention);
  const auto& rows = committed()->attention->rows;
  ASSERT_GE(rows.size(), 40u);
  int long_backward = 0;
  for (const auto& r : rows) {
    hw::KernelWork w{true, sim::Dtype::bf16, r.flops, 0, 0, 0, 0, 1, 0};
    w.attention = r.backward ? 2 : 1;
    w.attention_causal = r.causal;
    w.attention_seq = r.seq;
    const hw::KernelTiming t = hw::kernel_timing(s, w);
    EXPECT_NEAR(t.compute_s / r.measured_s, 1.0, 0.05) << r.seq << (r.causal ? " causal" : " full")
                                                       << (r.backward ? " backward" : " forward");
    if (r.backward && r.seq >= 32768) {
      EXPECT_NEAR(t.efficiency, 0.53, 0.02) << r.seq;
      ++long_backward;
    }
  }
  EXPECT_GE(long_backward, 4);
}

// The H100 carries the H200's attention curve (docs/calibration.md's transfer rule: same architecture). Checked against
// the same benchmark on an H100 (calibration/data/h100-2026-12-06-attention-train, not in the fit): every row within 8%;
// the causal backward at 1K-8K keys, what the 4K-8K training rows run most, is where the H100 is slower than the
// carried curve, by 1-7% (4.6% on the mean of its 8 rows; pinned here as a known bias: racksim is that much fast on it).
TEST(CalibAttention, H100RunsTheTransferredCurveOfTheH200) {
  hw::SystemSpec s = preset("h100-sxm");
  hw::apply_calibration(s, *committed());
  ASSERT_TRUE(s.calibration->applied_attention);
  std::ifstream f(kSrc + "/calibration/data/h100-2026-12-06-attention-train/attention.json");
  ASSERT_TRUE(f) << "H100 attention measurements missing";
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j.at("device").get<std::string>(), "NVIDIA H100 80GB HBM3");
  int rows = 0, short_causal_backward = 0;
  double worst = 0, short_causal_backward_err = 0;
  for (const auto& r : j.at("rows")) {
    for (int pass : {1, 2}) {
      const double flops = r.at(pass == 1 ? "forward_flops" : "backward_flops").get<double>();
      const double measured = r.at(pass == 1 ? "forward_s" : "backward_s").get<double>();
      hw::KernelWork w{true, sim::Dtype::bf16, flops, 0, 0, 0, 0, 1, 0};
      w.attention = pass;
      w.attention_causal = r.at("causal").get<bool>();
      w.attention_seq = r.at("S").get<int>();
      const double err = hw::kernel_timing(s, w).compute_s / measured - 1.0;
      worst = std::max(worst, std::abs(err));
      if (pass == 2 && w.attention_causal && w.attention_seq <= 8192) {
        short_causal_backward_err += err;
        ++short_causal_backward;
      }
      ++rows;
    }
  }
  EXPECT_GE(rows, 36);
  EXPECT_LT(worst, 0.08);
  ASSERT_EQ(short_causal_backward, 8);
  EXPECT_NEAR(short_causal_backward_err / short_causal_backward, -0.046, 0.01);
}

// Multi-latent attention's core (d_qk 192, d_v 128) runs at the measured share of the fitted head-dim-128 rate per FLOP
// (calibration/data/h100-2026-12-05-attention-mla: cuDNN 0.993 forward, 0.883 backward), on Hopper and, carried, on
// Blackwell; the builder marks only MLA's measured head dims, so another MLA shape keeps the fitted rate.
TEST(CalibAttention, MlaCoreAtItsMeasuredRatePerFlop) {
  for (const char* name : {"h100-sxm", "h200-sxm", "gb200-nvl72"}) {
    hw::SystemSpec s = preset(name);
    hw::apply_calibration(s, *committed());
    ASSERT_TRUE(s.calibration->applied_attention) << name;
    EXPECT_DOUBLE_EQ(s.gpu.mla_attention_forward_rate, 0.993) << name;
    EXPECT_DOUBLE_EQ(s.gpu.mla_attention_backward_rate, 0.883) << name;
    for (int pass : {1, 2}) {
      hw::KernelWork w{true, sim::Dtype::bf16, 1e12, 0, 0, 0, 0, 1, 0};
      w.attention = pass;
      w.attention_seq = 4096;
      const double standard = hw::kernel_timing(s, w).compute_s;
      w.attention_mla = true;
      EXPECT_NEAR(standard / hw::kernel_timing(s, w).compute_s, pass == 2 ? 0.883 : 0.993, 1e-12) << name << pass;
    }
  }
  const auto ops_marked = [](const std::string& mla) {
    const auto sc = sim::load_scenario_text(
        "system: {preset: h100-sxm, gpus: 1}\nmodel: {layers: 2, hidden: 1024, ffn_hidden: 2048, heads: 8, kv_heads: 8, "
        "head_dim: 128, vocab: 1024, mla: " + mla + "}\ntraining: {seq_len: 1024, global_batch: 1}\n", "m.yaml");
    const auto g = workloads::build_training_graph(sc.model, sc.training, sc.system.spec);
    int marked = 0, attention = 0;
    for (const auto& op : g.ops) {
      attention += op.attention != 0;
      marked += op.attention_mla;
    }
    EXPECT_GT(attention, 0);
    return marked == attention ? 1 : marked == 0 ? 0 : -1;
  };
  EXPECT_EQ(ops_marked("{q_lora_rank: 256, kv_lora_rank: 128, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128}"), 1);
  EXPECT_EQ(ops_marked("{q_lora_rank: 256, kv_lora_rank: 128, qk_nope_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64}"), 0);
}

// Flash attention across architectures: the H200's measured curve as a ratio to the GEMM ceiling measured on
// the same card, times GB200's cited ceiling (before: the GEMM ceiling itself, above what cuDNN reaches).
TEST(CalibTransfer, Gb200FlashAttentionAtMeasuredRatioToGemmCeiling) {
  hw::SystemSpec s = preset("gb200-nvl72");
  hw::apply_calibration(s, *committed());
  ASSERT_TRUE(s.calibration->applied_attention);
  const auto& measured = *committed()->attention;
  const double ratio_to_target =
      s.gpu.matmul_efficiency.at(sim::Dtype::bf16) / committed()->gemm.at(sim::Dtype::bf16).e_max;
  const double seq = 8192;
  for (int pass : {1, 2})
    for (bool causal : {false, true}) {
      hw::KernelWork w{true, sim::Dtype::bf16, 1e12, 0, 0, 0, 0, 1, 0};
      w.attention = pass;
      w.attention_causal = causal;
      w.attention_seq = seq;
      const auto& c = measured.curve(pass == 2, causal);
      EXPECT_NEAR(hw::kernel_timing(s, w).efficiency, c.e_max * ratio_to_target / (1.0 + c.s0 / seq), 1e-12);
    }
  std::string all;
  for (const auto& w : s.calibration->warnings) all += w + "\n";
  EXPECT_NE(all.find("flash attention runs at the measured ratio to the GEMM ceiling (0.80 for the causal forward)"),
            std::string::npos)
      << all;
}

// training.fp8_recipe blockwise on Hopper: the measured blockwise / per-tensor rate (0.854, calibration/data/
// h200-2026-12-02-blockwise-fp8) lowers the fp8 ceiling, so the GEMM's main loop takes 1 / 0.854 as long and
// its fixed cost t0 stays: t = t0 + F / (P e r) (1 + k0 / K). On a preset without the ratio the rate is kept.
// B200 has no sustained measurement; its preset derives one from GB200's by the cited MAMF ratio (same die,
// lower power limit), so a calibration carried to both keeps B200's fp8 rate below GB200's as the MAMFs do
// (without it B200 kept its burst MAMF, 3,434 TFLOP/s, above GB200's carried 3,055).
TEST(CalibTransfer, B200StaysBelowGb200UnderTheSustainedTransfer) {
  hw::SystemSpec b200 = preset("b200"), gb200 = preset("gb200-nvl72");
  hw::apply_calibration(b200, *committed());
  hw::apply_calibration(gb200, *committed());
  const auto rate = [](const hw::SystemSpec& s) {
    return s.gpu.matmul_efficiency.at(sim::Dtype::fp8) * s.gpu.peak_dense_flops_per_s.at(sim::Dtype::fp8);
  };
  EXPECT_NEAR(rate(b200) / rate(gb200), 3432.5 / 3615.6, 1e-3);
  EXPECT_NEAR(b200.gpu.matmul_efficiency.at(sim::Dtype::mxfp8), b200.gpu.matmul_efficiency.at(sim::Dtype::fp8) * 6.812 / 7.161,
              1e-3);
}

// `racksim hw show PRESET --calibration NAME` shows the ceilings the transfer rule gives the preset, with their
// sources, beside the preset's own cited ones; an unknown calibration is an error naming the nearest.
TEST(CalibTransfer, HwShowPrintsTheCarriedCeilings) {
  hw::SystemSpec gb200 = preset("gb200-nvl72");
  hw::apply_calibration(gb200, *committed());
  const auto r = racksim::testing::run_cli({"hw", "show", "gb200-nvl72", "--calibration", "h200", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["fields"]["gpu.matmul_efficiency.fp8"]["value"], "0.723");  // the preset's own, cited
  const auto& fp8 = doc["calibrated"]["fields"]["gpu.matmul_efficiency.fp8"];
  EXPECT_NEAR(std::stod(fp8["value"].get<std::string>()), gb200.gpu.matmul_efficiency.at(sim::Dtype::fp8), 1e-4);
  EXPECT_NE(fp8["source"].get<std::string>().find("sustained fp8 GEMM rate"), std::string::npos);
  EXPECT_EQ(doc["calibrated"]["fields"]["gpu.matmul_efficiency.bf16"]["value"], "0.6165");  // the cited 0.729, moved with fp8's
  const auto bad = racksim::testing::run_cli({"hw", "show", "gb200-nvl72", "--calibration", "h2000"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("unknown calibration 'h2000'; did you mean 'h200'?"), std::string::npos) << bad.err;
}

TEST(CalibTransfer, BlockwiseFp8GemmsRunAtTheMeasuredRatio) {
  const char* base =
      "system: {preset: h100-sxm, gpus: 8, calibration: h200}\nmodel: {preset: llama2-7b}\n"
      "training: {seq_len: 4096, global_batch: 8, precision: fp8";
  const auto tensorwise = sim::load_scenario_text(std::string(base) + "}\n", "t.yaml");
  const auto blockwise = sim::load_scenario_text(std::string(base) + ", fp8_recipe: blockwise}\n", "b.yaml");
  const double r = preset("h100-sxm").gpu.fp8_blockwise_rate_ratio;
  EXPECT_DOUBLE_EQ(r, 0.854);
  const auto& e0 = tensorwise.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8);
  EXPECT_DOUBLE_EQ(blockwise.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8), e0 * r);
  EXPECT_NE(blockwise.system.spec.sources.at("gpu.matmul_efficiency.fp8").find("fp8_blockwise_rate_ratio 0.854"),
            std::string::npos);
  const hw::GemmModel& g = committed()->gemm.at(sim::Dtype::fp8);
  const double m = 4096, n = 32768, k = 6144;  // a Mixtral 8x22B expert fc1
  const hw::KernelWork w{true, sim::Dtype::fp8, 2.0 * m * n * k, 0, m, n, k, 1, 0};
  const double t_tensor = hw::kernel_timing(tensorwise.system.spec, w).compute_s;
  const double t_block = hw::kernel_timing(blockwise.system.spec, w).compute_s;
  EXPECT_NEAR(t_block - g.t0_s, (t_tensor - g.t0_s) / r, 1e-12);
  // Blackwell presets carry no measured ratio: blockwise keeps the per-tensor rate (the report says so).
  const std::string gb_base =
      "system: {preset: gb200-nvl72, gpus: 8, calibration: h200}\nmodel: {preset: llama2-7b}\n"
      "training: {seq_len: 4096, global_batch: 8, precision: fp8";
  const auto gb = sim::load_scenario_text(gb_base + ", fp8_recipe: blockwise}\n", "g.yaml");
  const auto gb_tensorwise = sim::load_scenario_text(gb_base + "}\n", "gt.yaml");
  EXPECT_DOUBLE_EQ(gb.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8),
                   gb_tensorwise.system.spec.gpu.matmul_efficiency.at(sim::Dtype::fp8));
}

TEST(CalibTransfer, H100SameArchitectureCarriesFractions) {
  const hw::SystemSpec before = preset("h100-sxm");
  hw::SystemSpec s = before;
  hw::apply_calibration(s, *committed());
  EXPECT_FALSE(s.calibration->same_device);
  EXPECT_TRUE(s.calibration->applied_hbm && s.calibration->applied_host && s.calibration->applied_launch);
  // Same architecture: the measured ceiling scaled by the presets' cited ceilings (H100 and H200 cite the
  // same MAMF, so the H100 gets the H200's measured ceiling, not the higher best-shape statistic).
  const hw::SystemSpec h200 = preset("h200-sxm");
  for (const auto& [d, g] : committed()->gemm) {
    ASSERT_TRUE(before.gpu.matmul_efficiency.count(d) && h200.gpu.matmul_efficiency.count(d));
    EXPECT_DOUBLE_EQ(s.gpu.matmul_efficiency.at(d),
                     g.e_max * before.gpu.matmul_efficiency.at(d) / h200.gpu.matmul_efficiency.at(d));
  }
  EXPECT_DOUBLE_EQ(s.gpu.matmul_efficiency.at(sim::Dtype::bf16), committed()->gemm.at(sim::Dtype::bf16).e_max);
  EXPECT_TRUE(s.calibration->applied_gemm_ceiling);
  EXPECT_DOUBLE_EQ(s.gpu.hbm_efficiency, committed()->hbm_efficiency);
  EXPECT_DOUBLE_EQ(s.launch.graph_kernel_launch_s, committed()->launch->graph_kernel_launch_s);
}

// ---- strict loading

TEST(CalibLoad, UnknownKeyIsAnErrorWithSuggestionAndLocation) {
  std::string text = slurp(kCommitted);
  const auto pos = text.find("  e_max:");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 8, "  e_maxx:");
  const std::string errs = load_errors(text);
  EXPECT_NE(errs.find("cal.yaml:"), std::string::npos) << errs;
  EXPECT_NE(errs.find("gemm.bf16.e_maxx: unknown key 'e_maxx'; did you mean 'e_max'?"), std::string::npos) << errs;
  EXPECT_NE(errs.find("gemm.bf16.e_max: required key is missing"), std::string::npos) << errs;
}

namespace {
// Replaces the first `from` in `text` by `to`; a test fails (and nothing changes) when `from` is not there.
void replace_first(std::string& text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  text.replace(pos, from.size(), to);
}
}  // namespace

// The XLA sections are as strict: a misspelt key gets its nearest one, an unknown model form is
// refused, a row naming a source the file does not list is an error at that row.
TEST(CalibLoad, XlaSectionsAreStrict) {
  std::string text = slurp(kCommitted);
  auto replace = [&](const std::string& from, const std::string& to) { replace_first(text, from, to); };
  replace("  rerecord_ref:", "  rerecord_reff:");
  replace("form: \"t = max(bytes / hbm, bytes * thread_bytes / k)\"", "form: \"t = bytes / hbm\"");
  const auto row = text.find("source: ", text.find("row_kernels:"));
  ASSERT_NE(row, std::string::npos);
  text.replace(row, 9, "source: 99");
  const std::string errs = load_errors(text);
  EXPECT_NE(errs.find("xla_runtime.rerecord_reff: unknown key 'rerecord_reff'; did you mean 'rerecord_ref'?"),
            std::string::npos)
      << errs;
  EXPECT_NE(errs.find("unsupported row-kernel model 't = bytes / hbm'"), std::string::npos) << errs;
  EXPECT_NE(errs.find("no source #99"), std::string::npos) << errs;
}

// The loop-fusion section likewise: a misspelt key, a rate in the wrong unit, a row of no indices.
TEST(CalibLoad, LoopFusionSectionIsStrict) {
  std::string text = slurp(kCommitted);
  auto replace = [&](const std::string& from, const std::string& to) { replace_first(text, from, to); };
  const auto section = text.find("loop_fusions:");
  ASSERT_NE(section, std::string::npos);
  replace("  index_rate: 815.551 Gop/s", "  index_rate: 815.551 GB/s");
  const auto row = text.find("indices: ", section);
  ASSERT_NE(row, std::string::npos);
  text.replace(row, text.find(',', row) - row, "indices: 0");
  replace("  form: \"t = max(bytes / hbm, indices / index_rate)\"\n",
          "  form: \"t = max(bytes / hbm, indices / index_rate)\"\n  raet: 1\n");
  const std::string errs = load_errors(text);
  EXPECT_NE(errs.find("loop_fusions.index_rate"), std::string::npos) << errs;
  EXPECT_NE(errs.find("an op rate"), std::string::npos) << errs;
  EXPECT_NE(errs.find("loop_fusions.kernels[0].indices"), std::string::npos) << errs;
  EXPECT_NE(errs.find("loop_fusions.raet: unknown key 'raet'"), std::string::npos) << errs;
}

TEST(CalibLoad, MissingUnitIsAnError) {
  std::string text = slurp(kCommitted);
  const auto pos = text.find("  t0: ");
  ASSERT_NE(pos, std::string::npos);
  const auto eol = text.find('\n', pos);
  const std::string line = text.substr(pos, eol - pos);
  text.replace(pos, eol - pos, line.substr(0, line.find(" us")));  // "t0: 3.49049"
  const std::string errs = load_errors(text);
  const auto line_no = std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n') + 1;
  EXPECT_NE(errs.find(fmt::format("cal.yaml:{}:", line_no)), std::string::npos) << errs;
  EXPECT_NE(errs.find("gemm.bf16.t0"), std::string::npos) << errs;
  EXPECT_NE(errs.find("unit"), std::string::npos) << errs;
}

TEST(CalibLoad, WrongFormatAndMissingKeys) {
  const std::string errs = load_errors("format: racksim-calibration/9\n");
  EXPECT_NE(errs.find("unsupported format 'racksim-calibration/9'"), std::string::npos) << errs;
  EXPECT_NE(errs.find("device: required key is missing"), std::string::npos) << errs;
}

TEST(CalibLoad, UnknownCalibrationNameSuggestsTheNearestAtTheKey) {
  try {
    sim::load_scenario_text("system: {preset: h200-sxm, gpus: 1,\n  calibration: h20}\nmodel: {preset: llama3-8b}\n"
                            "training: {seq_len: 1024, global_batch: 1}\n",
                            "s.yaml");
    FAIL() << "expected an error";
  } catch (const input::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("s.yaml:2:16: error: system.calibration: unknown calibration 'h20'; did you mean 'h200'?"),
              std::string::npos)
        << msg;
  }
}

TEST(CalibLoad, CalibrationByPathRelativeToTheScenario) {
  const auto dir = fs::temp_directory_path() / "racksim_calib_path";
  fs::create_directories(dir / "cal");
  fs::copy_file(kCommitted, dir / "cal" / "mine.yaml", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "s.yaml") << "system: {preset: h200-sxm, gpus: 1, calibration: cal/mine.yaml}\n"
                                   "model: {preset: llama3-8b}\ntraining: {seq_len: 1024, global_batch: 1}\n";
  const auto sc = sim::load_scenario((dir / "s.yaml").string());
  ASSERT_TRUE(sc.system.spec.calibration);
  EXPECT_EQ(sc.system.spec.calibration->name, "mine");
  fs::remove_all(dir);
}

// ---- nccl-tests (synthetic logs: tests/data/nccl-tests-synthetic/README.md)

TEST(CalibNccl, ParsesAndFitsSyntheticNcclTestsLogs) {
  const std::string dir = kSrc + "/tests/data/nccl-tests-synthetic";
  auto log = calib::parse_nccl_tests_log(slurp(dir + "/all_reduce_perf_8gpu.log"), "all_reduce_perf_8gpu.log");
  ASSERT_TRUE(log);
  EXPECT_EQ(log->op, "all_reduce");
  EXPECT_EQ(log->gpus, 8);
  EXPECT_EQ(log->rows.size(), 11u);
  EXPECT_DOUBLE_EQ(log->rows.back().bytes, 1073741824.0);
  EXPECT_FALSE(calib::parse_nccl_tests_log(slurp(kBench + "/racksim-bench.log"), "racksim-bench.log"));

  calib::FitOptions opt;
  opt.from_dirs = {dir};
  opt.base_preset = "h200-sxm";
  const hw::Calibration c = calib::fit_calibration(opt);
  ASSERT_EQ(c.nccl.size(), 2u);
  const auto& ar = c.nccl[0];
  const auto& a2a = c.nccl[1];
  EXPECT_EQ(ar.op, hw::CollectiveOp::all_reduce);
  EXPECT_EQ(ar.gpus, 8);
  EXPECT_NEAR(ar.latency_s, 25e-6, 0.5e-6);
  EXPECT_NEAR(ar.algbw_Bps, 350e9, 350e9 * 0.01);
  EXPECT_NEAR(ar.busbw_Bps, ar.algbw_Bps * 2 * 7 / 8.0, 1);
  EXPECT_EQ(a2a.op, hw::CollectiveOp::all_to_all);
  EXPECT_EQ(a2a.gpus, 4);
  EXPECT_NEAR(a2a.latency_s, 40e-6, 0.5e-6);
  EXPECT_NEAR(a2a.algbw_Bps, 120e9, 120e9 * 0.01);
  EXPECT_LT(ar.rms_residual, 0.01);
  // The fits go into the file and read back unchanged.
  const std::string text = hw::write_calibration_yaml(c);
  EXPECT_NE(text.find("- {op: all_reduce, gpus: 8,"), std::string::npos) << text;
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  auto root = input::load_yaml_text(text, "nccl.yaml", ctx);
  ASSERT_TRUE(root);
  const hw::Calibration back = hw::parse_calibration(*root);
  ASSERT_TRUE(diag.empty()) << diag.list().front().format();
  EXPECT_EQ(hw::write_calibration_yaml(back), text);
}

TEST(CalibNccl, MalformedRowIsAnErrorWithLine) {
  const std::string text =
      "# Collective test starting: all_gather_perf\n#  Rank  0 Group 0\n#  Rank  1 Group 0\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "        1024           256     float    none      -1    10.00    0.10    0.05      0\n"
      "        4096          1024     float    none      -1    abc    0.40    0.20      0\n";
  try {
    calib::parse_nccl_tests_log(text, "ag.log");
    FAIL();
  } catch (const input::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ag.log:6:1: error: nccl-tests column 'time' is not a number: 'abc'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_DOUBLE_EQ(calib::nccl_busbw_factor("all_gather", 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(calib::nccl_busbw_factor("send_recv", 2), 1.0);
}

// A measured NCCL fit is a ring/tree time (racksim-bench runs NCCL with NVLS off): where racksim picks NVLS the modelled
// time stands, and the report says a fit was passed over (a review found the fit silently unused under the default
// training.nvls while the transfer line said "measured NCCL collectives"); with NVLS off the fit applies.
TEST(Calibration, MeasuredNcclFitPassedOverForNvlsIsSaid) {
  std::ifstream in(kSrc + "/hardware_models/calibrated/h100.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string cal = text.str();
  const std::string empty = "nccl: []";
  ASSERT_NE(cal.find(empty), std::string::npos);
  cal.replace(cal.find(empty), empty.size(),
              "nccl:\n  - {op: all_reduce, gpus: 8, source: 1, latency: 25 us, algbw: 50 GB/s, busbw: 87.5 GB/s, "
              "fit: {points: 11, rms: 0.01, max_abs: 0.02}}");
  const fs::path dir = fs::temp_directory_path() / "racksim_nvls_fit";
  fs::create_directories(dir);
  { std::ofstream(dir / "slow-nccl.yaml") << cal; }
  const std::string sc = "system: {preset: h100-sxm, gpus: 8, calibration: " + (dir / "slow-nccl.yaml").string() +
                         "}\nmodel: {preset: llama3-8b}\ntraining: {seq_len: 8192, global_batch: 8, optimizer_sharding: none}\n";
  { std::ofstream(dir / "s.yaml") << sc; }
  std::vector<nlohmann::json> r;
  for (const char* nvls : {"true", "false"}) {
    const auto out = racksim::testing::run_cli({"run", (dir / "s.yaml").string(), "--json", "--set",
                                                 std::string("training.nvls=") + nvls});
    ASSERT_EQ(out.code, 0) << out.err;
    r.push_back(nlohmann::json::parse(out.out));
  }
  // (Not prefixed "calibration:", which a sweep's CSV leaves out as the same at every point: this one is not.)
  const std::string said = "measured NCCL fit passed over: the calibration's all_reduce on 8 GPUs";
  EXPECT_NE(r[0]["warnings"].dump().find(said), std::string::npos) << r[0]["warnings"].dump();
  EXPECT_EQ(r[1]["warnings"].dump().find(said), std::string::npos);
  // The measured 50 GB/s all-reduce of the fp32 gradients is far slower than the modelled NVLS or ring.
  EXPECT_GT(r[1]["breakdown_s"]["exposed_communication"].get<double>(),
            2 * r[0]["breakdown_s"]["exposed_communication"].get<double>());
}
