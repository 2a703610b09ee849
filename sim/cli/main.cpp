// racksim entry point: all logic is in cli.cpp; main only adapts argv and the streams.
#include <iostream>
#include <string>
#include <vector>

#include "core/huge_page_allocator.h"
#include "input/files.h"
#include "sim/cli/cli.h"

int main(int argc, char** argv) {
  racksim::huge_pages::configure_process_heap(std::size_t{64} << 20);  // core/huge_page_allocator.h
  racksim::input::install_partial_output_cleanup();  // an interrupted --trace is removed (input/files.h)
  std::vector<std::string> args(argv + 1, argv + argc);
  return racksim::cli::run(args, std::cout, std::cerr);
}
