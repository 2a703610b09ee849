// An allocator for the few large arrays of a simulation (a graph's ops, the replay's per-op
// records): blocks of 2 MiB and more are mapped on their own, 2 MiB-aligned and marked for
// transparent huge pages, so that touching them costs one page fault per 2 MiB instead of one per
// 4 KiB (the page faults of a 75,000-op graph were a third of a run's CPU time). Smaller blocks,
// and systems without madvise, use the ordinary allocator. No effect on results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace racksim {

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
      const std::size_t len = round_up(bytes);
      void* p = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      // Keep the 2 MiB-aligned part, return the slack on both sides.
      const auto base = reinterpret_cast<std::uintptr_t>(p);
      const std::uintptr_t aligned = (base + kHuge - 1) & ~(kHuge - 1);
      if (aligned > base) ::munmap(p, aligned - base);
      const std::uintptr_t end = aligned + len, map_end = base + len + kHuge;
      if (map_end > end) ::munmap(reinterpret_cast<void*>(end), map_end - end);
      ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
      return reinterpret_cast<T*>(aligned);
    }
#endif
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHuge) {
      ::munmap(p, round_up(n * sizeof(T)));
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
