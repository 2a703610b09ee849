// Time of one GPU kernel on the unit that runs it: tensor cores at the dtype's dense peak,
// CUDA cores for element-wise work, HBM for its bytes. The engine turns the two terms into
// demands on shared resources (SMs, HBM), so contention with copies and collectives emerges.
#pragma once

#include "hardware_models/system_spec.h"

namespace racksim::hw {

struct KernelWork {
  bool tensor_core = false;
  sim::Dtype dtype = sim::Dtype::bf16;
  double flops = 0;
  double hbm_bytes = 0;
  double m = 0, n = 0, k = 0;  // GEMM shape, zeros otherwise
  int batch = 1;
  double sfu_ops = 0;          // exponentials (softmax) on the special-function units
  double thread_bytes = 0;     // operand bytes per thread of a register-tiled row kernel (0: none)
  double loop_indices = 0;     // output indices of an XLA loop-emitter kernel (0: none)
  // fused (flash) attention: 0 none, 1 forward, 2 backward; its mask and key length
  int attention = 0;
  bool attention_causal = true;
  bool attention_mla = false;  // multi-latent attention's core: at gpu.mla_attention_*_rate of the fitted rate
  double attention_seq = 0;
  // A GEMM whose epilogue adds into an fp32 output (a weight gradient accumulated into the fp32 main gradient):
  // m x n elements cost gpu.wgrad_accumulate_serial_bytes each at the HBM rate beyond the GEMM's own time.
  bool accumulate_fp32 = false;
  // The same into a 16-bit output (Megatron's main gradient under --fp16 or --grad-reduce-in-bf16):
  // gpu.wgrad_accumulate_serial_bytes_16bit per element.
  bool accumulate_16bit = false;
  // A weight-gradient GEMM: in fp8 at gpu.fp8_wgrad_rate_factor of the fp8 GEMM rate (the blockwise recipe's wgrad).
  bool wgrad = false;
  // A weight-gradient GEMM in Transformer Engine's layout: in bf16 gpu.bf16_wgrad_nt_time_ratio times the TN product.
  bool wgrad_te_layout = false;
  // Transformer Engine's fused causal softmax over rows of attention_seq scores: 1 forward, 2 backward; at
  // gpu.te_softmax_{forward,backward}_GBps where the GPU has that measurement.
  int te_softmax = 0;
};

struct KernelTiming {
  double compute_s = 0;     // with all SMs, at the unit's achievable rate
  double hbm_bytes = 0;     // bytes through HBM
  double min_s = 0;         // a kernel never finishes faster than this
  double efficiency = 1.0;  // achieved fraction of the datasheet peak used for compute_s
  bool sfu_bound = false;   // exponentials, not matmuls, bound the compute time
  bool occupancy_bound = false;  // a row kernel's loads in flight, not HBM, bound its time
  bool index_bound = false;      // a loop kernel's output indices, not HBM, bound its time
};

// The large-shape (ceiling) efficiency of the dtype: the preset's cited MAMF figure, or the
// measured ceiling when the calibration of this very device is applied.
double matmul_efficiency(const SystemSpec& sys, sim::Dtype d);

// Megatron's blockwise FP8 recipe (training.fp8_recipe blockwise) on this system: each 128-deep block's partial sum is
// promoted on the CUDA cores, so the fp8 GEMM ceiling is the per-tensor one times gpu.fp8_blockwise_rate_ratio (the
// forward and dgrad: activation 1x128, weight 128x128), a weight gradient's (both operands 1x128) times
// gpu.fp8_blockwise_wgrad_rate_ratio, and a weight gradient's fp32 accumulate costs
// gpu.wgrad_accumulate_serial_bytes_fp8_blockwise (a slower main loop hides more of its epilogue). A figure the preset
// does not give leaves the per-tensor one (for the forward's rate the graph's notes say so).
void apply_fp8_blockwise_recipe(SystemSpec& sys);

// Bytes per output element a weight-gradient GEMM of this dtype pays at the HBM rate to accumulate into the fp32 main
// gradient (gpu.wgrad_accumulate_serial_bytes*), or with `main_grad_16bit` into a 16-bit one (Megatron's --fp16 or
// --grad-reduce-in-bf16): gpu.wgrad_accumulate_serial_bytes_16bit, or where the preset has none,
// kWgradAccumulate16bitFraction of the dtype's fp32 figure.
double wgrad_accumulate_serial_bytes(const SystemSpec& sys, sim::Dtype d, bool main_grad_16bit = false);
// The 16-bit accumulate's cost over the fp32 one's: the epilogue's read of C and write of D at 2 bytes instead of 4.
// Measured on an H100 through PyTorch's cuBLASLt path (calibration/data/h100-2026-12-07-wgrad-16bit-accumulate: bf16 and
// fp16 C = D in place against fp32 C = D, least squares through the origin over 34 points of 4,096 or more tokens): bf16
// 0.48 (runs 0.51, 0.46), fp16 0.23 (0.01, 0.38), the two pooled 0.36; a 1-3% effect within the card's power-state
// spread, consistent with the bytes' 0.5, which stands.
inline constexpr double kWgradAccumulate16bitFraction = 0.5;

// A bf16 weight-gradient GEMM of depth `tokens` in Transformer Engine's NT layout against the TN product of the same
// shape: gpu.bf16_wgrad_nt_time_ratio interpolated in log2(tokens), flat beyond its ends; 1 where not given.
// kernel_timing applies it to a KernelWork::wgrad_te_layout bf16 GEMM on a calibrated bf16 shape curve (TN) only.
double bf16_wgrad_nt_time_ratio(const SystemSpec& sys, double tokens);
// The rate (bytes/s) of Transformer Engine's fused causal softmax (KernelWork::te_softmax) over rows of `seq` scores:
// gpu.te_softmax_forward/backward_GBps interpolated in log2(seq), flat beyond the ends; 0 where the GPU has no
// measurement (the row-kernel bound of thread_bytes applies instead, and the graph's notes say so).
double te_softmax_rate_Bps(const SystemSpec& sys, int direction, double seq);

// Efficiency of one GEMM: with a calibration that measured this dtype, the ceiling times the
// calibrated shape factor (docs/calibration.md); otherwise the ceiling for every shape.
double gemm_efficiency(const SystemSpec& sys, const KernelWork& w);

// Smallest GPU-side duration of a kernel: back-to-back empty kernels replayed from a CUDA
// graph on the project H200 took 1.02 us each (shared reference h200/microbench_torch.json
// launch.graph_us_per_kernel). A calibration whose launch figures apply replaces it with its
// own measurement (launch.min_kernel_duration).
inline constexpr double kMinKernelDuration_s = 1.02e-6;
double min_kernel_duration(const SystemSpec& sys);

// A fused attention kernel (attention != 0) runs at the calibrated flash efficiency
// e_max / (1 + s0 / S) of its direction and mask when the calibration of this architecture has
// one (docs/calibration.md, "Attention"); otherwise at the GEMM efficiency.
// A register-tiled row kernel (XLA's Triton softmax/norm fusions) holds `thread_bytes` of
// operands per thread: the bigger that is, the fewer warps fit on an SM and the fewer loads are
// in flight, so its bandwidth is at most k / thread_bytes (Little's law; k calibrated per
// architecture, docs/calibration.md "Row kernels"). That bound is charged as SM time, since the
// SMs, not HBM, are what it waits on. Without an applied calibration: no bound.
// A kernel of XLA's loop emitter covers `loop_indices` output indices, one thread each, and no GPU
// runs them faster than the measured index rate of its architecture, whatever few bytes each moves
// (docs/calibration.md, "Loop fusions"): t >= indices / rate, also charged as SM time.
KernelTiming kernel_timing(const SystemSpec& sys, const KernelWork& w);

}  // namespace racksim::hw
