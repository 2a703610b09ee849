// The calibration against its measurements (hardware_models/calibrated/h200.yaml, fitted from
// calibration/data/ by `racksim calibrate fit`; docs/calibration.md): the fitted row-kernel, XLA
// runtime, attention and GEMM models against every measured row, and the measured H200 steps
// described as scenarios (scenarios/validation/h200/, h200x2.yaml, h200-torch.yaml) against their
// step times and peak memory. The fit itself and the loader are unit tests (tests/unit/test_calibration.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "hardware_models/calibration.h"
#include "hardware_models/compute_model.h"
#include "hardware_models/system_preset.h"
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
const std::string kCommitted = kSrc + "/hardware_models/calibrated/h200.yaml";

std::shared_ptr<const hw::Calibration> committed() {
  static auto c = hw::load_calibration_file(kCommitted);
  return c;
}

hw::SystemSpec preset(const std::string& name) { return racksim::testing::shipped_preset(name); }
// A shipped preset with the committed H200 calibration applied (the transfer rule where it is another GPU).
hw::SystemSpec calibrated(const std::string& name) {
  hw::SystemSpec sys = preset(name);
  hw::apply_calibration(sys, *committed());
  return sys;
}

// The median of `v` (the mean of the middle two for an even count).
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// A tensor-core GEMM of `batch` x (m x n x k) in dtype d, as the replay hands it to hw::kernel_timing.
hw::KernelWork gemm_work(sim::Dtype d, double m, double n, double k, int batch = 1) {
  hw::KernelWork w;
  w.tensor_core = true;
  w.dtype = d;
  w.m = m;
  w.n = n;
  w.k = k;
  w.batch = batch;
  w.flops = 2 * batch * m * n * k;
  return w;
}

}  // namespace

// The row-kernel model (t = max(bytes / HBM, bytes * thread_bytes / k)) against every profiled
// XLA Triton fusion, recomputed from k and the calibrated HBM rate: rms within 15%, every kernel
// within 30% (the model knows operand bytes, not the registers the compiler chose: kernels of
// equal thread bytes ran 25-37.5% occupancy). Before the bound the softmax backward was 2.2-2.7x
// slower than predicted.
TEST(CalibRowKernels, ModelWithinToleranceOfEveryProfiledFusion) {
  auto c = committed();
  ASSERT_TRUE(c && c->row_kernels && c->hbm);
  const auto& f = *c->row_kernels;
  ASSERT_GE(f.kernels.size(), 12u);
  double ss = 0;
  int bound = 0;
  for (const auto& p : f.kernels) {
    const double m = std::max(p.bytes / c->hbm->bandwidth_Bps, p.bytes * p.thread_bytes / f.k_Bps_B);
    const double r = (m - p.measured_s) / p.measured_s;
    EXPECT_LT(std::abs(r), 0.30) << p.label;
    ss += r * r;
    if (p.bytes * p.thread_bytes / f.k_Bps_B > p.bytes / c->hbm->bandwidth_Bps) ++bound;
  }
  EXPECT_LT(std::sqrt(ss / static_cast<double>(f.kernels.size())), 0.15);
  EXPECT_GE(bound, 8);  // the bound governs the softmax fusions, not the transposes
}

// The loop-fusion model (t = max(bytes / HBM, indices / index_rate)) against every profiled XLA loop-emitter
// kernel (fills of 1-8 bytes per index, element-wise maps, the attention programs' converts and transposes),
// recomputed from the rate and the calibrated HBM rate: every index-bound kernel within 15% (the smallest, 8M
// indices, carry a microsecond the model leaves out), rms over all within 10%, and the bound governs every
// kernel of at most 4 bytes per index (a pred, s8, bf16 or f32 fill, a bf16 negate: 158 us for 2^27 indices
// whatever the dtype; at the HBM rate a bf16 fill would take 69 us and a pred fill 34 us). Streaming kernels
// are left to the HBM model, which is up to 20% slow for XLA's pure-write fills (a noted bias, not fitted).
TEST(CalibLoopFusions, ModelWithinToleranceOfEveryProfiledLoopKernel) {
  auto c = committed();
  ASSERT_TRUE(c && c->loop_fusions && c->hbm);
  const auto& f = *c->loop_fusions;
  ASSERT_GE(f.kernels.size(), 40u);
  EXPECT_GT(f.index_rate_per_s, 7e11);
  EXPECT_LT(f.index_rate_per_s, 9e11);
  double ss = 0;
  int small_bytes = 0;
  for (const auto& p : f.kernels) {
    const double hbm_s = p.bytes / c->hbm->bandwidth_Bps, index_s = p.indices / f.index_rate_per_s;
    const double r = (std::max(hbm_s, index_s) - p.measured_s) / p.measured_s;
    ss += r * r;
    if (index_s > hbm_s) {
      EXPECT_LT(std::abs(r), 0.15) << p.label;
    }
    if (p.bytes / p.indices <= 4.0) {
      EXPECT_GT(index_s, hbm_s) << p.label;
      ++small_bytes;
    }
  }
  EXPECT_GE(small_bytes, 15);
  EXPECT_LT(std::sqrt(ss / static_cast<double>(f.kernels.size())), 0.10);
}

