// One name table per enum: to_string, parsing and the "expected one of" list of an error all read
// the same table, so an enumerator is named in one place and the three cannot disagree.
//
//   inline constexpr std::array<sim::EnumName<Color>, 2> kColorNames = {{{Color::red, "red"}, {Color::blue, "blue"}}};
//   std::string to_string(Color c) { return std::string(sim::name_in(kColorNames, c)); }
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace racksim::sim {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `e`; "?" for a value the table does not hold (a cast from a bad integer).
template <class E, std::size_t N>
constexpr std::string_view name_in(const std::array<EnumName<E>, N>& table, E e) {
  for (const auto& n : table)
    if (n.value == e) return n.name;
  return "?";
}

// The value named `s` exactly; nullopt for any other text.
template <class E, std::size_t N>
constexpr std::optional<E> parse_in(const std::array<EnumName<E>, N>& table, std::string_view s) {
  for (const auto& n : table)
    if (n.name == s) return n.value;
  return std::nullopt;
}

// Every name, in table order (an error's "expected one of" list).
template <class E, std::size_t N>
std::vector<std::string> names_in(const std::array<EnumName<E>, N>& table) {
  std::vector<std::string> out;
  for (const auto& n : table) out.emplace_back(n.name);
  return out;
}

// (name, value) pairs, in table order, for input::MapReader::choice.
template <class E, std::size_t N>
std::vector<std::pair<std::string, E>> choices_in(const std::array<EnumName<E>, N>& table) {
  std::vector<std::pair<std::string, E>> out;
  for (const auto& n : table) out.emplace_back(std::string(n.name), n.value);
  return out;
}

}  // namespace racksim::sim
