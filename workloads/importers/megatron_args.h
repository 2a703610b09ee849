// Megatron-LM / NeMo command-line arguments -> racksim scenario (`racksim import megatron`).
//
// Input: a plain argument list (`--tensor-model-parallel-size 8 --seq-length 8192 ...`, any
// line breaks), a launch script (bash: `VAR=value`, `${VAR:-default}`, `$((A*B))`, arrays
// `ARGS=( ... )`, `\` continuations, comments; torchrun's --nproc_per_node x --nnodes give the
// GPU count), or the "arguments" block Megatron prints at start-up (`name ....... value`).
// A flag's value is the next token on the same logical line.
//
// Output: a scenario YAML whose every key carries a comment naming the argument it came from.
// The model is written inline from the architecture flags (or `model: {preset: ...}` when the
// caller names one). Unknown flags are warnings; known flags that do not change the step time
// (learning rate, data, checkpoints, logging) are listed as ignored; settings racksim models
// differently are warnings. Throws input::InputError when the model or batch cannot be formed.
#pragma once

#include <string>
#include <vector>

namespace racksim::workloads::importers {

struct MegatronOptions {
  std::string system;  // preset; empty: guessed from the file name (h100, h200, b200, gb200, ...) or h100-sxm
  int gpus = 0;        // 0: torchrun's nproc_per_node x nnodes, the log's world_size, or tp·pp·cp (dp 1)
  std::string model;   // a model preset or file instead of the architecture flags
  int vocab = 0;       // when the arguments leave the vocabulary to the tokenizer
  std::string name;    // scenario name; empty: the file's stem
};

struct MegatronImport {
  std::string yaml;                   // the scenario
  std::vector<std::string> warnings;  // unknown flags, settings modelled differently
  std::vector<std::string> ignored;   // known flags without an effect on the step time, as written
  std::vector<std::string> used;      // flags that set a scenario key
};

MegatronImport import_megatron_args_text(const std::string& text, const std::string& file_label,
                                         const MegatronOptions& opt);
MegatronImport import_megatron_args(const std::string& path, const MegatronOptions& opt);

}  // namespace racksim::workloads::importers
