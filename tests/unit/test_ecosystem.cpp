// What makes racksim fit how its users work (issue 17): model import from Hugging Face
// config.json, training-config import from Megatron-LM arguments, logs on stderr (-v/-q,
// SPDLOG_LEVEL), nccl-tests output as it comes (-C, Slurm .out, -J JSON) and the nccl-tests-shaped
// table `racksim collective -b -e -f` prints (read back by the same importer).
#include <gtest/gtest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "calibration/fit/nccl_tests.h"
#include "sim/cli/collective.h"
#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "tests/unit/cli_util.h"
#include "tests/unit/scenario_text_util.h"
#include "workloads/importers/hf_config.h"
#include "workloads/importers/megatron_args.h"
#include "workloads/model_spec.h"

using nlohmann::json;
namespace fs = std::filesystem;
namespace imp = racksim::workloads::importers;
using racksim::testing::run_cli;

namespace {

const std::string kSrc = RACKSIM_SOURCE_DIR;
const std::string kHf = kSrc + "/tests/data/hf/";
const std::string kMeg = kSrc + "/tests/data/megatron/";
const std::string kNccl = kSrc + "/tests/data/nccl-tests-formats/";

std::string slurp(const std::string& path) { return racksim::testing::read_file(path); }

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string dir = ::testing::TempDir() + "/eco";
  fs::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The error text of an InputError thrown by f.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const racksim::input::InputError& e) {
    return e.what();
  }
  return "";
}

// ----------------------------------------------------------------- Hugging Face config.json

struct Published {
  const char* file;
  double params, active;  // from the model cards
  double tolerance;
};

TEST(HfImport, RealConfigsGiveThePublishedParameterCounts) {
  // Model cards: Llama 3.1 8B 8.03B, 70B 70.6B; Mistral 7B v0.3 7.25B; Qwen2.5-7B 7.61B; Qwen3-8B
  // 8.2B; Qwen3-30B-A3B 30.5B / 3.3B active; Mixtral 8x7B 46.7B / 12.9B; DeepSeek-V3 671B / 37B
  // (without the 14B multi-token-prediction module).
  const std::vector<Published> cases = {
      {"llama-3.1-8b-instruct.json", 8.03e9, 8.03e9, 0.005},  {"llama-3.1-70b-instruct.json", 70.6e9, 70.6e9, 0.005},
      {"mistral-7b-instruct-v0.3.json", 7.25e9, 7.25e9, 0.005}, {"qwen2.5-7b-instruct.json", 7.61e9, 7.61e9, 0.005},
      {"qwen3-8b.json", 8.2e9, 8.2e9, 0.01},                  {"qwen3-30b-a3b.json", 30.5e9, 3.3e9, 0.02},
      {"mixtral-8x7b-v0.1.json", 46.7e9, 12.9e9, 0.005},      {"deepseek-v3.json", 671e9, 37e9, 0.02},
  };
  for (const auto& c : cases) {
    const auto m = imp::import_hf_config(kHf + c.file);
    EXPECT_NEAR(racksim::workloads::total_params(m.model) / c.params, 1.0, c.tolerance) << c.file;
    EXPECT_NEAR(racksim::workloads::active_params(m.model) / c.active, 1.0, c.tolerance) << c.file;
  }
}

TEST(HfImport, EveryFieldNamesItsSourceKey) {
  const auto m = imp::import_hf_config(kHf + "deepseek-v3.json");
  for (const char* f : {"layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn", "tied_embeddings",
                        "moe.experts", "moe.top_k", "moe.expert_ffn_hidden", "moe.shared_experts", "moe.first_dense_layers",
                        "mla.q_lora_rank", "mla.kv_lora_rank", "mla.qk_nope_head_dim", "mla.qk_rope_head_dim",
                        "mla.v_head_dim"})
    ASSERT_TRUE(m.model.sources.count(f)) << f;
  EXPECT_EQ(m.model.sources.at("moe.first_dense_layers"), "HF deepseek-v3.json first_k_dense_replace = 3");
  EXPECT_EQ(m.model.sources.at("mla.q_lora_rank"), "HF deepseek-v3.json q_lora_rank = 1536");
  ASSERT_EQ(m.warnings.size(), 1u);  // the multi-token-prediction module
  EXPECT_NE(m.warnings[0].find("num_nextn_predict_layers 1"), std::string::npos);
}

// The imported file and the shipped preset describe the same network: same fields, same step.
TEST(HfImport, ImportedModelsMatchTheShippedPresets) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"llama-3.1-8b-instruct.json", "llama3-8b"}, {"llama-3.1-70b-instruct.json", "llama3-70b"},
      {"mixtral-8x7b-v0.1.json", "mixtral-8x7b"}, {"deepseek-v3.json", "deepseek-v3"}};
  for (const auto& [file, preset] : pairs) {
    const auto m = imp::import_hf_config(kHf + file);
    const std::string out = temp_file(preset + "-imported.yaml", imp::to_model_yaml(m, file));
    const auto a = run_cli({"models", "show", preset, "--json"});
    const auto b = run_cli({"models", "show", out, "--json"});
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    json ja = json::parse(a.out), jb = json::parse(b.out);
    for (const char* k : {"layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn",
                          "tied_embeddings", "qk_norm", "params_derived", "active_params_derived"})
      EXPECT_EQ(ja[k], jb[k]) << preset << " " << k;
    EXPECT_EQ(ja.value("moe", json()), jb.value("moe", json())) << preset;
  }
  // And a step on the imported Llama 3.1 8B is the quickstart's own step.
  const std::string llama = temp_file("llama.yaml", imp::to_model_yaml(imp::import_hf_config(kHf + "llama-3.1-8b-instruct.json"), "x"));
  const auto base = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--json"});
  const auto mine = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--json", "--set", "model={preset: " + llama + "}"});
  ASSERT_EQ(mine.code, 0) << mine.err;
  EXPECT_EQ(json::parse(base.out)["step_time_s"], json::parse(mine.out)["step_time_s"]);
  EXPECT_EQ(json::parse(base.out)["peak_memory_bytes"], json::parse(mine.out)["peak_memory_bytes"]);
}

TEST(HfImport, ModelFileRoundTrips) {
  for (const char* file : {"qwen3-30b-a3b.json", "deepseek-v3.json", "mistral-7b-instruct-v0.3.json"}) {
    const auto m = imp::import_hf_config(kHf + file);
    racksim::input::LoadSession s;
    auto root = racksim::input::load_yaml_text(imp::to_model_yaml(m, file), "x.yaml", s.ctx);
    ASSERT_TRUE(root);
    const auto back = racksim::workloads::parse_model(*root, true);
    ASSERT_TRUE(s.diag.empty()) << file;
    EXPECT_EQ(racksim::workloads::total_params(back), racksim::workloads::total_params(m.model)) << file;
    EXPECT_EQ(back.head_dim, m.model.head_dim) << file;
    EXPECT_EQ(back.sources, m.model.sources) << file;
  }
}

TEST(HfImport, Qwen3HeadDimIsNotHiddenOverHeads) {
  const auto m = imp::import_hf_config(kHf + "qwen3-30b-a3b.json");
  EXPECT_EQ(m.model.head_dim, 128);  // hidden 2048 / 32 heads would be 64
  EXPECT_EQ(m.model.moe->experts, 128);
  EXPECT_EQ(m.model.moe->expert_ffn_hidden, 768);
  EXPECT_EQ(m.model.moe->first_dense_layers, 0);
}

TEST(HfImport, WhatTheModelFileCannotSayIsAWarning) {
  json c = json::parse(slurp(kHf + "qwen3-30b-a3b.json"));
  c["mlp_only_layers"] = {0, 1};
  c["decoder_sparse_step"] = 2;
  auto m = imp::import_hf_config_text(c.dump(), "a/config.json");
  EXPECT_EQ(m.model.moe->first_dense_layers, 2);
  EXPECT_EQ(m.model.name, "a");  // config.json: the folder names the model
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("decoder_sparse_step 2"), std::string::npos);
  c["mlp_only_layers"] = {3, 7};
  m = imp::import_hf_config_text(c.dump(), "x.json");
  EXPECT_EQ(m.model.moe->first_dense_layers, 0);
  EXPECT_NE(m.warnings[0].find("not a leading run"), std::string::npos);

  json mistral = json::parse(slurp(kHf + "mistral-7b-instruct-v0.3.json"));
  mistral["sliding_window"] = 4096;
  m = imp::import_hf_config_text(mistral.dump(), "m.json");
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("sliding_window 4096"), std::string::npos);
  EXPECT_EQ(m.model.name, "mistral-7b-instruct-v0.3");  // from _name_or_path
}

TEST(HfImport, SharedExpertsFromQwen2Moe) {
  json c = {{"model_type", "qwen2_moe"}, {"architectures", {"Qwen2MoeForCausalLM"}}, {"num_hidden_layers", 24},
            {"hidden_size", 2048}, {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"vocab_size", 151936},
            {"intermediate_size", 5632}, {"moe_intermediate_size", 1408}, {"shared_expert_intermediate_size", 5632},
            {"num_experts", 60}, {"num_experts_per_tok", 4}, {"decoder_sparse_step", 1}, {"mlp_only_layers", json::array()}};
  const auto m = imp::import_hf_config_text(c.dump(), "qwen1.5-moe.json");
  EXPECT_EQ(m.model.moe->shared_experts, 4);
  EXPECT_TRUE(m.model.tied_embeddings == false);
  EXPECT_NE(m.model.sources.at("tied_embeddings").find("defaults to false"), std::string::npos);
}

TEST(HfImport, MultimodalConfigsImportTheirTextModel) {
  json c = {{"architectures", {"LlavaForConditionalGeneration"}}, {"model_type", "llava"},
            {"text_config", json::parse(slurp(kHf + "qwen3-8b.json"))}};
  const auto m = imp::import_hf_config_text(c.dump(), "vl.json");
  EXPECT_EQ(m.model.layers, 36);
  EXPECT_NE(m.warnings[0].find("text_config"), std::string::npos);
}

