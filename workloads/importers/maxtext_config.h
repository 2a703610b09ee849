// MaxText YAML -> racksim scenario (`racksim import maxtext`).
//
// Input: a MaxText config (base.yml, or a run config naming one with `base_config:`), the model
// config `model_name=NAME` selects (models/NAME.yml beside the config or beside the base config,
// where MaxText looks for it), and overrides `key=value` as MaxText's command line takes them. They
// merge as MaxText merges them: base, then model, then the command line (a command-line value that
// contradicts the model config is refused unless override_model_config=true).
//
// Output: a scenario YAML whose every key carries a comment naming the MaxText key (value, file:line or
// "command line") it came from. The ici_* and dcn_* mesh axes give the parallelism and the GPU count
// (one -1 per kind fills the rest, as MaxText's fill_unspecified_mesh_axes does); per_device_batch_size
// x GPUs x gradient_accumulation_steps gives the global batch. What racksim models differently is a
// warning in the header; what it cannot express with a bounded error is an error. Invalid input throws
// input::InputError with file:line:column, the key, and the nearest valid key.
#pragma once

#include <string>
#include <vector>

namespace racksim::workloads::importers {

struct MaxTextOptions {
  std::string system = "h100-sxm";  // racksim system preset
  bool system_given = false;        // --system on the command line (otherwise the default, with a warning)
  int domain_size = 8;              // GPUs in one NVLink domain of `system`: what an ICI -1 fills without --gpus
  int gpus = 0;                     // total GPUs; 0: from the mesh axes (and num_slices)
  std::string name;                 // scenario name; empty: run_name, else model_name, else the file's stem
  // The run's XLA_FLAGS (MaxText's GPU scripts set them in the environment, not the config): the
  // --xla_gpu_enable_pipelined_* flags are read, with the config's compile_xla_flags after them.
  std::string xla_flags;
};

struct MaxTextImport {
  std::string yaml;                   // the scenario
  std::vector<std::string> warnings;  // modelled differently, or not modelled
  std::vector<std::string> used;      // MaxText keys that set a scenario key ("key=value")
  std::vector<std::string> sources;   // the files read, in merge order
};

MaxTextImport import_maxtext(const std::string& config_path, const std::vector<std::string>& overrides,
                             const MaxTextOptions& opt);

}  // namespace racksim::workloads::importers
