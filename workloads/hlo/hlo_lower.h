// Lowering of a parsed HLO module to racksim's OpGraph on the schedule XLA chose: the entry
// computation's instruction order (with is_scheduled=true it is XLA's schedule), while loops
// unrolled by their trip counts, one kernel per fusion / library call, async pairs on their
// own streams, host-memory (S(5)) traffic as host copies, collectives on the communication
// stream, and buffer live ranges as allocations and frees. See docs/architecture.md,
// "The HLO importer", for every convention.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "workloads/hlo/hlo_module.h"
#include "workloads/op_graph.h"

namespace racksim::workloads::hlo {

struct LowerOptions {
  int gpus = 1;                        // devices of the job (for collectives over "all devices")
  // The unrolled program may not exceed this many ops: about 640 bytes of memory and 16 us of
  // replay each, so 1.3 GB and half a minute (docs/decisions.md, "Input limits").
  std::size_t max_ops = 2'000'000;
};

struct LoopInfo {
  std::string name;
  int64_t trip_count = 1;
  std::string source;  // "known_trip_count", "condition", "assumed"
};

struct ImportSummary {
  std::string module_name;
  bool scheduled = false;
  int module_devices = 1;                     // replica_count * num_partitions
  std::map<std::string, int> opcodes;         // instruction count per opcode, all computations
  std::map<std::string, int> custom_calls;    // per custom_call_target
  std::map<std::string, int> unknown;         // unmodelled opcode / target -> instances in the step
  std::vector<LoopInfo> loops;
  std::vector<std::string> notes;             // modelling notes for the report

  // Over the unrolled step (one device):
  std::size_t kernels = 0, collectives = 0, host_copies = 0;
  double flops = 0;                  // every kernel's FLOPs (tensor + vector)
  double tensor_flops = 0;
  double recompute_tensor_flops = 0;
  double forward_attention_flops = 0;  // batched dots / fused attention of the forward pass
  double hbm_bytes = 0;
  double host_bytes = 0;
  double serialized_host_bytes = 0;  // host transfers that run on the default (compute) stream
  // The same with every loop body counted once and library calls (custom-calls) without FLOPs:
  // the convention of XLA's own cost analysis (compiled.cost_analysis()), for comparison.
  double xla_convention_flops = 0;
  double xla_convention_bytes = 0;
  double argument_bytes = 0, output_bytes = 0;
  std::size_t temps_in_outputs = 0;  // temporaries placed in an output's allocation (see finish_memory)
  std::size_t command_buffer_executions = 0;  // segments (one CUDA graph launch each)
  double rerecorded_buffer_refs = 0;          // buffer references re-recorded per step (no donation)

  // Inferred for the report.
  double params = 0;                 // model parameters (0 if not inferred)
  std::string params_source;
  double tokens_per_device = 0;      // tokens of one step on one device (0 if not inferred)
  std::string tokens_source;
  // Distinct shards of the token argument over the module's devices, from its sharding (mesh axes or tile
  // dimensions it is split over): module_devices / token_shards devices hold the same tokens. 0: not stated.
  double token_shards = 0;
  double model_flops_per_device = 0; // 6·N·tokens + attention, or the non-recompute matmul FLOPs
  std::string model_flops_source;
  bool fp8 = false;                  // any fp8 tensor-core work
  int tp = 1;                        // size of consecutive collective groups smaller than the job
};

struct ImportResult {
  OpGraph graph;
  ImportSummary summary;
};

// Throws input::InputError (with the instruction's file:line:col) for a module that cannot be
// lowered (a recursive call, a trip count beyond reason, an impossible tuple index, ...).
ImportResult lower_module(const Module& module, const LowerOptions& options);

}  // namespace racksim::workloads::hlo
