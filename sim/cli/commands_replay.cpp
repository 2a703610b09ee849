// racksim replay MODULE.hlo[.gz] --system PRESET [--gpus N] [--set ...]... [--json] [--trace FILE]
//
// Replays a compiled XLA program (the HLO text of jax.jit(step).lower(...).compile()) on a
// modelled system: the importer (workloads/hlo/hlo_import.h) turns the module into an OpGraph on
// XLA's own schedule, and the run layer (sim::run_hlo) replays it on the job that --system, --gpus
// and --set name. The report is the one `run` prints; its scenario holds the system and launch
// settings, and `hlo` describes the module.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <ostream>

#include "hardware_models/system_spec.h"
#include "sim/cli/commands.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "input/yaml_reader.h"
#include "sim/report/report.h"
#include "sim/run/run.h"

namespace racksim::cli {

using nlohmann::json;

namespace {

void print_summary(std::ostream& out, const json& r) {
  const json& h = r["hlo"];
  out << fmt::format("module              {} ({})\n", h["module"].get<std::string>(), h["file"].get<std::string>());
  out << fmt::format("system              {} x {}\n", r["scenario"]["system"]["gpus"].get<int>(),
                     r["scenario"]["system"]["preset"].get<std::string>());
  print_report_figures(out, r);
  out << fmt::format("program             {} kernels, {} collectives, {} host copies; {:.1f} TFLOP, {:.1f} GB HBM, "
                     "{:.1f} GB host\n",
                     h["kernels"].get<std::size_t>(), h["collectives"].get<std::size_t>(),
                     h["host_copies"].get<std::size_t>(), h["flops"].get<double>() / 1e12,
                     h["hbm_bytes"].get<double>() / 1e9, h["host_bytes"].get<double>() / 1e9);
  out << fmt::format("                    {} command-buffer executions; {:.0f} buffer references re-recorded per step\n",
                     h["command_buffer_executions"].get<std::size_t>(), h["rerecorded_buffer_refs"].get<double>());
  for (const auto& l : h["loops"])
    out << fmt::format("  loop {:<28} x{} ({})\n", l["name"].get<std::string>(), l["trip_count"].get<int64_t>(),
                       l["source"].get<std::string>());
  for (const auto& w : r["warnings"]) out << "warning: " << input::escaped_text(w.get<std::string>(), false) << '\n';
}

int cmd_replay(const std::string& file, const std::string& system, int gpus, const std::vector<std::string>& sets,
               bool json_out, const std::string& trace, std::ostream& out) {
  // A preset or calibration file named by --system or --set is an input too.
  const sim::RunResult r = input::load_guarding_outputs({{trace, "--trace"}}, {{file, "the HLO module"}},
                                                        "a file the replay read",
                                                        [&] { return sim::run_hlo(file, system, gpus, sets); });
  if (!trace.empty()) sim::write_trace_file(trace, r.job, r.graph, r.replay);
  if (json_out)
    out << r.report.dump() << '\n';
  else
    print_summary(out, r.report);
  return kOk;
}

}  // namespace

Registered register_replay(CLI::App& app) {
  struct S {
    std::string file, system, trace;
    int gpus = 0;
    std::vector<std::string> sets;
    bool json = false;
  };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("replay", "replay a compiled XLA HLO module (text, optionally .gz) on a system");
  sub->footer("Limits: HLO text of at most 4 GiB (also after gzip decompression), at most 1,048,576 GPUs, at most\n"
              "2,000,000 operations in the unrolled step (docs/decisions.md, \"Input limits\").");
  sub->add_option("module", s->file, "HLO module text file (MODULE.hlo or MODULE.hlo.gz)")->required()->check(path_given());
  sub->add_option("--system", s->system, "system preset")->required();
  auto* gpus_opt =
      sub->add_option("--gpus", s->gpus, "GPUs of the job, 1 to 1,048,576 (default: the devices the module was compiled for)");
  sub->add_option("--set", s->sets, "override a scenario key: KEY.PATH=VALUE (repeatable), e.g. system.calibration=h200");
  sub->add_flag("--json", s->json, "print the JSON report");
  sub->add_option("--trace", s->trace, "write a Chrome/Perfetto trace of the step (FILE.json, or FILE.json.gz compressed)")->check(path_given());
  return {sub, [s, gpus_opt](std::ostream& out, std::ostream&) {
            if (gpus_opt->count() > 0 && (s->gpus < 1 || s->gpus > hw::kMaxGpus)) {
              input::Diagnostics diag;
              diag.error({fmt::format("--gpus {}", s->gpus), 0, 0}, "",
                         fmt::format("must be between 1 and {} (the most GPUs racksim models; docs/decisions.md, "
                                     "\"Input limits\")",
                                     hw::kMaxGpus));
              diag.throw_if_any();
            }
            return cmd_replay(s->file, s->system, s->gpus, s->sets, s->json, s->trace, out);
          }};
}

}  // namespace racksim::cli
