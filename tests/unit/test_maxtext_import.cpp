// `racksim import maxtext` (issue 13): MaxText's base.yml + models/NAME.yml + key=value overrides to a
// scenario; and MaxText's / JAX's remat policy names accepted by training.recompute.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "input/diagnostics.h"
#include "sim/scenario/scenario.h"
#include "tests/unit/cli_util.h"
#include "workloads/importers/maxtext_config.h"
#include "workloads/training_config.h"

using nlohmann::json;
namespace fs = std::filesystem;
namespace imp = racksim::workloads::importers;
using racksim::testing::run_cli;
using namespace racksim;

namespace {

const std::string kSrc = RACKSIM_SOURCE_DIR;
const std::string kMt = kSrc + "/tests/data/maxtext/";
const std::string kBaseYml = kMt + "base.yml";

imp::MaxTextImport import(const std::vector<std::string>& overrides, const std::string& system = "h100-sxm", int gpus = 0,
                          int domain = 8, const std::string& config = kBaseYml) {
  imp::MaxTextOptions opt;
  opt.system = system;
  opt.system_given = true;
  opt.domain_size = domain;
  opt.gpus = gpus;
  return imp::import_maxtext(config, overrides, opt);
}

sim::Scenario load(const imp::MaxTextImport& r) { return sim::load_scenario_text(r.yaml, "imported.yaml"); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const input::InputError& e) {
    return e.what();
  }
  return "";
}