TEST(HfImport, InvalidConfigsAreErrorsWithPositions) {
  EXPECT_NE(error_of([] { imp::import_hf_config_text("{\n  \"hidden_size\": 4096,\n  oops\n}", "bad.json"); })
                .find("bad.json:3:"),
            std::string::npos);
  json c = json::parse(slurp(kHf + "llama-3.1-8b-instruct.json"));
  c.erase("num_hidden_layers");
  c["hidden_size"] = "4096";
  const std::string e = error_of([&] { imp::import_hf_config_text(c.dump(2), "l.json"); });
  EXPECT_NE(e.find("l.json: error: num_hidden_layers: missing"), std::string::npos) << e;
  EXPECT_NE(e.find("error: hidden_size: expected an integer, got \"4096\""), std::string::npos) << e;
  // A value past the bound says the bound (a red-team pass: "at least 1, got 1000000000"), and a float too large for an
  // integer is refused, not cast (undefined behaviour).
  for (const json& big : {json(1000000000), json(1e300), json(18446744073709551615ULL)}) {
    json l = json::parse(slurp(kHf + "llama-3.1-8b-instruct.json"));
    l["hidden_size"] = big;
    const std::string b = error_of([&] { imp::import_hf_config_text(l.dump(), "big.json"); });
    EXPECT_NE(b.find("error: hidden_size: expected an integer from 1 to 100000000, got " + big.dump()), std::string::npos) << b;
  }
  json ds = json::parse(slurp(kHf + "deepseek-v3.json"));
  ds["q_lora_rank"] = nullptr;
  EXPECT_NE(error_of([&] { imp::import_hf_config_text(ds.dump(), "v2lite.json"); }).find("q_lora_rank"), std::string::npos);
  const auto r = run_cli({"models", "import", kHf + "missing.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open file"), std::string::npos);
}

TEST(HfImport, UnknownFamiliesAreReadWithAWarning) {
  json c = json::parse(slurp(kHf + "llama-3.1-8b-instruct.json"));
  c["model_type"] = "granite";
  const auto m = imp::import_hf_config_text(c.dump(), "g.json");
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_NE(m.warnings[0].find("model_type 'granite' is not one racksim knows"), std::string::npos);
}

// ----------------------------------------------------------------- Megatron-LM arguments

imp::MegatronImport meg(const std::string& text, imp::MegatronOptions opt = {}) {
  if (opt.system.empty()) opt.system = "h100-sxm";
  return imp::import_megatron_args_text(text, "args.txt", opt);
}

// Options for an import onto `gpus` H100s.
imp::MegatronOptions h100s(int gpus) {
  imp::MegatronOptions o;
  o.system = "h100-sxm";
  o.gpus = gpus;
  return o;
}

// A small dense model's arguments (4 layers, hidden 1024, 16 heads, one sequence per micro-batch), without its length.
const std::string kSmallDense = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --vocab-size 1024 "
                                "--micro-batch-size 1 --global-batch-size 8 --bf16 --swiglu ";

// Megatron's printed arguments block for kSmallDense at 2,048 tokens on 8 GPUs, and `extra` settings (name, value).
std::string small_dense_printed(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> all = {
      {"bf16", "True"},       {"global_batch_size", "8"},   {"hidden_size", "1024"}, {"micro_batch_size", "1"},
      {"num_attention_heads", "16"}, {"num_layers", "4"}, {"padded_vocab_size", "1024"}, {"seq_length", "2048"},
      {"world_size", "8"}};
  all.insert(all.end(), extra.begin(), extra.end());
  std::string text = "------------------------ arguments ------------------------\n";
  for (const auto& [name, value] : all) text += "  " + name + " " + std::string(48 - name.size(), '.') + " " + value + "\n";
  return text + "-------------------- end of arguments ---------------------\n";
}

// `text` with its one occurrence of `from` replaced by `to` (a test fails if there is none).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The scenario an import gives, loaded as racksim loads it.
racksim::sim::Scenario load(const imp::MegatronImport& r) { return racksim::sim::load_scenario_text(r.yaml, "imported.yaml"); }

// Importing `text` (and, with `load_scenario`, loading the scenario it writes) fails with an error that contains `what`.
void expect_refused(const std::string& text, const imp::MegatronOptions& opt, const std::string& what,
                    bool load_scenario = false) {
  try {
    const auto r = meg(text, opt);
    if (load_scenario) load(r);
    ADD_FAILURE() << "imported: " << text;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

const std::string kDeepSeekArgs = R"(
--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128
--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128
--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048
--moe-layer-freq ([0]*3+[1]*58) --moe-token-dispatcher-type flex --moe-enable-deepep --moe-grouped-gemm
--moe-router-num-groups 8 --moe-router-group-topk 4 --overlap-moe-expert-parallel-comm --delay-wgrad-compute
--vocab-size 129280 --swiglu --untie-embeddings-and-output-weights --seq-length 4096
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 4
--expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 8192 --bf16 --fp8-format e4m3 --fp8-recipe mxfp8
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --create-all-gather-group
--recompute-granularity selective --recompute-modules core_attn mla_up_proj
--mtp-num-layers 1 --lr 1e-4 --foo-bar 3
)";

TEST(MegatronImport, EveryMappedFlagReachesItsScenarioKey) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const auto r = meg(kDeepSeekArgs, opt);
  const auto sc = load(r);
  const auto& t = sc.training;
  const auto& p = t.parallelism;
  EXPECT_EQ(sc.system.gpus, 256);
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.pp, 8);
  EXPECT_EQ(p.vp, 4);
  EXPECT_EQ(p.ep, 32);
  EXPECT_EQ(p.etp, 1);
  EXPECT_EQ(t.moe.dispatcher, racksim::workloads::MoeDispatcher::deepep);
  // --create-all-gather-group is Megatron-FSDP's: with the distributed optimizer it changes nothing, and the import
  // says so; with --use-megatron-fsdp the gathers get communicators of their own.
  EXPECT_EQ(t.dp_all_gather_group, racksim::workloads::TrainingConfig::DpAllGatherGroup::shared);
  EXPECT_TRUE(std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) {
    return w.find("--create-all-gather-group without --use-megatron-fsdp: no effect") != std::string::npos;
  }));
  {
    const auto fsdp = load(meg(kDeepSeekArgs + " --use-megatron-fsdp", opt));
    EXPECT_EQ(fsdp.training.dp_all_gather_group, racksim::workloads::TrainingConfig::DpAllGatherGroup::separate);
  }
  // --moe-router-num-groups 8 --moe-router-group-topk 4: the model's expert groups, not a node limit.
  EXPECT_EQ(t.moe.max_nodes_per_token, 0);
  ASSERT_TRUE(sc.model.moe);
  EXPECT_EQ(sc.model.moe->router_groups, 8);
  EXPECT_EQ(sc.model.moe->router_group_top_k, 4);
  EXPECT_TRUE(t.moe.a2a_overlap);
  // --delay-wgrad-compute with the overlap: part of its order, used and not warned about.
  EXPECT_NE(std::find(r.used.begin(), r.used.end(), "--delay-wgrad-compute"), r.used.end());
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("delay-wgrad-compute"), std::string::npos) << w;
  EXPECT_EQ(t.precision, racksim::sim::Dtype::mxfp8);
  EXPECT_EQ(t.optimizer_sharding, racksim::workloads::OptimizerSharding::zero1);
  EXPECT_TRUE(t.overlap_grad_reduce);
  EXPECT_TRUE(t.overlap_param_gather);
  // --recompute-modules core_attn mla_up_proj: MLA's up projections recomputed (racksim's qkv chain not saved).
  EXPECT_EQ(t.recompute.mode, racksim::workloads::RecomputeMode::names);
  EXPECT_EQ(std::count(t.recompute.save.begin(), t.recompute.save.end(), "qkv"), 0);
  EXPECT_EQ(std::count(t.recompute.save.begin(), t.recompute.save.end(), "expert_act"), 1);
  EXPECT_FALSE(t.sequence_parallel);  // Megatron's default without --sequence-parallel
  EXPECT_EQ(t.global_batch, 8192);
  EXPECT_EQ(t.seq_len, 4096);
  const auto& m = sc.model;
  ASSERT_TRUE(m.moe && m.mla);
  EXPECT_EQ(m.moe->first_dense_layers, 3);
  EXPECT_EQ(m.moe->shared_experts, 1);
  EXPECT_EQ(m.mla->q_lora_rank, 1536);
  EXPECT_EQ(m.vocab, 129280);  // a multiple of 128 already
  EXPECT_NEAR(racksim::workloads::total_params(m) / 671e9, 1.0, 0.01);
  // Unknown flags and approximations are warnings; the learning rate is ignored, not unknown.
  auto has = [&](const std::string& needle) {
    for (const auto& w : r.warnings)
      if (w.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("--foo-bar 3 (line 13): not an argument racksim knows"));
  EXPECT_EQ(t.mtp_layers, 1);  // --mtp-num-layers 1: training.mtp_layers, no longer a warning
  EXPECT_FALSE(has("--mtp-num-layers"));
  EXPECT_TRUE(has("--recompute-modules core_attn"));
  EXPECT_FALSE(has("--lr"));
  EXPECT_NE(std::find(r.ignored.begin(), r.ignored.end(), "--lr 1e-4"), r.ignored.end());
  EXPECT_NE(r.yaml.find("ep: 32                        # --expert-model-parallel-size 32"), std::string::npos) << r.yaml;
}

// --cuda-graph-scope: Transformer Engine's graphs of the named modules (training.cuda_graph_scope);
// scopes racksim does not model are warnings, and moe_preprocess brings moe_router (Megatron's rule).
TEST(MegatronImport, CudaGraphScopeReachesItsKey) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const auto r = meg(kDeepSeekArgs + "--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_preprocess mamba\n", opt);
  const auto& t = load(r).training;
  EXPECT_TRUE(t.cuda_graphs);
  EXPECT_TRUE(t.cuda_graph_scope.attn);
  EXPECT_TRUE(t.cuda_graph_scope.moe_router);
  EXPECT_TRUE(t.cuda_graph_scope.moe_preprocess);
  EXPECT_FALSE(t.cuda_graph_scope.mlp);
  bool warned = false;
  bool added = false;
  for (const auto& w : r.warnings) {
    warned |= w.find("--cuda-graph-scope mamba: not modelled") != std::string::npos;
    added |= w.find("--cuda-graph-scope moe_preprocess without moe_router: Megatron-Core requires both; moe_router added") !=
             std::string::npos;
  }
  EXPECT_TRUE(warned);
  EXPECT_TRUE(added);  // the scope the script did not write is said
  // Without --cuda-graph-impl the scope has nothing to select: no key.
  EXPECT_EQ(meg(kDeepSeekArgs + "--cuda-graph-scope attn\n", opt).yaml.find("cuda_graph_scope"), std::string::npos);
}

