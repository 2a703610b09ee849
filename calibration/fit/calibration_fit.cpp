#include "calibration/fit/calibration_fit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibration/fit/nccl_tests.h"
#include "hardware_models/collectives.h"
#include "hardware_models/system_preset.h"
#include "core/text.h"
#include "core/units.h"
#include "input/file_cache.h"
#include "input/files.h"

namespace racksim::calib {

namespace fs = std::filesystem;
using namespace racksim::hw;
using input::MapReader;
using input::Node;
using nlohmann::json;
using sim::QuantityKind;

namespace {

using hw::calibration_text::display_path;
using hw::calibration_text::num;
using hw::calibration_text::signed4;

// A measured GEMM whose operand + result bytes at the calibrated HBM rate take more than this
// share of its time is HBM-bound: its time says little about the tensor cores, so it is left
// out of the efficiency fit (it stays in the table, with the roofline's residual).
constexpr double kHbmBoundShare = 0.5;

[[noreturn]] void fail(const std::string& file, const std::string& msg, int line = 0) {
  throw input::input_error(file, line, line > 0 ? 1 : 0, "", msg);
}

double matmul_input_bytes(sim::Dtype d) {
  switch (d) {
    case sim::Dtype::fp32:
    case sim::Dtype::tf32: return 4;
    case sim::Dtype::bf16: return 2;
    case sim::Dtype::fp8:
    case sim::Dtype::mxfp8: return 1;
    case sim::Dtype::nvfp4: return 0.5;
  }
  return 2;
}

struct FitResult {
  Eigen::VectorXd coef;
  double rms = 0, max_abs = 0;
};

// Weighted linear least squares on relative error: minimise sum ((X c - t) / t)^2.
// `cols` picks the columns of `X` to use; the others are held at 0.
FitResult relative_lsq(const Eigen::MatrixXd& X, const Eigen::VectorXd& t, const std::vector<int>& cols) {
  const int n = static_cast<int>(t.size());
  Eigen::MatrixXd A(n, static_cast<int>(cols.size()));
  for (int i = 0; i < n; ++i)
    for (std::size_t j = 0; j < cols.size(); ++j) A(i, static_cast<int>(j)) = X(i, cols[j]) / t(i);
  const Eigen::VectorXd sol = A.colPivHouseholderQr().solve(Eigen::VectorXd::Ones(n));
  FitResult r;
  r.coef = Eigen::VectorXd::Zero(X.cols());
  for (std::size_t j = 0; j < cols.size(); ++j) r.coef(cols[j]) = sol(static_cast<int>(j));
  double ss = 0;
  for (int i = 0; i < n; ++i) {
    const double e = (X.row(i).dot(r.coef) - t(i)) / t(i);
    ss += e * e;
    r.max_abs = std::max(r.max_abs, std::fabs(e));
  }
  r.rms = n > 0 ? std::sqrt(ss / n) : 0;
  return r;
}

// Fits X c = t with every coefficient >= 0: drops a column whose coefficient comes out negative
// (the highest index first) and refits. Deterministic.
FitResult nonneg_lsq(const Eigen::MatrixXd& X, const Eigen::VectorXd& t, std::vector<int> cols) {
  for (;;) {
    FitResult r = relative_lsq(X, t, cols);
    int drop = -1;
    for (int j = static_cast<int>(cols.size()) - 1; j >= 0; --j)
      if (r.coef(cols[j]) < 0) {
        drop = j;
        break;
      }
    if (drop < 0 || cols.size() == 1) return r;
    cols.erase(cols.begin() + drop);
  }
}

// t = a + x / bw over (x, t) points.
BandwidthFit fit_alpha_beta(const std::vector<std::pair<double, double>>& pts) {
  Eigen::MatrixXd X(static_cast<int>(pts.size()), 2);
  Eigen::VectorXd t(static_cast<int>(pts.size()));
  for (std::size_t i = 0; i < pts.size(); ++i) {
    X(static_cast<int>(i), 0) = 1.0;
    X(static_cast<int>(i), 1) = pts[i].first;
    t(static_cast<int>(i)) = pts[i].second;
  }
  FitResult r = nonneg_lsq(X, t, {1, 0});
  BandwidthFit b;
  b.latency_s = r.coef(0);
  b.bandwidth_Bps = r.coef(1) > 0 ? 1.0 / r.coef(1) : 0;
  b.points = static_cast<int>(pts.size());
  b.rms_residual = r.rms;
  b.max_abs_residual = r.max_abs;
  return b;
}

// A fit that came out of bad data (all sizes equal, times that fall with the size) says so
// here, naming what was fitted, instead of writing a zero bandwidth or a NaN residual.
BandwidthFit checked(const std::vector<std::pair<double, double>>& pts, const std::string& what,
                     const std::string& where) {
  std::set<double> sizes;
  for (const auto& p : pts) sizes.insert(p.first);
  if (sizes.size() < 2)
    fail(where, fmt::format("cannot fit {} as latency + size / bandwidth: its {} points have {} size{}; at least 2 "
                            "different sizes are needed",
                            what, pts.size(), sizes.size(), sizes.size() == 1 ? "" : "s"));
  const BandwidthFit b = fit_alpha_beta(pts);
  if (!(b.bandwidth_Bps > 0) || !std::isfinite(b.bandwidth_Bps) || !std::isfinite(b.latency_s) || b.latency_s < 0 ||
      !std::isfinite(b.rms_residual) || !std::isfinite(b.max_abs_residual))
    fail(where, fmt::format("cannot fit {} as latency + size / bandwidth from its {} points: the times do not grow "
                            "with the size (bandwidth {} B/s, rms {})",
                            what, b.points, b.bandwidth_Bps, b.rms_residual));
  return b;
}

struct RawGemm {
  sim::Dtype dtype;
  GemmPoint p;
};

struct Inputs {
  std::vector<CalibrationSource> sources;
  std::vector<RawGemm> gemm;
  std::vector<std::pair<double, double>> hbm, h2d, d2h, both;
  std::vector<std::pair<double, double>> eager, graph_node, graph_launch, min_kernel;
  std::vector<ContentionPoint> contention;
  struct NcclGroup {
    std::string op;
    int gpus;
    int source;
    std::vector<std::pair<double, double>> pts;
  };
  std::vector<NcclGroup> nccl;
  std::vector<RowKernelPoint> row_kernels;  // XLA Triton block-level fusions, measured
  std::vector<LoopFusionPoint> loop_fusions;  // XLA loop-emitter kernels, measured
  std::vector<DispatchPoint> dispatch;      // XLA runtime host work, measured
  std::vector<AttentionPoint> attention;    // fused attention kernels, measured
  std::vector<double> eager_gap_s;          // eager kernel minus graph node, host out of the way (kernel_gap.cu)
  std::string device_name, driver;
  int sm_count = 0;
  double memory_bytes = 0;  // the device's total memory as CUDA reports it (racksim-bench identity), 0 if unknown
  std::vector<std::string> dropped;  // rows left out of the fits, per file and section: why and how many
};

// The longest time one measured row may take: every row racksim's benches write times one kernel, copy, launch
// loop or step, in microseconds to seconds; an hour is a corrupt or mis-scaled value (1e300 s fitted a ceiling of 0).
constexpr double kMaxMeasuredRow_s = 3600;

// A measured time a fit can use: positive, finite and under kMaxMeasuredRow_s.
bool usable_time(double t) { return t > 0 && std::isfinite(t) && t <= kMaxMeasuredRow_s; }

// A section's list of rows (gemm.results, nccl.runs): none where the file has no such section or the section says why it
// was skipped; a section of another shape is an error, not a silent skip (a review found `gemm: "skipped"` and
// `launch: []` fitted without a word, the measurements simply missing).
const json* section_rows(const json& j, const char* section, const char* list, const std::string& file) {
  if (!j.contains(section)) return nullptr;
  const json& s = j[section];
  if (!s.is_object())
    fail(file, fmt::format("{}: expected an object with a '{}' list, got {}", section, list, s.type_name()));
  if (!s.contains(list)) {
    if (s.contains("skipped") || s.contains("note")) return nullptr;
    fail(file, fmt::format("{}: expected a '{}' list (or 'skipped' saying why there is none)", section, list));
  }
  if (!s[list].is_array()) fail(file, fmt::format("{}.{}: expected a list, got {}", section, list, s[list].type_name()));
  return &s[list];
}

// An optional text field of a row, one of `allowed` (empty: any), checked where it is read: a value the calibration
// file cannot hold had surfaced only when the written file was loaded again, blamed on another folder.
std::string text_field(const json& r, const char* key, const char* fallback, std::initializer_list<const char*> allowed,
                       const std::string& file, const std::string& row) {
  if (!r.contains(key)) return fallback;
  const json& v = r[key];
  if (!v.is_string()) fail(file, fmt::format("{}.{}: expected text, got {}", row, key, v.dump()));
  const std::string t = v.get<std::string>();
  if (allowed.size() > 0 && std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return t == a; })) {
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : " | ") + std::string(a);
    fail(file, fmt::format("{}.{}: unknown value '{}'; expected one of {}", row, key, t, list));
  }
  return t;
}