bool has_warning(const imp::MaxTextImport& r, const std::string& text) {
  for (const auto& w : r.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string dir = ::testing::TempDir() + "/maxtext";
  fs::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

// ----------------------------------------------------------------- every committed config imports and runs

struct Case {
  std::string label;
  std::vector<std::string> args;  // after `import maxtext`
  int gpus, tp, pp, cp, ep, dp, global_batch, micro_batch;
  std::string precision;
};

TEST(MaxTextImport, EveryCommittedConfigImportsLoadsAndRuns) {
  const std::string base = kBaseYml;
  // Closed forms: gpus = prod(ici) x prod(dcn); dp = data·fsdp·fsdp_transpose·expert; global_batch =
  // per_device_batch_size x gpus x gradient_accumulation_steps; micro_batch = per_device_batch_size x gpus / dp
  // (/ pipeline microbatches).
  const std::vector<Case> cases = {
      // llama2-7b: ici_fsdp 8, dcn_data -1 -> one slice: 8 GPUs, dp 8, 2 x 8 = 16 sequences.
      {"llama2-7b", {base, "model_name=llama2-7b", "hardware=gpu", "per_device_batch_size=2", "max_target_length=4096",
                     "ici_fsdp_parallelism=8", "--system", "h100-sxm"}, 8, 1, 1, 1, 1, 8, 16, 2, "bf16"},
      // llama2-70b: ici_fsdp -1 fills the 8-GPU NVLink domain, dcn_data -1 fills --gpus 64 / 8 = 8 slices.
      {"llama2-70b", {base, "model_name=llama2-70b", "hardware=gpu", "per_device_batch_size=1", "--gpus", "64",
                      "--system", "h100-sxm"}, 64, 1, 1, 1, 1, 64, 64, 1, "bf16"},
      // llama3-8b: tp 2 x fsdp 4 in a slice, 2 slices: dp 8; 4 x 16 x 2 = 128; micro 4 x 16 / 8 = 8.
      {"llama3-8b", {base, "model_name=llama3-8b", "hardware=gpu", "per_device_batch_size=4", "gradient_accumulation_steps=2",
                     "ici_tensor_parallelism=2", "ici_fsdp_parallelism=4", "dcn_data_parallelism=2",
                     "remat_policy=save_qkv_proj", "quantization=fp8", "--system", "h200-sxm"}, 16, 2, 1, 1, 1, 8, 128, 8, "fp8"},
      // llama3-70b: pp 4 x fsdp 2; 8 sequences / dp 2 = 4 per rank / 4 pipeline microbatches = 1; vp 80/4 = 20.
      {"llama3-70b", {base, "model_name=llama3-70b", "hardware=gpu", "per_device_batch_size=1", "ici_pipeline_parallelism=4",
                      "ici_fsdp_parallelism=2", "dcn_data_parallelism=1", "--system", "h200-sxm"}, 8, 1, 4, 1, 1, 2, 8, 1, "bf16"},
      // mixtral-8x7b: expert 8 in a slice, fsdp 2 across: dp = fsdp 2 x expert 8 = 16, ep 8.
      {"mixtral-8x7b", {base, "model_name=mixtral-8x7b", "hardware=gpu", "per_device_batch_size=1", "ici_expert_parallelism=8",
                        "ici_fsdp_parallelism=1", "dcn_fsdp_parallelism=2", "dcn_data_parallelism=1",
                        "remat_policy=minimal", "--system", "h200-sxm"}, 16, 1, 1, 1, 8, 16, 16, 1, "bf16"},
      // deepseek3-671b: expert 8 x fsdp 8 = 64 per slice, --gpus 256: dcn_data -1 = 4; ep 8, dp 256.
      {"deepseek3-671b", {base, "model_name=deepseek3-671b", "hardware=gpu", "per_device_batch_size=1",
                          "max_target_length=4096", "ici_expert_parallelism=8", "ici_fsdp_parallelism=8",
                          "quantization=fp8", "--gpus", "256", "--system", "gb200-nvl72"}, 256, 1, 1, 1, 8, 256, 256, 1, "fp8"},
      // The GPU run config (base_config chain, model_name inside the file): 12 x 8 = 96 sequences on one slice.
      {"gpu llama3_8b", {kMt + "gpu/models/llama3_8b.yml", "--system", "h100-sxm"}, 8, 1, 1, 1, 1, 8, 96, 12, "bf16"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string out = ::testing::TempDir() + "/maxtext/" + std::to_string(&c - cases.data()) + ".yaml";
    fs::create_directories(fs::path(out).parent_path());
    std::vector<std::string> args = {"import", "maxtext"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--out", out});
    const auto r = run_cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto sc = sim::load_scenario(out);
    EXPECT_EQ(sc.system.gpus, c.gpus);
    const auto& p = sc.training.parallelism;
    EXPECT_EQ(p.tp, c.tp);
    EXPECT_EQ(p.pp, c.pp);
    EXPECT_EQ(p.cp, c.cp);
    EXPECT_EQ(p.ep, c.ep);
    EXPECT_EQ(p.dp, c.dp);
    EXPECT_EQ(static_cast<long long>(p.tp) * p.pp * p.cp * p.dp, c.gpus);
    EXPECT_EQ(sc.training.global_batch, c.global_batch);
    EXPECT_EQ(sc.training.micro_batch, c.micro_batch);
    EXPECT_EQ(workloads::to_string(sc.training.framework), "jax");
    const auto run = run_cli({"run", out, "--json"});
    ASSERT_EQ(run.code, 0) << run.err;
    const json j = json::parse(run.out);
    EXPECT_GT(j["step_time_s"].get<double>(), 0);
    EXPECT_EQ(j["scenario"]["training"]["precision"], c.precision);
  }
}

TEST(MaxTextImport, ModelDimensionsComeFromTheModelConfig) {
  auto sc = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8"}));
  EXPECT_EQ(sc.model.layers, 32);
  EXPECT_EQ(sc.model.hidden, 4096);
  EXPECT_EQ(sc.model.ffn_hidden, 14336);
  EXPECT_EQ(sc.model.heads, 32);
  EXPECT_EQ(sc.model.kv_heads, 8);
  EXPECT_EQ(sc.model.head_dim, 128);
  EXPECT_EQ(sc.model.vocab, 128256);
  EXPECT_EQ(sc.model.ffn, workloads::FfnKind::swiglu);
  EXPECT_FALSE(sc.model.tied_embeddings);
  EXPECT_FALSE(sc.model.qk_norm);
  // use_qk_norm (Qwen3's per-head q/k RMSNorm) reaches model.qk_norm: its gains count as parameters.
  const auto qk = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "use_qk_norm=true"}));
  EXPECT_TRUE(qk.model.qk_norm);
  EXPECT_DOUBLE_EQ(workloads::total_params(qk.model) - workloads::total_params(sc.model), 32 * 2 * 128);
  // DeepSeek-V3: the shipped preset's fields exactly (MLA, 256 experts top-8, 1 shared, 3 dense layers).
  sc = load(import({"model_name=deepseek3-671b", "ici_expert_parallelism=8", "dcn_data_parallelism=1",
                    "per_device_batch_size=1"}));
  ASSERT_TRUE(sc.model.moe && sc.model.mla);
  EXPECT_EQ(sc.model.layers, 61);
  EXPECT_EQ(sc.model.ffn_hidden, 18432);
  EXPECT_EQ(sc.model.moe->experts, 256);
  EXPECT_EQ(sc.model.moe->top_k, 8);
  EXPECT_EQ(sc.model.moe->expert_ffn_hidden, 2048);
  EXPECT_EQ(sc.model.moe->shared_experts, 1);
  EXPECT_EQ(sc.model.moe->first_dense_layers, 3);
  EXPECT_EQ(sc.model.mla->q_lora_rank, 1536);
  EXPECT_EQ(sc.model.mla->kv_lora_rank, 512);
  EXPECT_EQ(sc.model.mla->qk_rope_head_dim, 64);
  EXPECT_EQ(sc.model.head_dim, 128);
  // Mixtral: base_moe_mlp_dim, top-2, every layer MoE.
  sc = load(import({"model_name=mixtral-8x7b", "ici_expert_parallelism=8", "ici_fsdp_parallelism=1",
                    "dcn_data_parallelism=1", "per_device_batch_size=1"}));
  ASSERT_TRUE(sc.model.moe);
  EXPECT_EQ(sc.model.moe->experts, 8);
  EXPECT_EQ(sc.model.moe->top_k, 2);
  EXPECT_EQ(sc.model.moe->first_dense_layers, 0);
  EXPECT_EQ(sc.training.parallelism.ep, 8);
}

TEST(MaxTextImport, MeshFillsAndBatchArithmetic) {
  // Defaults: ici_fsdp -1 fills the NVLink domain (72 on GB200 NVL72), dcn_data -1 fills --gpus 144 / 72 = 2.
  auto r = import({"model_name=llama2-7b", "per_device_batch_size=1"}, "gb200-nvl72", 144, 72);
  auto sc = load(r);
  EXPECT_EQ(sc.system.gpus, 144);
  EXPECT_EQ(sc.training.parallelism.dp, 144);
  EXPECT_EQ(sc.training.optimizer_sharding, workloads::OptimizerSharding::fsdp);
  // Hybrid sharding: the state sharded over the fsdp axis (72), replicated over the data axis (2 slices).
  EXPECT_EQ(sc.training.parallelism.dp_shard, 72);
  EXPECT_NE(r.yaml.find("dp_shard: 72"), std::string::npos) << r.yaml;
  // Without a data axis: plain FSDP over every data-parallel rank.
  EXPECT_EQ(load(import({"model_name=llama2-7b", "per_device_batch_size=1", "dcn_data_parallelism=1",
                         "dcn_fsdp_parallelism=2"},
                        "gb200-nvl72", 144, 72))
                .training.parallelism.dp_shard,
            0);
  EXPECT_NE(r.yaml.find("# mesh: 2 slices of 72 GPUs"), std::string::npos) << r.yaml;
  // Without --gpus: one slice of the domain, with a warning.
  r = import({"model_name=llama2-7b", "per_device_batch_size=1"});
  EXPECT_EQ(load(r).system.gpus, 8);
  EXPECT_TRUE(has_warning(r, "dcn_data_parallelism is -1 and neither --gpus nor num_slices"));
  // num_slices fixes the DCN fill: 3 slices x (tp 4 x fsdp 2).
  sc = load(import({"model_name=llama2-7b", "per_device_batch_size=0.5", "num_slices=3", "ici_tensor_parallelism=4",
                    "ici_fsdp_parallelism=2"}));
  EXPECT_EQ(sc.system.gpus, 24);
  EXPECT_EQ(sc.training.parallelism.tp, 4);
  EXPECT_EQ(sc.training.parallelism.dp, 6);
  EXPECT_EQ(sc.training.global_batch, 12);  // 0.5 x 24
  EXPECT_EQ(sc.training.micro_batch, 2);    // 12 / 6
  EXPECT_FALSE(sc.training.sequence_parallel);
  // tensor_sequence: Megatron-style sequence parallelism; context -> cp with the all-gather strategy.
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=1", "ici_tensor_sequence_parallelism=2",
                    "ici_context_parallelism=2", "ici_fsdp_parallelism=2", "max_target_length=8192"}));
  EXPECT_EQ(sc.training.parallelism.tp, 2);
  EXPECT_EQ(sc.training.parallelism.cp, 2);
  EXPECT_EQ(sc.training.parallelism.dp, 2);
  EXPECT_TRUE(sc.training.sequence_parallel);
  EXPECT_EQ(sc.training.cp_comm, workloads::CpComm::all_gather);
  // Gradient accumulation multiplies the global batch, not the micro-batch: micro-steps = ga.
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=2", "gradient_accumulation_steps=4",
                    "ici_fsdp_parallelism=8"}));
  EXPECT_EQ(sc.training.global_batch, 64);
  EXPECT_EQ(sc.training.micro_batch, 2);
  EXPECT_EQ(sc.training.micro_steps(), 4);
  // shard_optimizer_over_data (MaxText's ZeRO-1) with a data axis and no fsdp axis: zero1; with an fsdp axis, fsdp.
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=1", "ici_fsdp_parallelism=1",
                    "ici_data_parallelism=8", "shard_optimizer_over_data=true"}));
  EXPECT_EQ(sc.training.optimizer_sharding, workloads::OptimizerSharding::zero1);
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=1", "ici_fsdp_parallelism=1", "ici_data_parallelism=8"}));
  EXPECT_EQ(sc.training.optimizer_sharding, workloads::OptimizerSharding::none);
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=1", "ici_fsdp_parallelism=8",
                    "shard_optimizer_over_data=true"}));
  EXPECT_EQ(sc.training.optimizer_sharding, workloads::OptimizerSharding::fsdp);
  // Pipeline: 32 layers / (4 stages x 2 per stage) = 4 repeats (vp); 8 microbatches.
  sc = load(import({"model_name=llama3-8b", "per_device_batch_size=8", "ici_pipeline_parallelism=4",
                    "ici_fsdp_parallelism=2", "num_layers_per_pipeline_stage=2", "num_pipeline_microbatches=8"}));
  EXPECT_EQ(sc.training.parallelism.pp, 4);
  EXPECT_EQ(sc.training.parallelism.vp, 4);
  EXPECT_EQ(sc.training.global_batch, 64);  // 8 x 8
  EXPECT_EQ(sc.training.micro_batch, 4);    // 64 / dp 2 / 8 microbatches
  EXPECT_EQ(sc.training.micro_steps(), 8);
}

