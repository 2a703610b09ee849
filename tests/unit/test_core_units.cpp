// Units, the quantity parser and formatter, SimTime, and the "did you mean" helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/text.h"
#include "core/time.h"
#include "core/units.h"

namespace racksim::sim {
namespace {

// The message parse_quantity throws, or "" if it does not throw a UnitError.
std::string error_of(std::string_view text, QuantityKind kind) {
  try {
    parse_quantity(text, kind);
  } catch (const UnitError& e) {
    return e.what();
  }
  return "";
}

constexpr auto kSize = QuantityKind::bytes;
constexpr auto kTime = QuantityKind::seconds;
constexpr auto kBw = QuantityKind::bytes_per_second;

TEST(Units, ExamplesParseToExactSiValues) {
  EXPECT_EQ(parse_quantity("141 GB", kSize), 141e9);
  EXPECT_EQ(parse_quantity("141GiB", kSize), 141.0 * 1073741824.0);
  EXPECT_EQ(parse_quantity("4.8 TB/s", kBw), 4.8e12);
  EXPECT_EQ(parse_quantity("400 Gb/s", kBw), 50e9);
  EXPECT_EQ(parse_quantity("2.5 us", kTime), 2.5e-6);
  EXPECT_EQ(parse_quantity("989 TFLOP/s", QuantityKind::flops_per_second), 989e12);
  EXPECT_EQ(parse_quantity("1830 MHz", QuantityKind::hertz), 1830e6);
  EXPECT_EQ(parse_quantity("700 W", QuantityKind::watts), 700.0);
  EXPECT_EQ(parse_quantity("10.7 Top/s", QuantityKind::ops_per_second), 10.7e12);
}

TEST(Units, NumberFormatsAndSpacing) {
  EXPECT_EQ(parse_quantity("1 B", kSize), 1.0);
  EXPECT_EQ(parse_quantity("1.5 KiB", kSize), 1536.0);
  EXPECT_EQ(parse_quantity(".5 GB", kSize), 0.5e9);
  EXPECT_EQ(parse_quantity("1e9 B", kSize), 1e9);
  EXPECT_EQ(parse_quantity("2.5e-6 s", kTime), 2.5e-6);
  EXPECT_EQ(parse_quantity("2.5E-3ms", kTime), 2.5e-6);  // exponent and prefix fold together
  EXPECT_EQ(parse_quantity("  64MB \t", kSize), 64e6);
  EXPECT_EQ(parse_quantity("+3 KB", kSize), 3000.0);
  EXPECT_EQ(parse_quantity("0 GB", kSize), 0.0);
  const double negative_zero = parse_quantity("-0 GB", kSize);
  EXPECT_EQ(negative_zero, 0.0);
  EXPECT_FALSE(std::signbit(negative_zero));
  // 'E' followed by a letter starts the unit, not an exponent.
  EXPECT_EQ(parse_quantity("1EFLOP", QuantityKind::flops), 1e18);
  EXPECT_EQ(parse_quantity("1e3EFLOP", QuantityKind::flops), 1e21);
}

TEST(Units, EveryUnitFamily) {
  EXPECT_EQ(parse_quantity("3 kB", kSize), 3e3);
  EXPECT_EQ(parse_quantity("2 PB", kSize), 2e15);
  EXPECT_EQ(parse_quantity("2 TiB", kSize), 2.0 * 1099511627776.0);
  EXPECT_EQ(parse_quantity("7 bytes", kSize), 7.0);
  EXPECT_EQ(parse_quantity("1 GiB/s", kBw), 1073741824.0);
  EXPECT_EQ(parse_quantity("900 GBps", kBw), 900e9);
  EXPECT_EQ(parse_quantity("400 Gbps", kBw), 50e9);
  EXPECT_EQ(parse_quantity("8 Mb/s", kBw), 1e6);
  EXPECT_EQ(parse_quantity("100 ns", kTime), 100e-9);
  EXPECT_EQ(parse_quantity("1 ps", kTime), 1e-12);
  EXPECT_EQ(parse_quantity("3 ms", kTime), 3e-3);
  EXPECT_EQ(parse_quantity("1 \xC2\xB5s", kTime), 1e-6);  // micro sign
  EXPECT_EQ(parse_quantity("1 \xCE\xBCs", kTime), 1e-6);  // Greek mu
  EXPECT_EQ(parse_quantity("2 min", kTime), 120.0);
  EXPECT_EQ(parse_quantity("1.5 h", kTime), 5400.0);
  EXPECT_EQ(parse_quantity("312 GFLOP", QuantityKind::flops), 312e9);
  EXPECT_EQ(parse_quantity("2 PFLOPS", QuantityKind::flops_per_second), 2e15);
  EXPECT_EQ(parse_quantity("1.98 TFLOPS", QuantityKind::flops_per_second), 1.98e12);
  EXPECT_EQ(parse_quantity("5 GFLOP/s", QuantityKind::flops_per_second), 5e9);
  EXPECT_EQ(parse_quantity("1.98 GHz", QuantityKind::hertz), 1.98e9);
  EXPECT_EQ(parse_quantity("50 kHz", QuantityKind::hertz), 50e3);
  EXPECT_EQ(parse_quantity("1.2 kW", QuantityKind::watts), 1200.0);
  EXPECT_EQ(parse_quantity("3 Gop/s", QuantityKind::ops_per_second), 3e9);
  EXPECT_EQ(parse_quantity("5 op/s", QuantityKind::ops_per_second), 5.0);
}

TEST(Units, CaseMatters) {
  EXPECT_EQ(parse_quantity("1 Mb/s", kBw), 125e3);  // bits
  EXPECT_EQ(parse_quantity("1 MB/s", kBw), 1e6);    // bytes
  EXPECT_EQ(parse_quantity("1 ms", kTime), 1e-3);
  EXPECT_EQ(error_of("1 Ms", kTime), "unknown unit 'Ms' in '1 Ms'; did you mean 'ms'?");
}

TEST(Units, ErrorMessagesArePinned) {
  EXPECT_EQ(error_of("141", kSize), "missing unit: expected a size (e.g. 141 GB), got '141'");
  EXPECT_EQ(error_of("4.8 TB/s", kSize), "wrong unit: expected a size (e.g. 141 GB), got a bandwidth '4.8 TB/s'");
  EXPECT_EQ(error_of("4 GBx", kSize), "unknown unit 'GBx' in '4 GBx'; did you mean 'GB'?");
  EXPECT_EQ(error_of("-1 GB", kSize), "negative size '-1 GB'");
  EXPECT_EQ(error_of("abc GB", kSize), "not a number: 'abc GB'");
  EXPECT_EQ(error_of("", kSize), "empty value");
  EXPECT_EQ(error_of(" \t ", kSize), "empty value");
}

TEST(Units, MoreErrorMessages) {
  EXPECT_EQ(error_of("inf GB", kSize), "not a number: 'inf GB'");
  EXPECT_EQ(error_of("nan GB", kSize), "not a number: 'nan GB'");
  EXPECT_EQ(error_of("GB", kSize), "not a number: 'GB'");
  EXPECT_EQ(error_of("1 2 GB", kSize), "unexpected second number in '1 2 GB'");
  EXPECT_EQ(error_of("1.2.3 GB", kSize), "unexpected second number in '1.2.3 GB'");
  EXPECT_EQ(error_of("1 GB 2", kSize), "unexpected second number in '1 GB 2'");
  EXPECT_EQ(error_of("1 GB junk", kSize), "unexpected text 'junk' after the unit in '1 GB junk'");
  EXPECT_EQ(error_of("1,000 GB", kSize), "digit separators are not supported: '1,000 GB'");
  EXPECT_EQ(error_of("1e400 GB", kSize), "value out of range: '1e400 GB'");
  EXPECT_EQ(error_of("-2.5 us", kTime), "negative duration '-2.5 us'");
  EXPECT_EQ(error_of("-1 GB/s", kBw), "negative bandwidth '-1 GB/s'");
  EXPECT_EQ(error_of("2.5 us", kSize), "wrong unit: expected a size (e.g. 141 GB), got a duration '2.5 us'");
  EXPECT_EQ(error_of("700 W", QuantityKind::ops_per_second),
            "wrong unit: expected an op rate (e.g. 10.7 Top/s), got a power '700 W'");
  // Bits are a known unit but only inside rates.
  EXPECT_EQ(error_of("400 Gb", kSize), "wrong unit: expected a size (e.g. 141 GB), got a size in bits '400 Gb'");
  EXPECT_EQ(error_of("400 Gb", kBw),
            "wrong unit: expected a bandwidth (e.g. 4.8 TB/s), got a size in bits '400 Gb'");
  // Suggestions prefer the expected kind; a case-only difference beats edit distance.
  EXPECT_EQ(error_of("4 GBx", kBw), "unknown unit 'GBx' in '4 GBx'; did you mean 'GB/s'?");
  EXPECT_EQ(error_of("4 gib", kSize), "unknown unit 'gib' in '4 gib'; did you mean 'GiB'?");
  EXPECT_EQ(error_of("4 tflop/s", QuantityKind::flops_per_second),
            "unknown unit 'tflop/s' in '4 tflop/s'; did you mean 'TFLOP/s'?");
  EXPECT_EQ(error_of("4 xyzzy", kSize), "unknown unit 'xyzzy' in '4 xyzzy'; expected a size (e.g. 141 GB)");
  // A rate whose case leaves bits or bytes open names both (one guess would be off by 8); "bit" spelled out is bits.
  EXPECT_EQ(error_of("400 gb/s", kBw),
            "unknown unit 'gb/s' in '400 gb/s'; did you mean 'GB/s' or 'Gb/s' (b is bits, B bytes: 400 Gb/s = 50 GB/s)?");
  EXPECT_EQ(error_of("400 gbps", kBw),
            "unknown unit 'gbps' in '400 gbps'; did you mean 'GBps' or 'Gbps' (b is bits, B bytes: 400 Gb/s = 50 GB/s)?");
  EXPECT_EQ(error_of("400 Gbit/s", kBw), "unknown unit 'Gbit/s' in '400 Gbit/s'; did you mean 'Gb/s'?");
  EXPECT_EQ(error_of("1 Gbit", kSize), "unknown unit 'Gbit' in '1 Gbit'; did you mean 'Gb'?");  // then "wrong unit": bits
  EXPECT_EQ(error_of("4 Tibit/s", kBw), "unknown unit 'Tibit/s' in '4 Tibit/s'; expected a bandwidth (e.g. 4.8 TB/s)");
}

TEST(Units, ErrorTypeIsUnitErrorDerivedFromRuntimeError) {
  EXPECT_THROW(parse_quantity("141", kSize), UnitError);
  EXPECT_THROW(parse_quantity("141", kSize), std::runtime_error);
}

TEST(Units, KindDescriptions) {
  EXPECT_EQ(to_string(QuantityKind::bytes), "a size (e.g. 141 GB)");
  EXPECT_EQ(to_string(QuantityKind::seconds), "a duration (e.g. 2.5 us)");
  EXPECT_EQ(to_string(QuantityKind::bytes_per_second), "a bandwidth (e.g. 4.8 TB/s)");
  EXPECT_EQ(to_string(QuantityKind::flops), "a FLOP count (e.g. 2.5 TFLOP)");
  EXPECT_EQ(to_string(QuantityKind::flops_per_second), "a FLOP rate (e.g. 989 TFLOP/s)");
  EXPECT_EQ(to_string(QuantityKind::hertz), "a frequency (e.g. 1830 MHz)");
  EXPECT_EQ(to_string(QuantityKind::watts), "a power (e.g. 700 W)");
  EXPECT_EQ(to_string(QuantityKind::ops_per_second), "an op rate (e.g. 10.7 Top/s)");
}

TEST(Units, KnownUnitsParseAsTheirKindOnly) {
  const QuantityKind kinds[] = {QuantityKind::bytes, QuantityKind::seconds, QuantityKind::bytes_per_second,
                                QuantityKind::flops, QuantityKind::flops_per_second, QuantityKind::hertz,
                                QuantityKind::watts, QuantityKind::ops_per_second};
  for (QuantityKind k : kinds) {
    const auto units = known_units(k);
    ASSERT_FALSE(units.empty());
    for (const auto& u : units) {
      EXPECT_GT(parse_quantity("1 " + u, k), 0.0) << u;
      for (QuantityKind other : kinds) {
        if (other != k) {
          EXPECT_THROW(parse_quantity("1 " + u, other), UnitError) << u;
        }
      }
    }
  }
  const auto sizes = known_units(QuantityKind::bytes);
  EXPECT_NE(std::find(sizes.begin(), sizes.end(), "GiB"), sizes.end());
  EXPECT_EQ(std::find(sizes.begin(), sizes.end(), "Gb"), sizes.end());  // bits only in rates
  const auto rates = known_units(QuantityKind::bytes_per_second);
  EXPECT_NE(std::find(rates.begin(), rates.end(), "Gbps"), rates.end());
}

TEST(Units, FormatQuantity) {
  EXPECT_EQ(format_quantity(141e9, kSize), "141 GB");
  EXPECT_EQ(format_quantity(4.8e12, kBw), "4.8 TB/s");
  EXPECT_EQ(format_quantity(2.5e-6, kTime), "2.5 us");
  EXPECT_EQ(format_quantity(989.4e12, QuantityKind::flops_per_second), "989.4 TFLOP/s");
  EXPECT_EQ(format_quantity(989.44e12, QuantityKind::flops_per_second), "989.4 TFLOP/s");  // 4 digits
  EXPECT_EQ(format_quantity(12345678, kSize), "12.35 MB");
  EXPECT_EQ(format_quantity(999.96e9, kSize), "1 TB");  // rounding carries into the next prefix
  EXPECT_EQ(format_quantity(1536, kSize), "1.536 kB");
  EXPECT_EQ(format_quantity(0, kSize), "0 B");
  EXPECT_EQ(format_quantity(0.5, kSize), "0.5 B");
  EXPECT_EQ(format_quantity(1e-15, kTime), "0.001 ps");  // below the smallest prefix
  EXPECT_EQ(format_quantity(7200, kTime), "7200 s");     // above the largest
  EXPECT_EQ(format_quantity(1830e6, QuantityKind::hertz), "1.83 GHz");
  EXPECT_EQ(format_quantity(700, QuantityKind::watts), "700 W");
  EXPECT_EQ(format_quantity(10.7e12, QuantityKind::ops_per_second), "10.7 Top/s");
  EXPECT_EQ(format_quantity(2.5e12, QuantityKind::flops), "2.5 TFLOP");
  EXPECT_EQ(format_quantity(-3e-3, kTime), "-3 ms");
}

TEST(Units, FormatRoundTripsThroughParse) {
  const std::pair<const char*, QuantityKind> examples[] = {
      {"141 GB", kSize},          {"4.8 TB/s", kBw},
      {"2.5 us", kTime},          {"989.4 TFLOP/s", QuantityKind::flops_per_second},
      {"1830 MHz", QuantityKind::hertz}, {"700 W", QuantityKind::watts},
      {"10.7 Top/s", QuantityKind::ops_per_second}, {"50 GB/s", kBw},
      {"1.536 kB", kSize},        {"12.5 ns", kTime},
  };
  for (const auto& [text, kind] : examples) {
    const double v = parse_quantity(text, kind);
    EXPECT_EQ(parse_quantity(format_quantity(v, kind), kind), v) << text;
  }
  // 400 Gb/s is shown in bytes.
  EXPECT_EQ(format_quantity(parse_quantity("400 Gb/s", kBw), kBw), "50 GB/s");
  EXPECT_EQ(format_quantity(parse_quantity("141 GiB", kSize), kSize), "151.4 GB");
}

TEST(Units, FormatAlwaysParsesBackWithinFourDigits) {
  const QuantityKind kinds[] = {QuantityKind::bytes, QuantityKind::seconds, QuantityKind::bytes_per_second,
                                QuantityKind::flops, QuantityKind::flops_per_second, QuantityKind::hertz,
                                QuantityKind::watts, QuantityKind::ops_per_second};
  for (QuantityKind k : kinds) {
    for (double v = 1.234567e-15; v < 1e22; v *= 7.3) {
      const std::string text = format_quantity(v, k);
      EXPECT_NEAR(parse_quantity(text, k), v, v * 5e-4) << text;
    }
  }
}

TEST(CoreText, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("abc", "abc"), 0u);
  EXPECT_EQ(edit_distance("GBx", "GB"), 1u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
}

TEST(CoreText, NearestBreaksTiesByCandidateOrder) {
  EXPECT_EQ(nearest("cat", {"bat", "hat", "cart"}, 2), "bat");
  EXPECT_EQ(nearest("cat", {"hat", "bat"}, 2), "hat");
  EXPECT_EQ(nearest("cart", {"bat", "cat"}, 2), "cat");
  EXPECT_EQ(nearest("xyz", {"abc"}, 2), std::nullopt);  // distance 3 > 2
  EXPECT_EQ(nearest("xyz", {"abc"}, 3), "abc");
  EXPECT_EQ(nearest("xyz", {}, 5), std::nullopt);
}

TEST(CoreTime, FromSecondsRoundsToNearestPicosecond) {
  EXPECT_EQ(SimTime::from_seconds(2.5e-6).ps, 2500000);
  EXPECT_EQ(SimTime::from_seconds(1.0).ps, 1000000000000);
  EXPECT_EQ(SimTime::from_seconds(0.0).ps, 0);
  EXPECT_EQ(SimTime::from_seconds(1.4e-12).ps, 1);
  EXPECT_EQ(SimTime::from_seconds(1.6e-12).ps, 2);
  EXPECT_EQ(SimTime::from_seconds(0.4e-12).ps, 0);
  EXPECT_EQ(SimTime::from_seconds(0.1).ps, 100000000000);
  EXPECT_EQ(SimTime::from_seconds(9.2e6).ps, 9200000000000000000);
}

TEST(CoreTime, FromSecondsRejectsBadValues) {
  EXPECT_THROW(SimTime::from_seconds(1e7), std::invalid_argument);  // 1e19 ps > int64 max
  EXPECT_THROW(SimTime::from_seconds(9223372.036854776), std::invalid_argument);  // rounds to 2^63
  EXPECT_THROW(SimTime::from_seconds(-1e-9), std::invalid_argument);
  EXPECT_THROW(SimTime::from_seconds(std::nan("")), std::invalid_argument);
  EXPECT_THROW(SimTime::from_seconds(INFINITY), std::invalid_argument);
}

TEST(CoreTime, ArithmeticAndComparison) {
  constexpr SimTime a = SimTime::from_ps(1500);
  constexpr SimTime b = SimTime::from_ps(500);
  static_assert((a + b).ps == 2000);
  static_assert((a - b).ps == 1000);
  static_assert(b < a && a > b && a != b && a == SimTime::from_ps(1500));
  SimTime c = a;
  c += b;
  EXPECT_EQ(c.ps, 2000);
  c -= a;
  EXPECT_EQ(c, b);
  EXPECT_EQ(SimTime::from_ps(2500000).seconds(), 2.5e-6);
  EXPECT_EQ(SimTime::from_ps(3000000000000).seconds(), 3.0);
  EXPECT_EQ(SimTime::max().ps, INT64_MAX);
  EXPECT_EQ(SimTime{}.ps, 0);
  EXPECT_THROW(SimTime::max() + SimTime::from_ps(1), std::overflow_error);
  EXPECT_THROW(SimTime::from_ps(INT64_MIN) - SimTime::from_ps(1), std::overflow_error);
}

}  // namespace
}  // namespace racksim::sim
