#include "core/text.h"

#include <algorithm>
#include <numeric>

namespace racksim::sim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Two-row dynamic programme: row[j] = distance between a[0..i) and b[0..j).
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates,
                                   std::size_t max_distance) {
  // A word that begins exactly one candidate up to a separator names it ("h100" for h100-sxm, which edit distance put
  // behind b200). Not a word of two letters, nor a prefix inside a name: "tp" is not tp_comm_overlap, "re" not replay.
  if (word.size() >= 3) {
    const std::string* only = nullptr;
    int starts = 0;
    for (const auto& c : candidates)
      if (c.size() > word.size() && std::string_view(c).substr(0, word.size()) == word &&
          std::string_view("-_.").find(c[word.size()]) != std::string_view::npos)
        only = &c, ++starts;
    if (starts == 1) return *only;
  }
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (best == nullptr || d < best_distance) {  // strict <: the first of equals wins
      best = &c;
      best_distance = d;
    }
  }
  if (best == nullptr || best_distance > max_distance) return std::nullopt;
  return *best;
}

}  // namespace racksim::sim