TEST(MaxTextImport, RematQuantizationAndOptions) {
  auto sc = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "remat_policy=minimal_with_context",
                         "quantization=te_mxfp8", "optimizer_memory_host_offload=true", "attention=dot_product",
                         "scan_layers=false"}, "b200"));
  EXPECT_EQ(sc.training.recompute.mode, workloads::RecomputeMode::names);
  EXPECT_EQ(sc.training.recompute.save, (std::vector<std::string>{"qkv", "attn", "attn_out", "mlp_gate", "mlp_up"}));
  EXPECT_EQ(sc.training.precision, sim::Dtype::mxfp8);
  EXPECT_TRUE(sc.training.offload_optimizer);
  EXPECT_EQ(sc.training.attention, workloads::AttentionImpl::materialized);
  EXPECT_FALSE(sc.training.scan_layers);
  EXPECT_EQ(sc.training.stacked_layer_params, false);  // unscanned: one parameter subtree per layer (layers_N), said
  EXPECT_FALSE(load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8"})).training.stacked_layer_params);
  // remat_policy full (base.yml's default) and none (MaxText still wraps layers in nn.remat): full.
  EXPECT_EQ(load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8"})).training.recompute.mode,
            workloads::RecomputeMode::full);
  auto r = import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "remat_policy=none"});
  EXPECT_EQ(load(r).training.recompute.mode, workloads::RecomputeMode::full);
  EXPECT_NE(r.yaml.find("MaxText still rematerializes with policy None"), std::string::npos);
  // custom: the per-tensor keys.
  sc = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "remat_policy=custom", "query_proj=offload",
                    "key_proj=offload", "value_proj=offload", "context=device", "out_proj=device"}));
  EXPECT_EQ(sc.training.recompute.save, (std::vector<std::string>{"attn", "attn_out"}));
  EXPECT_EQ(sc.training.recompute.offload, (std::vector<std::string>{"qkv"}));
  // fp8 and fp8_gpu are flax's direct FP8 dot, whose casts XLA writes; te_fp8_delayedscaling casts in Transformer Engine.
  for (const char* q : {"quantization=fp8", "quantization=fp8_gpu"}) {
    sc = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", q}, "h100-sxm"));
    EXPECT_EQ(sc.training.precision, sim::Dtype::fp8) << q;
    EXPECT_EQ(sc.training.fp8_casts, workloads::Fp8Casts::xla) << q;
  }
  // fp8_gpu is qwix's: MaxText refuses it without use_qwix_quantization, which the import says.
  const char* refused = "fp8_gpu without use_qwix_quantization: true, which MaxText (e591f30) refuses";
  EXPECT_TRUE(has_warning(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "quantization=fp8_gpu"}), refused));
  EXPECT_FALSE(has_warning(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "quantization=fp8_gpu",
                                   "use_qwix_quantization=true"}),
                           refused));
  sc = load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "quantization=te_fp8_delayedscaling"}, "h100-sxm"));
  EXPECT_EQ(sc.training.fp8_casts, workloads::Fp8Casts::transformer_engine);
  // int8: fp8 GEMMs with a stated warning; an error on GB300, where int8 is not fp8's rate.
  r = import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "quantization=int8"});
  EXPECT_EQ(load(r).training.precision, sim::Dtype::fp8);
  EXPECT_TRUE(has_warning(r, "racksim has no int8 precision"));
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "quantization=int8"}, "gb300-nvl72", 0, 72); })
                .find("racksim has no int8 precision, and on gb300-nvl72 int8 runs far below fp8"),
            std::string::npos);
  // The header states every warning; base.yml's hardware: tpu is one.
  r = import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "learning_rate=1e-4", "sliding_window_size=4096",
              "attention_type=local_sliding"});
  EXPECT_NE(r.yaml.find("# warning: hardware tpu"), std::string::npos) << r.yaml;
  EXPECT_TRUE(has_warning(r, "attention_type local_sliding (command line): modelled as global causal attention"));
  EXPECT_TRUE(has_warning(r, "not read by racksim"));
  EXPECT_TRUE(has_warning(r, "sliding_window_size=4096"));
  EXPECT_FALSE(has_warning(r, "learning_rate"));  // no effect on the step time: not listed
}

