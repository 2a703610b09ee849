#include "hardware_models/calibration.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

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

#include "hardware_models/system_preset.h"
#include "input/files.h"
#include "core/text.h"
#include "input/file_cache.h"
#include "core/units.h"

namespace racksim::hw {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using nlohmann::json;
using sim::QuantityKind;

namespace calibration_text {

// Plain decimal with `sig` significant digits, never exponent notation (so every number reads
// back through the quantity parser), trailing zeros dropped.
std::string num(double v, int sig) {
  if (v == 0 || !std::isfinite(v)) return "0";
  const int exp10 = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::max(0, sig - 1 - exp10);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}
std::string signed4(double v) {
  std::string s = fmt::format("{:+.4f}", v);
  return s == "-0.0000" ? "+0.0000" : s;
}

// Where a file is shown: relative to the data root when inside it, so the text is the same
// on every checkout.
std::string display_path(const std::string& p) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(p, ec), ec);
  const fs::path root = fs::weakly_canonical(fs::absolute(input::data_dir(), ec), ec);
  const fs::path rel = abs.lexically_relative(root);
  if (!rel.empty() && *rel.begin() != "..") return rel.generic_string();
  return fs::path(p).generic_string();
}

}  // namespace calibration_text

using namespace calibration_text;

namespace {

constexpr const char* kFormat = "racksim-calibration/1";
constexpr const char* kGemmForm = "t = t0 + F / (P * e_max) * (1 + k0 / K)";
constexpr const char* kRowKernelForm = "t = max(bytes / hbm, bytes * thread_bytes / k)";
constexpr const char* kLoopFusionForm = "t = max(bytes / hbm, indices / index_rate)";
constexpr const char* kAttentionForm = "t = F / (P * e_max) * (1 + s0 / S)";
constexpr const char* kXlaRuntimeForm = "exposed = program + command * commands + rerecord_ref * rerecorded_refs";

// ---------------------------------------------------------------- formatting

std::string fixed4(double v) {
  std::string s = fmt::format("{:.4f}", v);
  return s == "-0.0000" ? "0.0000" : s;
}
std::string us(double s) { return num(s * 1e6) + " us"; }
std::string gbps(double Bps) { return num(Bps / 1e9) + " GB/s"; }
std::string tflops(double f) { return num(f / 1e12) + " TFLOP/s"; }
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

// ---------------------------------------------------------------- the model

double GemmModel::shape_factor(double m, double n, double k, double batch, double peak, double ceiling,
                               double k0_scale) const {
  const double f = 2.0 * std::max(1.0, batch) * m * n * k;
  double denom = 1.0;
  if (k > 0) denom += k0 * k0_scale / k;
  if (f > 0 && peak > 0 && ceiling > 0) denom += t0_s * peak * ceiling / f;
  return 1.0 / denom;
}

// ---------------------------------------------------------------- loading

std::string calibrated_dir() { return input::data_dir() + "/hardware_models/calibrated"; }

std::vector<std::string> list_calibrations() { return input::list_yaml_names(calibrated_dir()); }

namespace {

template <class T, class U>
void set_if(std::optional<U> v, T& field) {
  if (v) field = static_cast<T>(*v);
}

// `fit: {points, rms, max_abs}`
void read_fit(MapReader& r, int& points, double& rms, double& max_abs) {
  if (auto f = r.get("fit", true)) {
    MapReader fr(*f);
    set_if(fr.integer("points", true, 0, 1000000), points);
    set_if(fr.number("rms", true, 0, 1e6), rms);
    set_if(fr.number("max_abs", true, 0, 1e6), max_abs);
    fr.finish();
  }
}

BandwidthFit read_bandwidth(const Node& n) {
  BandwidthFit b;
  MapReader r(n);
  set_if(r.quantity("bandwidth", QuantityKind::bytes_per_second, true), b.bandwidth_Bps);
  set_if(r.quantity("latency", QuantityKind::seconds, true), b.latency_s);
  read_fit(r, b.points, b.rms_residual, b.max_abs_residual);
  r.finish();
  if (b.bandwidth_Bps <= 0 && r.ok()) n.child("bandwidth").error("must be positive");
  return b;
}

template <class F>
void read_list(const Node& n, F&& each) {
  if (!n.yaml().IsSequence()) {
    n.error(fmt::format("expected a list, got {}", n.describe()), input::DiagnosticKind::malformed_value);
    return;
  }
  for (std::size_t i = 0; i < n.yaml().size(); ++i) each(n.element(i));
}

// A list of table rows (maps): each read by `fill(reader, row node, value)` into a new T, checked
// for unknown keys, and appended to `out`.
template <typename T, typename F>
void read_rows(const Node& n, std::vector<T>& out, F&& fill) {
  read_list(n, [&](const Node& e) {
    T v;
    MapReader r(e);
    fill(r, e, v);
    r.finish();
    out.push_back(std::move(v));
  });
}

}  // namespace

// A table row's `source`: an index into the file's sources list.
void read_source(MapReader& r, const Node& row, int nsources, int& out) {
  if (auto s = r.integer("source", true, 0, 1000000)) {
    if (*s >= nsources) row.child("source").error(fmt::format("no source #{} (the file lists {})", *s, nsources));
    out = static_cast<int>(*s);
  }
}

// A section's `form`: the model it was fitted with; another one is an error at the key.
void check_form(MapReader& r, const Node& section, const char* expected, const char* what) {
  if (auto fm = r.string("form", true); fm && *fm != expected)
    section.child("form").error(fmt::format("unsupported {} model '{}'; expected \"{}\"", what, *fm, expected));
}

// The tail every fitted-table row shares: measured and model time, residual, source index.
void read_fit_row(MapReader& r, const Node& row, int nsources, double& measured_s, double& model_s, double& residual,
                  int& source) {
  set_if(r.quantity("measured", QuantityKind::seconds, true), measured_s);
  set_if(r.quantity("model", QuantityKind::seconds, true), model_s);
  set_if(r.number("residual", true, -1e6, 1e6), residual);
  read_source(r, row, nsources, source);
}

Calibration parse_calibration(const Node& root) {
  Calibration c;
  MapReader top(root);
  if (!top.ok()) return c;
  if (auto f = top.string("format", true); f && *f != kFormat)
    root.child("format").error(fmt::format("unsupported format '{}'; this racksim reads {}", *f, kFormat));
  if (auto d = top.get("device", true)) {
    MapReader r(*d);
    set_if(r.string("name", true), c.device_name);
    set_if(r.string("base_preset", true), c.base_preset);
    set_if(r.string("gpu_model", true), c.gpu_model);
    set_if(r.choice("architecture", kArchitectureNames, true), c.architecture);
    set_if(r.choice("host_link", kHostLinkKindNames, true), c.host_link);
    set_if(r.integer("sm_count", true, 1, 100000), c.sm_count);
    set_if(r.string("driver"), c.driver);
    r.finish();
  }
  set_if(top.string("fitted_by"), c.fitted_by);
  if (auto s = top.get("sources", true)) {
    read_rows(*s, c.sources, [&](MapReader& r, const Node&, CalibrationSource& src) {
      set_if(r.string("path", true), src.path);
      set_if(r.string("date", true), src.date);
      set_if(r.string("schema", true), src.schema);
      if (auto u = r.get("used", true)) read_list(*u, [&](const Node& x) {
          if (auto v = x.as_string()) src.used.push_back(*v);
        });
    });
  }
  const int nsources = static_cast<int>(c.sources.size());
  if (auto g = top.get("gemm")) {
    MapReader gr(*g);
    if (auto f = gr.string("form", true); f && *f != kGemmForm)
      g->child("form").error(fmt::format("unsupported GEMM model '{}'; expected \"{}\"", *f, kGemmForm));
    for (sim::Dtype d : {sim::Dtype::tf32, sim::Dtype::bf16, sim::Dtype::fp8, sim::Dtype::mxfp8, sim::Dtype::nvfp4}) {
      auto dn = gr.get(to_string(d));
      if (!dn) continue;
      GemmModel m;
      MapReader r(*dn);
      set_if(r.quantity("peak_dense", QuantityKind::flops_per_second, true), m.peak_flops_per_s);
      set_if(r.number("e_max", true, 0.01, 1.0), m.e_max);
      set_if(r.number("k0", true, 0, 1e6), m.k0);
      set_if(r.quantity("t0", QuantityKind::seconds, true), m.t0_s);
      // (A fixed cost per GEMM is microseconds; 1e9 s had loaded and failed the run later, naming no key.)
      if (m.t0_s > 1.0)
        dn->child("t0").error(fmt::format("a GEMM's fixed time of {} s: at most 1 s (a launch and its tail take "
                                          "microseconds)", m.t0_s));
      if (auto f = r.get("fit", true)) {
        MapReader fr(*f);
        set_if(fr.integer("points", true, 0, 1000000), m.points_fitted);
        set_if(fr.integer("hbm_bound", true, 0, 1000000), m.points_hbm_bound);
        set_if(fr.number("rms", true, 0, 1e6), m.rms_residual);
        set_if(fr.number("max_abs", true, 0, 1e6), m.max_abs_residual);
        set_if(fr.number("rms_all", true, 0, 1e6), m.rms_residual_all);
        set_if(fr.number("max_abs_all", true, 0, 1e6), m.max_abs_residual_all);
        set_if(fr.number("repeat_spread", true, 0, 1e6), m.repeat_spread);
        fr.finish();
      }
      if (auto sh = r.get("shapes", true)) {
        read_rows(*sh, m.shapes, [&](MapReader& pr, const Node& e, GemmPoint& p) {
          set_if(pr.number("m", true, 1, 1e9), p.m);
          set_if(pr.number("n", true, 1, 1e9), p.n);
          set_if(pr.number("k", true, 1, 1e9), p.k);
          set_if(pr.integer("batch", true, 1, 1000000000), p.batch);
          set_if(pr.choice<std::string>("layout", {{"TN", "TN"}, {"NN", "NN"}, {"NT", "NT"}, {"TT", "TT"}}, true), p.layout);
          set_if(pr.choice<std::string>("out", {{"bf16", "bf16"}, {"f32", "f32"}}, true), p.out);
          set_if(pr.quantity("measured", QuantityKind::seconds, true), p.measured_s);
          set_if(pr.number("efficiency", true, 0, 10), p.efficiency);
          set_if(pr.quantity("model", QuantityKind::seconds, true), p.model_s);
          set_if(pr.number("residual", true, -1e6, 1e6), p.residual);
          set_if(pr.boolean("hbm_bound", true), p.hbm_bound);
          read_source(pr, e, nsources, p.source);
          set_if(pr.string("label"), p.label);
        });
      }
      r.finish();
      c.gemm[d] = m;
    }
    gr.finish();
  }
  if (auto h = top.get("hbm")) {
    MapReader r(*h);
    BandwidthFit b;
    set_if(r.quantity("bandwidth", QuantityKind::bytes_per_second, true), b.bandwidth_Bps);
    set_if(r.quantity("latency", QuantityKind::seconds, true), b.latency_s);
    set_if(r.number("efficiency", true, 0.01, 1.0), c.hbm_efficiency);
    read_fit(r, b.points, b.rms_residual, b.max_abs_residual);
    r.finish();
    if (!(b.bandwidth_Bps > 0) && r.has("bandwidth")) h->child("bandwidth").error("must be positive");
    c.hbm = b;
  }
  if (auto h = top.get("host")) {
    MapReader r(*h);
    if (auto n = r.get("h2d", true)) c.host_h2d = read_bandwidth(*n);
    if (auto n = r.get("d2h", true)) c.host_d2h = read_bandwidth(*n);
    if (auto n = r.get("both_directions", true)) c.host_both = read_bandwidth(*n);
    set_if(r.number("copy_efficiency", true, 0.01, 1.0), c.copy_efficiency);
    set_if(r.number("both_directions_fraction", true, 0.01, 1.0), c.both_directions_fraction);
    r.finish();
  }
  if (auto l = top.get("launch")) {
    MapReader r(*l);
    Calibration::Launch x;
    set_if(r.quantity("eager_kernel_launch", QuantityKind::seconds, true), x.eager_kernel_launch_s);
    set_if(r.quantity("graph_kernel_launch", QuantityKind::seconds, true), x.graph_kernel_launch_s);
    set_if(r.quantity("graph_launch", QuantityKind::seconds, true), x.graph_launch_s);
    set_if(r.quantity("min_kernel_duration", QuantityKind::seconds, true), x.min_kernel_duration_s);
    set_if(r.quantity("eager_kernel_gap", QuantityKind::seconds, false), x.eager_kernel_gap_s);
    // The presets' bound on a launch or runtime cost (kLatency in system_preset.cpp: at most 1 s).
    for (const auto& [key, v] : {std::pair<const char*, double>{"eager_kernel_launch", x.eager_kernel_launch_s},
                                 {"graph_kernel_launch", x.graph_kernel_launch_s},
                                 {"graph_launch", x.graph_launch_s},
                                 {"min_kernel_duration", x.min_kernel_duration_s},
                                 {"eager_kernel_gap", x.eager_kernel_gap_s}})
      if (v > 1.0) l->child(key).error(fmt::format("must be at most 1 s, got {} s", v));
    if (auto f = r.get("fit", true)) {
      MapReader fr(*f);
      set_if(fr.number("eager_rms", true, 0, 1e6), x.eager_rms);
      set_if(fr.number("graph_node_rms", true, 0, 1e6), x.graph_node_rms);
      set_if(fr.number("graph_launch_rms", true, 0, 1e6), x.graph_launch_rms);
      set_if(fr.number("min_kernel_rms", true, 0, 1e6), x.min_kernel_rms);
      if (auto n = fr.number("eager_gap_points", false, 0, 1e6)) x.eager_gap_points = static_cast<int>(*n);
      set_if(fr.quantity("eager_gap_min", QuantityKind::seconds, false), x.eager_gap_min_s);
      set_if(fr.quantity("eager_gap_max", QuantityKind::seconds, false), x.eager_gap_max_s);
      fr.finish();
    }
    r.finish();
    c.launch = x;
  }
  if (auto ct = top.get("contention")) {
    read_rows(*ct, c.contention, [&](MapReader& r, const Node&, ContentionPoint& p) {
      set_if(r.string("background", true), p.background);
      set_if(r.number("gemm_slowdown", true, 0, 1e6), p.gemm_slowdown);
      set_if(r.number("background_slowdown", true, 0, 1e6), p.background_slowdown);
      set_if(r.string("description"), p.description);
    });
  }
  if (auto nc = top.get("nccl")) {
    read_rows(*nc, c.nccl, [&](MapReader& r, const Node& e, NcclFit& f) {
      set_if(r.choice<CollectiveOp>("op", sim::choices_in(kCollectiveOpNames), true), f.op);
      set_if(r.integer("gpus", true, 2, kMaxGpus), f.gpus);
      read_source(r, e, nsources, f.source);
      set_if(r.quantity("latency", QuantityKind::seconds, true), f.latency_s);
      set_if(r.quantity("algbw", QuantityKind::bytes_per_second, true), f.algbw_Bps);
      set_if(r.quantity("busbw", QuantityKind::bytes_per_second, true), f.busbw_Bps);
      read_fit(r, f.points, f.rms_residual, f.max_abs_residual);
      if (!(f.algbw_Bps > 0) && r.has("algbw")) e.child("algbw").error("must be positive");
    });
  }
  if (auto rk = top.get("row_kernels")) {
    MapReader r(*rk);
    RowKernelFit f;
    check_form(r, *rk, kRowKernelForm, "row-kernel");
    set_if(r.quantity("k", QuantityKind::bytes_per_second, true), f.k_Bps_B);  // GB/s at one byte per thread
    if (!(f.k_Bps_B > 0) && r.has("k")) rk->child("k").error("must be positive");
    read_fit(r, f.points, f.rms_residual, f.max_abs_residual);
    if (auto ks = r.get("kernels", true)) read_rows(*ks, f.kernels, [&](MapReader& pr, const Node& e, RowKernelPoint& p) {
      set_if(pr.string("label", true), p.label);
      set_if(pr.quantity("bytes", QuantityKind::bytes, true), p.bytes);
      set_if(pr.quantity("thread_bytes", QuantityKind::bytes, true), p.thread_bytes);
      set_if(pr.boolean("fitted", true), p.fitted);
      read_fit_row(pr, e, nsources, p.measured_s, p.model_s, p.residual, p.source);
    });
    r.finish();
    c.row_kernels = f;
  }
  if (auto lf = top.get("loop_fusions")) {
    MapReader r(*lf);
    LoopFusionFit f;
    check_form(r, *lf, kLoopFusionForm, "loop-fusion");
    set_if(r.quantity("index_rate", QuantityKind::ops_per_second, true), f.index_rate_per_s);
    if (!(f.index_rate_per_s > 0) && r.has("index_rate")) lf->child("index_rate").error("must be positive");
    read_fit(r, f.points, f.rms_residual, f.max_abs_residual);
    if (auto ks = r.get("kernels", true)) read_rows(*ks, f.kernels, [&](MapReader& pr, const Node& e, LoopFusionPoint& p) {
      set_if(pr.string("label", true), p.label);
      set_if(pr.quantity("bytes", QuantityKind::bytes, true), p.bytes);
      set_if(pr.number("indices", true, 1), p.indices);
      set_if(pr.boolean("fitted", true), p.fitted);
      read_fit_row(pr, e, nsources, p.measured_s, p.model_s, p.residual, p.source);
    });
    r.finish();
    c.loop_fusions = f;
  }
  if (auto at = top.get("attention")) {
    MapReader r(*at);
    AttentionFit f;
    check_form(r, *at, kAttentionForm, "attention");
    for (const auto& [name, cv] : {std::pair<const char*, AttentionCurve*>{"forward", &f.forward},
                                   {"forward_causal", &f.forward_causal},
                                   {"backward", &f.backward},
                                   {"backward_causal", &f.backward_causal}})
      if (auto n = r.get(name, true)) {
        MapReader cr(*n);
        set_if(cr.number("e_max", true, 0, 1.5), cv->e_max);
        set_if(cr.number("s0", true, 0, 1e9), cv->s0);
        read_fit(cr, cv->points, cv->rms_residual, cv->max_abs_residual);
        cr.finish();
      }
    if (auto rows = r.get("rows", true)) read_rows(*rows, f.rows, [&](MapReader& pr, const Node& e, AttentionPoint& p) {
      set_if(pr.integer("batch", true, 1, 1000000000), p.batch);
      set_if(pr.integer("heads", true, 1, 1000000), p.heads);
      set_if(pr.integer("seq", true, 1, 1000000000), p.seq);
      set_if(pr.integer("head_dim", true, 1, 100000), p.head_dim);
      set_if(pr.boolean("causal", true), p.causal);
      set_if(pr.choice<bool>("pass", {{"forward", false}, {"backward", true}}, true), p.backward);
      set_if(pr.quantity("flops", QuantityKind::flops, true), p.flops);
      read_fit_row(pr, e, nsources, p.measured_s, p.model_s, p.residual, p.source);
    });
    r.finish();
    c.attention = f;
  }
  if (auto xr = top.get("xla_runtime")) {
    MapReader r(*xr);
    XlaRuntimeFit f;
    check_form(r, *xr, kXlaRuntimeForm, "XLA runtime");
    set_if(r.quantity("program", QuantityKind::seconds, true), f.program_s);
    set_if(r.quantity("command", QuantityKind::seconds, true), f.command_s);
    set_if(r.quantity("rerecord_ref", QuantityKind::seconds, true), f.rerecord_ref_s);
    read_fit(r, f.points, f.rms_residual, f.max_abs_residual);
    if (auto th = r.get("without_command_buffers")) {
      MapReader tr(*th);
      set_if(tr.quantity("program", QuantityKind::seconds, true), f.thunk_program_s);
      set_if(tr.quantity("kernel_launch", QuantityKind::seconds, true), f.thunk_launch_s);
      read_fit(tr, f.thunk_points, f.thunk_rms_residual, f.thunk_max_abs_residual);
      tr.finish();
    }
    if (auto rows = r.get("rows", true)) read_rows(*rows, f.rows, [&](MapReader& pr, const Node& e, DispatchPoint& p) {
      set_if(pr.string("label", true), p.label);
      set_if(pr.boolean("command_buffers"), p.command_buffers);
      set_if(pr.integer("commands", true, 0, 100000000), p.commands);
      set_if(pr.number("rerecorded_refs", true, 0, 1e12), p.rerecorded_refs);
      set_if(pr.quantity("exposed", QuantityKind::seconds, true), p.exposed_s);
      set_if(pr.quantity("model", QuantityKind::seconds, true), p.model_s);
      set_if(pr.number("residual", true, -1e6, 1e6), p.residual);
      read_source(pr, e, nsources, p.source);
    });
    r.finish();
    c.xla_runtime = f;
  }
  if (auto n = top.get("notes")) read_list(*n, [&](const Node& e) {
      if (auto v = e.as_string()) c.notes.push_back(*v);
    });
  top.finish();
  return c;
}

namespace {
// The GPU of the preset a calibration was fitted against. A preset that loads must have the measured device's SM count,
// as `calibrate fit --base` requires (another GPU's preset had silently changed the ceilings the transfer carries). One
// that does not load leaves it empty, and the transfer then keeps the target's cited ceilings (its warning says which
// were used): a user's own preset file, which `calibrate fit --base FILE` names by its `name:`, is read elsewhere; a
// name that is no shipped preset is said wherever the calibration applies (a typo had been silent).
void read_base_preset(Calibration& c, const Node& root) {
  if (c.base_preset.empty()) return;
  const Node where = root.child("device").child("base_preset");
  SystemSpec base;
  input::LoadSession session;  // (not found is not an error of this file: nothing is placed at `where`)
  const std::string preset =
      names_preset_file(c.base_preset) ? input::path_beside(root.file(), c.base_preset) : c.base_preset;
  if (!load_system_preset(preset, nullptr, std::nullopt, session.ctx, base) || session.diag.size() != 0) {
    if (!names_preset_file(c.base_preset)) {
      const auto names = list_system_presets();
      const auto near = sim::nearest(c.base_preset, names, 4);
      c.base_preset_unknown = fmt::format("device.base_preset '{}' is no shipped preset{} (a user's own preset is "
                                          "named so): the transfer keeps the target's cited ceilings",
                                          c.base_preset, near ? fmt::format(" (did you mean '{}'?)", *near) : "");
    }
    return;
  }
  if (c.sm_count > 0 && base.gpu.sm_count != c.sm_count) {
    where.error(fmt::format("the device measured ('{}') has {} SMs, the base preset {} ({}) has {}: base_preset names the "
                            "preset of the GPU measured",
                            c.gpu_model, c.sm_count, c.base_preset, base.gpu.model, base.gpu.sm_count));
    return;
  }
  c.base_gpu = std::move(base.gpu);
}

// Geometric mean of target / base over the shapes one source measured on both GPUs in dtype `d`, and
// how many shapes that was; nullopt without a common source or shape.
struct SustainedRatio {
  double ratio = 0;
  int shapes = 0;
};
std::optional<SustainedRatio> sustained_ratio(const GpuSpec& base_gpu, const GpuSpec& target_gpu, sim::Dtype d) {
  if (base_gpu.sustained_gemm_source.empty() || base_gpu.sustained_gemm_source != target_gpu.sustained_gemm_source)
    return std::nullopt;
  const auto base = base_gpu.sustained_gemm_flops_per_s.find(d);
  const auto target = target_gpu.sustained_gemm_flops_per_s.find(d);
  if (base == base_gpu.sustained_gemm_flops_per_s.end() || target == target_gpu.sustained_gemm_flops_per_s.end())
    return std::nullopt;
  double log_sum = 0;
  int n = 0;
  for (const auto& [shape, rate] : target->second)
    if (const auto b = base->second.find(shape); b != base->second.end() && b->second > 0 && rate > 0) {
      log_sum += std::log(rate / b->second);
      ++n;
    }
  if (n == 0) return std::nullopt;
  return SustainedRatio{std::exp(log_sum / n), n};
}
}  // namespace

std::shared_ptr<const Calibration> load_calibration(const std::string& name, const Node* where_named,
                                                    const std::shared_ptr<input::LoadContext>& ctx) {
  const bool is_path = names_preset_file(name);
  std::string path;
  if (is_path) {
    // (a --set's pseudo file had been taken for the scenario's: an audit's finding)
    path = input::path_beside(where_named ? where_named->file() : "", name);
  } else {
    path = calibrated_dir() + "/" + name + ".yaml";
  }
  // (Each of these is a name or path that is no calibration, whatever else the scenario holds.)
  auto report = [&](const std::string& msg) {
    if (where_named)
      where_named->error(msg, input::DiagnosticKind::unknown_name);
    else
      ctx->diag->error({"<command line>", 0, 0}, "", msg, input::DiagnosticKind::unknown_name);
  };
  if (name.empty()) {
    report("expected the name of a calibration (hardware_models/calibrated/NAME.yaml) or a path");
    return nullptr;
  }
  std::error_code ec;  // a name the file system refuses (too long, ...) is simply not a calibration
  if (!fs::is_regular_file(path, ec)) {
    if (is_path) {
      report(input::why_not_a_file(path, "calibration").value_or(""));
    } else {
      const auto names = list_calibrations();
      std::string msg = fmt::format("unknown calibration '{}'", name);
      if (auto near = sim::nearest(name, names, std::max<std::size_t>(3, name.size() / 2)))
        msg += fmt::format("; did you mean '{}'?", *near);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      msg += fmt::format(" (available in hardware_models/calibrated: {})", list.empty() ? "none" : list);
      report(msg);
    }
    return nullptr;
  }
  // A calibration loaded before without errors (and unchanged since) is shared as it is.
  static input::FileCache<std::shared_ptr<const Calibration>> loaded;
  if (auto c = loaded.get(path)) return *c;
  // Grafts (--set) belong to the scenario document, not to this one.
  auto parked = std::move(ctx->grafts);
  ctx->grafts.clear();
  const std::size_t errors_before = ctx->diag->size();
  std::shared_ptr<Calibration> c;
  if (auto root = input::load_yaml_file(path, ctx)) {
    c = std::make_shared<Calibration>(parse_calibration(*root));
    c->name = fs::path(path).stem().string();
    c->file = display_path(path);
    c->absolute_path = fs::absolute(path).lexically_normal().generic_string();
    if (ctx->diag->size() == errors_before) read_base_preset(*c, *root);
  }
  ctx->grafts = std::move(parked);
  if (ctx->diag->size() != errors_before) input::forget_parsed_yaml(path);
  if (!c || ctx->diag->size() != errors_before) return nullptr;
  loaded.put(path, c);
  return c;
}

std::shared_ptr<const Calibration> load_calibration_file(const std::string& path) {
  input::Diagnostics diag;
  auto ctx = std::make_shared<input::LoadContext>();
  ctx->diag = &diag;
  auto c = load_calibration(path, nullptr, ctx);
  diag.throw_if_any();
  return c;
}

// ---------------------------------------------------------------- applying

std::string applied_calibration_name(const SystemSpec& spec) { return spec.calibration ? spec.calibration->name : "none"; }

void apply_calibration(SystemSpec& spec, const Calibration& cal) {
  auto c = std::make_shared<Calibration>(cal);
  c->warnings.clear();
  if (!cal.base_preset_unknown.empty())
    c->warnings.push_back(fmt::format("calibration {}: {}", cal.file.empty() ? cal.name : cal.file, cal.base_preset_unknown));
  c->applied_to = spec.name;
  c->same_device = !cal.gpu_model.empty() && spec.gpu.model == cal.gpu_model;
  const bool same_arch = spec.gpu.architecture == cal.architecture;
  const bool same_host = same_arch && spec.host.link == cal.host_link;
  const std::string tag = fmt::format("calibrated: {}", cal.file.empty() ? cal.name : cal.file);
  auto overridden = [&](const std::string& field) {
    auto it = spec.sources.find(field);
    return it != spec.sources.end() && it->second.rfind("scenario override", 0) == 0;
  };
  // A calibrated figure replaces the preset's unless the scenario set the field itself.
  auto set_unless_overridden = [&](const std::string& f, double v, double& field,
                                   const std::function<std::string(const std::string&)>& why) {
    if (overridden(f)) return;
    field = v;
    spec.sources[f] = why(f);
  };

  // GEMM: the shape model always applies (compute_model reads spec.calibration). The ceiling is the
  // measured one on the device measured. On another GPU of the same architecture it is the measured
  // ceiling scaled by the two presets' cited ceilings (target / device measured): the fitted e_max
  // (the asymptote of the curve over realistic shapes, at the card's power state) and a cited MAMF
  // (the best shape of a search) are different statistics, and the ratio keeps same-die parts equal
  // (H100 and H200: the same cited MAMF, so the same ceiling) instead of giving the unmeasured part
  // the higher statistic. Across architectures it is the measured ceiling scaled by one source's
  // sustained rates on both GPUs where both presets list them, else the target's cited ceiling.
  std::vector<std::string> gemm_parts, ceilings, unmeasured;
  std::map<sim::Dtype, double> sustained_moved;  // new ceiling / cited, per dtype carried by sustained rates
  bool mxfp8_moved = false;                      // mxfp8 (not measured) moved with fp8's sustained-rate ceiling
  bool bf16_moved = false;                       // bf16's cited ceiling moved with fp8's (no sustained rates of its own)
  for (const auto& [d, g] : cal.gemm) {
    if (!spec.gpu.peak_dense_flops_per_s.count(d)) continue;
    const std::string field = "gpu.matmul_efficiency." + to_string(d);
    gemm_parts.push_back(fmt::format("{} {} shapes, rms {:.1f}%, max {:.1f}%", to_string(d), g.points_fitted,
                                     100 * g.rms_residual, 100 * g.max_abs_residual));
    const auto base_cited = cal.base_gpu.matmul_efficiency.find(d);
    const auto target_cited = spec.gpu.matmul_efficiency.find(d);
    const bool scaled = !c->same_device && same_arch && base_cited != cal.base_gpu.matmul_efficiency.end() &&
                        base_cited->second > 0 && target_cited != spec.gpu.matmul_efficiency.end();
    if (c->same_device && !overridden(field)) {
      spec.gpu.matmul_efficiency[d] = g.e_max;
      spec.sources[field] = fmt::format("{} gemm.{}.e_max, the large-shape ceiling of a fit to {} measured shapes", tag,
                                        to_string(d), g.points_fitted);
      c->applied_gemm_ceiling = true;
    } else if (scaled && !overridden(field)) {
      const double cited = target_cited->second;
      spec.gpu.matmul_efficiency[d] = g.e_max * cited / base_cited->second;
      spec.sources[field] = fmt::format(
          "{} gemm.{}.e_max {} x this preset's cited {} / {}'s cited {} (same architecture: the measured ceiling "
          "scaled by the cited ones)",
          tag, to_string(d), num(g.e_max, 3), num(cited, 3), cal.base_preset, num(base_cited->second, 3));
      c->applied_gemm_ceiling = true;
      ceilings.push_back(fmt::format("{} {} = measured {} x {}/{}", to_string(d), num(spec.gpu.matmul_efficiency[d], 3),
                                     num(g.e_max, 3), num(cited, 3), num(base_cited->second, 3)));
    } else if (const auto sr = !c->same_device && !same_arch ? sustained_ratio(cal.base_gpu, spec.gpu, d) : std::nullopt;
               sr && !overridden(field) && cal.base_gpu.peak_dense_flops_per_s.count(d) && spec.gpu.peak_dense_flops_per_s.count(d)) {
      // Another architecture: the measured ceiling times the ratio of one source's sustained GEMM rates on
      // the two GPUs (same shapes, same method, each card at its power limit), per unit of dense peak. A
      // cited MAMF is a burst figure (a short search at boost clock) and Blackwell loses more to its power
      // limit than Hopper, so the MAMF ratio would carry the H200's power state to a card that cannot hold
      // it (docs/decisions.md, "GEMM ceiling across architectures").
      const double before = target_cited != spec.gpu.matmul_efficiency.end() ? target_cited->second : 0;
      const double base_peak = cal.base_gpu.peak_dense_flops_per_s.at(d), target_peak = spec.gpu.peak_dense_flops_per_s.at(d);
      const double unclamped = g.e_max * sr->ratio * base_peak / target_peak;
      const double e = std::clamp(unclamped, 0.01, 1.0);
      if (e != unclamped)  // the two GPUs' rates and the measured ceiling disagree: say so
        c->warnings.push_back(fmt::format(
            "{}: the sustained-rate transfer gives {} a {} ceiling of {} of its peak, held at {}; check "
            "gpu.sustained_gemm on both presets",
            cal.name, spec.name, to_string(d), num(unclamped, 3), num(e, 3)));
      spec.gpu.matmul_efficiency[d] = e;
      spec.sources[field] = fmt::format(
          "{} gemm.{}.e_max {} x {}'s / {}'s sustained {} GEMM rate {} (geometric mean of {} shapes, {}; "
          "gpu.sustained_gemm) x dense peak {} / {} (another architecture)",
          tag, to_string(d), num(g.e_max, 3), spec.name, cal.base_preset, to_string(d), num(sr->ratio, 3), sr->shapes,
          spec.gpu.sustained_gemm_source, sim::format_quantity(base_peak, QuantityKind::flops_per_second),
          sim::format_quantity(target_peak, QuantityKind::flops_per_second));
      c->applied_gemm_ceiling = true;
      ceilings.push_back(fmt::format("{} {} = measured {} x sustained ratio {} x peak {}/{}", to_string(d), num(e, 3),
                                     num(g.e_max, 3), num(sr->ratio, 3), num(base_peak / 1e12, 4),
                                     num(target_peak / 1e12, 4)));
      if (before > 0) sustained_moved[d] = e / before;
    } else if (!c->same_device) {
      // Say why this ceiling did not move: a scenario override, or the preset's cited figure because the
      // rule for this pair of GPUs had nothing to scale it by.
      const std::string why =
          overridden(field) ? "system.overrides"
          : same_arch       ? "cited: no cited ceilings on both presets to scale by"
                            : fmt::format("cited: no gpu.sustained_gemm {} rates of one source at common shapes on both {} and {}",
                                          to_string(d), cal.base_preset.empty() ? "the base preset" : cal.base_preset,
                                          spec.name);
      ceilings.push_back(fmt::format("{} {} ({})", to_string(d),
                                     target_cited != spec.gpu.matmul_efficiency.end() ? num(target_cited->second, 3) : "n/a",
                                     why));
    }
  }
  // A ceiling no source measured on both GPUs moves by FP8's sustained-rate factor, for the reason `why` gives (its
  // source says it): the entry the loop above wrote for it, that it was kept, gives way to the moved one.
  const auto fp8_move = sustained_moved.find(sim::Dtype::fp8);
  const auto move_with_fp8 = [&](sim::Dtype d, const char* why) {
    const std::string field = "gpu.matmul_efficiency." + to_string(d);
    const auto e = spec.gpu.matmul_efficiency.find(d);
    if (fp8_move == sustained_moved.end() || overridden(field) || e == spec.gpu.matmul_efficiency.end()) return false;
    const double before = e->second;
    e->second = std::clamp(before * fp8_move->second, 0.01, 1.0);
    spec.sources[field] = fmt::format("{} the preset's {} x {} (the fp8 ceiling's move under the sustained-rate transfer: {})",
                                      tag, num(before, 3), num(fp8_move->second, 3), why);
    const std::string kept_entry = fmt::format("{} {} (", to_string(d), num(before, 3));
    std::erase_if(ceilings, [&](const std::string& entry) { return entry.rfind(kept_entry, 0) == 0; });
    ceilings.push_back(
        fmt::format("{} {} = cited {} x fp8's {}", to_string(d), num(e->second, 3), num(before, 3), num(fp8_move->second, 3)));
    return true;
  };
  // Block-scaled MXFP8 runs on FP8's tensor-core datapath and takes FP8's measured curve (compute_model.cpp), so its
  // ceiling moves with FP8's. NVFP4 keeps its own figure: its datapath differs and no source measured it on both GPUs.
  mxfp8_moved = !cal.gemm.count(sim::Dtype::mxfp8) && move_with_fp8(sim::Dtype::mxfp8, "MXFP8 runs on the fp8 datapath");
  // BF16 with no source that measured it on both GPUs kept the target's cited ceiling: a burst MAMF (a short search at
  // boost clock), where FP8's moved to the card's sustained state. One card keeps its BF16:FP8 rate ratio at its MAMF
  // ratio (Transformer Engine's GEMM profiling guide, NVIDIA/TransformerEngine@d0067d0, B300, a short run: BF16 and
  // per-tensor FP8 GEMMs at the same shapes at 0.83 and 0.84 of their MAMF), so BF16's cited ceiling moves by FP8's
  // factor. Before 2026-12-07 it stayed: Blackwell's BF16 GEMMs ran 18% faster than that measurement at its shapes.
  bf16_moved = cal.gemm.count(sim::Dtype::bf16) && !sustained_moved.count(sim::Dtype::bf16) &&
               move_with_fp8(sim::Dtype::bf16, "one card keeps its BF16:FP8 rate ratio at its MAMF ratio (Transformer Engine's B300 GEMMs)");
  for (const auto& [d, peak] : spec.gpu.peak_dense_flops_per_s)
    if ((d == sim::Dtype::bf16 || d == sim::Dtype::fp8 || d == sim::Dtype::mxfp8 || d == sim::Dtype::nvfp4) && !cal.gemm.count(d))
      unmeasured.push_back(to_string(d));

  std::vector<std::string> applied, kept;
  bool row_kernels_kept = false, loop_fusions_kept = false, xla_runtime_kept = false, attention_kept = false;
  double attention_ratio = 0;  // measured causal forward attention / measured GEMM ceiling, when carried across
  if (cal.hbm && cal.hbm_efficiency > 0) {
    if (same_arch && !overridden("gpu.hbm_efficiency")) {
      spec.gpu.hbm_efficiency = cal.hbm_efficiency;
      spec.sources["gpu.hbm_efficiency"] =
          fmt::format("{} hbm: copy kernel {} / datasheet", tag, gbps(cal.hbm->bandwidth_Bps));
      c->applied_hbm = true;
      applied.push_back("HBM");
    } else if (!same_arch) {
      kept.push_back("HBM");
    }
  }
  if (cal.attention && cal.attention->forward_causal.e_max > 0) {
    // Flash kernels are written per architecture (wgmma on Hopper, tcgen05 on Blackwell). On the same
    // architecture the measured efficiency applies as measured. Across architectures the measured curve
    // carries as a ratio to the GEMM ceiling measured on the same card (both at its power state), times
    // this preset's GEMM ceiling: the rule the GEMM shape curve follows. Without it the kernel ran at the
    // GEMM ceiling, which on Blackwell is above what cuDNN reaches (FlashAttention-4, arXiv 2603.05451:
    // 1,613 TFLOP/s at best on B200 BF16, up to 1.3x cuDNN 9.13's).
    const GemmModel* measured_gemm = cal.gemm_for(sim::Dtype::bf16);
    if (same_arch) {
      c->applied_attention = true;
      applied.push_back("fused attention");
    } else if (const auto target = spec.gpu.matmul_efficiency.find(sim::Dtype::bf16);
               measured_gemm && measured_gemm->e_max > 0 && target != spec.gpu.matmul_efficiency.end()) {
      const double to_target = target->second / measured_gemm->e_max;
      for (bool backward : {false, true})
        for (bool causal : {false, true}) c->attention->curve(backward, causal).e_max *= to_target;
      c->applied_attention = true;
      attention_ratio = cal.attention->forward_causal.e_max / measured_gemm->e_max;
    } else {
      attention_kept = true;
    }
  }
  if (cal.row_kernels && cal.row_kernels->k_Bps_B > 0) {
    // Register file and memory system: the architecture's. Elsewhere row kernels stream at the HBM rate.
    if (same_arch) {
      c->applied_row_kernels = true;
      applied.push_back("row-kernel occupancy");
    } else {
      row_kernels_kept = true;
    }
  }
  if (cal.loop_fusions && cal.loop_fusions->index_rate_per_s > 0) {
    // The SMs issue the indices: the architecture's and its SM count's (the Hopper SXM parts, H100, H800 and H200,
    // share 132 SMs and the clock; a part with another count keeps the HBM rate, with the warning below).
    if (same_arch && (cal.sm_count <= 0 || spec.gpu.sm_count <= 0 || cal.sm_count == spec.gpu.sm_count)) {
      c->applied_loop_fusions = true;
      applied.push_back("loop-fusion index rate");
    } else {
      loop_fusions_kept = true;
    }
  }
  if (cal.copy_efficiency > 0 && cal.both_directions_fraction > 0) {
    if (same_host) {
      if (!overridden("host.copy_efficiency")) {
        spec.host.copy_efficiency = cal.copy_efficiency;
        spec.sources["host.copy_efficiency"] = fmt::format("{} host: mean of pinned H2D and D2H bandwidth / datasheet", tag);
      }
      if (!overridden("host.link_bandwidth_both_directions") && spec.host.copy_efficiency > 0) {
        // The engine caps both directions together at this field times copy_efficiency, so the
        // field holds the measured total (as a fraction of the datasheet) over copy_efficiency.
        spec.host.link_bandwidth_both_directions_Bps =
            cal.both_directions_fraction * spec.host.link_bandwidth_both_directions_Bps / spec.host.copy_efficiency;
        spec.sources["host.link_bandwidth_both_directions"] =
            fmt::format("{} host.both_directions: measured total {:.4f} of the datasheet, divided by copy_efficiency "
                        "(the engine multiplies this cap by it)",
                        tag, cal.both_directions_fraction);
      }
      c->applied_host = true;
      applied.push_back("host link");
    } else {
      kept.push_back("host link");
    }
  }
  if (cal.launch) {
    if (same_host) {
      const auto& l = *cal.launch;
      const auto why = [&](const std::string& f) { return fmt::format("{} {} (fitted over kernel counts)", tag, f); };
      set_unless_overridden("launch.eager_kernel_launch", l.eager_kernel_launch_s, spec.launch.eager_kernel_launch_s, why);
      set_unless_overridden("launch.graph_kernel_launch", l.graph_kernel_launch_s, spec.launch.graph_kernel_launch_s, why);
      set_unless_overridden("launch.graph_launch", l.graph_launch_s, spec.launch.graph_launch_s, why);
      if (l.eager_kernel_gap_s > 0)
        set_unless_overridden("launch.eager_kernel_gap", l.eager_kernel_gap_s, spec.launch.eager_kernel_gap_s,
                              [&](const std::string& f) { return fmt::format("{} {} (measured, host out of the way)", tag, f); });
      c->applied_launch = true;
      applied.push_back("launch");
    } else {
      kept.push_back("launch");
    }
  }
  if (cal.xla_runtime) {
    // Host CPU work of XLA's runtime: the same rule as the launch costs (host CPU class, driver).
    if (same_host) {
      const auto& x = *cal.xla_runtime;
      const auto why = [&](const std::string&) { return fmt::format("{} xla_runtime (unrolled XLA programs, exposed host time)", tag); };
      set_unless_overridden("launch.xla_program", x.program_s, spec.launch.xla_program_s, why);
      set_unless_overridden("launch.xla_command", x.command_s, spec.launch.xla_command_s, why);
      set_unless_overridden("launch.xla_rerecord_ref", x.rerecord_ref_s, spec.launch.xla_rerecord_ref_s, why);
      if (x.thunk_points > 0) {  // measured without command buffers too
        set_unless_overridden("launch.xla_thunk_launch", x.thunk_launch_s, spec.launch.xla_thunk_launch_s, why);
        set_unless_overridden("launch.xla_thunk_program", x.thunk_program_s, spec.launch.xla_thunk_program_s, why);
      }
      applied.push_back("XLA runtime");
    } else {
      xla_runtime_kept = true;
    }
  }

  // Measured collectives stand for the device as measured: a scenario that changes its NVLink keeps
  // the model (a what-if must be able to move them).
  c->applied_nccl = c->same_device && !cal.nccl.empty();
  for (const auto& [field, source] : spec.sources)
    if (field.rfind("scale_up.", 0) == 0 && overridden(field)) c->applied_nccl = false;

  // The first source that has a date (an nccl-tests log has none; sorted first it had left "measured )").
  std::string date = "?";
  for (const auto& src : cal.sources)
    if (!src.date.empty()) {
      date = src.date.substr(0, 10);
      break;
    }
  std::string head = fmt::format("calibration {} ({}, measured {})", cal.name, cal.device_name, date);
  if (!gemm_parts.empty()) {
    std::string parts;
    for (const auto& p : gemm_parts) parts += (parts.empty() ? "" : "; ") + p;
    double spread = 0;
    for (const auto& [d, g] : cal.gemm) spread = std::max(spread, g.repeat_spread);
    c->warnings.push_back(fmt::format(
        "{}: GEMM time from a shape model fitted to measured shapes ({}); one shape measured more than once "
        "differed by up to {:.0f}% (the card's power state), so GEMM-bound predictions carry about that uncertainty",
        head, parts, 100 * spread));
  }
  if (!c->same_device) {
    std::string ceil_list, kept_list, applied_list;
    for (const auto& s : ceilings) ceil_list += (ceil_list.empty() ? "" : ", ") + s;
    for (const auto& s : kept) kept_list += (kept_list.empty() ? "" : ", ") + s;
    for (const auto& s : applied) applied_list += (applied_list.empty() ? "" : ", ") + s;
    c->warnings.push_back(fmt::format(
        "{} transferred from {} ({}, {}) to {} ({}, {}, {}): the GEMM shape curve applies as a ratio to its "
        "ceiling, with the ceilings {} (on the same architecture the measured ones scaled by the cited ones; on "
        "another, where one source measured both GPUs the same way, the measured ones scaled by its sustained "
        "rates; otherwise the preset's own cited ones) and datasheet peaks{}{}; the shape curve's "
        "differences between these GPUs (tile shapes, pipelines) are not measured",
        cal.name, cal.device_name, to_string(cal.architecture), to_string(cal.host_link), spec.name, spec.gpu.model,
        to_string(spec.gpu.architecture), to_string(spec.host.link), ceil_list.empty() ? "none" : ceil_list,
        applied_list.empty() ? "" : "; measured " + applied_list + " fractions carried over (same architecture and host link)",
        kept_list.empty() ? "" : "; the preset's own " + kept_list + " figures kept (different architecture or host link)"));
  }
  if (!unmeasured.empty()) {
    std::string list;
    for (const auto& s : unmeasured) list += (list.empty() ? "" : ", ") + s;
    const bool fp8_curve = cal.gemm_for(sim::Dtype::fp8) != nullptr;
    c->warnings.push_back(fmt::format(
        "calibration {} has no {} GEMM measurements: those use the preset's matmul_efficiency as their ceiling{}{}",
        cal.name, list, mxfp8_moved ? " (mxfp8's moved with fp8's, above)" : "",
        fp8_curve ? ", and the block-scaled ones (mxfp8, nvfp4) the fp8 shape curve under it, its per-tile overhead "
                    "scaled by their tensor-core rate over fp8's (the same datapath)"
                  : " at every shape"));
  }
  if (attention_ratio > 0)
    c->warnings.push_back(fmt::format(
        "{}: its fused-attention efficiency was measured on {}: on {} flash attention runs at the measured ratio to "
        "the GEMM ceiling ({:.2f} for the causal forward) times this preset's bf16 ceiling; the kernels differ by "
        "architecture and that ratio is not measured here",
        cal.name, to_string(cal.architecture), to_string(spec.gpu.architecture), attention_ratio));
  if (attention_kept)
    c->warnings.push_back(fmt::format(
        "{}: its fused-attention efficiency was measured on {} and is not applied to {}: flash attention there runs "
        "at the GEMM efficiency, which is optimistic (on the H200, cuDNN's flash kernels reached 55-80% of it)",
        cal.name, to_string(cal.architecture), to_string(spec.gpu.architecture)));
  if (xla_runtime_kept)
    c->warnings.push_back(fmt::format(
        "{}: its XLA runtime host costs were measured on a {} host and are not carried to {} ({}): HLO replays "
        "here use the preset's XLA runtime figures{}",
        cal.name, to_string(cal.host_link), spec.name, to_string(spec.host.link),
        spec.launch.xla_command_s > 0 ? " (see their sources)" : ", none: XLA's per-step host work is left out"));
  if (loop_fusions_kept)
    c->warnings.push_back(fmt::format(
        "{}: its loop-fusion index rate (XLA's element-wise and fill kernels) was measured on {} with {} SMs and is "
        "not applied to {} ({}, {} SMs): those kernels stream at the HBM rate here, which is optimistic for kernels "
        "of 1-4 bytes per index",
        cal.name, to_string(cal.architecture), cal.sm_count, spec.name, to_string(spec.gpu.architecture),
        spec.gpu.sm_count));
  if (row_kernels_kept)
    c->warnings.push_back(fmt::format(
        "{}: its row-kernel occupancy bound (XLA Triton fusions) was measured on {} and is not applied to {}: "
        "those kernels stream at the HBM rate here, which is optimistic for register-heavy softmax fusions",
        cal.name, to_string(cal.architecture), to_string(spec.gpu.architecture)));

  {
    std::string applied_list, kept_list;
    for (const auto& a : applied) applied_list += (applied_list.empty() ? "" : ", ") + a;
    for (const auto& k : kept) kept_list += (kept_list.empty() ? "" : ", ") + k;
    std::string sustained_list;
    for (const auto& [d, f] : sustained_moved) sustained_list += (sustained_list.empty() ? "" : ", ") + to_string(d);
    if (mxfp8_moved) sustained_list += ", mxfp8";
    c->transfer = fmt::format(
        "{}; GEMM shape model{}{}{}{}",
        c->same_device ? "same device, measured figures used as measured"
                       : fmt::format("transfer rule: {} ({}) to {} ({}, {}), shape curve as a ratio to the "
                                     "preset's ceilings",
                                     cal.device_name, to_string(cal.architecture), spec.gpu.model,
                                     to_string(spec.gpu.architecture), to_string(spec.host.link)),
        c->applied_gemm_ceiling
            ? (c->same_device ? " with the measured ceiling"
                              : same_arch ? " with the measured ceiling scaled by the presets' cited ceilings"
                                          : fmt::format(" with the measured {} ceiling scaled by both GPUs' sustained GEMM "
                                                        "rates{}",
                                                        sustained_list,
                                                        bf16_moved ? " and the cited bf16 ceiling moved with fp8's" : ""))
            : "",
        applied_list.empty() ? "" : "; measured " + applied_list, kept_list.empty() ? "" : "; preset kept for " + kept_list,
        c->applied_nccl ? "; measured NCCL collectives" : "");
    spdlog::info("calibration {} ({}) applied to {}: {}", cal.name,
                 cal.file.empty() ? calibrated_dir() + "/" + cal.name + ".yaml" : cal.file, spec.name, c->transfer);
  }
  spec.calibration = std::move(c);
}

namespace {

// device.base_preset of a calibration file read from its top-level `device:` block alone, as
// `racksim calibrate fit` writes it; nullopt when that block cannot be read this way (the full load
// then decides). Parsing the whole file costs about 250 M instructions (yaml-cpp), and a scenario of
// another preset (every H100 or GB200 one) needs no more than this one line of it.
std::optional<std::string> read_base_preset(const std::string& text) {
  std::size_t start = text.rfind("device:", 0) == 0 ? 0 : text.find("\ndevice:");
  if (start == std::string::npos) return std::nullopt;
  if (start > 0) ++start;
  if (text.find("\ndevice:", start) != std::string::npos) return std::nullopt;  // twice: the full load reports it
  // The block runs until the next line that starts in column 0 with something other than a comment.
  std::size_t end = text.find('\n', start);
  while (end != std::string::npos && end + 1 < text.size() &&
         (text[end + 1] == ' ' || text[end + 1] == '\n' || text[end + 1] == '#'))
    end = text.find('\n', end + 1);
  try {
    const YAML::Node block = YAML::Load(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    const YAML::Node base = block["device"]["base_preset"];
    if (base.IsScalar()) return base.Scalar();
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Asked for every calibration file at every load of a scenario that names none (each point of a sweep):
// the answer is kept per file while it is unchanged (input/file_cache.h).
std::optional<std::string> written_base_preset(const std::string& path) {
  static input::FileCache<std::optional<std::string>> seen;
  if (auto known = seen.get(path)) return *known;
  std::string text;
  try {
    text = input::read_file_bounded(path, input::limits::kMaxYamlFileBytes, "a YAML file", input::Binary::stop);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  auto base = read_base_preset(text);
  seen.put(path, base);
  return base;
}

}  // namespace

std::optional<std::string> default_calibration_for(const std::string& preset,
                                                   const std::shared_ptr<input::LoadContext>& ctx) {
  if (preset.empty()) return std::nullopt;
  for (const auto& name : list_calibrations()) {
    // One fitted against another preset is not loaded (nor, then, checked).
    if (const auto written = written_base_preset(calibrated_dir() + "/" + name + ".yaml"); written && *written != preset)
      continue;
    auto cal = load_calibration(name, nullptr, ctx);
    if (cal && cal->base_preset == preset) return name;
  }
  return std::nullopt;
}

bool load_and_apply_calibration(const std::string& name, const Node& where_named,
                                const std::shared_ptr<input::LoadContext>& ctx, SystemSpec& spec) {
  auto cal = load_calibration(name, &where_named, ctx);
  if (!cal) return false;
  apply_calibration(spec, *cal);
  return true;
}

// ---------------------------------------------------------------- writing

// One profiled kernel of a kernel-model section (row kernels, loop fusions): label, bytes, the section's own measure
// (`measure`, already formatted), then the fit's columns.
template <class Point>
std::string kernel_fit_row(const Point& p, const std::string& measure) {
  return fmt::format("    - {{label: {}, bytes: {} MB, {}, measured: {}, model: {}, residual: {}, fitted: {}, source: {}}}",
                     quote(p.label), num(p.bytes / 1e6), measure, us(p.measured_s), us(p.model_s), signed4(p.residual),
                     p.fitted ? "true" : "false", p.source);
}

std::string write_calibration_yaml(const Calibration& c) {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("# racksim calibrated parameters (docs/calibration.md). Written by `racksim calibrate fit`; re-fit");
  line("# rather than edit: tests/unit/test_calibration.cpp checks that a re-fit reproduces this file.");
  line(fmt::format("format: {}", kFormat));
  line(fmt::format("fitted_by: {}", quote(c.fitted_by)));
  line("device:");
  line(fmt::format("  name: {}", quote(c.device_name)));
  line(fmt::format("  base_preset: {}", c.base_preset));
  line(fmt::format("  gpu_model: {}", quote(c.gpu_model)));
  line(fmt::format("  architecture: {}", to_string(c.architecture)));
  line(fmt::format("  host_link: {}", to_string(c.host_link)));
  line(fmt::format("  sm_count: {}", c.sm_count));
  if (!c.driver.empty()) line(fmt::format("  driver: {}", quote(c.driver)));
  line("sources:");
  for (const auto& s : c.sources) {
    std::string used;
    for (const auto& u : s.used) used += (used.empty() ? "" : ", ") + u;
    line(fmt::format("  - {{path: {}, date: {}, schema: {}, used: [{}]}}", quote(s.path), quote(s.date), quote(s.schema), used));
  }
  if (!c.gemm.empty()) {
    line("gemm:");
    line(fmt::format("  form: {}", quote(kGemmForm)));
    for (const auto& [d, m] : c.gemm) {
      line(fmt::format("  {}:", to_string(d)));
      line(fmt::format("    peak_dense: {}", tflops(m.peak_flops_per_s)));
      line(fmt::format("    e_max: {}", num(m.e_max)));
      line(fmt::format("    k0: {}", num(m.k0)));
      line(fmt::format("    t0: {}", us(m.t0_s)));
      line(fmt::format("    fit: {{points: {}, hbm_bound: {}, rms: {}, max_abs: {}, rms_all: {}, max_abs_all: {}, "
                       "repeat_spread: {}}}",
                       m.points_fitted, m.points_hbm_bound, fixed4(m.rms_residual), fixed4(m.max_abs_residual),
                       fixed4(m.rms_residual_all), fixed4(m.max_abs_residual_all), fixed4(m.repeat_spread)));
      line("    shapes:");
      for (const auto& p : m.shapes)
        line(fmt::format("      - {{m: {}, n: {}, k: {}, batch: {}, layout: {}, out: {}, measured: {}, efficiency: {}, "
                         "model: {}, residual: {}, hbm_bound: {}, source: {}, label: {}}}",
                         num(p.m, 12), num(p.n, 12), num(p.k, 12), p.batch, p.layout, p.out, us(p.measured_s),
                         fixed4(p.efficiency), us(p.model_s), signed4(p.residual), p.hbm_bound ? "true" : "false",
                         p.source, quote(p.label)));
    }
  }
  auto fit_map = [](int points, double rms, double max_abs) {
    return fmt::format("{{points: {}, rms: {}, max_abs: {}}}", points, fixed4(rms), fixed4(max_abs));
  };
  if (c.hbm) {
    line("hbm:                     # read+write bytes of a streaming copy kernel, back-to-back");
    line(fmt::format("  bandwidth: {}", gbps(c.hbm->bandwidth_Bps)));
    line(fmt::format("  latency: {}", us(c.hbm->latency_s)));
    line(fmt::format("  efficiency: {}", num(c.hbm_efficiency)));
    line(fmt::format("  fit: {}", fit_map(c.hbm->points, c.hbm->rms_residual, c.hbm->max_abs_residual)));
  }
  if (c.host_h2d && c.host_d2h && c.host_both) {
    line("host:                    # pinned host memory; both_directions = total of the two at once");
    auto bw = [&](const char* name, const BandwidthFit& b) {
      line(fmt::format("  {}: {{bandwidth: {}, latency: {}, fit: {}}}", name, gbps(b.bandwidth_Bps), us(b.latency_s),
                       fit_map(b.points, b.rms_residual, b.max_abs_residual)));
    };
    bw("h2d", *c.host_h2d);
    bw("d2h", *c.host_d2h);
    bw("both_directions", *c.host_both);
    line(fmt::format("  copy_efficiency: {}", num(c.copy_efficiency)));
    line(fmt::format("  both_directions_fraction: {}", num(c.both_directions_fraction)));
  }
  if (c.launch) {
    const auto& l = *c.launch;
    line("launch:");
    line(fmt::format("  eager_kernel_launch: {}", us(l.eager_kernel_launch_s)));
    line(fmt::format("  graph_kernel_launch: {}", us(l.graph_kernel_launch_s)));
    line(fmt::format("  graph_launch: {}", us(l.graph_launch_s)));
    line(fmt::format("  min_kernel_duration: {}", us(l.min_kernel_duration_s)));
    if (l.eager_kernel_gap_s > 0) line(fmt::format("  eager_kernel_gap: {}", us(l.eager_kernel_gap_s)));
    const std::string gap_fit = l.eager_gap_points > 0 ? fmt::format(", eager_gap_points: {}, eager_gap_min: {}, eager_gap_max: {}",
                                                                      l.eager_gap_points, us(l.eager_gap_min_s),
                                                                      us(l.eager_gap_max_s))
                                                          : std::string();
    line(fmt::format("  fit: {{eager_rms: {}, graph_node_rms: {}, graph_launch_rms: {}, min_kernel_rms: {}{}}}",
                     fixed4(l.eager_rms), fixed4(l.graph_node_rms), fixed4(l.graph_launch_rms), fixed4(l.min_kernel_rms),
                     gap_fit));
  }
  if (c.row_kernels) {
    const auto& f = *c.row_kernels;
    line("row_kernels:             # XLA Triton block-level fusions; k = achieved bandwidth x operand bytes per thread");
    line(fmt::format("  form: {}", quote(kRowKernelForm)));
    line(fmt::format("  k: {}", gbps(f.k_Bps_B)));
    line(fmt::format("  fit: {}", fit_map(f.points, f.rms_residual, f.max_abs_residual)));
    line("  kernels:");
    for (const auto& p : f.kernels) line(kernel_fit_row(p, fmt::format("thread_bytes: {} B", num(p.thread_bytes))));
  }
  if (c.loop_fusions) {
    const auto& f = *c.loop_fusions;
    line("loop_fusions:            # XLA loop-emitter kernels (element-wise, fills): one thread per output index");
    line(fmt::format("  form: {}", quote(kLoopFusionForm)));
    line(fmt::format("  index_rate: {} Gop/s", num(f.index_rate_per_s / 1e9)));
    line(fmt::format("  fit: {}", fit_map(f.points, f.rms_residual, f.max_abs_residual)));
    line("  kernels:");
    for (const auto& p : f.kernels) line(kernel_fit_row(p, fmt::format("indices: {}", num(p.indices))));
  }
  if (c.attention) {
    const auto& f = *c.attention;
    line("attention:               # fused (flash) attention kernels; P = the bf16 dense peak, S = the key length");
    line(fmt::format("  form: {}", quote(kAttentionForm)));
    for (const auto& [name, cv] : {std::pair<const char*, const AttentionCurve*>{"forward", &f.forward},
                                   {"forward_causal", &f.forward_causal},
                                   {"backward", &f.backward},
                                   {"backward_causal", &f.backward_causal}})
      line(fmt::format("  {}: {{e_max: {}, s0: {}, fit: {}}}", name, num(cv->e_max), num(cv->s0),
                       fit_map(cv->points, cv->rms_residual, cv->max_abs_residual)));
    line("  rows:");
    for (const auto& p : f.rows)
      line(fmt::format("    - {{batch: {}, heads: {}, seq: {}, head_dim: {}, causal: {}, pass: {}, flops: {} GFLOP, measured: {}, "
                       "model: {}, residual: {}, source: {}}}",
                       p.batch, p.heads, p.seq, p.head_dim, p.causal ? "true" : "false", p.backward ? "backward" : "forward",
                       num(p.flops / 1e9), us(p.measured_s), us(p.model_s), signed4(p.residual), p.source));
  }
  if (c.xla_runtime) {
    const auto& f = *c.xla_runtime;
    line("xla_runtime:             # XLA's host work per step (HLO replay): per program, per command, per re-recorded buffer reference");
    line(fmt::format("  form: {}", quote(kXlaRuntimeForm)));
    line(fmt::format("  program: {}", us(f.program_s)));
    line(fmt::format("  command: {}", us(f.command_s)));
    line(fmt::format("  rerecord_ref: {}", us(f.rerecord_ref_s)));
    line(fmt::format("  fit: {}", fit_map(f.points, f.rms_residual, f.max_abs_residual)));
    if (f.thunk_points > 0)
      line(fmt::format("  without_command_buffers: {{program: {}, kernel_launch: {}, fit: {}}}", us(f.thunk_program_s),
                       us(f.thunk_launch_s), fit_map(f.thunk_points, f.thunk_rms_residual, f.thunk_max_abs_residual)));
    line("  rows:");
    for (const auto& p : f.rows)
      line(fmt::format("    - {{label: {}, {}commands: {}, rerecorded_refs: {}, exposed: {}, model: {}, residual: {}, source: {}}}",
                       quote(p.label), p.command_buffers ? "" : "command_buffers: false, ", p.commands,
                       num(p.rerecorded_refs), us(p.exposed_s), us(p.model_s), signed4(p.residual), p.source));
  }
  if (!c.contention.empty()) {
    line("contention:              # a large GEMM beside a background job: time beside / time alone");
    for (const auto& p : c.contention)
      line(fmt::format("  - {{background: {}, gemm_slowdown: {}, background_slowdown: {}, description: {}}}",
                       p.background, fixed4(p.gemm_slowdown), fixed4(p.background_slowdown), quote(p.description)));
  }
  if (c.nccl.empty()) {
    line("nccl: []");
  } else {
    line("nccl:                    # t = latency + size / algbw (nccl-tests' size); busbw = algbw * nccl-tests' factor");
    for (const auto& f : c.nccl)
      line(fmt::format("  - {{op: {}, gpus: {}, source: {}, latency: {}, algbw: {}, busbw: {}, fit: {}}}", to_string(f.op), f.gpus,
                       f.source, us(f.latency_s), gbps(f.algbw_Bps), gbps(f.busbw_Bps),
                       fit_map(f.points, f.rms_residual, f.max_abs_residual)));
  }
  if (!c.notes.empty()) {
    line("notes:");
    for (const auto& n : c.notes) line("  - " + quote(n));
  }
  return o;
}

}  // namespace racksim::hw
