// The HLO importer's workload on the job `racksim replay` and validate's `replay:` cases name.
#include <fmt/format.h>

#include "input/diagnostics.h"
#include "sim/run/run.h"
#include "workloads/hlo/hlo_import.h"

namespace racksim::sim {

namespace {

// The system and the GPU count of a replay come from --system and --gpus (or the module): a
// --set of the same keys would contradict them, so it is an error rather than one silently winning.
void check_replay_sets(const std::vector<SetOverride>& sets) {
  input::Diagnostics diag;
  for (const auto& o : sets) {
    const std::string label = fmt::format("--set {}={}", o.key_path, o.value);
    if (o.key_path == "system" || o.key_path == "system.preset")
      diag.error({label, 0, 0}, o.key_path,
                 "replay takes the system from --system (e.g. --system gb200-nvl72); set it there, not with --set");
    else if (o.key_path == "system.gpus")
      diag.error({label, 0, 0}, o.key_path,
                 "replay takes the GPU count from --gpus (default: the devices the module was compiled for); set it "
                 "there, not with --set");
  }
  diag.throw_if_any();
}

}  // namespace

RunResult run_hlo(const std::string& path, const std::string& system, int gpus, const std::vector<std::string>& sets) {
  const auto overrides = parse_set_overrides(sets);
  check_replay_sets(overrides);
  workloads::ImportedWorkload w = workloads::hlo::import_hlo(path, gpus);
  const Job job = load_job(system, w.gpus, w.tp, w.precision, overrides, "racksim replay");
  // XLA's collectives queue behind the resident compute (hlo_lower.cpp) under CUDA's default hardware queues; with
  // one queue they are dispatched in launch order and start at once.
  if (job.cuda_device_max_connections == 1)
    for (auto& op : w.graph.ops)
      if (op.kind == workloads::OpKind::collective) op.queues_behind_compute = false;
  return simulate(job, std::move(w));
}

}  // namespace racksim::sim
