// Unit tests of the collective cost model (hardware_models/collectives.h), on the shipped system presets.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "input/diagnostics.h"
#include "tests/unit/preset_util.h"

namespace racksim::hw::collective_test {

namespace {
SystemSpec preset(const std::string& name) { return racksim::testing::shipped_preset(name); }
}  // namespace

SystemSpec h100_sxm() { return preset("h100-sxm"); }
SystemSpec h200_sxm() { return preset("h200-sxm"); }
SystemSpec b200() { return preset("b200"); }
SystemSpec gb200_nvl72() { return preset("gb200-nvl72"); }

}  // namespace racksim::hw::collective_test

namespace racksim::hw {
namespace {

using namespace collective_test;
constexpr double KiB = 1024.0, MiB = 1024.0 * KiB, GiB = 1024.0 * MiB;

GroupPlacement one_domain(int n) { return GroupPlacement{n, n, 1}; }

CollectiveOptions algo(CollectiveAlgorithm a) {
  CollectiveOptions o;
  o.algorithm = a;
  return o;
}

// ---------------------------------------------------------------------------------------------- names
TEST(CollectiveNames, RoundTrip) {
  for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                  CollectiveOp::all_to_all, CollectiveOp::broadcast, CollectiveOp::send_recv})
    EXPECT_EQ(collective_op_from_string(to_string(op)), op);
  for (auto a : {CollectiveAlgorithm::auto_select, CollectiveAlgorithm::ring, CollectiveAlgorithm::tree,
                 CollectiveAlgorithm::nvls, CollectiveAlgorithm::nvls_tree, CollectiveAlgorithm::hierarchical,
                 CollectiveAlgorithm::direct, CollectiveAlgorithm::pat})
    EXPECT_EQ(collective_algorithm_from_string(to_string(a)), a);
  EXPECT_EQ(to_string(CollectiveAlgorithm::auto_select), "auto");
  EXPECT_EQ(collective_protocol_from_string("ll128"), CollectiveProtocol::ll128);
  EXPECT_EQ(collective_protocol_from_string("Simple"), CollectiveProtocol::simple);
  EXPECT_FALSE(collective_op_from_string("allreduce").has_value());
  EXPECT_FALSE(collective_algorithm_from_string("sharp").has_value());
  EXPECT_FALSE(collective_protocol_from_string("LL64").has_value());
}

// ---------------------------------------------------------------------------------------------- placement
TEST(CollectivePlacement, TensorAndDataParallelGroups) {
  const auto h = h100_sxm();
  auto tp = place_group(h, 8, 1);
  EXPECT_EQ(tp.ranks_per_domain, 8);
  EXPECT_EQ(tp.domains(), 1);
  auto dp = place_group(h, 64, 8);  // TP=8: one member per node
  EXPECT_EQ(dp.ranks_per_domain, 1);
  EXPECT_EQ(dp.domains(), 64);
  EXPECT_EQ(dp.concurrent_groups_sharing_nic, 1);
  auto tp4 = place_group(h, 4, 1);
  EXPECT_EQ(tp4.ranks_per_domain, 4);
  EXPECT_EQ(tp4.domains(), 1);

  const auto g = gb200_nvl72();
  // Split unevenly, the domain with the fewest members (the fewest NICs) bounds the traffic between domains.
  auto dp72 = place_group(g, 64, 4);  // TP=4 on NVL72: 18 + 18 + 18 + 10 DP members over 4 racks
  EXPECT_EQ(dp72.ranks_per_domain, 10);
  EXPECT_EQ(dp72.domains(), 7);  // ceil(64 / 10): the latency side counts more hops than the 4 racks
  auto odd = place_group(g, 9, 16);  // members at 0,16,..,128: 5 in rack 0, 4 in rack 1
  EXPECT_EQ(odd.domains(), 3);
  EXPECT_EQ(odd.ranks_per_domain, 4);
  EXPECT_THROW(place_group(g, 0, 1), std::invalid_argument);
  EXPECT_THROW(place_group(g, 4, 0), std::invalid_argument);
}

// A group split unevenly over domains: its lone member's NIC carries the whole ring. 73 ranks on 72-GPU
// domains reduce-scatter S in at least S (n-1)/n over one NIC, 14x the 72-rank time inside one domain.
TEST(CollectivePlacement, UnevenSplitIsBoundByTheSmallestDomain) {
  const auto g = gb200_nvl72();
  const double bytes = 32.0 * (1ull << 30);
  const auto one = place_group(g, 73, 1);
  EXPECT_EQ(one.ranks_per_domain, 1);
  const double nic_Bps = g.scale_out.nic_bandwidth_Bps * g.scale_out.nics_per_gpu;
  const double bound_s = bytes * 72 / 73 / nic_Bps;
  const double t73 = estimate_collective(g, CollectiveOp::reduce_scatter, bytes, one).time_s;
  EXPECT_GE(t73, bound_s);
  EXPECT_LT(t73, 1.2 * bound_s / g.scale_out.nic_efficiency);
  const double t72 = estimate_collective(g, CollectiveOp::reduce_scatter, bytes, place_group(g, 72, 1)).time_s;
  EXPECT_GT(t73, 10 * t72);
  const auto h = h100_sxm();  // 9 ranks on 8-GPU nodes: the ninth GPU's NIC
  const double b = 128.0 * (1 << 20);
  EXPECT_GE(estimate_collective(h, CollectiveOp::all_gather, b, place_group(h, 9, 1)).time_s,
            b * 8 / 9 / (h.scale_out.nic_bandwidth_Bps * h.scale_out.nics_per_gpu));
}

