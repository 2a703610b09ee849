// The quantity parser and formatter ("141 GB", "4.8 TB/s", "2.5 us", "989 TFLOP/s"). Values are plain
// doubles in SI base units whose names carry the unit (_bytes, _s, _Bps); docs/decisions.md, "Strong unit types".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace racksim::sim {

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