// --pipeline-model-parallel-layout: Megatron-LM takes vp from the layout's stages / pp (arguments.py), and a layout whose
// middle stages hold equal decoder layers is racksim's first/last stage counts (a review found the layout dropped: the
// job ran as 1F1B on racksim's own split, DeepSeek-V3's 12.6 s where the layout's interleaved job is 11.3 s). Layouts
// Megatron-Core refuses are refused with its reason.
TEST(MegatronImport, PipelineLayoutSetsTheVirtualStagesAndTheEnds) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const std::string args = replaced(kDeepSeekArgs, "--num-virtual-stages-per-pipeline-rank 4",
                                    "--pipeline-model-parallel-layout \"Et|(tt|)*30mL\"");
  const auto r = meg(args, opt);
  const auto sc = load(r);
  EXPECT_EQ(sc.training.parallelism.vp, 4);  // 32 stages / pp 8
  EXPECT_NE(r.yaml.find("first_stage_layers: 1"), std::string::npos) << r.yaml;
  EXPECT_NE(r.yaml.find("last_stage_layers: 0"), std::string::npos) << r.yaml;
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("layout"), std::string::npos) << w;
  // The same layout beside a vp it contradicts, too few decoder layers, an unknown character, MTP layers the flag does
  // not have, stages that do not divide over pp.
  expect_refused(replaced(kDeepSeekArgs, "--num-virtual-stages-per-pipeline-rank 4",
                          "--num-virtual-stages-per-pipeline-rank 2 --pipeline-model-parallel-layout \"Et|(tt|)*30mL\""),
                 opt, "32 stages over pp 8 are 4 virtual stages per rank");
  expect_refused(replaced(args, "(tt|)*30mL", "(tt|)*29tt|mLL"), opt, "the embedding (E) must come first and the loss (L) last");
  expect_refused(replaced(args, "(tt|)*30mL", "(tt|)*29ttt|mL"), opt, "62 decoder layers (t) where --num-layers is 61");
  expect_refused(replaced(args, "(tt|)*30mL", "(tt|)*30xL"), opt, "'x' (Megatron-Core knows E, t, m and L)");
  expect_refused(replaced(args, "(tt|)*30mL", "(tt|)*30L"), opt, "0 MTP layers (m) where --mtp-num-layers is 1");
  expect_refused(replaced(args, "Et|(tt|)*30mL", "Et|(tt|)*29ttmL"), opt, "31 stages do not divide over pp 8");
  // A long layout is scanned, not matched by std::regex, which recursed per character and overflowed the stack at
  // 300,000 layers (a segfault); unrolled past a million layers it is refused.
  expect_refused(replaced(args, "Et|(tt|)*30mL", "E(" + std::string(300'000, 't') + ")*4mL"), opt,
                 "more than a million layers");
  // Middle stages of unequal layers: vp from the layout, the layers split evenly, said.
  const auto uneven = meg(replaced(args, "Et|(tt|)*30mL", "Et|t|(tt|)*29,tmL"), opt);
  EXPECT_NE(std::find_if(uneven.warnings.begin(), uneven.warnings.end(),
                         [](const std::string& w) { return w.find("its middle stages hold different numbers") != std::string::npos; }),
            uneven.warnings.end());
}

// Switches Megatron-Core refuses together (transformer_config.py at d98e8a64) are refused with its reason, where the
// import had mapped them to something runnable (a review's finding): DeepEP without the flex dispatcher or beside the
// hybridep backend, mla_up_proj recompute without MLA, moe_act recompute without grouped GEMMs.
TEST(MegatronImport, SwitchesMegatronRefusesTogetherAreRefused) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  expect_refused(replaced(kDeepSeekArgs, "--moe-token-dispatcher-type flex", "--moe-token-dispatcher-type alltoall"), opt,
                 "--moe-enable-deepep: with the alltoall dispatcher: Megatron-Core refuses it");
  expect_refused(replaced(kDeepSeekArgs, "--moe-token-dispatcher-type flex", ""), opt,
                 "--moe-enable-deepep: with the allgather dispatcher (Megatron's default)");
  expect_refused(kDeepSeekArgs + " --moe-flex-dispatcher-backend hybridep", opt, "Only one backend is supported");
  expect_refused(replaced(kDeepSeekArgs, " --moe-grouped-gemm", "") + " --recompute-modules moe_act", opt,
                 "moe_act in recompute_modules is only supported with moe_grouped_gemm");
  expect_refused(replaced(kDeepSeekArgs, "--multi-latent-attention ", "--kv-channels 128 ") +
                     " --recompute-modules mla_up_proj",
                 opt, "mla_up_proj in recompute_modules is only supported with multi_latent_attention");
  // The flex dispatcher's own backends import as before.
  EXPECT_NE(meg(replaced(kDeepSeekArgs, "--moe-enable-deepep", "--moe-flex-dispatcher-backend hybridep"), opt)
                .yaml.find("dispatcher: hybridep"),
            std::string::npos);
}

// --fp8-recipe blockwise (DeepSeek-style 1x128 / 128x128 scales) reaches training.fp8_recipe, so the Hopper
// presets' measured blockwise rate applies; mxfp8 stays a precision of its own.
TEST(MegatronImport, Fp8RecipeReachesItsKey) {
  imp::MegatronOptions opt;
  opt.system = "h100-sxm";
  opt.gpus = 256;
  const auto r = meg(replaced(kDeepSeekArgs, "--fp8-recipe mxfp8", "--fp8-recipe blockwise"), opt);
  const auto sc = load(r);
  EXPECT_EQ(sc.training.precision, racksim::sim::Dtype::fp8);
  EXPECT_EQ(sc.training.fp8_recipe, racksim::workloads::Fp8Recipe::blockwise);
  EXPECT_NE(r.yaml.find("fp8_recipe: blockwise"), std::string::npos) << r.yaml;
  EXPECT_EQ(meg(kDeepSeekArgs, opt).yaml.find("fp8_recipe"), std::string::npos);
}

// The MoE switches racksim models reach their keys: --moe-router-fusion, --moe-permute-fusion (host work) and the
// router's padding (--moe-router-padding-for-quantization, or its alias -for-fp8), which Megatron refuses without
// fp8/fp4, as the import does.
TEST(MegatronImport, MoeFusionsAndRouterPaddingReachTheirKeys) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const auto plain = load(meg(kDeepSeekArgs, opt)).training.moe;
  EXPECT_FALSE(plain.router_fusion || plain.permute_fusion || plain.router_padding);
  for (const char* pad : {"--moe-router-padding-for-quantization", "--moe-router-padding-for-fp8"}) {
    const auto r = meg(std::string(kDeepSeekArgs) + " --moe-router-fusion --moe-permute-fusion " + pad, opt);
    const auto m = load(r).training.moe;
    EXPECT_TRUE(m.router_fusion && m.permute_fusion && m.router_padding) << pad;
    EXPECT_NE(r.yaml.find(std::string("router_padding: true          # ") + pad), std::string::npos) << r.yaml;
  }
  // --no-rope-fusion with MLA: a warning that the unfused rotary path's copies are not modelled.
  const auto unfused = meg(std::string(kDeepSeekArgs) + " --no-rope-fusion", opt);
  EXPECT_NE(std::find_if(unfused.warnings.begin(), unfused.warnings.end(),
                         [](const std::string& w) { return w.find("--no-rope-fusion with --multi-latent-attention") == 0; }),
            unfused.warnings.end());
  const std::string bf16 = replaced(kDeepSeekArgs, "--fp8-format e4m3 --fp8-recipe mxfp8", "");
  expect_refused(bf16 + " --moe-router-padding-for-quantization", opt, "fp8/fp4 must be specified");
}

// Token dropping: --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity reach their keys; the padding
// without a capacity is refused, as Megatron-Core refuses it; "None" (Megatron's default) is dropless.
TEST(MegatronImport, CapacityFactorAndPaddingReachTheirKeys) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  // (The DeepSeek-V3 script's DeepEP: Megatron-Core refuses padding to capacity with it, so the alltoall dispatcher.)
  const std::string args = kDeepSeekArgs;
  const std::string alltoall =
      replaced(args, "--moe-token-dispatcher-type flex --moe-enable-deepep", "--moe-token-dispatcher-type alltoall");
  const auto r = meg(alltoall + " --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity", opt);
  const auto m = load(r).training.moe;
  EXPECT_DOUBLE_EQ(m.capacity_factor, 1.25);
  EXPECT_TRUE(m.pad_to_capacity);
  EXPECT_NE(r.yaml.find("# --moe-expert-capacity-factor 1.25"), std::string::npos) << r.yaml;
  const auto none = load(meg(alltoall + " --moe-expert-capacity-factor None", opt)).training.moe;
  EXPECT_EQ(none.capacity_factor, 0.0);
  EXPECT_FALSE(none.pad_to_capacity);
  expect_refused(alltoall + " --moe-pad-expert-input-to-capacity", opt, "without --moe-expert-capacity-factor");
  // The benchmark's forced balancing (random router logits) reaches its key.
  EXPECT_TRUE(load(meg(alltoall + " --moe-router-force-load-balancing", opt)).training.moe.force_load_balancing);
  EXPECT_FALSE(load(meg(alltoall, opt)).training.moe.force_load_balancing);
  // With DeepEP the imported scenario is refused where Megatron-Core refuses the run.
  expect_refused(args + " --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity", opt,
                      "does not support moe_pad_expert_input_to_capacity", true);
}

