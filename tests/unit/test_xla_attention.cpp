// The JAX mode's materialized attention: the kernels XLA emits around the score dots, read off the
// compiled H200 steps s1_none_unrolled (MHA, unrolled) and g1_dots (GQA, scanned, recomputed scores),
// pinned here by count and bytes in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "hardware_models/compute_model.h"
#include "sim/run/run.h"
#include "scenario_text_util.h"
#include "sim/scenario/scenario.h"
#include "workloads/graph_builder.h"

using namespace racksim;
using namespace racksim::workloads;

namespace {

constexpr double B = 2, S = 512, H = 8, Dh = 64, D = H * Dh, L = 2, a = 2;

OpGraph jax_graph(int kv_heads, bool scan, const std::string& recompute) {
  const auto sc = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 1}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, kv_heads: " + std::to_string(kv_heads) +
          ", vocab: 4096, ffn: swiglu}\n"
          "training: {seq_len: 512, global_batch: 2, micro_batch: 2, recompute: " + recompute +
          ", attention: materialized, framework: jax, scan_layers: " + (scan ? "true" : "false") + "}\n",
      "x.yaml");
  return build_training_graph(sc.model, sc.training, sc.system.spec);
}

// A one-GPU JAX-mode scenario of the small swiglu decoder with these training keys, and its graph.
sim::Scenario jax_text_scenario(const std::string& training) {
  return sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 1}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, kv_heads: 8, vocab: 4096, ffn: swiglu}\n"
      "training: {seq_len: 512, global_batch: 2, micro_batch: 2, framework: jax, " + training + "}\n",
      "b.yaml");
}
OpGraph jax_text_graph(const std::string& training) {
  const auto sc = jax_text_scenario(training);
  return build_training_graph(sc.model, sc.training, sc.system.spec);
}

struct Kernels {
  int count = 0;
  double bytes = 0, thread_bytes = 0, loop_indices = 0;
};
// Kernels by their name without the micro-batch/layer prefix, per phase ("forward.attn_scores.qk").
std::map<std::string, Kernels> kernels(const OpGraph& g) {
  std::map<std::string, Kernels> k;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const auto& op = g.ops[i];
    if (op.kind != OpKind::kernel) continue;
    std::string n = g.op_name(static_cast<OpId>(i));
    if (const auto dot = n.find(".L"); dot != std::string::npos) n = n.substr(n.find('.', dot + 1) + 1);
    const char* phase = op.phase == Phase::forward ? "forward." : op.phase == Phase::recompute ? "recompute." : "backward.";
    auto& e = k[phase + n];
    ++e.count;
    e.bytes += op.hbm_bytes;
    e.thread_bytes = op.thread_bytes;
    e.loop_indices += op.loop_indices;
  }
  return k;
}

// Bytes of the kernels whose name contains `part`, in every phase.
double bytes_of(const std::map<std::string, Kernels>& k, const std::string& part) {
  double b = 0;
  for (const auto& [name, e] : k) b += name.find(part) != std::string::npos ? e.bytes : 0;
  return b;
}

// Kernels whose name contains `part`, in every phase.
int k_count(const std::map<std::string, Kernels>& k, const std::string& part) {
  int n = 0;
  for (const auto& [name, e] : k) n += name.find(part) != std::string::npos ? e.count : 0;
  return n;
}

}  // namespace

// s1_none_unrolled: the forward softmax is a reduction (fusion.858: fp32 scores in, one fp32 value per
// row out) and a normalization (fusion.603: fp32 scores and the row values in, bf16 probabilities out),
// 64 elements per thread; Q, K, V are copied into the heads' layout and Q, K again into the dots'
// (5 copies); the backward copies dO once and joins dQ, dK, dV twice; dK reads dS and its operands only.
TEST(XlaAttention, UnrolledMhaKernelsAndBytes) {
  auto k = kernels(jax_graph(8, false, "none"));
  const double T = B * S, scores = B * H * S * S, rows = B * H * S;
  EXPECT_EQ(k["forward.attn_scores.softmax.reduce"].count, L);
  EXPECT_DOUBLE_EQ(k["forward.attn_scores.softmax.reduce"].bytes, L * (4 * scores + 4 * rows));
  EXPECT_DOUBLE_EQ(k["forward.attn_scores.softmax.reduce"].thread_bytes, 256);
  EXPECT_EQ(k["forward.attn_scores.softmax"].count, L);
  EXPECT_DOUBLE_EQ(k["forward.attn_scores.softmax"].bytes, L * ((4 + a) * scores + 4 * rows));
  EXPECT_DOUBLE_EQ(k["forward.attn_scores.softmax"].thread_bytes, 256);
  const double copy = 2 * T * D * a;  // one [T, D] bf16 tensor read and written
  for (const char* n : {"q_layout", "k_layout", "v_layout", "q_dot_layout", "k_dot_layout"}) {
    EXPECT_EQ(k[std::string("forward.attn_scores.") + n].count, L) << n;
    EXPECT_DOUBLE_EQ(k[std::string("forward.attn_scores.") + n].bytes, L * copy) << n;
  }
  EXPECT_EQ(k["backward.attn.do_layout"].count, L);
  EXPECT_DOUBLE_EQ(k["backward.attn.do_layout"].bytes, L * copy);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dqkv_concat"].bytes, L * 3 * copy);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dqkv_wgrad_layout"].bytes, L * 3 * copy);
  EXPECT_EQ(k.count("backward.attn.do_gqa_layout"), 0u);  // MHA: one dO layout
  EXPECT_EQ(k.count("backward.attn_scores.dq_layout"), 0u);
  // dQ and dK: the same batched dot shape, each reading fp32 dS (no second read of the scores on dK).
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dk"].bytes, k["backward.attn_scores.dq"].bytes);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dq"].bytes,
                   L * (B * H * ((S * S + S * Dh) * a + S * Dh * a) + scores * (4 - a)));
}