// In a job, every group of a shape is placed: 64-rank groups in 256 ranks on 72-GPU racks are 64, 8 + 56,
// 16 + 48 and 24 + 40: the worst has 8 in one rack. With 64 of the job's GPUs per rack all are whole.
TEST(CollectivePlacement, EveryGroupOfTheJobIsPlaced) {
  auto g = gb200_nvl72();
  EXPECT_EQ(place_group(g, 64, 1).ranks_per_domain, 64);
  EXPECT_EQ(place_group_in_job(g, 64, 1, 256).ranks_per_domain, 8);
  EXPECT_EQ(place_group_in_job(g, 8, 1, 256).ranks_per_domain, 8);   // 72 = 9 x 8: no EP-8 group straddles
  EXPECT_EQ(place_group_in_job(g, 32, 1, 256).ranks_per_domain, 8);  // ranks 64-95: 8 + 24
  EXPECT_EQ(place_group_in_job(g, 4, 64, 256).ranks_per_domain, 1);  // one member per 64: never two in a rack
  EXPECT_EQ(place_group_in_job(g, 2, 255, 256).ranks_per_domain, 1);  // an embedding group: first and last stage
  // Over one pipeline stage's ranks (pp 4: 64 each): stage 0's group is whole, stage 1's is 8 + 56.
  EXPECT_EQ(place_group_in_job(g, 64, 1, 256, 0, 64).ranks_per_domain, 64);
  EXPECT_EQ(place_group_in_job(g, 64, 1, 256, 64, 128).ranks_per_domain, 8);
  EXPECT_EQ(place_group_in_job(g, 8, 8, 256, 64, 128).ranks_per_domain, 1);  // its dp group: 1 + 7
  g.scale_up.domain_size = 64;
  EXPECT_EQ(place_group_in_job(g, 64, 1, 256).ranks_per_domain, 64);
  EXPECT_EQ(place_group_in_job(g, 32, 1, 256).ranks_per_domain, 32);
  const auto h = h100_sxm();  // 16,384 ranks, TP 8: DP groups of 128 at stride 8, one member per node
  EXPECT_EQ(place_group_in_job(h, 128, 8, 16384).ranks_per_domain, 1);
  EXPECT_EQ(place_group_in_job(h, 8, 1, 16384).ranks_per_domain, 8);
}

// A job leaving its last domain partly filled: 512 ranks on 72-GPU racks (7 x 72 + 8); a data-parallel group of 64 at
// stride 8 has 9 members in each full rack and 1 in the last. On 64-GPU domains every rack is whole; 200 ranks at pp 2
// (groups of 100): the second stage's group has 44 in a full rack and 56 in the partial one, more there, so no shortfall.
TEST(CollectivePlacement, PartialDomainShortfallIsCountedInThePartialDomain) {
  auto g = gb200_nvl72();
  const auto s = partial_domain_shortfall(g, 64, 8, 512);
  EXPECT_EQ(s.in_partial, 1);
  EXPECT_EQ(s.elsewhere, 9);
  EXPECT_EQ(partial_domain_shortfall(g, 100, 1, 200).in_partial, 0);
  g.scale_up.domain_size = 64;
  EXPECT_EQ(partial_domain_shortfall(g, 64, 8, 512).in_partial, 0);
}

