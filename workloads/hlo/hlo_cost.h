// What one HLO instruction costs when it runs as a GPU kernel (or a host copy): FLOPs (tensor
// core or CUDA core), exponentials, and the bytes it reads and writes, split by memory space.
//
// Conventions (docs/architecture.md, "The HLO importer"):
// - A fusion is one kernel. It reads each operand once, except an operand that the fused
//   computation only slices (dynamic-slice, slice, gather): then only the slices; and an
//   operand that the fusion updates in place (the buffer of a root dynamic-update-slice or
//   scatter): then nothing but the update is read or written. It writes its result.
// - FLOPs: 2·M·N·K per dot (batch included), 2·output·(kernel window·input features) per
//   convolution, one per output element of an element-wise op, one per input element of a
//   reduction. Transcendental element-wise ops also count as special-function (SFU) operations.
// - cuBLAS custom calls: dimensions from gemm_backend_config's dot_dimension_numbers and the
//   operand shapes; the workspace result is not traffic.
// - cuDNN fused attention: 4·B·H·Sq·Sk·D forward (QKᵀ and PV), 10·B·H·Sq·Sk·D backward (QKᵀ
//   recomputed, dV, dP, dQ, dK), halved with a causal mask; B·H·Sq·Sk exponentials each way.
// - Anything unknown: no FLOPs, operand + result bytes (a conservative memory-bound kernel).
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hardware_models/collective_op.h"
#include "hardware_models/system_spec.h"
#include "workloads/hlo/hlo_module.h"

namespace racksim::workloads::hlo {

struct OpCost {
  double flops = 0;          // all arithmetic (tensor + vector)
  double tensor_flops = 0;   // of which on tensor cores (dots, convolutions, attention)
  double sfu_ops = 0;        // transcendental element-wise operations
  double bytes_read = 0;     // HBM
  double bytes_written = 0;  // HBM
  double host_read = 0;      // bytes read from host memory (S(5)) over the host link
  double host_written = 0;   // bytes written to host memory (S(5)) over the host link
  sim::Dtype dtype = sim::Dtype::bf16;  // tensor-core input type
  bool fp32_vector = false;           // f32 dots at HIGHEST precision run on CUDA cores
  std::array<double, 3> gemm_mnk{};   // first GEMM's M, N, K (zeros if none)
  int gemm_batch = 1;
  double batched_dot_flops = 0;  // dots with batch dimensions (materialized attention)
  double attention_flops = 0;    // cuDNN fused attention
  bool attention_forward = false;
  bool attention_causal = false;
  double attention_seq = 0;      // key length of the fused attention
  // XLA's Triton block-level fusions (backend kind "__triton": softmax, norms, reductions) hold
  // each program's tile of every operand in registers: the operand bytes one thread holds.
  // 0 for every other kernel. The engine turns it into an occupancy bound (compute_model.h).
  double thread_bytes = 0;
  // XLA's loop emitter (kind=kLoop fusions; not a concatenate or scatter root, which have emitters
  // of their own): the output indices its threads cover, the element count of the root's (first)
  // output, or of the update for an in-place dynamic-update-slice root. The engine turns it into a
  // bound of so many indices a second (compute_model.h). 0 for every other kernel.
  double loop_indices = 0;
  bool unknown = false;          // opcode or custom-call target not modelled
  std::string unknown_what;
};

// Collective description taken from the instruction.
struct CollectiveInfo {
  bool is_collective = false;
  hw::CollectiveOp op = hw::CollectiveOp::all_reduce;  // when is_collective
  double operand_bytes = 0; // what this rank contributes
  double bytes = 0;         // nccl-tests size: the full buffer (gathered size for all-gather)
  int group_size = 0;       // 0: every device (empty replica_groups)
  bool consecutive = true;  // the first group holds consecutive device ids
  std::string invalid;      // why its replica groups cannot be read (empty: they can)
};

// An HLO input error at `inst` (file:line:column of the module): "HLO: MSG".
[[noreturn]] void fail_at(const Module& m, const Instruction& inst, const std::string& msg);

class CostModel {
 public:
  explicit CostModel(const Module& m) : m_(m) {}

  // Cost of `inst` (in a non-fused computation) run as one kernel. For async wrappers
  // (fusion-start, X-start with calls=) pass the start instruction.
  OpCost cost(const Computation& c, const Instruction& inst);

  // Which result leaves of `inst` reuse an operand's buffer (in-place updates): pairs of
  // (result leaf, operand index). For async starts the leaves are those of the start's output
  // element.
  std::vector<std::pair<int, int>> inplace_aliases(const Computation& c, const Instruction& inst);

  static CollectiveInfo collective(const Computation& c, const Instruction& inst, const Module& m);

  // Whether an opcode is one the importer knows (the full HLO opcode set).
  static bool known_opcode(const std::string& opcode);
  // Opcodes that are bookkeeping and launch no kernel.
  static bool is_free_opcode(const std::string& opcode);

 private:
  const Module& m_;
  std::map<const Computation*, std::pair<double, double>> flops_memo_;  // (flops, sfu)

  OpCost fusion_cost(const Computation& caller, const Instruction& inst, const Computation& fused);
  OpCost custom_call_cost(const Computation& c, const Instruction& inst);
  void add_instruction_flops(const Computation& c, const Instruction& inst, OpCost& out, int depth);
  double read_bytes_of_param(const Computation& fused, int param_index, double full_bytes, int depth);
};

// Element-wise opcodes (unary, binary, ternary) and the transcendental subset.
bool is_elementwise(const std::string& opcode);
bool is_transcendental(const std::string& opcode);

// "{1,0}" -> {1, 0}; tolerant (non-numbers skipped).
std::vector<int64_t> parse_int_list(const std::string& v);

// A mesh's axes, `mesh['x'=2,'y'=4]...` (names unquoted), major to minor, as XLA writes them in mesh-axes replica
// groups and named shardings: what is wrong with them, or an empty string.
std::string parse_mesh_axes(const std::string& v, std::vector<std::pair<std::string, int64_t>>& axes);

// The distinct tiles a sharding annotation splits an array of `rank` dimensions into: the product of the mesh axes
// its dimensions are sharded over ({mesh['data'=2,'fsdp'=8], [{'data', 'fsdp'}, {}]} -> 16), or of its first `rank`
// tile dimensions ({devices=[16,1]<=[16]} -> 16; any further ones replicate); {replicated} or {maximal ...} -> 1.
// 0 when the form is not one of these.
double sharding_tiles(const std::string& sharding, std::size_t rank);

}  // namespace racksim::workloads::hlo
