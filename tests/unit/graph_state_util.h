// What a rank holds for the whole step in a built training graph: tests that check per-GPU state against closed forms
// (Megatron's bytes per parameter, FSDP's shards).
#pragma once

#include "workloads/op_graph.h"

namespace racksim::testing {

// Bytes of the step-long tensors (weights, gradients, optimizer state, library buffers) of simulated rank `rank`.
inline double resident_state(const workloads::OpGraph& g, int rank = 0) {
  double b = 0;
  for (workloads::TensorId t : g.resident)
    if (g.tensors[t].rank == rank) b += g.tensors[t].bytes;
  return b;
}

}  // namespace racksim::testing
