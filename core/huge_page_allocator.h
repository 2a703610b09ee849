// An allocator for the few large arrays of a simulation (a graph's ops, the replay's per-op
// records): blocks of 2 MiB and more are mapped on their own, 2 MiB-aligned and marked for
// transparent huge pages, so that touching them costs one page fault per 2 MiB instead of one per
// 4 KiB (the page faults of a 75,000-op graph were a third of a run's CPU time). Freed mappings are
// kept in a small process-wide pool and handed to the next request they fit (a sweep builds and
// replays a graph per point: the kernel zeroed every fresh huge page again, 8% of a sweep's CPU).
// Smaller blocks, and systems without madvise, use the ordinary allocator. No effect on results:
// the arrays' elements are constructed by their vectors, never read from the mapping as found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace racksim {

namespace huge_pages {
// Maps (or takes from the pool) a 2 MiB-aligned block of at least `bytes` (a multiple of 2 MiB),
// marked for huge pages; nullptr if the mapping fails or the system has no madvise.
void* map(std::size_t bytes);
// Returns a block from map(): kept in the pool while the pool holds under its bound, else unmapped.
void unmap(void* p, std::size_t bytes) noexcept;
// Unmaps every pooled block (tests; the pool otherwise lives as long as the process).
void release_pool() noexcept;
// Bytes held in the pool now.
std::size_t pooled_bytes() noexcept;
// Sets glibc's malloc up for a simulation process: blocks up to 32 MiB from the heap, freed heap kept,
// and the main heap grown by `reserve_bytes` at once with that span marked for huge pages. Returns the
// bytes marked (0 where there is no glibc or madvise). Call first thing in main, before any thread
// starts. No effect on results.
std::size_t configure_process_heap(std::size_t reserve_bytes) noexcept;
}  // namespace huge_pages

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHuge = std::size_t{2} << 20;

  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= kHuge) {
      if (void* p = huge_pages::map(round_up(bytes))) return static_cast<T*>(p);
      throw std::bad_alloc();
    }
#endif
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHuge) {
      huge_pages::unmap(p, round_up(n * sizeof(T)));
      return;
    }
#endif
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static std::size_t round_up(std::size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }
};

}  // namespace racksim
