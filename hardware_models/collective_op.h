// The collective operations racksim models (DESIGN.md's OP), with their one name table. Its own
// header so that the graph (workloads/op_graph.h) names a collective without the cost model.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/names.h"

namespace racksim::hw {

enum class CollectiveOp : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };

inline constexpr std::array<sim::EnumName<CollectiveOp>, 6> kCollectiveOpNames = {{
    {CollectiveOp::all_reduce, "all_reduce"},
    {CollectiveOp::all_gather, "all_gather"},
    {CollectiveOp::reduce_scatter, "reduce_scatter"},
    {CollectiveOp::all_to_all, "all_to_all"},
    {CollectiveOp::broadcast, "broadcast"},
    {CollectiveOp::send_recv, "send_recv"},
}};

// Which library moves an MoE token exchange (workloads: training.moe.dispatcher): NCCL's all-to-all (one copy
// per token and expert), or DeepEP's / HybridEP's hierarchical kernels, each at its own measured link rates
// (hw::expert_link_efficiency).
enum class ExpertLibrary : uint8_t { nccl, deepep, hybridep };

std::string to_string(CollectiveOp op);                                     // "all_reduce", ...
std::optional<CollectiveOp> collective_op_from_string(std::string_view s);  // nullopt: not one racksim models

}  // namespace racksim::hw
