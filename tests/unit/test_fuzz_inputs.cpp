// Bounded, deterministic fuzzing of the inputs other than scenarios and HLO (those are
// test_fuzz_loader.cpp and test_hlo_fuzz.cpp): sweep files, validation suites, calibration
// measurements (racksim-bench JSON) and nccl-tests logs, each from its committed corpus under
// tests/fuzz/. Every mutation must load (and then work) or fail with an InputError that names a
// file; never crash, throw anything else, take more than 10 s or hold more than 2 GB.
#include <gtest/gtest.h>

#include "fuzz_util.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "calibration/fit/calibration_fit.h"
#include "calibration/fit/nccl_tests.h"
#include "hardware_models/calibration.h"
#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/workflow/sweep.h"
#include "sim/workflow/validate.h"

using namespace racksim;
namespace fs = std::filesystem;

namespace {

const std::string kFuzz = std::string(RACKSIM_SOURCE_DIR) + "/tests/fuzz";

const std::vector<std::string> kYamlTokens = {
    ":", "- ", "[", "]", "{", "}", "\n", "  ", "'", "\"", "&a ", "*a", "&b [*a, *a, *a, *a]", "? ", "|", ">", "#",
    "---", "-1", "0", "1e309", "nan", "GB", "\t", "\x01", "null", "~", "true", "2147483647", "99999999999999999999",
    "vary", "base", "cases", "scenario", "compare", "replay", "measured", "tolerance", "set", "system.gpus",
    "training.parallelism.tp", "../", "/dev/zero", "expect_speedup"};

// Runs `body` on `n` mutations of the corpus in `dir` (racksim::testing::fuzz_mutants). Returns {accepted, rejected}.
template <class F>
std::pair<int, int> fuzz(const std::string& dir, const std::vector<std::string>& tokens, int n, uint64_t seed,
                         F&& body, const racksim::testing::MutationLimits& lim = {}) {
  return racksim::testing::fuzz_mutants(racksim::testing::read_corpus(dir), tokens, n, seed, body, lim);
}

}  // namespace

TEST(FuzzInputs, SweepFilesNeverCrash) {
  const std::string label = kFuzz + "/sweep_corpus/fuzz.yaml";  // relative bases resolve as in the corpus
  int ran = 0;
  const auto [ok, bad] = fuzz(kFuzz + "/sweep_corpus", kYamlTokens, 1200, 1611, [&](const std::string& text, std::size_t, int i) {
    const auto spec = workflow::load_sweep_text(text, label);
    workflow::check_sweep_size(spec, {}, false);
    if (i % 8 == 0 && spec.size() > 0) {
      const auto r = workflow::run_point(spec, spec.size() - 1);
      EXPECT_TRUE(!r.error.empty() || std::isfinite(r.report["step_time_s"].get<double>())) << text;
      ++ran;
    }
    return true;
  });
  std::cout << "[ fuzz     ] sweeps: loaded " << ok << ", rejected " << bad << ", ran " << ran << '\n';
  // Enough mutants load for the run path to be exercised (14 of 1,200 since unknown keys inside an axis's mapping
  // values and unknown preset fields are rejected at load too, 2026-12-03, late; 19 when a value its key cannot take
  // became a load error; 20+ when such values were error rows).
  EXPECT_GT(ok, 10);
  EXPECT_GT(bad, 100);
}

TEST(FuzzInputs, SuiteFilesNeverCrash) {
  const std::string label = kFuzz + "/suite_corpus/fuzz.yaml";
  const auto [ok, bad] = fuzz(kFuzz + "/suite_corpus", kYamlTokens, 2000, 1612, [&](const std::string& text, std::size_t, int) {
    const auto suite = workflow::load_suite_text(text, label);
    return !suite.cases.empty() || true;
  });
  std::cout << "[ fuzz     ] suites: loaded " << ok << ", rejected " << bad << '\n';
  EXPECT_GT(ok, 20);
  EXPECT_GT(bad, 100);
}