// use_iota_embed and logits_dot_in_fp32 become training.one_hot_embedding and training.logits_fp32, written only when set
// (MaxText's GPU model configs set use_iota_embed; base.yml leaves both off).
TEST(MaxTextImport, OneHotEmbeddingAndFp32LogitsFollowTheConfig) {
  auto r = import({"ici_fsdp_parallelism=8"}, "h100-sxm", 0, 8, kMt + "gpu/models/llama2_7b.yml");
  EXPECT_TRUE(load(r).training.one_hot_embedding);
  EXPECT_NE(r.yaml.find("one_hot_embedding: true"), std::string::npos) << r.yaml;
  EXPECT_NE(r.yaml.find("use_iota_embed true"), std::string::npos) << r.yaml;
  EXPECT_FALSE(load(r).training.logits_fp32);
  EXPECT_FALSE(has_warning(r, "use_iota_embed"));
  r = import({"model_name=llama2-7b", "ici_fsdp_parallelism=8"});
  EXPECT_EQ(r.yaml.find("one_hot_embedding"), std::string::npos);
  EXPECT_EQ(r.yaml.find("logits_fp32"), std::string::npos);
  r = import({"model_name=llama2-7b", "ici_fsdp_parallelism=8", "logits_dot_in_fp32=true"});
  EXPECT_TRUE(load(r).training.logits_fp32);
  EXPECT_FALSE(has_warning(r, "logits_dot_in_fp32"));
}

