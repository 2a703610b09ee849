#include "sim/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iomanip>
#include <ostream>

#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "sim/core/units.h"
#include "sim/input/diagnostics.h"
#include "sim/report/report.h"
#include "sim/scenario/scenario.h"
#include "workloads/model_spec.h"

namespace racksim::cli {

using nlohmann::json;

namespace {

void write_json_file(const std::string& path, const json& j) {
  std::ofstream f(path);
  if (!f) throw input::InputError({{{path, 0, 0}, "", "cannot write file"}});
  f << j.dump() << '\n';
}

void print_run_summary(std::ostream& out, const json& r) {
  const auto& b = r["breakdown_s"];
  out << fmt::format("scenario            {}\n", r["scenario"]["name"].get<std::string>());
  out << fmt::format("step time           {:.4f} s\n", r["step_time_s"].get<double>());
  out << fmt::format("tokens/s per GPU    {:.1f}\n", r["tokens_per_s_per_gpu"].get<double>());
  out << fmt::format("model TFLOP/s/GPU   {:.1f}   (MFU {:.1f}%)\n", r["model_tflops_per_gpu"].get<double>(),
                     100 * r["mfu"].get<double>());
  out << fmt::format("peak memory         {:.2f} GB of {:.2f} GB  ({})\n", r["peak_memory_bytes"].get<double>() / 1e9,
                     r["memory_capacity_bytes"].get<double>() / 1e9, r["fits"].get<bool>() ? "fits" : "DOES NOT FIT");
  for (auto it = r["memory_breakdown_bytes"].begin(); it != r["memory_breakdown_bytes"].end(); ++it)
    out << fmt::format("  {:<22}{:>10.2f} GB\n", it.key(), it.value().get<double>() / 1e9);
  out << "time breakdown\n";
  for (auto it = b.begin(); it != b.end(); ++it)
    out << fmt::format("  {:<22}{:>10.4f} s\n", it.key(), it.value().get<double>());
  for (const auto& w : r["warnings"]) out << "warning: " << w.get<std::string>() << '\n';
}

struct Common {
  std::vector<std::string> sets;
  bool json_out = false;
};

int cmd_run(const std::string& file, const Common& c, const std::string& trace, const std::string& html,
            std::ostream& out) {
  auto sc = sim::load_scenario(file, sim::parse_set_overrides(c.sets));
  auto res = sim::simulate(sc);
  if (!trace.empty()) write_json_file(trace, sim::make_trace(res.scenario, res.graph, res.replay));
  if (!html.empty()) spdlog::warn("--report (HTML) is not implemented yet; skipped");
  if (c.json_out)
    out << res.report.dump() << '\n';
  else
    print_run_summary(out, res.report);
  return kOk;
}

int cmd_compare(const std::string& base, const std::string& variant, const Common& c, std::ostream& out) {
  const auto sets = sim::parse_set_overrides(c.sets);
  auto a = sim::simulate(sim::load_scenario(base, sets));
  auto b = sim::simulate(sim::load_scenario(variant, sets));
  const double sa = a.report["tokens_per_s_per_gpu"].get<double>();
  const double sb = b.report["tokens_per_s_per_gpu"].get<double>();
  const double speedup = sa > 0 ? sb / sa : 0;
  if (c.json_out) {
    out << json{{"base", a.report}, {"variant", b.report}, {"speedup", speedup}}.dump() << '\n';
  } else {
    out << "== base\n";
    print_run_summary(out, a.report);
    out << "== variant\n";
    print_run_summary(out, b.report);
    out << fmt::format("speedup (variant / base tokens/s per GPU): {:.4f}\n", speedup);
  }
  return kOk;
}

int cmd_collective(const std::string& system, int gpus, const std::string& op_s, const std::string& bytes_s,
                   const std::string& algo_s, bool json_out, std::ostream& out) {
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  hw::SystemSpec spec;
  hw::load_system_preset(system, nullptr, std::nullopt, ctx, spec);
  const auto op = hw::collective_op_from_string(op_s);
  if (!op)
    diag.error({"--op", 0, 0}, "", fmt::format("unknown collective '{}'; expected all_reduce | all_gather | "
                                               "reduce_scatter | all_to_all | broadcast | send_recv", op_s));
  const auto algo = hw::collective_algorithm_from_string(algo_s);
  if (!algo) diag.error({"--algo", 0, 0}, "", fmt::format("unknown algorithm '{}'; expected auto | ring | tree | nvls", algo_s));
  double bytes = 0;
  try {
    bytes = sim::parse_quantity(bytes_s, sim::QuantityKind::bytes);
  } catch (const sim::UnitError& e) {
    diag.error({"--bytes", 0, 0}, "", e.what());
  }
  if (gpus < 1) diag.error({"--gpus", 0, 0}, "", "must be at least 1");
  diag.throw_if_any();
  hw::CollectiveOptions opt;
  opt.algorithm = *algo;
  hw::CollectiveCost c;
  try {
    c = hw::estimate_collective(spec, *op, bytes, hw::place_group(spec, gpus, 1), opt);
  } catch (const std::invalid_argument& e) {
    throw input::InputError({{{"--algo", 0, 0}, "", e.what()}});
  }
  if (json_out) {
    out << json{{"op", hw::to_string(*op)},   {"gpus", gpus},          {"bytes", bytes},
                {"algorithm", hw::to_string(c.algorithm)}, {"protocol", c.protocol},
                {"time_s", c.time_s},         {"algbw_GBps", c.algbw_Bps / 1e9}, {"busbw_GBps", c.busbw_Bps / 1e9}}
               .dump()
        << '\n';
  } else {
    out << fmt::format("{} of {} on {} x {}: {} ({}), {:.3f} us, algbw {:.1f} GB/s, busbw {:.1f} GB/s\n",
                       hw::to_string(*op), sim::format_quantity(bytes, sim::QuantityKind::bytes), gpus, system,
                       hw::to_string(c.algorithm), c.protocol, c.time_s * 1e6, c.algbw_Bps / 1e9, c.busbw_Bps / 1e9);
  }
  return kOk;
}

int cmd_hw(const std::string& name, bool json_out, std::ostream& out) {
  if (name.empty()) {
    for (const auto& n : hw::list_system_presets()) {
      input::Diagnostics diag;
      auto ctx = std::make_shared<input::LoadContext>();
      ctx->diag = &diag;
      hw::SystemSpec s;
      hw::load_system_preset(n, nullptr, std::nullopt, ctx, s);
      if (json_out)
        out << json{{"name", n}, {"summary", s.summary}}.dump() << '\n';
      else
        out << fmt::format("{:<14} {}\n", n, s.summary);
    }
    return kOk;
  }
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  hw::SystemSpec s;
  hw::load_system_preset(name, nullptr, std::nullopt, ctx, s);
  diag.throw_if_any();
  const auto fields = hw::preset_fields(name);
  if (json_out) {
    json f = json::object();
    for (const auto& row : fields) f[row.path] = {{"value", row.value}, {"source", row.source}};
    out << json{{"name", name}, {"fields", f}}.dump(2) << '\n';
  } else {
    for (const auto& row : fields) {
      out << fmt::format("{:<40} {}\n", row.path, row.value);
      if (!row.source.empty()) out << fmt::format("{:<40}   source: {}\n", "", row.source);
    }
  }
  return kOk;
}

int cmd_models(const std::string& name, bool json_out, std::ostream& out) {
  if (name.empty()) {
    for (const auto& n : workloads::list_model_presets()) out << n << '\n';
    return kOk;
  }
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  workloads::ModelSpec m;
  YAML::Node named(name);
  input::Node where(named, "<command line>", "model", "model", ctx);
  workloads::load_model_preset(name, where, ctx, m);
  diag.throw_if_any();
  json j = {{"name", m.name},       {"summary", m.summary},       {"layers", m.layers},  {"hidden", m.hidden},
            {"ffn_hidden", m.ffn_hidden}, {"heads", m.heads},     {"kv_heads", m.kv_heads},
            {"head_dim", m.head_dim}, {"vocab", m.vocab},         {"ffn", m.ffn == workloads::FfnKind::swiglu ? "swiglu" : "gelu"},
            {"tied_embeddings", m.tied_embeddings},
            {"params_derived", workloads::total_params(m)},
            {"active_params_derived", workloads::active_params(m)},
            {"params_published", m.published_params},
            {"sources", m.sources}};
  if (m.moe)
    j["moe"] = {{"experts", m.moe->experts}, {"top_k", m.moe->top_k}, {"expert_ffn_hidden", m.moe->expert_ffn_hidden},
                {"shared_experts", m.moe->shared_experts}, {"first_dense_layers", m.moe->first_dense_layers}};
  if (json_out) {
    out << j.dump(2) << '\n';
  } else {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "sources") continue;
      out << fmt::format("{:<24} {}\n", it.key(), it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
      if (m.sources.count(it.key())) out << fmt::format("{:<24}   source: {}\n", "", m.sources.at(it.key()));
    }
  }
  return kOk;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"racksim: predicts step time, throughput, MFU and memory of LLM training on GPU clusters"};
  app.set_version_flag("--version", "racksim " + sim::version());
  app.require_subcommand(1);
  app.fallthrough(false);

