#include "sim/cli/commands.h"
#include "sim/cli/collective.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iomanip>
#include <ostream>

#include "hardware_models/calibration.h"
#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "core/units.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "input/yaml_reader.h"
#include "sim/report/html.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "workloads/model_spec.h"

namespace racksim::cli {

using nlohmann::json;

void print_report_figures(std::ostream& out, const json& r) {
  out << fmt::format("step time           {:.4f} s\n", r["step_time_s"].get<double>());
  out << fmt::format("tokens/s per GPU    {:.1f}\n", r["tokens_per_s_per_gpu"].get<double>());
  out << fmt::format("model TFLOP/s/GPU   {:.1f}   (MFU {:.1f}%)\n", r["model_tflops_per_gpu"].get<double>(),
                     100 * r["mfu"].get<double>());
  // fits is false when either HBM or the host memory (offload) is exceeded: say which, here where it is read first.
  const bool fits = r["fits"].get<bool>();
  const bool hbm_fits = r["peak_memory_bytes"].get<double>() <= r["memory_capacity_bytes"].get<double>();
  out << fmt::format("peak memory         {:.2f} GB of {:.2f} GB  ({})\n", r["peak_memory_bytes"].get<double>() / 1e9,
                     r["memory_capacity_bytes"].get<double>() / 1e9,
                     fits ? "fits" : hbm_fits ? "fits in HBM; DOES NOT FIT in host memory (see the warning)" : "DOES NOT FIT");
  for (auto it = r["memory_breakdown_bytes"].begin(); it != r["memory_breakdown_bytes"].end(); ++it)
    out << fmt::format("  {:<22}{:>10.2f} GB\n", it.key(), it.value().get<double>() / 1e9);
  out << "time breakdown\n";
  for (auto it = r["breakdown_s"].begin(); it != r["breakdown_s"].end(); ++it)
    out << fmt::format("  {:<22}{:>10.4f} s\n", it.key(), it.value().get<double>());
}

namespace {


void print_run_summary(std::ostream& out, const json& r) {
  // (a name's control bytes, an ANSI escape or a NUL written in its YAML, are shown as \xNN, not sent to the terminal)
  out << fmt::format("scenario            {}\n", input::escaped_text(r["scenario"]["name"].get<std::string>(), false));
  const json cal = r["scenario"]["system"]["resolved"].value("calibration", json::object());
  const std::string source = cal.value("source", "unavailable");
  if (cal.contains("name")) {
    const std::string transfer = cal.value("transfer", std::string());
    out << fmt::format("calibration         {} ({}; {})\n", input::escaped_text(cal["name"].get<std::string>(), false),
                       source == "default" ? "default for " + r["scenario"]["system"].value("preset", std::string())
                                           : "named by the scenario",
                       transfer.substr(0, transfer.find(';')));
  } else {
    out << fmt::format("calibration         none ({}the preset's cited figures)\n",
                       source == "none" ? "system.calibration: none, " : "");
  }
  print_report_figures(out, r);
  for (const auto& w : r["warnings"]) out << "warning: " << input::escaped_text(w.get<std::string>(), false) << '\n';
}

int cmd_run(const std::string& file, const Common& c, const std::string& trace, const std::string& html,
            std::ostream& out) {
  // The model, calibration and preset files the scenario names are inputs too.
  const auto sc = input::load_guarding_outputs({{trace, "--trace"}, {html, "--report"}}, {{file, "the scenario"}},
                                               "a file the scenario reads",
                                               [&] { return sim::load_scenario(file, sim::parse_set_overrides(c.sets)); });
  sim::SimulateOptions opt;
  opt.exact = c.exact;
  auto res = sim::simulate(sc, opt);
  if (!trace.empty()) sim::write_trace_file(trace, res.job, res.graph, res.replay);
  if (!html.empty()) input::write_file_checked(html, sim::html_run_report(res), "--report");
  if (c.json_out)
    out << res.report.dump() << '\n';
  else
    print_run_summary(out, res.report);
  return kOk;
}

int cmd_compare(const std::string& base, const std::string& variant, const CompareSets& sets, const Common& c,
                const std::string& html, std::ostream& out) {
  // --set applies to both sides, then --base-set / --variant-set to one side.
  const auto [sa_scenario, sb_scenario] = input::load_guarding_outputs(
      {{html, "--report"}}, {{base, "the base scenario"}, {variant, "the variant scenario"}}, "a file the scenarios read",
      [&] {
        const auto side = [&](const std::string& file, const char* name, const std::vector<std::string>& own,
                              const char* option) {
          return sim::load_compare_side(file, name, [&] {
            return sim::load_scenario(file, sim::side_overrides(c.sets, own, option));
          });
        };
        return std::pair{side(base, "base", sets.base, "--base-set"), side(variant, "variant", sets.variant, "--variant-set")};
      });
  sim::SimulateOptions opt;
  opt.exact = c.exact;
  auto a = sim::simulate(sa_scenario, opt);
  auto b = sim::simulate(sb_scenario, opt);
  const double sa = a.report["tokens_per_s_per_gpu"].get<double>();
  const double sb = b.report["tokens_per_s_per_gpu"].get<double>();
  const double speedup = sa > 0 ? sb / sa : 0;
  if (!html.empty()) input::write_file_checked(html, sim::html_compare_report(a, b), "--report");
  if (c.json_out) {
    out << json{{"base", a.report}, {"variant", b.report}, {"speedup", speedup}}.dump() << '\n';
  } else {
    // A side changed by its own sets says how (its scenario's name is the file's, whatever the sets changed).
    const auto header = [](const char* side, const char* option, const std::vector<std::string>& own) {
      std::string h = fmt::format("== {}", side);
      for (const auto& s : own) h += fmt::format(" {} {}", option, s);
      return h + "\n";
    };
    out << header("base", "--base-set", sets.base);
    print_run_summary(out, a.report);
    out << header("variant", "--variant-set", sets.variant);
    print_run_summary(out, b.report);
    out << fmt::format("speedup (variant / base tokens/s per GPU): {:.4f}\n", speedup);
    // Per GPU, the speedup reads backwards for "how many GPUs for this throughput": say the step's too.
    const double step_a = a.report["step_time_s"].get<double>(), step_b = b.report["step_time_s"].get<double>();
    if (a.report["scenario"]["system"]["gpus"] != b.report["scenario"]["system"]["gpus"] && step_b > 0)
      out << fmt::format("step time ratio (base / variant step time; the sides have {} and {} GPUs): {:.4f}\n",
                         a.report["scenario"]["system"]["gpus"].get<int>(), b.report["scenario"]["system"]["gpus"].get<int>(),
                         step_a / step_b);
    // Sides on different calibrations (a preset's default one against another preset without any, say) differ by more
    // than the change compared: say so, with how each side got its calibration.
    // By the calibration's own name (a name and a path to the same file are one calibration).
    const std::string cal_a = hw::applied_calibration_name(a.job.system.spec),
                      cal_b = hw::applied_calibration_name(b.job.system.spec);
    if (cal_a != cal_b) {
      const auto describe = [](const std::string& name, const sim::SystemConfig& sys) {
        if (name == "none") return std::string("none, the preset's cited figures");
        const std::string& source = sys.calibration_source;
        return fmt::format("{}, {}", name,
                           source == "default"    ? "its preset's default"
                           : source == "scenario" ? "set by the scenario"
                                                  : source);
      };
      out << fmt::format("note: the sides run different calibrations (base: {}; variant: {}): part of the speedup is "
                         "the calibration's, not the change's; give both the same (--set system.calibration=NAME or "
                         "none)\n",
                         describe(cal_a, a.job.system), describe(cal_b, b.job.system));
    }
    for (const auto& [who, r] : {std::pair{"base", &a.report}, std::pair{"variant", &b.report}})
      if (const auto f = r->find("fits"); f != r->end() && f->is_boolean() && !f->get<bool>())
        out << fmt::format("note: the {} does not fit in memory (its warnings say why): the speedup is of a job that "
                           "would not start\n",
                           who);
  }
  return kOk;
}

int cmd_collective(const std::string& system, int gpus, int stride, const std::string& op_s, const std::string& bytes_s,
                   const std::string& algo_s, bool json_out, std::ostream& out) {
  const json j = collective_json(system, gpus, op_s, bytes_s, algo_s, stride);
  if (json_out) {
    out << j.dump() << '\n';
  } else {
    out << fmt::format("{} of {} on {} x {}: {} ({}), {:.3f} us, algbw {:.1f} GB/s, busbw {:.1f} GB/s\n",
                       j["op"].get<std::string>(),
                       sim::format_quantity(j["bytes"].get<double>(), sim::QuantityKind::bytes), gpus, system,
                       j["algorithm"].get<std::string>(), j["protocol"].get<std::string>(),
                       j["time_s"].get<double>() * 1e6, j["algbw_GBps"].get<double>(), j["busbw_GBps"].get<double>());
  }
  return kOk;
}

// -b/-e/-f: the sizes nccl-tests would run, as its table (or a JSON list of rows).
int cmd_collective_sweep(const CollectiveSweep& sw, bool json_out, std::ostream& out) {
  const json rows = collective_sweep_json(sw);
  if (json_out)
    out << rows.dump() << '\n';
  else
    out << nccl_tests_table(sw, rows);
  return kOk;
}

int cmd_hw(const std::string& name, bool json_out, std::ostream& out, const std::string& calibration = "") {
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
  // --calibration: the GEMM ceilings a scenario on this preset gets with that calibration (the transfer rule's
  // result, docs/calibration.md), which the preset's own fields do not show.
  json calibrated = json::object();
  if (!calibration.empty()) {
    YAML::Node named(calibration);
    input::Node where(named, "<command line>", "--calibration", "--calibration", ctx);
    auto cal = hw::load_calibration(calibration, &where, ctx);
    diag.throw_if_any();
    hw::SystemSpec c = s;
    hw::apply_calibration(c, *cal);
    json f = json::object();
    for (const auto& [d, e] : c.gpu.matmul_efficiency) {
      const std::string path = "gpu.matmul_efficiency." + to_string(d);
      const auto src = c.sources.find(path);
      f[path] = {{"value", fmt::format("{:.4g}", e)}, {"source", src != c.sources.end() ? src->second : ""}};
    }
    calibrated = {{"calibration", calibration}, {"transfer", c.calibration->transfer}, {"fields", f}};
  }
  if (json_out) {
    json f = json::object();
    for (const auto& row : fields) f[row.path] = {{"value", row.value}, {"source", row.source}};
    json doc{{"name", name}, {"fields", f}};
    if (!calibrated.empty()) doc["calibrated"] = calibrated;
    out << doc.dump(2) << '\n';
  } else {
    for (const auto& row : fields) {
      out << fmt::format("{:<40} {}\n", row.path, row.value);
      if (!row.source.empty()) out << fmt::format("{:<40}   source: {}\n", "", row.source);
    }
    if (!calibrated.empty()) {
      out << fmt::format("\nwith calibration {} ({}):\n", calibration, calibrated["transfer"].get<std::string>());
      for (const auto& [path, v] : calibrated["fields"].items()) {
        out << fmt::format("{:<40} {}\n", path, v["value"].get<std::string>());
        out << fmt::format("{:<40}   source: {}\n", "", v["source"].get<std::string>());
      }
    }
  }
  return kOk;
}

int cmd_models(const std::string& name, bool json_out, std::ostream& out) {
  if (name.empty()) {
    for (const auto& n : workloads::list_model_presets()) {
      if (json_out)
        out << json{{"name", n}}.dump() << '\n';
      else
        out << n << '\n';
    }
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
            {"head_dim", m.head_dim}, {"vocab", m.vocab},         {"ffn", workloads::to_string(m.ffn)},
            {"tied_embeddings", m.tied_embeddings},
            {"qk_norm", m.qk_norm},
            {"params_derived", workloads::total_params(m)},
            {"active_params_derived", workloads::active_params(m)},
            {"params_published", m.published_params},
            {"sources", m.sources}};
  if (m.moe) j["moe"] = sim::moe_to_json(*m.moe);
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
  sub->add_option("scenario", s->file, "scenario YAML file")->required()->check(path_given());
  sub->add_option("--set", s->c.sets, "override a scenario key: KEY.PATH=VALUE (repeatable)");
  sub->add_flag("--json", s->c.json_out, "print the JSON report");
  sub->add_option("--trace", s->trace, "write a Chrome/Perfetto trace of the step (FILE.json, or FILE.json.gz compressed)")->check(path_given());
  sub->add_option("--report", s->html, "write an HTML report")->check(path_given());
  sub->add_flag("--exact", s->c.exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_run(s->file, s->c, s->trace, s->html, out); }};
}

Registered register_compare(CLI::App& app) {
  struct S { Common c; CompareSets sides; std::string base, variant, html; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("compare", "simulate two scenarios and report the speedup");
  sub->add_option("base", s->base, "base scenario")->required()->check(path_given());
  sub->add_option("variant", s->variant, "variant scenario (may be the base file, with --variant-set)")->required()->check(path_given());
  sub->add_option("--set", s->c.sets, "override applied to both: KEY.PATH=VALUE (repeatable)");
  sub->add_option("--base-set", s->sides.base, "override applied to the base only, after --set (repeatable)");
  sub->add_option("--variant-set", s->sides.variant, "override applied to the variant only, after --set (repeatable)");
  sub->add_flag("--json", s->c.json_out, "print JSON");
  sub->add_option("--report", s->html, "write an HTML report of both runs side by side")->check(path_given());
  sub->add_flag("--exact", s->c.exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream&) { return cmd_compare(s->base, s->variant, s->sides, s->c, s->html, out); }};
}

Registered register_collective(CLI::App& app) {
  struct S {
    std::string bytes;
    CollectiveSweep sw;
    bool json = false;
  };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand(
      "collective", "time one collective on a system (--bytes), or sweep sizes as nccl-tests does (-b -e -f)");
  sub->add_option("--system", s->sw.system, "system preset (racksim hw list)")->required()->type_name("PRESET");
  sub->add_option("--gpus", s->sw.gpus, "communicator size")->required()->type_name("N");
  sub->add_option("--stride", s->sw.stride,
                  "the members' distance in the job's ranks, packed into NVLink domains (a data-parallel group of a "
                  "tp-8 job: 8, one rank per 8-GPU node; default 1)")
      ->type_name("N");
  sub->add_option("--op", s->sw.op, "all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send_recv")
      ->capture_default_str()
      ->type_name("OP");
  auto* bytes = sub->add_option("--bytes", s->bytes, "message size with unit, e.g. 1GiB")->type_name("SIZE");
  auto* b = sub->add_option("-b,--minbytes", s->sw.min_bytes,
                            "nccl-tests sweep: smallest size (8, 1K, 64M, 8G: powers of 1024; or 1GiB)")
                ->type_name("MIN");
  auto* e = sub->add_option("-e,--maxbytes", s->sw.max_bytes, "nccl-tests sweep: largest size")->type_name("MAX");
  auto* f = sub->add_option("-f,--stepfactor", s->sw.factor, "nccl-tests sweep: multiply the size by this (default 2)")
                ->type_name("FACTOR");
  auto* i = sub->add_option("-i,--stepbytes", s->sw.step_bytes, "nccl-tests sweep: add this many bytes instead")
                ->type_name("STEP");
  bytes->excludes(b)->excludes(e)->excludes(f)->excludes(i);
  sub->add_option("--algo", s->sw.algo, fmt::format("{}", fmt::join(sim::names_in(hw::kCollectiveAlgorithmNames), " | ")))
      ->capture_default_str()
      ->type_name("ALGO");
  sub->add_flag("--json", s->json, "print JSON (a list of rows for a sweep)");
  return {sub, [s, b, e](std::ostream& out, std::ostream&) {
            if (b->count() || e->count()) {
              CollectiveSweep sw = s->sw;
              if (!b->count()) sw.min_bytes = sw.max_bytes;
              if (!e->count()) sw.max_bytes = sw.min_bytes;
              return cmd_collective_sweep(sw, s->json, out);
            }
            if (s->bytes.empty()) throw std::invalid_argument("collective: give --bytes SIZE, or -b MIN -e MAX [-f FACTOR]");
            return cmd_collective(s->sw.system, s->sw.gpus, s->sw.stride, s->sw.op, s->bytes, s->sw.algo, s->json, out);
          }};
}

Registered register_hw(CLI::App& app) {
  struct S { std::string name, calibration; bool json = false; CLI::App* show = nullptr; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("hw", "hardware presets");
  sub->require_subcommand(1);
  sub->add_subcommand("list", "list system presets")->add_flag("--json", s->json);
  s->show = sub->add_subcommand("show", "show a preset with its sources");
  s->show->add_option("preset", s->name)->required()->check(name_given());
  s->show->add_flag("--json", s->json);
  s->show->add_option("--calibration", s->calibration,
                      "also show the GEMM ceilings this calibration gives the preset (the transfer rule's result)");
  return {sub, [s](std::ostream& out, std::ostream&) {
            return cmd_hw(s->show->parsed() ? s->name : "", s->json, out, s->calibration);
          }};
}

Registered register_models(CLI::App& app) {
  struct S { std::string name; bool json = false; CLI::App* show = nullptr; CLI::App* import = nullptr; ModelsImport imp; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("models", "model presets");
  sub->require_subcommand(1);
  sub->add_subcommand("list", "list model presets")->add_flag("--json", s->json, "one JSON object per line");
  s->show = sub->add_subcommand("show", "show a model preset (a name, or a model file's path)");
  s->show->add_option("model", s->name, "preset name (racksim models list) or path to a model YAML file")->required()->check(name_given());
  s->show->add_flag("--json", s->json, "print JSON");
  s->import = register_models_import(*sub, s->imp);
  return {sub, [s](std::ostream& out, std::ostream&) {
            if (s->import->parsed()) return cmd_models_import(s->imp, out);
            return cmd_models(s->show->parsed() ? s->name : "", s->json, out);
          }};
}

}  // namespace racksim::cli
