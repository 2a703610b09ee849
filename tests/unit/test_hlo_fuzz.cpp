// Bounded, deterministic fuzzing of the HLO importer (runs in CI): mutations of the committed
// corpus (tests/fuzz/hlo_corpus) must parse, lower and replay, or fail with an InputError that
// names a location; never crash, hang or throw anything else.
#include <gtest/gtest.h>

#include "fuzz_util.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "sim/run/run.h"
#include "input/diagnostics.h"
#include "workloads/hlo/hlo_lower.h"
#include "workloads/hlo/hlo_parser.h"

using namespace racksim;

namespace {

std::vector<std::string> corpus() { return racksim::testing::read_corpus(std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/hlo_corpus"); }

// Byte flips, insertions of HLO-significant tokens, deletions, duplications and splices.
std::string mutate(std::string s, const std::vector<std::string>& all, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens = {
      "{", "}", "(", ")", "[", "]", ",", "%", "=", "\"", "\n", " ", "/*", "*/", "ROOT ", "ENTRY ", "S(5)", ":S(5)",
      "{1,0}", "f32[", "bf16[8,8]", "s32[]", "pred[]", "(f32[], s32[])", "-1", "0", "99999999999", "1e309",
      "known_trip_count", R"({"known_trip_count":{"n":"3"}})", "backend_config={", "calls=%", "to_apply=%body",
      "condition=%cond", "body=%body", "while(", "fusion(", "custom-call(", "get-tuple-element(", "index=",
      "dimensions={0}", "replica_groups={{0,1}}", "replica_groups=[2,2]<=[4]", "custom_call_target=\"__cublas$gemm\"",
      "parameter(", "constant(", "\\", "\xff", "\x01", "T(8,128)", "<=", "HloModule x\n", "dot(", "lhs_contracting_dims={1}",
      "rhs_contracting_dims={0}", "lhs_batch_dims={0}", "f32[1000000000,1000000000]", "s32[100000,100000]", "%tok",
      "replica_count=1048576", "num_partitions=4", "ENTRY", "}\n"};
  return racksim::testing::mutate(std::move(s), all, tokens, rng, {3, 24, 160, 64});
}

bool has_location(const input::InputError& e) {
  for (const auto& d : e.diagnostics())
    if (d.where.file.empty()) return false;
  return !e.diagnostics().empty();
}

}  // namespace

TEST(HloFuzz, CorpusReplaysCleanly) {
  for (const auto& e : std::filesystem::directory_iterator(std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/hlo_corpus")) {
    const auto j = sim::run_hlo(e.path().string(), "h200-sxm", 4, {}).report;
    EXPECT_TRUE(std::isfinite(j["step_time_s"].get<double>())) << e.path();
  }
}

TEST(HloFuzz, ImporterNeverCrashes) {
  const auto files = corpus();
  ASSERT_GE(files.size(), 5u);
  std::mt19937_64 rng(racksim::testing::fuzz_seed(20261129));
  const std::string tmp = ::testing::TempDir() + "/hlo_fuzz.hlo";
  int parsed = 0, lowered = 0, replayed = 0, rejected = 0;
  racksim::testing::MemoryLimit limit;
  for (int i = 0; i < racksim::testing::fuzz_iterations(6000); ++i) {
    const std::string text = mutate(files[rng() % files.size()], files, rng);
    const auto t0 = std::chrono::steady_clock::now();
    struct Timed {
      std::chrono::steady_clock::time_point t0;
      const std::string& text;
      ~Timed() { EXPECT_LT(racksim::testing::seconds_since(t0), racksim::testing::kMaxCaseSeconds) << text; }
    } timed{t0, text};
    try {
      const auto m = workloads::hlo::parse_hlo_text(text, "fuzz.hlo");
      ++parsed;
      workloads::hlo::LowerOptions o;
      o.gpus = 4;
      o.max_ops = 20'000;  // keeps every case fast; a larger program is an InputError here
      const auto r = workloads::hlo::lower_module(m, o);
      ++lowered;
      for (const auto& op : r.graph.ops) {
        ASSERT_TRUE(std::isfinite(op.flops) && std::isfinite(op.hbm_bytes) && std::isfinite(op.copy_bytes)) << text;
        for (auto d : op.deps) ASSERT_LT(d, r.graph.ops.size());
      }
      if (i % 5 == 0 && r.graph.ops.size() < 2000) {
        std::ofstream(tmp, std::ios::binary) << text;
        const auto j = sim::run_hlo(tmp, "h200-sxm", 4, {}).report;
        ASSERT_TRUE(std::isfinite(j["step_time_s"].get<double>())) << text;
        ++replayed;
      }
    } catch (const input::InputError& e) {
      ++rejected;
      EXPECT_TRUE(has_location(e)) << e.what();
    } catch (const std::exception& e) {
      FAIL() << "unexpected " << typeid(e).name() << ": " << e.what() << "\n--- input ---\n" << text;
    }
  }
  std::cout << "[ fuzz     ] parsed " << parsed << ", lowered " << lowered << ", replayed " << replayed
            << ", rejected " << rejected << '\n';
  // The mutations exercise both outcomes.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(lowered, 50);
  EXPECT_GT(replayed, 10);
  EXPECT_GT(rejected, 1000);
}
