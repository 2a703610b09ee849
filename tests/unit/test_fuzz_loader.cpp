// Randomized robustness test of the scenario loader (a bounded, deterministic fuzzer that runs
// in CI): mutations of the committed corpus (tests/fuzz/corpus) must either load or fail with
// an InputError; never crash, hang or throw anything else. Every message must carry a location.
#include <gtest/gtest.h>

#include "fuzz_util.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/units.h"
#include "input/diagnostics.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include <cmath>
#include <iostream>
#include "sim/scenario/scenario.h"

using namespace racksim;

namespace {

std::vector<std::string> corpus() { return racksim::testing::read_corpus(std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/corpus"); }

// Byte flips, insertions of YAML-significant tokens, deletions and splices between files.
std::string mutate(std::string s, const std::vector<std::string>& all, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens = {
      ":", "- ", "[", "]", "{", "}", "\n", "  ", "'", "\"", "&a ", "*a", "!!map ", "? ", "|", ">", "#", "...", "---",
      "-1", "0", "1e309", "nan", "GB", "TB/s", "us", "TFLOP/s", " ", "\t", "\x01", "null", "~", "true", "tp", "gpus",
      "preset", "1 GiB", "auto", "\xff\xfe", "99999999999999999999", "&b [*a, *a, *a, *a]", "<<: *a", "\n---\n",
      "overrides:\n    ", "\"", "'", "2147483647", "0 GB", "layers: 100000", "pp: 1000"};
  return racksim::testing::mutate(std::move(s), all, tokens, rng, {});
}

}  // namespace

TEST(Fuzz, ScenarioLoaderNeverCrashes) {
  const auto files = corpus();
  ASSERT_GE(files.size(), 10u);
  std::mt19937_64 rng(racksim::testing::fuzz_seed(20261129));
  int loaded = 0, rejected = 0, simulated = 0;
  racksim::testing::MemoryLimit limit;
  for (int i = 0; i < racksim::testing::fuzz_iterations(3000); ++i) {
    const std::string text = mutate(files[rng() % files.size()], files, rng);
    const auto t0 = std::chrono::steady_clock::now();
    struct Timed {
      std::chrono::steady_clock::time_point t0;
      const std::string& text;
      ~Timed() { EXPECT_LT(racksim::testing::seconds_since(t0), racksim::testing::kMaxCaseSeconds) << text; }
    } timed{t0, text};
    try {
      auto sc = sim::load_scenario_text(text, "fuzz.yaml");
      ++loaded;
      // What loads must also simulate (or say it is not modelled), with finite results.
      if (static_cast<double>(sc.training.micro_steps()) * sc.model.layers <= 2000) {
        try {
          auto r = sim::simulate(sc);
          ASSERT_TRUE(std::isfinite(r.replay.step_time_s) && r.replay.step_time_s > 0) << text;
          ++simulated;
        } catch (const std::invalid_argument&) {
        }
      }
    } catch (const input::InputError& e) {
      ++rejected;
      for (const auto& d : e.diagnostics()) ASSERT_FALSE(d.where.file.empty()) << text;
    } catch (const std::exception& e) {
      FAIL() << "unexpected " << typeid(e).name() << ": " << e.what() << "\ninput:\n" << text;
    }
  }
  // Both outcomes must occur, or the mutator is not exercising the loader.
  EXPECT_GT(loaded, 10);
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(simulated, 5);
  std::cout << "loaded " << loaded << ", simulated " << simulated << ", rejected " << rejected << "\n";
}

TEST(Fuzz, QuantityParserNeverCrashes) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "0123456789.eE+- /kMGTPiBbsunmpFLOPHzWo\xb5";
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 14);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % alphabet.size()];
    for (int k = 0; k < 8; ++k) {
      try {
        const double v = sim::parse_quantity(s, static_cast<sim::QuantityKind>(k));
        ASSERT_TRUE(std::isfinite(v) && v >= 0) << s;
      } catch (const sim::UnitError&) {
      }
    }
  }
}

TEST(Fuzz, DeepNestingIsAnError) {
  const std::string deep = "system: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  EXPECT_THROW(sim::load_scenario_text(deep, "deep.yaml"), input::InputError);
}
