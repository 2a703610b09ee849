// The HLO importer's entry point: a compiled XLA program (the HLO text of
// jax.jit(step).lower(...).compile(), optionally gzip-compressed) as a workload for the run layer.
#pragma once

#include <string>

#include "workloads/imported_workload.h"

namespace racksim::workloads::hlo {

// Parses and lowers the module for a job of `gpus` GPUs (0: the devices it was compiled for).
// Tokens per step count the data-parallel replicas (gpus / tp); the `hlo` section describes the
// module (opcodes, loops, FLOPs, bytes, what was inferred and from where). Throws input::InputError.
ImportedWorkload import_hlo(const std::string& path, int gpus);

}  // namespace racksim::workloads::hlo