TEST(CollectivePlacement, NvlinkLinks) {
  EXPECT_DOUBLE_EQ(nvlink_links_per_gpu(h100_sxm()), 18.0);
  EXPECT_DOUBLE_EQ(nvlink_links_per_gpu(gb200_nvl72()), 18.0);
  auto s = h100_sxm();
  s.scale_up.nvlink_generation = 2;
  EXPECT_THROW(nvlink_links_per_gpu(s), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------- closed form
// Ring all-reduce, NVLS off, Simple forced, one domain: t = lat + 2(n-1)/n * S / B_eff exactly, with
//   lat   = base[Ring][Simple] + 2(n-1) x hwLat[NVLink][Ring][Simple] = 8.4 + 2(n-1) x 3.4 us (B3.3), the per-hop
//           term x19.5/7.8 on Blackwell (B3.5 ratio, see collectives.cpp);
//   B_eff = nChannels x per-channel speed of NCCL's ring graph: 18 links x 20.6 GB/s = 370.8 GB/s per H100
//           -> 6 channels at 60 GB/s, duplicated to 12 x 30 = 360 GB/s; 18 x 40.1 = 721.8 GB/s per Blackwell GPU
//           -> 8 x 90, duplicated to 16 x 45 = 720 GB/s (B3.4 ladders, search.cc).
TEST(CollectiveClosedForm, RingSimpleAllReduce) {
  CollectiveOptions o;
  o.algorithm = CollectiveAlgorithm::ring;
  o.protocol = CollectiveProtocol::simple;
  o.nvls_enabled = false;
  struct Case {
    SystemSpec sys;
    int n;
    double b_eff, hop_us;
  };
  const std::vector<Case> cases = {{h100_sxm(), 8, 360e9, 3.4},
                                   {h200_sxm(), 4, 360e9, 3.4},
                                   {b200(), 8, 720e9, 3.4 * 19.5 / 7.8},
                                   {gb200_nvl72(), 72, 720e9, 3.4 * 19.5 / 7.8}};
  for (const auto& c : cases) {
    for (double S : {1.0, 4096.0, 1.0 * MiB, 1.0 * GiB, 16.0 * GiB}) {
      const auto r = estimate_collective(c.sys, CollectiveOp::all_reduce, S, one_domain(c.n), o);
      const double lat = (8.4 + 2.0 * (c.n - 1) * c.hop_us) * 1e-6;
      const double expect = lat + 2.0 * (c.n - 1) / c.n * S / c.b_eff;
      EXPECT_EQ(r.algorithm, CollectiveAlgorithm::ring);
      EXPECT_EQ(r.protocol, "Simple");
      EXPECT_NEAR(r.time_s, expect, expect * 1e-12) << c.sys.name << " S=" << S;
      EXPECT_NEAR(r.latency_s, lat, lat * 1e-12);
      EXPECT_NEAR(r.busbw_Bps, 2.0 * (c.n - 1) / c.n * S / r.time_s, 1e-6 * r.busbw_Bps);
      EXPECT_DOUBLE_EQ(r.algbw_Bps, S / r.time_s);
    }
  }
}

// NCCL's PAT for all-gather / reduce-scatter with one rank per node (a tp-8 job's data-parallel groups): its tuner's
// latency, 8 + log2(nodes) x 14 / 3.5 + 2.8 x ranks us, and 0.75 of the graph's bus bandwidth, not converted to an
// algorithm bandwidth (tuning.cc, NCCL 2.30): the ring's bandwidth time x n/(n-1) / 0.75. It wins at small and
// medium sizes over many nodes and loses to the ring at large ones; never with two ranks in a node, never for
// all-reduce.
TEST(CollectiveClosedForm, PatForOneRankPerNode) {
  const auto sys = h100_sxm();
  const GroupPlacement rail{128, 1, 1};  // 128 ranks, one per 8-GPU node (stride 8)
  EXPECT_EQ(place_group(sys, 128, 8).ranks_per_domain, 1);
  CollectiveOptions ring_simple = algo(CollectiveAlgorithm::ring);
  ring_simple.protocol = CollectiveProtocol::simple;
  for (auto op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter}) {
    const double S = 16 * MiB;
    const auto r = estimate_collective(sys, op, S, rail);
    EXPECT_EQ(r.algorithm, CollectiveAlgorithm::pat);
    EXPECT_EQ(r.protocol, "Simple");
    const double lat = (8.0 + 7 * 14.0 / 3.5 + 128 * 2.8) * 1e-6;
    EXPECT_NEAR(r.latency_s, lat, lat * 1e-12);
    const auto ring = estimate_collective(sys, op, S, rail, ring_simple);
    EXPECT_NEAR(r.bandwidth_time_s, ring.bandwidth_time_s * 128.0 / 127.0 / 0.75, 1e-9 * r.bandwidth_time_s);
    EXPECT_LT(r.time_s, 0.7 * estimate_collective(sys, op, S, rail, algo(CollectiveAlgorithm::ring)).time_s);
    EXPECT_NEAR(r.bytes_per_rank_nic, 127.0 / 128.0 * S, 1.0);
  }
  EXPECT_EQ(estimate_collective(sys, CollectiveOp::all_gather, 1 * GiB, rail).algorithm, CollectiveAlgorithm::ring);
  // Two ranks per node, or an all-reduce: no PAT.
  EXPECT_NE(estimate_collective(sys, CollectiveOp::all_gather, 16 * MiB, GroupPlacement{128, 2, 1}).algorithm,
            CollectiveAlgorithm::pat);
  EXPECT_THROW(estimate_collective(sys, CollectiveOp::all_gather, 16 * MiB, GroupPlacement{128, 2, 1}, algo(CollectiveAlgorithm::pat)),
               std::invalid_argument);
  EXPECT_THROW(estimate_collective(sys, CollectiveOp::all_reduce, 16 * MiB, rail, algo(CollectiveAlgorithm::pat)),
               std::invalid_argument);
}

// One rank per node: NCCL's search takes the plain TREE pattern (search.cc: ngpus == 1) and its tuner x0.85 of the
// tree's bus bandwidth (tuning.cc, 2.30.7). The times are NCCL 2.30.7's own tuner on the same graphs (an audit re-typed
// ncclTopoTuneModel, 2026-12-05): 64 nodes 64 MiB ring LL128 4,077 us (the tree, 0.85 x, loses), 128 nodes tree
// LL128 4,371 us; before the factor the tree won both (3,718 / 3,735 us).
TEST(CollectiveClosedForm, OneRankPerNodeTreeIsNcclsPlainTreePattern) {
  const auto sys = h100_sxm();
  const auto a64 = estimate_collective(sys, CollectiveOp::all_reduce, 64 * MiB, GroupPlacement{64, 1, 1});
  EXPECT_EQ(a64.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(a64.time_s, 4076.861e-6, 0.01e-6);
  const auto a128 = estimate_collective(sys, CollectiveOp::all_reduce, 64 * MiB, GroupPlacement{128, 1, 1});
  EXPECT_EQ(a128.algorithm, CollectiveAlgorithm::tree);
  EXPECT_NEAR(a128.time_s, 4370.875e-6, 0.01e-6);
}

// NCCL corrects the tree's bandwidth by size only below 512 MiB (tuning.cc: logSize = log2i(bytes >> 6) < 23), and
// from 2.29 NVLSTree's on Blackwell with an x86 host below 1 GiB (logSize < 24); never on a Grace host.
TEST(CollectiveClosedForm, TreeSizeCorrectionEndsWhereNcclsDoes) {
  CollectiveOptions tree_simple = algo(CollectiveAlgorithm::tree);
  tree_simple.protocol = CollectiveProtocol::simple;
  const GroupPlacement nodes{128, 8, 1};
  const auto at = [&](double S) { return estimate_collective(h100_sxm(), CollectiveOp::all_reduce, S, nodes, tree_simple); };
  // From 512 MiB the bandwidth time is the uncorrected one: linear in the size.
  EXPECT_NEAR(at(GiB).bandwidth_time_s, 2 * at(512 * MiB).bandwidth_time_s, 1e-9);
  // At 256 MiB NCCL's Simple entry (0.9) applies.
  EXPECT_NEAR(at(256 * MiB).bandwidth_time_s * 0.9, at(512 * MiB).bandwidth_time_s / 2, 1e-9);
  // B200 (x86): NVLSTree at 64 MiB 569.35 us and 256 MiB 1,651 us, NCCL 2.30.7's model (uncorrected 485 / 1,501 us);
  // GB200 (Grace): no correction, its bandwidth time linear in the size.
  const auto b = [&](double S) {
    return estimate_collective(b200(), CollectiveOp::all_reduce, S, GroupPlacement{32, 8, 1}, algo(CollectiveAlgorithm::nvls_tree));
  };
  EXPECT_NEAR(b(64 * MiB).time_s, 569.353e-6, 0.01e-6);
  EXPECT_NEAR(b(256 * MiB).time_s, 1651e-6, 1e-6);
  const auto g = [&](double S) {
    return estimate_collective(gb200_nvl72(), CollectiveOp::all_reduce, S, GroupPlacement{144, 72, 1},
                               algo(CollectiveAlgorithm::nvls_tree));
  };
  EXPECT_NEAR(g(64 * MiB).bandwidth_time_s * 4, g(256 * MiB).bandwidth_time_s, 1e-9);
}

// Across nodes NCCL's p2p runs on pow2Up(comm channels) channels with max(NICs, ceil(NIC GB/s / 14)) per network peer,
// halved while they and the peers' rounds of 8 exceed them (paths.cc, 2.30.7): on 8-GPU H100 nodes 16 channels (CTAs),
// 4 per peer up to 32 ranks, 2 at 64, 1 from 128.
TEST(CollectiveClosedForm, AllToAllAcrossNodesTakesNcclsNetworkP2pChannels) {
  const auto sys = h100_sxm();
  for (int n : {16, 64, 256}) {
    const auto r = estimate_collective(sys, CollectiveOp::all_to_all, 256 * MiB, GroupPlacement{n, 8, 1});
    EXPECT_EQ(r.sm_count, 16) << n;
  }
  EXPECT_EQ(estimate_collective(sys, CollectiveOp::send_recv, 64 * MiB, GroupPlacement{2, 1, 1}).sm_count, 4);
  // Every peer in flight at once: a CTA runs a batch of 8 peers side by side and the per-peer channels were halved
  // until each batch has its own (one round), so the latency is one network step (Simple: 8.4 + 14 us) up to
  // 8 x 16 / per_peer peers; at 256 ranks (1 per peer, 128 in flight) two steps. (Before, 16 peers a step.)
  for (int n : {16, 64, 128}) {
    const auto r = estimate_collective(sys, CollectiveOp::all_to_all, 256 * MiB, GroupPlacement{n, 8, 1});
    EXPECT_NEAR(r.latency_s, (8.4 + 14.0) * 1e-6, 1e-12) << n;
  }
  EXPECT_NEAR(estimate_collective(sys, CollectiveOp::all_to_all, 256 * MiB, GroupPlacement{256, 8, 1}).latency_s,
              (8.4 + 2 * 14.0) * 1e-6, 1e-12);
  // With one rank per node the rounds do not batch (the schedule group is gcd(8, ranks per domain)): P / per_peer
  // peers in flight, so more latency steps than with 8 per node at the same rank count.
  EXPECT_GT(estimate_collective(sys, CollectiveOp::all_to_all, 64 * KiB, GroupPlacement{64, 1, 1}).latency_s,
            estimate_collective(sys, CollectiveOp::all_to_all, 64 * KiB, GroupPlacement{64, 8, 1}).latency_s * 4);
  // Across nodes p2p runs Simple: its network connections get no LL buffers by default (NCCL_ALLOC_P2P_NET_LL_BUFFERS=0).
  EXPECT_EQ(estimate_collective(sys, CollectiveOp::all_to_all, 256 * KiB, GroupPlacement{16, 8, 1}).protocol, "Simple");
  EXPECT_EQ(estimate_collective(sys, CollectiveOp::send_recv, 64 * KiB, GroupPlacement{2, 1, 1}).protocol, "Simple");
}

// ---------------------------------------------------------------------------------------------- NVLS
// All-to-all inside a domain, NCCL's p2p schedule (collectives.cpp p2p_plan): 32 p2p channels, 4 per peer on 8
// ranks (8 on 4), one peer's part per CTA, so the busiest CTA moves (bytes/n)/channels plus one 512 KiB step
// at 21.4 GB/s per CTA (our 2 x H200 per-channel send_recv rate); on Blackwell that, not NVLink, is the limit.
TEST(CollectiveClosedForm, AllToAllIsBoundByNcclsP2pChannels) {
  const double cta_Bps = 21.4e9, step = 512.0 * 1024;
  const auto b8 = estimate_collective(b200(), CollectiveOp::all_to_all, 512 * MiB, one_domain(8));
  EXPECT_EQ(b8.protocol, "Simple");
  EXPECT_EQ(b8.bound_by, "channel_cap");
  EXPECT_EQ(b8.sm_count, 28);  // 7 peers x 4 channels; the self-copy's 4 are left out
  EXPECT_NEAR(b8.bandwidth_time_s, (512 * MiB / 8 / 4 + step) / cta_Bps, 1e-12);
  // 4 ranks: 8 channels per peer, 24 CTAs, the same 16 MiB per CTA.
  const auto t4 = estimate_collective(gb200_nvl72(), CollectiveOp::all_to_all, 512 * MiB, one_domain(4));
  EXPECT_EQ(t4.sm_count, 24);
  EXPECT_NEAR(t4.bandwidth_time_s, (512 * MiB / 4 / 8 + step) / cta_Bps, 1e-12);
  // At 1 GiB a peer's part would exceed 32 steps: 8 channels per peer, so CTAs carry two peers' parts.
  const auto b8g = estimate_collective(b200(), CollectiveOp::all_to_all, GiB, one_domain(8));
  EXPECT_EQ(b8g.sm_count, 32);
  EXPECT_NEAR(b8g.bandwidth_time_s, (2 * GiB / 8 / 8 + step) / cta_Bps, 1e-12);
  // Hopper: 28 CTAs could move 599 GB/s, more than NCCL's 370.8 GB/s NVLink, which stays the limit.
  const auto h8 = estimate_collective(h100_sxm(), CollectiveOp::all_to_all, 512 * MiB, one_domain(8));
  EXPECT_EQ(h8.bound_by, "nvlink");
  EXPECT_NEAR(h8.bandwidth_time_s, 512 * MiB * 7 / 8 / 370.8e9, 1e-12);
  // NCCL's protocol rule, not a timing: LL iff a peer's bytes <= its channels x 16 KiB.
  EXPECT_EQ(estimate_collective(h100_sxm(), CollectiveOp::all_to_all, 64 * 1024, one_domain(8)).protocol, "LL");
  EXPECT_EQ(estimate_collective(h100_sxm(), CollectiveOp::all_to_all, 256 * 1024, one_domain(8)).protocol, "Simple");
}

TEST(CollectiveNvls, BeatsRingAt8GpusFor1GiB) {
  for (const auto& sys : {h100_sxm(), h200_sxm(), b200()}) {
    const auto nv = estimate_collective(sys, CollectiveOp::all_reduce, GiB, one_domain(8));
    const auto ring = estimate_collective(sys, CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::ring));
    EXPECT_EQ(nv.algorithm, CollectiveAlgorithm::nvls) << sys.name;
    EXPECT_GT(nv.busbw_Bps, ring.busbw_Bps) << sys.name;
    EXPECT_LT(nv.sm_count, ring.sm_count) << sys.name;  // NVLS occupies fewer SMs
    // NVLS-off auto falls back to the ring.
    CollectiveOptions off;
    off.nvls_enabled = false;
    const auto r2 = estimate_collective(sys, CollectiveOp::all_reduce, GiB, one_domain(8), off);
    EXPECT_NE(r2.algorithm, CollectiveAlgorithm::nvls);
    EXPECT_DOUBLE_EQ(r2.time_s, ring.time_s);
  }
  // B3.4: 16 NVLS CTAs on SM90, 24 on SM100 in one domain; ring comm channels 2 x 12 / 2 x 16.
  EXPECT_EQ(estimate_collective(h100_sxm(), CollectiveOp::all_reduce, GiB, one_domain(8)).sm_count, 16);
  EXPECT_EQ(estimate_collective(b200(), CollectiveOp::all_reduce, GiB, one_domain(8)).sm_count, 24);
  EXPECT_EQ(estimate_collective(h100_sxm(), CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::ring)).sm_count, 24);
  EXPECT_EQ(estimate_collective(b200(), CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::ring)).sm_count, 32);
}