  Common common;
  std::string file, file2, trace, html, system, op = "all_reduce", bytes, algo = "auto", name;
  int gpus = 8;
  bool json_out = false;

  auto* run_cmd = app.add_subcommand("run", "simulate one training step of a scenario");
  run_cmd->add_option("scenario", file, "scenario YAML file")->required();
  run_cmd->add_option("--set", common.sets, "override a scenario key: KEY.PATH=VALUE (repeatable)");
  run_cmd->add_flag("--json", common.json_out, "print the JSON report");
  run_cmd->add_option("--trace", trace, "write a Chrome/Perfetto trace of the step");
  run_cmd->add_option("--report", html, "write an HTML report");

  auto* cmp = app.add_subcommand("compare", "simulate two scenarios and report the speedup");
  cmp->add_option("base", file, "base scenario")->required();
  cmp->add_option("variant", file2, "variant scenario")->required();
  cmp->add_option("--set", common.sets, "override applied to both: KEY.PATH=VALUE");
  cmp->add_flag("--json", common.json_out, "print JSON");

  auto* coll = app.add_subcommand("collective", "time one collective on a system");
  coll->add_option("--system", system, "system preset")->required();
  coll->add_option("--gpus", gpus, "communicator size")->required();
  coll->add_option("--op", op, "all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send_recv");
  coll->add_option("--bytes", bytes, "message size with unit, e.g. 1GiB")->required();
  coll->add_option("--algo", algo, "auto | ring | tree | nvls");
  coll->add_flag("--json", json_out, "print JSON");

