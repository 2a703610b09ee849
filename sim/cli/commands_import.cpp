// racksim models import HF_CONFIG.json [--out MODEL.yaml] [--name NAME]
// racksim import megatron ARGS [--out SCENARIO.yaml] [--system PRESET] [--gpus N] [--model M] [--vocab N]
// racksim import maxtext CONFIG.yml [KEY=VALUE]... [--out SCENARIO.yaml] [--system PRESET] [--gpus N] [--name NAME]
//
// Both write YAML (to --out, else stdout) that racksim loads back; the result is checked by
// loading it before it is written, so an import never leaves a file that does not run.
// Warnings (what the target format cannot say) go to stderr and into the file's header.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <ostream>

#include "calibration/fit/nccl_tests.h"
#include "sim/cli/commands.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "input/yaml_reader.h"
#include "sim/scenario/scenario.h"
#include "hardware_models/system_preset.h"
#include "workloads/importers/hf_config.h"
#include "workloads/importers/maxtext_config.h"
#include "workloads/importers/megatron_args.h"
#include "workloads/model_spec.h"

namespace racksim::cli {

namespace fs = std::filesystem;

namespace {

using input::input_error;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw input_error(path, 0, 0, "--out", "cannot write this file");
  f << text;
  f.close();
  if (!f) throw input_error(path, 0, 0, "--out", "write failed");
}

struct MegatronCmd {
  std::string file, out;
  workloads::importers::MegatronOptions opt;
};

int cmd_import_megatron(const MegatronCmd& c, std::ostream& out) {
  auto opt = c.opt;
  // A model file named relative to here is written relative to the scenario's folder.
  const bool model_is_path = workloads::names_model_file(opt.model);
  if (model_is_path && !c.out.empty() && fs::path(opt.model).is_relative()) {
    const fs::path out_dir = fs::absolute(fs::path(c.out)).parent_path();
    opt.model = fs::relative(fs::absolute(opt.model), out_dir).generic_string();
  }
  input::check_outputs({{c.out, "--out"}}, {{c.file, "the arguments file"},
                                            {model_is_path ? c.opt.model : "", "the --model file"},
                                            {hw::names_preset_file(c.opt.system) ? c.opt.system : "", "the --system preset file"}});
  const auto r = workloads::importers::import_megatron_args(c.file, opt);
  for (const auto& w : r.warnings) spdlog::warn("{}: {}", c.file, w);
  spdlog::info("{}: {} arguments used, {} ignored (no effect on the step time)", c.file, r.used.size(), r.ignored.size());
  // Load it back as racksim would: an invalid result (tp not dividing heads, ...) is an error here.
  const std::string label = c.out.empty() ? c.file + " (imported scenario)" : c.out;
  try {
    sim::load_scenario_text(r.yaml, c.out.empty() ? label : c.out);
  } catch (const input::InputError& e) {
    throw input_error(c.file, 0, 0, "",
                              fmt::format("the imported scenario is not valid:\n{}\n--- the scenario:\n{}", e.what(), r.yaml));
  }
  if (c.out.empty()) {
    out << r.yaml;
  } else {
    write_text(c.out, r.yaml);
    out << fmt::format("wrote {}: {} arguments used, {} ignored, {} warning{}\n", c.out, r.used.size(), r.ignored.size(),
                       r.warnings.size(), r.warnings.size() == 1 ? "" : "s");
  }
  return kOk;
}

struct MaxTextCmd {
  std::string config, out;
  std::vector<std::string> overrides;
  workloads::importers::MaxTextOptions opt;
};

int cmd_import_maxtext(const MaxTextCmd& c, std::ostream& out) {
  auto opt = c.opt;
  {
    // The system's NVLink domain: what an ICI axis of -1 fills when --gpus does not say.
    input::LoadSession session;
    hw::SystemSpec sys;
    if (!hw::load_system_preset(opt.system, nullptr, std::nullopt, session.ctx, sys)) session.diag.throw_if_any();
    session.diag.throw_if_any();
    opt.domain_size = sys.scale_up.domain_size;
  }
  const auto r = workloads::importers::import_maxtext(c.config, c.overrides, opt);
  {
    // The config and every file it merged (its base_config chain, the model config) are inputs --out must not destroy.
    std::vector<std::pair<std::string, std::string>> inputs = {
        {c.config, "the config"}, {hw::names_preset_file(c.opt.system) ? c.opt.system : "", "the --system preset file"}};
    for (const auto& f : r.sources) inputs.emplace_back(f, "a config the import read");
    input::check_outputs({{c.out, "--out"}}, inputs);
  }
  for (const auto& w : r.warnings) spdlog::warn("{}: {}", c.config, w);
  spdlog::info("{}: read {}; {} keys set a scenario key", c.config, fmt::join(r.sources, ", "), r.used.size());
  const std::string label = c.out.empty() ? c.config + " (imported scenario)" : c.out;
  try {
    sim::load_scenario_text(r.yaml, label);
  } catch (const input::InputError& e) {
    throw input_error(c.config, 0, 0, "",
                      fmt::format("the imported scenario is not valid:\n{}\n--- the scenario:\n{}", e.what(), r.yaml));
  }
  if (c.out.empty()) {
    out << r.yaml;
  } else {
    write_text(c.out, r.yaml);
    out << fmt::format("wrote {}: {} warning{}\n", c.out, r.warnings.size(), r.warnings.size() == 1 ? "" : "s");
  }
  return kOk;
}

}  // namespace

