// Scenario loading: presets resolve, defaults apply, overrides graft, and errors carry
// file:line:column and the key path.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/scenario/scenario.h"
#include "workloads/model_spec.h"

using namespace racksim;

namespace {

const char* kBase = R"(name: t
system: {preset: h200-sxm, gpus: 16}
model: {preset: llama3-8b}
training:
  seq_len: 4096
  global_batch: 64
  parallelism: {tp: 2}
)";

std::string error_text(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    sim::load_scenario_text(yaml, "s.yaml", sim::parse_set_overrides(sets));
  } catch (const input::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Scenario, ResolvesPresetsAndDefaults) {
  auto sc = sim::load_scenario_text(kBase, "s.yaml");
  EXPECT_EQ(sc.system.spec.name, "h200-sxm");
  EXPECT_DOUBLE_EQ(sc.system.spec.gpu.hbm_bandwidth_Bps, 4.8e12);
  EXPECT_EQ(sc.model.layers, 32);
  EXPECT_EQ(sc.model.head_dim, 128);
  EXPECT_EQ(sc.training.parallelism.dp, 8);  // 16 / tp 2
  EXPECT_EQ(sc.training.micro_batch, 1);
  EXPECT_EQ(sc.training.micro_steps(), 8);   // 64 / (1 * 8)
  EXPECT_EQ(sc.training.recompute.mode, workloads::RecomputeMode::none);
}

TEST(Scenario, SetOverridesAndPresetOverrides) {
  auto sc = sim::load_scenario_text(kBase, "s.yaml",
                                    sim::parse_set_overrides({"training.parallelism.tp=4", "system.overrides.nvls=false",
                                                              "system.overrides.gpu.hbm_bandwidth=5 TB/s"}));
  EXPECT_EQ(sc.training.parallelism.tp, 4);
  EXPECT_EQ(sc.training.parallelism.dp, 4);
  EXPECT_FALSE(sc.system.spec.scale_up.nvls);  // `nvls` is a unique leaf name: scale_up.nvls
  EXPECT_DOUBLE_EQ(sc.system.spec.gpu.hbm_bandwidth_Bps, 5e12);
  EXPECT_NE(sc.system.spec.sources.at("gpu.hbm_bandwidth").find("scenario override"), std::string::npos);
}

// An override that leaves no HBM beside the preset's reservation is reported where the override is (a review found
// it at the shipped preset's memory.reserved, a file and key the user never wrote); the reservation overridden too,
// or alone, is reported at its own override.
TEST(Scenario, CapacityOverrideBelowTheReservationIsReportedAtTheOverride) {
  const std::string in_file = std::string(kBase).replace(std::string(kBase).find("gpus: 16}"), 9,
                                                        "gpus: 16, overrides: {gpu.hbm_capacity: 1 GB}}");
  const std::string e = error_text(in_file);
  EXPECT_NE(e.find("s.yaml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("system.overrides.gpu.hbm_capacity: 1.404 GB reserved for the driver and libraries leaves nothing of "
                   "the 1 GB of HBM"), std::string::npos) << e;
  EXPECT_EQ(e.find("h200-sxm.yaml"), std::string::npos) << e;
  const std::string set = error_text(kBase, {"system.overrides.gpu.hbm_capacity=1 GB"});
  EXPECT_NE(set.find("--set system.overrides.gpu.hbm_capacity=1 GB: error: system.overrides.gpu.hbm_capacity:"),
            std::string::npos) << set;
  const std::string both = error_text(kBase, {"system.overrides.gpu.hbm_capacity=1 GB", "system.overrides.memory.reserved=2 GB"});
  EXPECT_NE(both.find("system.overrides.memory.reserved: 2 GB reserved"), std::string::npos) << both;
}

