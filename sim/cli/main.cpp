// racksim entry point: all logic is in cli.cpp; main only adapts argv and the streams.
#include <iostream>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "sim/cli/cli.h"

int main(int argc, char** argv) {
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
  std::vector<std::string> args(argv + 1, argv + argc);
  return racksim::cli::run(args, std::cout, std::cerr);
}