// Megatron's module lists as activation names: --recompute-modules other than the attention core alone, and
// fine-grained activation offloading's --offload-modules (each module's input to the host), become a {save, offload}
// map; the Qwen3 GB200 MXFP8 row's flags give the map its hand-made scenario states.
TEST(MegatronImport, RecomputeAndOffloadModulesBecomeActivationNames) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  using Names = std::set<std::string>;
  const auto policy = [&](const std::string& flags) {
    const auto t = load(meg(std::string(kDeepSeekArgs) + " " + flags, opt)).training.recompute;
    return std::pair<Names, Names>{Names(t.save.begin(), t.save.end()), Names(t.offload.begin(), t.offload.end())};
  };
  const auto [save, off] = policy("--recompute-granularity selective --recompute-modules moe_act layernorm "
                                  "--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act");
  EXPECT_EQ(off, (Names{"dispatch", "expert_out"}));
  // (the hand-made row saves qkv, attn, attn_out, router; the dense MLP's names are the first dense layers')
  EXPECT_EQ(save, (Names{"qkv", "attn", "attn_out", "mlp_gate", "mlp_up", "mlp_act", "router"}));
  const auto [save2, off2] = policy("--recompute-granularity selective --recompute-modules mla_up_proj moe mlp");
  EXPECT_EQ(save2, (Names{"norm1", "attn", "attn_out", "norm2"}));
  EXPECT_TRUE(off2.empty());
  // Without the switch Megatron offloads nothing; the core attention alone stays selective.
  const auto plain = load(meg(std::string(kDeepSeekArgs) + " --offload-modules expert_fc1", opt));
  EXPECT_TRUE(plain.training.recompute.offload.empty());
  const auto core = load(meg(std::string(kDeepSeekArgs) + " --recompute-modules core_attn", opt));
  EXPECT_EQ(core.training.recompute.mode, racksim::workloads::RecomputeMode::selective);
  const auto odd = meg(std::string(kDeepSeekArgs) + " --recompute-granularity selective --recompute-modules warp_drive", opt);
  EXPECT_NE(std::find_if(odd.warnings.begin(), odd.warnings.end(),
                         [](const std::string& w) { return w.find("--recompute-modules warp_drive: not a module") == 0; }),
            odd.warnings.end());
}

// --no-fp8-wgrad keeps the weight-gradient GEMMs in bf16 (training.fp8_wgrad false); without it the key is not written.
TEST(MegatronImport, NoFp8WgradReachesItsKey) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const auto r = meg(std::string(kDeepSeekArgs) + " --no-fp8-wgrad", opt);
  EXPECT_FALSE(load(r).training.fp8_wgrad);
  EXPECT_NE(r.yaml.find("fp8_wgrad: false"), std::string::npos) << r.yaml;
  EXPECT_TRUE(load(meg(kDeepSeekArgs, opt)).training.fp8_wgrad);
  EXPECT_EQ(meg(kDeepSeekArgs, opt).yaml.find("fp8_wgrad"), std::string::npos);
}

// --qk-layernorm (per-head query/key norms, as Qwen3) reaches model.qk_norm; with MLA it names the latent norms,
// which mla already holds.
TEST(MegatronImport, QkLayernormReachesItsKey) {
  imp::MegatronOptions opt;
  opt.system = "h100-sxm";
  opt.gpus = 8;
  const std::string dense = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --group-query-attention "
                            "--num-query-groups 2 --kv-channels 128 --vocab-size 1024 --seq-length 2048 "
                            "--micro-batch-size 1 --global-batch-size 8 --bf16 --swiglu\n";
  const auto r = meg(dense + "--qk-layernorm\n", opt);
  EXPECT_TRUE(load(r).model.qk_norm);
  EXPECT_NE(r.yaml.find("qk_norm: true"), std::string::npos) << r.yaml;
  EXPECT_FALSE(load(meg(dense, opt)).model.qk_norm);
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const auto mla = meg(kDeepSeekArgs + "--qk-layernorm\n", opt);
  EXPECT_FALSE(load(mla).model.qk_norm);
  EXPECT_EQ(mla.yaml.find("qk_norm"), std::string::npos);
}

// --no-gradient-accumulation-fusion and --transformer-impl reach their keys (training.gradient_accumulation_fusion,
// training.transformer_impl); both had been dropped as not changing the step, which they do since the wgrad's fp32
// accumulate and Transformer Engine's wgrad layout were measured. An implementation racksim does not model is an error.
TEST(MegatronImport, GradientAccumulationFusionAndTransformerImplReachTheirKeys) {
  const auto opt = h100s(8);
  const std::string dense = kSmallDense + "--seq-length 2048\n";
  const auto plain = load(meg(dense, opt));
  EXPECT_TRUE(plain.training.gradient_accumulation_fusion);
  EXPECT_EQ(plain.training.transformer_impl, racksim::workloads::TransformerImpl::transformer_engine);
  const auto both = meg(dense + "--no-gradient-accumulation-fusion --transformer-impl local\n", opt);
  EXPECT_FALSE(load(both).training.gradient_accumulation_fusion);
  EXPECT_EQ(load(both).training.transformer_impl, racksim::workloads::TransformerImpl::local);
  EXPECT_NE(both.yaml.find("transformer_impl: local"), std::string::npos) << both.yaml;
  EXPECT_EQ(load(meg(dense + "--transformer-impl transformer_engine\n", opt)).training.transformer_impl,
            racksim::workloads::TransformerImpl::transformer_engine);
  // Megatron's local spec runs its own DotProductAttention: scores materialized.
  EXPECT_EQ(load(both).training.attention, racksim::workloads::AttentionImpl::materialized);
  // The same from Megatron's printed arguments (default-on switches printed False).
  const std::string log = small_dense_printed({{"fp8", "hybrid"}, {"fp8_wgrad", "False"},
                                                {"gradient_accumulation_fusion", "False"}, {"transformer_impl", "local"}});
  const auto logged = load(meg(log, opt));
  EXPECT_FALSE(logged.training.gradient_accumulation_fusion);
  EXPECT_FALSE(logged.training.fp8_wgrad);
  EXPECT_EQ(logged.training.transformer_impl, racksim::workloads::TransformerImpl::local);
  expect_refused(dense + "--transformer-impl inference_optimized\n", opt,
                 "--transformer-impl: unknown value 'inference_optimized'; racksim models transformer_engine | local");
}

// --cp-comm-type reaches training.cp_comm (it had been dropped as not changing the step; the three exchanges differ
// by about 10% on a CP 2 layer): p2p, a2a, allgather (all_gather); one type per layer is modelled as the first with a
// warning; a2a+p2p (hierarchical) is an error.
TEST(MegatronImport, CpCommTypeReachesItsKey) {
  const auto opt = h100s(8);
  const std::string cp = kSmallDense + "--seq-length 8192 --tensor-model-parallel-size 2 --context-parallel-size 2 ";
  using racksim::workloads::CpComm;
  EXPECT_EQ(load(meg(cp + "\n", opt)).training.cp_comm, CpComm::p2p);
  EXPECT_EQ(load(meg(cp + "--cp-comm-type a2a\n", opt)).training.cp_comm, CpComm::a2a);
  EXPECT_EQ(load(meg(cp + "--cp-comm-type allgather\n", opt)).training.cp_comm, CpComm::all_gather);
  const auto per_layer = meg(cp + "--cp-comm-type a2a p2p a2a p2p\n", opt);
  EXPECT_EQ(load(per_layer).training.cp_comm, CpComm::a2a);
  ASSERT_FALSE(per_layer.warnings.empty());
  EXPECT_NE(per_layer.warnings.back().find("one type per layer; modelled as a2a"), std::string::npos);
  expect_refused(cp + "--cp-comm-type a2a+p2p\n", opt, "racksim models p2p | a2a | allgather (not a2a+p2p");
}

// Options racksim runs one way only are said, not dropped: --moe-shared-expert-overlap, a cross-entropy
// implementation other than native, --manual-gc and --ddp-bucket-size had been ignored as not changing the step.
TEST(MegatronImport, OptionsRunOneWayAreSaid) {
  const auto r = meg(kSmallDense + "--seq-length 2048 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te "
                                   "--moe-shared-expert-overlap --manual-gc --manual-gc-interval 10 "
                                   "--ddp-bucket-size 100000000\n",
                     h100s(8));
  std::string all;
  for (const auto& w : r.warnings) all += w + "\n";
  EXPECT_NE(all.find("--moe-shared-expert-overlap: not modelled"), std::string::npos) << all;
  EXPECT_NE(all.find("--cross-entropy-fusion-impl te: modelled as native"), std::string::npos) << all;
  EXPECT_NE(all.find("--manual-gc: not modelled; racksim's host model has no Python garbage collector"), std::string::npos)
      << all;
  EXPECT_NE(all.find("--ddp-bucket-size 100000000: not modelled; racksim reduces and gathers the data-parallel gradients "
                     "and parameters one bucket per layer"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("ignored"), std::string::npos) << all;
  for (const auto& i : r.ignored) {
    EXPECT_EQ(i.find("manual-gc "), std::string::npos) << i;  // (its interval is said with it, and listed)
    EXPECT_EQ(i.find("ddp-bucket-size"), std::string::npos) << i;
  }
  const auto native = meg(kSmallDense + "--seq-length 2048 --cross-entropy-fusion-impl native\n", h100s(8));
  for (const auto& w : native.warnings) EXPECT_EQ(w.find("cross-entropy-fusion-impl"), std::string::npos) << w;
  // --enable-experimental and --logging-level are known and change nothing (no "not an argument racksim knows").
  const auto quiet = meg(kSmallDense + "--seq-length 2048 --enable-experimental --logging-level 40\n", h100s(8));
  for (const auto& w : quiet.warnings) EXPECT_EQ(w.find("not an argument racksim knows"), std::string::npos) << w;
}

// --delay-wgrad-compute alone is refused at its line, as Megatron-Core refuses it; the EP overlap without it is said
// (racksim's overlap order delays the first layer's weight gradients either way).
TEST(MegatronImport, DelayWgradComputeBelongsToTheEpOverlap) {
  expect_refused(kSmallDense + "--seq-length 2048\n--delay-wgrad-compute\n", h100s(8),
                 "--delay-wgrad-compute: without --overlap-moe-expert-parallel-comm: Megatron-Core refuses it");
  std::string args = kDeepSeekArgs;
  args.replace(args.find(" --delay-wgrad-compute"), std::string(" --delay-wgrad-compute").size(), "");
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  std::string all;
  for (const auto& w : meg(args, opt).warnings) all += w + "\n";
  EXPECT_NE(all.find("--overlap-moe-expert-parallel-comm without --delay-wgrad-compute: racksim's EP-overlap order "
                     "delays the first layer's weight gradients"),
            std::string::npos)
      << all;
}

// --no-check-for-nan-in-loss-and-grad turns Megatron's NaN checks (host waits) off: training.check_for_nan false, from
// a script or from Megatron's printed arguments (check_for_nan_in_loss_and_grad False); without it the key is not
// written (Megatron's default, on).
TEST(MegatronImport, NoCheckForNanReachesItsKey) {
  const auto opt = h100s(8);
  const std::string dense = kSmallDense + "--seq-length 2048\n";
  const auto off = meg(dense + "--no-check-for-nan-in-loss-and-grad\n", opt);
  EXPECT_FALSE(load(off).training.check_for_nan);
  EXPECT_NE(off.yaml.find("check_for_nan: false"), std::string::npos) << off.yaml;
  for (const auto& w : off.warnings) EXPECT_EQ(w.find("check-for-nan"), std::string::npos) << w;
  EXPECT_TRUE(load(meg(dense, opt)).training.check_for_nan);
  EXPECT_EQ(meg(dense, opt).yaml.find("check_for_nan"), std::string::npos);
  // The later of the two switches holds.
  EXPECT_TRUE(load(meg(dense + "--no-check-for-nan-in-loss-and-grad --check-for-nan-in-loss-and-grad\n", opt))
                  .training.check_for_nan);
  const std::string log = small_dense_printed({{"check_for_nan_in_loss_and_grad", "False"}});
  EXPECT_FALSE(load(meg(log, opt)).training.check_for_nan);
}

TEST(MegatronImport, ScriptsWithVariablesArraysAndContinuations) {
  const std::string script = R"(#!/bin/bash
GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-4}
TP=4; PP=2
SEQ=$((4096*2))
LAYERS=$(( PP * 16 ))
MODEL_ARGS=(
    --num-layers $LAYERS --hidden-size 4096   # a comment
    --num-attention-heads 32 --group-query-attention --num-query-groups 8
    --ffn-hidden-size 14336 --swiglu
)
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 \
    --seq-length $SEQ --vocab-size 128000 --micro-batch-size 2 --global-batch-size $(( 256 * 2 )) \
    "--fp8-format hybrid" --bf16 --sequence-parallel --tp-comm-overlap \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    --num-layers-per-virtual-pipeline-stage 4
)";
  const auto r = meg(script);
  const auto sc = load(r);
  EXPECT_EQ(sc.system.gpus, 32);  // torchrun 8 x 4 nodes (the default of ${SLURM_NNODES:-4})
  EXPECT_EQ(sc.training.seq_len, 8192);
  EXPECT_EQ(sc.model.layers, 32);             // $(( PP * 16 )): bash arithmetic with spaces is one word
  EXPECT_EQ(sc.training.global_batch, 512);   // $(( 256 * 2 ))
  EXPECT_EQ(sc.training.parallelism.tp, 4);
  EXPECT_EQ(sc.training.parallelism.vp, 4);  // 32 layers / (4 per chunk x pp 2)
  EXPECT_EQ(sc.model.vocab, 128000);         // 128000 is a multiple of 128 x tp 4 = 512
  EXPECT_EQ(sc.model.kv_heads, 8);
  EXPECT_EQ(sc.training.precision, racksim::sim::Dtype::fp8);
  EXPECT_TRUE(sc.training.tp_comm_overlap);
  EXPECT_EQ(sc.training.recompute.mode, racksim::workloads::RecomputeMode::full);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

