#include "core/huge_page_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

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

std::size_t configure_process_heap(std::size_t reserve_bytes) noexcept {
#if defined(__GLIBC__)
  // A simulation allocates and frees arrays of a few MiB per replay (a sweep, thousands of them):
  // glibc maps such blocks afresh and trims freed heap back to the system, so every replay faulted
  // its pages in again (60,000 page faults per 100 sweep points, a tenth of the CPU time). Blocks up
  // to 32 MiB (glibc's largest threshold) come from the heap, and freed heap is kept for reuse. The
  // kept heap and the huge-page pool together raised the peak RSS (100 sweep points: 49 -> 75 MB,
  // docs/decisions.md); under sweep --jobs each thread's malloc arena keeps its own.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(__GLIBC__)
  // The many small blocks of one run (graph names, maps, the flow network's lists: about 10 MB for the
  // 16,384-GPU step) faulted in 4 KiB at a time, 2,300 faults and a third of that run's CPU on the
  // development VM (docs/performance.md). glibc extends the main heap (brk) by a request plus M_TOP_PAD,
  // so one extension covers the whole reserve, one mapping the kernel lets us mark for huge pages. The
  // probe is larger than the heap's free top and under the mmap threshold just set, so glibc must extend
  // the heap to serve it (unless a free block elsewhere holds it; then less is marked). Later extensions are not marked (a brk extension with other flags is a mapping
  // of its own). Pages are touched only as malloc hands them out: the reserve costs address space.
  mallopt(M_TOP_PAD, static_cast<int>(std::min<std::size_t>(reserve_bytes, std::size_t{1} << 30)));
  // Larger than the heap's free top chunk (keepcost), so that the top cannot serve it without growing.
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33)
  void* probe = std::malloc(mallinfo2().keepcost + kHuge);
#else
  void* probe = std::malloc(kHuge);
#endif
  const auto begin = reinterpret_cast<std::uintptr_t>(probe);
  const auto end = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  const std::uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
  std::size_t marked = 0;
  if (probe != nullptr && end > aligned &&
      ::madvise(reinterpret_cast<void*>(aligned), end - aligned, MADV_HUGEPAGE) == 0)
    marked = end - aligned;
  std::free(probe);
  mallopt(M_TOP_PAD, 128 << 10);  // glibc's default pad again for later extensions
  return marked;
#else
  (void)reserve_bytes;
  return 0;
#endif
}

std::size_t pooled_bytes() noexcept {
  Pool& P = pool();
  std::lock_guard lock(P.mu);
  return P.free_bytes;
}

}  // namespace racksim::huge_pages