// training.fused_softmax: Transformer Engine's unfused DotProductAttention (NVTE_FUSED_ATTN=0), as Pax's TE layers
// run it: the score dot writes bf16 (no fp32 scores, no mask operand), one softmax kernel reads the causal half and
// writes the whole bf16 row (1.5 a per score, S / 32 fp32 elements of a row per thread), one backward kernel reads P
// and dP over the causal half and writes a bf16 dS (2 a per score), which dQ and dK read as it is; XLA's reduce, its
// fp32 dS and the extra fp32 reads are gone, scanned or unrolled, and the memory holds a bf16 dS.
TEST(XlaAttention, TransformerEngineFusedSoftmaxKernelsAndBytes) {
  const double scores = B * H * S * S;
  for (bool scan : {false, true}) {
    const auto xla = kernels(jax_text_graph(std::string("attention: materialized, recompute: none, scan_layers: ") +
                                            (scan ? "true" : "false")));
    const auto te = kernels(jax_text_graph(std::string("attention: materialized, recompute: none, fused_softmax: true, "
                                                       "scan_layers: ") + (scan ? "true" : "false")));
    EXPECT_EQ(k_count(te, "softmax.reduce"), 0) << scan;
    EXPECT_EQ(k_count(te, "softmax.exp"), 0) << scan;
    EXPECT_EQ(k_count(te, "softmax.bwd.rowsum"), 0) << scan;
    EXPECT_EQ(k_count(te, "forward.attn_scores.softmax"), L) << scan;
    EXPECT_DOUBLE_EQ(bytes_of(te, "forward.attn_scores.softmax"), L * 1.5 * a * scores) << scan;
    EXPECT_DOUBLE_EQ(te.at("forward.attn_scores.softmax").thread_bytes, S / 32 * a);
    EXPECT_EQ(k_count(te, "backward.attn_scores.softmax.bwd"), L) << scan;
    EXPECT_DOUBLE_EQ(bytes_of(te, "backward.attn_scores.softmax.bwd"), L * 2 * a * scores) << scan;
    EXPECT_DOUBLE_EQ(te.at("backward.attn_scores.softmax.bwd").thread_bytes, 2 * S / 32 * a);
    // The dots: a plain bf16 score dot and dQ / dK reading bf16 dS, (4 - a) bytes per score less than XLA's each.
    for (const char* dot : {"forward.attn_scores.qk", "backward.attn_scores.dq", "backward.attn_scores.dk"})
      EXPECT_NEAR(xla.at(dot).bytes - te.at(dot).bytes,
                  L * scores * (4 - a) + (scan && std::string(dot) == "forward.attn_scores.qk" ? L * scores * 5 : 0),
                  1e-6 * xla.at(dot).bytes)
          << dot << " scan " << scan;
    EXPECT_LT(bytes_of(te, "softmax"), bytes_of(xla, "softmax") / 2) << scan;
    // TE masks inside its kernel: no mask operands for the scanned score dot.
    EXPECT_EQ(k_count(te, "mask_init"), 0) << scan;
    if (scan) {
      EXPECT_GT(k_count(xla, "mask_init"), 0);
    }
    // Memory: the softmax keeps only its bf16 output for the backward (XLA's fp32 scores as well): 4 B a score less
    // per layer in flight, L layers of it at the end of the forward.
    const std::string keys = std::string("attention: materialized, recompute: none, scan_layers: ") + (scan ? "true" : "false");
    const double xla_peak = sim::simulate(jax_text_scenario(keys)).report["peak_memory_bytes"].get<double>();
    const double te_peak =
        sim::simulate(jax_text_scenario(keys + ", fused_softmax: true")).report["peak_memory_bytes"].get<double>();
    EXPECT_GE(xla_peak - te_peak, L * 4 * scores * 0.99) << scan;
  }
  // The kernel's time, where the GPU has the measurement (the H100 preset, calibration/data/h100-2026-12-07-te-softmax):
  // its bytes at gpu.te_softmax_*_GBps, at S = 512 the first point's (1,024), the table flat below it.
  {
    auto sc = sim::load_scenario_text(
        "system: {preset: h100-sxm, gpus: 1, calibration: none}\n"
        "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, kv_heads: 8, vocab: 4096, ffn: swiglu}\n"
        "training: {seq_len: 512, global_batch: 2, micro_batch: 2, framework: jax, attention: materialized, recompute: none, "
        "scan_layers: false, fused_softmax: true}\n",
        "h.yaml");
    const auto& gpu = sc.system.spec.gpu;
    ASSERT_EQ(gpu.te_softmax_forward_GBps.size(), 3u);
    for (int dir : {1, 2}) {
      hw::KernelWork w;
      w.hbm_bytes = (dir == 1 ? 1.5 : 2.0) * a * scores;
      w.te_softmax = dir;
      w.attention_seq = S;
      const double GBps = dir == 1 ? gpu.te_softmax_forward_GBps.front().second : gpu.te_softmax_backward_GBps.front().second;
      const auto t = hw::kernel_timing(sc.system.spec, w);
      EXPECT_NEAR(t.compute_s, w.hbm_bytes / (GBps * 1e9), 1e-12) << dir;
      EXPECT_TRUE(t.occupancy_bound);
    }
    // Interpolated in log2(S) between the points: halfway from 2,048 to 4,096 at 2,896.
    EXPECT_NEAR(hw::te_softmax_rate_Bps(sc.system.spec, 1, 2048 * std::sqrt(2.0)), 1e9 * (1444 + 986) / 2.0, 1e-3);
    EXPECT_EQ(hw::te_softmax_rate_Bps(sc.system.spec, 0, 2048), 0.0);
  }
  // Outside TE's kernel (v1.5: 16 < S <= 4096), TE falls back to jax.nn.softmax: XLA's fusions run, and a note says so.
  {
    const auto long_seq = sim::load_scenario_text(
        "system: {preset: h200-sxm, gpus: 1}\n"
        "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, kv_heads: 8, vocab: 4096, ffn: swiglu}\n"
        "training: {seq_len: 8192, global_batch: 1, micro_batch: 1, framework: jax, attention: materialized, "
        "recompute: none, scan_layers: false, fused_softmax: true}\n",
        "l.yaml");
    const auto g = build_training_graph(long_seq.model, long_seq.training, long_seq.system.spec);
    const auto k = kernels(g);
    EXPECT_GT(k_count(k, "softmax.reduce"), 0);
    bool noted = false;
    for (const auto& n : g.notes) noted = noted || n.find("else jax.nn.softmax: the step runs XLA's fusions") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  // A GPU without the measurement (the H200 preset): the row-kernel bound, and the report says so.
  {
    const auto g = jax_text_graph("attention: materialized, recompute: none, scan_layers: false, fused_softmax: true");
    bool noted = false;
    for (const auto& n : g.notes) noted = noted || n.find("has no measurement of Transformer Engine's fused softmax") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  // Megatron mode and flash attention: the key changes nothing, and the report says so for flash.
  const auto flash = jax_text_scenario("attention: flash, fused_softmax: true, scan_layers: false");
  const auto flash_g = build_training_graph(flash.model, flash.training, flash.system.spec);
  bool noted = false;
  for (const auto& n : flash_g.notes) noted = noted || n.find("training.fused_softmax") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_EQ(k_count(kernels(flash_g), "attn_scores"), 0);
}

// g1_dots: scanned layers whose scores are recomputed: the recomputed softmax is split as above, the
// forward's is one kernel; under GQA dO is copied a second time (grouped under the kv heads) and dQ, dK,
// dV are each copied out of their grouped layout before they are joined.
TEST(XlaAttention, ScannedGqaRecomputeKernelsAndBytes) {
  auto k = kernels(jax_graph(2, true, "save_dots"));
  const double T = B * S, scores = B * H * S * S, rows = B * H * S, kvd = 2 * Dh;
  EXPECT_EQ(k.count("forward.attn_scores.softmax.reduce"), 0u);
  EXPECT_EQ(k["recompute.attn_scores.softmax.reduce"].count, L);
  EXPECT_DOUBLE_EQ(k["recompute.attn_scores.softmax.reduce"].bytes, L * (4 * scores + 4 * rows));
  EXPECT_DOUBLE_EQ(k["recompute.attn_scores.softmax"].bytes, L * ((4 + a) * scores + 4 * rows));
  EXPECT_DOUBLE_EQ(k["recompute.attn_scores.k_layout"].bytes, L * 2 * T * kvd * a);
  EXPECT_DOUBLE_EQ(k["backward.attn.do_gqa_layout"].bytes, L * 2 * T * D * a);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dq_layout"].bytes, L * 2 * T * D * a);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dk_layout"].bytes, L * 2 * T * kvd * a);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dv_layout"].bytes, L * 2 * T * kvd * a);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dqkv_concat"].bytes, L * 2 * T * (D + 2 * kvd) * a);
  EXPECT_DOUBLE_EQ(k["backward.attn_scores.dk"].bytes, k["backward.attn_scores.dq"].bytes);
}