// A GEMM shape as measured: its dimensions, batch, layout and result dtype (two rows of one key measure one product).
using ShapeKey = std::tuple<double, double, double, int, std::string, std::string>;
ShapeKey shape_key(const GemmPoint& p) { return {p.m, p.n, p.k, p.batch, p.layout, p.out}; }

// Each shape's shortest and longest time among `pts` (those of `source` only, where it is 0 or more).
std::map<ShapeKey, std::pair<double, double>> time_range_by_shape(const std::vector<GemmPoint>& pts, int source = -1) {
  std::map<ShapeKey, std::pair<double, double>> out;
  for (const auto& p : pts)
    if (source < 0 || p.source == source) {
      auto [it, fresh] = out.try_emplace(shape_key(p), p.measured_s, p.measured_s);
      if (!fresh) it->second = {std::min(it->second.first, p.measured_s), std::max(it->second.second, p.measured_s)};
    }
  return out;
}

// A measurement row a fit can use: size (or count) positive and finite, its time usable.
bool usable(double x, double t) { return x > 0 && std::isfinite(x) && usable_time(t); }

// Appends (x, t) to `pts` when usable, else counts it in `left_out`.
void add_point(std::vector<std::pair<double, double>>& pts, double x, double t, int& left_out) {
  if (usable(x, t))
    pts.push_back({x, t});
  else
    ++left_out;
}

void note_dropped(Inputs& in, const std::string& shown, const std::string& section, int left_out, int total,
                  const std::string& why) {
  if (left_out > 0)
    in.dropped.push_back(fmt::format("{}: {} of {} {} rows left out of the fit ({})", shown, left_out, total, section, why));
}

// `key` is a C string: a std::string temporary argument would make GCC 13 warn (-Wdangling-reference) that the
// returned reference may refer to it.
// `row` names where in the file (e.g. "gemm.results[3]"), for the message.
const json& at(const json& j, const char* key, const std::string& file, const std::string& row = {}) {
  if (!j.is_object() || !j.contains(key))
    fail(file, fmt::format("{}expected key '{}'", row.empty() ? "" : row + ": ", key));
  return j.at(key);
}
double median_of(const json& stats, const std::string& file, const std::string& row = {}) {
  if (stats.is_number()) return stats.get<double>();
  const json& m = at(stats, "median", file, row);
  if (!m.is_number())
    fail(file, fmt::format("{}expected a number under 'median', got {}", row.empty() ? "" : row + ": ", m.dump()));
  return m.get<double>();
}

// All files of one calibration come from one device: the first name seen is the device's.
void note_device(Inputs& in, const std::string& name, const std::string& shown) {
  if (name.empty()) return;
  if (!in.device_name.empty() && in.device_name != name)
    fail(shown, fmt::format("measured on '{}', but other files here were measured on '{}': one device per calibration",
                            name, in.device_name));
  in.device_name = name;
}

// The model words of a GPU's name ("NVIDIA H100 80GB HBM3" -> {H100}; "B200 in GB200 superchip" -> {B200, GB200}):
// one or two letters and two or three digits, an optional letter (H20, A100, L40S).
std::set<std::string> gpu_model_words(const std::string& name) {
  std::set<std::string> out;
  std::string w;
  auto flush = [&] {
    std::size_t i = 0;
    while (i < w.size() && std::isalpha(static_cast<unsigned char>(w[i]))) ++i;
    std::size_t j = i;
    while (j < w.size() && std::isdigit(static_cast<unsigned char>(w[j]))) ++j;
    const bool tail = j == w.size() || (j + 1 == w.size() && std::isalpha(static_cast<unsigned char>(w[j])));
    if (i >= 1 && i <= 2 && j - i >= 2 && j - i <= 3 && tail) out.insert(w);
    w.clear();
  };
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) w += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    else flush();
  }
  flush();
  return out;
}

// The source entry of a JSON file of our Python scripts (schema, date and device at the top level).
CalibrationSource script_source(const json& j, const std::string& shown, Inputs& in) {
  CalibrationSource cs;
  cs.path = shown;
  cs.schema = j["schema"].get<std::string>();
  cs.date = j.value("date", "");
  note_device(in, j.value("device", ""), shown);
  return cs;
}

// The HLO file a row names, which must lie beside the measurement file.
std::string hlo_beside(const std::string& path, const std::string& shown, const json& row, const std::string& hlo) {
  const std::string hlo_path = (fs::path(path).parent_path() / hlo).string();
  std::error_code ec;
  if (!fs::exists(hlo_path, ec))
    fail(shown, fmt::format("'{}' names HLO file '{}', which is not beside it", row.value("name", ""), hlo));
  return hlo_path;
}

// calibration/jax/xla_runtime_bench.py: per-kernel GPU times of profiled XLA programs, with
// the optimized HLO of each beside the file. Kernels that the importer finds to be Triton
// block-level fusions become row-kernel points (median duration over the profiled steps).
void read_xla_runtime_json(const json& j, const std::string& path, const std::string& shown, Inputs& in,
                           const FitOptions& opt) {
  const XlaKernelCostFn& cost = opt.xla_kernel_cost;
  const int src = static_cast<int>(in.sources.size());
  CalibrationSource cs = script_source(j, shown, in);
  int points = 0, loop_points = 0;
  if (cost && j.contains("kernels") && j["kernels"].is_array()) {
    for (const json& run : j["kernels"]) {
      const std::string hlo = run.value("hlo_file", "");
      if (hlo.empty() || !run.contains("gpu_kernels") || !run["gpu_kernels"].is_array()) continue;
      const std::string hlo_path = hlo_beside(path, shown, run, hlo);
      std::map<std::string, std::vector<double>> durations;
      for (const json& k : run["gpu_kernels"])
        if (k.contains("name") && k.contains("dur_us") && k["dur_us"].is_number())
          durations[k["name"].get<std::string>()].push_back(k["dur_us"].get<double>() * 1e-6);
      for (auto& [name, d] : durations) {
        const auto c = cost(hlo_path, name);
        if (!c || !(c->bytes > 0)) continue;
        std::sort(d.begin(), d.end());
        if (!(d[d.size() / 2] > 0)) continue;  // a profiler row of zero duration says nothing
        auto measured = [&](auto p) {  // the fields every kernel point has
          p.label = run.value("name", "") + " " + name;
          p.bytes = c->bytes;
          p.measured_s = d[d.size() / 2];
          p.source = src;
          return p;
        };
        if (c->loop_indices > 0) {
          in.loop_fusions.push_back(measured(LoopFusionPoint{}));
          in.loop_fusions.back().indices = c->loop_indices;
          ++loop_points;
        } else if (c->thread_bytes > 0) {
          in.row_kernels.push_back(measured(RowKernelPoint{}));
          in.row_kernels.back().thread_bytes = c->thread_bytes;
          ++points;
        }
      }
    }
  }
  if (points > 0) cs.used.push_back("row_kernels");
  if (loop_points > 0) cs.used.push_back("loop_fusions");
  // Dispatch rows: programs of one command buffer (the unrolled chains), where the GPU waits
  // for the host's whole work each step: exposed = step time - GPU span of the last profiled step.
  int rows = 0;
  const bool command_buffers = j.value("command_buffers", true);
  if (opt.xla_program && j.contains("dispatch") && j["dispatch"].is_array()) {
    for (const json& r : j["dispatch"]) {
      const std::string hlo = r.value("hlo_file", "");
      const std::string mode = r.value("mode", "same_args");  // the first version of the script
      if (hlo.empty() || mode == "scan" || !r.contains("profiled_steps") || !r["profiled_steps"].is_array() ||
          r["profiled_steps"].empty() || !r.contains("step_s_median"))
        continue;
      const std::string hlo_path = hlo_beside(path, shown, r, hlo);
      const auto prog = opt.xla_program(hlo_path);
      const json& last = r["profiled_steps"].back();
      if (!prog || prog->executions != 1 || !last.contains("gpu_span_us") || !last["gpu_span_us"].is_number()) continue;
      DispatchPoint p;
      p.label = r.value("name", "");
      p.command_buffers = command_buffers;
      p.commands = prog->commands;
      p.rerecorded_refs = command_buffers && mode == "chained" ? prog->rerecorded_refs : 0.0;  // same_args, donated: nothing moved
      // With command buffers the GPU waits for the host's whole work: exposed = step - GPU span.
      // Without, the host launches kernel after kernel of these tiny layers: the step is host time.
      p.exposed_s = r["step_s_median"].get<double>() - (command_buffers ? last["gpu_span_us"].get<double>() * 1e-6 : 0.0);
      p.source = src;
      if (usable_time(p.exposed_s)) {
        in.dispatch.push_back(p);
        ++rows;
      }
    }
  }
  if (rows > 0) cs.used.push_back("dispatch");
  in.sources.push_back(cs);
}

