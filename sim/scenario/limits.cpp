#include "sim/scenario/limits.h"

#include <fmt/format.h>

#include <algorithm>

namespace racksim::sim {

std::optional<SteadyState> steady_state_plan(const workloads::TrainingConfig& t) {
  const int pp = t.parallelism.pp, vp = t.parallelism.vp;
  // FSDP regathering per micro-batch under a pipeline: a layer gathers again after every backward but its last, and
  // the runs of m1 and m1 + unit micro-steps do not share the steady pattern (at pp 16, vp 1 the extrapolated bubble
  // and exposed communication were 0.6 s off --exact with the step right): replayed whole.
  // Reducing its gradients per micro-batch is replayed whole too (the extrapolation was never checked against it).
  // (Megatron mode only: in JAX mode both keys do nothing.)
  if (t.fsdp_regathers_per_microbatch() || t.fsdp_reduces_per_microbatch()) return std::nullopt;
  SteadyState plan;
  if (pp == 1)
    plan = {2, 2};
  else if (vp == 1 && pp % 4 == 0)  // half a round, from the first stage's warm-up on: limits.h
    plan = {pp, pp / 2};
  else if (vp == 1)
    plan = {pp, pp};
  else  // the interleaved schedule repeats every group of N micro-batches (N = pp unless stated)
    plan = {2 * t.pipeline.group(pp), t.pipeline.group(pp)};
  // (A step of more micro-steps than the longer run but no more than the two runs keeps the window: a sweep's points
  // of other batches share its runs, and replaying such steps whole made the 10,000-point sweep 26% slower.)
  if (t.micro_steps() <= plan.m1 + plan.unit) return std::nullopt;
  return plan;
}

int64_t replayed_layer_steps(const workloads::ModelSpec& m, const workloads::TrainingConfig& t) {
  const auto plan = steady_state_plan(t);
  // (simulate() replays such a step whole where its window would not fit the bound: the fewer of the two counts.)
  const int64_t steps = plan ? std::min<int64_t>(t.micro_steps(), 2 * static_cast<int64_t>(plan->m1) + plan->unit)
                             : t.micro_steps();
  return static_cast<int64_t>(t.graph_layers(m.layers)) * steps;
}

void check_replay_size(const workloads::ModelSpec& m, const workloads::TrainingConfig& t, const input::Node& model,
                       const input::Node& training) {
  const double params = workloads::total_params(m);
  if (!(params <= kMaxParams)) {
    model.error(fmt::format("the model has {:.3g} parameters, more than the {:.0e} racksim simulates (docs/decisions.md, "
                            "\"Input limits\"); check hidden, ffn_hidden, vocab and the expert sizes",
                            params, kMaxParams));
    return;
  }
  const double tokens = static_cast<double>(t.global_batch) * t.seq_len;
  if (tokens > kMaxTokensPerStep) {
    training.child("global_batch").error(fmt::format("training.global_batch x training.seq_len = {:.3g} tokens per step, more than the {:.0e} "
                            "racksim simulates (docs/decisions.md, \"Input limits\")",
                            tokens, kMaxTokensPerStep));
    return;
  }
  if (t.micro_batch < 1 || t.parallelism.dp < 1 || t.parallelism.pp < 1 || t.parallelism.vp < 1) return;
  const int64_t work = replayed_layer_steps(m, t);
  if (work <= kMaxReplayedLayerSteps) return;
  const auto plan = steady_state_plan(t);
  const std::string steps =
      plan ? fmt::format("({} + {}) micro-steps (the two lengths simulated at pp {}, vp {})", plan->m1,
                         plan->m1 + plan->unit, t.parallelism.pp, t.parallelism.vp)
           : fmt::format("{} micro-steps", t.micro_steps());
  model.child("layers").error(fmt::format(
      "the step is too large to simulate: {} layers x {} = {} layer-steps, more than {} (about 20 KB of memory "
      "each; docs/decisions.md, \"Input limits\"); use fewer layers, pipeline stages or micro-steps",
      t.graph_layers(m.layers), steps, work, kMaxReplayedLayerSteps));
}

}  // namespace racksim::sim
