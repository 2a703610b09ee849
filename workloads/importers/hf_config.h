// Hugging Face `config.json` -> racksim model file (`racksim models import`).
//
// Reads the architecture of a decoder-only model from its transformers config (Llama, Mistral,
// Mixtral, Qwen2/Qwen2-MoE, Qwen3/Qwen3-MoE, DeepSeek-V2/V3 with MLA and leading dense layers)
// and writes a model file in the preset format (workloads/models/*.yaml): every field with a
// `sources:` entry naming the config key it came from, or the transformers default used when the
// key is absent. What the model file cannot express (sliding windows, MoE every k-th layer,
// multi-token prediction, ...) is a warning, written into the file's header and logged; never
// dropped silently. Invalid input throws input::InputError with file:line:column and the key.
#pragma once

#include <string>
#include <vector>

#include "workloads/model_spec.h"

namespace racksim::workloads::importers {

struct HfImport {
  ModelSpec model;                    // name, summary, architecture, sources (by field path)
  std::string model_type;             // config.json model_type
  std::string architecture;           // config.json architectures[0]
  std::vector<std::string> warnings;  // approximations: the model file cannot say this
  std::vector<std::string> notes;     // facts worth knowing that are not model fields
};

// `name`: the model's name in the file; empty: from _name_or_path, else the file name (or its
// folder when the file is called config.json).
HfImport import_hf_config(const std::string& path, const std::string& name = "");
HfImport import_hf_config_text(const std::string& text, const std::string& file_label, const std::string& name = "");

// The model file: header comments (source, derived parameter counts, warnings, notes), then the
// preset's fields and `sources:`. Loads back with parse_model(..., true) to the same ModelSpec.
std::string to_model_yaml(const HfImport& m, const std::string& source_label);

}  // namespace racksim::workloads::importers
