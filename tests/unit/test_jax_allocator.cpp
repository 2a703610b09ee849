// JAX's allocator pool (training.xla_client_mem_fraction, XLA_PYTHON_CLIENT_MEM_FRACTION): with preallocation the
// pool is that fraction of the card's total memory, and a program needing more stops out of memory; the report's
// capacity and `fits` follow it in JAX mode and in an HLO replay, and Megatron mode ignores it with a note.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "scenario_text_util.h"

using namespace racksim;

namespace {

std::string yaml(const std::string& extra, const std::string& framework = "jax") {
  return "system: {preset: h100-sxm, gpus: 8}\n"
         "model: {layers: 8, hidden: 4096, ffn_hidden: 11008, heads: 32, kv_heads: 32, vocab: 32000, ffn: swiglu}\n"
         "training: {seq_len: 4096, global_batch: 32, micro_batch: 4, framework: " + framework +
         ", optimizer_sharding: fsdp, parallelism: {dp: 8}" + (framework == "jax" ? ", scan_layers: false" : "") + extra +
         "}\n";
}
sim::Scenario load(const std::string& text) { return racksim::testing::scenario_from_text(text, "a.yaml"); }

struct Mem {
  double peak = 0, capacity = 0;
  bool fits = false;
  std::string warnings;
};
Mem mem_of(const sim::Scenario& sc) {
  const auto r = sim::simulate(sc);
  return {r.report["peak_memory_bytes"].get<double>(), r.report["memory_capacity_bytes"].get<double>(),
          r.report["fits"].get<bool>(), r.report["warnings"].dump()};
}

}  // namespace

// The pool is the fraction of the card's total (the preset's hbm_capacity), not of what the preset leaves after its
// reserved bytes; `fits` compares the peak with it.
TEST(JaxAllocator, CapacityIsTheFractionOfTheCardsMemory) {
  const auto base = load(yaml(""));
  const double card = base.system.spec.gpu.hbm_capacity_bytes;
  const double device = card - base.system.spec.memory.reserved_bytes;
  const Mem m0 = mem_of(base);
  EXPECT_NEAR(m0.capacity, device, 1.0);  // unset: no cap below the card's
  ASSERT_TRUE(m0.fits);
  ASSERT_GT(m0.peak, 0.0);

  // A pool half the program's peak: out of memory, and the report says why the capacity is what it is.
  const auto small_sc = load(yaml(", xla_client_mem_fraction: " + std::to_string(0.5 * m0.peak / card)));
  const Mem small = mem_of(small_sc);
  EXPECT_NEAR(small.capacity, small_sc.training.xla_client_mem_fraction.value() * card, 1.0);
  EXPECT_DOUBLE_EQ(small.peak, m0.peak);  // the program's memory does not change, only what it may use
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.warnings.find("does not fit"), std::string::npos) << small.warnings;
  EXPECT_NE(small.warnings.find("memory capacity: JAX's allocator pool"), std::string::npos) << small.warnings;

  // Twice the peak: fits, capacity the pool.
  const auto big_sc = load(yaml(", xla_client_mem_fraction: " + std::to_string(2.0 * m0.peak / card)));
  const Mem big = mem_of(big_sc);
  EXPECT_NEAR(big.capacity, big_sc.training.xla_client_mem_fraction.value() * card, 1.0);
  EXPECT_TRUE(big.fits);

  // The whole card: the preset's reserved bytes (CUDA context, libraries) bound it first.
  const Mem whole = mem_of(load(yaml(", xla_client_mem_fraction: 1.0")));
  EXPECT_NEAR(whole.capacity, device, 1.0);
  EXPECT_NE(whole.warnings.find("bounds it first"), std::string::npos) << whole.warnings;
}

// Megatron mode: PyTorch's caching allocator has no such pool; the key changes nothing and the report says so.
TEST(JaxAllocator, MegatronModeIgnoresTheFraction) {
  const Mem plain = mem_of(load(yaml("", "megatron")));
  const auto given = load(yaml(", xla_client_mem_fraction: 0.01", "megatron"));
  EXPECT_EQ(given.training.other_framework_keys, (std::vector<std::string>{"xla_client_mem_fraction"}));
  const Mem m = mem_of(given);
  EXPECT_DOUBLE_EQ(m.capacity, plain.capacity);
  EXPECT_EQ(m.fits, plain.fits);
  EXPECT_NE(m.warnings.find("training.xla_client_mem_fraction is XLA's (JAX mode); in Megatron mode it changes nothing"),
            std::string::npos)
      << m.warnings;
}

// A fraction outside (0, 1] is an input error at the value, with the key path and the range.
TEST(JaxAllocator, FractionOutsideItsRangeIsAnInputError) {
  for (const std::string v : {"0", "1.5", "-0.2"}) {
    const std::string err = racksim::testing::scenario_error_text(yaml(", xla_client_mem_fraction: " + v), "a.yaml");
    EXPECT_NE(err.find("a.yaml:3:"), std::string::npos) << err;
    EXPECT_NE(err.find("training.xla_client_mem_fraction: must be between 0.01 and 1, got " + v), std::string::npos)
        << err;
  }
}

// The scenario echoed in the report carries the key, so the report's scenario runs again to the same capacity.
TEST(JaxAllocator, TheReportsScenarioKeepsTheFraction) {
  const auto r = sim::simulate(load(yaml(", xla_client_mem_fraction: 0.85")));
  EXPECT_DOUBLE_EQ(r.report["scenario"]["training"]["xla_client_mem_fraction"].get<double>(), 0.85);
}
