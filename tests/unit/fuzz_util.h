// Shared by the bounded, deterministic fuzz tests: reading a committed corpus and mutating its
// files (byte flips, insertions of format-significant tokens, deletions, splices from other
// files, duplications). Same seed, same mutations.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace racksim::testing {

// Every file in `dir`, sorted by content so the order does not depend on the file system.
inline std::vector<std::string> read_corpus(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    files.push_back(ss.str());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct MutationLimits {
  int max_mutations = 4;         // 1 .. max per input
  std::size_t max_erase = 16;    // bytes deleted at once (exclusive bound)
  std::size_t max_splice = 64;   // bytes taken from another corpus file (exclusive bound)
  std::size_t max_repeat = 32;   // bytes duplicated in place (exclusive bound)
};

inline std::string mutate(std::string s, const std::vector<std::string>& corpus,
                          const std::vector<std::string>& tokens, std::mt19937_64& rng,
                          const MutationLimits& lim = {}) {
  const int n = 1 + static_cast<int>(rng() % lim.max_mutations);
  for (int i = 0; i < n; ++i) {
    const std::size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0:
        if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(rng() % 256);
        break;
      case 1: s.insert(pos, tokens[rng() % tokens.size()]); break;
      case 2: s.erase(pos, rng() % lim.max_erase); break;
      case 3: {
        const std::string& other = corpus[rng() % corpus.size()];
        const std::size_t a = other.empty() ? 0 : rng() % other.size();
        s.insert(pos, other.substr(a, rng() % lim.max_splice));
        break;
      }
      case 4: {
        const std::size_t len = rng() % lim.max_repeat;
        if (pos + len <= s.size()) s.insert(pos, s.substr(pos, len));
        break;
      }
    }
  }
  return s;
}

}  // namespace racksim::testing