  auto* hwc = app.add_subcommand("hw", "hardware presets");
  hwc->require_subcommand(1);
  hwc->add_subcommand("list", "list system presets")->add_flag("--json", json_out);
  auto* hw_show = hwc->add_subcommand("show", "show a preset with its sources");
  hw_show->add_option("preset", name)->required();
  hw_show->add_flag("--json", json_out);

  auto* mc = app.add_subcommand("models", "model presets");
  mc->require_subcommand(1);
  mc->add_subcommand("list", "list model presets");
  auto* m_show = mc->add_subcommand("show", "show a model preset");
  m_show->add_option("model", name)->required();
  m_show->add_flag("--json", json_out);

  std::vector<std::string> argv_rev(args.rbegin(), args.rend());
  try {
    app.parse(argv_rev);
  } catch (const CLI::CallForHelp& e) {
    // Help of the deepest subcommand the user named (racksim hw show --help).
    const CLI::App* leaf = &app;
    while (!leaf->get_subcommands().empty()) leaf = leaf->get_subcommands().front();
    out << leaf->help();
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

  try {
    if (run_cmd->parsed()) return cmd_run(file, common, trace, html, out);
    if (cmp->parsed()) return cmd_compare(file, file2, common, out);
    if (coll->parsed()) return cmd_collective(system, gpus, op, bytes, algo, json_out, out);
    if (hwc->parsed()) return cmd_hw(hw_show->parsed() ? name : "", json_out, out);
    if (mc->parsed()) return cmd_models(m_show->parsed() ? name : "", json_out, out);
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
