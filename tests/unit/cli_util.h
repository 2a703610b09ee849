// Shared by the tests that drive the command line in-process: run `racksim ARGS...` and keep its
// exit code, standard output and standard error; read a file it wrote.
#pragma once

#include <fstream>
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

// A file's whole content ("" if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace racksim::testing
