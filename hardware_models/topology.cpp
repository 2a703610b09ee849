#include "hardware_models/topology.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

namespace racksim::hw {

int GroupPlacement::domains() const {
  const int64_t per = ranks_per_domain < 1 ? 1 : ranks_per_domain;
  const int64_t n = ranks < 1 ? 1 : ranks;
  return static_cast<int>((n + per - 1) / per);  // in 64 bits: n + per - 1 may not fit in int
}

namespace {

void check_group(const SystemSpec& sys, int group_size, int stride_in_ranks) {
  if (group_size < 1)
    throw std::invalid_argument("place_group: group_size must be >= 1 (got " + std::to_string(group_size) + ")");
  if (group_size > kMaxGpus)
    throw std::invalid_argument("place_group: group_size must be at most " + std::to_string(kMaxGpus) + " (got " +
                                std::to_string(group_size) + ")");
  if (stride_in_ranks < 1)
    throw std::invalid_argument("place_group: stride_in_ranks must be >= 1 (got " +
                                std::to_string(stride_in_ranks) + ")");
  if (sys.scale_up.domain_size < 1)
    throw std::invalid_argument("place_group: system '" + sys.name + "' has no NVLink domain size (scale_up.domain_size)");
}

// The members first + k*stride (k = 0..size-1): the domains they touch and the fewest members in any of them.
// A domain is visited by a contiguous run of members, so counting runs suffices.
struct Spread {
  int64_t domains = 0;
  int64_t fewest = 0;
};
Spread spread(int64_t first, int64_t size, int64_t stride, int64_t domain) {
  Spread s;
  int64_t last_domain = -1;
  int64_t run = 0;
  for (int64_t k = 0; k < size; ++k) {
    const int64_t d = (first + k * stride) / domain;
    if (d != last_domain) {
      if (run > 0) s.fewest = s.domains == 1 ? run : std::min(s.fewest, run);
      ++s.domains;
      last_domain = d;
      run = 0;
    }
    ++run;
  }
  s.fewest = s.domains <= 1 ? run : std::min(s.fewest, run);
  return s;
}

GroupPlacement placement(int group_size, const Spread& s) {
  GroupPlacement g;
  g.ranks = group_size;
  g.concurrent_groups_sharing_nic = 1;
  g.ranks_per_domain = static_cast<int>(s.fewest);
  return g;
}

}  // namespace

GroupPlacement place_group(const SystemSpec& sys, int group_size, int stride_in_ranks) {
  check_group(sys, group_size, stride_in_ranks);
  return placement(group_size, spread(0, group_size, stride_in_ranks, sys.scale_up.domain_size));
}

GroupPlacement place_group_in_job(const SystemSpec& sys, int group_size, int stride_in_ranks, int job_ranks,
                                  int first_from, int first_to, bool tiled) {
  check_group(sys, group_size, stride_in_ranks);
  const int64_t n = group_size, st = stride_in_ranks, domain = sys.scale_up.domain_size;
  const int64_t block = tiled ? n * st : st;  // the groups of this shape tile the ranks in blocks of size*stride
  const int64_t ranks = std::max<int64_t>(job_ranks, (n - 1) * st + 1);
  const int64_t lo = std::clamp<int64_t>(first_from, 0, ranks - 1);
  const int64_t hi = first_to < 0 ? ranks : std::clamp<int64_t>(first_to, lo + 1, ranks);
  // The pattern of placements repeats every lcm(block, domain) ranks: the groups whose first member lies
  // in that span are all the distinct ones.
  const int64_t span = std::min(hi, lo + std::lcm(block, domain));
  Spread worst{};
  worst.fewest = std::numeric_limits<int64_t>::max();
  for (int64_t first = lo; first < span; ++first) {
    if (first % block >= st || first + (n - 1) * st >= ranks) continue;
    const Spread s = spread(first, n, st, domain);
    if (s.fewest < worst.fewest) worst = s;
  }
  if (worst.domains == 0) worst = spread(lo - lo % block, n, st, domain);  // no group starts in the range
  return placement(group_size, worst);
}

PartialDomainShortfall partial_domain_shortfall(const SystemSpec& sys, int group_size, int stride_in_ranks,
                                                int job_ranks) {
  check_group(sys, group_size, stride_in_ranks);
  const int64_t D = sys.scale_up.domain_size, G = job_ranks, r = G % D, n = group_size, st = stride_in_ranks;
  PartialDomainShortfall out;
  if (r == 0 || n < 2) return out;
  const int64_t P = G - r, block = n * st;
  // Members f + k*st (0 <= k < n) inside [a, b).
  const auto members_in = [&](int64_t f, int64_t a, int64_t b) -> int64_t {
    const int64_t kmin = a <= f ? 0 : (a - f + st - 1) / st;
    const int64_t kmax = b - 1 < f ? -1 : std::min<int64_t>(n - 1, (b - 1 - f) / st);
    return kmax >= kmin ? kmax - kmin + 1 : 0;
  };
  for (int64_t f = std::max<int64_t>(0, P - (n - 1) * st); f < G; ++f) {
    if (f % block >= st || f + (n - 1) * st >= G) continue;
    const int64_t d0 = f / D, d1 = (f + (n - 1) * st) / D;
    if (d0 == d1) continue;  // within one domain
    const int64_t in_partial = members_in(f, P, G);
    if (in_partial == 0) continue;
    // Its most members in one of its other domains: what the partial one has fewer of.
    int64_t elsewhere = 0;
    for (int64_t d = d0; d < d1 && d * D < P; ++d) elsewhere = std::max(elsewhere, members_in(f, d * D, (d + 1) * D));
    if (in_partial < elsewhere && (out.in_partial == 0 || in_partial < out.in_partial)) out = {in_partial, elsewhere};
  }
  return out;
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
