// Small text helpers shared by every "did you mean" error message.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace racksim::sim {

// Levenshtein distance (insert, delete, substitute each cost 1), counted in bytes.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The one candidate that `word` (3 characters or more) begins up to a separator ('-', '_', '.'): "h100" names
// h100-sxm, "gb200" gb200-nvl72. Else the candidate closest to `word` by edit_distance; ties go to the earliest
// candidate so the suggestion is deterministic. nullopt when there are no candidates or the best distance exceeds
// max_distance.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                   std::size_t max_distance);

}  // namespace racksim::sim