// XLA's host work per step against the unrolled programs it was fitted to: the host is a VM
// whose repeated runs of one program differed by up to 40% (dispatch_n256 vs
// dispatch_same_args_n256), so the bound is loose with command buffers: rms within 30%, every row
// within 45%; without them (launch-bound) rms within 15%, every row within 25%; and the
// coefficients are physical.
TEST(CalibXlaRuntime, ModelWithinToleranceOfEveryDispatchRow) {
  auto c = committed();
  ASSERT_TRUE(c && c->xla_runtime);
  const auto& f = *c->xla_runtime;
  ASSERT_GE(f.rows.size(), 20u);
  double ss = 0, ss_thunk = 0;
  int n = 0, n_thunk = 0;
  for (const auto& p : f.rows) {
    if (p.command_buffers) {
      const double m = f.program_s + f.command_s * p.commands + f.rerecord_ref_s * p.rerecorded_refs;
      const double r = (m - p.exposed_s) / p.exposed_s;
      EXPECT_LT(std::abs(r), 0.45) << p.label;
      ss += r * r;
      ++n;
    } else {
      // Without command buffers the programs are launch-bound and the host less noisy.
      const double m = f.thunk_program_s + f.thunk_launch_s * p.commands;
      const double r = (m - p.exposed_s) / p.exposed_s;
      EXPECT_LT(std::abs(r), 0.25) << p.label;
      ss_thunk += r * r;
      ++n_thunk;
    }
  }
  EXPECT_LT(std::sqrt(ss / n), 0.30);
  ASSERT_GE(n_thunk, 8);
  EXPECT_LT(std::sqrt(ss_thunk / n_thunk), 0.15);
  EXPECT_GT(f.command_s, 0.5e-6);
  EXPECT_LT(f.command_s, 10e-6);
  EXPECT_GT(f.rerecord_ref_s, 0.0);
  EXPECT_LT(f.rerecord_ref_s, f.command_s);
  // An XLA thunk launch costs more than a bare cudaLaunchKernel from C++ (racksim-bench's eager figure).
  ASSERT_TRUE(c->launch);
  EXPECT_GT(f.thunk_launch_s, c->launch->eager_kernel_launch_s);
  EXPECT_LT(f.thunk_launch_s, 20e-6);
}

// Fused attention: the fitted curves against every measured shape (rms within 10%, every one
// within 15%), and a flash kernel on the calibrated H200 runs at exactly that efficiency.
TEST(CalibAttention, CurvesFitTheMeasuredKernelsAndTheEngineUsesThem) {
  auto c = committed();
  ASSERT_TRUE(c && c->attention);
  const auto& f = *c->attention;
  ASSERT_GE(f.rows.size(), 20u);
  double ss = 0;
  const double peak = 989.4e12;
  for (const auto& p : f.rows) {
    const auto& cv = f.curve(p.backward, p.causal);
    const double m = p.flops / (peak * cv.e_max) * (1 + cv.s0 / p.seq);
    const double r = (m - p.measured_s) / p.measured_s;
    EXPECT_LT(std::abs(r), 0.15) << p.seq << (p.backward ? " backward" : " forward");
    ss += r * r;
  }
  EXPECT_LT(std::sqrt(ss / static_cast<double>(f.rows.size())), 0.10);
  const hw::SystemSpec sys = calibrated("h200-sxm");
  hw::KernelWork w;
  w.tensor_core = true;
  w.flops = 3.4e11;
  w.attention = 2;
  w.attention_causal = true;
  w.attention_seq = 2048;
  const auto t = hw::kernel_timing(sys, w);
  const double e = f.backward_causal.e_max / (1 + f.backward_causal.s0 / 2048);
  EXPECT_DOUBLE_EQ(t.compute_s, 3.4e11 / (sys.gpu.peak_dense_flops_per_s.at(sim::Dtype::bf16) * e));
}

// The fitted GEMM model against every measured shape, recomputed here from the file's four
// parameters and the calibrated HBM rate (not read from the table). Tolerances: every compute-
// bound shape within the data's own repeat spread (the largest difference between two
// measurements of one shape, from the card's power state: no smooth model can be held tighter
// per shape), and the rms over them within 8%; HBM-bound shapes through the roofline within 15%.
TEST(CalibGemm, ModelWithinToleranceOfEveryMeasuredShape) {
  auto c = committed();
  ASSERT_TRUE(c && c->hbm);
  for (const auto& [d, m] : c->gemm) {
    const double in_bytes = d == sim::Dtype::bf16 ? 2 : 1;
    double ss = 0;
    int n = 0;
    std::printf("gemm %s: e_max %.4f k0 %.1f t0 %.3f us; tolerance per shape %.1f%% (repeat spread), rms 8%%\n",
                sim::to_string(d).c_str(), m.e_max, m.k0, m.t0_s * 1e6, 100 * m.repeat_spread);
    std::printf("  %5s %6s %6s %6s %4s %10s %10s %9s\n", "batch", "m", "n", "k", "out", "meas TF/s", "model TF/s", "resid");
    for (const auto& p : m.shapes) {
      const double f = 2.0 * p.batch * p.m * p.n * p.k;
      const double t_comp = f / (m.peak_flops_per_s * m.efficiency(p.m, p.n, p.k, p.batch, m.peak_flops_per_s, m.e_max));
      const double bytes = p.batch * ((p.m * p.k + p.n * p.k) * in_bytes + p.m * p.n * (p.out == "f32" ? 4 : 2));
      const double t = std::max(t_comp, bytes / c->hbm->bandwidth_Bps);
      const double r = (t - p.measured_s) / p.measured_s;
      std::printf("  %5d %6.0f %6.0f %6.0f %4s %10.1f %10.1f %+8.1f%%%s %s\n", p.batch, p.m, p.n, p.k, p.out.c_str(),
                  f / p.measured_s / 1e12, f / t / 1e12, 100 * r, p.hbm_bound ? " HBM" : "", p.label.c_str());
      EXPECT_NEAR(r, p.residual, 1e-3) << "the file's residual column disagrees with the model";
      if (p.hbm_bound) {
        EXPECT_LE(std::fabs(r), 0.15) << p.m << "x" << p.n << "x" << p.k << " batch " << p.batch;
      } else {
        EXPECT_LE(std::fabs(r), m.repeat_spread) << p.m << "x" << p.n << "x" << p.k;
        ss += r * r;
        ++n;
      }
    }
    ASSERT_GT(n, 50);
    EXPECT_LE(std::sqrt(ss / n), 0.08) << sim::to_string(d);
    EXPECT_NEAR(std::sqrt(ss / n), m.rms_residual, 1e-3);
  }
}