// calibration/torch/attention_bench.py: fused attention forward and backward times by shape.
void read_attention_json(const json& j, const std::string& shown, Inputs& in) {
  const int src = static_cast<int>(in.sources.size());
  CalibrationSource cs = script_source(j, shown, in);
  if (!j.contains("rows") || !j["rows"].is_array()) fail(shown, "expected a list under 'rows'");
  int rows = 0, left_out = 0;
  for (const json& r : j["rows"]) {
    for (int pass = 0; pass < 2; ++pass) {
      AttentionPoint p;
      p.batch = r.value("B", 0);
      p.heads = r.value("H", 0);
      p.seq = r.value("S", 0);
      p.head_dim = r.value("D", 0);
      p.causal = r.value("causal", true);
      p.backward = pass == 1;
      p.flops = r.value(p.backward ? "backward_flops" : "forward_flops", 0.0);
      p.measured_s = r.value(p.backward ? "backward_s" : "forward_s", 0.0);
      p.source = src;
      ++rows;
      if (p.seq > 0 && p.flops > 0 && usable_time(p.measured_s) && std::isfinite(p.flops))
        in.attention.push_back(p);
      else
        ++left_out;
    }
  }
  note_dropped(in, shown, "attention", left_out, rows, "no positive sequence length, FLOPs and time under an hour");
  cs.used.push_back("attention");
  in.sources.push_back(cs);
}

// calibration/bench/kernel_gap.cu: per kernel case, the GPU's time per kernel queued eagerly and as a graph node, the
// host out of the way; a point is their difference. Its first runs (2026-12-03) were written before the program
// named its schema: those are recognized by their cases.
bool is_kernel_gap_json(const json& j, const std::string& schema) {
  if (schema.starts_with("racksim-kernel-gap/")) return true;
  return schema.empty() && j.is_object() && j.contains("cases") && j["cases"].is_array() && !j["cases"].empty() &&
         j["cases"][0].is_object() && j["cases"][0].contains("eager_us") && j["cases"][0].contains("graph_us");
}
void read_kernel_gap_json(const json& j, const std::string& shown, Inputs& in) {
  CalibrationSource cs;
  cs.path = shown;
  cs.schema = "racksim-kernel-gap/1";
  cs.date = j.value("date", "");
  note_device(in, j.value("device", ""), shown);
  if (!j.contains("cases") || !j["cases"].is_array()) fail(shown, "racksim-kernel-gap/1 without a 'cases' list");
  int left_out = 0, rows = 0;
  for (const json& r : j["cases"]) {
    ++rows;
    double eager = 0, graph = 0;
    if (r.is_object() && r.contains("eager_us") && r.contains("graph_us") && r["eager_us"].is_object() &&
        r["graph_us"].is_object() && r["eager_us"].contains("median") && r["eager_us"]["median"].is_number() &&
        r["graph_us"].contains("median") && r["graph_us"]["median"].is_number()) {
      eager = r["eager_us"]["median"].get<double>();
      graph = r["graph_us"]["median"].get<double>();
    }
    if (usable(eager, graph) && eager > graph) in.eager_gap_s.push_back((eager - graph) * 1e-6);
    else ++left_out;
  }
  note_dropped(in, shown, "eager_gap", left_out, rows, "no positive eager and graph medians with eager > graph");
  cs.used.push_back("eager_gap");
  in.sources.push_back(cs);
}

