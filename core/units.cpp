#include "core/units.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/text.h"

namespace racksim::sim {
namespace {

// What a unit spelling measures: one of the QuantityKinds, or a size in bits, which is known (so
// "400 Gb" for a size gets "wrong unit", not "unknown unit") but valid for no QuantityKind.
enum class Dim { bytes, seconds, bytes_per_second, flops, flops_per_second, hertz, watts, ops_per_second, bits };

Dim dim_of(QuantityKind k) { return static_cast<Dim>(static_cast<int>(k)); }

struct UnitDef {
  std::string spelling;
  Dim dim;
  int exp10;    // decimal prefix, folded into the number's exponent before conversion (exact)
  double mult;  // remaining factor: 1, 1/8 for bits, 2^(10k) for binary prefixes, 60, 3600
};

std::vector<UnitDef> build_table() {
  // Order matters: known_units() lists spellings in this order, and suggestions break ties by it.
  const std::pair<const char*, int> dec_bytes[] = {{"", 0}, {"k", 3}, {"K", 3}, {"M", 6},
                                                   {"G", 9}, {"T", 12}, {"P", 15}};
  const std::pair<const char*, int> binary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}};
  const std::pair<const char*, int> si[] = {{"", 0}, {"k", 3}, {"M", 6}, {"G", 9},
                                            {"T", 12}, {"P", 15}, {"E", 18}};
  std::vector<UnitDef> t;
  auto add = [&t](std::string s, Dim d, int e, double m) { t.push_back({std::move(s), d, e, m}); };

  for (auto [p, e] : dec_bytes) add(std::string(p) + "B", Dim::bytes, e, 1.0);
  for (auto [p, b] : binary) add(std::string(p) + "B", Dim::bytes, 0, std::ldexp(1.0, b));
  add("bytes", Dim::bytes, 0, 1.0);
  for (auto [p, e] : dec_bytes) add(std::string(p) + "b", Dim::bits, e, 0.125);

  for (auto [p, e] : dec_bytes) add(std::string(p) + "B/s", Dim::bytes_per_second, e, 1.0);
  for (auto [p, b] : binary) add(std::string(p) + "B/s", Dim::bytes_per_second, 0, std::ldexp(1.0, b));
  add("bytes/s", Dim::bytes_per_second, 0, 1.0);
  for (auto [p, e] : dec_bytes) add(std::string(p) + "Bps", Dim::bytes_per_second, e, 1.0);
  for (auto [p, e] : dec_bytes) add(std::string(p) + "b/s", Dim::bytes_per_second, e, 0.125);
  for (auto [p, e] : dec_bytes) add(std::string(p) + "bps", Dim::bytes_per_second, e, 0.125);

  add("s", Dim::seconds, 0, 1.0);
  add("ms", Dim::seconds, -3, 1.0);
  add("us", Dim::seconds, -6, 1.0);
  add("\xC2\xB5s", Dim::seconds, -6, 1.0);  // U+00B5 MICRO SIGN
  add("\xCE\xBCs", Dim::seconds, -6, 1.0);  // U+03BC GREEK SMALL LETTER MU
  add("ns", Dim::seconds, -9, 1.0);
  add("ps", Dim::seconds, -12, 1.0);
  add("min", Dim::seconds, 0, 60.0);
  add("h", Dim::seconds, 0, 3600.0);

  for (auto [p, e] : si) add(std::string(p) + "FLOP", Dim::flops, e, 1.0);
  for (auto [p, e] : si) add(std::string(p) + "FLOP/s", Dim::flops_per_second, e, 1.0);
  for (auto [p, e] : si) add(std::string(p) + "FLOPS", Dim::flops_per_second, e, 1.0);

  for (auto [p, e] : si) {
    if (e <= 9) add(std::string(p) + "Hz", Dim::hertz, e, 1.0);
  }
  for (auto [p, e] : si) {
    if (e <= 6) add(std::string(p) + "W", Dim::watts, e, 1.0);
  }
  for (auto [p, e] : si) {
    if (e <= 15) add(std::string(p) + "op/s", Dim::ops_per_second, e, 1.0);
  }
  for (auto [p, e] : si) {
    if (e <= 15) add(std::string(p) + "OPS", Dim::ops_per_second, e, 1.0);
  }
  return t;
}

