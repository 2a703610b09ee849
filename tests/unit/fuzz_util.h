// Shared by the bounded, deterministic fuzz tests: reading a committed corpus and mutating its
// files (byte flips, insertions of format-significant tokens, deletions, splices from other
// files, duplications). Same seed, same mutations.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "input/diagnostics.h"
#include "input/yaml_reader.h"

namespace racksim::testing {

// Every file in `dir` (with `extension` only those whose name ends so), sorted by content so the order does
// not depend on the file system.
inline std::vector<std::string> read_corpus(const std::string& dir, const std::string& extension = "") {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!extension.empty() && e.path().extension() != extension) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    files.push_back(ss.str());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The fuzzer reaches only the keys its corpus names. Loads every file of `dir` with `load(text, label)` (label: what the
// loader is told the file is called) under an input::DeclaredKeyProbe and returns, one per line, each key the loader
// declared in that file that no file of the corpus names (list positions dropped; keys under a map no file has are
// reported through that map's own key). A rejected file (InputError) counts: its keys were declared all the same.
inline std::string unnamed_declared_keys(const std::string& dir, const std::function<std::string(const std::string&)>& label_of,
                                         const std::function<void(const std::string&, const std::string&)>& load,
                                         std::size_t* declared_count = nullptr) {
  std::set<std::string> named, declared;
  std::function<void(const YAML::Node&, const std::string&)> collect = [&](const YAML::Node& n, const std::string& path) {
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) continue;
        const std::string p = path.empty() ? it->first.Scalar() : path + "." + it->first.Scalar();
        named.insert(p);
        collect(it->second, p);
      }
    } else if (n.IsSequence()) {
      for (const auto& e : n) collect(e, path);
    }
  };
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    try {
      collect(YAML::Load(ss.str()), "");
    } catch (const YAML::Exception&) {  // a malformed seed names nothing
      continue;
    }
    const std::string label = label_of(e.path().filename().string());
    input::DeclaredKeyProbe probe;
    try {
      load(ss.str(), label);
    } catch (const input::InputError&) {
    }
    for (const auto& k : probe.keys()) {
      if (k.file != label) continue;  // keys of the files it names (presets, scenarios, calibrations)
      std::string path;
      for (std::size_t i = 0; i < k.path.size(); ++i) {
        if (k.path[i] == '[') {
          while (i < k.path.size() && k.path[i] != ']') ++i;
          continue;
        }
        path += k.path[i];
      }
      declared.insert(path);
    }
  }
  if (declared_count) *declared_count = declared.size();
  std::string missing;
  for (const auto& k : declared)
    if (!named.count(k)) missing += "\n  " + k;
  return missing;
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

// The bounds every fuzz run holds each input to (issue #16): no case may take more than
// kMaxCaseSeconds, and the process may not hold more than kMaxFuzzBytes of data (heap and
// anonymous mappings) while the fuzzer runs. An allocation beyond fails with std::bad_alloc,
// which the fuzz loops report as a failure (with the input), instead of swapping the machine.
inline constexpr double kMaxCaseSeconds = 10.0;
inline constexpr std::uint64_t kMaxFuzzBytes = std::uint64_t{2} << 30;

class MemoryLimit {
 public:
  explicit MemoryLimit(std::uint64_t bytes = kMaxFuzzBytes) {
    ok_ = getrlimit(RLIMIT_DATA, &saved_) == 0;
    if (!ok_) return;
    rlimit lim = saved_;
    lim.rlim_cur = std::min<rlim_t>(saved_.rlim_max, static_cast<rlim_t>(bytes));
    ok_ = setrlimit(RLIMIT_DATA, &lim) == 0;
  }
  ~MemoryLimit() {
    if (ok_) setrlimit(RLIMIT_DATA, &saved_);
  }
  MemoryLimit(const MemoryLimit&) = delete;
  MemoryLimit& operator=(const MemoryLimit&) = delete;

 private:
  rlimit saved_{};
  bool ok_ = false;
};

// CI runs each fuzzer a fixed number of times from a fixed seed. For a longer hunt, set
// RACKSIM_FUZZ_SCALE (iterations x N) and RACKSIM_FUZZ_SEED (added to every seed).
inline int fuzz_iterations(int n) {
  const char* s = std::getenv("RACKSIM_FUZZ_SCALE");
  const long k = s ? std::strtol(s, nullptr, 10) : 1;
  return static_cast<int>(n * std::clamp<long>(k, 1, 1000));
}
inline std::uint64_t fuzz_seed(std::uint64_t seed) {
  const char* s = std::getenv("RACKSIM_FUZZ_SEED");
  return seed + (s ? std::strtoull(s, nullptr, 10) : 0);
}

// Seconds since `t0`, for the per-case time bound.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `body(text, pick, i)` on `n` mutations (x RACKSIM_FUZZ_SCALE) of `corpus`, under the bounds above; `body`
// returns true when it accepted the input. An InputError counts as a rejection and must name a file; anything else
// thrown is a failure, shown with its input. Returns {accepted, rejected}.
template <class F>
std::pair<int, int> fuzz_mutants(const std::vector<std::string>& corpus, const std::vector<std::string>& tokens, int n,
                                 std::uint64_t seed, F&& body, const MutationLimits& lim = {}) {
  EXPECT_GE(corpus.size(), 2u);
  if (corpus.empty()) return {0, 0};
  std::mt19937_64 rng(fuzz_seed(seed));
  int accepted = 0, rejected = 0;
  MemoryLimit limit;
  for (int i = 0; i < fuzz_iterations(n); ++i) {
    const std::size_t pick = rng() % corpus.size();
    const std::string text = mutate(corpus[pick], corpus, tokens, rng, lim);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (body(text, pick, i) ? accepted : rejected) += 1;
    } catch (const input::InputError& e) {
      ++rejected;
      for (const auto& d : e.diagnostics()) EXPECT_FALSE(d.where.file.empty()) << e.what() << "\n--- input ---\n" << text;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected " << typeid(e).name() << ": " << e.what() << "\n--- input ---\n" << text;
      break;
    }
    EXPECT_LT(seconds_since(t0), kMaxCaseSeconds) << text;
  }
  return {accepted, rejected};
}

}  // namespace racksim::testing
