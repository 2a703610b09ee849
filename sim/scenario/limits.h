// How much work simulate() does for a scenario, and the bound on it (docs/decisions.md, "Input
// limits"). The step's graph holds every layer of every replayed micro-step (all pipeline
// stages), about 20 KB of memory and 0.3 ms of replay each; a step of many micro-steps is
// replayed at two lengths only (the steady-state plan), so the work is bounded by the model and
// the pipeline, not the batch.
#pragma once

#include <cstdint>
#include <optional>

#include "input/yaml_reader.h"
#include "workloads/model_spec.h"
#include "workloads/training_config.h"

namespace racksim::sim {

// Gradient-accumulation micro-steps repeat the same work: once the pipeline has filled, every
// further round of micro-steps adds the same time. A step of many micro-steps is simulated at m1 and
// m1 + unit micro-steps and extrapolated (simulate.cpp, which moves the window later when it is not
// steady yet). The plan (docs/decisions.md):
//   pp = 1:        2 and 4 micro-steps: the first waits for the parameter gathers, the last reduces the
//                  gradients; a pair of middle ones is the period (MoE exchanges overlapped within
//                  1F1B pairs alternate between two patterns).
//   1F1B, pp a multiple of 4: pp and 3·pp/2, both runs past the first stage's warm-up (pp - 1
//                  forwards); half a round is the period. A run of pp/2 micro-steps is all warm-up: it has
//                  no steady 1F1B phase, whose synchronous exchanges make a stage wait for its neighbour's
//                  send in every micro-step, and the window check cannot see the difference (no rank's
//                  activity outgrows the step). From pp/2 and pp a dense step of even stages whose hops
//                  mix NVLink and the NIC was 0.78% short of --exact and its bubble half of it (tp 2, pp 8
//                  on H100; an invariant audit, 2026-12-08); MoE steps with their exchanges overlapped in
//                  1F1B pairs, whose pairs a run of pp/2 has only where the warm-up ends, and DeepSeek-V3's
//                  uneven stages under full recompute (+0.5% and +0.7% at pp 4 and 8) missed the same way.
//                  The later window costs 5·pp/2 replayed micro-steps instead of 3·pp/2.
//   1F1B, other pp: pp and 2·pp: every stage's warm-up (pp - 1 - rank forwards) and a round of pp
//                  micro-steps as the period (half a round would be odd, or for pp 2 a run of one
//                  micro-step, which both gathers the parameters and reduces the gradients).
//   interleaved:   2·pp and 3·pp (the schedule needs multiples of pp): the first stage's warm-up,
//                  (vp + 1)·pp - 2 chunks, fits with a steady phase after it.
// Empty when the step has no more micro-steps than the longer run: it is replayed whole.
struct SteadyState {
  int m1 = 0, unit = 1;
};
std::optional<SteadyState> steady_state_plan(const workloads::TrainingConfig& t);

// Layers x micro-steps that simulate() builds and replays (both lengths of a steady-state plan).
int64_t replayed_layer_steps(const workloads::ModelSpec& m, const workloads::TrainingConfig& t);

// The most layer-steps one simulation may replay: about 1.4 GB and 20 s. Llama 3 405B on 16,384
// GPUs (126 layers, pp 16, vp 2) replays 2,016 (16 micro-steps), 10,080 with a long step (32 and
// 48 micro-steps); 126 layers at pp 64, vp 1, 20,160 (64 + 96).
inline constexpr int64_t kMaxReplayedLayerSteps = 65'536;

// The largest model (10^15 parameters: a thousand times Llama 3 405B) and step (10^12 tokens: a
// hundred thousand times Llama 3's 16M) racksim simulates: beyond, bytes and FLOPs leave the
// range the report prints exactly.
inline constexpr double kMaxParams = 1e15;
inline constexpr double kMaxTokensPerStep = 1e12;

// Records an error when the model (at `model`, the scenario's model node), the tokens of a step (at `training`'s
// global_batch, which with seq_len makes them) or the step's replay (at model.layers) are beyond these bounds.
void check_replay_size(const workloads::ModelSpec& m, const workloads::TrainingConfig& t, const input::Node& model,
                       const input::Node& training);

}  // namespace racksim::sim