// Issue 4's memory acceptance at the scenario level: every measured H200 JAX step described as a
// racksim scenario (scenarios/validation/h200/, written by make_scenarios.py) within 10% of
// peak_bytes_in_use, and its step time within 10% of the measured median except the rows listed
// (ours-s1_none_unrolled: XLA's host work per buffer reference and its finer norm/MLP kernels are not
// all in the scenario builder, and the same program measured 8.8% faster in the reference row; g1_dots, -18.7%
// until the builder ran the grouped-query softmax backward twice as XLA does, is now -8.5%; docs/validation.md), and its
// peak memory within 10% (ours-l7b16_b2_mflash -12.5% until the builder kept the slices of each layer's fp32 weights the
// unrolled program cuts out of its stacked arrays for the checkpointed layer's backward, now -0.3%; calibration/data/
// h200-2026-12-04-llama7b). A row that improves or regresses shows up here.
TEST(ScenarioH200, JaxStepsWithinTenPercent) {
  const std::set<std::string> step_misses = {"ours-s1_none_unrolled.yaml"};
  const std::set<std::string> memory_misses = {};
  auto number_before = [](const std::string& text, const std::string& tag) {
    const auto at = text.find(tag);
    if (at == std::string::npos) return -1.0;
    const auto start = text.rfind(' ', at - 2) + 1;
    return std::stod(text.substr(start, at - 1 - start));
  };
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kSrc + "/scenarios/validation/h200")) {
    const std::string name = e.path().filename().string();
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const double peak = number_before(text, "B peak_bytes_in_use");
    const double step = number_before(text, "s median step");
    ASSERT_GT(peak, 0) << name;
    ASSERT_GT(step, 0) << name;
    const auto r = sim::simulate(sim::load_scenario(e.path().string()));
    const double mem_err = r.report["peak_memory_bytes"].get<double>() / peak - 1;
    if (memory_misses.count(name))
      EXPECT_GT(std::fabs(mem_err), 0.10) << name << " memory now within 10%: take it off the list";
    else
      EXPECT_LT(std::fabs(mem_err), 0.10) << name << " peak " << r.report["peak_memory_bytes"] << " measured " << peak;
    // The header rounds the measured step to 0.1 ms.
    const double step_err = r.report["step_time_s"].get<double>() / step - 1;
    if (step_misses.count(name))
      EXPECT_GT(std::fabs(step_err), 0.10) << name << " now within 10%: take it off the list";
    else
      EXPECT_LT(std::fabs(step_err), 0.10) << name << " step " << r.report["step_time_s"] << " measured " << step;
    ++checked;
  }
  EXPECT_GE(checked, 35);  // every scenario of the folder, the five reference-* steps included
}

// The two-GPU data-parallel JAX steps at scenario level (the one-GPU scenarios with gpus 2, dp 2): every
// peak within 10%, every step but one. x2_dp_s1_none_scan, the small step, is 11.5% fast (13.6% from its bf16
// gradient all-reduces, as XLA's program does, 2026-12-04, until its stack copies took the loop-index bound the same
// day; -9.6% with fp32 all-reduces): the replay of its own program is -7.3% (HloReplay.TwoGpuStepsWithinTenPercent;
// -10.5% before its fills and in-place updates were bounded by their output indices); what both lack is its host
// dispatch and the in-loop all-reduce waits of a 24 ms step (calibration/data/h200x2-2026-11-29-mechanisms/README.md,
// calibration/data/h200-2026-12-04-sync-async).
TEST(ScenarioH200, TwoGpuDataParallelStepsWithinTenPercent) {
  const auto r = racksim::testing::run_cli({"validate", kSrc + "/scenarios/validation/h200x2.yaml"});
  EXPECT_EQ(r.code, 4) << r.out << r.err;  // one check outside its tolerance
  EXPECT_NE(r.out.find("10 checks: 9 pass, 1 outside tolerance"), std::string::npos) << r.out;
  EXPECT_NE((r.out + r.err).find("case 'x2_dp_s1_none_scan': step_time_s predicted"), std::string::npos) << r.out << r.err;
}

// racksim's Megatron path against PyTorch steps that keep Megatron's state, with fused element-wise
// kernels (TorchInductor): peak memory within 10% on every row (it is within 2%). The step times
// are 6-8% fast (7-11% before the step's gradient-buffer memset and master-to-model copy, 2026-12-05) and not asserted
// (calibration/data/h200-2026-11-29-torch/README.md).
TEST(ScenarioH200, MegatronStateMemoryMatchesPyTorch) {
  const auto r = racksim::testing::run_cli({"validate", kSrc + "/scenarios/validation/h200-torch.yaml"});
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line))
    if (line.find("peak_memory_bytes") != std::string::npos) {
      EXPECT_NE(line.find("  yes"), std::string::npos) << line;
      ++rows;
    }
  EXPECT_EQ(rows, 3) << r.out << r.err;
}

// What full recompute adds to the step: the measured full-minus-none difference of the compiled p1 steps
// (68.8 ms: torch.utils.checkpoint around a compiled layer re-runs its whole forward, as Megatron's
// reentrant checkpoint does) against racksim's, within 15%. It was 48.4 ms (-30%) while the recompute
// skipped the layer's output projection; 61.4 ms (-11%) with it.
TEST(ScenarioH200, FullRecomputeCostMatchesPyTorch) {
  const auto r = racksim::testing::run_cli({"validate", kSrc + "/scenarios/validation/h200-torch.yaml", "--json"});
  std::map<std::string, std::pair<double, double>> step;  // case -> (predicted, measured)
  for (const auto& row : nlohmann::json::parse(r.out))
    if (row["field"] == "step_time_s") step[row["case"]] = {row["predicted"], row["measured"]};
  ASSERT_TRUE(step.count("torch p1_none_compiled") && step.count("torch p1_full_compiled")) << r.out;
  const double predicted = step["torch p1_full_compiled"].first - step["torch p1_none_compiled"].first;
  const double measured = step["torch p1_full_compiled"].second - step["torch p1_none_compiled"].second;
  EXPECT_NEAR(measured, 0.0688, 0.0005);
  EXPECT_NEAR(predicted / measured, 1.0, 0.15) << predicted << " s against " << measured << " s";
}

