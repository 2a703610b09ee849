// A shipped preset (hardware_models/presets/NAME.yaml) as a scenario naming it gets it: no
// calibration, no overrides. For tests that check models against the shipped hardware.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hardware_models/system_preset.h"
#include "input/diagnostics.h"

namespace racksim::testing {

inline hw::SystemSpec shipped_preset(const std::string& name) {
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  hw::SystemSpec s;
  hw::load_system_preset(name, nullptr, std::nullopt, ctx, s);
  diag.throw_if_any();
  return s;
}

}  // namespace racksim::testing
