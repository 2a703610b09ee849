// MaxText's embedding and output-layer switches in the JAX mode (training.one_hot_embedding: use_iota_embed;
// training.logits_fp32: logits_dot_in_fp32): the GEMMs, bytes, gathers and gradient reductions each adds, in closed
// form, against the gather and the bf16 head they replace.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"
#include "scenario_text_util.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

// One micro-batch of 2 x 1024 tokens, FSDP over 8 GPUs so that the head's and the embedding's gathers and gradient
// reductions exist.
constexpr double kTokens = 2048, kHidden = 1024, kVocab = 32000;
std::string yaml(const std::string& extra, const std::string& framework = "jax") {
  return "system: {preset: h100-sxm, gpus: 8}\n"
         "model: {layers: 2, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 32000, ffn: swiglu}\n"
         "training: {seq_len: 1024, global_batch: 16, micro_batch: 2, framework: " + framework +
         ", optimizer_sharding: fsdp, parallelism: {dp: 8}" + (framework == "jax" ? ", scan_layers: false" : "") + extra +
         "}\n";
}
sim::Scenario load(const std::string& text) { return racksim::testing::scenario_from_text(text, "e.yaml"); }
OpGraph graph_of(const sim::Scenario& sc) { return build_training_graph(sc.model, sc.training, sc.system.spec); }

struct Op1 {
  int count = 0;
  double flops = 0, bytes = 0, coll_bytes = 0;
  sim::Dtype dtype = sim::Dtype::fp32;
  ExecUnit unit = ExecUnit::vector;
};
// The first micro-batch's ops by name, less the micro-batch prefix ("v0.embedding.one_hot", "rank0.grad.head...").
std::map<std::string, Op1> ops_of(const OpGraph& g) {
  std::map<std::string, Op1> out;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    std::string n = g.op_name(static_cast<OpId>(i));
    if (n.rfind("mb", 0) == 0) {
      if (n.rfind("mb0.", 0) != 0) continue;
      n = n.substr(4);
    }
    const Op& op = g.ops[i];
    auto& e = out[n];
    ++e.count;
    e.flops += op.flops;
    e.bytes += op.hbm_bytes;
    e.coll_bytes += op.coll_bytes;
    e.dtype = op.dtype;
    e.unit = op.unit;
  }
  return out;
}
double coll_bytes_containing(const std::map<std::string, Op1>& ops, const std::string& part) {
  double b = 0;
  for (const auto& [n, e] : ops) b += n.find(part) != std::string::npos ? e.coll_bytes : 0;
  return b;
}

}  // namespace

// use_iota_embed: the one-hot matrix written (T x V in bf16, the token ids read), the lookup GEMM (2·T·V·h FLOPs) and
// the table's gradient GEMM (2·V·h·T) in place of the gather and the scatter-add; the gradient reduced in bf16 (a
// dot's), where the scatter-add's is fp32; the one-hot matrix held from the forward to the gradient.
TEST(EmbeddingHead, OneHotEmbeddingIsTwoGemmsOverTheVocabulary) {
  const auto gather_sc = load(yaml("")), one_hot_sc = load(yaml(", one_hot_embedding: true"));
  const auto gather = ops_of(graph_of(gather_sc)), one_hot = ops_of(graph_of(one_hot_sc));

  ASSERT_TRUE(one_hot.count("v0.embedding.one_hot"));
  const Op1& oh = one_hot.at("v0.embedding.one_hot");
  EXPECT_EQ(oh.unit, ExecUnit::vector);
  EXPECT_DOUBLE_EQ(oh.bytes, kTokens * kVocab * 2 + 4 * kTokens);
  const Op1& lookup = one_hot.at("v0.embedding");
  EXPECT_EQ(lookup.unit, ExecUnit::tensor);
  EXPECT_DOUBLE_EQ(lookup.flops, 2 * kTokens * kVocab * kHidden);
  EXPECT_EQ(lookup.dtype, sim::Dtype::bf16);
  ASSERT_TRUE(one_hot.count("v0.embedding.wgrad"));
  EXPECT_DOUBLE_EQ(one_hot.at("v0.embedding.wgrad").flops, 2 * kVocab * kHidden * kTokens);
  EXPECT_FALSE(one_hot.count("v0.embedding.bwd"));  // no scatter-add
  // The gather: a vector op without FLOPs, and its scatter-add.
  EXPECT_EQ(gather.at("v0.embedding").unit, ExecUnit::vector);
  EXPECT_TRUE(gather.count("v0.embedding.bwd"));
  EXPECT_FALSE(gather.count("v0.embedding.one_hot"));

  // The embedding's gradient is reduced in bf16, a dot's, against the scatter-add's fp32.
  EXPECT_DOUBLE_EQ(precision_of(one_hot_sc.training).embedding_grad_reduce_bytes, 2);
  EXPECT_DOUBLE_EQ(precision_of(gather_sc.training).embedding_grad_reduce_bytes, 4);
  EXPECT_DOUBLE_EQ(coll_bytes_containing(gather, "grad.embedding"), kVocab * kHidden * 4);

  // The one-hot matrix lives through the forward and the backward: the peak grows by at least its bytes.
  const double peak_gather = sim::simulate(gather_sc).replay.memory.peak_hbm_bytes;
  const double peak_one_hot = sim::simulate(one_hot_sc).replay.memory.peak_hbm_bytes;
  EXPECT_GE(peak_one_hot - peak_gather, kTokens * kVocab * 2);
  EXPECT_GT(sim::simulate(one_hot_sc).replay.step_time_s, sim::simulate(gather_sc).replay.step_time_s);
}

