// Cost model of NCCL collectives on an NVLink/NVSwitch + NIC cluster.
//
// The model is NCCL's own (hardware_specs.md B2-B3, NCCL 2.30.7 src/graph/{search,tuning}.cc and
// src/transport/nvls.cc): from the preset it derives the per-GPU NVLink and per-NIC bandwidth NCCL's topology
// sees, emulates NCCL's channel search (the per-channel speed ladders, channel duplication, the NVLS head
// search), evaluates NCCL's tuning formulas (per-channel caps, nvlsEfficiency, LL/LL128/Simple refinements,
// latency per step) for every enabled (algorithm, protocol) and, like NCCL, runs the one with the smallest
// lat + bytes/bw. The measured curves in hardware_specs.md B4 and public_collective_gemm_measurements.md are
// used only to check it (tests/unit/test_collectives*.cpp). See collectives.cpp for the derivations.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "core/names.h"
#include "hardware_models/collective_op.h"
#include "hardware_models/system_spec.h"
#include "hardware_models/topology.h"

namespace racksim::hw {

// direct: all-to-all and send/recv (point-to-point over NVLink inside a domain, NICs across). pat: NCCL's
// Parallel Aggregated Trees (2.23+), all-gather and reduce-scatter of one rank per node.
enum class CollectiveAlgorithm { auto_select, ring, tree, nvls, nvls_tree, hierarchical, direct, pat };
// NCCL's protocols. auto_select: the fastest enabled one (what NCCL does).
enum class CollectiveProtocol { auto_select, ll, ll128, simple };

inline constexpr std::array<sim::EnumName<CollectiveAlgorithm>, 8> kCollectiveAlgorithmNames = {
    {{CollectiveAlgorithm::auto_select, "auto"},
     {CollectiveAlgorithm::ring, "ring"},
     {CollectiveAlgorithm::tree, "tree"},
     {CollectiveAlgorithm::nvls, "nvls"},
     {CollectiveAlgorithm::nvls_tree, "nvls_tree"},
     {CollectiveAlgorithm::hierarchical, "hierarchical"},
     {CollectiveAlgorithm::direct, "direct"},
     {CollectiveAlgorithm::pat, "pat"}}};
// NCCL's own spelling (NCCL_PROTO); parsing ignores case.
inline constexpr std::array<sim::EnumName<CollectiveProtocol>, 4> kCollectiveProtocolNames = {
    {{CollectiveProtocol::auto_select, "auto"},
     {CollectiveProtocol::ll, "LL"},
     {CollectiveProtocol::ll128, "LL128"},
     {CollectiveProtocol::simple, "Simple"}}};

std::string to_string(CollectiveAlgorithm a);
std::optional<CollectiveAlgorithm> collective_algorithm_from_string(std::string_view s);  // also "auto_select"
std::string to_string(CollectiveProtocol p);
std::optional<CollectiveProtocol> collective_protocol_from_string(std::string_view s);  // case-insensitive; also "auto_select"

struct CollectiveCost {
  CollectiveOp op = CollectiveOp::all_reduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  std::string protocol;         // "LL" | "LL128" | "Simple"
  double bytes = 0;             // nccl-tests 'size': total buffer (for all_gather/reduce_scatter the full gathered size)
  double time_s = 0;
  double latency_s = 0, bandwidth_time_s = 0;   // the two terms (time_s = latency_s + bandwidth_time_s)
  double algbw_Bps = 0, busbw_Bps = 0;          // nccl-tests definitions (hardware_specs.md B1)
  // What one rank moves over each link class (for contention): per direction, the busier one -- equal to what
  // it sends for rings, trees and all-to-all; for NVLS all-gather it is what the rank receives.
  double bytes_per_rank_nvlink = 0, bytes_per_rank_nic = 0;
  int sm_count = 0;             // SMs (CTAs/channels) the collective kernel occupies while it runs (NVLS fewer)
  // What limits it: "latency" (latency_s > bandwidth_time_s), else "nvlink" | "nic" | "nvls_switch" (NVLS
  // in-switch reduction, nvlsEfficiency) | "protocol" (LL/LL128 overhead or cap) | "channel_cap" (an NCCL
  // per-channel bandwidth cap, e.g. perChMaxTreeBw, perChMaxNVLSTreeBw).
  std::string bound_by;
  // The calibration has a measured fit for this op and group that was not applied because the model chose NVLS
  // (apply_measured_nccl): the report says so once.
  bool measured_fit_skipped_for_nvls = false;
};

struct CollectiveOptions {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::auto_select;
  bool nvls_enabled = true;     // NCCL_NVLS_ENABLE
  // Added beside the agreed API (defaulted, so existing callers are unaffected): force NCCL_PROTO.
  CollectiveProtocol protocol = CollectiveProtocol::auto_select;
};

// Cost of one collective of `bytes` (nccl-tests size) over the communicator `g`.
// Throws std::invalid_argument when the requested algorithm/protocol cannot run for this op, group or
// system (the message says why), when the group does not fit the system, or when bytes < 0.
// ranks <= 1 or bytes == 0 cost nothing (time 0).
CollectiveCost estimate_collective(const SystemSpec& sys, CollectiveOp op, double bytes, const GroupPlacement& g,
                                   const CollectiveOptions& opt = {});

// An MoE token exchange (dispatch or combine) over an expert-parallel group: every rank routes `tokens`
// tokens of `token_bytes` each to top_k experts spread evenly over the group (balanced routing).
//  - plain (Megatron's alltoall dispatcher): an NCCL all-to-all of tokens · top_k · token_bytes, one copy
//    per (token, expert) pair;
//  - hierarchical (DeepEP, HybridEP): a token crosses the NICs once per remote NVLink domain holding one of
//    its experts, then is forwarded over NVLink to each GPU there holding one (one copy per GPU); the NIC
//    and NVLink legs are pipelined (chunked), so the slower leg sets the time, each at the library's measured rate
//    (expert_link_efficiency).
// max_domains > 0 is node-limited routing (DeepSeek-V3: at most 4 nodes per token): a token's experts lie in
// that many domains, which bounds the distinct domains (and GPUs) it reaches. Expected distinct domains and
// GPUs are those of top_k distinct experts drawn evenly among the reachable ones (`experts` known; else top_k
// draws with replacement): balanced routing. Group-limited gating picks its domains by their best experts, so
// nearly every chosen domain receives one: under a node limit the real count is nearer max_domains (DeepSeek-V3,
// 8 experts over 4 of 8 domains: 3.63 here, up to 4), i.e. these NIC bytes may be up to ~10% low.
struct ExpertExchange {
  double tokens = 0;
  double token_bytes = 0;
  int top_k = 1;
  int max_domains = 0;
  int experts = 0;  // routed experts, spread evenly over the group's GPUs (0: unknown; draws with replacement)
  // Group-limited routing (DeepSeek-V3's router: the experts in `groups` contiguous groups, a token's top_k chosen
  // within its `group_top_k` best groups). Counted where max_domains is 0 and the groups lie on whole GPUs or
  // domains (or whole GPUs and domains on groups); 1: a plain top-k router.
  int groups = 1;
  int group_top_k = 1;
  ExpertLibrary library = ExpertLibrary::nccl;  // nccl: plain; deepep, hybridep: hierarchical
  bool hierarchical() const { return library != ExpertLibrary::nccl; }
};
// The rates DeepEP's and HybridEP's normal kernels were measured to sustain, as fractions of the link's
// nominal rate per direction: on NVLink, of the bytes a GPU receives (its own share included, as the
// libraries' tests count them); on the NIC, of the bytes it sends to other domains. nccl: {0, 0} (unused).
// nvlink_peers: the group's ranks in one NVLink domain. DeepEP serves up to kDeepEpMaxNvlinkPeers NVLink
// peers officially ("does not officially support scenarios where the NVLink domain is larger than 8",
// NVIDIA/Megatron-LM@79e8592b docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md
// line 108); a larger domain (EP 32 on GB200 NVL72) runs a community multi-node-NVLink path, measured slower.
struct ExpertLinkEfficiency {
  double nvlink = 0, nic = 0;
};
inline constexpr int kDeepEpMaxNvlinkPeers = 8;
ExpertLinkEfficiency expert_link_efficiency(ExpertLibrary library, int nvlink_peers);
// The expected distinct domains and GPUs one token reaches, and the per-rank bytes on each link class. A token's
// top-k experts are distinct: with the expert count known, the GPUs (domains) it reaches are counted as k draws
// without replacement among the experts of the domains it may reach (a hypergeometric miss probability).
struct ExpertExchangeVolume {
  double domains = 0, remote_domains = 0, gpus = 0;
  double nic_bytes = 0, nvlink_bytes = 0;
};
ExpertExchangeVolume expert_exchange_volume(const SystemSpec& sys, const GroupPlacement& g, const ExpertExchange& x);
// The expected bins (GPUs, domains) of `bins` that a token's `top_k` distinct experts reach when `experts` of them lie
// evenly over the bins: a bin is missed with probability C(E - E/n, k) / C(E, k). With fewer than k experts known
// (experts < top_k, e.g. 0: unknown), k uniform draws with replacement.
double expected_bins_reached(double experts, double bins, int top_k);
// The same under group-limited routing: the `experts` lie in `groups` equal groups laid contiguously over the `bins`
// (also contiguous), a token picks `group_top_k` of the groups (uniformly: balanced routing) and its `top_k` distinct
// experts among theirs. A bin is missed when the groups it touches that are picked leave the k experts none of their
// experts in the bin: exact for any alignment of bins and groups (a sum over how many of the bin's whole groups and
// which of its partial ones are picked). No limit (groups <= 1, group_top_k >= groups), experts that do not divide
// into the groups or the bins, or fewer candidate experts than top_k: expected_bins_reached(experts, bins, top_k).
double expected_bins_reached_grouped(double experts, double bins, int top_k, int groups, int group_top_k);
// The expected rows added to round a count of routed tokens up to a multiple of `align` (Megatron-Core's
// pad_routing_map for quantized expert GEMMs): the count is Binomial(tokens, p), p = top_k / experts under balanced
// routing (each token's k distinct experts), and the mean of (-count) mod align over it (a normal approximation summed
// over the integers within 8 sigma; the count's mean rounded when sigma < 0.5; (align - 1) / 2 when sigma > 4 align).
double expected_alignment_padding(double tokens, double p, int align);
// Megatron-Core's forced load balancing (--moe-router-force-load-balancing) routes on random normal logits
// (moe_utils.py RandomSTE): each token takes top_k distinct experts uniformly at random, so an EP rank's received
// copies vary around the mean. The expected busiest of the `ep` ranks over the mean, for `tokens` tokens routed in the
// EP group (every rank's own) over `experts` experts: 1 + z(ep) sigma / mu, where a token's count at a rank of L = E/ep
// experts is hypergeometric (mean kL/E, variance k (L/E)(1 - L/E)(E - k)/(E - 1)) and z(n) is the expected maximum of n
// standard normals. 1 for ep 1.
double random_routing_busiest_load(double tokens, int experts, int top_k, int ep);
// E[max of n independent standard normals] (numerically integrated; 0 for n = 1).
double expected_max_of_normals(int n);
// The expected distinct NVLink domains and GPUs a token's top-k experts reach on an EP group of `gpus` GPUs over
// `domains` domains, under its router's limit: node-limited (max_domains > 0, the experts drawn among the allowed
// domains'), group-limited (groups > 1, among the picked groups'), the tighter where both are set (they agree where
// the groups are the domains), else uniform. One rule for the exchanges' bytes and the permutations' rows.
struct ExpertReach {
  double domains = 1, gpus = 1;
};
ExpertReach expected_expert_reach(int experts, int gpus, int domains, int top_k, int max_domains, int groups,
                                  int group_top_k);
CollectiveCost estimate_expert_exchange(const SystemSpec& sys, const GroupPlacement& g, const ExpertExchange& x,
                                        const CollectiveOptions& opt = {});

// Device memory an expert-exchange library holds for an EP group of `ep` ranks exchanging tokens of `hidden`
// elements, allocated at the first exchange and kept for the run. DeepEP (normal mode, as Megatron-Core's
// fused_a2a.py get_buffer sizes it): its NVLink and RDMA buffers from the larger of the dispatch and combine configs'
// size hints. HybridEP: its NVLink-side buffers, the shared dispatch/combine token and probability buffers and its
// scale buffer (an EP group across NVLink domains also holds RDMA buffers, not counted) for `tokens_per_rank` tokens from each of the ep ranks, `experts_per_rank` experts on each of the
// `ranks_per_domain` ranks of a domain. 0 for NCCL (its buffers are in the preset's memory.reserved).
double expert_library_buffer_bytes(ExpertLibrary library, double hidden, int ep, double tokens_per_rank = 0,
                                   double experts_per_rank = 0, int ranks_per_domain = 0);
// DeepEP's normal mode has a config for these EP sizes only (deep_ep/buffers/legacy.py: "Unsupported number of EP
// ranks" otherwise): 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144, 160.
bool deepep_supports_ep(int ep);

// nccl-tests busbw factor (hardware_specs.md B1): all_reduce 2(n-1)/n; all_gather, reduce_scatter,
// all_to_all (n-1)/n; broadcast, send_recv 1.
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace racksim::hw