// A preset table keyed by tokens (gpu.bf16_wgrad_nt_time_ratio, the Hopper presets): one number replaces the whole table
// and takes its points' citations with it (they had stayed behind and failed the preset's citation check), one point
// may be set or added by its key (a key that is not a plain whole number is refused), and a value that is neither says
// what it expects. A non-scalar key among the overrides had been skipped without a word.
TEST(Scenario, ATokenTableIsOverriddenWholeOrByItsPoints) {
  const auto base = sim::load_scenario_text(kBase, "s.yaml");
  ASSERT_EQ(base.system.spec.gpu.bf16_wgrad_nt_time_ratio.size(), 5u);
  EXPECT_EQ(base.system.spec.gpu.bf16_wgrad_nt_time_ratio[2], std::make_pair(4096.0, 0.912));
  const auto flat = sim::load_scenario_text(kBase, "s.yaml",
                                            sim::parse_set_overrides({"system.overrides.gpu.bf16_wgrad_nt_time_ratio=1"}));
  ASSERT_EQ(flat.system.spec.gpu.bf16_wgrad_nt_time_ratio.size(), 1u);
  EXPECT_EQ(flat.system.spec.gpu.bf16_wgrad_nt_time_ratio[0].second, 1.0);
  EXPECT_NE(flat.system.spec.sources.at("gpu.bf16_wgrad_nt_time_ratio").find("scenario override"), std::string::npos);
  EXPECT_FALSE(flat.system.spec.sources.count("gpu.bf16_wgrad_nt_time_ratio.4096"));
  const auto point = sim::load_scenario_text(
      kBase, "s.yaml", sim::parse_set_overrides({"system.overrides.gpu.bf16_wgrad_nt_time_ratio.4096=0.5"}));
  ASSERT_EQ(point.system.spec.gpu.bf16_wgrad_nt_time_ratio.size(), 5u);
  EXPECT_EQ(point.system.spec.gpu.bf16_wgrad_nt_time_ratio[2], std::make_pair(4096.0, 0.5));
  EXPECT_EQ(point.system.spec.gpu.bf16_wgrad_nt_time_ratio[3], std::make_pair(8192.0, 0.940));
  // a new point, by its key (here beyond the measured range: the table is no longer flat above 16,384 tokens)
  const auto added = sim::load_scenario_text(
      kBase, "s.yaml", sim::parse_set_overrides({"system.overrides.gpu.bf16_wgrad_nt_time_ratio={32768: 1.0}"}));
  ASSERT_EQ(added.system.spec.gpu.bf16_wgrad_nt_time_ratio.size(), 6u);
  EXPECT_EQ(added.system.spec.gpu.bf16_wgrad_nt_time_ratio.back(), std::make_pair(32768.0, 1.0));
  // Each refused --set, with the path its error names and what it says.
  const std::string table = "system.overrides.gpu.bf16_wgrad_nt_time_ratio";
  const std::vector<std::array<std::string, 3>> refused = {
      {".04096=1", ".04096", "'04096' is not a token count: write whole numbers of tokens as keys, e.g. 4096"},
      {"={[1, 2]: 1}", "", "expected preset field names as keys, got a list as a key"},
      {"=[1, 2]", "", "expected a mapping of tokens -> time ratio (e.g. {4096: 0.93}) or one number, got a list"},
      {"=9", "", "must be between 0.5 and 2, got 9"}};
  for (const auto& [set, path, message] : refused)
    EXPECT_EQ(error_text(kBase, {table + set}), "--set " + table + set + ": error: " + table + path + ": " + message);
}