// hardware_specs.md B2: on 8 x H200 NCCL picks NVLS from 5 GPUs up and from 2 MiB up (Ring/LL below 1 MiB);
// A3: NVLS brings no benefit for partitions of <= 4 GPUs.
TEST(CollectiveNvls, SelectionSwitchPoints) {
  const auto h = h200_sxm();
  EXPECT_EQ(estimate_collective(h, CollectiveOp::all_reduce, 8 * GiB, one_domain(4)).algorithm, CollectiveAlgorithm::ring);
  for (int n = 5; n <= 8; ++n)
    EXPECT_EQ(estimate_collective(h, CollectiveOp::all_reduce, 8 * GiB, one_domain(n)).algorithm, CollectiveAlgorithm::nvls) << n;
  for (double S : {64 * KiB, 256 * KiB, 512 * KiB, 1 * MiB}) {
    const auto r = estimate_collective(h, CollectiveOp::all_reduce, S, one_domain(8));
    EXPECT_EQ(r.algorithm, CollectiveAlgorithm::ring) << S;
    EXPECT_EQ(r.protocol, "LL") << S;
  }
  for (double S : {2 * MiB, 16 * MiB, 256 * MiB})
    EXPECT_EQ(estimate_collective(h, CollectiveOp::all_reduce, S, one_domain(8)).algorithm, CollectiveAlgorithm::nvls) << S;
  EXPECT_EQ(estimate_collective(gb200_nvl72(), CollectiveOp::all_reduce, GiB, one_domain(4)).algorithm, CollectiveAlgorithm::ring);
  // Across domains NCCL's NVLS all-reduce is NVLSTree.
  const auto two = estimate_collective(h100_sxm(), CollectiveOp::all_reduce, 8 * GiB, GroupPlacement{16, 8, 1});
  EXPECT_EQ(two.algorithm, CollectiveAlgorithm::nvls_tree);
  EXPECT_GT(two.bytes_per_rank_nic, 0.0);
  // All-gather / reduce-scatter inside a node stay on the ring (NCCL's NVLS AG/RS model is far slower).
  EXPECT_EQ(estimate_collective(h, CollectiveOp::all_gather, GiB, one_domain(8)).algorithm, CollectiveAlgorithm::ring);
  EXPECT_EQ(estimate_collective(h, CollectiveOp::all_gather, GiB, one_domain(8), algo(CollectiveAlgorithm::nvls)).algorithm,
            CollectiveAlgorithm::nvls);
}