// nlohmann's message without its "[json.exception.type_error.302] " tag.
std::string json_message(const json::exception& e) {
  std::string s = e.what();
  if (const auto close = s.find("] "); s.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
    s = s.substr(close + 2);
  return s;
}

void read_bench_json(const std::string& path, const std::string& shown, Inputs& in, const FitOptions& opt) {
  const std::string text =
      input::read_file_bounded(path, input::limits::kMaxMeasurementFileBytes, "a measurement file", input::Binary::stop);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(shown, fmt::format("not valid JSON: {}", json_message(e)));
  }
  const std::string schema = j.is_object() && j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
  // Each family's readers know its version 1 only: a later version may mean other units or fields, so it is refused,
  // not read as if it were 1.
  for (const char* family : {"racksim-bench/", "racksim-gemm-torch/", "racksim-xla-runtime/", "racksim-attention/",
                             "racksim-kernel-gap/"})
    if (schema.starts_with(family) && schema != std::string(family) + "1")
      fail(shown, fmt::format("schema '{}': this racksim reads {}1 only (a file written by a newer bench needs a newer "
                              "racksim)",
                              schema, family));
  if (schema.starts_with("racksim-xla-runtime/")) return read_xla_runtime_json(j, path, shown, in, opt);
  if (schema.starts_with("racksim-attention/")) return read_attention_json(j, shown, in);
  if (is_kernel_gap_json(j, schema)) {
    try {
      return read_kernel_gap_json(j, shown, in);
    } catch (const json::exception& e) {
      fail(shown, fmt::format("not a racksim-kernel-gap/1 file: {}", json_message(e)));
    }
  }
  if (!schema.starts_with("racksim-bench/") && !schema.starts_with("racksim-gemm-torch/"))
    fail(shown, fmt::format("JSON without a known schema ('{}'): expected racksim-bench/1, racksim-gemm-torch/1, "
                            "racksim-xla-runtime/1, racksim-attention/1 or racksim-kernel-gap/1",
                            schema));
  const int src = static_cast<int>(in.sources.size());
  CalibrationSource cs;
  cs.path = shown;
  cs.schema = schema;
  std::string row;  // where in the file the reader is, for the messages ("gemm.results[3]")
  try {
    const json& id = at(j, "identity", shown);
    cs.date = id.value("date_utc", "");
    std::string name, driver;
    int sms = 0;
    if (id.contains("gpus") && id["gpus"].is_array() && !id["gpus"].empty()) {
      const std::size_t di = id.value("device_index", 0);
      const json& g = id["gpus"].at(std::min(di, id["gpus"].size() - 1));
      name = g.value("name", "");
      sms = g.value("sm_count", 0);
      if (g.contains("total_mem_bytes") && g["total_mem_bytes"].is_number() && in.memory_bytes == 0)
        in.memory_bytes = g["total_mem_bytes"].get<double>();
    } else {
      name = id.value("gpu", "");
      sms = id.value("sm_count", 0);
    }
    if (id.contains("driver_version") && id["driver_version"].is_string()) driver = id["driver_version"].get<std::string>();
    note_device(in, name, shown);
    if (in.driver.empty()) in.driver = driver;
    if (in.sm_count == 0) in.sm_count = sms;

    if (const json* results = section_rows(j, "gemm", "results", shown)) {
      int n = 0, rows = 0, left_out = 0, index = 0;
      for (const json& r : *results) {
        row = fmt::format("gemm.results[{}]", index++);
        if (r.contains("error")) continue;
        const std::string dt = text_field(r, "dtype", "", {}, shown, row);
        sim::Dtype d;
        if (dt == "bf16") d = sim::Dtype::bf16;
        else if (dt == "fp8_e4m3") d = sim::Dtype::fp8;
        else if (dt == "fp4_e2m1") d = sim::Dtype::nvfp4;
        else fail(shown, fmt::format("{}.dtype: unknown value '{}'; expected one of bf16 | fp8_e4m3 | fp4_e2m1", row, dt));
        RawGemm g{d, {}};
        g.p.source = src;
        g.p.label = text_field(r, "label", "", {}, shown, row);
        g.p.m = at(r, "m", shown, row).get<double>();
        g.p.n = at(r, "n", shown, row).get<double>();
        g.p.k = at(r, "k", shown, row).get<double>();
        g.p.batch = r.value("batch", 1);
        g.p.layout = text_field(r, "layout", "TN", {"TN", "NN", "NT", "TT"}, shown, row);
        g.p.out = text_field(r, "out_dtype", "bf16", {"bf16", "f32"}, shown, row);
        g.p.measured_s = median_of(at(r, "s", shown, row), shown, row);
        ++rows;
        // A shape that is not a matrix product is bad data, not a measurement to leave out.
        for (const auto& [name, v] : {std::pair<const char*, double>{"m", g.p.m}, {"n", g.p.n}, {"k", g.p.k}})
          if (!(v >= 1 && v <= 1e9 && std::isfinite(v) && v == std::floor(v)))
            fail(shown, fmt::format("gemm row {} ('{}'): {} = {} is not a matrix size (a whole number, 1 to 1e9)", rows, g.p.label, name, v));
        if (g.p.batch < 1 || g.p.batch > 1'000'000'000)
          fail(shown, fmt::format("gemm row {} ('{}'): batch = {} is not a batch count", rows, g.p.label, g.p.batch));
        if (!usable_time(g.p.measured_s)) {
          ++left_out;
          continue;
        }
        in.gemm.push_back(g);
        ++n;
      }
      note_dropped(in, shown, "gemm", left_out, rows, "no positive, finite time under an hour");
      if (n) cs.used.push_back("gemm");
    }
    const std::string why = "a size or time that is not positive and finite, or a time over an hour";
    if (const json* results = section_rows(j, "hbm", "results", shown)) {
      int rows = 0, left_out = 0, index = 0;
      for (const json& r : *results)
        if (row = fmt::format("hbm.results[{}]", index++); r.contains("kernel")) {
          ++rows;
          add_point(in.hbm, 2.0 * at(r, "bytes", shown, row).get<double>(), median_of(at(r["kernel"], "s", shown, row), shown, row),
                    left_out);
        }
      note_dropped(in, shown, "hbm", left_out, rows, why);
      if (rows > left_out) cs.used.push_back("hbm");
    }
    if (const json* results = section_rows(j, "host", "results", shown)) {
      int rows = 0, left_out = 0;
      int index = 0;
      for (const json& r : *results) {
        row = fmt::format("host.results[{}]", index++);
        const double b = at(r, "bytes", shown, row).get<double>();
        ++rows;
        if (r.contains("h2d")) add_point(in.h2d, b, median_of(at(r["h2d"], "s", shown, row), shown, row), left_out);
        if (r.contains("d2h")) add_point(in.d2h, b, median_of(at(r["d2h"], "s", shown, row), shown, row), left_out);
        if (r.contains("bidir")) add_point(in.both, 2 * b, median_of(at(r["bidir"], "span_s", shown, row), shown, row), left_out);
      }
      note_dropped(in, shown, "host-copy", left_out, rows, why);
      if (rows > 0) cs.used.push_back("host");
    }
    if (const json* results = section_rows(j, "launch", "results", shown)) {
      int rows = 0, left_out = 0;
      int index = 0;
      for (const json& r : *results) {
        row = fmt::format("launch.results[{}]", index++);
        const double n = at(r, "n", shown, row).get<double>();
        const json& e = at(r, "eager", shown, row);
        const json& g = at(r, "graph", shown, row);
        ++rows;
        add_point(in.eager, n, n * 1e-6 * median_of(at(e, "host_us_per_launch", shown, row), shown, row), left_out);
        add_point(in.graph_node, n, n * 1e-6 * median_of(at(g, "inclusive_us_per_kernel", shown, row), shown, row), left_out);
        add_point(in.graph_launch, n, 1e-6 * median_of(at(g, "launch_host_us", shown, row), shown, row), left_out);
        add_point(in.min_kernel, n, n * 1e-6 * median_of(at(g, "gpu_span_us_per_kernel", shown, row), shown, row), left_out);
      }
      note_dropped(in, shown, "launch", left_out, rows, why);
      cs.used.push_back("launch");
    }
    if (const json* results = section_rows(j, "contention", "results", shown)) {
      int index = 0;
      for (const json& r : *results) {
        row = fmt::format("contention.results[{}]", index++);
        ContentionPoint p;
        p.background = r.value("background", "");
        p.description = r.value("description", "");
        p.gemm_slowdown = at(r, "gemm_slowdown", shown, row).get<double>();
        p.background_slowdown = at(r, "bg_slowdown", shown, row).get<double>();
        in.contention.push_back(p);
      }
      cs.used.push_back("contention");
    }
    if (const json* runs = section_rows(j, "nccl", "runs", shown)) {
      bool any = false;
      int nccl_rows = 0, nccl_left_out = 0;
      for (const json& run : *runs) {
        const int gpus = run.value("gpus", 0);
        if (gpus < 2 || !run.contains("results")) continue;
        std::map<std::string, Inputs::NcclGroup> groups;
        int index = 0;
        for (const json& r : run["results"]) {
          row = fmt::format("nccl.runs[{} GPUs].results[{}]", gpus, index++);
          if (r.contains("error") || !r.contains("s")) continue;
          const std::string op = r.value("collective", "");
          auto& g = groups[op];
          g.op = op;
          g.gpus = gpus;
          g.source = src;
          const double b = at(r, "bytes", shown, row).get<double>();
          const double t = median_of(r["s"], shown, row);
          ++nccl_rows;
          add_point(g.pts, b, t, nccl_left_out);
        }
        for (auto& [op, g] : groups)
          if (g.pts.size() >= 2) {
            in.nccl.push_back(g);
            any = true;
          } else {
            in.dropped.push_back(fmt::format("{}: {} on {} GPUs has {} usable size{}: not fitted (at least 2 are needed)",
                                             shown, op, gpus, g.pts.size(), g.pts.size() == 1 ? "" : "s"));
          }
      }
      note_dropped(in, shown, "nccl", nccl_left_out, nccl_rows, why);
      if (any) cs.used.push_back("nccl");
    }
  } catch (const json::exception& e) {
    fail(shown, fmt::format("{}unexpected JSON structure: {}", row.empty() ? "" : row + ": ", json_message(e)));
  }
  in.sources.push_back(cs);
}

GemmModel fit_gemm(sim::Dtype d, std::vector<GemmPoint> pts, double peak, double hbm_Bps) {
  GemmModel m;
  m.peak_flops_per_s = peak;
  std::vector<double> flops(pts.size()), tmem(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    auto& p = pts[i];
    flops[i] = 2.0 * p.batch * p.m * p.n * p.k;
    const double bytes = p.batch * ((p.m * p.k + p.n * p.k) * matmul_input_bytes(d) + p.m * p.n * (p.out == "f32" ? 4 : 2));
    tmem[i] = hbm_Bps > 0 ? bytes / hbm_Bps : 0;
    p.efficiency = flops[i] / (p.measured_s * peak);
    p.hbm_bound = tmem[i] > kHbmBoundShare * p.measured_s;
  }
  std::vector<int> fit_idx;
  for (std::size_t i = 0; i < pts.size(); ++i)
    if (!pts[i].hbm_bound) fit_idx.push_back(static_cast<int>(i));
  if (fit_idx.size() < 3) fail("<fit>", fmt::format("{} GEMM: {} compute-bound shapes; at least 3 are needed", to_string(d), fit_idx.size()));
  // Columns: F/P (coefficient 1/e_max), F/(P K) (coefficient k0/e_max), 1 (coefficient t0).
  Eigen::MatrixXd X(static_cast<int>(fit_idx.size()), 3);
  Eigen::VectorXd t(static_cast<int>(fit_idx.size()));
  for (std::size_t r = 0; r < fit_idx.size(); ++r) {
    const auto& p = pts[fit_idx[r]];
    const int i = static_cast<int>(r);
    X(i, 0) = flops[fit_idx[r]] / peak;
    X(i, 1) = flops[fit_idx[r]] / peak / p.k;
    X(i, 2) = 1.0;
    t(i) = p.measured_s;
  }
  const FitResult f = nonneg_lsq(X, t, {0, 1, 2});
  if (!(f.coef(0) > 0)) fail("<fit>", fmt::format("{} GEMM fit has no positive throughput term", to_string(d)));
  m.e_max = 1.0 / f.coef(0);
  m.k0 = f.coef(1) / f.coef(0);
  m.t0_s = f.coef(2);
  m.points_fitted = static_cast<int>(fit_idx.size());
  m.points_hbm_bound = static_cast<int>(pts.size() - fit_idx.size());
  m.rms_residual = f.rms;
  m.max_abs_residual = f.max_abs;
  double ss = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    auto& p = pts[i];
    const double tc = p.k > 0 ? m.t0_s + flops[i] / (peak * m.e_max) * (1 + m.k0 / p.k) : 0;
    p.model_s = std::max(tc, tmem[i]);
    p.residual = (p.model_s - p.measured_s) / p.measured_s;
    ss += p.residual * p.residual;
    m.max_abs_residual_all = std::max(m.max_abs_residual_all, std::fabs(p.residual));
  }
  m.rms_residual_all = pts.empty() ? 0 : std::sqrt(ss / pts.size());
  // The same shape measured more than once (another source, another place in a grid).
  for (const auto& [k, mm] : time_range_by_shape(pts)) m.repeat_spread = std::max(m.repeat_spread, mm.second / mm.first - 1);
  std::stable_sort(pts.begin(), pts.end(), [](const GemmPoint& a, const GemmPoint& b) {
    return std::tie(a.batch, a.m, a.n, a.k, a.layout, a.out, a.source) < std::tie(b.batch, b.m, b.n, b.k, b.layout, b.out, b.source);
  });
  m.shapes = std::move(pts);
  return m;
}

}  // namespace