// MaxText validates keys against its config schema (configs/types.py beside base.yml, pydantic extra="forbid"), which
// has fields base.yml does not list: Llama 4's vision_encoder_block, base_config on the command line. They are valid
// (a review found 16 of MaxText's 88 model configs refused); a key of neither is refused. Gemma 2's decoder layer is a
// local and a global layer: its base_num_decoder_layers counts pairs (the config says so), and the import doubles it.
TEST(MaxTextImport, SchemaKeysAreValidAndGemma2CountsItsLayerPairs) {
  const auto llama4 = import({"model_name=llama4-17b-16e", "hardware=gpu", "ici_fsdp_parallelism=8"}, "h200-sxm");
  EXPECT_NO_THROW(load(llama4));
  EXPECT_NO_THROW(import({"model_name=llama3-8b", "log_moe_bias_norms=false"}));
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "log_moe_bias_normz=false"}); })
                .find("nor of MaxText's config schema (types.py) (did you mean 'log_moe_bias_norms'?)"),
            std::string::npos);
  const auto gemma2 = import({"model_name=gemma2-2b", "hardware=gpu", "ici_fsdp_parallelism=8"}, "h200-sxm");
  EXPECT_EQ(load(gemma2).model.layers, 26);  // 13 pairs
  EXPECT_NE(gemma2.yaml.find("x 2: decoder_block gemma2 merges a local and a global attention layer into one"), std::string::npos);
  // autoselected attention below 128 tokens is MaxText's dot-product attention (attention_op.py).
  EXPECT_EQ(load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "max_target_length=64"})).training.attention,
            workloads::AttentionImpl::materialized);
  EXPECT_EQ(load(import({"model_name=llama3-8b", "ici_fsdp_parallelism=8", "max_target_length=128"})).training.attention,
            workloads::AttentionImpl::flash);
}