// NCCL's tuner drops NVLS/NVLSTree for all-gather and reduce-scatter when the comm has more than
// NCCL_MAX_NVLS_ARITY (32) ranks in its node, and under MNNVL the node is the NVLink clique (NVIDIA/nccl
// v2.30.7-1 src/enqueue.cc updateCollCostTable, src/graph/topo.cc): a 64-rank FSDP all-gather on one NVL72
// runs the same ring with NVLS on or off (seed claim 5); all-reduce keeps NVLS at 64 (32 heads). A pin of the
// rule as re-read against NCCL 2.25-2.30, not a fix.
TEST(CollectiveNvls, AllGatherAndReduceScatterOver32RanksOfOneDomainStayOnTheRing) {
  const auto g = gb200_nvl72();
  CollectiveOptions off;
  off.nvls_enabled = false;
  for (const CollectiveOp op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter}) {
    const auto on = estimate_collective(g, op, 1712e6, one_domain(64));
    const auto no = estimate_collective(g, op, 1712e6, one_domain(64), off);
    EXPECT_EQ(on.algorithm, CollectiveAlgorithm::ring);
    EXPECT_DOUBLE_EQ(on.time_s, no.time_s);
    EXPECT_EQ(estimate_collective(g, op, 1712e6, one_domain(32), algo(CollectiveAlgorithm::nvls)).algorithm,
              CollectiveAlgorithm::nvls);
  }
  EXPECT_EQ(estimate_collective(g, CollectiveOp::all_reduce, GiB, one_domain(64), algo(CollectiveAlgorithm::nvls)).algorithm,
            CollectiveAlgorithm::nvls);
}