namespace {

// The bound B in [lo, hi] of t = max(bytes / hbm, work / B) over measured kernels (one work figure per kernel:
// operand bytes x thread bytes for the row kernels, output indices for the loop kernels) that minimises the rms
// relative residual: a 1-D search on log B, a coarse grid, then golden-section refinement (deterministic). Then
// every point's model time and residual, `fitted` where the bound governs it, and the fit's statistics.
template <class Point, class Fit>
double fit_hbm_or_bound(std::vector<Point>& pts, double hbm_Bps, double lo_bound, double hi_bound,
                        double (*work)(const Point&), Fit& f) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return std::tie(a.source, a.label) < std::tie(b.source, b.label);
  });
  auto rms_at = [&](double log_b) {
    const double bound = std::exp(log_b);
    double ss = 0;
    for (const auto& p : pts) {
      const double m = std::max(p.bytes / hbm_Bps, work(p) / bound);
      ss += std::pow((m - p.measured_s) / p.measured_s, 2);
    }
    return ss;
  };
  const double lo = std::log(lo_bound), hi = std::log(hi_bound);
  const int steps = 900;
  int best = 0;
  double best_v = 1e300;
  for (int i = 0; i <= steps; ++i) {
    const double v = rms_at(lo + (hi - lo) * i / steps);
    if (v < best_v) best_v = v, best = i;
  }
  double a = lo + (hi - lo) * std::max(0, best - 1) / steps, b = lo + (hi - lo) * std::min(steps, best + 1) / steps;
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 100; ++it) {
    const double c = b - g * (b - a), d = a + g * (b - a);
    if (rms_at(c) < rms_at(d)) b = d;
    else a = c;
  }
  const double bound = std::exp(0.5 * (a + b));
  double ss = 0;
  for (auto& p : pts) {
    const double bound_s = work(p) / bound;
    p.fitted = bound_s > p.bytes / hbm_Bps;
    p.model_s = std::max(p.bytes / hbm_Bps, bound_s);
    p.residual = (p.model_s - p.measured_s) / p.measured_s;
    ss += p.residual * p.residual;
    f.max_abs_residual = std::max(f.max_abs_residual, std::abs(p.residual));
    if (p.fitted) ++f.points;
  }
  f.rms_residual = pts.empty() ? 0 : std::sqrt(ss / static_cast<double>(pts.size()));
  return bound;
}

}  // namespace

// k of t = max(bytes / hbm, bytes * thread_bytes / k), k between 1 GB/s x B and 1e9 GB/s x B.
RowKernelFit fit_row_kernels(std::vector<RowKernelPoint> pts, double hbm_Bps) {
  RowKernelFit f;
  f.k_Bps_B = fit_hbm_or_bound(pts, hbm_Bps, 1e9, 1e18,
                               +[](const RowKernelPoint& p) { return p.bytes * p.thread_bytes; }, f);
  f.kernels = std::move(pts);
  return f;
}

// index_rate of t = max(bytes / hbm, indices / index_rate), between 1 G and 1e15 indices a second.
LoopFusionFit fit_loop_fusions(std::vector<LoopFusionPoint> pts, double hbm_Bps) {
  LoopFusionFit f;
  f.index_rate_per_s = fit_hbm_or_bound(pts, hbm_Bps, 1e9, 1e15, +[](const LoopFusionPoint& p) { return p.indices; }, f);
  f.kernels = std::move(pts);
  return f;
}

// Per direction and mask: t = F / (P * e_max) * (1 + s0 / S), linear in (1/e_max, s0/e_max);
// relative least squares with non-negative coefficients.
AttentionFit fit_attention(std::vector<AttentionPoint> pts, double peak) {
  std::sort(pts.begin(), pts.end(), [](const AttentionPoint& a, const AttentionPoint& b) {
    return std::tie(a.backward, a.causal, a.seq, a.heads, a.batch, a.source) <
           std::tie(b.backward, b.causal, b.seq, b.heads, b.batch, b.source);
  });
  AttentionFit f;
  for (int pass = 0; pass < 2; ++pass)
    for (int causal = 0; causal < 2; ++causal) {
      std::vector<AttentionPoint*> sel;
      for (auto& p : pts)
        if (p.backward == (pass == 1) && p.causal == (causal == 1)) sel.push_back(&p);
      AttentionCurve& c = f.curve(pass == 1, causal == 1);
      if (sel.size() < 2) continue;
      const int n = static_cast<int>(sel.size());
      Eigen::MatrixXd X(n, 2);
      Eigen::VectorXd t(n);
      for (int i = 0; i < n; ++i) {
        X(i, 0) = sel[static_cast<std::size_t>(i)]->flops / peak;
        X(i, 1) = sel[static_cast<std::size_t>(i)]->flops / peak / sel[static_cast<std::size_t>(i)]->seq;
        t(i) = sel[static_cast<std::size_t>(i)]->measured_s;
      }
      const FitResult r = nonneg_lsq(X, t, {0, 1});
      if (!(r.coef(0) > 0)) continue;
      c.e_max = 1.0 / r.coef(0);
      c.s0 = r.coef(1) / r.coef(0);
      c.points = n;
      c.rms_residual = r.rms;
      c.max_abs_residual = r.max_abs;
      for (int i = 0; i < n; ++i) {
        auto& p = *sel[static_cast<std::size_t>(i)];
        p.model_s = X.row(i).dot(r.coef);
        p.residual = (p.model_s - p.measured_s) / p.measured_s;
      }
    }
  f.rows = std::move(pts);
  return f;
}

// exposed = program + command x commands + rerecord_ref x re-recorded references: relative
// least squares with non-negative coefficients over every dispatch row.
// Relative non-negative least squares of the rows' exposed time on `features` (one row each);
// writes every row's model time and residual.
FitResult fit_dispatch_rows(std::vector<DispatchPoint>& rows,
                            const std::function<std::vector<double>(const DispatchPoint&)>& features) {
  const int n = static_cast<int>(rows.size());
  const int k = n > 0 ? static_cast<int>(features(rows.front()).size()) : 1;
  Eigen::MatrixXd X(n, k);
  Eigen::VectorXd t(n);
  for (int i = 0; i < n; ++i) {
    const auto x = features(rows[static_cast<std::size_t>(i)]);
    for (int j = 0; j < k; ++j) X(i, j) = x[static_cast<std::size_t>(j)];
    t(i) = rows[static_cast<std::size_t>(i)].exposed_s;
  }
  std::vector<int> cols(static_cast<std::size_t>(k));
  for (int j = 0; j < k; ++j) cols[static_cast<std::size_t>(j)] = j;
  const FitResult r = nonneg_lsq(X, t, cols);
  for (int i = 0; i < n; ++i) {
    auto& p = rows[static_cast<std::size_t>(i)];
    p.model_s = X.row(i).dot(r.coef);
    p.residual = (p.model_s - p.exposed_s) / p.exposed_s;
  }
  return r;
}

