// `racksim replay` end to end: the report contract, exit codes, the validate hook, and the
// reference modules' peak memory against the measured peak_bytes_in_use.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/cli/cli.h"
#include "sim/cli/commands.h"
#include "sim/workflow/replay_hook.h"
#include "tests/unit/cli_util.h"

using nlohmann::json;

namespace {

using racksim::testing::run_cli;
const std::string kCorpus = std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/hlo_corpus/";
const std::string kShared = std::string(RACKSIM_SHARED_DIR);

}  // namespace

TEST(HloReplay, ReportHasTheRunContractFields) {
  auto r = run_cli({"replay", kCorpus + "loop_gemm.hlo", "--system", "h200-sxm", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* k : {"racksim_version", "scenario", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                        "mfu", "peak_memory_bytes", "memory_capacity_bytes", "fits", "memory_breakdown_bytes",
                        "breakdown_s", "warnings", "hlo"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
  double sum = 0;
  for (auto& [k, v] : j["breakdown_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["step_time_s"].get<double>(), 1e-9);
  EXPECT_EQ(j["scenario"]["system"]["preset"], "h200-sxm");
  EXPECT_EQ(j["scenario"]["model"]["hlo_module"], "jit_loop");
  EXPECT_EQ(j["hlo"]["loops"][0]["trip_count"], 4);
  EXPECT_EQ(j["hlo"]["kernels"], 16);
}

TEST(HloReplay, SameInputSameBytesAndHumanSummary) {
  auto a = run_cli({"replay", kCorpus + "offload.hlo", "--system", "h200-sxm", "--json"});
  auto b = run_cli({"replay", kCorpus + "offload.hlo", "--system", "h200-sxm", "--json"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  auto t = run_cli({"replay", kCorpus + "offload.hlo", "--system", "h200-sxm"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("step time"), std::string::npos);
  EXPECT_NE(t.out.find("host copies"), std::string::npos);
}

TEST(HloReplay, TraceAndSetOverrides) {
  const std::string path = ::testing::TempDir() + "/hlo_trace.json";
  auto r = run_cli({"replay", kCorpus + "collectives.hlo", "--system", "h200-sxm", "--gpus", "8", "--trace", path, "--json",
                "--set", "training.cuda_graphs=false"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(path);
  const json t = json::parse(f);
  ASSERT_TRUE(t.contains("traceEvents"));
  const json j = json::parse(r.out);
  EXPECT_EQ(j["scenario"]["training"]["cuda_graphs"], false);
  EXPECT_EQ(j["scenario"]["training"]["parallelism"]["tp"], 4);
  EXPECT_EQ(j["hlo"]["collectives"], 4);
  EXPECT_GT(j["breakdown_s"]["exposed_communication"].get<double>(), 0);
}

TEST(HloReplay, InvalidInputExitsOne) {
  const std::string bad = ::testing::TempDir() + "/bad.hlo";
  std::ofstream(bad) << "HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] frob(%nope)\n}\n";
  auto r = run_cli({"replay", bad, "--system", "h200-sxm"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.hlo:3:3: error: HLO: operand 'nope'"), std::string::npos) << r.err;
  auto missing = run_cli({"replay", ::testing::TempDir() + "/none.hlo.gz", "--system", "h200-sxm"});
  EXPECT_EQ(missing.code, 1);
  auto preset = run_cli({"replay", kCorpus + "loop_gemm.hlo", "--system", "no-such-gpu"});
  EXPECT_EQ(preset.code, 1);
  EXPECT_NE(preset.err.find("no-such-gpu"), std::string::npos) << preset.err;
  auto set = run_cli({"replay", kCorpus + "loop_gemm.hlo", "--system", "h200-sxm", "--set", "training.cuda_grafs=true"});
  EXPECT_EQ(set.code, 1);
}

TEST(HloReplay, ValidateHookIsTheReplayReport) {
  std::ostringstream o, e;
  racksim::cli::run({"--version"}, o, e);  // registers the commands, and with them the hook
  const auto hook = racksim::workflow::replay_hook();
  ASSERT_TRUE(static_cast<bool>(hook));
  const json j = hook(kCorpus + "attention.hlo", "h200-sxm", 0, {});
  const json k = racksim::cli::replay_hlo_report(kCorpus + "attention.hlo", "h200-sxm", 0, {});
  EXPECT_EQ(j.dump(), k.dump());
}

TEST(HloReplay, ReferenceModulesPeakMemoryWithinTenPercent) {
  const std::string dir = kShared + "/reference/hlo";
  const std::string rows = kShared + "/reference/h200/jax_training_steps.jsonl";
  if (!std::filesystem::exists(dir) || !std::filesystem::exists(rows))
    GTEST_SKIP() << "shared reference folder not found: " << kShared;
  std::ifstream in(rows);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    const std::string file = dir + "/" + row["name"].get<std::string>() + ".hlo.txt.gz";
    const json rep = racksim::cli::replay_hlo_report(file, "h200-sxm", 1, {});
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
// median step time and of peak_bytes_in_use. `racksim validate` exits 0 only if all 74 checks pass (4 steps also without command buffers, 3 with grouped-query attention, 3 more measured last).
TEST(HloReplay, ValidationSuiteWithinTenPercent) {
  if (!std::filesystem::exists(kShared + "/reference/hlo"))
    GTEST_SKIP() << "shared reference folder not found: " << kShared;
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/hlo.yaml"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("74 checks: 74 pass"), std::string::npos) << r.out;
}

// Two-GPU steps (one process, data parallel and sharded parameters over NVLink), replayed from their SPMD
// HLO on the calibrated H200 (four of the eight steps measured after the mechanisms they check were
// built). Fifteen of sixteen checks within 10%; the known miss is the small data-parallel step
// (x2_dp_s1_none_scan, 11% fast): its kernels run 3% longer than the replay's (half the batch per GPU),
// it waits 1.9 ms per step for its gradient all-reduces where the replay has 1.0, and the host's
// dispatch between steps (as long as on one GPU, where a 3% excess in the replay's kernel time hides it)
// is not in the replay (calibration/data/h200x2-2026-11-29-mechanisms/README.md). The test pins the miss
// so that it is noticed when it goes away.
TEST(HloReplay, TwoGpuStepsWithinTenPercentButOne) {
  const auto r = run_cli({"validate", std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/hlo-x2.yaml"});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("16 checks: 15 pass, 1 outside tolerance"), std::string::npos) << r.out;
  bool s1_missed = false;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);)
    if (l.find("x2_dp_s1_none_scan") != std::string::npos && l.find("step_time_s") != std::string::npos)
      s1_missed = l.find(" NO") != std::string::npos;
  EXPECT_TRUE(s1_missed) << r.out;
}
