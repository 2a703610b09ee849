#include "hardware_models/compute_model.h"

#include "hardware_models/system_preset.h"

namespace racksim::hw {

KernelTiming kernel_timing(const SystemSpec& sys, const KernelWork& w) {
  KernelTiming t;
  t.hbm_bytes = w.hbm_bytes;
  t.min_s = kMinKernelDuration_s;
  const double peak = w.tensor_core ? peak_flops_per_s(sys, w.dtype) : sys.gpu.vector_fp32_flops_per_s;
  // Roofline on the datasheet peak; shape-dependent efficiency comes with calibration.
  t.compute_s = peak > 0 ? w.flops / peak : 0;
  return t;
}

}  // namespace racksim::hw