// XLA's loss backward: a per-token pass that gathers each target logit (26 B a token with bf16 logits, not a pass
// over the logits: measured 2.4 us for 8,192 tokens), the fp32 gradient, its cast back to bf16 (every compiled H200
// step: loop_add_subtract_fusion, loop_multiply_fusion, wrapped_convert.1).
TEST(XlaAttention, JaxLossBackwardIsTwoPassesAndAGather) {
  auto k = kernels(jax_graph(8, false, "none"));
  const double logits = B * S * 4096;
  EXPECT_DOUBLE_EQ(k["backward.mb0.v0.cross_entropy.bwd.rows"].bytes, B * S * (a + 24));
  EXPECT_DOUBLE_EQ(k["backward.mb0.v0.cross_entropy.bwd"].bytes, logits * (a + 4));
  EXPECT_DOUBLE_EQ(k["backward.mb0.v0.cross_entropy.bwd.cast"].bytes, logits * (4 + a));
}

// Megatron's materialized attention has none of XLA's kernels.
TEST(XlaAttention, MegatronModeHasNoXlaKernels) {
  const auto sc = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 1}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, kv_heads: 2, vocab: 4096}\n"
      "training: {seq_len: 512, global_batch: 2, micro_batch: 2, attention: materialized}\n",
      "m.yaml");
  auto k = kernels(build_training_graph(sc.model, sc.training, sc.system.spec));
  for (const auto& [name, e] : k) {
    EXPECT_EQ(name.find("_layout"), std::string::npos) << name;
    EXPECT_EQ(name.find("softmax.reduce"), std::string::npos) << name;
  }
}

