// racksim replay MODULE.hlo[.gz] --system PRESET [--gpus N] [--set ...]... [--json] [--trace FILE]
//
// Replays a compiled XLA program (the HLO text of jax.jit(step).lower(...).compile()) on a
// modelled system: the importer (workloads/hlo) turns the module into an OpGraph on XLA's own
// schedule, and the engine replays it like any training graph. The report is the one `run`
// prints; its scenario holds the system and launch settings, and `hlo` describes the module.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "sim/cli/commands.h"
#include "sim/input/diagnostics.h"
#include "sim/input/files.h"
#include "sim/report/report.h"
#include "sim/scenario/scenario.h"
#include "sim/workflow/replay_hook.h"
#include "workloads/hlo/hlo_lower.h"
#include "workloads/hlo/hlo_parser.h"

namespace racksim::cli {

using nlohmann::json;

namespace {

struct Replayed {
  sim::Scenario scenario;
  workloads::OpGraph graph;
  sim::ReplayResult replay;
  json report;
};

// A scenario for the report and the engine: the system from the preset (with --set applied
// by the scenario loader, so system.calibration, system.overrides and training.cuda_graphs
// work as in `run`). The loader needs a model and a batch; the HLO fixes the real workload, so
// a minimal stand-in is given and replaced in the report by the module's description.
sim::Scenario replay_scenario(const std::string& label, const std::string& system, int gpus,
                              const workloads::hlo::ImportSummary& s, const std::vector<std::string>& sets) {
  const int tp = s.tp;
  const std::string text = fmt::format(
      "name: {name}\n"
      "system:\n"
      "  preset: {preset}\n"
      "  gpus: {gpus}\n"
      "model:      # stand-in required by the scenario schema; the HLO module is the workload\n"
      "  layers: 1\n"
      "  hidden: {hidden}\n"
      "  ffn_hidden: {ffn}\n"
      "  heads: {tp}\n"
      "  kv_heads: {tp}\n"
      "  vocab: {vocab}\n"
      "training:\n"
      "  seq_len: 1\n"
      "  global_batch: {dp}\n"
      "  micro_batch: 1\n"
      "  precision: {precision}\n"
      "  parallelism: {{tp: {tp}, pp: 1, cp: 1, dp: auto}}\n"
      "  framework: jax\n"
      "  cuda_graphs: true    # XLA runs fusions and library calls as command buffers (CUDA graphs)\n"
      "  nvls: true\n",
      fmt::arg("name", json(fmt::format("replay {}", std::filesystem::path(label).filename().string())).dump()),
      fmt::arg("preset", json(system).dump()), fmt::arg("gpus", gpus), fmt::arg("hidden", 128 * tp),
      fmt::arg("ffn", 512 * tp), fmt::arg("vocab", 128 * tp), fmt::arg("tp", tp), fmt::arg("dp", std::max(1, gpus / tp)),
      fmt::arg("precision", s.fp8 ? "fp8" : "bf16"));
  return sim::load_scenario_text(text, "racksim replay --system", sim::parse_set_overrides(sets));
}

json summary_json(const workloads::hlo::ImportSummary& s, const std::string& path) {
  json loops = json::array();
  for (const auto& l : s.loops) loops.push_back({{"name", l.name}, {"trip_count", l.trip_count}, {"source", l.source}});
  return {{"file", path},
          {"module", s.module_name},
          {"scheduled", s.scheduled},
          {"module_devices", s.module_devices},
          {"opcodes", s.opcodes},
          {"custom_call_targets", s.custom_calls},
          {"unknown", s.unknown},
          {"loops", loops},
          {"kernels", s.kernels},
          {"collectives", s.collectives},
          {"host_copies", s.host_copies},
          {"flops", s.flops},
          {"tensor_flops", s.tensor_flops},
          {"recompute_tensor_flops", s.recompute_tensor_flops},
          {"hbm_bytes", s.hbm_bytes},
          {"xla_convention_flops", s.xla_convention_flops},
          {"xla_convention_bytes", s.xla_convention_bytes},
          {"temps_in_outputs", s.temps_in_outputs},
          {"command_buffer_executions", s.command_buffer_executions},
          {"rerecorded_buffer_refs", s.rerecorded_buffer_refs},
          {"host_bytes", s.host_bytes},
          {"argument_bytes", s.argument_bytes},
          {"output_bytes", s.output_bytes},
          {"params", s.params},
          {"params_source", s.params_source},
          {"tokens_per_device", s.tokens_per_device},
          {"tokens_source", s.tokens_source},
          {"model_flops_per_device", s.model_flops_per_device},
          {"model_flops_source", s.model_flops_source}};
}

// The system and the GPU count of a replay come from --system and --gpus (or the module): a
// --set of the same keys would contradict them, so it is an error rather than one silently winning.
void check_replay_sets(const std::vector<std::string>& sets) {
  input::Diagnostics diag;
  for (const auto& o : sim::parse_set_overrides(sets)) {
    const std::string label = fmt::format("--set {}={}", o.key_path, o.value);
    if (o.key_path == "system" || o.key_path == "system.preset")
      diag.error({label, 0, 0}, o.key_path,
                 "replay takes the system from --system (e.g. --system gb200-nvl72); set it there, not with --set");
    else if (o.key_path == "system.gpus")
      diag.error({label, 0, 0}, o.key_path,
                 "replay takes the GPU count from --gpus (default: the devices the module was compiled for); set it "
                 "there, not with --set");
  }
  diag.throw_if_any();
}

Replayed replay_hlo(const std::string& path, const std::string& system, int gpus, const std::vector<std::string>& sets) {
  check_replay_sets(sets);
  const workloads::hlo::Module module = workloads::hlo::load_hlo_file(path);
  const int module_devices = module.replica_count * module.num_partitions;
  if (gpus <= 0) gpus = module_devices;
  workloads::hlo::LowerOptions opt;
  opt.gpus = gpus;
  auto imported = workloads::hlo::lower_module(module, opt);
  const auto& s = imported.summary;
  Replayed r;
  r.scenario = replay_scenario(path, system, gpus, s, sets);
  r.graph = std::move(imported.graph);
  // The job: every GPU runs this program; ranks of one tensor-parallel group share tokens.
  const double replicas = std::max(1, r.scenario.system.gpus / std::max(1, s.tp));
  r.graph.tokens_per_step = s.tokens_per_device * replicas;
  r.graph.model_flops_per_step = s.model_flops_per_device * r.scenario.system.gpus;
  if (s.tokens_per_device <= 0)
    r.graph.notes.push_back("tokens per step not inferred (no [batch, sequence] integer argument): tokens/s is 0");
  if (module_devices > 1 && r.scenario.system.gpus != module_devices)
    r.graph.notes.push_back(fmt::format("the module was compiled for {} devices but is replayed on {} GPUs",
                                        module_devices, r.scenario.system.gpus));
  r.replay = sim::replay_checked(r.graph, r.scenario, path);
  r.report = sim::make_report(r.scenario, r.graph, r.replay);
  // The workload is the module, not the stand-in model of the scenario.
  json& sc = r.report["scenario"];
  sc["model"] = {{"hlo_module", s.module_name}, {"file", path}, {"params", s.params}};
  json t = json::object();
  for (const char* k : {"precision", "parallelism", "cuda_graphs", "nvls", "framework"})
    if (sc["training"].contains(k)) t[k] = sc["training"][k];
  t["tokens_per_step"] = r.graph.tokens_per_step;
  sc["training"] = t;
  r.report["hlo"] = summary_json(s, path);
  return r;
}


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
  for (const auto& w : r["warnings"]) out << "warning: " << w.get<std::string>() << '\n';
}

int cmd_replay(const std::string& file, const std::string& system, int gpus, const std::vector<std::string>& sets,
               bool json_out, const std::string& trace, std::ostream& out) {
  Replayed r = replay_hlo(file, system, gpus, sets);
  if (!trace.empty()) sim::write_trace_file(trace, sim::make_trace(r.scenario, r.graph, r.replay));
  if (json_out)
    out << r.report.dump() << '\n';
  else
    print_summary(out, r.report);
  return kOk;
}

}  // namespace

nlohmann::json replay_hlo_report(const std::string& path, const std::string& system, int gpus,
                                 const std::vector<std::string>& sets) {
  return replay_hlo(path, system, gpus, sets).report;
}

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
  sub->add_option("module", s->file, "HLO module text file (MODULE.hlo or MODULE.hlo.gz)")->required();
  sub->add_option("--system", s->system, "system preset")->required();
  auto* gpus_opt =
      sub->add_option("--gpus", s->gpus, "GPUs of the job, 1 to 1,048,576 (default: the devices the module was compiled for)");
  sub->add_option("--set", s->sets, "override a scenario key: KEY.PATH=VALUE (repeatable), e.g. system.calibration=h200");
  sub->add_flag("--json", s->json, "print the JSON report");
  sub->add_option("--trace", s->trace, "write a Chrome/Perfetto trace of the step (FILE.json, or FILE.json.gz compressed)");
  // `racksim validate` runs `replay:` cases through this importer.
  workflow::set_replay_hook([](const std::string& hlo, const std::string& system, int gpus,
                                const std::vector<std::string>& sets) {
    return replay_hlo_report(hlo, system, gpus, sets);
  });
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