CLI::App* register_models_import(CLI::App& models, ModelsImport& opts) {
  auto* sub = models.add_subcommand("import", "write a model file from a Hugging Face config.json (each field with its source key)");
  sub->add_option("config", opts.config, "the model's config.json (Llama, Mistral, Mixtral, Qwen2/3 dense and MoE, DeepSeek-V3)")
      ->required();
  sub->add_option("--out", opts.out, "write the model YAML here (default: stdout); use it as model: {preset: FILE}")
      ->check(path_given())
      ->type_name("MODEL.yaml");
  sub->add_option("--name", opts.name, "the model's name (default: _name_or_path, else the file's name)")->type_name("NAME");
  return sub;
}

int cmd_models_import(const ModelsImport& o, std::ostream& out) {
  input::check_outputs({{o.out, "--out"}}, {{o.config, "the config"}});
  const auto m = workloads::importers::import_hf_config(o.config, o.name);
  for (const auto& w : m.warnings) spdlog::warn("{}: {}", o.config, w);
  for (const auto& n : m.notes) spdlog::info("{}: {}", o.config, n);
  const std::string yaml = workloads::importers::to_model_yaml(m, o.config);
  {
    // Loads back as a model preset would (strict reader, cross-field checks). Its errors are at the written model's
    // lines, so they name it and show it (they had carried the config's name with the model's line numbers).
    input::LoadSession session;
    const std::string label = o.config + " (imported model)";
    auto root = input::load_yaml_text(yaml, label, session.ctx);
    if (root) {
      auto back = workloads::parse_model(*root, true);
      workloads::validate_model(back, *root);
    }
    try {
      session.diag.throw_if_any();
    } catch (const input::InputError& e) {
      throw input_error(o.config, 0, 0, "",
                        fmt::format("the imported model is not valid:\n{}\n--- the model:\n{}", e.what(), yaml));
    }
  }
  if (o.out.empty()) {
    out << yaml;
  } else {
    write_text(o.out, yaml);
    out << fmt::format("wrote {}: {} ({:.2f}B parameters, {:.2f}B active){}\n", o.out, m.model.name,
                       workloads::total_params(m.model) / 1e9, workloads::active_params(m.model) / 1e9,
                       m.warnings.empty() ? "" : fmt::format("; {} warning{} in its header", m.warnings.size(),
                                                             m.warnings.size() == 1 ? "" : "s"));
  }
  return kOk;
}

int cmd_calibrate_read(const CalibrateRead& o, std::ostream& out) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& path : o.files) {
    // The fit's bound on a measurement file (a 500 MB log had taken 1.8 GB here, /dev/zero all memory: an audit's finding).
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw input_error(path, 0, 0, "", "a directory: name the nccl-tests output files in it");
    const std::string text = input::read_file_bounded(path, input::limits::kMaxMeasurementFileBytes,
                                                      "a measurement file", input::Binary::stop);
    const auto tests = calib::parse_nccl_tests_output(text, path);
    if (tests.empty()) throw input_error(path, 0, 0, "", "no nccl-tests table found");
    for (const auto& t : tests) {
      nlohmann::json j = calib::nccl_tests_json(t);
      j["file"] = path;
      all.push_back(j);
      if (!o.json) {
        out << fmt::format("{}: {} on {} GPUs, {} sizes ({} column, {})\n", path, t.op.empty() ? "?" : t.op, t.gpus,
                           t.rows.size(), t.time_column, t.format);
        out << fmt::format("  {:>14} {:>12} {:>10} {:>10}\n", "size (B)", "time (us)", "algbw GB/s", "busbw GB/s");
        for (const auto& r : t.rows)
          out << fmt::format("  {:>14.0f} {:>12.2f} {:>10.2f} {:>10.2f}\n", r.bytes, r.time_s * 1e6, r.algbw_Bps / 1e9,
                             r.busbw_Bps / 1e9);
      }
    }
  }
  if (o.json) out << all.dump() << '\n';
  return kOk;
}