// Under a remat policy XLA casts each layer's fp32 weights to bf16 again in the backward (a convert fusion
// per weight in the recompute of every compiled H200 step with a policy: m1_dots, m1_full, d4096_l8_dots,
// l7b16_b4_mflash): one kernel per layer, 4 + 2 bytes per weight of the layer (q, k, v, o: 4 D^2; SwiGLU 3 D F;
// two norms 2 D), also when the policy keeps every step. Scanned, the bf16 copy is a buffer of its own;
// unrolled, norm1's recomputed output already carries it (jax_residual_sizes), so there is no second one. Under
// FSDP the rank casts its shard (x2_fsdp_m1_dots). None without recompute, and none under fp8-class training,
// whose GEMMs quantize their weights themselves.
TEST(XlaAttention, SavingPolicyRecastsTheWeightsInTheBackward) {
  const double F = 2048, weights = 4 * D * D + 3 * D * F + 2 * D;
  auto copies = [](const OpGraph& g) {
    int n = 0;
    for (std::size_t t = 0; t < g.tensors.size(); ++t)
      n += g.tensor_name(static_cast<TensorId>(t)).find("weights.cast.bf16") != std::string::npos;
    return n;
  };
  for (const bool scan : {true, false}) {
    for (const char* policy :
         {"save_dots", "full", "{save: [qkv, attn_scores, attn, attn_out, norm1, norm2, mlp_gate, mlp_up, mlp_act, mlp_out]}"}) {
      const OpGraph g = jax_graph(8, scan, policy);
      auto k = kernels(g);
      EXPECT_EQ(k["recompute.weights.cast"].count, L) << policy << " scan " << scan;
      EXPECT_DOUBLE_EQ(k["recompute.weights.cast"].bytes, L * weights * (4 + a)) << policy << " scan " << scan;
      EXPECT_EQ(copies(g), scan ? L : 0) << policy << " scan " << scan;
    }
    // (Scanned, the forward casts too, under every policy: ScannedForwardCastsStacksAndMasks.)
    EXPECT_EQ(k_count(kernels(jax_graph(8, scan, "none")), "recompute.weights.cast"), 0);
  }
  const auto fsdp = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 2}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, vocab: 4096, ffn: swiglu}\n"
      "training: {seq_len: 512, global_batch: 4, micro_batch: 2, recompute: save_dots, framework: jax,\n"
      "           parallelism: {dp: 2}, optimizer_sharding: fsdp}\n",
      "d.yaml");
  auto kf = kernels(build_training_graph(fsdp.model, fsdp.training, fsdp.system.spec));
  ASSERT_GT(kf["recompute.weights.cast"].count, 0);
  EXPECT_DOUBLE_EQ(kf["recompute.weights.cast"].bytes / kf["recompute.weights.cast"].count, weights / 2 * (4 + a));
  // (... and so does the scanned forward's cast.)
  EXPECT_EQ(kf["forward.weights.cast"].count, kf["recompute.weights.cast"].count);
  EXPECT_DOUBLE_EQ(kf["forward.weights.cast"].bytes, kf["recompute.weights.cast"].bytes);
  EXPECT_EQ(k_count(kernels(jax_text_graph("recompute: save_dots, precision: fp8")), "weights.cast"), 0);
}

