// Strong unit types and the quantity parser ("141 GB", "4.8 TB/s", "2.5 us", "989 TFLOP/s").
#pragma once

#include <compare>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace racksim::sim {

// A double in SI base units, tagged with its dimension so that bytes cannot be added to seconds.
// Only the cross-dimension operators below exist; anything else is a compile error.
template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value_si) : v_(value_si) {}
  constexpr double value() const { return v_; }

  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.v_ + b.v_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.v_ - b.v_); }
  friend constexpr Quantity operator-(Quantity a) { return Quantity(-a.v_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(k * a.v_); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.v_ / k); }
  // Same dimension over same dimension is a plain ratio.
  friend constexpr double operator/(Quantity a, Quantity b) { return a.v_ / b.v_; }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity& operator*=(double k) { v_ *= k; return *this; }
  constexpr Quantity& operator/=(double k) { v_ /= k; return *this; }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double v_ = 0.0;
};

struct BytesTag {};
struct SecondsTag {};
struct BytesPerSecondTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};
struct HertzTag {};
struct WattsTag {};
struct OpsPerSecondTag {};

using Bytes = Quantity<BytesTag>;                     // B
using Seconds = Quantity<SecondsTag>;                 // s
using BytesPerSecond = Quantity<BytesPerSecondTag>;   // B/s
using Flops = Quantity<FlopsTag>;                     // FLOP (a count, not a rate)
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;   // FLOP/s
using Hertz = Quantity<HertzTag>;                     // 1/s
using Watts = Quantity<WattsTag>;                     // W
using OpsPerSecond = Quantity<OpsPerSecondTag>;       // op/s (e.g. exp/s of the SFU)

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value() / r.value()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value() * t.value()); }
constexpr Bytes operator*(Seconds t, BytesPerSecond r) { return Bytes(t.value() * r.value()); }
constexpr Flops operator*(FlopsPerSecond r, Seconds t) { return Flops(r.value() * t.value()); }
constexpr Flops operator*(Seconds t, FlopsPerSecond r) { return Flops(t.value() * r.value()); }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond(b.value() / t.value()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond(f.value() / t.value()); }

// Thrown by parse_quantity; the message is complete on its own (callers prepend file:line:column
// and the key path).
class UnitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class QuantityKind { bytes, seconds, bytes_per_second, flops, flops_per_second, hertz, watts, ops_per_second };

// "a size (e.g. 141 GB)", "a duration (e.g. 2.5 us)", "a bandwidth (e.g. 4.8 TB/s)",
// "a FLOP count (e.g. 2.5 TFLOP)", "a FLOP rate (e.g. 989 TFLOP/s)", "a frequency (e.g. 1830 MHz)",
// "a power (e.g. 700 W)", "an op rate (e.g. 10.7 Top/s)".
std::string to_string(QuantityKind kind);

// Parses a number followed by a unit (space optional, surrounding whitespace ignored) and returns
// the value in SI base units: bytes, s, bytes/s, FLOP, FLOP/s, Hz, W, op/s. Decimal prefixes are
// folded into the decimal exponent before conversion, so "4.8 TB/s" == 4.8e12 exactly.
// Units are case-sensitive ("b" bit vs "B" byte, "m" milli vs "M" mega). Bits are accepted only in
// rates ("400 Gb/s" = 50e9 B/s). A bare number is an error. Throws UnitError.
double parse_quantity(std::string_view text, QuantityKind expected);

// Human form with 4 significant digits and the decimal prefix that puts the number in [1, 1000):
// "141 GB", "4.8 TB/s", "2.5 us", "989.4 TFLOP/s". Always in a unit parse_quantity accepts.
std::string format_quantity(double value_si, QuantityKind kind);

// Every unit spelling parse_quantity accepts for `kind`, in a fixed order.
std::vector<std::string> known_units(QuantityKind kind);

}  // namespace racksim::sim