// The GEMM model at the at-scale MoE rows' expert shapes (calibration/data/h200-2026-12-01-grouped-gemm: each
// expert GEMM kind of a layer as one cuBLASLt GEMM of G*m tokens and as Transformer Engine's 4-stream grouped
// GEMM). racksim times a layer's experts as one batched GEMM of G x (m x n x k); the measured times ran after 20 s
// at the power cap but at clocks between 1,440 and 1,965 MHz (the data's README: about 7% of every ratio is the
// card's power state). Printed per shape; asserted: the model against TE's grouped GEMM within 35% per kind and
// 15% summed per layer, so a change of the shape model that moves the MoE rows' expert time shows here.
TEST(CalibGemm, ExpertShapesAgainstGroupedGemmMeasurements) {
  ASSERT_TRUE(committed());
  const hw::SystemSpec sys = calibrated("h200-sxm");
  std::ifstream in(kSrc + "/calibration/data/h200-2026-12-01-grouped-gemm/grouped_gemm.json");
  ASSERT_TRUE(in);
  const auto data = nlohmann::json::parse(in);
  std::map<std::string, std::array<double, 3>> layers;  // model, single, TE grouped (s)
  int rows = 0;
  std::printf("  %-36s %-10s %3s %5s %5s %5s %9s %9s %9s %8s\n", "layer", "kind", "G", "m", "n", "k", "model us",
              "single us", "TE us", "model/TE");
  for (const auto& r : data["results"]) {
    hw::KernelWork w;
    w.tensor_core = true;
    w.dtype = sim::Dtype::bf16;
    const double G = r["experts"], m = r["m"], n = r["n"], k = r["k"];
    w.m = m;
    w.n = n;
    w.k = k;
    w.batch = static_cast<int>(G);
    w.flops = 2 * G * m * n * k;
    w.hbm_bytes = G * ((m * k + k * n) * 2 + m * n * 2);
    const auto t = hw::kernel_timing(sys, w);
    const double model_s = std::max({t.compute_s, t.hbm_bytes / (sys.gpu.hbm_bandwidth_Bps * sys.gpu.hbm_efficiency), t.min_s});
    const double single_s = r["variants"]["single"]["s"], te_s = r["variants"]["multistream"]["s"];
    const std::string layer = r["layer"];
    std::printf("  %-36s %-10s %3.0f %5.0f %5.0f %5.0f %9.1f %9.1f %9.1f %+7.1f%%\n", layer.c_str(),
                r["kind"].get<std::string>().c_str(), G, m, n, k, model_s * 1e6, single_s * 1e6, te_s * 1e6,
                100 * (model_s / te_s - 1));
    EXPECT_LT(std::fabs(model_s / te_s - 1), 0.35) << layer << " " << r["kind"];
    auto& l = layers[layer];
    l[0] += model_s;
    l[1] += single_s;
    l[2] += te_s;
    ++rows;
  }
  EXPECT_EQ(rows, 60);
  for (const auto& [layer, l] : layers) {
    std::printf("  %-36s six GEMMs: model %.2f ms, single %.2f ms, TE %.2f ms: model/TE %+.1f%%\n", layer.c_str(),
                l[0] * 1e3, l[1] * 1e3, l[2] * 1e3, 100 * (l[0] / l[2] - 1));
    EXPECT_LT(std::fabs(l[0] / l[2] - 1), 0.15) << layer;
  }
}

// A weight-gradient GEMM adding into the fp32 main gradient in place (Transformer Engine's fused accumulation) against
// the same GEMM writing bf16, measured on two H100s through the descriptors TE's cublas_gemm builds
// (calibration/data/h100-2026-12-06-wgrad-te-path: three runs of three interleaved rounds, 9 weights x 5 token
// counts): racksim adds gpu.wgrad_accumulate_serial_bytes* per output element at the HBM rate to the GEMM it models
// (KernelWork::accumulate_fp32), by kernel family: bf16 (TE's NT layout), per-tensor fp8 (TN) and the blockwise
// recipe's fp8 (1x128 scales on both operands). Checked: (1) each preset figure is the data's least-squares fit
// (extra time against output elements, through the origin, 4,096 or more tokens, pooled; derive.py), within 2%, the
// blockwise one 0 where the fit is about zero; (2) the model adds exactly that; (3) its ratio to the bf16-out GEMM
// against each point's median over the 9 runs x rounds at 4,096 or more tokens, mean deviation within the fit's rms
// (5% bf16 and blockwise, 10% per-tensor fp8, whose extra time grows less than the weight). At 1-2K tokens the
// measured cost is larger than the model's (printed, not asserted: no row runs a wgrad that short).
namespace {
// One run of racksim-bench's wgrad section: (variant, m, n, k, round) -> median seconds, for the points whose result
// check passed (empty when the file is missing).
std::map<std::tuple<std::string, double, double, double, int>, double> wgrad_bench_times(const std::string& path) {
  std::map<std::tuple<std::string, double, double, double, int>, double> t;
  std::ifstream in(path);
  if (!in) return t;
  const auto doc = nlohmann::json::parse(in);  // (named: a range-for over a temporary's member would outlive it)
  for (const auto& r : doc["wgrad"]["results"]) {
    const auto err = r.value("check_max_rel_err", nlohmann::json());
    if (!r.contains("s") || !err.is_number() || err.get<double>() >= 2e-2) continue;  // a failed result check
    t[{r["variant"].get<std::string>(), r["m"].get<double>(), r["n"].get<double>(), r["k"].get<double>(),
       r["round"].get<int>()}] = r["s"]["median"].get<double>();
  }
  return t;
}
// A preset with a committed calibration applied (hardware_models/calibrated/NAME.yaml).
hw::SystemSpec calibrated(const std::string& preset_name, const std::string& calibration) {
  hw::SystemSpec sys = preset(preset_name);
  if (const auto c = hw::load_calibration_file(kSrc + "/hardware_models/calibrated/" + calibration + ".yaml"))
    hw::apply_calibration(sys, *c);
  else
    ADD_FAILURE() << "no calibration " << calibration;
  return sys;
}
}  // namespace

