// The pipeline schedule, a pure function of the parallelism: which layers each virtual stage holds, and
// in what order a pipeline rank issues the forward and backward chunks of its micro-batches. The graph
// builder emits each entry's ops in this order; the bubble is not computed here, it follows from the
// dependencies between ranks the builder adds. A new schedule is a new function here (docs/architecture.md,
// "How to add a pipeline schedule").
#pragma once

#include <vector>

#include "workloads/training_config.h"

namespace racksim::workloads {

// One chunk a pipeline rank issues: the forward or backward of one micro-batch through one model chunk
// (virtual stage chunk·pp + rank).
struct ScheduleEntry {
  bool forward = true;
  int micro = 0;        // micro-batch, 0 .. micro_steps - 1
  int chunk = 0;        // model chunk on this rank, 0 .. vp - 1
  // A forward/backward pair of the steady 1F1B phase (the forward of one micro-batch and the backward of
  // another), whose EP exchanges Megatron-Core's --overlap-moe-expert-parallel-comm runs beside each other.
  bool paired = false;
  bool operator==(const ScheduleEntry&) const = default;
};

// Megatron-LM's warm-up forwards of rank `rank` (megatron/core/pipeline_parallel/schedules.py):
// pp - rank - 1 with one chunk per rank (1F1B), (pp - rank - 1)·2 + (vp - 1)·N interleaved, N the micro-batches
// per group (`group`, 0: Megatron's default, pp; get_pp_rank_microbatches at d98e8a64); at most
// every chunk (micro_steps · vp). 0 without a pipeline. `ep_overlap` (Megatron-Core's combined 1F1B,
// --overlap-moe-expert-parallel-comm) adds one, "to ensure the forward and backward computations are
// independent in all 1f1b steps" (get_pp_rank_microbatches at d98e8a64). The builder asks for it where it issues
// Megatron-Core's combined order (an interleaved pipeline), not for the DualPipe-like overlap of vp 1.
int warmup_forwards(int pp, int vp, int micro_steps, int rank, bool ep_overlap = false, int group = 0);

// Rank `rank`'s issue order under Megatron's 1F1B (vp = 1) or interleaved (vp > 1) schedule: the warm-up
// forwards, then forward/backward pairs, then the cool-down backwards. Without a pipeline (pp = 1) each
// micro-batch's backward follows its forward, and the overlap pairs the backward of i with the forward
// of i + 1 (as Megatron-Core does). Interleaved: Megatron's schedule table (get_schedule_table at d98e8a64):
// micro-batches in groups of N (`group`; 0: pp), each group through chunk 0, then chunk 1, ..., the last group
// the rest of the micro-batches; the k-th backward takes the k-th entry with the chunks reversed. Megatron needs
// pp <= N <= micro_steps and the last group empty or of at least pp; the scenario loader checks it.
std::vector<ScheduleEntry> pipeline_schedule(int pp, int vp, int micro_steps, int rank, bool ep_overlap = false,
                                             int group = 0);

// The first decoder layer of each of `vstages` virtual stages and the end (size vstages + 1). Evenly when
// the layers divide; otherwise the first and the last stage (which also hold the embedding and the
// output layer) get fewer, as the Llama 3 405B layout does (126 layers on 16 stages: 7 on the ends, 8 in
// between). An uneven `layout` (Megatron's --decoder-first/last-pipeline-num-layers) sets the ends and
// shares the rest evenly (the scenario loader checks that it divides).
std::vector<int> split_layers(int layers, int vstages, const PipelineLayout& layout);
// The same for pp ranks of vp virtual stages each (virtual stage v = chunk·pp + rank), where the layout may count the
// first and last rank's layers (PipelineLayout::by_rank: each of those ranks' chunks gets its count / vp, every
// other rank's chunk (layers - ends) / (middle ranks) / vp, as Megatron-Core builds them). The scenario checks
// that these divide.
std::vector<int> split_layers(int layers, int pp, int vp, const PipelineLayout& layout);

}  // namespace racksim::workloads
