#include "sim/cli/cli.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <ostream>

#include "sim/cli/commands.h"
#include "sim/core/log.h"
#include "sim/core/units.h"
#include "sim/input/diagnostics.h"
#include "sim/report/report.h"

namespace racksim::cli {

namespace {
// Every subcommand, in the order `racksim --help` lists them.
const std::vector<Registered (*)(CLI::App&)> kCommands = {
    register_run, register_compare, register_sweep, register_validate, register_collective, register_hw, register_models,
    register_calibrate, register_replay, register_import,
};
}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"racksim: predicts step time, throughput, MFU and memory of LLM training on GPU clusters"};
  app.name("racksim");  // usage lines say "racksim run ..."
  app.set_version_flag("--version", "racksim " + sim::version());
  app.require_subcommand(1);
  app.fallthrough(false);
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose,
               "log what was applied (preset, calibration, transfer rule) to stderr; -vv adds debug detail");
  app.add_flag("-q,--quiet", quiet, "log only errors to stderr (no warnings, no progress)");
  app.footer("Logs and progress go to stderr; SPDLOG_LEVEL=info|debug|warn|error sets the level when -v/-q are not given.");
  std::vector<Registered> commands;
  for (auto reg : kCommands) commands.push_back(reg(app));

  std::vector<std::string> argv_rev(args.rbegin(), args.rend());
  try {
    app.parse(argv_rev);
  } catch (const CLI::CallForHelp& e) {
    // Help of the deepest subcommand the user named (racksim hw show --help).
    const CLI::App* leaf = &app;
    std::string path;  // "racksim hw" for `racksim hw show --help`: usage lines name the whole command
    while (!leaf->get_subcommands().empty()) {
      path += (path.empty() ? "" : " ") + leaf->get_name();
      leaf = leaf->get_subcommands().front();
    }
    out << leaf->help(path);
    return kOk;
  } catch (const CLI::CallForAllHelp& e) {
    out << app.help("", CLI::AppFormatMode::All);
    return kOk;
  } catch (const CLI::CallForVersion& e) {
    out << "racksim " << sim::version() << '\n';
    return kOk;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << '\n';
    err << "run 'racksim --help' for usage\n";
    return kInvalidInput;
  }

  // Logs go to this call's stderr stream while the command runs (tests run the CLI in-process).
  struct LogScope {
    std::shared_ptr<spdlog::logger> saved = spdlog::default_logger();
    LogScope(std::ostream& err, spdlog::level::level_enum level) { sim::log::to_stream(err, level); }
    ~LogScope() { spdlog::set_default_logger(saved); }
  } log_scope(err, sim::log::level_from_flags(verbose, quiet));

  try {
    for (const auto& c : commands)
      if (c.sub->parsed()) return c.action(out, err);
  } catch (const input::InputError& e) {
    err << e.what() << '\n';
    return kInvalidInput;
  } catch (const sim::UnitError& e) {
    err << "error: " << e.what() << '\n';
    return kInvalidInput;
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << '\n';
    return kInvalidInput;
  } catch (const std::exception& e) {
    err << "internal error: " << e.what() << '\n';
    return kInternalError;
  }
  err << "internal error: no command ran\n";
  return kInternalError;
}

}  // namespace racksim::cli