// Transformer Engine's fused-softmax tables (gpu.te_softmax_forward/backward_GBps, by sequence length, on the H100 and
// H800 presets) take the same reader: a point by its key, the key a whole number, a rate from 10 GB/s to 100 TB/s.
TEST(Scenario, TheTeSoftmaxTablesAreReadByTheirSequenceLengths) {
  const std::string h100 = "system: {preset: h100-sxm, gpus: 1}\nmodel: {preset: llama3-8b}\ntraining: {seq_len: 2048, global_batch: 8}\n";
  const auto base = sim::load_scenario_text(h100, "s.yaml");
  ASSERT_EQ(base.system.spec.gpu.te_softmax_forward_GBps.size(), 3u);
  EXPECT_EQ(base.system.spec.gpu.te_softmax_forward_GBps[1], std::make_pair(2048.0, 1444.0));
  EXPECT_EQ(base.system.spec.gpu.te_softmax_backward_GBps[2], std::make_pair(4096.0, 1365.0));
  const auto point = sim::load_scenario_text(
      h100, "s.yaml", sim::parse_set_overrides({"system.overrides.gpu.te_softmax_backward_GBps.2048=1500"}));
  EXPECT_EQ(point.system.spec.gpu.te_softmax_backward_GBps[1], std::make_pair(2048.0, 1500.0));
  const std::string table = "system.overrides.gpu.te_softmax_forward_GBps";
  EXPECT_EQ(error_text(h100, {table + ".2k=2000"}),
            "--set " + table + ".2k=2000: error: " + table + ".2k: '2k' is not a sequence length: write whole numbers of "
            "scores per row as keys, e.g. 4096");
  EXPECT_EQ(error_text(h100, {table + "=5"}), "--set " + table + "=5: error: " + table + ": must be between 10 and 100000, got 5");
  // Presets without the measurement carry no table (the row-kernel bound applies there, with a note).
  EXPECT_TRUE(sim::load_scenario_text("system: {preset: gb200-nvl72, gpus: 4}\nmodel: {preset: llama3-8b}\ntraining: {seq_len: 2048, global_batch: 8}\n",
                                      "g.yaml").system.spec.gpu.te_softmax_forward_GBps.empty());
}

// The other preset tables keyed by data, gpu.sustained_gemm.<dtype> (GEMM shapes): a point may be set or added by its
// key, by full or short path, and takes its own citation (until 2026-12-07 a shape the preset did not list was an
// unknown field); a key that is not a shape is refused at the set, and a rate above the dtype's peak by the reader.
TEST(Scenario, SustainedGemmPointsAreOverriddenByTheirShape) {
  const std::string fp8 = "system.overrides.gpu.sustained_gemm.fp8.";
  const auto base = sim::load_scenario_text(kBase, "s.yaml");
  const auto& table = base.system.spec.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8);
  ASSERT_TRUE(table.count("8192x8192x8192"));
  EXPECT_FALSE(table.count("2048x2048x2048"));
  const auto added = sim::load_scenario_text(
      kBase, "s.yaml",
      sim::parse_set_overrides({fp8 + "2048x2048x2048=1000 TFLOP/s", "system.overrides.sustained_gemm.fp8.8192x8192x8192=1200 TFLOP/s"}));
  const auto& t = added.system.spec.gpu.sustained_gemm_flops_per_s.at(sim::Dtype::fp8);
  EXPECT_EQ(t.size(), table.size() + 1);
  EXPECT_DOUBLE_EQ(t.at("2048x2048x2048"), 1000e12);
  EXPECT_DOUBLE_EQ(t.at("8192x8192x8192"), 1200e12);
  EXPECT_NE(added.system.spec.sources.at("gpu.sustained_gemm.fp8.2048x2048x2048").find("scenario override"),
            std::string::npos);
  EXPECT_EQ(error_text(kBase, {fp8 + "20x48=1 PFLOP/s"}),
            "--set " + fp8 + "20x48=1 PFLOP/s: error: " + fp8 + "20x48: '20x48' is not a GEMM shape: write MxNxK "
            "with positive integers, e.g. 8192x8192x8192");
  EXPECT_NE(error_text(kBase, {fp8 + "2048x2048x2048=3 PFLOP/s"}).find("is above this GPU's dense fp8 peak"),
            std::string::npos);
}

TEST(Scenario, ErrorsCarryLocationAndPath) {
  const std::string e = error_text(std::string(kBase) + "  recompute: ful\n");
  EXPECT_EQ(e,
            "s.yaml:8:14: error: training.recompute: unknown value 'ful'; expected one of none | selective | full | "
            "save_dots | {save: [...], offload: [...]} (did you mean 'full'?)");
}

// A field beside a model preset says what to do instead of listing 'preset' as the only valid key.
TEST(Scenario, FieldsBesideAModelPresetSayToWriteTheModelInline) {
  EXPECT_EQ(error_text(kBase, {"model.hidden=8192"}),
            "--set model.hidden=8192: error: model.hidden: a model preset's fields are not set beside it (model: "
            "{preset: ...} takes nothing else): write the model inline instead, its fields as `racksim models show "
            "llama3-8b` prints them, with hidden changed");
}