TEST(CalibGemm, WgradFp32AccumulateAgainstItsMeasurement) {
  hw::SystemSpec sys = calibrated("h100-sxm", "h100");
  hw::SystemSpec blockwise = sys;
  hw::apply_fp8_blockwise_recipe(blockwise);
  const double hbm_Bps = sys.gpu.hbm_bandwidth_Bps * sys.gpu.hbm_efficiency;
  struct Point {
    std::vector<double> ratios;                    // accumulate / bf16-out over the runs and rounds
    std::vector<std::pair<double, double>> times;  // (accumulate, bf16-out) seconds
  };
  std::map<std::tuple<std::string, double, double, double>, Point> measured;  // (family, m, n, k)
  const std::string dir = kSrc + "/calibration/data/h100-2026-12-06-wgrad-te-path/";
  for (const char* run : {"run1/wgrad.json", "run2/wgrad_a1.json", "run2/wgrad_a2.json"}) {
    const auto t = wgrad_bench_times(dir + run);
    ASSERT_FALSE(t.empty()) << run;
    for (const auto& [key, acc_s] : t) {
      const auto& [variant, m, n, k, round] = key;
      const auto at = variant.find("_acc_fp32");
      if (at == std::string::npos) continue;
      const std::string family = variant.substr(0, at);
      if (auto out = t.find({family + "_out_bf16", m, n, k, round}); out != t.end()) {
        Point& p = measured[{family, m, n, k}];
        p.ratios.push_back(acc_s / out->second);
        p.times.emplace_back(acc_s, out->second);
      }
    }
  }
  struct Family {
    const hw::SystemSpec* spec;
    sim::Dtype dtype;
    double rms;  // the fit's, as derive.py prints it (rounded up)
    double sxy = 0, sxx = 0, deviation = 0;
    int checked = 0;
  };
  std::map<std::string, Family> families = {{"bf16_nt", {&sys, sim::Dtype::bf16, 0.05}},
                                            {"fp8_e4m3_tn", {&sys, sim::Dtype::fp8, 0.10}},
                                            {"fp8_block_tn", {&blockwise, sim::Dtype::fp8, 0.05}}};
  for (auto& [key, p] : measured) {
    const auto& [family, m, n, k] = key;
    const auto f = families.find(family);
    if (f == families.end()) continue;
    Family& fam = f->second;
    hw::KernelWork w = gemm_work(fam.dtype, m, n, k);
    const double plain_s = hw::kernel_timing(*fam.spec, w).compute_s;
    w.accumulate_fp32 = true;
    const double acc_s = hw::kernel_timing(*fam.spec, w).compute_s;
    EXPECT_NEAR(acc_s - plain_s, hw::wgrad_accumulate_serial_bytes(*fam.spec, fam.dtype) * m * n / hbm_Bps, 1e-12);
    std::sort(p.ratios.begin(), p.ratios.end());
    const double median = p.ratios[p.ratios.size() / 2], model = acc_s / plain_s;
    std::printf("  %-13s %5.0f x %5.0f, tokens %6.0f: accumulate / bf16 out, model %.3f, measured %.3f (%.3f..%.3f)\n",
                family.c_str(), m, n, k, model, median, p.ratios.front(), p.ratios.back());
    if (k < 4096) continue;
    for (const auto& [a, b] : p.times) {
      fam.sxy += m * n * (a - b);
      fam.sxx += m * n * m * n;
    }
    fam.deviation += std::fabs(model / median - 1);
    ++fam.checked;
  }
  // The blockwise recipe's weight gradient (both operands 1x128) against per-tensor fp8 at the same shape, bf16 out:
  // the preset's gpu.fp8_blockwise_wgrad_rate_ratio is the median of per-tensor time / blockwise time over the points of
  // 4,096 or more tokens of all runs (derive.py), and a blockwise fp8 wgrad runs at that ratio of the per-tensor rate
  // where the forward runs at gpu.fp8_blockwise_rate_ratio's.
  {
    std::vector<double> ratios;
    for (const char* run : {"run1/wgrad.json", "run2/wgrad_a1.json", "run2/wgrad_a2.json", "run3/wgrad.json"}) {
      const auto t = wgrad_bench_times(dir + run);
      ASSERT_FALSE(t.empty()) << run;
      for (const auto& [key, s] : t) {
        const auto& [variant, m, n, k, round] = key;
        if (variant != "fp8_e4m3_tn_out_bf16" || k < 4096) continue;
        if (auto b = t.find({"fp8_block_tn_out_bf16", m, n, k, round}); b != t.end()) ratios.push_back(s / b->second);
      }
    }
    ASSERT_GT(ratios.size(), 300u);
    const double median = median_of(ratios);
    std::printf("  blockwise fp8 wgrad rate / per-tensor: measured median %.3f over %zu points, preset %.3f\n", median,
                ratios.size(), sys.gpu.fp8_blockwise_wgrad_rate_ratio);
    EXPECT_NEAR(sys.gpu.fp8_blockwise_wgrad_rate_ratio, median, 0.005);
    hw::KernelWork w = gemm_work(sim::Dtype::fp8, 6144, 32768, 4096);
    const double per_tensor_s = hw::kernel_timing(sys, w).compute_s, forward_s = hw::kernel_timing(blockwise, w).compute_s;
    w.wgrad = true;
    EXPECT_NEAR(hw::kernel_timing(sys, w).compute_s, per_tensor_s, 1e-15);  // per-tensor: a wgrad at the fp8 rate
    // (to 0.005: the ratios scale the ceiling; the calibrated shape curve's fixed cost stays)
    EXPECT_NEAR(per_tensor_s / forward_s, blockwise.gpu.fp8_blockwise_rate_ratio, 0.005);
    EXPECT_NEAR(per_tensor_s / hw::kernel_timing(blockwise, w).compute_s, blockwise.gpu.fp8_blockwise_wgrad_rate_ratio, 0.005);
  }
  for (const auto& [family, fam] : families) {
    const double fitted_B = fam.sxy / fam.sxx * hbm_Bps, preset_B = hw::wgrad_accumulate_serial_bytes(*fam.spec, fam.dtype);
    std::printf("  %-13s fitted %.3f bytes per element, preset %.3f; mean |model / measured - 1| %.3f over %d points\n",
                family.c_str(), fitted_B, preset_B, fam.deviation / fam.checked, fam.checked);
    EXPECT_GE(fam.checked, 26) << family;  // 9 weights x 3 token counts, less a pair whose check failed
    if (family == "fp8_block_tn") {
      EXPECT_EQ(preset_B, 0);
      EXPECT_LT(std::fabs(fitted_B), 0.2);
    } else {
      EXPECT_NEAR(preset_B / fitted_B, 1.0, 0.02) << family;
    }
    EXPECT_LT(fam.deviation / fam.checked, fam.rms) << family;
  }
}

