// Every system preset through `collective` and a small `run`: results finite and positive, and
// ordered as physics says.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>

#include "core/units.h"
#include "hardware_models/system_preset.h"
#include "sim/cli/cli.h"
#include "tests/unit/cli_util.h"

using nlohmann::json;

namespace {
json cli_json(const std::vector<std::string>& args) {
  const auto r = racksim::testing::run_cli(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}
// The preset's own cited figures (calibration: none; h200-sxm is calibrated by default), so the
// presets are compared on equal terms.
double run_tokens_per_s(const std::string& preset) {
  const std::string f = std::string(RACKSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml";
  return cli_json({"run", f, "--json", "--set", "system.preset=" + preset, "--set", "system.calibration=none"})
      ["tokens_per_s_per_gpu"].get<double>();
}
}  // namespace

TEST(PresetPhysics, EveryPresetRunsAndCommunicates) {
  const auto presets = racksim::hw::list_system_presets();
  ASSERT_EQ(presets.size(), 6u);  // b200, gb200-nvl72, gb300-nvl72, h100-sxm, h200-sxm, h800-sxm
  for (const auto& p : presets) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}) {
      for (const char* size : {"1MiB", "1GiB"}) {
        const json c = cli_json({"collective", "--system", p, "--gpus", "8", "--op", op, "--bytes", size, "--json"});
        const double t = c["time_s"].get<double>();
        EXPECT_TRUE(std::isfinite(t) && t > 0) << p << " " << op << " " << size;
        EXPECT_GT(c["busbw_GBps"].get<double>(), 0) << p << " " << op;
      }
    }
    const double tps = run_tokens_per_s(p);
    EXPECT_TRUE(std::isfinite(tps) && tps > 0) << p;
  }
}

TEST(PresetPhysics, OrderedAsPhysicsSays) {
  // Equal work: Blackwell beats Hopper; H200 (more HBM bandwidth) at least matches H100.
  const double h100 = run_tokens_per_s("h100-sxm"), h200 = run_tokens_per_s("h200-sxm");
  const double b200 = run_tokens_per_s("b200"), gb200 = run_tokens_per_s("gb200-nvl72");
  EXPECT_GE(h200, h100);
  EXPECT_GT(b200, 1.5 * h100);
  EXPECT_GT(gb200, 1.5 * h100);
  // NVLS moves less per GPU than a ring: higher bus bandwidth for a large all-reduce on 8 GPUs.
  for (const char* p : {"h100-sxm", "h200-sxm", "b200"}) {
    const double nvls =
        cli_json({"collective", "--system", p, "--gpus", "8", "--op", "all_reduce", "--bytes", "1GiB", "--algo", "nvls", "--json"})["busbw_GBps"];
    const double ring =
        cli_json({"collective", "--system", p, "--gpus", "8", "--op", "all_reduce", "--bytes", "1GiB", "--algo", "ring", "--json"})["busbw_GBps"];
    EXPECT_GT(nvls, ring) << p;
  }
}

// GB300's block-scaled GEMM ceilings are its per-tensor FP8 ceiling times the rate ratios Transformer Engine's GEMM
// profiling guide measured on one Blackwell Ultra (B300) at one set of shapes, the GEMM kernels alone (pre-quantized:
// FP8 6.812, MXFP8 7.161, NVFP4 3.764 ms for the same twelve GEMMs; NVIDIA/TransformerEngine@d0067d0,
// docs/examples/gemm_profiling/gemm_profiling.rst; docs/decisions.md, "GB300's MXFP8 and NVFP4 GEMMs from a Blackwell
// Ultra measurement"). A new FP8 figure must carry to both; GB200's fraction of peak had stood in for NVFP4 (0.733,
// 1.7x the measured rate).
TEST(PresetPhysics, Gb300BlockScaledCeilingsAreTheMeasuredRatiosOnItsFp8Ceiling) {
  std::map<std::string, std::string> f;
  for (const auto& row : racksim::hw::preset_fields("gb300-nvl72")) f[row.path] = row.value;
  const auto number = [&](const std::string& path) { return std::stod(f.at(path)); };
  const auto rate = [&](const std::string& path) {
    return racksim::sim::parse_quantity(f.at(path), racksim::sim::QuantityKind::flops_per_second);
  };
  const double fp8 = number("gpu.matmul_efficiency.fp8");
  const double fp8_over_fp4_peak = rate("gpu.peak_dense.fp8") / rate("gpu.peak_dense.nvfp4");
  EXPECT_NEAR(number("gpu.matmul_efficiency.mxfp8"), fp8 * 6.812 / 7.161, 0.0015);
  EXPECT_NEAR(number("gpu.matmul_efficiency.nvfp4"), fp8 * fp8_over_fp4_peak * 6.812 / 3.764, 0.0015);
}
