// End to end through the CLI in-process: report fields, determinism, trace structure, exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "sim/cli/cli.h"
#include "workloads/op_graph.h"
#include "tests/unit/cli_util.h"

using nlohmann::json;

namespace {

using racksim::testing::run_cli;
const std::string kQuick = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";

}  // namespace

TEST(Pipeline, RunReportHasEveryContractField) {
  auto r = run_cli({"run", kQuick, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* k : {"racksim_version", "scenario", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                        "mfu", "peak_memory_bytes", "memory_capacity_bytes", "fits", "memory_breakdown_bytes",
                        "breakdown_s", "warnings"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"weights", "gradients", "optimizer", "activations", "communication_buffers", "other"})
    EXPECT_TRUE(j["memory_breakdown_bytes"].contains(k)) << k;
  for (const char* k : {"compute", "recompute", "exposed_communication", "exposed_offload", "launch_overhead",
                        "pipeline_bubble"})
    EXPECT_TRUE(j["breakdown_s"].contains(k)) << k;
  // The breakdown accounts for the whole step.
  double sum = 0;
  for (auto& [k, v] : j["breakdown_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["step_time_s"].get<double>(), 1e-9);
  // tokens/s/GPU = global_batch * seq_len / step / gpus
  EXPECT_NEAR(j["tokens_per_s_per_gpu"].get<double>(), 128.0 * 8192 / j["step_time_s"].get<double>() / 8, 1e-6);
  // The embedded scenario is fully resolved.
  EXPECT_EQ(j["scenario"]["training"]["parallelism"]["dp"], 8);
  EXPECT_EQ(j["scenario"]["model"]["layers"], 32);
}

TEST(Pipeline, SameInputSameBytes) {
  auto a = run_cli({"run", kQuick, "--json"});
  auto b = run_cli({"run", kQuick, "--json"});
  EXPECT_EQ(a.out, b.out);
}

TEST(Pipeline, TraceIsChromeTraceEventFormat) {
  const std::string path = ::testing::TempDir() + "/trace.json";
  auto r = run_cli({"run", kQuick, "--trace", path});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(path);
  const json t = json::parse(f);
  ASSERT_TRUE(t["traceEvents"].is_array());
  int complete = 0;
  std::set<int> tids;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name"));
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["ts"].get<double>(), 0);
      EXPECT_GE(e["dur"].get<double>(), 0);
      tids.insert(e["tid"].get<int>());
    }
  }
  EXPECT_GT(complete, 1000);
  EXPECT_TRUE(tids.count(0) && tids.count(5) && tids.count(racksim::workloads::kStreamCount));  // compute, gradient reductions, host launch
}

TEST(Pipeline, ExitCodes) {
  EXPECT_EQ(run_cli({"--version"}).code, 0);
  EXPECT_EQ(run_cli({"run", "--help"}).code, 0);
  EXPECT_NE(run_cli({"run", "--help"}).out.find("--trace"), std::string::npos);
  EXPECT_EQ(run_cli({"run"}).code, 1);
  EXPECT_EQ(run_cli({"frobnicate"}).code, 1);
  EXPECT_EQ(run_cli({"run", "/nonexistent.yaml"}).code, 1);
  EXPECT_EQ(run_cli({"hw", "show", "h200-sxm"}).code, 0);
  EXPECT_NE(run_cli({"hw", "show", "h200-sxm"}).out.find("source: shared reference hardware_specs.md"), std::string::npos);
  EXPECT_EQ(run_cli({"hw", "show", "h300"}).code, 1);
  EXPECT_EQ(run_cli({"models", "show", "llama3-70b", "--json"}).code, 0);
}

TEST(Pipeline, FitsIsAResultNotAnError) {
  auto r = run_cli({"run", kQuick, "--json", "--set", "training.recompute=none", "--set", "training.micro_batch=16",
                "--set", "training.global_batch=128"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out)["fits"].get<bool>());
}