// A bf16 weight gradient as Transformer Engine runs it (operands in NT, both tokens-major) against the TN product the
// GEMM shape curve is fitted on, measured on four H100s (five runs) through TE's cuBLASLt descriptors
// (calibration/data/h100-2026-12-06-wgrad-te-path, runs 1-4: 9 weights x 5 token counts x 3 interleaved rounds).
// Checked: (1) each point of the preset's gpu.bf16_wgrad_nt_time_ratio is the median of time NT / time TN at its
// depth over all runs, within 0.003; (2) the model scales a TE-layout bf16 wgrad by exactly the table at a measured
// depth, by the log2 interpolation between two, and leaves fp8, un-flagged GEMMs and uncalibrated presets alone; (3) TE's whole wgrad (NT,
// fp32 accumulate in place), measured, against the model's at 2,048-16,384 tokens: median of measured / model within
// 5% at each depth (it was 3-6% slow at 4-16K before the layout). At 1,024 tokens the measured accumulate costs more
// than the model's (printed, not asserted).
TEST(CalibGemm, Bf16WgradInTransformerEngineLayoutAgainstItsMeasurement) {
  const hw::SystemSpec sys = calibrated("h100-sxm", "h100");
  ASSERT_EQ(sys.gpu.bf16_wgrad_nt_time_ratio.size(), 5u);
  const std::string dir = kSrc + "/calibration/data/h100-2026-12-06-wgrad-te-path/";
  std::map<double, std::vector<double>> layout, whole;  // tokens -> NT / TN (bf16 out); measured TE wgrad / model
  for (const char* run : {"run1/wgrad.json", "run2/wgrad_a1.json", "run2/wgrad_a2.json", "run3/wgrad.json", "run4/wgrad.json"}) {
    const auto t = wgrad_bench_times(dir + run);
    ASSERT_FALSE(t.empty()) << run;
    for (const auto& [key, s] : t) {
      const auto& [variant, m, n, k, round] = key;
      if (variant == "bf16_nt_out_bf16") {
        if (auto tn = t.find({"bf16_tn_out_bf16", m, n, k, round}); tn != t.end()) layout[k].push_back(s / tn->second);
      }
      if (variant == "bf16_nt_acc_fp32") {
        hw::KernelWork w = gemm_work(sim::Dtype::bf16, m, n, k);
        w.wgrad = w.wgrad_te_layout = w.accumulate_fp32 = true;
        whole[k].push_back(s / hw::kernel_timing(sys, w).compute_s);
      }
    }
  }
  for (const auto& [tokens, ratio] : sys.gpu.bf16_wgrad_nt_time_ratio) {
    ASSERT_TRUE(layout.count(tokens)) << tokens;
    EXPECT_GE(layout[tokens].size(), 130u) << tokens;
    const double measured = median_of(layout[tokens]), model_whole = median_of(whole[tokens]);
    std::printf("  bf16 wgrad, %5.0f tokens: NT / TN measured %.4f, preset %.3f; TE's wgrad measured / model %.3f\n", tokens,
                measured, ratio, model_whole);
    EXPECT_NEAR(ratio, measured, 0.003) << tokens;
    if (tokens >= 2048) {
      EXPECT_NEAR(model_whole, 1.0, 0.05) << tokens;
    }
  }
  auto timed = [&](double k, bool te, sim::Dtype d) {
    hw::KernelWork w = gemm_work(d, 6144, 32768, k);
    w.wgrad = w.wgrad_te_layout = te;
    return hw::kernel_timing(sys, w).compute_s;
  };
  const auto& table = sys.gpu.bf16_wgrad_nt_time_ratio;
  for (const auto& [tokens, ratio] : table)
    EXPECT_NEAR(timed(tokens, true, sim::Dtype::bf16) / timed(tokens, false, sim::Dtype::bf16), ratio, 1e-12) << tokens;
  // halfway between 4,096 and 8,192 in log2: the mean of the two points
  const double mid = 4096 * std::sqrt(2.0);
  EXPECT_NEAR(hw::bf16_wgrad_nt_time_ratio(sys, mid), 0.5 * (table[2].second + table[3].second), 1e-12);
  EXPECT_NEAR(timed(mid, true, sim::Dtype::bf16) / timed(mid, false, sim::Dtype::bf16), 0.5 * (table[2].second + table[3].second), 1e-12);
  EXPECT_EQ(hw::bf16_wgrad_nt_time_ratio(sys, 256), table.front().second);   // flat beyond the ends
  EXPECT_EQ(hw::bf16_wgrad_nt_time_ratio(sys, 65536), table.back().second);
  EXPECT_EQ(timed(4096, true, sim::Dtype::fp8), timed(4096, false, sim::Dtype::fp8));  // TE's fp8 wgrad runs TN
  // Without a calibrated bf16 curve the efficiency is the preset's cited ceiling (another layout): no ratio.
  const hw::SystemSpec uncalibrated = preset("h100-sxm");
  hw::KernelWork te = gemm_work(sim::Dtype::bf16, 6144, 32768, 4096), plain = te;
  te.wgrad = te.wgrad_te_layout = true;
  EXPECT_EQ(hw::kernel_timing(uncalibrated, te).compute_s, hw::kernel_timing(uncalibrated, plain).compute_s);
  hw::SystemSpec blackwell = preset("gb200-nvl72");  // not measured there: no layout factor
  EXPECT_TRUE(blackwell.gpu.bf16_wgrad_nt_time_ratio.empty());
  EXPECT_EQ(hw::bf16_wgrad_nt_time_ratio(blackwell, 4096), 1.0);
}