// ---------------------------------------------------------------------------------------------- errors
TEST(CollectiveErrors, ImpossibleRequestsThrow) {
  const auto h = h100_sxm();
  auto no_switch = h;
  no_switch.scale_up.nvswitch = false;
  no_switch.scale_up.nvls = false;
  auto expect_throw = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no exception, expected one mentioning '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_throw([&] { estimate_collective(no_switch, CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::nvls)); },
               "NVSwitch");
  auto no_sharp = h;
  no_sharp.scale_up.nvls = false;
  expect_throw([&] { estimate_collective(no_sharp, CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::nvls)); },
               "SHARP");
  CollectiveOptions off = algo(CollectiveAlgorithm::nvls);
  off.nvls_enabled = false;
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(8), off); }, "disabled");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, GroupPlacement{16, 8, 1}, algo(CollectiveAlgorithm::nvls)); },
               "nvls_tree");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::nvls_tree)); },
               "domains");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_gather, GiB, GroupPlacement{16, 8, 1}, algo(CollectiveAlgorithm::nvls_tree)); },
               "all_reduce only");
  expect_throw([&] { estimate_collective(h, CollectiveOp::broadcast, GiB, one_domain(8), algo(CollectiveAlgorithm::nvls)); },
               "ring algorithm only");
  expect_throw([&] { estimate_collective(gb200_nvl72(), CollectiveOp::all_gather, GiB, one_domain(72), algo(CollectiveAlgorithm::nvls)); },
               "NCCL_MAX_NVLS_ARITY");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_gather, GiB, one_domain(8), algo(CollectiveAlgorithm::tree)); },
               "tree");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(8), algo(CollectiveAlgorithm::direct)); },
               "direct");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_to_all, GiB, one_domain(8), algo(CollectiveAlgorithm::ring)); },
               "point-to-point");
  expect_throw([&] { estimate_collective(h, CollectiveOp::broadcast, GiB, one_domain(8), algo(CollectiveAlgorithm::hierarchical)); },
               "hierarchical");
  CollectiveOptions ll = algo(CollectiveAlgorithm::nvls);
  ll.protocol = CollectiveProtocol::ll;
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(8), ll); }, "Simple");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, -1.0, one_domain(8)); }, "bytes");
  expect_throw([&] { estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(16)); }, "domains of 8");
  auto no_nic = h;
  no_nic.scale_out.nic_bandwidth_Bps = 0;
  expect_throw([&] { estimate_collective(no_nic, CollectiveOp::all_reduce, GiB, GroupPlacement{16, 8, 1}); }, "NIC");
  // nvls_tree needs NVLS too.
  expect_throw([&] { estimate_collective(no_sharp, CollectiveOp::all_reduce, GiB, GroupPlacement{16, 8, 1}, algo(CollectiveAlgorithm::nvls_tree)); },
               "SHARP");
}

TEST(CollectiveErrors, TrivialGroupsCostNothing) {
  const auto h = h100_sxm();
  EXPECT_EQ(estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(1)).time_s, 0.0);
  EXPECT_EQ(estimate_collective(h, CollectiveOp::all_reduce, 0.0, one_domain(8)).time_s, 0.0);
}

