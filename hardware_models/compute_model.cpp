#include "hardware_models/compute_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hardware_models/calibration.h"
#include "hardware_models/system_preset.h"

namespace racksim::hw {

double matmul_efficiency(const SystemSpec& sys, sim::Dtype d) {
  auto it = sys.gpu.matmul_efficiency.find(d);
  if (it != sys.gpu.matmul_efficiency.end()) return it->second;
  // tf32 and fp32 have no MAMF figure of their own: bf16's tensor-core efficiency.
  it = sys.gpu.matmul_efficiency.find(sim::Dtype::bf16);
  return it != sys.gpu.matmul_efficiency.end() ? it->second : 1.0;
}

double gemm_efficiency(const SystemSpec& sys, const KernelWork& w) {
  const double ceiling = matmul_efficiency(sys, w.dtype);
  if (!sys.calibration) return ceiling;
  const double peak = peak_flops_per_s(sys, w.dtype);
  if (const GemmModel* g = sys.calibration->gemm_for(w.dtype)) return g->efficiency(w.m, w.n, w.k, w.batch, peak, ceiling);
  // Block-scaled MXFP8 and NVFP4 run on the FP8 tensor-core datapath (the MMA applies the block scales),
  // with the same tiles, prologue and epilogue: unmeasured, they take FP8's measured shape curve under
  // their own ceiling. Its per-output-tile overhead k0 is counted in K elements of the main loop; a
  // main loop r times faster per K element (NVFP4: r = 2 on B200, 3 on B300) makes the same fixed time
  // r times as many K elements. Without this they ran at the ceiling at every shape, faster than FP8.
  if (w.dtype == sim::Dtype::mxfp8 || w.dtype == sim::Dtype::nvfp4) {
    const GemmModel* fp8 = sys.calibration->gemm_for(sim::Dtype::fp8);
    const auto fp8_peak = sys.gpu.peak_dense_flops_per_s.find(sim::Dtype::fp8);
    if (fp8 && fp8_peak != sys.gpu.peak_dense_flops_per_s.end() && fp8_peak->second > 0 && peak > 0)
      return fp8->efficiency(w.m, w.n, w.k, w.batch, peak, ceiling, peak / fp8_peak->second);
  }
  return ceiling;
}

double min_kernel_duration(const SystemSpec& sys) {
  if (sys.calibration && sys.calibration->applied_launch && sys.calibration->launch &&
      sys.calibration->launch->min_kernel_duration_s > 0)
    return sys.calibration->launch->min_kernel_duration_s;
  return kMinKernelDuration_s;
}

namespace {
// A fused attention kernel's rate per FLOP against the fitted head-dim-128 rate: multi-latent attention's core
// (d_qk 192, d_v 128) at its measured share, every other attention at 1.
double attention_head_dims_rate(const SystemSpec& sys, const KernelWork& w) {
  if (!w.attention_mla || w.attention == 0) return 1.0;
  return w.attention == 2 ? sys.gpu.mla_attention_backward_rate : sys.gpu.mla_attention_forward_rate;
}
}  // namespace

double wgrad_accumulate_serial_bytes(const SystemSpec& sys, sim::Dtype d, bool main_grad_16bit) {
  const auto& g = sys.gpu;
  // (The preset's 16-bit figure is for bf16-rate operands; otherwise, and for an fp8-class wgrad, whose own fp32 figure
  // differs, kWgradAccumulate16bitFraction of the fp32 figure.)
  if (main_grad_16bit)
    return d == sim::Dtype::bf16 && g.wgrad_accumulate_serial_bytes_16bit >= 0
               ? g.wgrad_accumulate_serial_bytes_16bit
               : kWgradAccumulate16bitFraction * wgrad_accumulate_serial_bytes(sys, d);
  return d == sim::Dtype::fp8 && g.wgrad_accumulate_serial_bytes_fp8 >= 0 ? g.wgrad_accumulate_serial_bytes_fp8
                                                                          : g.wgrad_accumulate_serial_bytes;
}

namespace {
// A (size, value) table sorted by size, interpolated in log2(size) and held flat beyond its ends; `empty` without points.
double log2_interpolated(const std::vector<std::pair<double, double>>& t, double size, double empty) {
  if (t.empty()) return empty;
  if (size <= t.front().first) return t.front().second;
  if (size >= t.back().first) return t.back().second;
  const auto hi = std::upper_bound(t.begin(), t.end(), size, [](double x, const auto& p) { return x < p.first; });
  const auto lo = hi - 1;
  const double f = std::log2(size / lo->first) / std::log2(hi->first / lo->first);
  return lo->second + f * (hi->second - lo->second);
}
}  // namespace

double bf16_wgrad_nt_time_ratio(const SystemSpec& sys, double tokens) {
  return log2_interpolated(sys.gpu.bf16_wgrad_nt_time_ratio, tokens, 1.0);
}

double te_softmax_rate_Bps(const SystemSpec& sys, int direction, double seq) {
  if (direction == 0) return 0.0;
  return 1e9 * log2_interpolated(direction == 1 ? sys.gpu.te_softmax_forward_GBps : sys.gpu.te_softmax_backward_GBps,
                                 seq, 0.0);
}

void apply_fp8_blockwise_recipe(SystemSpec& sys) {
  auto& g = sys.gpu;
  if (g.fp8_blockwise_rate_ratio > 0) {
    const double before = matmul_efficiency(sys, sim::Dtype::fp8);
    g.matmul_efficiency[sim::Dtype::fp8] = before * g.fp8_blockwise_rate_ratio;
    auto& src = sys.sources["gpu.matmul_efficiency.fp8"];
    src = fmt::format("{} x gpu.fp8_blockwise_rate_ratio {} (training.fp8_recipe blockwise){}", before,
                      g.fp8_blockwise_rate_ratio, src.empty() ? "" : "; before: " + src);
  }
  if (g.fp8_blockwise_wgrad_rate_ratio > 0) {
    const double ratio = g.fp8_blockwise_rate_ratio > 0 ? g.fp8_blockwise_rate_ratio : 1.0;
    g.fp8_wgrad_rate_factor = g.fp8_blockwise_wgrad_rate_ratio / ratio;
  }
  if (g.wgrad_accumulate_serial_bytes_fp8_blockwise >= 0) {
    g.wgrad_accumulate_serial_bytes_fp8 = g.wgrad_accumulate_serial_bytes_fp8_blockwise;
    sys.sources["gpu.wgrad_accumulate_serial_bytes_fp8"] =
        "gpu.wgrad_accumulate_serial_bytes_fp8_blockwise (training.fp8_recipe blockwise)";
  }
}

KernelTiming kernel_timing(const SystemSpec& sys, const KernelWork& w) {
  KernelTiming t;
  t.hbm_bytes = w.hbm_bytes;
  t.min_s = min_kernel_duration(sys);
  if (w.tensor_core && w.attention != 0 && w.attention_seq > 0 && sys.calibration && sys.calibration->applied_attention &&
      sys.calibration->attention) {
    const AttentionCurve& c = sys.calibration->attention->curve(w.attention == 2, w.attention_causal);
    t.efficiency = c.e_max > 0 ? c.e_max / (1.0 + c.s0 / w.attention_seq) : gemm_efficiency(sys, w);
    t.efficiency *= attention_head_dims_rate(sys, w);
    t.compute_s = w.flops / (peak_flops_per_s(sys, sim::Dtype::bf16) * t.efficiency);
  } else if (w.tensor_core) {
    t.efficiency = gemm_efficiency(sys, w);
    t.efficiency *= attention_head_dims_rate(sys, w);
    if (w.wgrad && w.dtype == sim::Dtype::fp8) t.efficiency *= sys.gpu.fp8_wgrad_rate_factor;
    // Transformer Engine's bf16 wgrad layout (NT) against the TN products the calibrated shape curve was measured on
    // (without a curve the efficiency is the preset's cited ceiling, measured in another layout: no ratio); never
    // above the peak.
    if (w.wgrad_te_layout && w.dtype == sim::Dtype::bf16 && sys.calibration && sys.calibration->gemm_for(sim::Dtype::bf16))
      t.efficiency = std::min(1.0, t.efficiency / bf16_wgrad_nt_time_ratio(sys, w.k));
    t.compute_s = w.flops / (peak_flops_per_s(sys, w.dtype) * t.efficiency);
    // The fp32 accumulate's epilogue, in series with the main loop on the same SMs (the tensor cores wait).
    const double hbm_Bps = sys.gpu.hbm_bandwidth_Bps * sys.gpu.hbm_efficiency;
    if ((w.accumulate_fp32 || w.accumulate_16bit) && hbm_Bps > 0)
      t.compute_s += wgrad_accumulate_serial_bytes(sys, w.dtype, w.accumulate_16bit) * w.m * w.n * w.batch / hbm_Bps;
  } else {
    t.compute_s = sys.gpu.vector_fp32_flops_per_s > 0 ? w.flops / sys.gpu.vector_fp32_flops_per_s : 0;
  }
  // Exponentials run on the special-function units, overlapped with the matmuls (FlashAttention-3
  // ping-pong scheduling): the slower of the two bounds the kernel.
  if (w.sfu_ops > 0 && sys.gpu.sfu_exp_per_s > 0) {
    const double sfu_s = w.sfu_ops / sys.gpu.sfu_exp_per_s;
    if (sfu_s > t.compute_s) {
      t.compute_s = sfu_s;
      t.sfu_bound = true;
    }
  }
  // Transformer Engine's fused softmax where measured: a warp per row holding next_pow2(S) / 32 fp32 elements per
  // thread, so its rate falls with S (fewer warps fit). Charged as SM time, as the row-kernel bound below, which it
  // replaces.
  if (const double rate = te_softmax_rate_Bps(sys, w.te_softmax, w.attention_seq); rate > 0 && w.hbm_bytes > 0) {
    const double softmax_s = w.hbm_bytes / rate;
    if (softmax_s > t.compute_s) {
      t.compute_s = softmax_s;
      t.occupancy_bound = true;
      t.sfu_bound = false;
    }
    return t;
  }
  if (w.thread_bytes > 0 && w.hbm_bytes > 0 && sys.calibration && sys.calibration->applied_row_kernels &&
      sys.calibration->row_kernels && sys.calibration->row_kernels->k_Bps_B > 0) {
    const double occupancy_s = w.hbm_bytes * w.thread_bytes / sys.calibration->row_kernels->k_Bps_B;
    if (occupancy_s > t.compute_s) {
      t.compute_s = occupancy_s;
      t.occupancy_bound = true;
      t.sfu_bound = false;
    }
  }
  if (w.loop_indices > 0 && sys.calibration && sys.calibration->applied_loop_fusions && sys.calibration->loop_fusions &&
      sys.calibration->loop_fusions->index_rate_per_s > 0) {
    const double index_s = w.loop_indices / sys.calibration->loop_fusions->index_rate_per_s;
    if (index_s > t.compute_s) {
      t.compute_s = index_s;
      t.index_bound = true;
      t.sfu_bound = false;
      t.occupancy_bound = false;
    }
  }
  return t;
}

}  // namespace racksim::hw