const std::vector<UnitDef>& table() {
  static const std::vector<UnitDef> t = build_table();
  return t;
}

const UnitDef* find_unit(std::string_view spelling) {
  for (const auto& u : table()) {
    if (u.spelling == spelling) return &u;
  }
  return nullptr;
}

// The units format_quantity picks from, by ascending decimal exponent.
const std::vector<std::pair<int, const char*>>& format_units(QuantityKind k) {
  static const std::vector<std::pair<int, const char*>> bytes = {
      {0, "B"}, {3, "kB"}, {6, "MB"}, {9, "GB"}, {12, "TB"}, {15, "PB"}};
  static const std::vector<std::pair<int, const char*>> seconds = {
      {-12, "ps"}, {-9, "ns"}, {-6, "us"}, {-3, "ms"}, {0, "s"}};
  static const std::vector<std::pair<int, const char*>> bps = {
      {0, "B/s"}, {3, "kB/s"}, {6, "MB/s"}, {9, "GB/s"}, {12, "TB/s"}, {15, "PB/s"}};
  static const std::vector<std::pair<int, const char*>> flops = {
      {0, "FLOP"}, {3, "kFLOP"}, {6, "MFLOP"}, {9, "GFLOP"}, {12, "TFLOP"}, {15, "PFLOP"}, {18, "EFLOP"}};
  static const std::vector<std::pair<int, const char*>> flops_ps = {
      {0, "FLOP/s"},  {3, "kFLOP/s"},  {6, "MFLOP/s"}, {9, "GFLOP/s"},
      {12, "TFLOP/s"}, {15, "PFLOP/s"}, {18, "EFLOP/s"}};
  static const std::vector<std::pair<int, const char*>> hertz = {{0, "Hz"}, {3, "kHz"}, {6, "MHz"}, {9, "GHz"}};
  static const std::vector<std::pair<int, const char*>> watts = {{0, "W"}, {3, "kW"}, {6, "MW"}};
  static const std::vector<std::pair<int, const char*>> ops = {
      {0, "op/s"}, {3, "kop/s"}, {6, "Mop/s"}, {9, "Gop/s"}, {12, "Top/s"}, {15, "Pop/s"}};
  switch (k) {
    case QuantityKind::bytes: return bytes;
    case QuantityKind::seconds: return seconds;
    case QuantityKind::bytes_per_second: return bps;
    case QuantityKind::flops: return flops;
    case QuantityKind::flops_per_second: return flops_ps;
    case QuantityKind::hertz: return hertz;
    case QuantityKind::watts: return watts;
    case QuantityKind::ops_per_second: return ops;
  }
  throw std::logic_error("format_units: bad QuantityKind");
}

// "size", "duration", ...: used after "negative".
const char* noun(Dim d) {
  switch (d) {
    case Dim::bytes: return "size";
    case Dim::seconds: return "duration";
    case Dim::bytes_per_second: return "bandwidth";
    case Dim::flops: return "FLOP count";
    case Dim::flops_per_second: return "FLOP rate";
    case Dim::hertz: return "frequency";
    case Dim::watts: return "power";
    case Dim::ops_per_second: return "op rate";
    case Dim::bits: return "size in bits";
  }
  return "quantity";
}