// Scanned (lax.scan) forward loop, read off the compiled H200 steps (calibration/data/h200-2026-11-29):
//  - each layer's five fp32 weights are cast to bf16 inside the loop body, one convert fusion each, under every
//    policy (read 4 B, write 2 B per weight; m1_none, s1_none_scan, m1_dots, m1_full). Without a policy the bf16
//    copies are residuals: stacked (a dynamic-update-slice, read and write) and sliced out in the backward;
//  - with the scores kept (no policy) the softmax is three fusions: max and exp (fp32 in, fp32 out), the row sum
//    (fp32 in), the division and bf16 convert (fp32 in, bf16 out) -- m1_none's fusion.157, input_reduce_fusion.7,
//    loop_convert_fusion; with the scores recomputed it stays one fusion (fp32 in, bf16 out: m1_full fusion.169);
//  - the steps' extra XLA residuals are not written by the forward fusions (the stack's dynamic-update-slice
//    computes the saved ones; unsaved ones are never written): the SwiGLU product moves 3 T F bf16;
//  - the score dot reads a pred mask and an fp32 fill, [B heads, S, S], 5 B per score more than unrolled or in
//    the recompute (gemm_fusion_dot.48 of m1_none), both broadcast once before the loop.
TEST(XlaAttention, ScannedForwardCastsStacksAndMasks) {
  const double F = 2048, weights = 4 * D * D + 3 * D * F + 2 * D, T = B * S, scores = B * H * S * S;
  auto none = kernels(jax_graph(8, true, "none"));
  auto dots = kernels(jax_graph(8, true, "save_dots"));
  auto unrolled = kernels(jax_graph(8, false, "none"));
  for (auto* k : {&none, &dots}) {
    EXPECT_EQ((*k)["forward.weights.cast"].count, L);
    EXPECT_DOUBLE_EQ((*k)["forward.weights.cast"].bytes, L * weights * (4 + a));
  }
  EXPECT_EQ(unrolled["forward.weights.cast"].count, 0);
  // The stacks: the bf16 weights are copied in (read and write) and sliced out; the policy keeps none of them.
  auto none_copy = none["forward.scan.stack_copy"].bytes / L, dots_copy = dots["forward.scan.stack_copy"].bytes / L;
  auto none_slice = none["backward.scan.stack_slice"].bytes / L;
  // The slice copies out the bf16 operands of the backward's GEMMs: Q, K, V, the attention output, the
  // probabilities, both normalized inputs, the SwiGLU product, and now the weights.
  EXPECT_DOUBLE_EQ(none_slice, 2 * a * (T * 6 * D + scores + T * F + weights));
  // Under a remat policy there is none: the compiled programs with one read the saved residuals in place out of their
  // stacks (no backward dynamic-slice fusions; m1_dots, m1_full, d4096_l8_dots, ...).
  EXPECT_EQ(dots["backward.scan.stack_slice"].count, 0);
  EXPECT_EQ(kernels(jax_graph(8, true, "full"))["backward.scan.stack_slice"].count, 0);
  // Every residual is copied into its stack as it is (read and write what scan.stack_init zeroes), but the
  // weights' stack is written from the fp32 weights: read 4 B, write 2 B (m1_none: fused_dynamic_update_slice.33-.37
  // take the f32 operand and convert).
  EXPECT_DOUBLE_EQ(none_copy * L, 2 * bytes_of(none, "scan.stack_init") + L * weights * (4 - a));
  EXPECT_DOUBLE_EQ(dots_copy * L, 2 * bytes_of(dots, "scan.stack_init"));
  // Each copy is an in-place update over its elements, which bounds it at the loop-index rate: the residuals' bf16
  // elements and, under no policy, the weights' (what the replay charges XLA's in-place update fusions).
  EXPECT_NEAR(dots["forward.scan.stack_copy"].loop_indices, bytes_of(dots, "scan.stack_init") / a,
              1e-6 * bytes_of(dots, "scan.stack_init"));
  EXPECT_NEAR(none["forward.scan.stack_copy"].loop_indices, bytes_of(none, "scan.stack_init") / a + L * weights,
              1e-6 * bytes_of(none, "scan.stack_init"));
  // ... and the stack holds a bf16 copy of each layer's weights from its forward until its backward.
  const OpGraph none_graph = jax_graph(8, true, "none");
  for (const auto& [policy, g] : {std::pair<const char*, OpGraph>{"none", none_graph}, {"save_dots", jax_graph(8, true, "save_dots")}}) {
    int stacked = 0, freed_in_backward = 0;
    for (std::size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensor_name(static_cast<TensorId>(t)).find("weights.cast.stacked") != std::string::npos) {
        ++stacked;
        EXPECT_DOUBLE_EQ(g.tensors[t].bytes, weights * a);
      }
    for (const auto& op : g.ops)
      for (TensorId t : op.frees)
        freed_in_backward += op.phase == Phase::backward && g.tensor_name(t).find("weights.cast.stacked") != std::string::npos;
    EXPECT_EQ(stacked, std::string(policy) == "none" ? L : 0) << policy;
    EXPECT_EQ(freed_in_backward, stacked) << policy;
  }
  // The softmax with the scores kept: 8 + 4 + 6 B per score and one fp32 statistic per row each.
  EXPECT_EQ(none["forward.attn_scores.softmax.exp"].count, L);
  EXPECT_DOUBLE_EQ(none["forward.attn_scores.softmax.exp"].bytes, L * (8 * scores + 4 * B * H * S));
  EXPECT_DOUBLE_EQ(none["forward.attn_scores.softmax.reduce"].bytes, L * (4 * scores + 4 * B * H * S));
  EXPECT_DOUBLE_EQ(none["forward.attn_scores.softmax"].bytes, L * ((4 + a) * scores + 4 * B * H * S));
  // ... recomputed: one fusion in the forward, fp32 in and bf16 out, nothing more.
  EXPECT_EQ(dots["forward.attn_scores.softmax.exp"].count, 0);
  EXPECT_DOUBLE_EQ(dots["forward.attn_scores.softmax"].bytes, L * (4 + a) * scores);
  EXPECT_DOUBLE_EQ(dots["forward.mlp_act"].bytes, L * 3 * T * F * a);
  // The score dot's mask operands: 5 B per score in the scanned forward only, broadcast once.
  EXPECT_DOUBLE_EQ(dots["forward.attn_scores.qk"].bytes - dots["recompute.attn_scores.qk"].bytes, L * 5 * scores);
  EXPECT_DOUBLE_EQ(none["forward.attn_scores.qk"].bytes - unrolled["forward.attn_scores.qk"].bytes, L * 5 * scores);
  EXPECT_EQ(k_count(dots, "attn_scores.mask_init"), 2);  // a pred fill and an fp32 fill
  EXPECT_EQ(k_count(unrolled, "attn_scores.mask_init"), 0);
  // (A flash kernel masks inside itself: no operands.)
  EXPECT_EQ(k_count(kernels(jax_text_graph("recompute: none, attention: flash")), "mask_init"), 0);
  int fills = 0;
  for (const auto& [name, e] : dots) {
    if (name.find("attn_scores.mask_init.") == std::string::npos) continue;
    const bool pred = name.find("mask_init.pred") != std::string::npos;
    EXPECT_DOUBLE_EQ(e.bytes, (pred ? 1 : 4) * scores) << name;
    EXPECT_DOUBLE_EQ(e.loop_indices, static_cast<double>(static_cast<float>(scores))) << name;
    ++fills;
  }
  EXPECT_EQ(fills, 2);
}

