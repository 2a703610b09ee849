// Bounded, deterministic fuzzing of the three importers, which read files racksim does not write: Megatron-LM launch
// scripts, argument lists and start-up logs (`racksim import megatron`), MaxText YAML configs (`racksim import
// maxtext`) and Hugging Face config.json files (`racksim models import`). Each mutation must import (and what it writes
// must load: a scenario, or a model file that reads back to the same parameter count) or fail with an InputError that
// names a file; never crash, throw anything else, take more than 10 s or hold more than 2 GB.
#include <gtest/gtest.h>

#include "fuzz_util.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/scenario/scenario.h"
#include "workloads/importers/hf_config.h"
#include "workloads/importers/maxtext_config.h"
#include "workloads/importers/megatron_args.h"
#include "workloads/model_spec.h"

using namespace racksim;
namespace fs = std::filesystem;
namespace imp = racksim::workloads::importers;

namespace {

const std::string kSrc = RACKSIM_SOURCE_DIR;

std::vector<std::string> corpus_of(const std::vector<std::pair<std::string, std::string>>& dirs) {
  std::vector<std::string> all;
  for (const auto& [dir, ext] : dirs)
    for (auto& f : racksim::testing::read_corpus(dir, ext)) all.push_back(std::move(f));
  return all;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// What an importer wrote is well-formed YAML (UTF-8, no NUL, no syntax error), whatever bytes its input held: a
// scenario it writes may be refused for what the input asked (tp not dividing the heads), never for its own form.
void expect_well_formed(const std::string& yaml, const std::string& input_text) {
  input::LoadSession s;
  const auto root = input::load_yaml_text(yaml, "imported.yaml", s.ctx);
  std::string why;
  for (const auto& d : s.diag.list()) why += d.format() + "\n";
  EXPECT_TRUE(root && s.diag.empty()) << why << "--- written ---\n" << yaml << "\n--- input ---\n" << input_text;
}

// An imported scenario: well-formed, and it loads (the importer checks its scenario itself; this holds it to that),
// or the loader's InputError, a rejection of what the input asked.
void expect_scenario(const std::string& yaml, const std::string& input_text) {
  expect_well_formed(yaml, input_text);
  const auto sc = sim::load_scenario_text(yaml, "imported.yaml");
  EXPECT_GT(sc.system.gpus, 0) << input_text;
}

}  // namespace

TEST(FuzzImporters, MegatronScriptsArgumentsAndLogsNeverCrash) {
  // The two real example scripts (tests/data/megatron) and seeds for what they lack: case blocks, if/else, arithmetic,
  // a bare argument list, Megatron's start-up arguments block.
  const auto corpus = corpus_of({{kSrc + "/tests/data/megatron", ".sh"}, {kSrc + "/tests/fuzz/megatron_corpus", ""}});
  const std::vector<std::string> tokens = {
      "$((", "))", "${", "}", "$", "(", ")", ";", ";;", "\\\n", "\"", "'", "#", "=", "\n", " ", "case $X in", "esac",
      "if [ 1 ]; then", "fi", "else", "*)", "|", "--tensor-model-parallel-size", "--num-layers", "--seq-length",
      "--num-experts", "--expert-model-parallel-size", "--nproc_per_node", "--nnodes", "torchrun", " 0", " -1",
      " 99999999999999999999", "**", "/ 0", "%", "0x", " ............ ", "world_size", "True", "None",
      "--recompute-num-layers", "--pipeline-model-parallel-size", "--micro-batch-size", "--global-batch-size",
      // Megatron-Core's pipeline layout: its repetitions and stages.
      " --pipeline-model-parallel-layout Et|(tt|)*3L", "--pipeline-model-parallel-layout", ")*", "*9", "|", "t", "E", "L",
      "m", ",", "(tt|)*99999999"};
  const auto [ok, bad] = racksim::testing::fuzz_mutants(corpus, tokens, 1500, 2101, [&](const std::string& text, std::size_t, int) {
    imp::MegatronOptions opt;
    opt.system = "h100-sxm";
    // An argument list names no GPU count; the seeds that have none take 64, as `--gpus 64` would give them.
    const bool counted = text.find("torchrun") != std::string::npos || text.find("world_size") != std::string::npos;
    opt.gpus = counted ? 0 : 64;
    expect_scenario(imp::import_megatron_args_text(text, "fuzz.sh", opt).yaml, text);
    return true;
  });
  std::cout << "[ fuzz     ] megatron imports: accepted " << ok << ", rejected " << bad << '\n';
  EXPECT_GT(ok, 100);
  EXPECT_GT(bad, 50);
}

TEST(FuzzImporters, MaxTextConfigsNeverCrash) {
  // A run config is mutated and imported over the committed base.yml and model configs, copied to a folder of its own;
  // a mutated model config is imported as models/fuzzmodel.yml under base.yml.
  const std::string dir = ::testing::TempDir() + "/fuzz_maxtext";
  fs::remove_all(dir);
  fs::create_directories(dir + "/models");
  fs::copy_file(kSrc + "/tests/data/maxtext/base.yml", dir + "/base.yml");
  for (const auto& e : fs::directory_iterator(kSrc + "/tests/data/maxtext/models"))
    fs::copy_file(e.path(), dir + "/models/" + e.path().filename().string());
  const auto runs = racksim::testing::read_corpus(kSrc + "/tests/fuzz/maxtext_corpus", ".yml");
  auto corpus = runs;
  for (auto& m : racksim::testing::read_corpus(kSrc + "/tests/data/maxtext/models", ".yml")) corpus.push_back(std::move(m));
  const std::vector<std::string> tokens = {
      ":", "- ", "[", "]", "{", "}", "\n", "  ", "'", "\"", "&a ", "*a", "? ", "|", "#", "---", "-1", "0", "1e309", "nan",
      "\t", "null", "~", "true", "2147483647", "99999999999999999999", "base_config", "model_name", "ici_",
      "dcn_", "_parallelism", "remat_policy", "per_device_batch_size", "num_experts", "base_num_decoder_layers",
      "offload", "device", "fp8", "../", "/dev/zero", "override_model_config"};
  imp::MaxTextOptions opt;
  opt.system = "h100-sxm";
  opt.system_given = true;
  opt.domain_size = 8;
  const auto [ok, bad] = racksim::testing::fuzz_mutants(corpus, tokens, 600, 2102, [&](const std::string& text, std::size_t pick, int) {
    imp::MaxTextImport r;
    if (pick < runs.size()) {
      write(dir + "/run.yml", text);
      r = imp::import_maxtext(dir + "/run.yml", {}, opt);
    } else {
      write(dir + "/models/fuzzmodel.yml", text);
      r = imp::import_maxtext(dir + "/base.yml", {"model_name=fuzzmodel", "ici_fsdp_parallelism=8"}, opt);
    }
    expect_scenario(r.yaml, text);
    return true;
  });
  std::cout << "[ fuzz     ] maxtext imports: accepted " << ok << ", rejected " << bad << '\n';
  EXPECT_GT(ok, 20);
  EXPECT_GT(bad, 50);
}

TEST(FuzzImporters, HuggingFaceConfigsNeverCrash) {
  const auto corpus = racksim::testing::read_corpus(kSrc + "/tests/data/hf", ".json");
  const std::vector<std::string> tokens = {
      "{", "}", "[", "]", ":", ",", "\"", "\\", "\\u0000", "null", "true", "false", "-1", "0", "1e309", "NaN",
      "99999999999999999999", "\"num_hidden_layers\"", "\"hidden_size\"", "\"num_attention_heads\"",
      "\"num_key_value_heads\"", "\"n_routed_experts\"", "\"num_experts\"", "\"head_dim\"", "\"model_type\"",
      "\"intermediate_size\"", "\"vocab_size\"", "\"first_k_dense_replace\"", "\"kv_lora_rank\""};
  const auto [ok, bad] = racksim::testing::fuzz_mutants(corpus, tokens, 2000, 2103, [&](const std::string& text, std::size_t, int) {
    const auto m = imp::import_hf_config_text(text, "config.json");
    // The model file it writes reads back to the same model (the round trip `racksim models import` promises).
    input::LoadSession s;
    auto root = input::load_yaml_text(imp::to_model_yaml(m, "config.json"), "model.yaml", s.ctx);
    EXPECT_TRUE(root) << text;
    if (!root) return true;
    const auto back = workloads::parse_model(*root, true);
    EXPECT_TRUE(s.diag.empty()) << text;
    EXPECT_EQ(workloads::total_params(back), workloads::total_params(m.model)) << text;
    return true;
  });
  std::cout << "[ fuzz     ] hugging face imports: accepted " << ok << ", rejected " << bad << '\n';
  EXPECT_GT(ok, 100);
  EXPECT_GT(bad, 100);
}