std::string with_article(Dim d) {
  const std::string n = noun(d);
  return (n[0] == 'o' ? "an " : "a ") + n;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

// A unit close to `unit`: the expected kind's spellings are preferred, so "GBx" where a bandwidth
// is expected suggests "GB/s" rather than "GB". A case-only difference ("gb") beats edit distance.
// What to suggest for an unknown unit, as the text after "did you mean": every spelling that differs from it only in
// case (bits and bytes both, "gb/s" -> 'GB/s' or 'Gb/s': picking one would silently be off by 8), else the nearest
// spelling of the expected kind, else of any kind. "bit" spelled out ("Gbit/s") is read as bits.
std::optional<std::string> suggest_unit(std::string_view unit, QuantityKind expected) {
  std::vector<std::string> same = known_units(expected);
  std::vector<std::string> others;
  for (const auto& u : table()) {
    if (u.dim != dim_of(expected)) others.push_back(u.spelling);
  }
  std::string folded = lower(unit);
  std::string probe(unit);
  if (const auto bit = folded.find("bit"); bit != std::string::npos) {
    probe = std::string(unit.substr(0, bit)) + "b" + std::string(unit.substr(bit + 3));
    folded = lower(probe);
  }
  // "bit" spelled out: the bits spelling if there is one (of any kind: a size in bits then gets its honest "wrong
  // unit"), never a bytes unit, which would be off by 8.
  if (probe != unit) {
    for (const auto* list : {&same, &others})
      if (std::find(list->begin(), list->end(), probe) != list->end()) return "'" + probe + "'";
    return std::nullopt;
  }
  for (const auto* list : {&same, &others}) {
    std::vector<std::string> matches;
    for (const auto& c : *list)
      if (lower(c) == folded && std::find(matches.begin(), matches.end(), c) == matches.end()) matches.push_back(c);
    if (matches.size() == 1) return "'" + matches.front() + "'";
    if (matches.size() > 1) {
      std::string out;
      for (std::size_t i = 0; i < matches.size(); ++i)
        out += (i == 0 ? "" : i + 1 == matches.size() ? " or " : ", ") + ("'" + matches[i] + "'");
      return out + " (b is bits, B bytes: 400 Gb/s = 50 GB/s)";
    }
  }
  const std::size_t max_distance = unit.size() <= 2 ? 1 : 2;
  if (auto s = nearest(unit, same, max_distance)) return "'" + *s + "'";
  if (auto s = nearest(unit, others, max_distance)) return "'" + *s + "'";
  return std::nullopt;
}

}  // namespace

std::string to_string(QuantityKind kind) {
  switch (kind) {
    case QuantityKind::bytes: return "a size (e.g. 141 GB)";
    case QuantityKind::seconds: return "a duration (e.g. 2.5 us)";
    case QuantityKind::bytes_per_second: return "a bandwidth (e.g. 4.8 TB/s)";
    case QuantityKind::flops: return "a FLOP count (e.g. 2.5 TFLOP)";
    case QuantityKind::flops_per_second: return "a FLOP rate (e.g. 989 TFLOP/s)";
    case QuantityKind::hertz: return "a frequency (e.g. 1830 MHz)";
    case QuantityKind::watts: return "a power (e.g. 700 W)";
    case QuantityKind::ops_per_second: return "an op rate (e.g. 10.7 Top/s)";
  }
  return "a quantity";
}

std::vector<std::string> known_units(QuantityKind kind) {
  std::vector<std::string> r;
  for (const auto& u : table()) {
    if (u.dim == dim_of(kind)) r.push_back(u.spelling);
  }
  return r;
}