TEST(MaxTextImport, ErrorsNameFileLineKeyAndNearestKey) {
  // An unknown override: the nearest key of base.yml.
  EXPECT_EQ(error_of([] { import({"model_name=llama3-8b", "ici_fsdp_paralelism=8"}); }),
            "command line 'ici_fsdp_paralelism=8': error: ici_fsdp_paralelism: not a key of the base config " + kBaseYml +
                " nor of MaxText's config schema (types.py) (did you mean 'ici_fsdp_parallelism'?)");
  EXPECT_NE(error_of([] { import({"model_name"}); }).find("expected KEY=VALUE"), std::string::npos);
  // A bad value in a file: the value's file:line:column and the key.
  const std::string run = temp_file("run.yml", "base_config: \"" + kBaseYml + "\"\nmodel_name: llama3-8b\n"
                                                "per_device_batch_size: many\n");
  EXPECT_EQ(error_of([&] { import({}, "h100-sxm", 0, 8, run); }),
            run + ":3:24: error: per_device_batch_size: expected a number, got 'many'");
  // An unknown key in a run config.
  const std::string run2 = temp_file("run2.yml", "base_config: \"" + kBaseYml + "\"\nremat_polcy: full\n");
  EXPECT_EQ(error_of([&] { import({}, "h100-sxm", 0, 8, run2); }),
            run2 + ":2:1: error: remat_polcy: not a key of the base config " + kBaseYml +
                " nor of MaxText's config schema (types.py) (did you mean 'remat_policy'?)");
  // A key given twice in one file: refused at its second line, as MaxText's loader (OmegaConf.load) refuses it; before,
  // the last value was taken without a word.
  const std::string run3 = temp_file("run3.yml", "base_config: \"" + kBaseYml + "\"\nper_device_batch_size: 2\n"
                                                 "model_name: llama3-8b\nper_device_batch_size: 4\n");
  EXPECT_EQ(error_of([&] { import({}, "h100-sxm", 0, 8, run3); }),
            run3 + ":4:1: error: per_device_batch_size: duplicate key (first set at line 2); MaxText's loader (OmegaConf) "
                   "refuses it too");
  // The model config is not found: the nearest model.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8"}); }).find("(did you mean 'llama3-8b'?)"), std::string::npos);
  // Two -1 ICI axes.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "ici_tensor_parallelism=-1"}); })
                .find("ici_fsdp_parallelism and ici_tensor_parallelism are both -1"),
            std::string::npos);
  // An axis that cannot be filled names the axes whose product stands in the way and where each was set.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "ici_tensor_parallelism=64"}, "h200-sxm"); })
                .find("is not a multiple of the other ICI axes' product 64: ici_tensor_parallelism 64 (command line)"),
            std::string::npos);
  // A command-line value contradicting the model config, unless override_model_config=true.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "base_emb_dim=2048"}); })
                .find("MaxText refuses a different value from the command line unless override_model_config=true"),
            std::string::npos);
  EXPECT_EQ(load(import({"model_name=llama3-8b", "base_emb_dim=2048", "override_model_config=true",
                         "ici_fsdp_parallelism=8"}))
                .model.hidden,
            2048);
  // Batches that are not whole sequences per rank.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "per_device_batch_size=0.3", "ici_fsdp_parallelism=8"}); })
                .find("per_device_batch_size 0.3 x 8 GPUs = 2.4 sequences: not a positive whole number"),
            std::string::npos);
  // Axes racksim cannot express; remat names it does not know.
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "ici_autoregressive_parallelism=2", "ici_fsdp_parallelism=4"}); })
                .find("racksim simulates training steps"),
            std::string::npos);
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "remat_policy=minimall"}); }).find("did you mean 'minimal'?"),
            std::string::npos);
  EXPECT_NE(error_of([] { import({"model_name=llama3-8b", "hardware=cpu"}); }).find("racksim models GPU systems"),
            std::string::npos);
  // Through the command line: exit code 1, the message on stderr; an unknown system is refused.
  const auto bad = run_cli({"import", "maxtext", kBaseYml, "ici_fsdp_paralelism=8"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("did you mean 'ici_fsdp_parallelism'?"), std::string::npos) << bad.err;
  const auto sys = run_cli({"import", "maxtext", kBaseYml, "--system", "h300"});
  EXPECT_EQ(sys.code, 1);
  // --gpus that the mesh cannot have.
  const auto g = run_cli({"import", "maxtext", kBaseYml, "ici_fsdp_parallelism=8", "dcn_data_parallelism=2", "--gpus", "8"});
  EXPECT_EQ(g.code, 1);
  EXPECT_NE(g.err.find("--gpus: error: --gpus 8 but the mesh has 16 GPUs (2 slices of 8)"), std::string::npos) << g.err;
}

