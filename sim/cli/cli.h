// The `racksim` command line (DESIGN.md "CLI"). A library so tests can run it in-process.
// Exit codes: 0 success; 1 invalid input; 2 internal error; 4 validate found a case outside
// its tolerance.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace racksim::cli {

enum ExitCode { kOk = 0, kInvalidInput = 1, kInternalError = 2, kValidationFailed = 4 };

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace racksim::cli
