// Randomized robustness test of the scenario loader (a bounded, deterministic fuzzer that runs
// in CI): mutations of the committed corpus (tests/fuzz/corpus) must either load or fail with
// an InputError; never crash, hang or throw anything else. Every message must carry a location.
#include <gtest/gtest.h>

#include "fuzz_util.h"
#include "yaml_tree_util.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/units.h"
#include "hardware_models/system_preset.h"
#include "input/yaml_reader.h"
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

// Every key the scenario loader reads is named by some corpus file, so that a key added to the loader without a seed
// that names it fails here (racksim::testing::unnamed_declared_keys). What it cannot see: keys a reader declares only
// on a branch no seed takes, and system.overrides' keys (the preset's, declared in its own file).
TEST(Fuzz, CorpusNamesEveryScenarioKey) {
  std::size_t declared = 0;
  const std::string missing = racksim::testing::unnamed_declared_keys(
      std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz/corpus", [](const std::string& name) { return name; },
      [](const std::string& text, const std::string& label) { sim::load_scenario_text(text, label); }, &declared);
  EXPECT_TRUE(missing.empty()) << "keys the scenario loader reads that no file in tests/fuzz/corpus names:" << missing;
  EXPECT_GT(declared, 100u);
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

// A system preset's `sources:` block is parsed with its citations as "" and their text set after
// (input::load_with_citations_set_after). Mutated presets (most of their bytes are that block) must give,
// through the loader and the preset reader, exactly what the full parse gives: the same diagnostics, and
// where a tree comes back the same tree node for node.
TEST(Fuzz, PresetCitationsSetAfterGiveTheFullParsesResult) {
  const auto presets = racksim::testing::read_corpus(std::string(RACKSIM_SOURCE_DIR) + "/hardware_models/presets", ".yaml");
  ASSERT_GE(presets.size(), 6u);
  // What a citation line may hold and what breaks its shape: quotes, escapes, comments, tabs, line ends,
  // indentation, keys, other YAML, bytes outside ASCII.
  static const std::vector<std::string> tokens = {
      "\"", "\\", "\\\"", "'", "#", " #", ": ", ":", "\t", "\r", "\r\n", "\n", "\n  ", "\n    ", " ", "  ",
      "\n  a: \"x\"", "\nsources:\n", "sources:", "\nsources: # c\n", "- ", "[", "{", "}", "&a ", "*a", "!!str ",
      "? ", "|", ">", "---", "...", "\xc3\xa9", "\xff", "\xef\xbb\xbf", "\x7f", "\x01", "\n# note\n", "\n\n",
      "gpu.hbm_bandwidth: \"", "\"\n", "%"};
  std::mt19937_64 rng(racksim::testing::fuzz_seed(20261203));
  racksim::testing::MemoryLimit limit;
  int quick = 0, loaded = 0, rejected = 0;
  auto load = [](const std::string& text, input::YamlParse parse, std::optional<YAML::Node>& tree) {
    input::LoadSession session;
    std::vector<std::string> messages;
    if (auto root = input::load_yaml_text(text, "p.yaml", session.ctx, parse)) {
      tree = root->yaml();
      hw::parse_system_preset(*root);
    }
    for (const auto& d : session.diag.list()) messages.push_back(d.format());
    return messages;
  };
  for (int i = 0; i < racksim::testing::fuzz_iterations(300); ++i) {
    // Half the cases mutated anywhere; every case gets one to three tokens put into its citation lines.
    std::string text = presets[rng() % presets.size()];
    if (rng() % 2) text = racksim::testing::mutate(std::move(text), presets, tokens, rng, {});
    const std::size_t block = text.rfind("\nsources:");
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && block != std::string::npos; --k) {
      const std::size_t at = block + 1 + rng() % (text.size() - block);
      text.insert(std::min(at, text.size()), tokens[rng() % tokens.size()]);
    }
    std::string parsed;
    if (input::load_with_citations_set_after(text, parsed)) ++quick;
    std::optional<YAML::Node> tree_quick, tree_full;
    const auto got = load(text, input::YamlParse::quick, tree_quick);
    const auto want = load(text, input::YamlParse::full, tree_full);
    ASSERT_EQ(got, want) << text;
    ASSERT_EQ(tree_quick.has_value(), tree_full.has_value()) << text;
    if (tree_quick) racksim::testing::expect_same_tree(*tree_quick, *tree_full, "mutated preset");
    if (::testing::Test::HasFailure()) FAIL() << text;
    (want.empty() ? loaded : rejected)++;
  }
  // The quick parse must be taken often (40-46 of the 300 cases with the presets of 2026-12-06; 46 before their wgrad
  // figures' longer citations, 40 after: it depends on where the mutations land in the presets' text), and both
  // outcomes must occur.
  EXPECT_GT(quick, 30);
  EXPECT_GT(loaded, 20);
  EXPECT_GT(rejected, 20);
  std::cout << "quick parse " << quick << ", loaded " << loaded << ", rejected " << rejected << "\n";
}
