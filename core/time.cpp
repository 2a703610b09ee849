#include "core/time.h"

#include <cmath>

#include <fmt/format.h>

namespace racksim::sim {

SimTime SimTime::from_seconds_checked(double s) {
  if (std::isnan(s) || std::isinf(s)) {
    throw std::invalid_argument(fmt::format("time is not a finite number of seconds: {}", s));
  }
  if (s < 0) throw std::invalid_argument(fmt::format("negative time: {} s", s));
  const double ps = round_ps(s * 1e12);
  // 2^63 is exactly representable; anything at or above it does not fit in int64.
  if (ps >= 9223372036854775808.0) {
    throw TimeOutOfRange(fmt::format("time {} s does not fit in 64-bit picoseconds", s));
  }
  return SimTime{static_cast<int64_t>(ps)};
}

}  // namespace racksim::sim
