// The text form of an XLA HLO module (what `jax.jit(f).lower(...).compile().as_text()` prints),
// as parsed by hlo_parser: a module header, computations, and instructions with their shapes
// (element type, dimensions, layout, memory space), operands, called computations and raw
// attributes. Only what the importer needs is interpreted; every other attribute is kept as
// its text so nothing in a well-formed module is rejected for being unfamiliar.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace racksim::workloads::hlo {

// Memory space 5 is XLA's host memory (pinned host RAM reached over the host link); 0 is HBM.
inline constexpr int kHostMemorySpace = 5;

struct Shape {
  bool is_tuple = false;
  std::string element_type;            // "bf16", "f32", "s32", "pred", "token", ...; empty for tuples
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // layout, when printed
  int memory_space = 0;                 // S(n) in the layout
  std::vector<Shape> tuple;             // elements of a tuple

  bool on_host() const { return memory_space == kHostMemorySpace; }
  double elements() const;              // of an array; 0 for tuples
  double bytes() const;                 // all leaves
  int leaf_count() const;               // 1 for an array
  int leaf_offset(int tuple_index) const;  // first leaf of element `tuple_index`
  std::string to_string() const;        // "bf16[8,2048]" / "(f32[], s32[2])"
};

// Bytes of one element (fractions for sub-byte types); nullopt for an unknown type name.
std::optional<double> element_bytes(std::string_view type);
bool is_float_type(std::string_view type);
bool is_integer_type(std::string_view type);

struct Attribute {
  std::string name;
  std::string value;  // as written (balanced braces kept)
};

struct Instruction {
  std::string name;
  Shape shape;
  std::string opcode;
  std::vector<std::string> operand_names;
  std::vector<int> operands;          // indices into the computation's instructions
  std::string literal;                // constant(...) text; parameter(N) number
  int64_t parameter_number = -1;
  std::vector<Attribute> attrs;
  std::vector<std::string> called;    // computations named by calls=, to_apply=, body=, condition=, ...
  std::string op_name;                // metadata={op_name="..."}
  std::string custom_call_target;
  bool is_root = false;
  int line = 0;
  int column = 0;

  const std::string* attr(std::string_view key) const;
};

struct Computation {
  std::string name;
  bool is_entry = false;
  std::vector<Instruction> instructions;
  std::unordered_map<std::string, int> index;  // instruction name -> position
  std::vector<int> parameters;                 // by parameter number (-1 if missing)
  int root = -1;
  int line = 0;

  const Instruction& root_instruction() const { return instructions.at(static_cast<std::size_t>(root)); }
};

// How deep calls may nest (calls=, to_apply=, body=, ... chains from any computation, itself counted): the
// parser rejects a deeper module, so the replay and the cost model, which follow calls recursively, never meet one.
inline constexpr int kMaxCallDepth = 64;

struct Module {
  std::string name;
  std::string file;                            // as the user named it (for messages)
  std::vector<Attribute> header;               // HloModule name, key=value, ...
  bool is_scheduled = false;
  int replica_count = 1;
  int num_partitions = 1;
  std::vector<Computation> computations;
  std::unordered_map<std::string, int> computation_index;
  int entry = -1;

  const Computation* find(const std::string& name) const;
  const Computation& entry_computation() const { return computations.at(static_cast<std::size_t>(entry)); }
};

}  // namespace racksim::workloads::hlo
