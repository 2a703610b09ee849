// racksim validate SUITE.yaml [--json]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <ostream>

#include "sim/cli/commands.h"
#include "sim/workflow/thread_pool.h"
#include "sim/workflow/validate.h"

namespace racksim::cli {

namespace {

int cmd_validate(const std::string& file, bool json_out, bool exact, std::ostream& out, std::ostream& err) {
  const workflow::Suite suite = workflow::load_suite(file);  // invalid suite: InputError, exit 1
  const workflow::SuiteResult r = workflow::run_suite(suite, workflow::hardware_jobs(), exact);
  if (json_out)
    out << workflow::to_json(r).dump() << '\n';
  else
    out << workflow::format_table(r);
  // The table (or JSON) is the result, on stdout; what went wrong also goes to stderr, where a
  // script or a CI log looks for it.
  for (const auto& row : r.rows) {
    if (row.field.empty())
      err << fmt::format("{}: error: case '{}' could not run: {}\n", file, row.case_name, row.message);
    else if (!row.pass)
      err << fmt::format("{}: case '{}': {} predicted {} against {}, outside the tolerance\n", file, row.case_name,
                         row.field, row.predicted.dump(), row.measured.dump());
  }
  if (r.case_errors > 0 || r.failed > 0)
    err << fmt::format("{}: {} of {} checks outside tolerance, {} case{} could not run\n", file, r.failed, r.checks,
                       r.case_errors, r.case_errors == 1 ? "" : "s");
  return workflow::exit_code(r);  // 0 all pass, 4 a check outside tolerance, 1 a case could not run
}

}  // namespace

Registered register_validate(CLI::App& app) {
  struct S { std::string file; bool json = false; bool exact = false; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand(
      "validate", "check predictions against measurements and expected speedups (exit 4 when a check fails)");
  sub->add_option("suite", s->file, "validation suite YAML file")->required()->check(path_given());
  sub->add_flag("--json", s->json, "print the checks as a JSON list");
  sub->add_flag("--exact", s->exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream& err) { return cmd_validate(s->file, s->json, s->exact, out, err); }};
}

}  // namespace racksim::cli
