// Shared by the tests that drive the command line in-process: run `racksim ARGS...` and keep its
// exit code, standard output and standard error.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/cli.h"

namespace racksim::testing {

struct CliOut {
  int code;
  std::string out, err;
};

inline CliOut run_cli(const std::vector<std::string>& args) {
  std::ostringstream o, e;
  const int code = racksim::cli::run(args, o, e);
  return {code, o.str(), e.str()};
}

}  // namespace racksim::testing
