#include "hardware_models/topology.h"

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>

namespace racksim::hw {

int GroupPlacement::domains() const {
  const int64_t per = ranks_per_domain < 1 ? 1 : ranks_per_domain;
  const int64_t n = ranks < 1 ? 1 : ranks;
  return static_cast<int>((n + per - 1) / per);  // in 64 bits: n + per - 1 may not fit in int
}

GroupPlacement place_group(const SystemSpec& sys, int group_size, int stride_in_ranks) {
  if (group_size < 1)
    throw std::invalid_argument("place_group: group_size must be >= 1 (got " + std::to_string(group_size) + ")");
  if (group_size > kMaxGpus)
    throw std::invalid_argument("place_group: group_size must be at most " + std::to_string(kMaxGpus) + " (got " +
                                std::to_string(group_size) + ")");
  if (stride_in_ranks < 1)
    throw std::invalid_argument("place_group: stride_in_ranks must be >= 1 (got " +
                                std::to_string(stride_in_ranks) + ")");
  const int domain = sys.scale_up.domain_size;
  if (domain < 1)
    throw std::invalid_argument("place_group: system '" + sys.name + "' has no NVLink domain size (scale_up.domain_size)");

  GroupPlacement g;
  g.ranks = group_size;
  g.concurrent_groups_sharing_nic = 1;
  // Members sit at k*stride (k = 0..group_size-1) relative to the first; count the domains they touch.
  // A domain is visited by a contiguous run of members, so counting changes of domain index suffices.
  long long touched = 0;
  long long last_domain = -1;
  for (long long k = 0; k < group_size; ++k) {
    const long long d = (k * stride_in_ranks) / domain;
    if (d != last_domain) {
      ++touched;
      last_domain = d;
    }
  }
  g.ranks_per_domain = static_cast<int>((group_size + touched - 1) / touched);
  return g;
}

double nvlink_link_bandwidth_Bps(int nvlink_generation) {
  // hardware_specs.md A3 "Per-link bandwidth": 25 GB/s per direction (NVLink 4), 50 GB/s (NVLink 5).
  switch (nvlink_generation) {
    case 4: return 25e9;
    case 5: return 50e9;
    default:
      throw std::invalid_argument("NVLink generation " + std::to_string(nvlink_generation) +
                                  " has no per-link bandwidth in the reference (hardware_specs.md A3 covers 4 and 5)");
  }
}

double nvlink_links_per_gpu(const SystemSpec& sys) {
  return sys.scale_up.bandwidth_per_direction_Bps / nvlink_link_bandwidth_Bps(sys.scale_up.nvlink_generation);
}

}  // namespace racksim::hw
