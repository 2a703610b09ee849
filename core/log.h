// Logging (spdlog): warnings, progress and "what was applied" notes go to stderr, never to
// stdout, so `--json` output stays one clean JSON document. Library code logs through spdlog's
// default logger (spdlog::info(...), spdlog::warn(...)); the CLI and the Python module decide
// where it writes and at which level:
//   default warn; -v info; -vv debug; -q error only; SPDLOG_LEVEL (spdlog's env syntax, e.g.
//   SPDLOG_LEVEL=info) sets the level when neither -v nor -q is given.
#pragma once

#include <spdlog/common.h>

#include <iosfwd>
#include <optional>
#include <string>

namespace racksim::sim::log {

// The level SPDLOG_LEVEL asks for ("info", "debug", "warn", "off", ... or "racksim=info,..."),
// nullopt when unset or not understood.
std::optional<spdlog::level::level_enum> level_from_env();

// -v count and -q flag to a level; with neither, SPDLOG_LEVEL or else warn.
spdlog::level::level_enum level_from_flags(int verbose, bool quiet);

// Makes the default logger write "LEVEL: message" lines to `out` at `level` and above.
// `out` must outlive the logger or a later call; to_stderr() restores the process default.
void to_stream(std::ostream& out, spdlog::level::level_enum level);
void to_stderr(spdlog::level::level_enum level);

}  // namespace racksim::sim::log
