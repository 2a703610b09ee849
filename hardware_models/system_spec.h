// The resolved description of one system preset (hardware_models/presets/NAME.yaml):
// what a GPU, its host link, its NVLink domain and its NIC can do. Values are in SI base
// units (bytes, seconds, bytes/s, FLOP/s) and every field names its unit. Every value comes
// from a cited datasheet fact or a committed measurement; `sources` maps the dotted YAML path
// of each field to its citation.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/names.h"

namespace racksim::hw {

// The most GPUs one job (or one communicator) may have (docs/decisions.md, "Input limits"):
// ten times the largest clusters built so far (about 100,000 GPUs), and small enough that rank
// arithmetic in int cannot overflow. Checked where a count is read: scenario, --gpus, HLO.
inline constexpr int kMaxGpus = 1 << 20;  // 1,048,576

enum class Architecture { hopper, blackwell, blackwell_ultra };
inline constexpr std::array<sim::EnumName<Architecture>, 3> kArchitectureNames = {
    {{Architecture::hopper, "hopper"}, {Architecture::blackwell, "blackwell"}, {Architecture::blackwell_ultra, "blackwell_ultra"}}};
std::string to_string(Architecture a);

struct Calibration;  // hardware_models/calibration.h
enum class HostLinkKind { pcie_gen5_x16, pcie_gen6_x16, nvlink_c2c };
inline constexpr std::array<sim::EnumName<HostLinkKind>, 3> kHostLinkKindNames = {
    {{HostLinkKind::pcie_gen5_x16, "pcie_gen5_x16"}, {HostLinkKind::pcie_gen6_x16, "pcie_gen6_x16"}, {HostLinkKind::nvlink_c2c, "nvlink_c2c"}}};
std::string to_string(HostLinkKind k);

struct GpuSpec {
  std::string model;                   // "H200 SXM"
  Architecture architecture = Architecture::hopper;
  int sm_count = 0;
  double tensor_clock_hz = 0;          // clock at which the datasheet peaks are computed
  // Dense tensor-core peak per dtype (absent: the GPU has no tensor cores for it).
  std::map<sim::Dtype, double> peak_dense_flops_per_s;
  double vector_fp32_flops_per_s = 0;  // CUDA cores: element-wise work
  double sfu_exp_per_s = 0;            // special-function (exp) rate; 0 = not given
  // Achieved fraction of the dense peak for large GEMMs, per dtype (MAMF); calibration refines
  // it by GEMM shape.
  std::map<sim::Dtype, double> matmul_efficiency;
  double hbm_efficiency = 1.0;         // achieved / datasheet HBM bandwidth for streaming kernels
  // GEMM rates one source measured the same way on several GPUs (same shapes, long warm-up: the card at its
  // power limit), per dtype and "MxNxK" shape. A calibration carries its measured ceiling to another
  // architecture by the ratio of these on the two GPUs (docs/decisions.md, "GEMM ceiling across architectures").
  std::string sustained_gemm_source;   // the source's tag: only figures of one source are compared
  std::map<sim::Dtype, std::map<std::string, double>> sustained_gemm_flops_per_s;
  // A collective's time / its standalone time while compute kernels are resident on the GPU (>= 1).
  double collective_slowdown_beside_compute = 1.0;
  // Blockwise-scaled FP8 GEMM throughput (1x128 activation tiles, 128x128 weight blocks) / per-tensor-scaled
  // FP8 at the same shape; 0 = not given (such GEMMs then run at the per-tensor rate).
  double fp8_blockwise_rate_ratio = 0;
  // The same for a weight gradient, whose two operands (activations, output gradients) are both scaled 1x128 where the
  // forward's weight is scaled in 128x128 blocks (0 = as fp8_blockwise_rate_ratio). Applied through fp8_wgrad_rate_factor,
  // the fp8 wgrad's rate over the fp8 ceiling (1 but under the blockwise recipe: hw::apply_fp8_blockwise_recipe).
  double fp8_blockwise_wgrad_rate_ratio = 0;
  double fp8_wgrad_rate_factor = 1.0;
  // Multi-latent attention's core (query/key head dim 192, value head dim 128, DeepSeek-V3) in the fused attention
  // kernel: its rate per FLOP against the head-dim-128 rate the attention model is fitted on, forward and backward
  // (1 = the same; measured on Hopper's cuDNN kernels).
  double mla_attention_forward_rate = 1.0;
  double mla_attention_backward_rate = 1.0;
  // A weight-gradient GEMM that accumulates into an fp32 main gradient in its epilogue (D = C + dY^T X with fp32 C
  // and D: Transformer Engine's fused wgrad accumulation, Megatron's --gradient-accumulation-fusion) runs longer
  // than the same GEMM writing bf16 by this many bytes per output element at the HBM rate: the part of the epilogue's
  // fp32 read and write the main loop does not hide. 0 = not measured (no such cost). The figure depends on the
  // kernel family: bf16 operands (Transformer Engine's NT layout) here; per-tensor fp8 operands (TN) and fp8 with
  // 1x128 block scales (the blockwise recipe's wgrad) apart; < 0: as the figure above them (the fp8 one for blockwise).
  double wgrad_accumulate_serial_bytes = 0;
  double wgrad_accumulate_serial_bytes_fp8 = -1;
  double wgrad_accumulate_serial_bytes_fp8_blockwise = -1;
  // The same into a 16-bit main gradient (Megatron's --fp16 or --grad-reduce-in-bf16: D = C + dY^T X with 16-bit
  // C = D); < 0: half the operands' fp32 figure (hw::kWgradAccumulate16bitFraction: the epilogue's bytes).
  double wgrad_accumulate_serial_bytes_16bit = -1;
  // A bf16 weight-gradient GEMM in Transformer Engine's layout (NT: both operands tokens-major, as TE's Linear and
  // GroupedLinear pass them) takes this times the TN product of the same shape, the layout the GEMM shape curve is
  // fitted on; by the GEMM's depth K (its tokens), as (tokens, ratio) points sorted by tokens, interpolated in
  // log2(tokens) and held flat beyond the ends; empty = 1 (not measured). hw::bf16_wgrad_nt_time_ratio.
  std::vector<std::pair<double, double>> bf16_wgrad_nt_time_ratio;
  // Transformer Engine's fused causal softmax (scaled_upper_triang_masked_softmax, as TE's unfused attention runs it):
  // the rate, in GB/s, at which it moves the bytes racksim charges it (1.5 x 2 bytes a score forward, 2 x 2 backward),
  // by the row length S, as (S, GB/s) points sorted by S, interpolated in log2(S); empty = not measured on this GPU.
  // hw::te_softmax_rate_Bps.
  std::vector<std::pair<double, double>> te_softmax_forward_GBps, te_softmax_backward_GBps;
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth_Bps = 0;
  double l2_cache_bytes = 0;
  double tdp_watts = 0;
};

struct LaunchSpec {
  double eager_kernel_launch_s = 0;    // host CPU time per cudaLaunchKernel (serializes)
  double graph_kernel_launch_s = 0;    // per kernel node when replaying a CUDA graph
  double graph_launch_s = 0;           // fixed cost of one cudaGraphLaunch
  // GPU time of an eagerly launched kernel's boundary beyond a CUDA graph node's, paid even when the host has
  // queued it long before (the stream front end; calibration/data/h200-2026-12-03-kernel-gap). 0: not modelled.
  double eager_kernel_gap_s = 0;
  // XLA's GPU runtime (HLO replay only; 0 = not modelled): a fixed host cost per program
  // execution, per command of each command-buffer execution, and per buffer reference when a
  // command buffer is re-recorded because its buffers moved. Set by a calibration.
  double xla_program_s = 0;
  double xla_command_s = 0;
  double xla_rerecord_ref_s = 0;
  double xla_thunk_launch_s = 0;       // per kernel with command buffers off (XLA's thunk executor)
  double xla_thunk_program_s = 0;      // per program execution with command buffers off
  // Megatron-Core in eager mode (no CUDA graphs): the host's own work per transformer layer and
  // micro-batch (Python module code, the PyTorch dispatcher, autograd, kernel launches), spread over
  // the layer's ops; an MoE layer adds the router's, token dispatcher's and permutation's. 0: not
  // modelled (only eager_kernel_launch per op). Measured, calibration/data/h200-2026-12-01-megatron-host.
  double megatron_layer_forward_s = 0;
  double megatron_layer_backward_s = 0;
  double megatron_moe_forward_s = 0;
  double megatron_moe_backward_s = 0;
  // The parts of megatron_moe_forward_s that Megatron's fused router (--moe-router-fusion) and fused
  // permutation (--moe-permute-fusion) replace with a kernel each.
  double megatron_moe_routing_s = 0;
  double megatron_moe_permutation_s = 0;
  // Transformer Engine's grouped GEMM (Megatron-Core's TEGroupedMLP: GroupedLinear), which the figures above
  // leave out (measured with a dense MLP standing in for the experts): the host issues one cuBLASLt GEMM per
  // local expert, each with descriptors and a heuristic query built anew, plus per-expert PyTorch views and
  // wgrad placeholders (te_grouped_gemm_s, per GEMM), and the four compute streams' events once per grouped call
  // (te_grouped_call_s). It replaces the one dense GEMM dispatch per call that the layer figures hold
  // (megatron_gemm_dispatch_s: a torch.mm call's host time). 0: not modelled.
  // Measured, calibration/data/h200-2026-12-03-te-grouped-gemm-host.
  double te_grouped_gemm_s = 0;
  double te_grouped_call_s = 0;
  double megatron_gemm_dispatch_s = 0;
  // Megatron-Core's DistributedDataParallel wrapper, which the layer figures above leave out (measured on a bare
  // block): its hook on every parameter's gradient accumulator, per parameter tensor and backward (autograd's call
  // into Python and the hook's body): for a GEMM weight whose gradient Transformer Engine already accumulated into
  // main_grad (no add; megatron_ddp_grad_hook_s), and for a parameter whose gradient the hook adds into main_grad (a
  // norm's or the router's weight; megatron_ddp_grad_hook_add_s, the add's launch included); and under
  // --overlap-param-gather its forward pre-hook on every module, per module called in a forward (the module call's
  // path with hooks and the hook's walk over the module's own parameters) plus per own parameter walked. 0: not
  // modelled. Measured, calibration/data/h200-2026-12-05-megatron-ddp-host.
  double megatron_ddp_grad_hook_s = 0;
  double megatron_ddp_grad_hook_add_s = 0;
  double megatron_ddp_module_prehook_s = 0;
  double megatron_ddp_param_prehook_s = 0;
  // torch.distributed's host path per NCCL call that Megatron-Core (or Transformer Engine without userbuffers) issues
  // from Python, which the layer figures above leave out (measured at TP = EP = 1, where no collective is issued): the
  // output's allocation, ProcessGroupNCCL's work object, its events and stream waits, and NCCL's enqueue; per
  // all-gather, reduce-scatter or all-to-all call (torch_nccl_collective_s), per all-reduce (torch_nccl_all_reduce_s,
  // in place, no output), and per batch_isend_irecv of one send and one receive with both waits
  // (torch_nccl_p2p_pair_s). Measured on one rank, where NCCL skips its planner (enqueue.cc, ncclLaunchOneRank): a
  // lower bound for larger groups. 0: a bare launch. Measured, calibration/data/h100-2026-12-05-torch-nccl-call-host.
  double torch_nccl_collective_s = 0;
  double torch_nccl_all_reduce_s = 0;
  double torch_nccl_p2p_pair_s = 0;
  // Megatron-Core's pipeline schedule per model chunk (virtual stage) and micro-batch, beyond the layers' figures
  // above (measured on a bare block): schedules.forward_step and backward_step and the wrappers training runs
  // around the block (DistributedDataParallel, Float16Module, GPTModel's pre- and postprocess), once per chunk's
  // forward and backward, whatever its layers. Dense and MoE (the aux-loss scale MoE models set per micro-batch)
  // apart. Measured as the median paired difference between a chunk and its bare block, alternated
  // (calibration/data/h200-2026-12-05-megatron-chunk-paired): forward 130 us dense, 261 us MoE; backward 0 (an earlier
  // fit of intercepts, calibration/data/h100-2026-12-05-megatron-chunk-host, could not resolve them from 0). 0: none.
  double megatron_chunk_forward_s = 0;
  double megatron_chunk_backward_s = 0;
  double megatron_moe_chunk_forward_s = 0;
  double megatron_moe_chunk_backward_s = 0;
  // One call of Megatron-Core's nvtx_range_push or nvtx_range_pop in the versions that name the range from the
  // caller's frame (inspect.getframeinfo, inspect.getmodule) before checking whether NVTX profiling is on: Megatron-LM
  // from 7f9f2bf750 (2025-05-16, "Add NVTX ranges") to 158951764f (2025-06-09, "Fix perf issues with NVTX range
  // profiling"). Charged only where the scenario says its Megatron is one of them (training.megatron_nvtx_lookup).
  // Measured, calibration/data/h100-2026-12-05-megatron-nvtx-host.
  double megatron_nvtx_range_s = 0;
  // DeepSeek-V3's parts of a layer beyond what the figures above hold (their dense layer: a standard attention and an
  // MLP; their MoE layer: a softmax top-k router with an aux loss and no shared expert): multi-latent attention's own
  // host work per layer forward and backward (its down and up projections, latent norms, the split rope, the
  // concatenations); a group-limited router as DeepSeek-V3's recipe runs it (sigmoid scores in fp32 with an expert
  // bias, group top-k, the sequence-level aux loss), which --moe-router-fusion and a captured router replace; a shared
  // expert's MLP. 0: not modelled. Measured, calibration/data/h100-2026-12-05-megatron-dsv3-host.
  double megatron_mla_forward_s = 0;
  double megatron_mla_backward_s = 0;
  double megatron_group_router_forward_s = 0;
  double megatron_group_router_backward_s = 0;
  double megatron_shared_expert_forward_s = 0;
  double megatron_shared_expert_backward_s = 0;
};

// Every host figure of LaunchSpec by its preset key (launch.<name>): the preset reader, the override resolver and the
// report's resolved record walk this one list. `required`: a preset must give it; the others are 0 (not modelled)
// when absent.
struct LaunchField {
  const char* name;
  double LaunchSpec::*member;
  bool required;
};
inline constexpr std::array<LaunchField, 36> kLaunchFields = {{
    {"eager_kernel_launch", &LaunchSpec::eager_kernel_launch_s, true},
    {"graph_kernel_launch", &LaunchSpec::graph_kernel_launch_s, true},
    {"graph_launch", &LaunchSpec::graph_launch_s, true},
    {"eager_kernel_gap", &LaunchSpec::eager_kernel_gap_s, false},
    {"xla_program", &LaunchSpec::xla_program_s, false},
    {"xla_command", &LaunchSpec::xla_command_s, false},
    {"xla_rerecord_ref", &LaunchSpec::xla_rerecord_ref_s, false},
    {"xla_thunk_launch", &LaunchSpec::xla_thunk_launch_s, false},
    {"xla_thunk_program", &LaunchSpec::xla_thunk_program_s, false},
    {"megatron_layer_forward", &LaunchSpec::megatron_layer_forward_s, false},
    {"megatron_layer_backward", &LaunchSpec::megatron_layer_backward_s, false},
    {"megatron_moe_forward", &LaunchSpec::megatron_moe_forward_s, false},
    {"megatron_moe_backward", &LaunchSpec::megatron_moe_backward_s, false},
    {"megatron_moe_routing", &LaunchSpec::megatron_moe_routing_s, false},
    {"megatron_moe_permutation", &LaunchSpec::megatron_moe_permutation_s, false},
    {"te_grouped_gemm", &LaunchSpec::te_grouped_gemm_s, false},
    {"te_grouped_call", &LaunchSpec::te_grouped_call_s, false},
    {"megatron_gemm_dispatch", &LaunchSpec::megatron_gemm_dispatch_s, false},
    {"megatron_ddp_grad_hook", &LaunchSpec::megatron_ddp_grad_hook_s, false},
    {"megatron_ddp_grad_hook_add", &LaunchSpec::megatron_ddp_grad_hook_add_s, false},
    {"megatron_ddp_module_prehook", &LaunchSpec::megatron_ddp_module_prehook_s, false},
    {"megatron_ddp_param_prehook", &LaunchSpec::megatron_ddp_param_prehook_s, false},
    {"torch_nccl_collective", &LaunchSpec::torch_nccl_collective_s, false},
    {"torch_nccl_all_reduce", &LaunchSpec::torch_nccl_all_reduce_s, false},
    {"torch_nccl_p2p_pair", &LaunchSpec::torch_nccl_p2p_pair_s, false},
    {"megatron_chunk_forward", &LaunchSpec::megatron_chunk_forward_s, false},
    {"megatron_chunk_backward", &LaunchSpec::megatron_chunk_backward_s, false},
    {"megatron_moe_chunk_forward", &LaunchSpec::megatron_moe_chunk_forward_s, false},
    {"megatron_moe_chunk_backward", &LaunchSpec::megatron_moe_chunk_backward_s, false},
    {"megatron_nvtx_range", &LaunchSpec::megatron_nvtx_range_s, false},
    {"megatron_mla_forward", &LaunchSpec::megatron_mla_forward_s, false},
    {"megatron_mla_backward", &LaunchSpec::megatron_mla_backward_s, false},
    {"megatron_group_router_forward", &LaunchSpec::megatron_group_router_forward_s, false},
    {"megatron_group_router_backward", &LaunchSpec::megatron_group_router_backward_s, false},
    {"megatron_shared_expert_forward", &LaunchSpec::megatron_shared_expert_forward_s, false},
    {"megatron_shared_expert_backward", &LaunchSpec::megatron_shared_expert_backward_s, false},
}};

struct HostSpec {
  HostLinkKind link = HostLinkKind::pcie_gen5_x16;
  int gpus_per_link = 1;                       // 2 on a Grace superchip (C2C shared)
  double link_bandwidth_per_direction_Bps = 0; // datasheet, per link
  double link_bandwidth_both_directions_Bps = 0; // total when both directions stream
  double copy_efficiency = 1.0;                // achieved/datasheet for large pinned copies (measured)
  int gpus_per_host = 8;                       // GPUs that share one host's memory
  double memory_capacity_bytes = 0;            // host memory per host
  double memory_bandwidth_Bps = 0;             // host memory bandwidth per host (caps C2C traffic)
  // How fast this host runs the framework's host work (Python, PyTorch's dispatcher and autograd, the driver's launch
  // path, XLA's runtime) relative to the host the preset's launch figures describe: every launch.* figure but
  // eager_kernel_gap (the GPU's front end) is divided by it, after overrides and calibration (apply_framework_speed).
  // 1: the figures as given. A what-if for another host CPU (`--set system.overrides.host.framework_speed=2`).
  double framework_speed = 1.0;
  // The GPUs of a job of `job_gpus` that share one host's memory (its capacity and bandwidth): a job smaller than a
  // host has the host to fewer.
  int gpus_sharing_memory(int job_gpus) const { return std::max(1, std::min(gpus_per_host, job_gpus)); }
};

struct ScaleUpSpec {
  int nvlink_generation = 4;
  double bandwidth_per_direction_Bps = 0;      // per GPU, all links together
  int domain_size = 8;                         // GPUs in one NVLink domain
  bool nvswitch = true;
  bool nvls = false;                           // NVLink SHARP (in-switch reduction) supported
};

struct ScaleOutSpec {
  double nic_bandwidth_Bps = 0;                // per NIC, one direction
  int nics_per_gpu = 1;
  // What the NIC's transport sustains for large transfers / its line rate. 1: RDMA (InfiniBand, RoCE), which
  // NCCL's model runs at its channel speed for the line rate. Below 1 for a host-driven path such as
  // GPUDirect-TCPX (A3 High), where NCCL still plans channels for the line rate but the data moves slower.
  double nic_efficiency = 1.0;
};

struct MemorySpec {
  double reserved_bytes = 0;                   // CUDA context, cuBLAS workspace, NCCL buffers
};

struct SystemSpec {
  std::string name;                            // preset name, e.g. "h200-sxm"
  std::string summary;
  GpuSpec gpu;
  LaunchSpec launch;
  HostSpec host;
  ScaleUpSpec scale_up;
  ScaleOutSpec scale_out;
  MemorySpec memory;
  std::map<std::string, std::string> sources; // dotted field path -> citation
  // Applied calibration (system.calibration), null when none: GEMM shape model, fit residuals and
  // the warnings a report shows. Its figures are already written into the fields above.
  std::shared_ptr<const Calibration> calibration;
};

}  // namespace racksim::hw
