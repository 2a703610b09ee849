// Discrete-event replay of one rank role's OpGraph on the modelled GPU: a host launch thread,
// four in-order streams (compute, communication, H2D, D2H), and shared resources (SMs, HBM,
// host link, NVLink, NIC) as a max-min fair fluid network. Produces a Timeline, the memory
// high-water mark, and the step-time breakdown of the report.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/huge_page_allocator.h"
#include "sim/engine/job.h"
#include "workloads/op_graph.h"

namespace racksim::sim {

// A short label (what bounded an op, a collective's algorithm) kept for the rest of the process: a
// handful of distinct texts, so an op's record holds a view instead of a string. Thread-safe.
std::string_view intern_label(std::string_view text);

struct OpRecord {
  double launch_start_s = 0;  // host thread starts launching it
  double launch_end_s = 0;    // host thread done; the GPU may start it
  double start_s = 0;
  double end_s = 0;
  std::string_view bound_by;  // resource that limited it (e.g. "hbm", "sm", "nvlink", "latency"); static text
  std::string_view algorithm; // collectives: the algorithm chosen; static text
  // Collectives: what one rank moves over its NICs and over NVLink as modelled (an expert exchange's dedup and node
  // limit, a ring's split between the links), for the trace; float: a label's precision, not a computation's.
  float nic_bytes = 0, nvlink_bytes = 0;
};

struct Breakdown {
  double compute_s = 0;
  double recompute_s = 0;
  double exposed_communication_s = 0;
  double exposed_offload_s = 0;
  double launch_overhead_s = 0;
  double pipeline_bubble_s = 0;
  double idle_s = 0;  // none of the above (waiting on a dependency with nothing running)

  // Every part, for code that treats them alike (the steady-state extrapolation, sim/run).
  static constexpr std::array<double Breakdown::*, 7> kParts = {
      &Breakdown::compute_s,         &Breakdown::recompute_s,       &Breakdown::exposed_communication_s,
      &Breakdown::exposed_offload_s, &Breakdown::launch_overhead_s, &Breakdown::pipeline_bubble_s,
      &Breakdown::idle_s};
};

struct MemoryResult {
  double peak_hbm_bytes = 0;
  std::array<double, workloads::kMemCategoryCount> at_peak{};  // by MemCategory
  double peak_host_bytes = 0;                                  // pinned host memory (offload)
  int peak_rank = 0;                                           // pipeline stage with the peak
};

struct ReplayResult {
  std::vector<OpRecord, HugePageAllocator<OpRecord>> ops;  // parallel to graph.ops
  double step_time_s = 0;
  Breakdown breakdown;
  int breakdown_rank = 0;     // the pipeline stage the breakdown describes (the busiest)
  MemoryResult memory;
  std::vector<std::string> warnings;
  // Per simulated rank: how long any of its streams had an op running (the union of the ops'
  // intervals). Filled on request (ReplayOptions::rank_busy): the steady-state check uses it.
  std::vector<double> rank_busy_s;
  // Per simulated rank: the time its host spent issuing ops (each op's launch, the framework's host work and graph
  // launches; not its waits for the GPU). Filled with rank_busy_s.
  std::vector<double> rank_host_busy_s;
};

struct ReplayOptions {
  bool rank_busy = false;  // fill ReplayResult::rank_busy_s
};

// The engine: replays one rank role's graph on the job's system.
ReplayResult replay(const workloads::OpGraph& graph, const Job& job, const ReplayOptions& options = {});

// The memory timeline of a replayed graph: each tensor allocated when its op starts and freed when
// its op ends, in time order with frees first at equal times (the allocator reuses a block freed by
// the op that just finished). The engine's high-water mark and the trace's counters both walk it.
struct MemoryEvent {
  double t_s = 0;
  bool alloc = false;
  workloads::TensorId tensor = 0;
};
std::vector<MemoryEvent> memory_events(const workloads::OpGraph& graph, std::span<const OpRecord> ops);

// Bytes in use per rank as memory events are applied: HBM by category, pinned host memory. Starts
// with the resident state allocated; a double free or re-allocation is ignored.
class MemoryInUse {
 public:
  MemoryInUse(const workloads::OpGraph& graph, int ranks);
  void apply(workloads::TensorId tensor, bool alloc);
  const std::array<double, workloads::kMemCategoryCount>& hbm(int rank) const { return hbm_[rank]; }
  double hbm_total(int rank) const;
  double host(int rank) const { return host_[rank]; }

 private:
  const workloads::OpGraph& g_;
  std::vector<char> live_;
  std::vector<std::array<double, workloads::kMemCategoryCount>> hbm_;
  std::vector<double> host_;
};

}  // namespace racksim::sim