XlaRuntimeFit fit_xla_runtime(std::vector<DispatchPoint> all) {
  std::sort(all.begin(), all.end(), [](const DispatchPoint& a, const DispatchPoint& b) {
    return std::tie(a.source, a.label) < std::tie(b.source, b.label);
  });
  std::vector<DispatchPoint> pts, thunk;
  for (auto& p : all) (p.command_buffers ? pts : thunk).push_back(p);
  XlaRuntimeFit f;
  const FitResult r = fit_dispatch_rows(pts, [](const DispatchPoint& p) {
    return std::vector<double>{1.0, static_cast<double>(p.commands), p.rerecorded_refs};
  });
  f.program_s = r.coef(0);
  f.command_s = r.coef(1);
  f.rerecord_ref_s = r.coef(2);
  f.points = static_cast<int>(pts.size());
  f.rms_residual = r.rms;
  f.max_abs_residual = r.max_abs;
  // Thunk rows: step = thunk_program + thunk_launch x kernels.
  if (thunk.size() >= 2) {
    const FitResult tf =
        fit_dispatch_rows(thunk, [](const DispatchPoint& p) { return std::vector<double>{1.0, static_cast<double>(p.commands)}; });
    f.thunk_program_s = tf.coef(0);
    f.thunk_launch_s = tf.coef(1);
    f.thunk_points = static_cast<int>(thunk.size());
    f.thunk_rms_residual = tf.rms;
    f.thunk_max_abs_residual = tf.max_abs;
  }
  f.rows = std::move(pts);
  f.rows.insert(f.rows.end(), thunk.begin(), thunk.end());
  return f;
}

bool is_measurement_file(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".json" || ext == ".log" || ext == ".txt" || ext == ".out";
}

std::vector<std::string> measurement_files(const std::vector<std::string>& from_dirs) {
  std::vector<std::string> out;
  for (const auto& d : from_dirs) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (std::error_code ec2; it->is_regular_file(ec2) && is_measurement_file(it->path().string()))
        out.push_back(it->path().string());
  }
  return out;
}