// ---------------------------------------------------------------------------------------------- structure
TEST(CollectiveStructure, BytesPerRankAndBusbw) {
  const auto h = h100_sxm();
  const double S = GiB;
  // Ring all-reduce in one domain: 2(n-1)/n S over NVLink, nothing on NICs.
  auto r = estimate_collective(h, CollectiveOp::all_reduce, S, one_domain(8), algo(CollectiveAlgorithm::ring));
  EXPECT_DOUBLE_EQ(r.bytes_per_rank_nvlink, 2.0 * 7 / 8 * S);
  EXPECT_EQ(r.bytes_per_rank_nic, 0.0);
  EXPECT_EQ(r.bound_by, "nvlink");
  EXPECT_NEAR(r.time_s, r.latency_s + r.bandwidth_time_s, 1e-15);
  // All-to-all over 2 nodes of 8: 7/16 of the buffer over NVLink, 8/16 over the NIC.
  auto a = estimate_collective(h, CollectiveOp::all_to_all, S, GroupPlacement{16, 8, 1});
  EXPECT_EQ(a.algorithm, CollectiveAlgorithm::direct);
  EXPECT_DOUBLE_EQ(a.bytes_per_rank_nvlink, S * 7 / 16);
  EXPECT_DOUBLE_EQ(a.bytes_per_rank_nic, S * 8 / 16);
  EXPECT_EQ(a.bound_by, "nic");
  EXPECT_NEAR(a.busbw_Bps, a.algbw_Bps * 15 / 16, 1e-6 * a.busbw_Bps);
  // Send/recv: one message, NVLink in a domain, NIC across; busbw = algbw.
  auto p1 = estimate_collective(h, CollectiveOp::send_recv, S, one_domain(2));
  auto p2 = estimate_collective(h, CollectiveOp::send_recv, S, GroupPlacement{2, 1, 1});
  EXPECT_DOUBLE_EQ(p1.bytes_per_rank_nvlink, S);
  EXPECT_DOUBLE_EQ(p2.bytes_per_rank_nic, S);
  EXPECT_GT(p2.time_s, 5 * p1.time_s);  // 48 GB/s NIC channel vs 370.8 GB/s NVLink
  EXPECT_DOUBLE_EQ(p1.busbw_Bps, p1.algbw_Bps);
  // A NIC ring with one GPU per node: 2 channels x 24 GB/s (NCCL duplicates the one 48 GB/s channel).
  auto dp = estimate_collective(h, CollectiveOp::all_reduce, 16 * GiB, GroupPlacement{64, 1, 1}, algo(CollectiveAlgorithm::ring));
  EXPECT_NEAR(dp.busbw_Bps / 1e9, 48.0, 1.0);
  EXPECT_EQ(dp.bound_by, "nic");
  // Small messages use fewer channels (NCCL's per-thread thresholds).
  EXPECT_LT(estimate_collective(h, CollectiveOp::all_reduce, 64 * KiB, one_domain(8)).sm_count, 24);
}

// Multi-domain graphs derived from NCCL's search (collectives.cpp), checked through their asymptotic busbw:
//  * 8 H100 + 8 NICs of 50 GB/s per node, ring: 48 GB/s channels fit 8 NICs but only 7 x 48 on 370.8 GB/s of
//    NVLink; 45 fits 8 of each -> 8 x 45 = 360 GB/s (no duplication: 45 < 50 with > 4 channels).
//  * NVLSTree on 2 nodes: 8 heads, bwIntra 40 (9 x 40 <= 370.8), bwInter raised to 48; intraBw = 40 x 0.85 x 7/8 x 2
//    = 59.5, interBw = 2 x 48, perChMaxNVLSTreeBw(Hopper, 2 nodes) = 57.7 -> 8 x 57.7 = 461.6 GB/s; on >= 3 nodes
//    min(59.5, 48, 45.5) -> 8 x 45.5 = 364 GB/s.
//  * 8 B200 per node: 48 GB/s channels, 8 NICs -> 8 x 48 = 384 GB/s (B4.3 measures 377-382 on 4 P6-B200).
TEST(CollectiveStructure, MultiDomainGraphs) {
  const double S = 64 * GiB;  // latency-free limit
  CollectiveOptions ring = algo(CollectiveAlgorithm::ring);
  ring.protocol = CollectiveProtocol::simple;
  auto bus = [&](const SystemSpec& sys, GroupPlacement g, const CollectiveOptions& o) {
    return estimate_collective(sys, CollectiveOp::all_reduce, S, g, o).busbw_Bps / 1e9;
  };
  EXPECT_NEAR(bus(h100_sxm(), {16, 8, 1}, ring), 360.0, 2.0);
  EXPECT_NEAR(bus(h100_sxm(), {16, 8, 1}, algo(CollectiveAlgorithm::nvls_tree)), 461.6, 2.0);
  EXPECT_NEAR(bus(h100_sxm(), {64, 8, 1}, algo(CollectiveAlgorithm::nvls_tree)), 364.0, 2.0);
  EXPECT_NEAR(bus(b200(), {32, 8, 1}, ring), 384.0, 2.0);
  EXPECT_EQ(estimate_collective(h100_sxm(), CollectiveOp::all_reduce, S, {16, 8, 1}, ring).bound_by, "nic");
}

TEST(CollectiveStructure, SharedNicsSlowNicBoundCollectives) {
  const auto h = h100_sxm();
  GroupPlacement alone{64, 1, 1}, shared{64, 1, 2};
  const auto a = estimate_collective(h, CollectiveOp::all_reduce, GiB, alone, algo(CollectiveAlgorithm::ring));
  const auto b = estimate_collective(h, CollectiveOp::all_reduce, GiB, shared, algo(CollectiveAlgorithm::ring));
  EXPECT_GT(b.bandwidth_time_s, 1.5 * a.bandwidth_time_s);
  EXPECT_EQ(b.bound_by, "nic");
  // Sharing with nobody is the plain NCCL model.
  const auto c = estimate_collective(h, CollectiveOp::all_reduce, GiB, GroupPlacement{8, 8, 1});
  EXPECT_DOUBLE_EQ(c.time_s, estimate_collective(h, CollectiveOp::all_reduce, GiB, one_domain(8)).time_s);
}

