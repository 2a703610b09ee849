#include "hardware_models/compute_model.h"

#include <algorithm>

#include "hardware_models/system_preset.h"

namespace racksim::hw {

double matmul_efficiency(const SystemSpec& sys, Dtype d) {
  auto it = sys.gpu.matmul_efficiency.find(d);
  if (it != sys.gpu.matmul_efficiency.end()) return it->second;
  // tf32 and fp32 have no MAMF figure of their own: bf16's tensor-core efficiency.
  it = sys.gpu.matmul_efficiency.find(Dtype::bf16);
  return it != sys.gpu.matmul_efficiency.end() ? it->second : 1.0;
}

KernelTiming kernel_timing(const SystemSpec& sys, const KernelWork& w) {
  KernelTiming t;
  t.hbm_bytes = w.hbm_bytes;
  t.min_s = kMinKernelDuration_s;
  if (w.tensor_core) {
    t.efficiency = matmul_efficiency(sys, w.dtype);
    t.compute_s = w.flops / (peak_flops_per_s(sys, w.dtype) * t.efficiency);
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
  return t;
}

}  // namespace racksim::hw
