// Where the ranks of one communicator sit, and what links they can use.
//
// The global rank order is the launcher's: TP innermost, so ranks [d*D, (d+1)*D) share NVLink domain d
// (D = SystemSpec::scale_up.domain_size). A communicator is described by how many ranks it has and how
// many of them sit in one domain; the rest of its traffic crosses the scale-out NICs. Every GPU owns its
// NICs (rail-optimized scale-out: DGX/HGX "8x single-port CX-7", GB200/GB300 one CX-7/CX-8 per GPU,
// hardware_specs.md A4), so two communicators only share a NIC when the caller says so.
#pragma once

#include "hardware_models/system_spec.h"

namespace racksim::hw {

struct GroupPlacement {
  int ranks = 1;
  int ranks_per_domain = 1;  // ranks of this group inside one NVLink domain (the rest are reached over NICs)
  int domains() const;       // ceil(ranks / ranks_per_domain)
  // How many communicators of this kind run at the same time and share the same NICs / NVLink ports
  // (e.g. 8 TP-rank DP groups, each on its own rail, share nothing: rail-optimized -> 1).
  int concurrent_groups_sharing_nic = 1;
};

// The placement of a group of `group_size` ranks whose consecutive members are `stride_in_ranks` apart in
// the global rank order (TP group: stride 1; a DP group of a TP=t, CP=c, PP=p job: stride t*c (Megatron
// order tp-cp-dp-pp) -- the caller knows its order), its first member at rank 0. Counts the members in each
// domain they touch; ranks_per_domain is the fewest of them. Every GPU owns its NICs, so the domain with the
// fewest members has the fewest NICs for the traffic that crosses between domains: a ring's channels cross
// every domain boundary and NCCL keeps the channel count and bandwidth of its slowest node, so that domain
// bounds the collective (73 ranks on 72-GPU domains: one GPU's NIC carries the whole ring). A group split
// evenly is unchanged (ranks / domains). The latency side takes ceil(ranks / fewest) domains, more hops
// than the group crosses when it is split unevenly (docs/decisions.md, "Groups that straddle NVLink domains").
// concurrent_groups_sharing_nic is 1: on a rail-optimized fabric every member uses its own GPU's NICs.
// Throws std::invalid_argument for group_size < 1, stride < 1 or a system without a domain size.
GroupPlacement place_group(const SystemSpec& sys, int group_size, int stride_in_ranks);

// The same for every group of this shape in a job of `job_ranks` ranks (ranks [0, job_ranks) fill the domains
// in order) whose first member lies in [first_from, first_to) (first_to -1: the whole job): the placement of the
// group with the fewest members in one domain. A group that straddles a domain boundary (64-rank groups on
// 72-GPU racks: ranks 64-127 are 8 + 56) is slower than the first one, which place_group alone would time; the
// caller narrows the range to the ranks of one pipeline stage for the groups that stay inside a stage.
// The groups of a shape tile the ranks (a group starts where rank % (size·stride) < stride), unless `tiled` is
// false: then every rank of the range starts one (a pipeline hop's pair of stages r, r+1 starts at any stage).
GroupPlacement place_group_in_job(const SystemSpec& sys, int group_size, int stride_in_ranks, int job_ranks,
                                  int first_from = 0, int first_to = -1, bool tiled = true);

// A job whose ranks leave its last NVLink domain partly filled (job_ranks not a multiple of the domain size): of the
// groups of this shape (tiling the ranks as above) that span domains and reach into that last one, the fewest members
// one has there, with that group's most in one of its other domains; {0, 0} when none has fewer there than elsewhere
// (a whole number of domains, or no group reaching into it short of ranks).
struct PartialDomainShortfall {
  int64_t in_partial = 0;
  int64_t elsewhere = 0;
};
PartialDomainShortfall partial_domain_shortfall(const SystemSpec& sys, int group_size, int stride_in_ranks,
                                                int job_ranks);

// NVLink arithmetic from the preset (hardware_specs.md A3).
// Nominal bandwidth of one NVLink link, one direction: NVLink 4 (H100/H200) 25 GB/s, NVLink 5 (B200,
// GB200, GB300) 50 GB/s. Throws std::invalid_argument for a generation with no cited figure.
double nvlink_link_bandwidth_Bps(int nvlink_generation);
// Links per GPU implied by the preset: scale_up.bandwidth_per_direction_Bps / per-link rate
// (450 GB/s / 25 GB/s = 18 on H100; 900 / 50 = 18 on Blackwell). Not rounded (a fractional value means the
// preset's per-GPU figure is not a whole number of links; the models stay proportional to it).
double nvlink_links_per_gpu(const SystemSpec& sys);

}  // namespace racksim::hw