// --decoder-first/last-pipeline-num-layers count whole pipeline ranks: racksim's first/last_rank_layers, which split
// them over the rank's virtual stages as Megatron-Core does. --num-layers-per-virtual-pipeline-stage is derived and
// refused as Megatron-LM's arguments.py does (not beside an uneven split; chunks must divide a rank's layers).
TEST(MegatronImport, UnevenPipelineEndsCountWholeRanks) {
  const std::string args =
      "--num-layers 28 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --seq-length 4096 "
      "--vocab-size 1024 --micro-batch-size 1 --global-batch-size 8 --bf16 --pipeline-model-parallel-size 4 ";
  imp::MegatronOptions opt;
  opt.gpus = 4;
  const auto r = meg(args + "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 4 "
                            "--decoder-last-pipeline-num-layers 4", opt);
  const auto t = load(r).training;
  EXPECT_EQ(t.pipeline.first_rank_layers, 4);
  EXPECT_EQ(t.pipeline.last_rank_layers, 4);
  EXPECT_EQ(t.pipeline.first_stage_layers, -1);
  EXPECT_EQ(t.parallelism.vp, 2);
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("decoder-first"), std::string::npos) << w;
  const auto refused = [&](const std::string& extra, const std::string& what) { expect_refused(args + extra, opt, what); };
  refused("--num-layers-per-virtual-pipeline-stage 2 --decoder-first-pipeline-num-layers 4",
          "please use --num-virtual-stages-per-pipeline-rank");
  refused("--num-layers-per-virtual-pipeline-stage 2", "28 layers over pp 4 do not split into chunks of 2");
  EXPECT_EQ(load(meg(args + "--num-layers-per-virtual-pipeline-stage 7", opt)).training.parallelism.vp, 1);
}

// --recompute-method block --recompute-num-layers N: the first N layers of each model chunk recomputed
// (training.recompute_num_layers), where the importer had modelled full recompute of every layer with a warning;
// uniform with N > 1 stays full recompute, with a warning for its coarser checkpoints.
TEST(MegatronImport, BlockRecomputeKeepsItsLayerCount) {
  const std::string args =
      "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --seq-length 4096 "
      "--vocab-size 1024 --micro-batch-size 1 --global-batch-size 8 --bf16 --pipeline-model-parallel-size 4 "
      "--recompute-granularity full ";
  imp::MegatronOptions opt;
  opt.gpus = 4;
  const auto block = meg(args + "--recompute-method block --recompute-num-layers 3", opt);
  const auto t = load(block).training;
  EXPECT_EQ(t.recompute.mode, racksim::workloads::RecomputeMode::full);
  EXPECT_EQ(t.recompute_num_layers, 3);
  for (const auto& w : block.warnings) EXPECT_EQ(w.find("recompute"), std::string::npos) << w;
  const auto uniform = meg(args + "--recompute-method uniform --recompute-num-layers 2", opt);
  EXPECT_EQ(load(uniform).training.recompute_num_layers, 0);
  EXPECT_TRUE(std::any_of(uniform.warnings.begin(), uniform.warnings.end(), [](const std::string& w) {
    return w.find("--recompute-method uniform --recompute-num-layers 2: modelled with one checkpoint per layer") == 0;
  }));
  // Megatron accepts 0 (only None is refused), and its block loop then checkpoints no layer.
  const auto zero = meg(args + "--recompute-method block --recompute-num-layers 0", opt);
  EXPECT_EQ(load(zero).training.recompute.mode, racksim::workloads::RecomputeMode::none);
  EXPECT_TRUE(std::any_of(zero.warnings.begin(), zero.warnings.end(), [](const std::string& w) {
    return w.find("--recompute-num-layers 0: no layer is checkpointed") != std::string::npos;
  }));
}

// --account-for-embedding/loss-in-pipeline-split count the embedding and the loss as layers in the split, and the first
// (last) virtual stage builds one transformer layer fewer (Megatron-Core transformer_block.py get_num_layers_to_build):
// racksim's first/last_stage_layers. They had been dropped with "not an argument racksim knows".
TEST(MegatronImport, EmbeddingAndLossCountedInThePipelineSplit) {
  const std::string base =
      "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --seq-length 4096 --vocab-size 1024 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --pipeline-model-parallel-size 4 ";
  imp::MegatronOptions opt;
  opt.gpus = 4;
  const auto loss = meg(base + "--num-layers 31 --account-for-loss-in-pipeline-split", opt);
  const auto t = load(loss).training;
  EXPECT_EQ(t.pipeline.first_stage_layers, -1);
  EXPECT_EQ(t.pipeline.last_stage_layers, 7);  // 8/8/8/7, as Megatron builds (32 / 4, the last one fewer)
  for (const auto& w : loss.warnings) EXPECT_EQ(w.find("account-for"), std::string::npos) << w;
  const auto both = load(meg(base + "--num-layers 30 --num-virtual-stages-per-pipeline-rank 2 "
                                    "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
                             opt))
                        .training;
  EXPECT_EQ(both.pipeline.first_stage_layers, 3);  // 32 / (4 x 2) = 4 per virtual stage, the ends one fewer
  EXPECT_EQ(both.pipeline.last_stage_layers, 3);
  EXPECT_EQ(both.parallelism.vp, 2);
  const auto refused = [&](const std::string& extra, const std::string& what) { expect_refused(base + extra, opt, what); };
  refused("--num-layers 32 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
          "34 layers with the embedding and loss counted do not split over pp 4 x vp 1");
  refused("--num-layers 31 --account-for-loss-in-pipeline-split --decoder-first-pipeline-num-layers 7",
          "Does not support standalone embedding stage and standalone loss stage with uneven pp");
}

TEST(MegatronImport, VocabularyIsPaddedAsMegatronPadsIt) {
  const auto r = meg("--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --vocab-size 50257 "
                     "--tensor-model-parallel-size 2 --bf16 --micro-batch-size 1",
                     {"h100-sxm", 8, "", 0, ""});
  EXPECT_EQ(load(r).model.vocab, 50432);  // next multiple of 128 x 2
  EXPECT_EQ(load(r).model.ffn_hidden, 4096);  // Megatron's default 4 x hidden
  EXPECT_TRUE(load(r).model.tied_embeddings);  // Megatron ties unless --untie-embeddings-and-output-weights
}

TEST(MegatronImport, MegatronsPrintedArgumentsBlock) {
  const std::string log = R"(some launcher output
------------------------ arguments ------------------------
  bf16 ............................................ True
  fp8 ............................................. None
  global_batch_size ............................... 1024
  group_query_attention ........................... True
  hidden_size ..................................... 8192
  ffn_hidden_size ................................. 28672
  micro_batch_size ................................ 1
  num_attention_heads ............................. 64
  num_layers ...................................... 80
  num_query_groups ................................ 8
  padded_vocab_size ............................... 128256
  pipeline_model_parallel_size .................... 4
  seq_length ...................................... 8192
  sequence_parallel ............................... True
  swiglu .......................................... True
  tensor_model_parallel_size ...................... 8
  untie_embeddings_and_output_weights ............. True
  use_distributed_optimizer ....................... True
  world_size ...................................... 256
  zero_some_new_option ............................ 17
-------------------- end of arguments ---------------------
)";
  const auto r = meg(log);
  const auto sc = load(r);
  EXPECT_EQ(sc.system.gpus, 256);
  EXPECT_EQ(sc.training.parallelism.tp, 8);
  EXPECT_EQ(sc.training.parallelism.pp, 4);
  EXPECT_EQ(sc.training.parallelism.dp, 8);
  EXPECT_EQ(sc.model.vocab, 128256);
  EXPECT_NEAR(racksim::workloads::total_params(sc.model) / 70.6e9, 1.0, 0.01);
  EXPECT_TRUE(r.warnings.empty());  // a log prints every argument: none is unknown there
}