// ----------------------------------------------------------------- remat policy names in training.recompute

TEST(RecomputeAliases, MaxTextAndJaxNamesMapToTheSameSavedSet) {
  auto policy = [](const std::string& name, bool moe = false) {
    const std::string yaml = std::string("name: t\nsystem: {preset: h200-sxm, gpus: 8}\nmodel: {preset: ") +
                             (moe ? "mixtral-8x7b" : "llama3-8b") +
                             "}\ntraining:\n  seq_len: 4096\n  global_batch: 8\n  recompute: " + name + "\n";
    return sim::load_scenario_text(yaml, "s.yaml").training.recompute;
  };
  using M = workloads::RecomputeMode;
  using V = std::vector<std::string>;
  EXPECT_EQ(policy("nothing_saveable").mode, M::full);
  EXPECT_EQ(policy("everything_saveable").mode, M::none);
  EXPECT_EQ(policy("minimal").mode, M::save_dots);
  EXPECT_EQ(policy("dots_with_no_batch_dims_saveable").mode, M::save_dots);
  EXPECT_EQ(policy("checkpoint_dots_with_no_batch_dims").mode, M::save_dots);
  EXPECT_EQ(policy("save_qkv_proj").save, V{"qkv"});
  EXPECT_EQ(policy("save_out_proj").save, V{"attn_out"});
  EXPECT_EQ(policy("save_dot_except_mlp").save, (V{"qkv", "attn_out"}));
  EXPECT_EQ(policy("save_dot_except_mlpwi").save, (V{"qkv", "attn_out"}));
  EXPECT_EQ(policy("save_dot_with_context_except_mlp").save, (V{"qkv", "attn", "attn_out"}));
  EXPECT_EQ(policy("minimal_flash").save, (V{"qkv", "attn", "attn_out", "mlp_gate", "mlp_up"}));
  EXPECT_EQ(policy("qkv_proj_offloaded").offload, V{"qkv"});
  EXPECT_TRUE(policy("qkv_proj_offloaded").save.empty());
  EXPECT_EQ(policy("minimal_offloaded").offload, (V{"qkv", "attn_out", "mlp_gate", "mlp_up"}));
  EXPECT_EQ(policy("minimal_offloaded", true).offload, (V{"qkv", "attn_out", "mlp_gate", "mlp_up", "expert_out"}));
  EXPECT_EQ(policy("dots_saveable").save, (V{"qkv", "attn_scores", "attn", "attn_out", "mlp_gate", "mlp_up"}));
  EXPECT_EQ(policy("checkpoint_dots", true).save,
            (V{"qkv", "attn_scores", "attn", "attn_out", "mlp_gate", "mlp_up", "router", "expert_out"}));
  // Exact aliases carry no difference; MoE ones and dots_saveable say what differs.
  EXPECT_TRUE(workloads::recompute_alias("save_qkv_proj", true)->difference.empty());
  EXPECT_FALSE(workloads::recompute_alias("minimal", true)->difference.empty());
  EXPECT_TRUE(workloads::recompute_alias("minimal", false)->difference.empty());
  EXPECT_FALSE(workloads::recompute_alias("dots_saveable", false)->difference.empty());
  // Every alias loads on a dense and an MoE model (its names are valid activation names there).
  for (const auto& n : workloads::recompute_alias_names()) {
    SCOPED_TRACE(n);
    EXPECT_NO_THROW(policy(n, false));
    EXPECT_NO_THROW(policy(n, true));
  }
  // racksim's own names keep their meaning; unknown names suggest the nearest alias; custom says how.
  EXPECT_EQ(policy("full").mode, M::full);
  EXPECT_EQ(policy("none").mode, M::none);
  auto err = [&](const std::string& n) { return error_of([&] { policy(n); }); };
  EXPECT_EQ(err("save_qkv_prj"),
            "s.yaml:7:14: error: training.recompute: unknown value 'save_qkv_prj'; expected one of none | selective | full "
            "| save_dots | {save: [...], offload: [...]} (or a MaxText/JAX remat policy name: did you mean "
            "'save_qkv_proj'?)");
  EXPECT_NE(err("custom").find("MaxText's custom policy names each tensor: write it as {save: [...], offload: [...]}"),
            std::string::npos);
  // The alias runs: minimal saves what save_dots saves (the same report).
  const std::string quick = kSrc + "/scenarios/quickstart.yaml";
  const auto a = run_cli({"run", quick, "--json", "--set", "training.recompute=minimal"});
  const auto b = run_cli({"run", quick, "--json", "--set", "training.recompute=save_dots"});
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["step_time_s"], json::parse(b.out)["step_time_s"]);
}
