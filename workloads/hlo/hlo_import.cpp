#include "workloads/hlo/hlo_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "workloads/hlo/hlo_lower.h"
#include "workloads/hlo/hlo_parser.h"

namespace racksim::workloads::hlo {

using nlohmann::json;

namespace {

json summary_json(const ImportSummary& s, const std::string& path) {
  json loops = json::array();
  for (const auto& l : s.loops) loops.push_back({{"name", l.name}, {"trip_count", l.trip_count}, {"source", l.source}});
  return {{"file", path},
          {"module", s.module_name},
          {"scheduled", s.scheduled},
          {"module_devices", s.module_devices},
          {"opcodes", s.opcodes},
          {"custom_call_targets", s.custom_calls},
          {"unknown", s.unknown},
          {"loops", loops},
          {"kernels", s.kernels},
          {"collectives", s.collectives},
          {"host_copies", s.host_copies},
          {"flops", s.flops},
          {"tensor_flops", s.tensor_flops},
          {"recompute_tensor_flops", s.recompute_tensor_flops},
          {"hbm_bytes", s.hbm_bytes},
          {"xla_convention_flops", s.xla_convention_flops},
          {"xla_convention_bytes", s.xla_convention_bytes},
          {"temps_in_outputs", s.temps_in_outputs},
          {"command_buffer_executions", s.command_buffer_executions},
          {"rerecorded_buffer_refs", s.rerecorded_buffer_refs},
          {"host_bytes", s.host_bytes},
          {"argument_bytes", s.argument_bytes},
          {"output_bytes", s.output_bytes},
          {"params", s.params},
          {"params_source", s.params_source},
          {"tokens_per_device", s.tokens_per_device},
          {"token_shards", s.token_shards},
          {"tokens_source", s.tokens_source},
          {"model_flops_per_device", s.model_flops_per_device},
          {"model_flops_source", s.model_flops_source}};
}

}  // namespace

ImportedWorkload import_hlo(const std::string& path, int gpus) {
  const Module module = load_hlo_file(path);
  const int module_devices = module.replica_count * module.num_partitions;
  if (gpus <= 0) gpus = module_devices;
  LowerOptions opt;
  opt.gpus = gpus;
  ImportResult imported = lower_module(module, opt);
  const ImportSummary& s = imported.summary;
  ImportedWorkload w;
  w.graph = std::move(imported.graph);
  w.gpus = gpus;
  w.tp = s.tp;
  w.precision = s.fp8 ? sim::Dtype::fp8 : sim::Dtype::bf16;
  w.name = fmt::format("replay {}", std::filesystem::path(path).filename().string());
  w.file = path;
  // Every GPU runs this program. The devices that hold the same tokens: as the token argument's sharding says (of the
  // module's devices, token_shards hold distinct ones), else the ranks of one tensor-parallel group as the
  // collectives' groups suggest (which FSDP's gathers over a data-parallel group can mimic).
  const double replicas = s.token_shards > 0 && module_devices > 0
                              ? static_cast<double>(gpus) * s.token_shards / module_devices
                              : std::max(1, gpus / std::max(1, s.tp));
  w.graph.tokens_per_step = s.tokens_per_device * replicas;
  w.graph.model_flops_per_step = s.model_flops_per_device * gpus;
  if (s.tokens_per_device <= 0)
    w.graph.notes.push_back("tokens per step not inferred (no [batch, sequence] integer argument): tokens/s is 0");
  if (module_devices > 1 && gpus != module_devices)
    w.graph.notes.push_back(
        fmt::format("the module was compiled for {} devices but is replayed on {} GPUs", module_devices, gpus));
  else if (module_devices <= 1 && gpus > 1)  // (a one-device program has no collective: nothing crosses GPUs)
    w.graph.notes.push_back(fmt::format("the module was compiled for one device but is replayed on {} GPUs: each runs it "
                                        "alone, with no gradient or parameter communication between them",
                                        gpus));
  w.model = {{"hlo_module", s.module_name}, {"file", path}, {"params", s.params}};
  w.training = {{"framework", "jax"}};
  w.section = "hlo";
  w.section_json = summary_json(s, path);
  return w;
}

}  // namespace racksim::workloads::hlo
