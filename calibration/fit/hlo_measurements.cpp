// The HLO importer's view of measured XLA programs, for the fit: what a profiled kernel moves and
// what a program asks of the host. Here, above workloads, so that the importer's cost model and its
// lowering need not know about calibration (and do not include each other).
#include <algorithm>
#include <map>
#include <memory>

#include "calibration/fit/calibration_fit.h"
#include "workloads/hlo/hlo_cost.h"
#include "workloads/hlo/hlo_lower.h"
#include "workloads/hlo/hlo_parser.h"

namespace racksim::calib {

namespace hlo = workloads::hlo;

XlaKernelCostFn hlo_kernel_cost() {
  auto modules = std::make_shared<std::map<std::string, hlo::Module>>();
  return [modules](const std::string& path, const std::string& kernel) -> std::optional<XlaKernelCost> {
    auto it = modules->find(path);
    if (it == modules->end()) it = modules->emplace(path, hlo::load_hlo_file(path)).first;
    const hlo::Module& m = it->second;
    for (const auto& c : m.computations)
      for (const auto& inst : c.instructions) {
        if (inst.opcode != "fusion") continue;
        std::string n = inst.name;
        std::replace(n.begin(), n.end(), '.', '_');
        if (n != kernel) continue;
        hlo::CostModel cost(m);
        const hlo::OpCost k = cost.cost(c, inst);
        return XlaKernelCost{k.bytes_read + k.bytes_written, k.thread_bytes, k.loop_indices};
      }
    return std::nullopt;
  };
}

XlaProgramFn hlo_program_host_work() {
  return [](const std::string& path) -> std::optional<XlaProgramHostWork> {
    const hlo::ImportResult r = hlo::lower_module(hlo::load_hlo_file(path), hlo::LowerOptions{});
    XlaProgramHostWork w;
    for (const auto& op : r.graph.ops) w.commands += op.host_commands;
    w.executions = static_cast<int>(r.summary.command_buffer_executions);
    w.rerecorded_refs = r.summary.rerecorded_buffer_refs;
    return w;
  };
}

}  // namespace racksim::calib
