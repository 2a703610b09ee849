// racksim's Python extension module (`racksim._racksim`), wrapped by python/racksim/__init__.py.
// Each function takes what the CLI takes and returns what `--json` prints, as JSON text that the
// Python side turns into dicts and lists (a sweep: its CSV text, which becomes a DataFrame), so
// the content is the CLI's by construction. The simulation runs without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/collective.h"
#include "sim/cli/commands.h"
#include "core/log.h"
#include "core/units.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "sim/report/html.h"
#include "sim/report/report.h"
#include "sim/run/run.h"
#include "sim/scenario/scenario.h"
#include "sim/workflow/sweep.h"
#include "sim/workflow/thread_pool.h"
#include "sim/workflow/validate.h"

namespace py = pybind11;
using nlohmann::json;
using namespace racksim;

namespace {

using input::input_error;

// A scenario given as a file, or as YAML/JSON text (a Python dict) with a label for messages;
// relative paths inside the text resolve against the working directory.
struct Source {
  std::string path;
  std::string text;
  std::string label;
};

sim::Scenario load(const Source& s, const std::vector<sim::SetOverride>& overrides) {
  if (!s.text.empty() || s.path.empty()) return sim::load_scenario_text(s.text, s.label, overrides);
  return sim::load_scenario(s.path, overrides);
}
sim::Scenario load(const Source& s, const std::vector<std::string>& sets) { return load(s, sim::parse_set_overrides(sets)); }
// One side of compare(), its errors saying which side they are, as the CLI's do.
sim::Scenario load_side(const Source& s, const std::vector<sim::SetOverride>& overrides, const char* side) {
  return sim::load_compare_side(s.path.empty() ? s.label : s.path, side, [&] { return load(s, overrides); });
}

void write_file(const std::string& path, const std::string& what, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw input_error(path, 0, 0, "", "cannot write file (" + what + ")");
  f << text;
}

// As the CLI (input::load_guarding_outputs): an output may not name the source or any file its load read (a model, a
// calibration), nor the other output. (Calls on other threads, the GIL released, may add their reads to this call's
// log: a refusal too many, never one too few.)

std::string run(const Source& src, const std::vector<std::string>& sets, const std::string& trace,
                const std::string& report) {
  py::gil_scoped_release nogil;
  const sim::Scenario sc = input::load_guarding_outputs({{trace, "trace"}, {report, "report"}},
                                                        {{src.path, "the scenario"}}, "a file the scenario reads",
                                                        [&] { return load(src, sets); });
  auto res = sim::simulate(sc);
  if (!trace.empty()) sim::write_trace_file(trace, res.job, res.graph, res.replay);
  if (!report.empty()) write_file(report, "report", sim::html_run_report(res));
  return res.report.dump();
}

// `sets` apply to both sides, then `base_sets` / `variant_sets` to one (the CLI's --set, --base-set, --variant-set).
std::string compare(const Source& base, const Source& variant, const std::vector<std::string>& sets,
                    const std::vector<std::string>& base_sets, const std::vector<std::string>& variant_sets,
                    const std::string& report) {
  py::gil_scoped_release nogil;
  const auto [sa_scenario, sb_scenario] = input::load_guarding_outputs(
      {{report, "report"}}, {{base.path, "the base scenario"}, {variant.path, "the variant scenario"}},
      "a file the scenarios read", [&] {
        return std::pair{load_side(base, sim::side_overrides(sets, base_sets, "base_sets"), "base"),
                         load_side(variant, sim::side_overrides(sets, variant_sets, "variant_sets"), "variant")};
      });
  auto a = sim::simulate(sa_scenario);
  auto b = sim::simulate(sb_scenario);
  const double sa = a.report["tokens_per_s_per_gpu"].get<double>();
  const double sb = b.report["tokens_per_s_per_gpu"].get<double>();
  if (!report.empty()) write_file(report, "report", sim::html_compare_report(a, b));
  return json{{"base", a.report}, {"variant", b.report}, {"speedup", sa > 0 ? sb / sa : 0}}.dump();
}

// Returns the CSV text `racksim sweep` writes.
std::string sweep(const Source& src, int jobs, const std::string& shard, const std::string& csv_out,
                  const std::string& report) {
  py::gil_scoped_release nogil;
  const workflow::Shard sh = shard.empty() ? workflow::Shard{} : workflow::parse_shard(shard);
  const std::vector<std::pair<std::string, std::string>> outputs = {{csv_out, "out"}, {report, "report"}};
  // (The log closes with the load: the points' reads do not pass through its lock.)
  const workflow::SweepSpec spec =
      input::load_guarding_outputs(outputs, {{src.path, "the sweep"}}, "a file the sweep reads", [&] {
        auto loaded = src.text.empty() ? workflow::load_sweep(src.path) : workflow::load_sweep_text(src.text, src.label);
        input::check_outputs(outputs, {{loaded.base, "its base scenario"}});
        return loaded;
      });
  if (jobs <= 0) jobs = workflow::hardware_jobs();
  const auto results = workflow::run_sweep(spec, workflow::shard_points(spec.size(), sh), jobs);
  std::ostringstream csv;
  workflow::write_csv(csv, spec, results);
  if (!csv_out.empty()) write_file(csv_out, "csv", csv.str());
  if (!report.empty()) {
    std::vector<std::string> keys;
    for (const auto& k : spec.keys) keys.push_back(k.path);
    std::vector<sim::SweepPointView> views;
    for (const auto& r : results) views.push_back({r.values, r.report, r.error});
    write_file(report, "report", sim::html_sweep_report(src.path.empty() ? src.label : src.path, spec.base, keys, views));
  }
  return csv.str();
}

std::string replay(const std::string& module, const std::string& system, int gpus, const std::vector<std::string>& sets,
                   const std::string& trace) {
  py::gil_scoped_release nogil;
  const auto res = input::load_guarding_outputs({{trace, "trace"}}, {{module, "the HLO module"}}, "a file the replay read",
                                                [&] { return sim::run_hlo(module, system, gpus, sets); });
  if (!trace.empty()) sim::write_trace_file(trace, res.job, res.graph, res.replay);
  return res.report.dump();
}

// Returns [rows as JSON text, exit code the CLI would give].
std::pair<std::string, int> validate(const Source& src, int jobs) {
  py::gil_scoped_release nogil;
  const workflow::Suite suite =
      src.text.empty() ? workflow::load_suite(src.path) : workflow::load_suite_text(src.text, src.label);
  const auto r = workflow::run_suite(suite, jobs > 0 ? jobs : workflow::hardware_jobs());
  return {workflow::to_json(r).dump(), workflow::exit_code(r)};
}

std::string collective(const std::string& system, int gpus, const std::string& op, const std::string& bytes,
                       const std::string& algo, int stride) {
  py::gil_scoped_release nogil;
  return cli::collective_json(system, gpus, op, bytes, algo, stride).dump();
}

// Returns [rows as JSON text, the nccl-tests table].
std::pair<std::string, std::string> collective_sweep(const std::string& system, int gpus, const std::string& op,
                                                     const std::string& min_bytes, const std::string& max_bytes,
                                                     double factor, const std::string& step_bytes,
                                                     const std::string& algo, int stride) {
  py::gil_scoped_release nogil;
  cli::CollectiveSweep s;
  s.system = system;
  s.gpus = gpus;
  s.stride = stride;
  s.op = op;
  s.algo = algo;
  s.min_bytes = min_bytes;
  s.max_bytes = max_bytes;
  if (factor != 0) s.factor = factor;  // the Python API's 0: not given
  s.step_bytes = step_bytes;
  const json rows = cli::collective_sweep_json(s);
  return {rows.dump(), cli::nccl_tests_table(s, rows)};
}

// The CLI itself, in-process: (exit code, stdout, stderr). For commands without a function here.
std::tuple<int, std::string, std::string> main_(const std::vector<std::string>& args) {
  py::gil_scoped_release nogil;
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace

PYBIND11_MODULE(_racksim, m) {
  m.doc() = "racksim's C++ core (use the `racksim` package, not this module)";
  static py::exception<input::InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const input::InputError& e) {
      input_error(e.what());
    } catch (const sim::UnitError& e) {
      input_error(e.what());
    } catch (const std::invalid_argument& e) {
      input_error(e.what());
    }
  });
  sim::log::to_stderr(sim::log::level_from_flags(0, false));

  py::class_<Source>(m, "Source")
      .def(py::init([](std::string path, std::string text, std::string label) {
             return Source{std::move(path), std::move(text), std::move(label)};
           }),
           py::arg("path") = "", py::arg("text") = "", py::arg("label") = "<dict>");
  m.def("run", &run, py::arg("source"), py::arg("sets"), py::arg("trace"), py::arg("report"));
  m.def("compare", &compare, py::arg("base"), py::arg("variant"), py::arg("sets"), py::arg("base_sets"),
        py::arg("variant_sets"), py::arg("report"));
  m.def("sweep", &sweep, py::arg("source"), py::arg("jobs"), py::arg("shard"), py::arg("out"), py::arg("report"));
  m.def("replay", &replay, py::arg("module"), py::arg("system"), py::arg("gpus"), py::arg("sets"), py::arg("trace"));
  m.def("validate", &validate, py::arg("source"), py::arg("jobs"));
  m.def("collective", &collective, py::arg("system"), py::arg("gpus"), py::arg("op"), py::arg("bytes"), py::arg("algo"), py::arg("stride") = 1);
  m.def("collective_sweep", &collective_sweep, py::arg("system"), py::arg("gpus"), py::arg("op"), py::arg("min_bytes"),
        py::arg("max_bytes"), py::arg("factor"), py::arg("step_bytes"), py::arg("algo"), py::arg("stride") = 1);
  m.def("main", &main_, py::arg("args"), "run the racksim CLI in-process: (exit code, stdout, stderr)");
  m.def("set_log_level", [](const std::string& level) {
    const int v = level == "info" ? 1 : level == "debug" ? 2 : 0;
    sim::log::to_stderr(level == "error" || level == "quiet" ? spdlog::level::err
                        : level == "off"                      ? spdlog::level::off
                        : v > 0                               ? sim::log::level_from_flags(v, false)
                                                              : spdlog::level::warn);
  });
  m.def("version", &sim::version);
}