// The scanned backward as XLA compiles it (every scanned compiled H200 step; docs/decisions.md, "The scanned
// backward as XLA compiles it"):
//  - each layer's weight gradients written into fp32 stacks: read the wgrad's bf16 output, write fp32, 6 B per
//    weight (loop_dynamic_update_slice_fusion x5 per layer); none unrolled;
//  - with one fused QKV weight, dQ, dK, dV joined into its layout twice under a fused attention kernel too
//    (m1_*_cudnn, l7b16_*_mflash: input_concatenate_fusion, wrapped_concatenate); none with three projections;
//  - the dense SwiGLU's backward in units of T·F bf16: 9 with no policy, 6 with the gate and up kept (the product
//    recomputed inside the fusion, no recompute kernel of its own), 7 after a recompute of the product under full;
//  - the kept scores are read by the softmax backward alone (no third read charged to the next kernel).
TEST(XlaAttention, ScannedBackwardStacksGradientsJoinsQkvAndFusesTheSwiglu) {
  const double F = 2048, weights = 4 * D * D + 3 * D * F + 2 * D, T = B * S, tf = T * F * a;
  auto scan = kernels(jax_text_graph("recompute: save_dots, attention: flash, scan_layers: true"));
  auto unrolled = kernels(jax_text_graph("recompute: save_dots, attention: flash, scan_layers: false"));
  EXPECT_EQ(scan["backward.scan.grad_stack"].count, L);
  EXPECT_DOUBLE_EQ(scan["backward.scan.grad_stack"].bytes, L * weights * (a + 4));
  EXPECT_EQ(k_count(unrolled, "grad_stack"), 0);
  // The fused QKV's joins, each a read and a write of [T, 3D] bf16, scanned or not; none for three projections.
  for (auto* k : {&scan, &unrolled}) {
    EXPECT_DOUBLE_EQ((*k)["backward.attn.dqkv_concat"].bytes, L * 2 * T * 3 * D * a);
    EXPECT_DOUBLE_EQ((*k)["backward.attn.dqkv_wgrad_layout"].bytes, L * 2 * T * 3 * D * a);
  }
  auto apart = kernels(jax_text_graph("recompute: save_dots, attention: flash, fused_qkv: false"));
  EXPECT_EQ(k_count(apart, "dqkv"), 0);
  // The SwiGLU backward by policy, and the product's recompute.
  auto none = kernels(jax_text_graph("recompute: none, attention: flash"));
  auto full = kernels(jax_text_graph("recompute: full, attention: flash"));
  EXPECT_DOUBLE_EQ(none["backward.mlp_act.bwd"].bytes, L * 9 * tf);
  EXPECT_DOUBLE_EQ(scan["backward.mlp_act.bwd"].bytes, L * 6 * tf);
  EXPECT_EQ(scan["recompute.mlp_act"].count, 0);
  EXPECT_DOUBLE_EQ(full["backward.mlp_act.bwd"].bytes, L * 7 * tf);
  EXPECT_DOUBLE_EQ(full["recompute.mlp_act"].bytes, L * 3 * tf);
  // Materialized, no policy: the kernel after the softmax backward (the wgrad layout of dQKV) moves its own bytes.
  auto kept = kernels(jax_graph(8, true, "none"));
  EXPECT_DOUBLE_EQ(kept["backward.attn_scores.dqkv_wgrad_layout"].bytes, L * 2 * T * 3 * D * a);
}

// Grouped-query, scanned, materialized attention (calibration/data/h200-2026-12-04-gqa-compile, 7 shapes x 3 policies
// compiled on the H200, and the measured g1_dots, g4k_l4_full): under a saving policy XLA runs the softmax backward
// twice, once per layout of dS its two dots read; under full remat once, after transposing the recomputed bf16
// probabilities into both layouts (read and write each). Multi-head attention does neither.
TEST(XlaAttention, GroupedQueryScoreGradientLayouts) {
  const double scores = B * H * S * S;
  auto dots = kernels(jax_graph(2, true, "save_dots"));
  auto full = kernels(jax_graph(2, true, "full"));
  auto mha = kernels(jax_graph(8, true, "save_dots"));
  EXPECT_EQ(dots["backward.attn_scores.softmax.bwd.kv_layout"].count, L);
  EXPECT_DOUBLE_EQ(dots["backward.attn_scores.softmax.bwd.kv_layout"].bytes, dots["backward.attn_scores.softmax.bwd"].bytes);
  EXPECT_DOUBLE_EQ(dots["backward.attn_scores.softmax.bwd"].bytes, L * scores * (4 + a + 4));
  EXPECT_EQ(k_count(dots, "probs_layout"), 0);
  EXPECT_EQ(k_count(full, "softmax.bwd.kv_layout"), 0);
  EXPECT_DOUBLE_EQ(full["recompute.attn_scores.probs_layout"].bytes, L * 2 * scores * a);
  EXPECT_DOUBLE_EQ(full["recompute.attn_scores.probs_dk_layout"].bytes, L * 2 * scores * a);
  EXPECT_EQ(k_count(mha, "kv_layout") + k_count(mha, "probs_layout"), 0);
  EXPECT_EQ(k_count(kernels(jax_graph(2, false, "save_dots")), "softmax.bwd.kv_layout"), 0);  // unrolled: not measured
}

