#include "sim/cli/commands.h"

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
#include "sim/report/html.h"
#include "sim/report/report.h"
#include "sim/scenario/scenario.h"
#include "workloads/model_spec.h"

namespace racksim::cli {

using nlohmann::json;

void print_report_figures(std::ostream& out, const json& r) {
  out << fmt::format("step time           {:.4f} s\n", r["step_time_s"].get<double>());
  out << fmt::format("tokens/s per GPU    {:.1f}\n", r["tokens_per_s_per_gpu"].get<double>());
  out << fmt::format("model TFLOP/s/GPU   {:.1f}   (MFU {:.1f}%)\n", r["model_tflops_per_gpu"].get<double>(),
                     100 * r["mfu"].get<double>());
  out << fmt::format("peak memory         {:.2f} GB of {:.2f} GB  ({})\n", r["peak_memory_bytes"].get<double>() / 1e9,
                     r["memory_capacity_bytes"].get<double>() / 1e9, r["fits"].get<bool>() ? "fits" : "DOES NOT FIT");
  for (auto it = r["memory_breakdown_bytes"].begin(); it != r["memory_breakdown_bytes"].end(); ++it)
    out << fmt::format("  {:<22}{:>10.2f} GB\n", it.key(), it.value().get<double>() / 1e9);
  out << "time breakdown\n";
  for (auto it = r["breakdown_s"].begin(); it != r["breakdown_s"].end(); ++it)
    out << fmt::format("  {:<22}{:>10.4f} s\n", it.key(), it.value().get<double>());
}

namespace {


void write_json_file(const std::string& path, const json& j) {
  std::ofstream f(path);
  if (!f) throw input::InputError({{{path, 0, 0}, "", "cannot write file"}});
  f << j.dump() << '\n';
}

void print_run_summary(std::ostream& out, const json& r) {
  out << fmt::format("scenario            {}\n", r["scenario"]["name"].get<std::string>());
  print_report_figures(out, r);
  for (const auto& w : r["warnings"]) out << "warning: " << w.get<std::string>() << '\n';
}

int cmd_run(const std::string& file, const Common& c, const std::string& trace, const std::string& html,
            std::ostream& out) {
  auto sc = sim::load_scenario(file, sim::parse_set_overrides(c.sets));
  sim::SimulateOptions opt;
  opt.exact = c.exact;
  auto res = sim::simulate(sc, opt);
  if (!trace.empty()) write_json_file(trace, sim::make_trace(res.scenario, res.graph, res.replay));
  if (!html.empty()) {
    std::ofstream f(html, std::ios::binary);
    if (!f) throw input::InputError({{{html, 0, 0}, "", "cannot write file"}});
    f << sim::html_run_report(res);
  }
  if (c.json_out)
    out << res.report.dump() << '\n';
  else
    print_run_summary(out, res.report);
  return kOk;
}

int cmd_compare(const std::string& base, const std::string& variant, const Common& c, const std::string& html,
                std::ostream& out) {
  const auto sets = sim::parse_set_overrides(c.sets);
  sim::SimulateOptions opt;
  opt.exact = c.exact;
  auto a = sim::simulate(sim::load_scenario(base, sets), opt);
  auto b = sim::simulate(sim::load_scenario(variant, sets), opt);
  const double sa = a.report["tokens_per_s_per_gpu"].get<double>();
  const double sb = b.report["tokens_per_s_per_gpu"].get<double>();
  const double speedup = sa > 0 ? sb / sa : 0;
  if (!html.empty()) {
    std::ofstream f(html, std::ios::binary);
    if (!f) throw input::InputError({{{html, 0, 0}, "", "cannot write file"}});
    f << sim::html_compare_report(a, b);
  }
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
  input::LoadSession session;
  auto& diag = session.diag;
  auto& ctx = session.ctx;
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
      input::LoadSession session;  // a shipped preset loads cleanly; its diagnostics are not shown in the list
      hw::SystemSpec s;
      hw::load_system_preset(n, nullptr, std::nullopt, session.ctx, s);
      if (json_out)
        out << json{{"name", n}, {"summary", s.summary}}.dump() << '\n';
      else
        out << fmt::format("{:<14} {}\n", n, s.summary);
    }
    return kOk;
  }
  input::LoadSession session;
  auto& diag = session.diag;
  auto& ctx = session.ctx;
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
  input::LoadSession session;
  auto& diag = session.diag;
  auto& ctx = session.ctx;
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

Registered register_run(CLI::App& app) {
  struct S { Common c; std::string file, trace, html; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("run", "simulate one training step of a scenario");
  sub->add_option("scenario", s->file, "scenario YAML file")->required();
  sub->add_option("--set", s->c.sets, "override a scenario key: KEY.PATH=VALUE (repeatable)");
  sub->add_flag("--json", s->c.json_out, "print the JSON report");
  sub->add_option("--trace", s->trace, "write a Chrome/Perfetto trace of the step");
  sub->add_option("--report", s->html, "write an HTML report");
  sub->add_flag("--exact", s->c.exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_run(s->file, s->c, s->trace, s->html, out); }};
}

Registered register_compare(CLI::App& app) {
  struct S { Common c; std::string base, variant, html; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("compare", "simulate two scenarios and report the speedup");
  sub->add_option("base", s->base, "base scenario")->required();
  sub->add_option("variant", s->variant, "variant scenario")->required();
  sub->add_option("--set", s->c.sets, "override applied to both: KEY.PATH=VALUE");
  sub->add_flag("--json", s->c.json_out, "print JSON");
  sub->add_option("--report", s->html, "write an HTML report of both runs side by side");
  sub->add_flag("--exact", s->c.exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_compare(s->base, s->variant, s->c, s->html, out); }};
}

Registered register_collective(CLI::App& app) {
  struct S { std::string system, op = "all_reduce", bytes, algo = "auto"; int gpus = 8; bool json = false; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("collective", "time one collective on a system");
  sub->add_option("--system", s->system, "system preset")->required();
  sub->add_option("--gpus", s->gpus, "communicator size")->required();
  sub->add_option("--op", s->op, "all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send_recv");
  sub->add_option("--bytes", s->bytes, "message size with unit, e.g. 1GiB")->required();
  sub->add_option("--algo", s->algo, "auto | ring | tree | nvls");
  sub->add_flag("--json", s->json, "print JSON");
  return {sub, [s](std::ostream& out, std::ostream&) {
            return cmd_collective(s->system, s->gpus, s->op, s->bytes, s->algo, s->json, out);
          }};
}

Registered register_hw(CLI::App& app) {
  struct S { std::string name; bool json = false; CLI::App* show = nullptr; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("hw", "hardware presets");
  sub->require_subcommand(1);
  sub->add_subcommand("list", "list system presets")->add_flag("--json", s->json);
  s->show = sub->add_subcommand("show", "show a preset with its sources");
  s->show->add_option("preset", s->name)->required();
  s->show->add_flag("--json", s->json);
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_hw(s->show->parsed() ? s->name : "", s->json, out); }};
}

Registered register_models(CLI::App& app) {
  struct S { std::string name; bool json = false; CLI::App* show = nullptr; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("models", "model presets");
  sub->require_subcommand(1);
  sub->add_subcommand("list", "list model presets");
  s->show = sub->add_subcommand("show", "show a model preset");
  s->show->add_option("model", s->name)->required();
  s->show->add_flag("--json", s->json);
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_models(s->show->parsed() ? s->name : "", s->json, out); }};
}

}  // namespace racksim::cli
