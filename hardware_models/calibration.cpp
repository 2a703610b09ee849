#include "hardware_models/calibration.h"
#include "hardware_models/nccl_tests.h"

#include <fmt/format.h>
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

#include "hardware_models/system_preset.h"
#include "sim/input/files.h"
#include "sim/core/text.h"
#include "sim/input/file_cache.h"
#include "sim/core/units.h"

namespace racksim::hw {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using nlohmann::json;
using sim::QuantityKind;

namespace {

constexpr const char* kFormat = "racksim-calibration/1";
constexpr const char* kGemmForm = "t = t0 + F / (P * e_max) * (1 + k0 / K)";
constexpr const char* kRowKernelForm = "t = max(bytes / hbm, bytes * thread_bytes / k)";
constexpr const char* kAttentionForm = "t = F / (P * e_max) * (1 + s0 / S)";
constexpr const char* kXlaRuntimeForm = "exposed = program + command * commands + rerecord_ref * rerecorded_refs";
// A measured GEMM whose operand + result bytes at the calibrated HBM rate take more than this
// share of its time is HBM-bound: its time says little about the tensor cores, so it is left
// out of the efficiency fit (it stays in the table, with the roofline's residual).
constexpr double kHbmBoundShare = 0.5;

// ---------------------------------------------------------------- formatting

// Plain decimal with `sig` significant digits, never exponent notation (so every number reads
// back through the quantity parser), trailing zeros dropped.
std::string num(double v, int sig = 6) {
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
std::string fixed4(double v) {
  std::string s = fmt::format("{:.4f}", v);
  return s == "-0.0000" ? "0.0000" : s;
}
std::string signed4(double v) {
  std::string s = fmt::format("{:+.4f}", v);
  return s == "-0.0000" ? "+0.0000" : s;
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

std::string arch_name(Architecture a) {
  switch (a) {
    case Architecture::hopper: return "hopper";
    case Architecture::blackwell: return "blackwell";
    case Architecture::blackwell_ultra: return "blackwell_ultra";
  }
  return "?";
}
std::string link_name(HostLinkKind k) {
  switch (k) {
    case HostLinkKind::pcie_gen5_x16: return "pcie_gen5_x16";
    case HostLinkKind::pcie_gen6_x16: return "pcie_gen6_x16";
    case HostLinkKind::nvlink_c2c: return "nvlink_c2c";
  }
  return "?";
}
const std::vector<std::pair<std::string, Architecture>> kArchs = {
    {"hopper", Architecture::hopper}, {"blackwell", Architecture::blackwell}, {"blackwell_ultra", Architecture::blackwell_ultra}};
const std::vector<std::pair<std::string, HostLinkKind>> kLinks = {{"pcie_gen5_x16", HostLinkKind::pcie_gen5_x16},
                                                                  {"pcie_gen6_x16", HostLinkKind::pcie_gen6_x16},
                                                                  {"nvlink_c2c", HostLinkKind::nvlink_c2c}};
const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"};

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

[[noreturn]] void fail(const std::string& file, const std::string& msg, int line = 0) {
  throw input::input_error(file, line, line > 0 ? 1 : 0, "", msg);
}

double matmul_input_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32:
    case Dtype::tf32: return 4;
    case Dtype::bf16: return 2;
    case Dtype::fp8:
    case Dtype::mxfp8: return 1;
    case Dtype::nvfp4: return 0.5;
  }
  return 2;
}

}  // namespace

// ---------------------------------------------------------------- the model

double GemmModel::shape_factor(double m, double n, double k, double batch, double peak, double ceiling) const {
  const double f = 2.0 * std::max(1.0, batch) * m * n * k;
  double denom = 1.0;
  if (k > 0) denom += k0 / k;
  if (f > 0 && peak > 0 && ceiling > 0) denom += t0_s * peak * ceiling / f;
  return 1.0 / denom;
}

double nccl_busbw_factor(const std::string& op, int gpus) {
  const double n = std::max(1, gpus);
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return (n - 1) / n;
  return 1.0;
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
    n.error(fmt::format("expected a list, got {}", n.describe()));
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
    set_if(r.choice<Architecture>("architecture", kArchs, true), c.architecture);
    set_if(r.choice<HostLinkKind>("host_link", kLinks, true), c.host_link);
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
    for (Dtype d : {Dtype::tf32, Dtype::bf16, Dtype::fp8, Dtype::mxfp8, Dtype::nvfp4}) {
      auto dn = gr.get(to_string(d));
      if (!dn) continue;
      GemmModel m;
      MapReader r(*dn);
      set_if(r.quantity("peak_dense", QuantityKind::flops_per_second, true), m.peak_flops_per_s);
      set_if(r.number("e_max", true, 0.01, 1.0), m.e_max);
      set_if(r.number("k0", true, 0, 1e6), m.k0);
      set_if(r.quantity("t0", QuantityKind::seconds, true), m.t0_s);
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
    if (auto f = r.get("fit", true)) {
      MapReader fr(*f);
      set_if(fr.number("eager_rms", true, 0, 1e6), x.eager_rms);
      set_if(fr.number("graph_node_rms", true, 0, 1e6), x.graph_node_rms);
      set_if(fr.number("graph_launch_rms", true, 0, 1e6), x.graph_launch_rms);
      set_if(fr.number("min_kernel_rms", true, 0, 1e6), x.min_kernel_rms);
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
      std::vector<std::pair<std::string, std::string>> ops;
      for (const auto& o : kOps) ops.push_back({o, o});
      set_if(r.choice<std::string>("op", ops, true), f.op);
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

std::shared_ptr<const Calibration> load_calibration(const std::string& name, const Node* where_named,
                                                    const std::shared_ptr<input::LoadContext>& ctx) {
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".yaml");
  std::string path;
  if (is_path) {
    fs::path p(name);
    if (p.is_relative() && where_named && !where_named->file().empty())
      p = fs::path(where_named->file()).parent_path() / p;
    path = p.string();
  } else {
    path = calibrated_dir() + "/" + name + ".yaml";
  }
  auto report = [&](const std::string& msg) {
    if (where_named)
      where_named->error(msg);
    else
      ctx->diag->error({"<command line>", 0, 0}, "", msg);
  };
  if (name.empty()) {
    report("expected the name of a calibration (hardware_models/calibrated/NAME.yaml) or a path");
    return nullptr;
  }
  std::error_code ec;  // a name the file system refuses (too long, ...) is simply not a calibration
  if (!fs::is_regular_file(path, ec)) {
    if (is_path) {
      report(fmt::format("calibration file '{}' does not exist", path));
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
  }
  ctx->grafts = std::move(parked);
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

void apply_calibration(SystemSpec& spec, const Calibration& cal) {
  auto c = std::make_shared<Calibration>(cal);
  c->warnings.clear();
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

  // GEMM: the shape model always applies (compute_model reads spec.calibration); the ceiling is
  // the measured one only on the device measured.
  std::vector<std::string> gemm_parts, ceilings, unmeasured;
  for (const auto& [d, g] : cal.gemm) {
    if (!spec.gpu.peak_dense_flops_per_s.count(d)) continue;
    const std::string field = "gpu.matmul_efficiency." + to_string(d);
    gemm_parts.push_back(fmt::format("{} {} shapes, rms {:.1f}%, max {:.1f}%", to_string(d), g.points_fitted,
                                     100 * g.rms_residual, 100 * g.max_abs_residual));
    if (c->same_device && !overridden(field)) {
      spec.gpu.matmul_efficiency[d] = g.e_max;
      spec.sources[field] = fmt::format("{} gemm.{}.e_max, the large-shape ceiling of a fit to {} measured shapes", tag,
                                        to_string(d), g.points_fitted);
      c->applied_gemm_ceiling = true;
    } else {
      auto it = spec.gpu.matmul_efficiency.find(d);
      ceilings.push_back(fmt::format("{} {}", to_string(d), it != spec.gpu.matmul_efficiency.end() ? num(it->second, 3) : "n/a"));
    }
  }
  for (const auto& [d, peak] : spec.gpu.peak_dense_flops_per_s)
    if ((d == Dtype::bf16 || d == Dtype::fp8 || d == Dtype::mxfp8 || d == Dtype::nvfp4) && !cal.gemm.count(d))
      unmeasured.push_back(to_string(d));

  std::vector<std::string> applied, kept;
  bool row_kernels_kept = false, xla_runtime_kept = false, attention_kept = false;
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
    // Flash kernels are written per architecture (wgmma on Hopper, tcgen05 on Blackwell).
    if (same_arch) {
      c->applied_attention = true;
      applied.push_back("fused attention");
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

  std::string head = fmt::format("calibration {} ({}, measured {})", cal.name, cal.device_name,
                                 cal.sources.empty() ? std::string("?") : cal.sources.front().date.substr(0, 10));
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
        "ceiling, with the preset's own cited ceilings ({}) and datasheet peaks{}{}; the shape curve's "
        "differences between these GPUs (tile shapes, pipelines) are not measured",
        cal.name, cal.device_name, arch_name(cal.architecture), link_name(cal.host_link), spec.name, spec.gpu.model,
        arch_name(spec.gpu.architecture), link_name(spec.host.link), ceil_list.empty() ? "none" : ceil_list,
        applied_list.empty() ? "" : "; measured " + applied_list + " fractions carried over (same architecture and host link)",
        kept_list.empty() ? "" : "; the preset's own " + kept_list + " figures kept (different architecture or host link)"));
  }
  if (!unmeasured.empty()) {
    std::string list;
    for (const auto& s : unmeasured) list += (list.empty() ? "" : ", ") + s;
    c->warnings.push_back(fmt::format("calibration {} has no {} GEMM measurements: those use the preset's "
                                      "matmul_efficiency for every shape",
                                      cal.name, list));
  }
  if (attention_kept)
    c->warnings.push_back(fmt::format(
        "{}: its fused-attention efficiency was measured on {} and is not applied to {}: flash attention there runs "
        "at the GEMM efficiency, which is optimistic (on the H200, cuDNN's flash kernels reached 55-80% of it)",
        cal.name, arch_name(cal.architecture), arch_name(spec.gpu.architecture)));
  if (xla_runtime_kept)
    c->warnings.push_back(fmt::format(
        "{}: its XLA runtime host costs were measured on a {} host and are not carried to {} ({}): HLO replays "
        "here use the preset's XLA runtime figures{}",
        cal.name, link_name(cal.host_link), spec.name, link_name(spec.host.link),
        spec.launch.xla_command_s > 0 ? " (see their sources)" : ", none: XLA's per-step host work is left out"));
  if (row_kernels_kept)
    c->warnings.push_back(fmt::format(
        "{}: its row-kernel occupancy bound (XLA Triton fusions) was measured on {} and is not applied to {}: "
        "those kernels stream at the HBM rate here, which is optimistic for register-heavy softmax fusions",
        cal.name, arch_name(cal.architecture), arch_name(spec.gpu.architecture)));

  {
    std::string applied_list, kept_list;
    for (const auto& a : applied) applied_list += (applied_list.empty() ? "" : ", ") + a;
    for (const auto& k : kept) kept_list += (kept_list.empty() ? "" : ", ") + k;
    c->transfer = fmt::format(
        "{}; GEMM shape model{}{}{}{}",
        c->same_device ? "same device, measured figures used as measured"
                       : fmt::format("transfer rule: {} ({}) to {} ({}, {}), shape curve as a ratio to the "
                                     "preset's ceilings",
                                     cal.device_name, arch_name(cal.architecture), spec.gpu.model,
                                     arch_name(spec.gpu.architecture), link_name(spec.host.link)),
        c->applied_gemm_ceiling ? " with the measured ceiling" : "",
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
std::optional<std::string> written_base_preset(const std::string& path) {
  std::string text;
  try {
    text = input::read_file_bounded(path, input::limits::kMaxYamlFileBytes, "a YAML file", input::Binary::stop);
  } catch (const std::exception&) {
    return std::nullopt;
  }
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

// ---------------------------------------------------------------- nccl-tests logs

std::optional<NcclTestsLog> parse_nccl_tests_log(const std::string& text, const std::string& file_label) {
  auto logs = parse_nccl_tests_output(text, file_label);
  if (logs.empty()) return std::nullopt;
  return logs.front();
}

// ---------------------------------------------------------------- fitting

namespace {

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
  Dtype dtype;
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
  std::vector<DispatchPoint> dispatch;      // XLA runtime host work, measured
  std::vector<AttentionPoint> attention;    // fused attention kernels, measured
  std::string device_name, driver;
  int sm_count = 0;
  std::vector<std::string> dropped;  // rows left out of the fits, per file and section: why and how many
};

// A measurement row a fit can use: size (or count) and time positive and finite.
bool usable(double x, double t) { return x > 0 && t > 0 && std::isfinite(x) && std::isfinite(t); }

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
const json& at(const json& j, const char* key, const std::string& file) {
  if (!j.is_object() || !j.contains(key)) fail(file, fmt::format("expected key '{}'", key));
  return j.at(key);
}
double median_of(const json& stats, const std::string& file) {
  if (stats.is_number()) return stats.get<double>();
  const json& m = at(stats, "median", file);
  if (!m.is_number()) fail(file, "expected a number under 'median'");
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
  int points = 0;
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
        if (!c || !(c->thread_bytes > 0) || !(c->bytes > 0)) continue;
        std::sort(d.begin(), d.end());
        if (!(d[d.size() / 2] > 0)) continue;  // a profiler row of zero duration says nothing
        RowKernelPoint p;
        p.label = run.value("name", "") + " " + name;
        p.bytes = c->bytes;
        p.thread_bytes = c->thread_bytes;
        p.measured_s = d[d.size() / 2];
        p.source = src;
        in.row_kernels.push_back(p);
        ++points;
      }
    }
  }
  if (points > 0) cs.used.push_back("row_kernels");
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
      if (p.exposed_s > 0 && std::isfinite(p.exposed_s)) {
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
      if (p.seq > 0 && p.flops > 0 && p.measured_s > 0 && std::isfinite(p.measured_s) && std::isfinite(p.flops))
        in.attention.push_back(p);
      else
        ++left_out;
    }
  }
  note_dropped(in, shown, "attention", left_out, rows, "no positive sequence length, FLOPs and time");
  cs.used.push_back("attention");
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
  if (schema.starts_with("racksim-xla-runtime/")) return read_xla_runtime_json(j, path, shown, in, opt);
  if (schema.starts_with("racksim-attention/")) return read_attention_json(j, shown, in);
  if (!schema.starts_with("racksim-bench/") && !schema.starts_with("racksim-gemm-torch/"))
    fail(shown, fmt::format("JSON without a known schema ('{}'): expected racksim-bench/1, racksim-gemm-torch/1, "
                            "racksim-xla-runtime/1 or racksim-attention/1",
                            schema));
  const int src = static_cast<int>(in.sources.size());
  CalibrationSource cs;
  cs.path = shown;
  cs.schema = schema;
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
    } else {
      name = id.value("gpu", "");
      sms = id.value("sm_count", 0);
    }
    if (id.contains("driver_version") && id["driver_version"].is_string()) driver = id["driver_version"].get<std::string>();
    note_device(in, name, shown);
    if (in.driver.empty()) in.driver = driver;
    if (in.sm_count == 0) in.sm_count = sms;

    if (j.contains("gemm") && j["gemm"].contains("results")) {
      int n = 0, rows = 0, left_out = 0;
      for (const json& r : j["gemm"]["results"]) {
        if (r.contains("error")) continue;
        const std::string dt = r.value("dtype", "");
        Dtype d;
        if (dt == "bf16") d = Dtype::bf16;
        else if (dt == "fp8_e4m3") d = Dtype::fp8;
        else if (dt == "fp4_e2m1") d = Dtype::nvfp4;
        else fail(shown, fmt::format("gemm row with unknown dtype '{}'", dt));
        RawGemm g{d, {}};
        g.p.source = src;
        g.p.label = r.value("label", "");
        g.p.m = at(r, "m", shown).get<double>();
        g.p.n = at(r, "n", shown).get<double>();
        g.p.k = at(r, "k", shown).get<double>();
        g.p.batch = r.value("batch", 1);
        g.p.layout = r.value("layout", "TN");
        g.p.out = r.value("out_dtype", "bf16");
        g.p.measured_s = median_of(at(r, "s", shown), shown);
        ++rows;
        // A shape that is not a matrix product is bad data, not a measurement to leave out.
        for (const auto& [name, v] : {std::pair<const char*, double>{"m", g.p.m}, {"n", g.p.n}, {"k", g.p.k}})
          if (!(v >= 1 && v <= 1e9 && std::isfinite(v)))
            fail(shown, fmt::format("gemm row {} ('{}'): {} = {} is not a matrix size (1 to 1e9)", rows, g.p.label, name, v));
        if (g.p.batch < 1 || g.p.batch > 1'000'000'000)
          fail(shown, fmt::format("gemm row {} ('{}'): batch = {} is not a batch count", rows, g.p.label, g.p.batch));
        if (!(g.p.measured_s > 0 && std::isfinite(g.p.measured_s))) {
          ++left_out;
          continue;
        }
        in.gemm.push_back(g);
        ++n;
      }
      note_dropped(in, shown, "gemm", left_out, rows, "no positive, finite time");
      if (n) cs.used.push_back("gemm");
    }
    const std::string why = "a size or time that is not positive and finite";
    if (j.contains("hbm") && j["hbm"].contains("results")) {
      int rows = 0, left_out = 0;
      for (const json& r : j["hbm"]["results"])
        if (r.contains("kernel")) {
          ++rows;
          add_point(in.hbm, 2.0 * at(r, "bytes", shown).get<double>(), median_of(at(r["kernel"], "s", shown), shown),
                    left_out);
        }
      note_dropped(in, shown, "hbm", left_out, rows, why);
      cs.used.push_back("hbm");
    }
    if (j.contains("host") && j["host"].contains("results")) {
      int rows = 0, left_out = 0;
      for (const json& r : j["host"]["results"]) {
        const double b = at(r, "bytes", shown).get<double>();
        ++rows;
        if (r.contains("h2d")) add_point(in.h2d, b, median_of(at(r["h2d"], "s", shown), shown), left_out);
        if (r.contains("d2h")) add_point(in.d2h, b, median_of(at(r["d2h"], "s", shown), shown), left_out);
        if (r.contains("bidir")) add_point(in.both, 2 * b, median_of(at(r["bidir"], "span_s", shown), shown), left_out);
      }
      note_dropped(in, shown, "host-copy", left_out, rows, why);
      cs.used.push_back("host");
    }
    if (j.contains("launch") && j["launch"].contains("results")) {
      int rows = 0, left_out = 0;
      for (const json& r : j["launch"]["results"]) {
        const double n = at(r, "n", shown).get<double>();
        const json& e = at(r, "eager", shown);
        const json& g = at(r, "graph", shown);
        ++rows;
        add_point(in.eager, n, n * 1e-6 * median_of(at(e, "host_us_per_launch", shown), shown), left_out);
        add_point(in.graph_node, n, n * 1e-6 * median_of(at(g, "inclusive_us_per_kernel", shown), shown), left_out);
        add_point(in.graph_launch, n, 1e-6 * median_of(at(g, "launch_host_us", shown), shown), left_out);
        add_point(in.min_kernel, n, n * 1e-6 * median_of(at(g, "gpu_span_us_per_kernel", shown), shown), left_out);
      }
      note_dropped(in, shown, "launch", left_out, rows, why);
      cs.used.push_back("launch");
    }
    if (j.contains("contention") && j["contention"].contains("results")) {
      for (const json& r : j["contention"]["results"]) {
        ContentionPoint p;
        p.background = r.value("background", "");
        p.description = r.value("description", "");
        p.gemm_slowdown = at(r, "gemm_slowdown", shown).get<double>();
        p.background_slowdown = at(r, "bg_slowdown", shown).get<double>();
        in.contention.push_back(p);
      }
      cs.used.push_back("contention");
    }
    if (j.contains("nccl") && j["nccl"].contains("runs") && !j["nccl"].contains("note")) {
      bool any = false;
      int nccl_rows = 0, nccl_left_out = 0;
      for (const json& run : j["nccl"]["runs"]) {
        const int gpus = run.value("gpus", 0);
        if (gpus < 2 || !run.contains("results")) continue;
        std::map<std::string, Inputs::NcclGroup> groups;
        for (const json& r : run["results"]) {
          if (r.contains("error") || !r.contains("s")) continue;
          const std::string op = r.value("collective", "");
          auto& g = groups[op];
          g.op = op;
          g.gpus = gpus;
          g.source = src;
          const double b = at(r, "bytes", shown).get<double>();
          const double t = median_of(r["s"], shown);
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
    fail(shown, fmt::format("unexpected JSON structure: {}", json_message(e)));
  }
  in.sources.push_back(cs);
}

GemmModel fit_gemm(Dtype d, std::vector<GemmPoint> pts, double peak, double hbm_Bps) {
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
  std::map<std::tuple<double, double, double, int, std::string, std::string>, std::pair<double, double>> groups;
  for (const auto& p : pts) {
    auto key = std::make_tuple(p.m, p.n, p.k, p.batch, p.layout, p.out);
    auto it = groups.find(key);
    if (it == groups.end())
      groups[key] = {p.measured_s, p.measured_s};
    else
      it->second = {std::min(it->second.first, p.measured_s), std::max(it->second.second, p.measured_s)};
  }
  for (const auto& [k, mm] : groups) m.repeat_spread = std::max(m.repeat_spread, mm.second / mm.first - 1);
  std::stable_sort(pts.begin(), pts.end(), [](const GemmPoint& a, const GemmPoint& b) {
    return std::tie(a.batch, a.m, a.n, a.k, a.layout, a.out, a.source) < std::tie(b.batch, b.m, b.n, b.k, b.layout, b.out, b.source);
  });
  m.shapes = std::move(pts);
  return m;
}

}  // namespace

// k of t = max(bytes / hbm, bytes * thread_bytes / k): the k that minimises the rms relative
// residual of that model over every measured row kernel (a 1-D search on log k: a coarse grid,
// then golden-section refinement; deterministic). `fitted` marks the kernels the bound governs.
RowKernelFit fit_row_kernels(std::vector<RowKernelPoint> pts, double hbm_Bps) {
  std::sort(pts.begin(), pts.end(), [](const RowKernelPoint& a, const RowKernelPoint& b) {
    return std::tie(a.source, a.label) < std::tie(b.source, b.label);
  });
  auto rms_at = [&](double log_k) {
    const double k = std::exp(log_k);
    double ss = 0;
    for (const auto& p : pts) {
      const double m = std::max(p.bytes / hbm_Bps, p.bytes * p.thread_bytes / k);
      ss += std::pow((m - p.measured_s) / p.measured_s, 2);
    }
    return ss;
  };
  // k between 1 GB/s x B and 1e9 GB/s x B.
  const double lo = std::log(1e9), hi = std::log(1e18);
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
  RowKernelFit f;
  f.k_Bps_B = std::exp(0.5 * (a + b));
  double ss = 0;
  for (auto& p : pts) {
    const double occupancy_s = p.bytes * p.thread_bytes / f.k_Bps_B;
    p.fitted = occupancy_s > p.bytes / hbm_Bps;
    p.model_s = std::max(p.bytes / hbm_Bps, occupancy_s);
    p.residual = (p.model_s - p.measured_s) / p.measured_s;
    ss += p.residual * p.residual;
    f.max_abs_residual = std::max(f.max_abs_residual, std::abs(p.residual));
    if (p.fitted) ++f.points;
  }
  f.rms_residual = pts.empty() ? 0 : std::sqrt(ss / static_cast<double>(pts.size()));
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
  std::sort(dirs_shown.begin(), dirs_shown.end());

  Inputs in;
  std::vector<std::pair<NcclTestsLog, int>> logs;
  for (const auto& [shown, real] : files) {
    const std::string ext = fs::path(real).extension().string();
    std::string text;
    if (ext == ".json" || ext == ".log" || ext == ".txt" || ext == ".out")
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

  Calibration c;
  c.device_name = in.device_name.empty() ? base.gpu.model : in.device_name;
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
  if (in.sm_count > 0 && in.sm_count != base.gpu.sm_count)
    c.notes.push_back(fmt::format("the device measured has {} SMs, the base preset {} has {}", in.sm_count, base.name,
                                  base.gpu.sm_count));

  const std::string from = dirs_shown.front();
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
    l.eager_rms = e.rms_residual;
    l.graph_node_rms = g.rms_residual;
    l.graph_launch_rms = gl.rms_residual;
    l.min_kernel_rms = mk.rms_residual;
    c.launch = l;
  }
  c.contention = in.contention;
  if (std::count_if(in.dispatch.begin(), in.dispatch.end(), [](const DispatchPoint& p) { return p.command_buffers; }) >= 3)
    c.xla_runtime = fit_xla_runtime(in.dispatch);
  if (!in.attention.empty()) {
    auto it = base.gpu.peak_dense_flops_per_s.find(Dtype::bf16);
    if (it != base.gpu.peak_dense_flops_per_s.end()) c.attention = fit_attention(in.attention, it->second);
  }
  if (!in.row_kernels.empty()) c.row_kernels = fit_row_kernels(in.row_kernels, c.hbm ? c.hbm->bandwidth_Bps
                                                                                  : base.gpu.hbm_bandwidth_Bps * base.gpu.hbm_efficiency);

  const double hbm_rate = c.hbm ? c.hbm->bandwidth_Bps : base.gpu.hbm_bandwidth_Bps * base.gpu.hbm_efficiency;
  std::map<Dtype, std::vector<GemmPoint>> by_dtype;
  for (const auto& g : in.gemm) by_dtype[g.dtype].push_back(g.p);
  for (auto& [d, pts] : by_dtype) {
    auto it = base.gpu.peak_dense_flops_per_s.find(d);
    if (it == base.gpu.peak_dense_flops_per_s.end()) {
      c.notes.push_back(fmt::format("{} GEMMs were measured but {} has no {} peak: not fitted", to_string(d), base.name,
                                    to_string(d)));
      continue;
    }
    c.gemm[d] = fit_gemm(d, pts, it->second, hbm_rate);
    const GemmModel& m = c.gemm[d];
    // How sources agree on the shapes they both measured.
    for (std::size_t a = 0; a < c.sources.size(); ++a)
      for (std::size_t b = a + 1; b < c.sources.size(); ++b) {
        std::map<std::tuple<double, double, double, int, std::string, std::string>, std::pair<double, double>> ta;
        double logsum = 0, lo = 1e300, hi = 0;
        int common = 0;
        for (const auto& p : m.shapes)
          if (p.source == static_cast<int>(a)) ta[{p.m, p.n, p.k, p.batch, p.layout, p.out}].first = p.measured_s;
        for (const auto& p : m.shapes)
          if (p.source == static_cast<int>(b)) {
            auto itp = ta.find({p.m, p.n, p.k, p.batch, p.layout, p.out});
            if (itp == ta.end() || itp->second.first <= 0) continue;
            const double r = p.measured_s / itp->second.first;
            logsum += std::log(r);
            lo = std::min(lo, r);
            hi = std::max(hi, r);
            ++common;
          }
        if (common > 0)
          c.notes.push_back(fmt::format(
              "gemm {}: {} measurements in {} of shapes also measured in {}: they took {}x the time (geometric "
              "mean; range {}-{}x); all are fitted as measured",
              to_string(d), common, fs::path(c.sources[b].path).filename().string(),
              fs::path(c.sources[a].path).filename().string(), num(std::exp(logsum / common), 3), num(lo, 3), num(hi, 3)));
      }
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

  // NCCL: one alpha-beta fit per source, op and GPU count.
  for (const auto& g : in.nccl) {
    if (std::find(kOps.begin(), kOps.end(), g.op) == kOps.end())
      fail(c.sources[g.source].path, fmt::format("collective '{}' is not one racksim models", g.op));
    const BandwidthFit b = checked(g.pts, fmt::format("{} on {} GPUs", g.op, g.gpus),
                                   c.sources[static_cast<std::size_t>(g.source)].path);
    NcclFit f;
    f.op = g.op;
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
    return std::tie(a.op, a.gpus, a.source) < std::tie(b.op, b.gpus, b.source);
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
      fail(from, fmt::format("the measurements give a calibration that racksim cannot use: {}",
                             diag.list().front().format()));
  }
  return c;
}

// ---------------------------------------------------------------- writing

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
  line(fmt::format("  architecture: {}", arch_name(c.architecture)));
  line(fmt::format("  host_link: {}", link_name(c.host_link)));
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
    line(fmt::format("  fit: {{eager_rms: {}, graph_node_rms: {}, graph_launch_rms: {}, min_kernel_rms: {}}}",
                     fixed4(l.eager_rms), fixed4(l.graph_node_rms), fixed4(l.graph_launch_rms), fixed4(l.min_kernel_rms)));
  }
  if (c.row_kernels) {
    const auto& f = *c.row_kernels;
    line("row_kernels:             # XLA Triton block-level fusions; k = achieved bandwidth x operand bytes per thread");
    line(fmt::format("  form: {}", quote(kRowKernelForm)));
    line(fmt::format("  k: {}", gbps(f.k_Bps_B)));
    line(fmt::format("  fit: {}", fit_map(f.points, f.rms_residual, f.max_abs_residual)));
    line("  kernels:");
    for (const auto& p : f.kernels)
      line(fmt::format("    - {{label: {}, bytes: {} MB, thread_bytes: {} B, measured: {}, model: {}, residual: {}, "
                       "fitted: {}, source: {}}}",
                       quote(p.label), num(p.bytes / 1e6), num(p.thread_bytes), us(p.measured_s), us(p.model_s),
                       signed4(p.residual), p.fitted ? "true" : "false", p.source));
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
      line(fmt::format("  - {{op: {}, gpus: {}, source: {}, latency: {}, algbw: {}, busbw: {}, fit: {}}}", f.op, f.gpus,
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
