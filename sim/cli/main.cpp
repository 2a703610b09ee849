// racksim entry point: all logic is in cli.cpp; main only adapts argv and the streams.
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return racksim::cli::run(args, std::cout, std::cerr);
}