// Review of the scanned backward: fused_qkv is echoed in the scenario JSON (the sweep cache key and the report's
// rerunnable scenario) only when false; three projections drop the materialized path's joins too; the product the
// SwiGLU backward recomputes has no recompute buffer; without donation the weights' stack is five buffers, which
// buffer assignment places inside the moments' outputs (one buffer of the whole layer fits none of them).
TEST(XlaAttention, ScannedBackwardReviewFixes) {
  const auto fused = jax_text_scenario("attention: flash"), apart = jax_text_scenario("attention: flash, fused_qkv: false");
  EXPECT_FALSE(sim::scenario_to_json(fused)["training"].contains("fused_qkv"));
  EXPECT_EQ(sim::scenario_to_json(apart)["training"]["fused_qkv"], false);
  EXPECT_EQ(k_count(kernels(jax_text_graph("attention: materialized, recompute: save_dots, fused_qkv: false")), "dqkv"), 0);
  auto tensor_bytes = [](const OpGraph& g, const std::string& part, int* count) {
    double b = 0;
    for (std::size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensor_name(static_cast<TensorId>(t)).find(part) != std::string::npos) {
        b += g.tensors[t].bytes;
        ++*count;
      }
    return b;
  };
  int n = 0;
  tensor_bytes(jax_text_graph("attention: flash, recompute: save_dots"), "mlp_act.recomputed", &n);
  EXPECT_EQ(n, 0);
  tensor_bytes(jax_text_graph("attention: flash, recompute: full"), "mlp_act.recomputed", &n);
  EXPECT_EQ(n, L);
  n = 0;
  const double F = 2048, weights = 4 * D * D + 3 * D * F + 2 * D;
  // (Here the three SwiGLU arrays' stacks land in moment outputs; the attention's find theirs taken.)
  const double left = tensor_bytes(jax_text_graph("attention: flash, recompute: none, donate_state: false"),
                                   "weights.cast.stacked", &n);
  EXPECT_EQ(n, L);
  EXPECT_NEAR(left, L * weights * a * (4 * D * D) / (4 * D * D + 3 * D * F), 1.0);  // the q/k/v and o stacks' share
  n = 0;
  EXPECT_DOUBLE_EQ(tensor_bytes(jax_text_graph("attention: flash, recompute: none, donate_state: true"),
                                "weights.cast.stacked", &n), L * weights * a);
}

// XLA issues host-offload copies on the compute stream (they serialize with the kernels): the breakdown counts them as
// exposed offload, as the HLO replay of the same measured step does, not as compute (before 2026-12-04 the scenario
// path reported 0 s of exposed offload for the H200 m1_off step, 0.51 s in its HLO replay: an audit's finding).
TEST(XlaAttention, OffloadCopiesOnTheComputeStreamAreExposedOffload) {
  const auto sc = sim::load_scenario(std::string(RACKSIM_SOURCE_DIR) + "/scenarios/validation/h200/reference-m1_off.yaml");
  const auto r = sim::simulate(sc);
  double copies = 0;
  for (std::size_t i = 0; i < r.graph.ops.size(); ++i) {
    const auto& op = r.graph.ops[i];
    if ((op.kind == OpKind::copy_d2h || op.kind == OpKind::copy_h2d) && op.stream == StreamKind::compute)
      copies += r.replay.ops[i].end_s - r.replay.ops[i].start_s;
  }
  ASSERT_GT(copies, 0.3);
  EXPECT_NEAR(r.replay.breakdown.exposed_offload_s, copies, 1e-9);
}