// logits_dot_in_fp32: the head's three GEMMs at TF32 with 4-byte operands and outputs; the input cast to fp32 (and
// the input gradient cast back); no cast of the logits' gradient to bf16; the head gathered and its gradient
// reduced in fp32 under FSDP.
TEST(EmbeddingHead, LogitsInFp32RunTheHeadGemmsAtTf32) {
  const auto bf16 = ops_of(graph_of(load(yaml("")))), fp32 = ops_of(graph_of(load(yaml(", logits_fp32: true"))));
  for (const char* name : {"v0.logits", "v0.logits.dgrad", "v0.logits.wgrad"}) {
    ASSERT_TRUE(fp32.count(name)) << name;
    EXPECT_EQ(fp32.at(name).dtype, sim::Dtype::tf32) << name;
    EXPECT_DOUBLE_EQ(fp32.at(name).flops, 2 * kTokens * kVocab * kHidden) << name;
    EXPECT_EQ(bf16.at(name).dtype, sim::Dtype::bf16) << name;
  }
  EXPECT_DOUBLE_EQ(fp32.at("v0.logits").bytes, (kTokens * kHidden + kHidden * kVocab + kTokens * kVocab) * 4);
  EXPECT_DOUBLE_EQ(fp32.at("v0.logits.input_cast").bytes, kTokens * kHidden * (2 + 4));
  EXPECT_DOUBLE_EQ(fp32.at("v0.logits.dgrad.cast").bytes, kTokens * kHidden * (4 + 2));
  EXPECT_FALSE(fp32.count("v0.cross_entropy.bwd.cast"));
  EXPECT_TRUE(bf16.count("v0.cross_entropy.bwd.cast"));
  // Under FSDP: the head's kernel gathered uncast, 4 bytes per weight (the forward's and the backward's gathers; the
  // embedding's two are unchanged), and its gradient reduced in fp32.
  const double head = kVocab * kHidden + kHidden;  // the output layer and the final norm's gain
  EXPECT_DOUBLE_EQ(coll_bytes_containing(fp32, "v0.fsdp.param_all_gather") -
                       coll_bytes_containing(bf16, "v0.fsdp.param_all_gather"),
                   2 * head * (4 - 2));
  EXPECT_DOUBLE_EQ(precision_of(load(yaml(", logits_fp32: true")).training).head_grad_reduce_bytes, 4);
  EXPECT_DOUBLE_EQ(precision_of(load(yaml("")).training).head_grad_reduce_bytes, 2);
}

// Megatron mode has neither switch: given, they change nothing and the report says so.
TEST(EmbeddingHead, MegatronModeSimulatesTheMaxTextSwitchesAsAbsent) {
  const auto plain = load(yaml("", "megatron"));
  const auto given = load(yaml(", one_hot_embedding: true, logits_fp32: true", "megatron"));
  EXPECT_EQ(given.training.other_framework_keys, (std::vector<std::string>{"one_hot_embedding", "logits_fp32"}));
  const auto r0 = sim::simulate(plain), r1 = sim::simulate(given);
  EXPECT_DOUBLE_EQ(r1.replay.step_time_s, r0.replay.step_time_s);
  const std::string notes = r1.report["warnings"].dump();
  EXPECT_NE(notes.find("training.one_hot_embedding is XLA's (JAX mode); in Megatron mode it changes nothing"),
            std::string::npos)
      << notes;
}