TEST(MegatronImport, MissingModelOrBatchIsAnErrorThatSaysWhatToGive) {
  EXPECT_NE(error_of([] { meg("--tensor-model-parallel-size 2 --seq-length 4096"); })
                .find("missing --num-layers, --hidden-size, --num-attention-heads, --vocab-size (or racksim import --vocab N)"),
            std::string::npos);
  EXPECT_NE(error_of([] { meg("--num-layers 2 --hidden-size 64 --num-attention-heads 2 --vocab-size 100"); })
                .find("no --seq-length"),
            std::string::npos);
  EXPECT_NE(error_of([] { meg("echo hello"); }).find("no Megatron arguments found"), std::string::npos);
  // --model instead of the architecture flags.
  imp::MegatronOptions opt;
  opt.system = "h200-sxm";
  opt.gpus = 8;
  opt.model = "llama3-8b";
  const auto r = meg("--seq-length 8192 --global-batch-size 128 --micro-batch-size 1 --bf16 --num-layers 32", opt);
  EXPECT_EQ(load(r).model.name, "llama3-8b");
}

TEST(MegatronImport, CliWritesAScenarioThatRuns) {
  const std::string out = ::testing::TempDir() + "/eco/llama3.yaml";
  fs::create_directories(fs::path(out).parent_path());
  const auto r = run_cli({"import", "megatron", kMeg + "train_llama3_8b_h100_fp8.sh", "--system", "h200-sxm", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos);
  EXPECT_NE(r.err.find("warning: "), std::string::npos);  // --grad-reduce-in-bf16, --fp8-param-gather
  const auto run = run_cli({"run", out, "--json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const json j = json::parse(run.out);
  EXPECT_EQ(j["scenario"]["training"]["precision"], "fp8");
  EXPECT_EQ(j["scenario"]["system"]["gpus"], 8);
  EXPECT_TRUE(j["fits"].get<bool>());  // 141 GB H200
  // A scenario that racksim rejects is not written: 3 data-parallel ranks do not divide the global
  // batch of 128; tp 3 does not divide 4 heads.
  const auto bad = run_cli({"import", "megatron", kMeg + "train_llama3_8b_h100_fp8.sh", "--gpus", "3", "--out", out + ".bad"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("global_batch (128) must be a multiple of micro_batch·dp = 1·3 = 3"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(out + ".bad"));
  const auto bad2 = run_cli({"import", "megatron", temp_file("tp3.txt", "--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                                                                       "--vocab-size 128 --seq-length 64 --tensor-model-parallel-size 3"),
                             "--system", "h100-sxm", "--gpus", "3", "--out", out + ".bad2"});
  EXPECT_EQ(bad2.code, 1);
  EXPECT_NE(bad2.err.find("tp (3) must divide the model's heads (4)"), std::string::npos) << bad2.err;
  EXPECT_FALSE(fs::exists(out + ".bad2"));
}

// ----------------------------------------------------------------- logs

TEST(Logging, VerboseNamesPresetCalibrationAndTransferRuleOnStderr) {
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const auto plain = run_cli({"run", quick, "--json"});
  EXPECT_EQ(plain.err, "");
  const auto v = run_cli({"-v", "run", quick, "--json", "--set", "system.calibration=h200", "--set", "system.preset=b200"});
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_TRUE(json::accept(v.out));  // stdout stays one JSON document
  EXPECT_NE(v.err.find("info: " + quick + ": system preset b200"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("info: calibration h200"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("transfer rule: NVIDIA H200"), std::string::npos) << v.err;
}

TEST(Logging, QuietDropsWarningsAndSpdlogLevelIsHonoured) {
  const std::string f = kMeg + "train_mixtral_8x7b_distributed.sh";
  const auto normal = run_cli({"import", "megatron", f, "--vocab", "32000"});
  EXPECT_NE(normal.err.find("warning: "), std::string::npos);
  const auto quiet = run_cli({"-q", "import", "megatron", f, "--vocab", "32000"});
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, normal.out);
  ::setenv("SPDLOG_LEVEL", "info", 1);
  const auto env = run_cli({"run", kSrc + "/scenarios/quickstart.yaml"});
  ::setenv("SPDLOG_LEVEL", "racksim=off", 1);
  const auto off = run_cli({"import", "megatron", f, "--vocab", "32000"});
  ::unsetenv("SPDLOG_LEVEL");
  EXPECT_NE(env.err.find("info: "), std::string::npos);
  EXPECT_EQ(off.err, "");
}

// ----------------------------------------------------------------- nccl-tests

TEST(NcclTests, CputimeLogsSlurmOutFilesAndJsonImport) {
  auto c = racksim::calib::parse_nccl_tests_output(slurp(kNccl + "all_reduce_perf_cputime.log"), "all_reduce_perf_cputime.log");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op, "all_reduce");
  EXPECT_EQ(c[0].gpus, 8);
  EXPECT_EQ(c[0].time_column, "cputime");
  EXPECT_EQ(c[0].rows.size(), 21u);
  EXPECT_NEAR(c[0].rows.back().time_s, 1.03 * (30e-6 + 1073741824 / 360e9), 1e-6);

  auto s = racksim::calib::parse_nccl_tests_output(slurp(kNccl + "slurm-123456.out"), "slurm-123456.out");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].op, "all_reduce");
  EXPECT_EQ(s[1].op, "all_gather");
  EXPECT_EQ(s[0].gpus, 16);
  EXPECT_EQ(s[1].gpus, 16);
  EXPECT_EQ(s[0].rows.size(), 28u);  // 8 B .. 1 GiB
  EXPECT_EQ(s[1].rows.size(), 21u);  // 1 KiB .. 1 GiB

  auto j = racksim::calib::parse_nccl_tests_output(slurp(kNccl + "alltoall.json"), "alltoall.json");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].op, "all_to_all");
  EXPECT_EQ(j[0].gpus, 8);
  EXPECT_EQ(j[0].format, "json");
  EXPECT_NEAR(j[0].rows.front().time_s, 35e-6 + 1024 / 150e9, 1e-9);

  // `mpirun --tag-output` prefixes.
  std::string tagged;
  std::istringstream in(slurp(kNccl + "all_reduce_perf_cputime.log"));
  for (std::string l; std::getline(in, l);) tagged += "[1,0]<stdout>:" + l + "\n";
  EXPECT_EQ(racksim::calib::parse_nccl_tests_output(tagged, "x.log").at(0).rows.size(), 21u);
}

// Unedited nccl-tests 2.19.6 output from one H200 (tests/data/nccl-tests-real/README.md): the -C
// cputime column, the -J JSON file and the stdout of the same run, and a plain table.
TEST(NcclTests, ReadsRealCaptures) {
  const std::string real = kSrc + "/tests/data/nccl-tests-real/";
  auto c = racksim::calib::parse_nccl_tests_output(slurp(real + "all_reduce_perf_g1_C1.log"), "c.log");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op, "all_reduce");
  EXPECT_EQ(c[0].gpus, 1);
  EXPECT_EQ(c[0].time_column, "cputime");
  ASSERT_EQ(c[0].rows.size(), 26u);  // 8 B .. 256 MiB
  EXPECT_NEAR(c[0].rows.front().time_s, 7.93e-6, 1e-9);
  EXPECT_EQ(c[0].rows.back().bytes, 268435456.0);

  auto j = racksim::calib::parse_nccl_tests_output(slurp(real + "all_gather_perf_g1.json"), "j.json");
  auto t = racksim::calib::parse_nccl_tests_output(slurp(real + "all_gather_perf_g1_J.log"), "j.log");
  ASSERT_EQ(j.size(), 1u);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(j[0].format, "json");
  EXPECT_EQ(j[0].op, "all_gather");
  ASSERT_EQ(j[0].rows.size(), t[0].rows.size());
  for (std::size_t i = 0; i < j[0].rows.size(); ++i) {  // the JSON and the table of one run agree
    EXPECT_EQ(j[0].rows[i].bytes, t[0].rows[i].bytes);
    EXPECT_NEAR(j[0].rows[i].time_s, t[0].rows[i].time_s, 0.006e-6 + 0.005 * t[0].rows[i].time_s) << i;
  }

  auto a = racksim::calib::parse_nccl_tests_output(slurp(real + "alltoall_perf_g1.log"), "a.log");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].op, "all_to_all");
  EXPECT_EQ(a[0].rows.size(), 12u);
}

TEST(NcclTests, CalibrateFitReadsEveryShape) {
  const std::string dir = ::testing::TempDir() + "/eco/nccl";
  fs::create_directories(dir);
  for (const char* f : {"all_reduce_perf_cputime.log", "slurm-123456.out", "alltoall.json"})
    fs::copy_file(kNccl + f, dir + "/" + f, fs::copy_options::overwrite_existing);
  const std::string out = dir + "/fit.yaml";
  const auto r = run_cli({"calibrate", "fit", "--from", dir, "--base", "h100-sxm", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("nccl all_reduce x8: latency 30.90 us"), std::string::npos) << r.out;  // cputime, as logged
  EXPECT_NE(r.out.find("nccl all_reduce x16: latency 45.00 us, algbw 180.0 GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nccl all_gather x16: latency 40.00 us, algbw 170.0 GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nccl all_to_all x8: latency 35.00 us, algbw 150.0 GB/s"), std::string::npos) << r.out;
}

// `racksim collective --stride N` places the group's members N ranks apart: a tp-8 job's data-parallel group, one
// rank per node, where NCCL runs PAT for all-gather / reduce-scatter at medium sizes; packed (stride 1) the same 128
// ranks fill 16 nodes and run a ring. A stride the job cannot hold is an input error naming the option.
TEST(NcclTests, CollectiveStridePlacesTheGroup) {
  EXPECT_EQ(racksim::cli::collective_json("h100-sxm", 128, "all_gather", "16MiB", "auto", 8)["algorithm"], "pat");
  EXPECT_EQ(racksim::cli::collective_json("h100-sxm", 128, "all_gather", "16MiB", "auto")["algorithm"], "ring");
  try {
    racksim::cli::collective_json("h100-sxm", 128, "all_gather", "16MiB", "auto", 0);
    ADD_FAILURE() << "stride 0 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--stride 0"), std::string::npos) << e.what();
  }
}