TEST(CollectiveStructure, HierarchicalIsTheSumOfItsPhases) {
  const auto h = h100_sxm();
  const double S = GiB;
  GroupPlacement g{64, 8, 1};
  const auto hier = estimate_collective(h, CollectiveOp::all_reduce, S, g, algo(CollectiveAlgorithm::hierarchical));
  const auto rs = estimate_collective(h, CollectiveOp::reduce_scatter, S, one_domain(8));
  const auto ar = estimate_collective(h, CollectiveOp::all_reduce, S / 8, GroupPlacement{8, 1, 1});
  const auto ag = estimate_collective(h, CollectiveOp::all_gather, S, one_domain(8));
  EXPECT_EQ(hier.algorithm, CollectiveAlgorithm::hierarchical);
  EXPECT_NEAR(hier.time_s, rs.time_s + ar.time_s + ag.time_s, 1e-12);
  EXPECT_NEAR(hier.bytes_per_rank_nic, ar.bytes_per_rank_nic, 1e-3);
  EXPECT_NEAR(hier.busbw_Bps, S / hier.time_s * 2 * 63 / 64, 1e-6 * hier.busbw_Bps);
  // NCCL never picks it by itself.
  EXPECT_NE(estimate_collective(h, CollectiveOp::all_reduce, S, g).algorithm, CollectiveAlgorithm::hierarchical);
}

// ---------------------------------------------------------------------------------------------- sweeps
// Time is finite, positive and non-decreasing in bytes for every op, 1 B .. 16 GiB, n = 2 .. 16384, on domains of
// 8 and of 72, for NCCL's choice and for the hierarchical decomposition.
TEST(CollectiveMonotonic, FinitePositiveNonDecreasing) {
  const std::vector<SystemSpec> systems = {h100_sxm(), gb200_nvl72(), b200()};
  const std::vector<int> ns = {2, 3, 4, 5, 7, 8, 9, 16, 36, 64, 72, 144, 512, 1000, 2048, 16384};
  const std::vector<CollectiveOp> ops = {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                                         CollectiveOp::all_to_all, CollectiveOp::broadcast, CollectiveOp::send_recv};
  std::vector<double> sizes;
  for (double s = 1; s <= 16 * GiB; s *= 2) {
    sizes.push_back(s);
    sizes.push_back(s * 1.37);
  }
  int checked = 0;
  for (const auto& sys : systems) {
    const int D = sys.scale_up.domain_size;
    for (int n : ns) {
      std::vector<GroupPlacement> places = {GroupPlacement{n, std::min(n, D), 1}, GroupPlacement{n, 1, 1}};
      if (n > 4) places.push_back(GroupPlacement{n, std::min(n, 4), 1});
      for (const auto& g : places) {
        for (auto op : ops) {
          std::vector<CollectiveOptions> opts = {CollectiveOptions{}};
          if (op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter)
            opts.push_back(algo(CollectiveAlgorithm::hierarchical));
          for (const auto& o : opts) {
            double prev = 0;
            for (double S : sizes) {
              const auto r = estimate_collective(sys, op, S, g, o);
              ASSERT_TRUE(std::isfinite(r.time_s) && r.time_s > 0)
                  << sys.name << " " << to_string(op) << " n=" << n << " ppn=" << g.ranks_per_domain << " S=" << S;
              ASSERT_GE(r.time_s, prev * (1 - 1e-12))
                  << sys.name << " " << to_string(op) << " " << to_string(o.algorithm) << " n=" << n
                  << " ppn=" << g.ranks_per_domain << " S=" << S << " algo " << to_string(r.algorithm) << "/" << r.protocol;
              ASSERT_TRUE(std::isfinite(r.busbw_Bps) && r.busbw_Bps > 0);
              ASSERT_GT(r.sm_count, 0);
              prev = r.time_s;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// NCCL sizes a ring that leaves the NVLink domain on the GPU->NIC path's slowest link: on a PCIe host the GPU's
// Gen5 x16 link, which NCCL's topology takes at 48 GB/s (src/graph/topo.cc: 16 lanes x 240 / 80). A NIC faster than
// that adds no channel and holds no more SMs (Grace hosts are not capped: docs/decisions.md). Before
// 2026-12-04 an 800 Gb/s NIC on an H100 host doubled the channels, and the SMs held beside compute, with the data
// still capped by the PCIe link: a faster NIC made the Llama 3 405B step slower (an audit's finding).
TEST(CollectiveNic, FasterNicThanThePcieLinkAddsNoChannels) {
  auto sms = [](SystemSpec s, double nic_Gbps) {
    s.scale_out.nic_bandwidth_Bps = nic_Gbps * 1e9 / 8;
    return estimate_collective(s, CollectiveOp::reduce_scatter, 1 << 30, place_group(s, 16, 8)).sm_count;
  };
  for (const auto& s : {h100_sxm(), b200()}) {
    EXPECT_EQ(sms(s, 800), sms(s, 400)) << s.name;
    EXPECT_EQ(sms(s, 3200), sms(s, 400)) << s.name;
  }
}

}  // namespace
}  // namespace racksim::hw
