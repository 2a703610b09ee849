#include "core/huge_page_allocator.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace racksim::huge_pages {
namespace {

constexpr std::size_t kHuge = std::size_t{2} << 20;
// What the pool keeps at most: the largest arrays of one 16,384-GPU step (ops and records, about
// 27 MiB) for each of a few sweep threads; the sweep's peak RSS bound (500 MB) leaves room for it.
constexpr std::size_t kPoolBytes = std::size_t{128} << 20;

struct Pool {
  std::mutex mu;
  std::vector<std::pair<void*, std::size_t>> free;  // blocks ready for reuse
  std::unordered_map<void*, std::size_t> lent;      // blocks handed out larger than asked: their length
  std::size_t free_bytes = 0;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: vectors freed during static destruction still find it
  return *p;
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
void* map_fresh(std::size_t len) {
  void* p = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // Keep the 2 MiB-aligned part, return the slack on both sides.
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (base + kHuge - 1) & ~(kHuge - 1);
  if (aligned > base) ::munmap(p, aligned - base);
  const std::uintptr_t end = aligned + len, map_end = base + len + kHuge;
  if (map_end > end) ::munmap(reinterpret_cast<void*>(end), map_end - end);
  ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}
#endif

}  // namespace

void* map(std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  Pool& P = pool();
  {
    std::lock_guard lock(P.mu);
    // The smallest pooled block that holds the request, and at most twice its size: a small array must
    // not hold a large block (and its memory) for its lifetime.
    auto best = P.free.end();
    for (auto it = P.free.begin(); it != P.free.end(); ++it)
      if (it->second >= bytes && it->second / 2 <= bytes && (best == P.free.end() || it->second < best->second))
        best = it;
    if (best != P.free.end()) {
      const auto [p, len] = *best;
      *best = P.free.back();
      P.free.pop_back();
      P.free_bytes -= len;
      if (len != bytes) P.lent[p] = len;
      return p;
    }
  }
  return map_fresh(bytes);
#else
  (void)bytes;
  return nullptr;
#endif
}

void unmap(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  Pool& P = pool();
  {
    std::lock_guard lock(P.mu);
    if (auto it = P.lent.find(p); it != P.lent.end()) {
      bytes = it->second;
      P.lent.erase(it);
    }
    if (bytes > kPoolBytes) {  // larger than the whole pool: not kept
      ::munmap(p, bytes);
      return;
    }
    try {
      P.free.emplace_back(p, bytes);
      P.free_bytes += bytes;
    } catch (...) {
      ::munmap(p, bytes);
      return;
    }
    // Over the bound: the smallest blocks go first (a large one serves any later request).
    while (P.free_bytes > kPoolBytes) {
      auto small = std::min_element(P.free.begin(), P.free.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; });
      ::munmap(small->first, small->second);
      P.free_bytes -= small->second;
      *small = P.free.back();
      P.free.pop_back();
    }
  }
#else
  (void)p;
  (void)bytes;
#endif
}

void release_pool() noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  Pool& P = pool();
  std::lock_guard lock(P.mu);
  for (const auto& [p, len] : P.free) ::munmap(p, len);
  P.free.clear();
  P.free_bytes = 0;
#endif
}

std::size_t pooled_bytes() noexcept {
  Pool& P = pool();
  std::lock_guard lock(P.mu);
  return P.free_bytes;
}

}  // namespace racksim::huge_pages
