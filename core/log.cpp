#include "core/log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <sstream>

namespace racksim::sim::log {

namespace {
constexpr const char* kPattern = "%l: %v";  // "warning: ...", "info: ..."

void install(std::shared_ptr<spdlog::sinks::sink> sink, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("racksim", std::move(sink));
  logger->set_pattern(kPattern);
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // lines appear as they are logged (progress)
  spdlog::set_default_logger(std::move(logger));
}
}  // namespace

std::optional<spdlog::level::level_enum> level_from_env() {
  const char* env = std::getenv("SPDLOG_LEVEL");
  if (!env || !*env) return std::nullopt;
  // spdlog's syntax: "LEVEL" or "logger=LEVEL,..."; a bare level or racksim=LEVEL applies here.
  std::string text(env);
  std::optional<spdlog::level::level_enum> found;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    std::string name, value = part;
    if (auto eq = part.find('='); eq != std::string::npos) {
      name = part.substr(0, eq);
      value = part.substr(eq + 1);
    }
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!name.empty() && name != "racksim") continue;
    if (value == "warn") value = "warning";
    const auto lvl = spdlog::level::from_str(value);
    // from_str answers "off" for anything unknown; only take "off" when it was asked for.
    if (lvl == spdlog::level::off && value != "off") continue;
    found = lvl;
  }
  return found;
}

spdlog::level::level_enum level_from_flags(int verbose, bool quiet) {
  if (quiet) return spdlog::level::err;
  if (verbose >= 2) return spdlog::level::debug;
  if (verbose == 1) return spdlog::level::info;
  return level_from_env().value_or(spdlog::level::warn);
}

void to_stream(std::ostream& out, spdlog::level::level_enum level) {
  install(std::make_shared<spdlog::sinks::ostream_sink_mt>(out, /*force_flush=*/true), level);
}

void to_stderr(spdlog::level::level_enum level) { install(std::make_shared<spdlog::sinks::stderr_sink_mt>(), level); }

namespace {
// Library users (tests, embedders) get the same default as the CLI: stderr, warn (or SPDLOG_LEVEL),
// not spdlog's own stdout at info.
[[maybe_unused]] const bool kDefaultInstalled = [] {
  to_stderr(level_from_flags(0, false));
  return true;
}();
}  // namespace

}  // namespace racksim::sim::log
