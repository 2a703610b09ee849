// Matmul input precisions (tensor-core dtypes), the ground floor's one data type: the hardware model
// times them and the workloads choose them. Master weights and optimizer state stay fp32.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/names.h"

namespace racksim::sim {

enum class Dtype : uint8_t { fp32, tf32, bf16, fp8, mxfp8, nvfp4 };

inline constexpr std::array<EnumName<Dtype>, 6> kDtypeNames = {{{Dtype::fp32, "fp32"},
                                                                 {Dtype::tf32, "tf32"},
                                                                 {Dtype::bf16, "bf16"},
                                                                 {Dtype::fp8, "fp8"},
                                                                 {Dtype::mxfp8, "mxfp8"},
                                                                 {Dtype::nvfp4, "nvfp4"}}};

std::string to_string(Dtype d);
std::optional<Dtype> dtype_from_string(std::string_view s);  // the table's names exactly

}  // namespace racksim::sim