// Unrolled over weights stacked over the layers ([L, ...], a Python loop over one stacked tree), under a remat
// policy: the checkpointed layer's inputs are its backward's residuals, so XLA slices each of the layer's fp32 weight
// arrays out of its stack into a buffer of its own in the forward (l7b16_b2_mflash: wrapped_slice.2-.6 into remat2's
// operands) and keeps it until the backward's cast. Read 4 B and write 4 B per weight; held 4 B per weight from the
// layer's forward to its backward, so a step's peak grows by L x the layer's weights x 4 B. Not scanned (lax.scan
// reads the stack in place), not without a policy (the slice fuses into the forward's cast), not with one array per
// layer (MaxText's scan_layers: false).
TEST(XlaAttention, UnrolledStackedWeightsAreSlicedForTheCheckpointedLayer) {
  const double F = 2048, weights = 4 * D * D + 3 * D * F + 2 * D;
  const auto sliced = jax_text_graph("recompute: save_dots, attention: materialized, scan_layers: false, "
                                     "stacked_layer_params: true");
  const auto k = kernels(sliced);
  EXPECT_EQ(k.at("forward.weights.slice").count, L);
  EXPECT_DOUBLE_EQ(k.at("forward.weights.slice").bytes, L * weights * 8);
  double held = 0;
  for (std::size_t t = 0; t < sliced.tensors.size(); ++t)
    if (sliced.tensor_name(static_cast<TensorId>(t)).ends_with("weights.slice")) held += sliced.tensors[t].bytes;
  EXPECT_DOUBLE_EQ(held, L * weights * 4);
  // The slice dies at the backward's cast, its last reader.
  int freed = 0;
  for (std::size_t i = 0; i < sliced.ops.size(); ++i)
    for (TensorId t : sliced.ops[i].frees) {
      if (!sliced.tensor_name(t).ends_with("weights.slice")) continue;
      ++freed;
      EXPECT_TRUE(sliced.op_name(static_cast<OpId>(i)).ends_with("weights.cast")) << sliced.op_name(static_cast<OpId>(i));
    }
  EXPECT_EQ(freed, L);
  EXPECT_EQ(k_count(kernels(jax_graph(8, true, "save_dots")), "weights.slice"), 0);
  EXPECT_EQ(k_count(kernels(jax_text_graph("recompute: none, scan_layers: false, stacked_layer_params: true")),
                    "weights.slice"), 0);
  // Unrolled, one array per layer unless the scenario says the layers are stacked.
  const std::string unrolled = "recompute: full, scan_layers: false, attention: flash";
  EXPECT_EQ(k_count(kernels(jax_text_graph(unrolled)), "weights.slice"), 0);
  EXPECT_EQ(k_count(kernels(jax_text_graph(unrolled + ", stacked_layer_params: false")), "weights.slice"), 0);
  // In the step (donated state: nothing packed into outputs) the peak lies in the last layer's backward, after the
  // cast freed its own slice: the peak with the slices is the one without plus the other L - 1 layers'.
  const double with =
      sim::simulate(jax_text_scenario(unrolled + ", stacked_layer_params: true")).report["peak_memory_bytes"].get<double>();
  const double without = sim::simulate(jax_text_scenario(unrolled)).report["peak_memory_bytes"].get<double>();
  EXPECT_NEAR(with - without, (L - 1) * weights * 4, 1e-6 * with);
  // Under fp8 the slice's last readers are the recompute's weight quantizations: it dies with the recompute.
  const auto fp8 = jax_text_graph(unrolled + ", stacked_layer_params: true, precision: fp8");
  int fp8_freed = 0;
  for (std::size_t i = 0; i < fp8.ops.size(); ++i)
    for (TensorId t : fp8.ops[i].frees)
      if (fp8.tensor_name(t).ends_with("weights.slice")) {
        ++fp8_freed;
        EXPECT_EQ(fp8.ops[i].phase, Phase::recompute) << fp8.op_name(static_cast<OpId>(i));
      }
  EXPECT_EQ(fp8_freed, L);
  // Under FSDP per use the slice is of the rank's shard.
  const auto fsdp = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 2}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, vocab: 4096, ffn: swiglu}\n"
      "training: {seq_len: 512, global_batch: 4, micro_batch: 2, recompute: save_dots, framework: jax, scan_layers: false,\n"
      "           stacked_layer_params: true, parallelism: {dp: 2}, optimizer_sharding: fsdp}\n",
      "f.yaml");
  const auto kf = kernels(build_training_graph(fsdp.model, fsdp.training, fsdp.system.spec));
  ASSERT_GT(kf.at("forward.weights.slice").count, 0);
  EXPECT_DOUBLE_EQ(kf.at("forward.weights.slice").bytes / kf.at("forward.weights.slice").count, weights / 2 * 8);
  // The report's scenario says the key when the scenario gave it, and only then.
  const auto given = sim::simulate(jax_text_scenario(unrolled + ", stacked_layer_params: true"));
  EXPECT_EQ(given.report["scenario"]["training"]["stacked_layer_params"], true);
  EXPECT_FALSE(sim::simulate(jax_text_scenario(unrolled)).report["scenario"]["training"].contains("stacked_layer_params"));
}

// lax.scan runs over stacked arrays: one array per layer under scan is an input error at the key (scan_layers' default).
TEST(XlaAttention, PerLayerParametersCannotBeScanned) {
  const std::string yaml =
      "system: {preset: h200-sxm, gpus: 1}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, vocab: 4096, ffn: swiglu}\n"
      "training: {seq_len: 512, global_batch: 2, micro_batch: 2, framework: jax,\n"
      "           stacked_layer_params: false}\n";
  const std::string err = racksim::testing::scenario_error_text(yaml, "p.yaml");
  EXPECT_NE(err.find("p.yaml:4:34: error: training.stacked_layer_params: false is one array per layer"), std::string::npos)
      << err;
  EXPECT_NE(err.find("lax.scan runs over arrays stacked over the layers"), std::string::npos) << err;
  // Megatron mode ignores the key, and says so.
  const auto megatron = sim::load_scenario_text(
      "system: {preset: h200-sxm, gpus: 1}\n"
      "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, vocab: 4096, ffn: swiglu}\n"
      "training: {seq_len: 512, global_batch: 2, micro_batch: 2, stacked_layer_params: false}\n",
      "n.yaml");
  EXPECT_EQ(megatron.training.other_framework_keys, (std::vector<std::string>{"stacked_layer_params"}));
  EXPECT_EQ(racksim::testing::scenario_error_text(
                "system: {preset: h200-sxm, gpus: 1}\n"
                "model: {layers: 2, hidden: 512, ffn_hidden: 2048, heads: 8, vocab: 4096, ffn: swiglu}\n"
                "training: {seq_len: 512, global_batch: 2, micro_batch: 2, stacked_layer_params: false}\n",
                "m.yaml"),
            "");
}
