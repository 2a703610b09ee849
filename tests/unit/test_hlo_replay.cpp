// `racksim replay` end to end: the report contract, exit codes, the validate hook. The replays of
// measured steps against their measurements are in tests/calibration/test_validation.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/cli/cli.h"
#include "sim/cli/commands.h"
#include "sim/run/run.h"
#include "tests/unit/cli_util.h"

using nlohmann::json;

namespace {

using racksim::testing::run_cli;
const std::string kCorpus = std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/hlo_corpus/";

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

TEST(HloReplay, TheCommandPrintsTheRunLayersReport) {
  const auto r = run_cli({"replay", kCorpus + "attention.hlo", "--system", "h200-sxm", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json k = racksim::sim::run_hlo(kCorpus + "attention.hlo", "h200-sxm", 0, {}).report;
  EXPECT_EQ(json::parse(r.out).dump(), k.dump());
}

// XLA's collectives queue behind the resident compute under CUDA's default hardware queues; with
// training.cuda_device_max_connections=1 they are dispatched in launch order and start beside it, so the measured
// two-GPU data-parallel step (its gradient all-reduces beside the backward) replays shorter.
TEST(HloReplay, OneHardwareQueueDispatchesXlasCollectivesInOrder) {
  const std::string module = std::string(RACKSIM_SOURCE_DIR) +
                             "/calibration/data/h200x2-2026-11-29-mechanisms/x2b/x2_dp_d4096_l8_dots.hlo.txt.gz";
  const double queued = racksim::sim::run_hlo(module, "h200-sxm", 2, {}).report["step_time_s"].get<double>();
  const double in_order =
      racksim::sim::run_hlo(module, "h200-sxm", 2, {"training.cuda_device_max_connections=1"}).report["step_time_s"].get<double>();
  EXPECT_LT(in_order, queued * 0.995);
  EXPECT_EQ(run_cli({"replay", module, "--system", "h200-sxm", "--set", "training.cuda_device_max_connections=33"}).code, 1);
}

// A one-device program replayed on several GPUs runs alone on each, with no communication between them: said in the
// report (an audit's finding: it had been silent, where a multi-device program replayed on another count is noted).
TEST(HloReplay, OneDeviceProgramOnSeveralGpusIsNoted) {
  auto one = run_cli({"replay", kCorpus + "loop_gemm.hlo", "--system", "h200-sxm", "--json"});
  auto many = run_cli({"replay", kCorpus + "loop_gemm.hlo", "--system", "h200-sxm", "--gpus", "64", "--json"});
  ASSERT_EQ(many.code, 0) << many.err;
  auto noted = [](const std::string& out) {
    const json report = json::parse(out);
    for (const auto& w : report["warnings"])
      if (w.get<std::string>().find("compiled for one device but is replayed on") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(noted(one.out));
  EXPECT_TRUE(noted(many.out));
}

// The tokens of a step come from the token argument's sharding: a program compiled for data 2 x fsdp 8 shards its
// [4, 4096] per-device tokens over all 16 devices, so each of the 16 GPUs trains 16,384 distinct tokens a step. Before
// 2026-12-04 the replay divided by a tensor-parallel size guessed from the collectives' groups, which FSDP's gathers
// over the 8-GPU group mimic: 1,422 tokens/s per GPU where the step and MFU gave about 11,400 (an audit's finding).
TEST(HloReplay, TokensFollowTheTokenArgumentsSharding) {
  const std::string m = std::string(RACKSIM_SOURCE_DIR) + "/calibration/data/h200-2026-12-04-mock-compile/mt_2vm.hlo.txt.gz";
  auto r = run_cli({"replay", m, "--system", "h100-sxm", "--gpus", "16", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["hlo"]["token_shards"].get<double>(), 16);
  EXPECT_NEAR(j["tokens_per_s_per_gpu"].get<double>() * j["step_time_s"].get<double>(), 4 * 4096, 1e-6);
}

// The other sharding forms: tile dimensions (the ones past the array's rank replicate) and replicated.
TEST(HloReplay, TokenShardsFromTileAndReplicatedShardings) {
  auto tokens_per_gpu = [](const std::string& sharding) {
    const std::string path = ::testing::TempDir() + "/token_sharding.hlo";
    std::ofstream(path) << "HloModule jit_step, num_partitions=8\n\n"
                           "ENTRY %main (tok: s32[2,128], w: f32[16]) -> f32[16] {\n"
                           "  %tok = s32[2,128]{1,0} parameter(0), sharding=" << sharding << ", metadata={op_name=\"tok\"}\n"
                           "  %w = f32[16]{0} parameter(1), sharding={replicated}\n"
                           "  ROOT %n = f32[16]{0} negate(%w)\n}\n";
    auto r = run_cli({"replay", path, "--system", "h200-sxm", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    return j["tokens_per_s_per_gpu"].get<double>() * j["step_time_s"].get<double>();
  };
  // 256 tokens a device; 4 distinct shards over 8 devices (pairs replicate): 1,024 a step, 128 per GPU.
  EXPECT_NEAR(tokens_per_gpu("{devices=[4,1,2]<=[8] last_tile_dim_replicate}"), 128, 1e-9);
  EXPECT_NEAR(tokens_per_gpu("{devices=[8,1]<=[8]}"), 256, 1e-9);
  EXPECT_NEAR(tokens_per_gpu("{replicated}"), 32, 1e-9);
}
