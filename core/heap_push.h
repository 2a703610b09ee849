#pragma once
// Pushing onto a binary heap kept in a std::vector (the order of std::push_heap: `later(a, b)` true when a
// belongs below b), with the new entry held in registers during the sift-up. push_back then std::push_heap
// writes the entry field by field and reads it back whole at once, a load that store forwarding cannot
// serve (it waits for the stores to reach the cache; a tenth of the replay's queue time in profiles).
// The resulting heap is the one std::push_heap builds. Always inlined: the flow network's copy was left a call.

#include <cstddef>
#include <vector>

namespace racksim::sim {

template <class Entry, class Later>
[[gnu::always_inline]] inline void heap_push(std::vector<Entry>& heap, const Entry& e, Later later) {
  std::size_t hole = heap.size();
  heap.emplace_back();
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / 2;
    if (!later(heap[parent], e)) break;
    heap[hole] = heap[parent];
    hole = parent;
  }
  heap[hole] = e;
}

}  // namespace racksim::sim