// The H200's own wgrad figures (calibration/data/h200-2026-12-07-wgrad-te-path: one card, two runs of three interleaved
// rounds, the same 9 weights x 5 token counts and descriptors as the H100s'), which the h200-sxm preset takes where it
// had carried the H100s': each of its figures is the H200 data's, as that folder's derive.py computes it -- the fp32
// accumulate's least-squares fit per kernel family within 2% (at the H200's calibrated HBM rate), the blockwise wgrad
// rate ratio's median within 0.005, each NT / TN point's median within 0.003 -- and TE's whole bf16 wgrad measured
// there against the model at 2-16K tokens: 1.035 / 1.053 / 1.039 / 0.995 of it (the model 3-5% fast at 2-8K on this
// card, whose plain products are not the ones the H200's GEMM curve was fitted on; the H100s' were within 4%), asserted
// within 6% at each depth and 4% on their mean.
TEST(CalibGemm, H200WgradFiguresAreItsOwnMeasurement) {
  hw::SystemSpec sys = calibrated("h200-sxm", "h200");
  hw::SystemSpec blockwise = sys;
  hw::apply_fp8_blockwise_recipe(blockwise);
  const double hbm_Bps = sys.gpu.hbm_bandwidth_Bps * sys.gpu.hbm_efficiency;
  std::map<std::string, std::pair<double, double>> accumulate;  // family -> (sum x y, sum x x), >= 4,096 tokens
  std::map<double, std::vector<double>> layout, whole;
  std::vector<double> blockwise_ratios;
  const std::string dir = kSrc + "/calibration/data/h200-2026-12-07-wgrad-te-path/";
  for (const char* run : {"wgrad_a1.json", "wgrad_a2.json"}) {
    const auto t = wgrad_bench_times(dir + run);
    ASSERT_FALSE(t.empty()) << run;
    for (const auto& [key, s] : t) {
      const auto& [variant, m, n, k, round] = key;
      auto other = [&](const std::string& v) {
        const auto it = t.find({v, m, n, k, round});
        return it == t.end() ? 0.0 : it->second;
      };
      if (const auto at = variant.find("_acc_fp32"); at != std::string::npos && k >= 4096) {
        if (const double out = other(variant.substr(0, at) + "_out_bf16"); out > 0) {
          auto& [sxy, sxx] = accumulate[variant.substr(0, at)];
          sxy += m * n * (s - out);
          sxx += m * n * m * n;
        }
      }
      if (variant == "bf16_nt_out_bf16" && other("bf16_tn_out_bf16") > 0) layout[k].push_back(s / other("bf16_tn_out_bf16"));
      if (variant == "fp8_e4m3_tn_out_bf16" && k >= 4096 && other("fp8_block_tn_out_bf16") > 0)
        blockwise_ratios.push_back(s / other("fp8_block_tn_out_bf16"));
      if (variant == "bf16_nt_acc_fp32") {
        hw::KernelWork w = gemm_work(sim::Dtype::bf16, m, n, k);
        w.wgrad = w.wgrad_te_layout = w.accumulate_fp32 = true;
        whole[k].push_back(s / hw::kernel_timing(sys, w).compute_s);
      }
    }
  }
  for (const auto& [family, spec, dtype] : {std::tuple{"bf16_nt", &sys, sim::Dtype::bf16},
                                            std::tuple{"fp8_e4m3_tn", &sys, sim::Dtype::fp8},
                                            std::tuple{"fp8_block_tn", &blockwise, sim::Dtype::fp8}}) {
    const auto& [sxy, sxx] = accumulate[family];
    ASSERT_GT(sxx, 0) << family;
    const double fitted_B = sxy / sxx * hbm_Bps, preset_B = hw::wgrad_accumulate_serial_bytes(*spec, dtype);
    std::printf("  H200 %-13s accumulate: fitted %.3f bytes per element, preset %.3f\n", family, fitted_B, preset_B);
    EXPECT_NEAR(preset_B / fitted_B, 1.0, 0.02) << family;
  }
  ASSERT_GT(blockwise_ratios.size(), 150u);
  EXPECT_NEAR(sys.gpu.fp8_blockwise_wgrad_rate_ratio, median_of(blockwise_ratios), 0.005);
  ASSERT_EQ(sys.gpu.bf16_wgrad_nt_time_ratio.size(), 5u);
  double whole_mean = 0;  // over 2,048-16,384 tokens
  for (const auto& [tokens, ratio] : sys.gpu.bf16_wgrad_nt_time_ratio) {
    ASSERT_GE(layout[tokens].size(), 50u) << tokens;
    const double model_whole = median_of(whole[tokens]);
    std::printf("  H200 bf16 wgrad, %5.0f tokens: NT / TN measured %.4f, preset %.3f; TE's wgrad measured / model %.3f\n",
                tokens, median_of(layout[tokens]), ratio, model_whole);
    EXPECT_NEAR(ratio, median_of(layout[tokens]), 0.003) << tokens;
    if (tokens >= 2048) {
      EXPECT_NEAR(model_whole, 1.0, 0.06) << tokens;
      whole_mean += model_whole / 4;
    }
  }
  EXPECT_NEAR(whole_mean, 1.0, 0.04);
}