Calibration fit_calibration(const FitOptions& opt) {
  if (opt.from_dirs.empty()) fail("--from", "name at least one directory of measurements");
  // The base preset: the datasheet figures the fractions refer to.
  SystemSpec base;
  {
    input::Diagnostics diag;
    auto ctx = std::make_shared<input::LoadContext>();
    ctx->diag = &diag;
    if (!load_system_preset(opt.base_preset, nullptr, std::nullopt, ctx, base)) diag.throw_if_any();
    diag.throw_if_any();
  }
  // Every file, sorted by the path shown, so the result does not depend on the order of --from.
  std::vector<std::pair<std::string, std::string>> files;  // shown, real
  std::vector<std::string> dirs_shown;
  for (const auto& d : opt.from_dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) fail(d, "not a directory (--from)");
    dirs_shown.push_back(display_path(d));
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) files.push_back({display_path(it->path().string()), it->path().string()});
    if (ec) fail(d, fmt::format("cannot list this directory (--from): {}", ec.message()));
  }
  std::sort(files.begin(), files.end());
  // A directory named twice (or by two spellings) is read once: its measurements counted twice would weigh double in
  // every fit and be compared with themselves (an audit's finding).
  {
    std::set<std::string> seen;
    std::vector<std::pair<std::string, std::string>> unique;
    for (auto& f : files) {
      std::error_code ec;
      const fs::path canon = fs::weakly_canonical(f.second, ec);
      if (seen.insert(ec ? f.second : canon.string()).second) unique.push_back(std::move(f));
    }
    files = std::move(unique);
  }
  std::sort(dirs_shown.begin(), dirs_shown.end());

  Inputs in;
  std::vector<std::pair<NcclTestsLog, int>> logs;
  for (const auto& [shown, real] : files) {
    const std::string ext = fs::path(real).extension().string();
    std::string text;
    if (is_measurement_file(real))
      text = input::read_file_bounded(real, input::limits::kMaxMeasurementFileBytes, "a measurement file",
                                      input::Binary::stop);
    // nccl-tests: stdout logs (.log, .txt; -C cputime), Slurm .out files, -J JSON.
    std::vector<NcclTestsLog> tests;
    if (ext == ".json") {
      json j;
      try {
        j = json::parse(text);
      } catch (const json::exception&) {
      }
      if (!is_nccl_tests_json(j)) {
        read_bench_json(real, shown, in, opt);
        continue;
      }
      tests = parse_nccl_tests_output(text, shown);
    } else if (ext == ".log" || ext == ".txt" || ext == ".out") {
      tests = parse_nccl_tests_output(text, shown);  // none: racksim-bench's own log, environment captures, ...
    }
    for (std::size_t k = 0; k < tests.size(); ++k) {
      const auto& log = tests[k];
      const std::string where = tests.size() > 1 ? fmt::format("{} (test {} of {})", shown, k + 1, tests.size()) : shown;
      if (log.prediction)
        fail(where, "a table `racksim collective` printed (its first line says so): a prediction, not a measurement; "
                    "calibrate from nccl-tests run on the GPUs");
      note_device(in, log.device, where);
      if (!log.complete)
        in.dropped.push_back(fmt::format("{}: the nccl-tests table has no closing lines ('# Out of bounds values', "
                                         "'# Avg bus bandwidth'): it may be cut short; fitted from the {} rows it has",
                                         where, log.rows.size()));
      if (log.op.empty())
        fail(where, "nccl-tests log: cannot tell which collective it measured (no 'Collective test starting' line, "
                    "and the file name names none of all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv)");
      if (log.gpus < 2) fail(where, "nccl-tests log: fewer than 2 GPUs (no '#  Rank' lines and no nGpus)");
      if (log.rows.size() < 2) fail(where, "nccl-tests log: fewer than 2 sizes");
      Inputs::NcclGroup g{log.op, log.gpus, static_cast<int>(in.sources.size()), {}};
      int left_out = 0;
      for (const auto& r : log.rows) add_point(g.pts, r.bytes, r.time_s, left_out);
      if (g.pts.size() < 2)
        fail(where, fmt::format("nccl-tests log: {} of its {} rows have a positive size and time; at least 2 are "
                                "needed to fit latency and bandwidth",
                                g.pts.size(), log.rows.size()));
      note_dropped(in, where, "nccl-tests", left_out, static_cast<int>(log.rows.size()),
                   "a size or time that is not positive and finite");
      in.nccl.push_back(g);
      in.sources.push_back({where, "", log.time_column == "cputime" ? "nccl-tests (-C: cputime)" : "nccl-tests", {"nccl"}});
    }
  }
  if (in.sources.empty()) fail(dirs_shown.front(), "no racksim-bench JSON or nccl-tests log found");
  // The device checks below (name, SM count, memory) need a name: without one, another GPU's measurements would pass
  // as the base preset's own (an H100's racksim-bench file without its identity.gpus fitted as an H200's; a review's
  // finding). Every racksim-bench file and nccl-tests log records it.
  if (in.device_name.empty())
    fail(dirs_shown.front(),
         fmt::format("no measurement here names the GPU it ran on (a racksim-bench file's identity.gpus[].name or "
                     "identity.gpu, an nccl-tests log's '# Rank' lines): racksim cannot check that it ran on the base preset's GPU, {} ({}); "
                     "measure with calibration/bench, which records it",
                     base.gpu.model, base.name));

  Calibration c;
  c.device_name = in.device_name;
  c.base_preset = base.name;
  c.gpu_model = base.gpu.model;
  c.architecture = base.gpu.architecture;
  c.host_link = base.host.link;
  c.sm_count = in.sm_count > 0 ? in.sm_count : base.gpu.sm_count;
  c.driver = in.driver;
  c.sources = in.sources;
  {
    std::string cmd = "racksim calibrate fit";
    for (const auto& d : dirs_shown) cmd += " --from " + d;
    c.fitted_by = cmd + " --base " + opt.base_preset;
  }
  // A calibration is applied as measured on its base preset's GPU (same device): a base of another GPU would carry
  // one GPU's measurements to another as if they were its own (an audit's finding: an H200's fitted onto b200).
  if (in.sm_count > 0 && in.sm_count != base.gpu.sm_count)
    fail(dirs_shown.front(),
         fmt::format("the device measured ('{}') has {} SMs, the base preset {} ({}) has {}: --base names the preset of "
                     "the GPU measured (a part of another SM count needs a preset of its own: docs/presets.md)",
                     in.device_name, in.sm_count, base.name, base.gpu.model, base.gpu.sm_count));

  // The same device by its name and its memory too: an H100's file fitted onto h200-sxm has the H200's SM count but
  // would write the H100's figures as the H200's own (an audit's finding; docs/calibration.md: gpu_model is how "the
  // same device" is recognised).
  {
    const auto measured = gpu_model_words(in.device_name), preset = gpu_model_words(base.gpu.model);
    const bool named_other = !measured.empty() && !preset.empty() &&
                             std::none_of(measured.begin(), measured.end(), [&](const std::string& w) { return preset.count(w) > 0; });
    if (named_other)
      fail(dirs_shown.front(),
           fmt::format("the device measured is '{}', the base preset {} is '{}': --base names the preset of the GPU "
                       "measured (racksim hw list)",
                       in.device_name, base.name, base.gpu.model));
  }
  if (in.memory_bytes > 0 && base.gpu.hbm_capacity_bytes > 0) {
    const double ratio = in.memory_bytes / base.gpu.hbm_capacity_bytes;
    if (ratio < 0.95 || ratio > 1.05)
      fail(dirs_shown.front(),
           fmt::format("the device measured ('{}') has {:.1f} GiB of memory, the base preset {} ({}) {:.1f} GiB: "
                       "another part; --base names the preset of the GPU measured (a part of another memory size needs "
                       "a preset of its own: docs/presets.md)",
                       in.device_name, in.memory_bytes / 1073741824.0, base.name, base.gpu.model,
                       base.gpu.hbm_capacity_bytes / 1073741824.0));
  }

  const std::string from = dirs_shown.front();
  // A single usable point cannot give latency and bandwidth; say so where the section is dropped.
  for (const auto& [pts, what] : {std::pair{&in.hbm, "hbm"}, {&in.h2d, "host-to-device"}, {&in.d2h, "device-to-host"},
                                  {&in.both, "both-directions host"}})
    if (pts->size() == 1)
      in.dropped.push_back(fmt::format("{}: one usable {} copy size; at least 2 are needed to fit latency and "
                                       "bandwidth: not fitted, the preset's figure stays",
                                       from, what));
  if (in.hbm.size() >= 2) {
    c.hbm = checked(in.hbm, "HBM copies", from);
    c.hbm_efficiency = c.hbm->bandwidth_Bps / base.gpu.hbm_bandwidth_Bps;
  }
  if (in.h2d.size() >= 2 && in.d2h.size() >= 2 && in.both.size() >= 2) {
    c.host_h2d = checked(in.h2d, "host-to-device copies", from);
    c.host_d2h = checked(in.d2h, "device-to-host copies", from);
    c.host_both = checked(in.both, "copies in both directions", from);
    c.copy_efficiency =
        0.5 * (c.host_h2d->bandwidth_Bps + c.host_d2h->bandwidth_Bps) / base.host.link_bandwidth_per_direction_Bps;
    c.both_directions_fraction = c.host_both->bandwidth_Bps / base.host.link_bandwidth_both_directions_Bps;
  }
  if (in.eager.size() >= 2 && in.graph_node.size() >= 2 && in.graph_launch.size() >= 2 && in.min_kernel.size() >= 2) {
    Calibration::Launch l;
    const BandwidthFit e = fit_alpha_beta(in.eager);       // host time of N launches = a + N / rate
    const BandwidthFit g = fit_alpha_beta(in.graph_node);  // launch-to-done of an N-node graph
    const BandwidthFit gl = fit_alpha_beta(in.graph_launch);
    const BandwidthFit mk = fit_alpha_beta(in.min_kernel);
    l.eager_kernel_launch_s = e.bandwidth_Bps > 0 ? 1.0 / e.bandwidth_Bps : 0;
    l.graph_kernel_launch_s = g.bandwidth_Bps > 0 ? 1.0 / g.bandwidth_Bps : 0;
    l.graph_launch_s = gl.latency_s;
    l.min_kernel_duration_s = mk.bandwidth_Bps > 0 ? 1.0 / mk.bandwidth_Bps : 0;
    // A kernel launch costs the host microseconds (2-10 on the hosts measured here); a millisecond is a time in the
    // wrong unit (an audit's finding: 1000x passed, and 1e6x gave a 4.6 s launch).
    for (const auto& [what, v] : {std::pair<const char*, double>{"eager launch", l.eager_kernel_launch_s},
                                  {"graph node", l.graph_kernel_launch_s},
                                  {"graph launch", l.graph_launch_s}})
      if (v > 1e-3)
        fail(from, fmt::format("launch: {} {:.1f} us per kernel: not a launch's host cost (microseconds); the launch "
                               "rows' times are mis-scaled",
                               what, v * 1e6));
    l.eager_rms = e.rms_residual;
    l.graph_node_rms = g.rms_residual;
    l.graph_launch_rms = gl.rms_residual;
    l.min_kernel_rms = mk.rms_residual;
    if (!in.eager_gap_s.empty()) {
      // One figure for every kernel size: the measured differences do not grow with the kernel (empty to a 16 MiB
      // copy), so their median, with their range.
      std::vector<double> g = in.eager_gap_s;
      std::sort(g.begin(), g.end());
      const std::size_t n = g.size();
      l.eager_kernel_gap_s = n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]);
      l.eager_gap_points = static_cast<int>(n);
      l.eager_gap_min_s = g.front();
      l.eager_gap_max_s = g.back();
    }
    c.launch = l;
  }
  c.contention = in.contention;
  if (std::count_if(in.dispatch.begin(), in.dispatch.end(), [](const DispatchPoint& p) { return p.command_buffers; }) >= 3)
    c.xla_runtime = fit_xla_runtime(in.dispatch);
  if (!in.attention.empty()) {
    auto it = base.gpu.peak_dense_flops_per_s.find(sim::Dtype::bf16);
    if (it != base.gpu.peak_dense_flops_per_s.end()) c.attention = fit_attention(in.attention, it->second);
  }
  if (!in.row_kernels.empty()) c.row_kernels = fit_row_kernels(in.row_kernels, c.hbm ? c.hbm->bandwidth_Bps
                                                                                  : base.gpu.hbm_bandwidth_Bps * base.gpu.hbm_efficiency);
  if (!in.loop_fusions.empty())
    c.loop_fusions = fit_loop_fusions(in.loop_fusions, c.hbm ? c.hbm->bandwidth_Bps
                                                             : base.gpu.hbm_bandwidth_Bps * base.gpu.hbm_efficiency);

  const double hbm_rate = c.hbm ? c.hbm->bandwidth_Bps : base.gpu.hbm_bandwidth_Bps * base.gpu.hbm_efficiency;
  std::map<sim::Dtype, std::vector<GemmPoint>> by_dtype;
  for (const auto& g : in.gemm) by_dtype[g.dtype].push_back(g.p);
  for (auto& [d, pts] : by_dtype) {
    auto it = base.gpu.peak_dense_flops_per_s.find(d);
    if (it == base.gpu.peak_dense_flops_per_s.end()) {
      c.notes.push_back(fmt::format("{} GEMMs were measured but {} has no {} peak: not fitted", to_string(d), base.name,
                                    to_string(d)));
      continue;
    }
    // No GEMM runs above its datasheet peak (the peak is at the boost clock): a row that does is mis-scaled (a time in
    // the wrong unit, a shape that is not the one timed) or from another GPU; racksim-bench warns of it as it measures.
    for (const auto& p : pts) {
      const double rate = 2.0 * p.m * p.n * p.k * p.batch / p.measured_s;
      if (rate > 1.02 * it->second)
        fail(c.sources[static_cast<std::size_t>(p.source)].path,
             fmt::format("gemm {} '{}' ({} x {} x {}{}): {:.0f} TFLOP/s measured, above {}'s {} peak of {:.0f} TFLOP/s: "
                         "the time is mis-scaled or the file is from another GPU",
                         to_string(d), p.label, p.m, p.n, p.k, p.batch > 1 ? fmt::format(", batch {}", p.batch) : "",
                         rate / 1e12, base.name, to_string(d), it->second / 1e12));
    }
    c.gemm[d] = fit_gemm(d, pts, it->second, hbm_rate);
    const GemmModel& m = c.gemm[d];
    // How sources agree on the shapes they both measured.
    for (std::size_t a = 0; a < c.sources.size(); ++a)
      for (std::size_t b = a + 1; b < c.sources.size(); ++b) {
        std::map<ShapeKey, std::pair<double, double>> ta;
        double logsum = 0, lo = 1e300, hi = 0;
        int common = 0;
        for (const auto& p : m.shapes)
          if (p.source == static_cast<int>(a)) ta[shape_key(p)].first = p.measured_s;
        for (const auto& p : m.shapes)
          if (p.source == static_cast<int>(b)) {
            auto itp = ta.find(shape_key(p));
            if (itp == ta.end() || itp->second.first <= 0) continue;
            const double r = p.measured_s / itp->second.first;
            logsum += std::log(r);
            lo = std::min(lo, r);
            hi = std::max(hi, r);
            ++common;
          }
        // One device's two measurements of a shape differ by its power state (up to about a third, docs/calibration.md),
        // not by a factor of two: that is a unit or a device mixed up (an audit's finding: milliseconds as seconds
        // passed with a note).
        if (common > 0 && std::fabs(logsum / common) > std::log(2.0))
          fail(c.sources[b].path,
               fmt::format("gemm {}: its {} shapes also measured in {} took {}x the time they took there (geometric "
                           "mean): one device does not differ so; a unit or a device is mixed up",
                           to_string(d), common, c.sources[a].path, num(std::exp(logsum / common), 3)));
        if (common > 0)
          c.notes.push_back(fmt::format(
              "gemm {}: {} measurements in {} of shapes also measured in {}: they took {}x the time (geometric "
              "mean; range {}-{}x); all are fitted as measured",
              to_string(d), common, fs::path(c.sources[b].path).filename().string(),
              fs::path(c.sources[a].path).filename().string(), num(std::exp(logsum / common), 3), num(lo, 3), num(hi, 3)));
      }
    // A shape measured more than once within one source: the card's power state moves it by up to about a third
    // (docs/calibration.md); twice as long or more is a bad row, which the fit would take as measured and the
    // scenario's warning would put down to the power state (a review's finding: a row duplicated at 10x, fitted
    // without a word).
    for (std::size_t a = 0; a < c.sources.size(); ++a)
      for (const auto& [k, mm] : time_range_by_shape(m.shapes, static_cast<int>(a)))
        if (mm.first > 0 && mm.second > 2 * mm.first)
          c.notes.push_back(fmt::format(
              "gemm {}: {} measures {}x{}x{} (batch {}, {}, out {}) more than once, {}x apart: one card's power state "
              "moves a shape by up to about a third; check those rows (all are fitted as measured)",
              to_string(d), fs::path(c.sources[a].path).filename().string(), std::get<0>(k), std::get<1>(k),
              std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k), num(mm.second / mm.first, 3)));
    if (m.points_hbm_bound > 0) {
      double lo = 1e300, hi = -1e300;
      for (const auto& p : m.shapes)
        if (p.hbm_bound) {
          lo = std::min(lo, p.residual);
          hi = std::max(hi, p.residual);
        }
      c.notes.push_back(fmt::format(
          "gemm {}: {} shapes are HBM-bound (operand and result bytes at the calibrated HBM rate exceed half their "
          "time) and are not in the efficiency fit; the roofline misses them by {} to {}",
          to_string(d), m.points_hbm_bound, signed4(lo), signed4(hi)));
    }
  }

  // NCCL: one alpha-beta fit per op and GPU count, over every source that measured it: racksim applies one per op
  // and count, and two entries had let the files' names pick which (an audit's finding). Sources that disagree are
  // said.
  std::map<std::pair<std::string, int>, std::vector<const Inputs::NcclGroup*>> same;
  for (const auto& g : in.nccl) same[{g.op, g.gpus}].push_back(&g);
  std::vector<Inputs::NcclGroup> merged;
  for (const auto& [key, groups] : same) {
    Inputs::NcclGroup m{key.first, key.second, groups.front()->source, {}};
    for (const auto* g : groups) m.pts.insert(m.pts.end(), g->pts.begin(), g->pts.end());
    if (groups.size() > 1) {
      std::vector<std::string> each;
      double lo = 1e300, hi = 0;
      for (const auto* g : groups) {
        const BandwidthFit b = checked(g->pts, fmt::format("{} on {} GPUs", g->op, g->gpus),
                                       c.sources[static_cast<std::size_t>(g->source)].path);
        each.push_back(fmt::format("{} {:.1f} GB/s", c.sources[static_cast<std::size_t>(g->source)].path, b.bandwidth_Bps / 1e9));
        lo = std::min(lo, b.bandwidth_Bps);
        hi = std::max(hi, b.bandwidth_Bps);
      }
      c.notes.push_back(fmt::format("nccl {} x{}: measured by {} sources, fitted together ({}){}", key.first, key.second,
                                    groups.size(), fmt::join(each, ", "),
                                    hi > 1.25 * lo ? "; they disagree by more than 25%: check that they ran the same way" : ""));
    }
    merged.push_back(std::move(m));
  }
  for (const auto& g : merged) {
    const auto op = collective_op_from_string(g.op);
    if (!op) fail(c.sources[g.source].path, fmt::format("collective '{}' is not one racksim models", g.op));
    const BandwidthFit b = checked(g.pts, fmt::format("{} on {} GPUs", g.op, g.gpus),
                                   c.sources[static_cast<std::size_t>(g.source)].path);
    // Inside one NVLink domain no GPU sends or receives faster than its links: an all-gather's, reduce-scatter's or
    // all-to-all's bus bandwidth is each GPU's bytes over its links (nccl-tests' busbw), an all-reduce's at most twice
    // that (NVLS reduces in the switch). More is a mis-scaled time or a log from another system.
    const double busbw = b.bandwidth_Bps * nccl_busbw_factor(g.op, g.gpus);
    const double link = base.scale_up.bandwidth_per_direction_Bps;
    if (g.gpus <= base.scale_up.domain_size && link > 0 && busbw > (g.op == "all_reduce" ? 2.0 : 1.0) * 1.05 * link)
      fail(c.sources[static_cast<std::size_t>(g.source)].path,
           fmt::format("nccl {} on {} GPUs: bus bandwidth {:.0f} GB/s, more than {}'s NVLink carries ({:.0f} GB/s per "
                       "direction per GPU{}): the times are mis-scaled or the log is from another system",
                       g.op, g.gpus, busbw / 1e9, base.name, link / 1e9, g.op == "all_reduce" ? ", twice that with NVLS" : ""));
    // What the fit covers: racksim applies it at any size, beyond the measured ones too (an audit's finding: a table cut
    // at 256 KiB was applied to gigabyte collectives without a word).
    {
      double lo = 1e300, hi = 0;
      for (const auto& p : g.pts) {
        lo = std::min(lo, p.first);
        hi = std::max(hi, p.first);
      }
      if (hi < (1 << 26))
        c.notes.push_back(fmt::format("nccl {} x{}: measured from {} to {} bytes only; racksim applies the fit (latency + "
                                      "size / bandwidth) to larger collectives too, where bandwidth usually still grows",
                                      g.op, g.gpus, lo, hi));
    }
    if (g.gpus > base.scale_up.domain_size)
      c.notes.push_back(fmt::format("nccl {} x{}: more GPUs than one NVLink domain of {} ({}): racksim applies measured "
                                    "collectives inside one domain only, so this fit is recorded and not used",
                                    g.op, g.gpus, base.name, base.scale_up.domain_size));
    NcclFit f;
    f.op = *op;
    f.gpus = g.gpus;
    f.source = g.source;
    f.latency_s = b.latency_s;
    f.algbw_Bps = b.bandwidth_Bps;
    f.busbw_Bps = b.bandwidth_Bps * nccl_busbw_factor(g.op, g.gpus);
    f.points = b.points;
    f.rms_residual = b.rms_residual;
    f.max_abs_residual = b.max_abs_residual;
    c.nccl.push_back(f);
  }
  std::stable_sort(c.nccl.begin(), c.nccl.end(), [](const NcclFit& a, const NcclFit& b) {
    // By name, as the file lists them.
    return std::make_tuple(to_string(a.op), a.gpus, a.source) < std::make_tuple(to_string(b.op), b.gpus, b.source);
  });
  if (c.nccl.empty()) c.notes.push_back("nccl: no multi-GPU collective measurements in the inputs");
  for (const auto& d : in.dropped) c.notes.push_back(d);
  // A fit racksim itself would refuse to read is not written: the file is checked with the loader.
  {
    input::Diagnostics diag;
    auto ctx = std::make_shared<input::LoadContext>();
    ctx->diag = &diag;
    if (auto root = input::load_yaml_text(write_calibration_yaml(c), "<the fitted calibration>", ctx))
      parse_calibration(*root);
    if (!diag.empty())
    {
      // Named by the fitted field, not by a line of a file the user never sees (an audit's finding).
      const auto& d = diag.list().front();
      fail(from, fmt::format("the measurements give a calibration that racksim cannot use: {}{}{} (a fraction of "
                             "{}'s datasheet figure: the measurements are of another system or mis-scaled)",
                             d.key_path, d.key_path.empty() ? "" : ": ", d.message, base.name));
    }
  }
  return c;
}

}  // namespace racksim::calib