Registered register_import(CLI::App& app) {
  auto c = std::make_shared<MegatronCmd>();
  auto* sub = app.add_subcommand("import", "write a racksim scenario from a training framework's configuration");
  sub->require_subcommand(1);
  auto* meg = sub->add_subcommand(
      "megatron", "from Megatron-LM / NeMo arguments: an argument list, a launch script, or the arguments block of a log");
  meg->add_option("args", c->file, "file holding the arguments (args.txt, train.sh, or a Megatron log)")->required();
  meg->add_option("--out", c->out, "write the scenario YAML here (default: stdout)")->check(path_given())->type_name("SCENARIO.yaml");
  meg->add_option("--system", c->opt.system, "system preset (default: guessed from the file name, else h100-sxm)")
      ->type_name("PRESET");
  meg->add_option("--gpus", c->opt.gpus, "GPUs of the job (default: torchrun's --nproc_per_node x --nnodes)")
      ->check(CLI::Range(1, hw::kMaxGpus))
      ->type_name("N");
  meg->add_option("--model", c->opt.model, "a model preset or file instead of the architecture arguments")
      ->type_name("MODEL");
  meg->add_option("--vocab", c->opt.vocab, "vocabulary size, when the arguments leave it to the tokenizer")
      ->check(CLI::Range(1, 100'000'000))
      ->type_name("N");
  meg->add_option("--name", c->opt.name, "scenario name (default: the file's name)")->type_name("NAME");

  auto m = std::make_shared<MaxTextCmd>();
  auto* mx = sub->add_subcommand(
      "maxtext", "from a MaxText config (base.yml or a run config), its model_name's models/NAME.yml, and key=value "
                 "overrides as MaxText's command line takes them");
  mx->add_option("config", m->config, "MaxText config: base.yml, or a file naming one with base_config")->required();
  mx->add_option("overrides", m->overrides, "MaxText overrides, e.g. model_name=llama3-8b per_device_batch_size=4 "
                                            "ici_fsdp_parallelism=8 dcn_data_parallelism=2 remat_policy=full")
      ->type_name("KEY=VALUE");
  mx->add_option("--out", m->out, "write the scenario YAML here (default: stdout)")->check(path_given())->type_name("SCENARIO.yaml");
  mx->add_option_function<std::string>(
        "--system",
        [m](const std::string& s) {
          m->opt.system = s;
          m->opt.system_given = true;
        },
        "system preset (racksim hw list); default h100-sxm, with a warning in the header")
      ->type_name("PRESET");
  mx->add_option("--gpus", m->opt.gpus,
                 "GPUs of the job (default: the ici_*/dcn_* product; an ici -1 fills the system's NVLink domain, a dcn "
                 "-1 num_slices or one slice)")
      ->check(CLI::Range(1, hw::kMaxGpus))
      ->type_name("N");
  mx->add_option("--name", m->opt.name, "scenario name (default: run_name, else model_name, else the file's name)")
      ->type_name("NAME");
  mx->add_option("--xla-flags", m->opt.xla_flags,
                 "the run's XLA_FLAGS (MaxText's GPU scripts set them): --xla_gpu_enable_pipelined_{all_gather,"
                 "reduce_scatter,all_reduce} set training.xla_pipelined_collectives, --xla_gpu_{all_reduce,reduce_scatter,"
                 "all_gather}_combine_threshold_bytes training.xla_combine_threshold, --xla_gpu_enable_command_buffer= (empty) "
                 "training.cuda_graphs: false; other flags are not read")
      ->type_name("FLAGS");
  return {sub, [c, m, mx](std::ostream& out, std::ostream&) {
            if (mx->parsed()) return cmd_import_maxtext(*m, out);
            return cmd_import_megatron(*c, out);
          }};
}

}  // namespace racksim::cli