// Text that is not UTF-8 is an input error at its byte (it had reached the JSON report and failed there, exit 2).
TEST(Scenario, TextThatIsNotUtf8IsAnInputErrorAtItsByte) {
  EXPECT_EQ(error_text("name: caf\xe9\n" + std::string(kBase).substr(8)),  // (kBase less its "name: t")
            "s.yaml:1:10: error: byte 0xE9 is not UTF-8: racksim reads UTF-8 text (save the file as UTF-8)");
  EXPECT_EQ(error_text(kBase, {"name=caf\xe9"}), "--set:1:9: error: byte 0xE9 is not UTF-8: racksim reads UTF-8 text");
  // Well-formed multi-byte text is read; an overlong form and a lone continuation byte are not.
  EXPECT_EQ(input::first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"), std::string::npos);
  EXPECT_EQ(input::first_invalid_utf8("a\xc0\xaf" "b"), 1u);
  EXPECT_EQ(input::first_invalid_utf8("ab\x80"), 2u);
  EXPECT_EQ(input::first_invalid_utf8("\xed\xa0\x80"), 0u);  // a UTF-16 surrogate
}

TEST(Scenario, CollectsAllErrors) {
  const std::string e = error_text(R"(system: {preset: h200-sxm, gpus: 8}
model: {preset: llama3-8b}
training: {seq_len: 4096, global_batch: 64, micro_batchh: 2, attention: flsh}
)");
  EXPECT_NE(e.find("s.yaml:3:45: error: training.micro_batchh: unknown key 'micro_batchh'; did you mean 'micro_batch'?"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("training.attention: unknown value 'flsh'"), std::string::npos) << e;
}

TEST(Scenario, SetErrorsNameTheOverride) {
  const std::string e = error_text(kBase, {"training.parallelism.tp=3"});
  EXPECT_EQ(e,
            "s.yaml:2:34: error: system.gpus: gpus (16) must be a multiple of tp·pp·cp = 3·1·1 = 3\n"
            "--set training.parallelism.tp=3: error: training.parallelism.tp: tp (3) must divide the model's "
            "heads (32)\n"
            "--set training.parallelism.tp=3: error: training.parallelism.tp: tp (3) must divide ffn_hidden (14336)");
  EXPECT_THROW(sim::parse_set_overrides({"no_equals_sign"}), input::InputError);
  // A mapping the --set creates on its way is the --set's too (it had been reported at the file, with no line).
  EXPECT_EQ(error_text(kBase, {"trainng.seq_len=4096"}),
            "--set trainng.seq_len=4096: error: trainng: unknown key 'trainng'; did you mean 'training'?");
  EXPECT_EQ(error_text(kBase, {"training.moe.dispatcher=deepep"}),
            "--set training.moe.dispatcher=deepep: error: training.moe: training.moe needs a mixture-of-experts model "
            "(model.moe)");
}

TEST(Scenario, InlineModelAndParamCount) {
  auto sc = sim::load_scenario_text(R"(system: {preset: h200-sxm, gpus: 1}
model: {layers: 16, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 32768}
training: {seq_len: 2048, global_batch: 8, micro_batch: 8}
)",
                                    "s.yaml");
  // The JAX reference model m1: 1,208,027,136 parameters (shared/reference/h200/jax_training_steps.jsonl).
  EXPECT_DOUBLE_EQ(workloads::total_params(sc.model), 1208027136.0);
}

TEST(Scenario, ModelPresetsMatchPublishedParameterCounts) {
  for (const std::string name : {"llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b", "mixtral-8x7b", "deepseek-v3"}) {
    auto sc = sim::load_scenario_text(
        "system: {preset: h200-sxm, gpus: 8}\nmodel: {preset: " + name + "}\ntraining: {seq_len: 4096, global_batch: 8}\n",
        "s.yaml");
    ASSERT_GT(sc.model.published_params, 0) << name;
    EXPECT_NEAR(workloads::total_params(sc.model) / sc.model.published_params, 1.0, 0.01) << name;
    if (sc.model.published_active_params > 0) {
      EXPECT_NEAR(workloads::active_params(sc.model) / sc.model.published_active_params, 1.0, 0.03) << name;
    }
  }
}