TEST(NcclTests, CollectiveTableReadsBackAsWhatItPredicted) {
  racksim::cli::CollectiveSweep s;
  s.system = "h200-sxm";
  s.gpus = 8;
  s.op = "reduce_scatter";
  s.min_bytes = "8";
  s.max_bytes = "8G";
  s.factor = 2;
  const json rows = racksim::cli::collective_sweep_json(s);
  ASSERT_EQ(rows.size(), 31u);  // 8 B .. 8 GiB
  const std::string table = racksim::cli::nccl_tests_table(s, rows);
  const auto back = racksim::calib::parse_nccl_tests_output(table, "predicted.log");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].op, "reduce_scatter");
  EXPECT_EQ(back[0].gpus, 8);
  ASSERT_EQ(back[0].rows.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[0].rows[i].bytes, rows[i]["size"].get<double>());
    const double t = rows[i]["time_us"].get<double>();
    EXPECT_NEAR(back[0].rows[i].time_s * 1e6, t, std::max(0.006, t * 1e-3)) << i;  // printed to 7 characters
  }
  // Sizes follow nccl-tests: reduce_scatter counts split over the ranks; the smallest sizes round to 0.
  EXPECT_EQ(rows[0]["size"], 0);   // 8 B = 2 floats: 0 per rank
  EXPECT_EQ(rows[2]["size"], 32);  // 32 B = 8 floats: 1 per rank
  EXPECT_EQ(rows[3]["count"], 2);
  // Every row also carries the contract's fields of the --bytes mode (a probe found the two modes' JSON disjoint).
  for (const auto& r : rows) {
    EXPECT_EQ(r["op"], "reduce_scatter");
    EXPECT_EQ(r["gpus"], 8);
    EXPECT_EQ(r["bytes"].get<double>(), r["size"].get<double>());
    EXPECT_DOUBLE_EQ(r["time_s"].get<double>() * 1e6, r["time_us"].get<double>());
  }
}

TEST(NcclTests, CollectiveCliSweepAndErrors) {
  const auto r = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "--op", "all_reduce", "-b", "8", "-e", "8G", "-f", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("# Collective test starting: all_reduce_perf"), std::string::npos);
  EXPECT_NE(r.out.find("#  Rank  7 Group  0"), std::string::npos);
  const auto path = temp_file("predicted_all_reduce.log", r.out);
  const auto read = run_cli({"calibrate", "read", path, "--json"});
  ASSERT_EQ(read.code, 0) << read.err;
  const json j = json::parse(read.out);
  EXPECT_EQ(j[0]["op"], "all_reduce");
  EXPECT_EQ(j[0]["rows"].size(), 31u);
  const auto both = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "--bytes", "1GiB", "-b", "8"});
  EXPECT_EQ(both.code, 1);
  const auto none = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8"});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("give --bytes SIZE, or -b MIN -e MAX"), std::string::npos) << none.err;
  const auto bad = run_cli({"collective", "--system", "h200-sxm", "--gpus", "8", "-b", "1G", "-e", "8", "-f", "1"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("-e: error: the largest size must not be smaller than -b"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("-f: error: the factor must be greater than 1"), std::string::npos) << bad.err;
}

// ----------------------------------------------------------------- the Perfetto trace

json read_trace(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, n);
  gzclose(f);
  return json::parse(text);
}

TEST(Trace, MemoryCounterFlowsAndCategories) {
  const std::string dir = ::testing::TempDir() + "/eco";
  fs::create_directories(dir);
  const std::string gz = dir + "/step.json.gz", plain = dir + "/step.json";
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const std::vector<std::string> sets = {"--set", "training.parallelism.pp=2", "--set", "training.global_batch=32"};
  auto args = std::vector<std::string>{"run", quick, "--json", "--trace", gz};
  args.insert(args.end(), sets.begin(), sets.end());
  const auto r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  args[4] = plain;
  ASSERT_EQ(run_cli(args).code, 0);
  // gzip: the magic bytes, and the same document as the plain file.
  std::ifstream raw(gz, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  raw.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0], 0x1f);
  EXPECT_EQ(magic[1], 0x8b);
  const json t = read_trace(gz);
  EXPECT_EQ(t, read_trace(plain));

  const json report = json::parse(r.out);
  std::map<long long, int> flow_starts, flow_ends;
  int cross_rank = 0, counters = 0, categorized = 0, slices = 0;
  std::set<int> counter_pids;
  double max_hbm = 0;
  for (const auto& e : t["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      if (e.contains("cat")) ++categorized;
    } else if (ph == "s" || ph == "f") {
      (ph == "s" ? flow_starts : flow_ends)[e["id"].get<long long>()]++;
      if (ph == "s" && e["cat"] == "dependency,cross-rank") ++cross_rank;
      if (ph == "f") {
        EXPECT_EQ(e["bp"], "e");
      }
    } else if (ph == "C") {
      ++counters;
      if (e["name"] != "HBM in use (GB)") continue;
      counter_pids.insert(e["pid"].get<int>());
      double total = 0;
      for (const auto& [k, v] : e["args"].items()) total += v.get<double>();
      EXPECT_EQ(e["args"].size(), 6u);  // weights, gradients, optimizer, activations, communication_buffers, other
      max_hbm = std::max(max_hbm, total);
    }
  }
  EXPECT_EQ(categorized, slices);
  EXPECT_GT(counters, 100);
  EXPECT_EQ(counter_pids, (std::set<int>{0, 1}));  // one track per pipeline stage
  // The counter's highest point is the report's peak memory.
  EXPECT_NEAR(max_hbm * 1e9, report["peak_memory_bytes"].get<double>(), 1e3);
  EXPECT_FALSE(flow_starts.empty());
  EXPECT_EQ(flow_starts.size(), flow_ends.size());
  for (const auto& [id, n] : flow_starts) EXPECT_EQ(flow_ends[id], n) << id;
  EXPECT_GT(cross_rank, 0);  // pipeline sends between the two stages
  // An unwritable path is an input error.
  const auto bad = run_cli({"run", quick, "--trace", dir + "/no/such/dir/t.json.gz"});
  EXPECT_EQ(bad.code, 1);
}

// ----------------------------------------------------------------- sweeps: point index, Slurm arrays

TEST(SweepSlurm, JobArrayTasksRunTheirShardWithThePointIndex) {
  const std::string sweep = temp_file("slurm_sweep.yaml", "base: " + kSrc + "/scenarios/quickstart.yaml\n"
                                                          "vary:\n  training.recompute: [none, selective, full]\n"
                                                          "  system.gpus: [8, 16]\n");
  const auto whole = run_cli({"sweep", sweep});
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(whole.out.rfind("point,training.recompute,system.gpus,", 0), 0u);
  const auto by_flag = run_cli({"sweep", sweep, "--shard", "1/3"});
  // --array=0-2: task 1 of 3.
  ::setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
  const auto zero_based = run_cli({"-v", "sweep", sweep});
  // --array=1-3: task 2 is the same shard.
  ::setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  const auto one_based = run_cli({"sweep", sweep});
  // --array=1-5:2 (IDs 1, 3, 5): task 3 is the same shard; an ID off the step is refused.
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  ::setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
  const auto stepped = run_cli({"sweep", sweep});
  ::setenv("SLURM_ARRAY_TASK_ID", "4", 1);
  const auto off_step = run_cli({"sweep", sweep});
  ::unsetenv("SLURM_ARRAY_TASK_STEP");
  ::setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  // An explicit --shard wins over the environment.
  const auto explicit_shard = run_cli({"sweep", sweep, "--shard", "0/3"});
  ::setenv("SLURM_ARRAY_TASK_ID", "9", 1);
  const auto bad = run_cli({"sweep", sweep});
  // Past 64 bits: said as given (strtoll had clamped it to 9223372036854775807 in the message).
  ::setenv("SLURM_ARRAY_TASK_ID", "99999999999999999999", 1);
  const auto huge = run_cli({"sweep", sweep});
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_MIN");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ASSERT_EQ(stepped.code, 0) << stepped.err;
  EXPECT_EQ(stepped.out, by_flag.out);
  EXPECT_EQ(off_step.code, 1);
  EXPECT_NE(off_step.err.find("not a task of an evenly stepped job array"), std::string::npos) << off_step.err;
  ASSERT_EQ(zero_based.code, 0) << zero_based.err;
  EXPECT_EQ(zero_based.out, by_flag.out);
  EXPECT_NE(zero_based.err.find("sweep shard 1/3 from SLURM_ARRAY_TASK_ID=1"), std::string::npos) << zero_based.err;
  EXPECT_EQ(one_based.out, by_flag.out);
  EXPECT_EQ(explicit_shard.out, run_cli({"sweep", sweep, "--shard", "0/3"}).out);
  EXPECT_NE(explicit_shard.out, by_flag.out);
  std::istringstream rows(by_flag.out);
  std::string header, r1, r2;
  std::getline(rows, header);
  std::getline(rows, r1);
  std::getline(rows, r2);
  EXPECT_EQ(r1.rfind("1,", 0), 0u);  // the points' indices in the whole sweep: 1 and 4
  EXPECT_EQ(r2.rfind("4,", 0), 0u);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("SLURM_ARRAY_TASK_ID=9"), std::string::npos) << bad.err;
  EXPECT_EQ(huge.code, 1);
  EXPECT_EQ(huge.err, "environment SLURM_ARRAY_TASK_ID=99999999999999999999: error: expected an integer from 0 to 1000000000\n");
}

}  // namespace