// Every key the sweep and suite loaders read is named by some file of their corpus (the fuzzer reaches only those).
TEST(FuzzInputs, SweepAndSuiteCorporaNameEveryKey) {
  std::size_t declared = 0;
  const auto label = [](const std::string& dir) {
    return [dir](const std::string& name) { return kFuzz + "/" + dir + "/" + name; };
  };
  std::string missing = racksim::testing::unnamed_declared_keys(
      kFuzz + "/sweep_corpus", label("sweep_corpus"),
      [](const std::string& text, const std::string& l) { workflow::load_sweep_text(text, l); }, &declared);
  EXPECT_TRUE(missing.empty()) << "sweep keys no file in tests/fuzz/sweep_corpus names:" << missing;
  EXPECT_EQ(declared, 2u);  // base, vary (the varied keys are the scenario's)
  missing = racksim::testing::unnamed_declared_keys(
      kFuzz + "/suite_corpus", label("suite_corpus"),
      [](const std::string& text, const std::string& l) { workflow::load_suite_text(text, l); }, &declared);
  EXPECT_TRUE(missing.empty()) << "suite keys no file in tests/fuzz/suite_corpus names:" << missing;
  EXPECT_GT(declared, 8u) << declared;
}

TEST(FuzzInputs, CalibrationMeasurementsNeverCrash) {
  const std::vector<std::string> tokens = {"{", "}", "[", "]", ",", ":", "\"", "0", "-1", "1e309", "NaN", "null", "true",
                                           "\"median\"", "\"s\"", "\"m\"", "\"k\"", "\"bytes\"", "\"results\"",
                                           "# nThread 1 nGpus 99999999999\n", "#  Rank  9 Group 0\n", "nan", "  0.00 ",
                                           "\n", " ", "abc", "1024", "\"schema\": \"racksim-bench/1\""};
  // Each case is a directory of one corpus file, mutated, under its own name.
  const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& e : fs::directory_iterator(kFuzz + "/calib_corpus")) n.push_back(e.path().filename().string());
    return n;
  }();
  // read_corpus sorts by content: map each text back to its name.
  std::map<std::string, std::string> name_of;
  for (const auto& n : names) {
    std::ifstream f(kFuzz + "/calib_corpus/" + n, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    name_of[ss.str()] = n;
  }
  const auto files = racksim::testing::read_corpus(kFuzz + "/calib_corpus");
  const std::string dir = ::testing::TempDir() + "/fuzz_calib";
  int fitted = 0;
  const auto [ok, bad] = fuzz(
      kFuzz + "/calib_corpus", tokens, 300, 1613, [&](const std::string& text, std::size_t pick, int) {
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream(dir + "/" + name_of.at(files[pick]), std::ios::binary) << text;
        calib::FitOptions o;
        o.from_dirs = {dir};
        o.base_preset = "h200-sxm";
        const hw::Calibration c = calib::fit_calibration(o);
        // Whatever was fitted reads back (fit_calibration checks it too).
        input::Diagnostics diag;
        auto ctx = std::make_shared<input::LoadContext>();
        ctx->diag = &diag;
        if (auto root = input::load_yaml_text(hw::write_calibration_yaml(c), "fit.yaml", ctx)) hw::parse_calibration(*root);
        EXPECT_TRUE(diag.empty()) << (diag.empty() ? "" : diag.list().front().format()) << "\n--- input ---\n" << text;
        ++fitted;
        return true;
      });
  std::cout << "[ fuzz     ] calibration: fitted " << ok << ", rejected " << bad << '\n';
  EXPECT_GT(ok, 10);
  EXPECT_GT(bad, 30);
  fs::remove_all(dir);
}

TEST(FuzzInputs, NcclTestsLogsNeverCrash) {
  const std::vector<std::string> tokens = {"#", " ", "\n", "size", "time", "algbw", "busbw", "nGpus ", "nThread ",
                                           "99999999999", "-1", "0", "nan", "inf", "1e309", "#  Rank  0 Group 0\n",
                                           "# Collective test starting: all_gather_perf\n", "abc", "\t", "\r"};
  const auto [ok, bad] = fuzz(kFuzz + "/calib_corpus", tokens, 4000, 1614, [&](const std::string& text, std::size_t, int) {
    const auto log = calib::parse_nccl_tests_log(text, "fuzz.log");
    if (!log) return false;
    EXPECT_GE(log->gpus, 0);
    EXPECT_LE(log->gpus, hw::kMaxGpus);
    for (const auto& r : log->rows) EXPECT_TRUE(std::isfinite(r.time_s)) << text;
    return true;
  });
  std::cout << "[ fuzz     ] nccl-tests logs: parsed " << ok << ", rejected or not a log " << bad << '\n';
  EXPECT_GT(ok, 500);
  EXPECT_GT(bad, 100);
}