double parse_quantity(std::string_view text, QuantityKind expected) {
  const std::string_view t = trim(text);
  if (t.empty()) throw UnitError("empty value");

  // Number: [sign] digits [. digits] [e [sign] digits]; at least one mantissa digit. Scanned by
  // hand so that "inf", "nan", hex and the like are rejected, and "1EFLOP" keeps its unit.
  std::size_t i = 0;
  bool negative = false;
  if (t[i] == '+' || t[i] == '-') {
    negative = t[i] == '-';
    ++i;
  }
  const std::size_t mantissa_begin = i;
  std::size_t digits = 0;
  while (i < t.size() && is_digit(t[i])) ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && is_digit(t[i])) ++i, ++digits;
  }
  if (digits == 0) throw UnitError(fmt::format("not a number: '{}'", t));
  const std::string_view mantissa = t.substr(mantissa_begin, i - mantissa_begin);

  long long exp10 = 0;
  bool exp_too_large = false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    std::size_t j = i + 1;
    bool exp_negative = false;
    if (j < t.size() && (t[j] == '+' || t[j] == '-')) {
      exp_negative = t[j] == '-';
      ++j;
    }
    const std::size_t exp_begin = j;
    while (j < t.size() && is_digit(t[j])) ++j;
    if (j > exp_begin) {  // otherwise the 'e'/'E' begins the unit, as in "1EFLOP"
      long long e = 0;
      const auto [ptr, ec] = std::from_chars(t.data() + exp_begin, t.data() + j, e);
      (void)ptr;
      if (ec != std::errc() || e > 100000) exp_too_large = true;
      exp10 = exp_negative ? -e : e;
      i = j;
    }
  }

  const std::string_view rest = trim(t.substr(i));
  if (rest.empty()) {
    throw UnitError(fmt::format("missing unit: expected {}, got '{}'", to_string(expected), t));
  }
  std::size_t unit_end = 0;
  while (unit_end < rest.size() && !is_space(rest[unit_end])) ++unit_end;
  const std::string_view unit = rest.substr(0, unit_end);
  const std::string_view after = trim(rest.substr(unit_end));

  // No unit contains a digit, so a digit here is a second number ("1 2 GB", "1.2.3 GB").
  const bool separator = (unit[0] == ',' || unit[0] == '_') && unit.size() > 1 && is_digit(unit[1]);
  if (separator) throw UnitError(fmt::format("digit separators are not supported: '{}'", t));
  const bool number_after = !after.empty() && (is_digit(after[0]) || after[0] == '.' || after[0] == '+' ||
                                               after[0] == '-');
  if (unit[0] == '+' || unit[0] == '-' || std::any_of(unit.begin(), unit.end(), is_digit) || number_after) {
    throw UnitError(fmt::format("unexpected second number in '{}'", t));
  }

  const UnitDef* def = find_unit(unit);
  if (def == nullptr) {
    if (auto s = suggest_unit(unit, expected)) {
      throw UnitError(fmt::format("unknown unit '{}' in '{}'; did you mean {}?", unit, t, *s));
    }
    throw UnitError(fmt::format("unknown unit '{}' in '{}'; expected {}", unit, t, to_string(expected)));
  }
  if (!after.empty()) throw UnitError(fmt::format("unexpected text '{}' after the unit in '{}'", after, t));
  if (def->dim != dim_of(expected)) {
    throw UnitError(
        fmt::format("wrong unit: expected {}, got {} '{}'", to_string(expected), with_article(def->dim), t));
  }

  // Fold the prefix into the decimal exponent and convert once, so the result is the double
  // nearest the written decimal value ("2.5 us" == 2.5e-6, "4.8 TB/s" == 4.8e12).
  if (exp_too_large) throw UnitError(fmt::format("value out of range: '{}'", t));
  const std::string decimal = fmt::format("{}e{}", mantissa, exp10 + def->exp10);
  double v = 0.0;
  const auto [ptr, ec] = std::from_chars(decimal.data(), decimal.data() + decimal.size(), v);
  if (ec != std::errc() || ptr != decimal.data() + decimal.size()) {
    throw UnitError(fmt::format("value out of range: '{}'", t));
  }
  v *= def->mult;
  if (!std::isfinite(v)) throw UnitError(fmt::format("value out of range: '{}'", t));
  if (negative && v != 0.0) throw UnitError(fmt::format("negative {} '{}'", noun(def->dim), t));
  return v;  // the sign was never applied, so "-0 GB" gives +0
}

std::string format_quantity(double value_si, QuantityKind kind) {
  const auto& units = format_units(kind);
  const auto base = std::find_if(units.begin(), units.end(), [](const auto& u) { return u.first == 0; });
  if (!std::isfinite(value_si)) return fmt::format("{} {}", value_si, base->second);
  if (value_si == 0.0) return fmt::format("0 {}", base->second);

  // Round to 4 significant digits first (so 999.96 becomes 1000 and moves up a prefix), then
  // place the decimal point by string manipulation to avoid re-introducing binary noise.
  const std::string sci = fmt::format("{:.3e}", std::fabs(value_si));  // "d.ddde[+-]XX"
  const std::string digits = sci.substr(0, 1) + sci.substr(2, 3);
  const int exp10 = std::stoi(sci.substr(sci.find('e') + 1));

  auto unit = units.front();
  for (const auto& u : units) {
    if (u.first <= exp10) unit = u;
  }
  const int point = 1 + exp10 - unit.first;  // digits before the decimal point
  std::string s;
  if (point <= 0) {
    s = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= 4) {
    s = digits + std::string(static_cast<std::size_t>(point - 4), '0');
  } else {
    s = digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
  }
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return fmt::format("{}{} {}", value_si < 0 ? "-" : "", s, unit.second);
}

}  // namespace racksim::sim