// Megatron-Core's precision-aware optimizer: both Adam moments in bf16 map to training.adam_moments; one of them
// alone, or without the optimizer switch, is a warning and stays fp32.
TEST(MegatronImport, AdamMomentDtypesReachTheirKey) {
  imp::MegatronOptions opt;
  opt.system = "gb200-nvl72";
  opt.gpus = 256;
  const std::string aware = kDeepSeekArgs + "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16\n";
  EXPECT_EQ(load(meg(aware, opt)).training.adam_moments, racksim::workloads::AdamMoments::bf16);
  const auto half = meg(kDeepSeekArgs + "--use-precision-aware-optimizer --exp-avg-dtype bf16 --main-params-dtype fp16\n", opt);
  EXPECT_EQ(load(half).training.adam_moments, racksim::workloads::AdamMoments::fp32);
  auto has = [&](const std::string& needle) {
    for (const auto& w : half.warnings)
      if (w.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("--exp-avg-dtype bf16 --exp-avg-sq-dtype fp32: racksim keeps both Adam moments"));
  EXPECT_TRUE(has("--main-params-dtype fp16: racksim keeps fp32 master weights"));
}

// `compare --variant-set` / `--base-set` override one side after the common --set: one scenario compared with
// itself changed (before them, the README's what-if `compare S S --set KEY=V` changed both sides and printed 1).
TEST(CompareCli, OneSidedOverridesChangeOnlyTheirSide) {
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const auto base = run_cli({"run", quick, "--json"});
  const auto sel = run_cli({"run", quick, "--json", "--set", "training.recompute=selective"});
  ASSERT_EQ(base.code, 0) << base.err;
  ASSERT_EQ(sel.code, 0) << sel.err;
  const double t_base = json::parse(base.out)["step_time_s"], t_sel = json::parse(sel.out)["step_time_s"];
  ASSERT_LT(t_sel, t_base);  // selective recompute does less work than full

  const auto c = run_cli({"compare", quick, quick, "--json", "--variant-set", "training.recompute=selective"});
  ASSERT_EQ(c.code, 0) << c.err;
  const json jc = json::parse(c.out);
  EXPECT_EQ(jc["base"]["step_time_s"].get<double>(), t_base);
  EXPECT_EQ(jc["variant"]["step_time_s"].get<double>(), t_sel);
  EXPECT_GT(jc["speedup"].get<double>(), 1.1);

  // --set reaches both sides first; a one-sided override of the same key wins on its side.
  const auto d = run_cli({"compare", quick, quick, "--json", "--set", "training.recompute=selective", "--base-set",
                          "training.recompute=full"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(json::parse(d.out)["speedup"].get<double>(), jc["speedup"].get<double>());
  const auto both = run_cli({"compare", quick, quick, "--json", "--set", "training.recompute=selective"});
  EXPECT_EQ(json::parse(both.out)["speedup"].get<double>(), 1.0);
}

// Sides on different calibrations say so under the speedup (a new user's probe, 2026-12-07: the H800, the H100's die with
// less NVLink, came out 14% faster, its preset having no calibration where the H100's has its default one); a sweep's
// rows name theirs.
TEST(CompareCli, SidesOnDifferentCalibrationsAreSaid) {
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const auto c = run_cli({"compare", quick, quick, "--base-set", "system.preset=h100-sxm", "--variant-set",
                          "system.preset=h800-sxm"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("note: the sides run different calibrations (base: h100, its preset's default; variant: none, "
                       "the preset's cited figures)"),
            std::string::npos)
      << c.out;
  const auto same = run_cli({"compare", quick, quick, "--set", "system.calibration=none", "--base-set",
                             "system.preset=h100-sxm", "--variant-set", "system.preset=h800-sxm"});
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out.find("different calibrations"), std::string::npos) << same.out;
  // Alike, the H800 is no faster than the H100 (its NVLink is slower, the rest the same die).
  const double speedup = std::stod(same.out.substr(same.out.find("speedup (variant / base tokens/s per GPU): ") + 43));
  EXPECT_LE(speedup, 1.0);

  const std::string sweep = temp_file("cal_sweep.yaml", "base: " + quick + "\nvary:\n  system.preset: [h100-sxm, h800-sxm]\n");
  const auto r = run_cli({"sweep", sweep});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> rows;
  for (std::size_t a = 0, b; (b = r.out.find('\n', a)) != std::string::npos; a = b + 1) rows.push_back(r.out.substr(a, b - a));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].substr(rows[1].size() - 5), ",h100");
  EXPECT_EQ(rows[2].substr(rows[2].size() - 5), ",none");
}

// Under token dropping the experts count at the tokens they process: min(1, capacity factor) of top_k (a probe's
// capacity factor of 0.01 had given MFUs of 1.11-1.16 on its layouts, 1.42 on this test's, every dropped copy counted
// as model FLOPs). An MFU above 1 left
// (a one-layer model of a large vocabulary, its input embedding counted as a matmul's) says why; and a warning each
// pipeline stage's graph gives is said once.
TEST(ReportFigures, MfuCountsTheTokensTheExpertsProcess) {
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  auto run = [&](std::vector<std::string> sets) {
    std::vector<std::string> args = {"run", quick, "--json", "--set", "model.preset=mixtral-8x7b", "--set",
                                     "training.parallelism={tp: 1, pp: 1, cp: 1, ep: 8, dp: 8}", "--set",
                                     "training.recompute=full"};
    for (auto& s : sets) args.insert(args.end(), {"--set", s});
    const auto r = run_cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out);
  };
  const json dropless = run({}), drop = run({"training.moe={capacity_factor: 0.01}"});
  const json half = run({"training.moe={capacity_factor: 0.5}"});
  EXPECT_LT(drop["mfu"].get<double>(), 1.0);
  // The routed experts' share of the model FLOPs scales by the factor (the rest of the model does not).
  const double tokens = dropless["tokens_per_s_per_gpu"].get<double>() * dropless["step_time_s"].get<double>();
  const auto per_token = [&](const json& r) {
    return r["model_tflops_per_gpu"].get<double>() * r["step_time_s"].get<double>() * 1e12 / tokens;
  };
  const double full = per_token(dropless), at_half = per_token(half), at_001 = per_token(drop);
  EXPECT_NEAR((full - at_half) / (full - at_001), 0.5 / 0.99, 1e-9);

  const auto one = run_cli({"run", quick, "--set", "model={layers: 1, hidden: 8192, ffn_hidden: 28672, heads: 64, "
                                                   "kv_heads: 8, vocab: 262144, ffn: swiglu, tied_embeddings: false}",
                            "--set", "system.calibration=none"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("is above 1: the model FLOP count"), std::string::npos) << one.out;

  const auto off = run_cli({"run", kSrc + "/scenarios/llama3-405b-h100.yaml", "--set", "training.offload.optimizer=true"});
  ASSERT_EQ(off.code, 0) << off.err;
  std::size_t n = 0;
  for (std::size_t at = off.out.find("warning: optimizer offload"); at != std::string::npos;
       at = off.out.find("warning: optimizer offload", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << off.out;
}

// A job that leaves its last NVLink domain partly filled says so (a probe: 512 GB200 on 72-GPU racks run 22% slower than
// on 64-GPU domains, the data-parallel ring through the last rack's one rank, without a word); whole domains do not.
TEST(ReportFigures, APartlyFilledNvlinkDomainIsSaid) {
  const std::string s = kSrc + "/scenarios/llama3-70b-gb200.yaml";
  const auto partly = run_cli({"run", s, "--set", "system.overrides={scale_up.domain_size: 72}"});
  ASSERT_EQ(partly.code, 0) << partly.err;
  EXPECT_NE(partly.out.find("warning: the job's 512 GPUs leave an NVLink domain of 72 partly filled (8 GPUs): dp_cp "
                            "groups of 64 ranks have as few as 1 there (against 9 in their other domains)"),
            std::string::npos)
      << partly.out;
  const auto whole = run_cli({"run", s});
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(whole.out.find("partly filled"), std::string::npos) << whole.out;
  // A group whose fewest members sit in a full domain (its stage begins inside one) is not the partial domain's doing:
  // 200 GPUs at pp 2, the second stage's data-parallel group has 44 ranks in a full rack and 56 in the partial one.
  const auto stage = run_cli({"run", kSrc + "/scenarios/quickstart.yaml", "--set", "system.preset=gb200-nvl72", "--set",
                              "system.gpus=200", "--set", "training.global_batch=400", "--set",
                              "training.parallelism={tp: 1, pp: 2, cp: 1, dp: auto}"});
  ASSERT_EQ(stage.code, 0) << stage.err;
  EXPECT_EQ(stage.out.find("partly filled"), std::string::npos) << stage.out;
}

// --microbatch-group-size-per-virtual-pipeline-stage is racksim's training.pipeline.microbatch_group_size, whose bounds
// the loader checks as Megatron-Core's interleaved schedule does (schedules.py at d98e8a64): pp <= N <= micro-steps, the
// last group (micro-steps mod N) empty or of at least pp. Without virtual stages the flag changes nothing and says so.
TEST(MegatronImport, MicroBatchGroupsOfTheInterleavedSchedule) {
  const std::string args =
      "--num-layers 16 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 8 --seq-length 1024 "
      "--vocab-size 1024 --micro-batch-size 1 --bf16 --pipeline-model-parallel-size 4 ";
  imp::MegatronOptions opt;
  opt.gpus = 4;
  const auto grouped = meg(args + "--global-batch-size 10 --num-virtual-stages-per-pipeline-rank 2 "
                                  "--microbatch-group-size-per-virtual-pipeline-stage 6", opt);
  const auto t = load(grouped).training;  // 10 micro-steps: groups of 6 and 4, both at least pp
  EXPECT_EQ(t.pipeline.microbatch_group_size, 6);
  EXPECT_EQ(t.micro_steps(), 10);
  const auto flat = meg(args + "--global-batch-size 8 --microbatch-group-size-per-virtual-pipeline-stage 6", opt);
  EXPECT_EQ(load(flat).training.pipeline.microbatch_group_size, 0);
  ASSERT_FALSE(flat.warnings.empty());
  EXPECT_NE(flat.warnings.back().find("only the interleaved schedule groups micro-batches"), std::string::npos)
      << flat.warnings.back();
  // The loader's checks, as Megatron words them.
  const char* base = R"(system: {preset: h100-sxm, gpus: 4}
model: {layers: 16, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 1024}
training: {seq_len: 1024, micro_batch: 1, parallelism: {pp: 4, vp: 2}, pipeline: {microbatch_group_size: 6}}
)";
  auto error_of = [&](const std::string& batch) {
    try {
      racksim::testing::scenario_from_text(base, "g.yaml", {"training.global_batch=" + batch});
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("12"), "no error");  // 6 + 6
  EXPECT_NE(error_of("5").find("must lie between pp (4) and the micro-steps (5)"), std::string::npos) << error_of("5");
  EXPECT_NE(error_of("8").find("the last group holds micro-steps mod N = 8 mod 6 = 2 micro-batches, fewer than pp (4)"),
            std::string::npos)
      << error_of("8");
  EXPECT_NE(error_of("8").find("g.yaml:3:"), std::string::npos) << error_of("8");
  // Without virtual stages the key changes nothing, and the report says so (a sweep over vp keeps its base's N).
  const auto r = racksim::sim::simulate(
      racksim::testing::scenario_from_text(base, "g.yaml", {"training.global_batch=8", "training.parallelism.vp=1"}));
  const std::string warnings = r.report["warnings"].dump();
  EXPECT_NE(warnings.find("microbatch_group_size 6 without an interleaved pipeline (pp 4, vp 1): no effect"),
            std::string::npos)
      << warnings;
}
