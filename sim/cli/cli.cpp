#include "sim/cli/cli.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <new>
#include <ostream>

#include "sim/cli/commands.h"
#include "core/log.h"
#include "core/text.h"
#include "core/units.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "sim/report/report.h"

namespace racksim::cli {

namespace {
// Every subcommand, in the order `racksim --help` lists them.
const std::vector<Registered (*)(CLI::App&)> kCommands = {
    register_run, register_compare, register_sweep, register_validate, register_collective, register_hw, register_models,
    register_calibrate, register_replay, register_import,
};
}  // namespace

static int run_parsed(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const int code = run_parsed(args, out, err);
  // Output that did not reach its destination (a full disk, /dev/full) is an error, not a
  // success: every command's standard output is checked once it has been flushed (a command
  // that failed has said why already).
  if (code == kInvalidInput || code == kInternalError) return code;
  try {
    input::check_stream(out, "<stdout>", "standard output");
  } catch (const input::InputError& e) {
    err << e.what() << '\n';
    return code == kOk ? kInvalidInput : code;
  }
  return code;
}

namespace {

// What a library exception says, without the library's own tags ("[json.exception.type_error.302] ").
std::string plain(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("[json.exception.", 0) == 0) {
    const auto close = s.find("] ");
    if (close != std::string::npos) s = s.substr(close + 2);
  }
  return s;
}

}  // namespace

static int run_parsed(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
  app.footer("Logs and progress go to stderr; SPDLOG_LEVEL=info|debug|warn|error sets the level when -v/-q are not given.\n"
             "Limits: 1,048,576 GPUs; YAML files of 16 MiB (1,000,000 values with aliases expanded, one document);\n"
             "HLO of 4 GiB (also decompressed); 65,536 layers x micro-steps per simulation; sweeps of 1,000,000\n"
             "points per run. Exit codes: 0 ok, 1 invalid input or failed write, 2 internal error, 4 validate\n"
             "outside tolerance. docs/decisions.md (\"Input limits\") has them all.");
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
    // A mistyped subcommand (`racksim rnu x.yaml`): name it and the nearest one. The options before
    // the subcommand (-v, -q) take no value, so the first word not starting with '-' is it.
    for (const auto& a : args) {
      if (a.empty() || a[0] == '-') continue;
      std::vector<std::string> names;
      for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
      if (std::find(names.begin(), names.end(), a) != names.end()) break;
      err << "error: unknown command '" << a << "'";
      if (auto near = sim::nearest(a, names, std::max<std::size_t>(2, a.size() / 2)))
        err << "; did you mean '" << *near << "'?";
      err << '\n';
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      err << "commands: " << list << "; run 'racksim --help' for usage\n";
      return kInvalidInput;
    }
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
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the file system refuses (too long, a loop of links, ...).
    err << "error: " << (e.path1().empty() ? std::string() : e.path1().string() + ": ") << e.code().message() << '\n';
    return kInvalidInput;
  } catch (const std::bad_alloc&) {
    err << "internal error: out of memory (racksim bounds what it reads, docs/decisions.md \"Input limits\"; "
           "please report the input)\n";
    return kInternalError;
  } catch (const std::exception& e) {
    err << "internal error: " << plain(e) << '\n';
    return kInternalError;
  }
  err << "internal error: no command ran\n";
  return kInternalError;
}

}  // namespace racksim::cli