// The one public Blackwell kernel figure at an MoE row's shape: the MXFP8 grouped expert GEMM of the DeepSeek-V3
// GB200 optimization doc (shared reference at_scale_measurements.md §1b: Megatron-LM@79e8592b docs/discussions/
// deepseek-v3-gb200-optimization, "2,672 TFLOP/s on K = 7168, N = 2048 (flush L2)", TE's multi-stream cuBLAS
// grouped GEMM; M not stated: 4,096 tokens per expert at the doc's balanced EP32 layout). racksim's MXFP8 GEMM
// there is the H200's FP8 shape curve under a ceiling carried by the sustained FP8 rates one source measured on
// both GPUs (docs/decisions.md, "GEMM ceiling across architectures"); that transfer was not chosen with this
// figure, which is an independent check (under the cited burst MAMF the model was 17-28% fast; +1..+8% with MXFP8 at
// FP8's ceiling, -3.9% / +2.8% since it runs at 0.951 of it, Transformer Engine's B300 ratio, 2026-12-07). Within -5..+10%
// for one expert or the 8 local experts as one launch; grouped launch and scale-factor loads on Blackwell are
// not modelled.
TEST(CalibGemm, Gb200MxFp8GroupedExpertGemmAgainstThePublishedFigure) {
  ASSERT_TRUE(committed());
  const hw::SystemSpec sys = calibrated("gb200-nvl72");
  const double published_flops_per_s = 2672e12;
  const double m = 4096, n = 2048, k = 7168;
  for (int batch : {1, 8}) {
    const hw::KernelWork w = gemm_work(sim::Dtype::mxfp8, m, n, k, batch);
    const auto t = hw::kernel_timing(sys, w);
    const double model_flops_per_s = w.flops / t.compute_s;
    std::printf("  GB200 MXFP8 grouped GEMM, %d expert(s) of %gx%gx%g: model %.0f TFLOP/s, published %.0f (%+.1f%%)\n",
                batch, m, n, k, model_flops_per_s / 1e12, published_flops_per_s / 1e12,
                100 * (model_flops_per_s / published_flops_per_s - 1));
    EXPECT_GT(model_flops_per_s / published_flops_per_s, 0.95) << batch;
    EXPECT_LT(model_flops_per_s / published_flops_per_s, 1.10) << batch;
  }
}

// The one public Blackwell Ultra measurement of all four GEMM formats at a training layer's shapes (Transformer Engine's
// GEMM profiling guide, NVIDIA/TransformerEngine@d0067d0 docs/examples/gemm_profiling/gemm_profiling.rst: a B300, the
// twelve GEMMs of a layer of hidden 4,096 and intermediate 16,384 at 15,872 tokens, fprop, dgrad and wgrad, inputs
// quantized before the timed loop) against racksim's GB300 under the H200 calibration carried by the transfer rule,
// stepped from the HGX board to the superchip by the preset's own ratios (bf16 1,847 / 1,769, fp8 3,532 / 3,353).
// BF16 was 1.185x the measured rate while its ceiling stayed the cited burst MAMF and FP8's moved to the sustained
// state (before 2026-12-07; docs/decisions.md, "Blackwell's BF16 GEMM ceiling moves with FP8's"). The FP8 ceiling
// comes from Azure's sustained rates, independent of this source; MXFP8's and NVFP4's from this source's ratios to
// FP8, so theirs check the shape curve and the transfer, not the ratio. The model is the sustained state, the
// measurement a short run (FP8's 0.958x is that offset); NVFP4 keeps its figure under the transfer where FP8's moves
// (FP4 loses less to the power limit than FP8 in Azure's GB200 runs), hence its 1.037x.
TEST(CalibGemm, Gb300CarriedGemmsAgainstTransformerEnginesB300Measurement) {
  ASSERT_TRUE(committed());
  const hw::SystemSpec sys = calibrated("gb300-nvl72");
  const double tokens = 15872;
  const std::vector<std::pair<double, double>> k_n = {{4096, 12288}, {4096, 4096}, {4096, 16384}, {16384, 4096}};
  struct Row {
    sim::Dtype dtype;
    double measured_ms, board, lo, hi;
  };
  const double fp8_board = 3532.0 / 3353.3;
  for (const Row& row : {Row{sim::Dtype::bf16, 13.102, 1847.0 / 1769.0, 0.95, 1.05},
                         Row{sim::Dtype::fp8, 6.812, fp8_board, 0.92, 1.05},
                         Row{sim::Dtype::mxfp8, 7.161, fp8_board, 0.92, 1.05},
                         Row{sim::Dtype::nvfp4, 3.764, fp8_board, 0.92, 1.10}}) {
    double model_s = 0;
    for (const auto& [k, n] : k_n)  // fprop, dgrad, wgrad
      for (const auto& w : {gemm_work(row.dtype, tokens, n, k), gemm_work(row.dtype, tokens, k, n), gemm_work(row.dtype, k, n, tokens)})
        model_s += hw::kernel_timing(sys, w).compute_s;
    const double rate_ratio = row.measured_ms * 1e-3 / row.board / model_s;  // model rate / measured rate on GB300
    std::printf("  GB300 %s, a layer's 12 GEMMs at 15,872 tokens: model %.3f ms, B300 %.3f ms / %.3f: %.3fx the rate\n",
                to_string(row.dtype).c_str(), model_s * 1e3, row.measured_ms, row.board, rate_ratio);
    EXPECT_GT(rate_ratio, row.lo) << to_string(row.dtype);
    EXPECT_LT(rate_ratio, row.hi) << to_string(row.dtype);
  }
}
