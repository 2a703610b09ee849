// Simulated time for racksim's discrete-event core.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace racksim::sim {

// Simulated time beyond SimTime::max() (about 106 days): arithmetic and the flow network throw
// TimeOverflow, from_seconds TimeOutOfRange, instead of wrapping or of a transfer that never
// ends, so a step that long is reported as what it is (sim::simulate turns both into an
// InputError naming the scenario).
struct TimeOverflow : std::overflow_error {
  using std::overflow_error::overflow_error;
};
struct TimeOutOfRange : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Simulated time: an integer count of picoseconds. Integers make the simulation deterministic
// (no float drift, byte-identical results); int64 picoseconds cover about 106 days.
struct SimTime {
  int64_t ps = 0;

  static constexpr SimTime from_ps(int64_t p) { return SimTime{p}; }
  // Rounds to the nearest picosecond. Throws std::invalid_argument on a negative, NaN or infinite
  // value, or one that does not fit in int64 picoseconds.
  static SimTime from_seconds(double s) {
    // In range (the rule: a launch time, a latency), inline; anything else (negative, NaN, infinite, beyond
    // the clock) through the checked path, which throws. Below 9.2e6 s, s * 1e12 is below 2^63.
    if (s >= 0 && s < 9.2e6) return SimTime{static_cast<int64_t>(round_ps(s * 1e12))};
    return from_seconds_checked(s);
  }
  static SimTime from_seconds_checked(double s);
  // std::round for x >= 0 without its library call: x - floor(x) is exact.
  static double round_ps(double x) {
    const double ps = __builtin_floor(x);
    return x - ps >= 0.5 ? ps + 1 : ps;
  }
  // Largest representable time; used as "never".
  static constexpr SimTime max() { return SimTime{std::numeric_limits<int64_t>::max()}; }

  // Divides by 1e12 rather than multiplying by 1e-12: whole seconds then convert exactly.
  double seconds() const { return static_cast<double>(ps) / 1e12; }

  constexpr auto operator<=>(const SimTime&) const = default;

  // Arithmetic throws std::overflow_error rather than wrapping: a wrapped time would silently
  // reorder events.
  friend constexpr SimTime operator+(SimTime a, SimTime b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a.ps, b.ps, &r)) throw TimeOverflow("SimTime overflow in +");
    return SimTime{r};
  }
  friend constexpr SimTime operator-(SimTime a, SimTime b) {
    int64_t r = 0;
    if (__builtin_sub_overflow(a.ps, b.ps, &r)) throw TimeOverflow("SimTime overflow in -");
    return SimTime{r};
  }
  constexpr SimTime& operator+=(SimTime o) { return *this = *this + o; }
  constexpr SimTime& operator-=(SimTime o) { return *this = *this - o; }
};

}  // namespace racksim::sim
