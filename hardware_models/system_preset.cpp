#include "hardware_models/system_preset.h"

#include <array>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <system_error>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "core/text.h"
#include "input/file_cache.h"
#include "input/files.h"

namespace racksim::hw {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using sim::QuantityKind;

std::string to_string(Architecture a) { return std::string(sim::name_in(kArchitectureNames, a)); }
std::string to_string(HostLinkKind k) { return std::string(sim::name_in(kHostLinkKindNames, k)); }

double peak_flops_per_s(const SystemSpec& sys, sim::Dtype d) {
  auto it = sys.gpu.peak_dense_flops_per_s.find(d);
  if (it == sys.gpu.peak_dense_flops_per_s.end())
    throw std::invalid_argument(fmt::format("{} ({}) has no {} tensor cores", sys.name, sys.gpu.model, to_string(d)));
  return it->second;
}

std::string presets_dir() { return input::data_dir() + "/hardware_models/presets"; }

std::vector<std::string> list_system_presets() { return input::list_yaml_names(presets_dir()); }

namespace {

// Fields that describe rather than quantify, so they need no citation.
const std::set<std::string> kUncitedFields = {"name", "summary", "gpu.model", "gpu.architecture", "host.link"};

template <class T>
void set_if(std::optional<T> v, T& field) {
  if (v) field = *v;
}
template <class T, class U>
void set_if(std::optional<U> v, T& field) {
  if (v) field = static_cast<T>(*v);
}

// What a preset quantity may be (docs/decisions.md, "Input limits"): wide enough for any GPU
// system that exists or is announced, narrow enough that no step time, memory total or rate
// computed from them leaves the range of the simulator's integers and doubles. A zero rate
// would make a transfer never end; a zero capacity would make every job "not fit".
struct Range {
  double lo, hi;
};
constexpr Range kRate{1e6, 1e15};             // bytes/s: 1 MB/s .. 1 PB/s
constexpr Range kCapacity{1e6, 1e15};         // bytes: 1 MB .. 1 PB
constexpr Range kFlops{1e9, 1e18};            // FLOP/s: 1 GFLOP/s .. 1 EFLOP/s per GPU
constexpr Range kOps{1e6, 1e18};              // operations/s
constexpr Range kLatency{0, 1};               // seconds: a launch or runtime cost of at most 1 s
constexpr Range kReserved{0, 1e15};           // bytes held by the driver and libraries
constexpr Range kHertz{1e6, 1e11};
constexpr Range kWatts{1, 1e6};

std::optional<double> quantity_in(MapReader& r, const std::string& key, QuantityKind kind, bool required, Range range) {
  auto v = r.quantity(key, kind, required);
  if (!v) return v;
  if (!(*v >= range.lo && *v <= range.hi)) {
    const Node n = r.node().child(key);
    if (*v <= 0 && range.lo > 0)
      n.error(fmt::format("must be more than 0, got {}", n.describe()), input::DiagnosticKind::malformed_value);
    else
      n.error(fmt::format("must be between {} and {} (docs/decisions.md, \"Input limits\"), got {}",
                          sim::format_quantity(range.lo, kind), sim::format_quantity(range.hi, kind), n.describe()), input::DiagnosticKind::malformed_value);
    return std::nullopt;
  }
  return v;
}

// "MxNxK" with three positive integers that fit in 63 bits, written back without leading zeros (so that
// 08192x8192x8192 and 8192x8192x8192 are one shape); nullopt when `shape` is not one.
std::optional<std::string> gemm_shape(const std::string& shape) {
  const char* p = shape.data();
  const char* end = p + shape.size();
  int64_t dims[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const auto [next, ec] = std::from_chars(p, end, dims[i]);
    if (ec != std::errc() || dims[i] <= 0) return std::nullopt;
    p = next;
    if (i < 2) {
      if (p == end || *p != 'x') return std::nullopt;
      ++p;
    }
  }
  if (p != end) return std::nullopt;
  return fmt::format("{}x{}x{}", dims[0], dims[1], dims[2]);
}

// A warning said once per message and process (a sweep loads the scenario at every point, on several threads).
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  bool first = false;
  {
    const std::lock_guard lock(mutex);
    first = said.insert(message).second;
  }
  if (first) spdlog::warn("{}", message);
}

// A problem with a key of a preset table whose keys are data (gpu.sustained_gemm's shapes, gpu.bf16_wgrad_nt_time_ratio's
// token counts): at the key where the file has it; a key set by system.overrides or --set reports where it was set.
void key_error(const Node& table, const YAML::Node& key, const Node& row, const std::string& msg,
               input::DiagnosticKind kind = input::DiagnosticKind::other) {
  const YAML::Mark m = key.Mark();
  if (row.file() != table.file() || m.line < 0)
    row.error(msg, kind);
  else
    table.diag().error({table.file(), m.line + 1, m.column + 1}, row.path(), msg, kind);
}

// gpu.sustained_gemm: {source: tag, <dtype>: {MxNxK: rate, ...}}. The shapes are map keys, so each is
// checked here (MapReader checks declared keys only): three positive integers joined by 'x', each shape
// once, and a rate no higher than the dtype's dense peak. A key's problem is reported at the key.
void read_sustained_gemm(const Node& n, GpuSpec& gpu) {
  MapReader r(n);
  if (!r.ok()) return;
  set_if(r.string("source", true), gpu.sustained_gemm_source);
  for (sim::Dtype d : {sim::Dtype::bf16, sim::Dtype::fp8, sim::Dtype::mxfp8, sim::Dtype::nvfp4}) {
    auto table = r.get(to_string(d));
    if (!table) continue;
    if (!table->yaml().IsMap()) {
      table->error(fmt::format("expected a mapping of MxNxK shape -> rate, got {}", table->describe()), input::DiagnosticKind::malformed_value);
      continue;
    }
    std::map<std::string, std::string> seen;  // shape without leading zeros -> as first written
    for (auto it = table->yaml().begin(); it != table->yaml().end(); ++it) {
      const YAML::Node key = it->first;  // a handle: `it->` returns a proxy that dies with the statement
      const Node key_node(key, table->file(), table->path(), table->internal_path(), table->context());
      if (!key.IsScalar()) {
        key_error(*table, key, *table, fmt::format("expected MxNxK shapes as keys, got {}", key_node.describe()), input::DiagnosticKind::malformed_value);
        continue;
      }
      const std::string written = key.Scalar();
      const Node row = table->child(written);
      const auto shape = gemm_shape(written);
      if (!shape) {
        key_error(*table, key, row, fmt::format("'{}' is not a GEMM shape: write MxNxK with positive integers, e.g. 8192x8192x8192", written));
        continue;
      }
      if (const auto [first, fresh] = seen.emplace(*shape, written); !fresh) {
        key_error(*table, key, row, first->second == written
                           ? fmt::format("duplicate shape '{}': give each shape once", written)
                           : fmt::format("shape '{}' is '{}' again: give each shape once", written, first->second));
        continue;
      }
      if (auto v = row.as_quantity(QuantityKind::flops_per_second)) {
        const auto peak = gpu.peak_dense_flops_per_s.find(d);
        if (*v < kFlops.lo || *v > kFlops.hi)
          row.error(fmt::format("must be between {} and {}, got {}", sim::format_quantity(kFlops.lo, QuantityKind::flops_per_second),
                                sim::format_quantity(kFlops.hi, QuantityKind::flops_per_second), row.describe()), input::DiagnosticKind::malformed_value);
        else if (peak != gpu.peak_dense_flops_per_s.end() && *v > peak->second)
          row.error(fmt::format("{} is above this GPU's dense {} peak, {} (gpu.peak_dense.{}): a measured rate cannot "
                                "exceed it; check the unit (TFLOP/s) and the dtype (a peak lowered by system.overrides "
                                "needs gpu.sustained_gemm overridden with it: these rates were measured on the preset's GPU)",
                                sim::format_quantity(*v, QuantityKind::flops_per_second), to_string(d),
                                sim::format_quantity(peak->second, QuantityKind::flops_per_second), to_string(d)));
        else
          gpu.sustained_gemm_flops_per_s[d][*shape] = *v;
      }
    }
  }
  r.finish();
}

// The preset's tables of whole-number sizes -> a value (gpu.<field>), each read by read_size_table, its points set by
// system.overrides by their keys (load_system_preset's data-keyed tables) and optional in a preset.
struct SizeTable {
  const char* field;                                        // under gpu
  std::vector<std::pair<double, double>> GpuSpec::*member;  // (size, value) points
  const char* size_name;                                    // what a key is, in errors: "token count"
  const char* sizes;                                        // what keys count: "tokens"
  const char* value;                                        // what a value is: "time ratio"
  const char* example;                                      // a value, for the errors' example mapping
  double lo, hi;                                            // a value's range
};
constexpr SizeTable kSizeTables[] = {
    // a layout moves a GEMM's time by tens of percent, not x2
    {"bf16_wgrad_nt_time_ratio", &GpuSpec::bf16_wgrad_nt_time_ratio, "token count", "tokens", "time ratio", "0.93", 0.5, 2.0},
    // a kernel's rate of its bytes in GB/s, from a slow row kernel's to beyond any HBM
    {"te_softmax_forward_GBps", &GpuSpec::te_softmax_forward_GBps, "sequence length", "scores per row", "GB/s", "1444",
     10.0, 100000.0},
    {"te_softmax_backward_GBps", &GpuSpec::te_softmax_backward_GBps, "sequence length", "scores per row", "GB/s", "1444",
     10.0, 100000.0},
};

// A SizeTable: a mapping of whole-number sizes to values within [lo, hi], or one number for every size (how a what-if
// sets it flat, e.g. 1 to leave the layout out).
void read_size_table(const Node& n, const SizeTable& spec, GpuSpec& gpu) {
  auto& table = gpu.*spec.member;
  table.clear();
  if (n.yaml().IsScalar()) {
    if (auto v = n.as_number(spec.lo, spec.hi)) table = {{1.0, *v}};
    return;
  }
  if (!n.yaml().IsMap() || n.yaml().size() == 0) {
    n.error(fmt::format("expected a mapping of {} -> {} (e.g. {{4096: {}}}) or one number, got {}", spec.sizes, spec.value,
                        spec.example, n.yaml().IsNull() ? "null" : n.describe()),
            input::DiagnosticKind::malformed_value);
    return;
  }
  std::vector<std::string> seen;  // keys as written: a count has one spelling (below), so a repeat is a duplicate key
  for (auto it = n.yaml().begin(); it != n.yaml().end(); ++it) {
    const YAML::Node key = it->first;  // a handle: `it->` returns a proxy that dies with the statement
    if (!input::key_is_new(n, key, seen)) continue;
    const std::string written = key.IsScalar() ? key.Scalar() : std::string();
    const Node row = key.IsScalar() ? n.child(written) : n;
    // A whole number as written (no sign, leading zero, exponent or space): the key an override's dotted path names.
    long long count = 0;
    const auto [end, ec] = std::from_chars(written.data(), written.data() + written.size(), count);
    if (written.empty() || ec != std::errc() || end != written.data() + written.size() || count < 1 ||
        count > 1000000000 || written.front() == '0') {
      key_error(n, key, row,
                fmt::format("'{}' is not a {}: write whole numbers of {} as keys, e.g. 4096",
                            key.IsScalar() ? written : std::string("a ") + (key.IsMap() ? "mapping" : "list"),
                            spec.size_name, spec.sizes));
      continue;
    }
    if (auto v = row.as_number(spec.lo, spec.hi)) table.emplace_back(static_cast<double>(count), *v);
  }
  std::sort(table.begin(), table.end());
}

}  // namespace

SystemSpec parse_system_preset(const Node& root) {
  SystemSpec s;
  MapReader top(root);
  if (!top.ok()) return s;
  set_if(top.string("name", true), s.name);
  set_if(top.string("summary"), s.summary);

  if (auto g = top.get("gpu", true)) {
    MapReader r(*g);
    set_if(r.string("model", true), s.gpu.model);
    set_if(r.choice("architecture", kArchitectureNames, true), s.gpu.architecture);
    set_if(r.integer("sm_count", true, 1, 100000), s.gpu.sm_count);
    set_if(quantity_in(r, "tensor_clock", QuantityKind::hertz, false, kHertz), s.gpu.tensor_clock_hz);
    if (auto p = r.get("peak_dense", true)) {
      MapReader pr(*p);
      for (sim::Dtype d : {sim::Dtype::tf32, sim::Dtype::bf16, sim::Dtype::fp8, sim::Dtype::mxfp8, sim::Dtype::nvfp4})
        if (auto v = quantity_in(pr, to_string(d), QuantityKind::flops_per_second, false, kFlops)) {
          s.gpu.peak_dense_flops_per_s[d] = *v;
        }
      pr.finish();
    }
    if (auto e = r.get("matmul_efficiency", true)) {
      MapReader er(*e);
      for (sim::Dtype d : {sim::Dtype::tf32, sim::Dtype::bf16, sim::Dtype::fp8, sim::Dtype::mxfp8, sim::Dtype::nvfp4})
        if (auto v = er.number(to_string(d), false, 0.01, 1.0)) s.gpu.matmul_efficiency[d] = *v;
      er.finish();
    }
    set_if(r.number("hbm_efficiency", true, 0.01, 1.0), s.gpu.hbm_efficiency);
    if (auto sg = r.get("sustained_gemm")) read_sustained_gemm(*sg, s.gpu);
    set_if(r.number("collective_slowdown_beside_compute", false, 1.0, 10.0), s.gpu.collective_slowdown_beside_compute);
    set_if(r.number("fp8_blockwise_rate_ratio", false, 0.05, 1.0), s.gpu.fp8_blockwise_rate_ratio);
    set_if(r.number("fp8_blockwise_wgrad_rate_ratio", false, 0.05, 1.0), s.gpu.fp8_blockwise_wgrad_rate_ratio);
    set_if(r.number("mla_attention_forward_rate", false, 0.05, 2.0), s.gpu.mla_attention_forward_rate);
    set_if(r.number("mla_attention_backward_rate", false, 0.05, 2.0), s.gpu.mla_attention_backward_rate);
    set_if(r.number("wgrad_accumulate_serial_bytes", false, 0.0, 16.0), s.gpu.wgrad_accumulate_serial_bytes);
    set_if(r.number("wgrad_accumulate_serial_bytes_fp8", false, 0.0, 16.0), s.gpu.wgrad_accumulate_serial_bytes_fp8);
    set_if(r.number("wgrad_accumulate_serial_bytes_fp8_blockwise", false, 0.0, 16.0),
           s.gpu.wgrad_accumulate_serial_bytes_fp8_blockwise);
    set_if(r.number("wgrad_accumulate_serial_bytes_16bit", false, 0.0, 16.0), s.gpu.wgrad_accumulate_serial_bytes_16bit);
    for (const SizeTable& t : kSizeTables)
      if (auto w = r.get(t.field)) read_size_table(*w, t, s.gpu);
    set_if(quantity_in(r, "vector_fp32", QuantityKind::flops_per_second, true, kFlops), s.gpu.vector_fp32_flops_per_s);
    if (s.gpu.vector_fp32_flops_per_s > 0) s.gpu.peak_dense_flops_per_s[sim::Dtype::fp32] = s.gpu.vector_fp32_flops_per_s;
    set_if(quantity_in(r, "sfu_exp", QuantityKind::ops_per_second, false, kOps), s.gpu.sfu_exp_per_s);
    set_if(quantity_in(r, "hbm_capacity", QuantityKind::bytes, true, kCapacity), s.gpu.hbm_capacity_bytes);
    set_if(quantity_in(r, "hbm_bandwidth", QuantityKind::bytes_per_second, true, kRate), s.gpu.hbm_bandwidth_Bps);
    set_if(quantity_in(r, "l2_cache", QuantityKind::bytes, false, kCapacity), s.gpu.l2_cache_bytes);
    set_if(quantity_in(r, "tdp", QuantityKind::watts, false, kWatts), s.gpu.tdp_watts);
    r.finish();
  }
  if (auto l = top.get("launch", true)) {
    MapReader r(*l);
    // Every figure of kLaunchFields (system_spec.h, which says what each is); an optional one absent: not modelled.
    for (const auto& f : kLaunchFields)
      set_if(quantity_in(r, f.name, QuantityKind::seconds, f.required, kLatency), s.launch.*f.member);
    r.finish();
  }
  if (auto h = top.get("host", true)) {
    MapReader r(*h);
    set_if(r.choice("link", kHostLinkKindNames, true), s.host.link);
    set_if(r.integer("gpus_per_link", true, 1, 64), s.host.gpus_per_link);
    set_if(quantity_in(r, "link_bandwidth_per_direction", QuantityKind::bytes_per_second, true, kRate),
           s.host.link_bandwidth_per_direction_Bps);
    set_if(quantity_in(r, "link_bandwidth_both_directions", QuantityKind::bytes_per_second, true, kRate),
           s.host.link_bandwidth_both_directions_Bps);
    set_if(r.number("copy_efficiency", false, 0.01, 1.0), s.host.copy_efficiency);
    set_if(r.integer("gpus_per_host", true, 1, 1024), s.host.gpus_per_host);
    set_if(quantity_in(r, "memory_capacity", QuantityKind::bytes, true, kCapacity), s.host.memory_capacity_bytes);
    set_if(quantity_in(r, "memory_bandwidth", QuantityKind::bytes_per_second, true, kRate), s.host.memory_bandwidth_Bps);
    set_if(r.number("framework_speed", false, 0.01, 100.0), s.host.framework_speed);
    r.finish();
  }
  if (auto u = top.get("scale_up", true)) {
    MapReader r(*u);
    set_if(r.integer("nvlink_generation", true, 1, 10), s.scale_up.nvlink_generation);
    set_if(quantity_in(r, "bandwidth_per_direction", QuantityKind::bytes_per_second, true, kRate),
           s.scale_up.bandwidth_per_direction_Bps);
    set_if(r.integer("domain_size", true, 1, 100000), s.scale_up.domain_size);
    set_if(r.boolean("nvswitch", true), s.scale_up.nvswitch);
    set_if(r.boolean("nvls", true), s.scale_up.nvls);
    r.finish();
  }
  if (auto o = top.get("scale_out", true)) {
    MapReader r(*o);
    set_if(quantity_in(r, "nic_bandwidth", QuantityKind::bytes_per_second, true, kRate), s.scale_out.nic_bandwidth_Bps);
    set_if(r.integer("nics_per_gpu", true, 1, 64), s.scale_out.nics_per_gpu);
    set_if(r.number("nic_efficiency", false, 0.01, 1.0), s.scale_out.nic_efficiency);
    r.finish();
  }
  if (auto m = top.get("memory")) {
    MapReader r(*m);
    set_if(quantity_in(r, "reserved", QuantityKind::bytes, false, kReserved), s.memory.reserved_bytes);
    r.finish();
  }
  // Reported at the capacity where an override set it and left the reservation as the preset has it (the user's
  // what-if, not the preset's line, is what to change).
  const Node reserved = root.child("memory").child("reserved"), capacity = root.child("gpu").child("hbm_capacity");
  const auto& grafts = root.context()->grafts;
  const bool capacity_overridden = grafts.contains(capacity.internal_path()) && !grafts.contains(reserved.internal_path());
  if (s.gpu.hbm_capacity_bytes > 0 && s.memory.reserved_bytes >= s.gpu.hbm_capacity_bytes)
    (capacity_overridden ? capacity : reserved).error(
        fmt::format("{} reserved for the driver and libraries leaves nothing of the {} of HBM (gpu.hbm_capacity)",
                    sim::format_quantity(s.memory.reserved_bytes, QuantityKind::bytes),
                    sim::format_quantity(s.gpu.hbm_capacity_bytes, QuantityKind::bytes)));
  // Every number needs a citation (DESIGN.md: first principles, calibrated).
  std::vector<std::string> leaves;
  input::collect_leaf_paths(root.yaml(), "", leaves, {"sources"});
  if (auto src = top.get("sources", true)) {
    if (src->yaml().IsMap()) {
      for (auto it = src->yaml().begin(); it != src->yaml().end(); ++it) {
        const std::string key = it->first.Scalar();
        if (std::find(leaves.begin(), leaves.end(), key) == leaves.end()) {
          std::string msg = fmt::format("cites '{}', which is not a field of this preset", key);
          if (auto near = sim::nearest(key, leaves, 4)) msg += fmt::format("; did you mean '{}'?", *near);
          src->child(key).error(msg);
        } else if (it->second.IsScalar()) {
          s.sources[key] = it->second.Scalar();
        }
      }
      for (const auto& leaf : leaves)
        if (!kUncitedFields.count(leaf) && !s.sources.count(leaf))
          root.child(input::split_path(leaf)[0]).error(fmt::format("field '{}' has no entry in sources: cite where the number comes from", leaf));
    } else {
      src->error(fmt::format("expected a mapping of field path -> citation, got {}", src->describe()), input::DiagnosticKind::malformed_value);
    }
  }
  top.finish();
  return s;
}

namespace {

std::string preset_path(const std::string& name) { return presets_dir() + "/" + name + ".yaml"; }

void flatten_overrides(const Node& n, const std::string& prefix, std::vector<std::pair<std::string, Node>>& out) {
  if (!n.yaml().IsMap()) {
    n.error(fmt::format("expected a mapping of preset fields, got {}", n.describe()), input::DiagnosticKind::malformed_value);
    return;
  }
  std::vector<std::string> seen;
  for (auto it = n.yaml().begin(); it != n.yaml().end(); ++it) {
    if (!it->first.IsScalar()) {  // (had been skipped without a word: the run went on without the override)
      n.error(fmt::format("expected preset field names as keys, got a {} as a key", it->first.IsMap() ? "mapping" : "list"),
              input::DiagnosticKind::malformed_value);
      continue;
    }
    const std::string key = it->first.Scalar();
    if (!input::key_is_new(n, it->first, seen)) continue;  // (the simulation would run the first, the report echo the last)
    Node child = n.child(key);
    const std::string full = prefix.empty() ? key : prefix + "." + key;
    if (child.yaml().IsMap() && child.yaml().size() == 0)
      // `{}` for a field (or a group) sets nothing: said, not skipped (a sweep's `{}` point ran the preset's value).
      child.error("expected a value, or a mapping of preset fields, got an empty mapping", input::DiagnosticKind::malformed_value);
    else if (child.yaml().IsNull())
      // No value: said at the override (the merged preset's reader had called the field "required", without this path).
      n.key_of(key).error("no value (empty or null): give one, or leave the field out for the preset's own",
                          input::DiagnosticKind::malformed_value);
    else if (child.yaml().IsMap())
      flatten_overrides(child, full, out);
    else
      out.emplace_back(full, child);
  }
}

}  // namespace

void apply_framework_speed(SystemSpec& spec) {
  const double speed = spec.host.framework_speed;
  if (speed == 1.0) return;
  for (const auto& f : kLaunchFields) {
    if (f.member == &LaunchSpec::eager_kernel_gap_s) continue;  // the GPU's front end, not the host
    double& v = spec.launch.*f.member;
    if (v <= 0) continue;  // not modelled
    v /= speed;
    auto& src = spec.sources[std::string("launch.") + f.name];
    src = fmt::format("divided by host.framework_speed {:g}{}", speed, src.empty() ? "" : "; before: " + src);
  }
}

bool load_system_preset(const std::string& name, const Node* where_named, const std::optional<Node>& overrides_node,
                        const std::shared_ptr<input::LoadContext>& ctx, SystemSpec& out) {
  std::string path;
  const bool is_path = names_preset_file(name);
  if (is_path) {
    path = input::path_beside(where_named ? where_named->file() : "", name);
  } else {
    path = preset_path(name);
  }
  std::error_code ec;  // a name the file system refuses (too long, ...) is an unknown preset
  if (name.empty() || !fs::exists(path, ec)) {  // (a pipe or device is read, bounded, below; a directory said to be one)
    const auto names = list_system_presets();
    std::string msg = is_path       ? fmt::format("system preset file '{}' does not exist", path)
                      : name.empty() ? std::string("an empty name: name a system preset")
                                     : fmt::format("unknown system preset '{}'", name);
    if (!is_path) {
      if (auto near = name.empty() ? std::nullopt : sim::nearest(name, names, 4)) msg += fmt::format("; did you mean '{}'?", *near);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      msg += fmt::format(" (available: {})", list);
    }
    if (where_named)
      where_named->error(msg, input::DiagnosticKind::unknown_name);
    else
      ctx->diag->error({"<command line>", 0, 0}, "", msg, input::DiagnosticKind::unknown_name);
    return false;
  }
  // A preset without overrides that loaded before without errors (and is unchanged since) is
  // reused as it was.
  static input::FileCache<SystemSpec> loaded;
  if (!overrides_node) {
    if (auto spec = loaded.get(path)) {
      out = std::move(*spec);
      return true;
    }
  }
  const std::size_t errors_before = ctx->diag->size();
  auto root = input::load_yaml_file(path, ctx);
  if (!root) return false;
  YAML::Node tree = root->yaml();  // the loader's own copy
  // The override nodes, read while the scenario's grafts are in place (an override set with
  // --set names the --set).
  std::vector<std::pair<std::string, Node>> items;
  if (overrides_node) flatten_overrides(*overrides_node, "", items);
  // Grafts are per document: park the scenario's own (--set) grafts while the preset is read.
  auto scenario_grafts = std::move(ctx->grafts);
  ctx->grafts.clear();
  if (overrides_node) {
    std::vector<std::string> leaves;
    input::collect_leaf_paths(tree, "", leaves, {"sources", "name"});
    // Target field -> the key that set it and whether a set (--set, a sweep's axis, a validate case's set:) gave it.
    std::map<std::string, std::pair<std::string, bool>> spelled;
    for (auto& [key, node] : items) {
      std::string target;
      // (The scenario's grafts are parked: a command-line --set is known by its origin there, line -1, and its errors
      // name the option alone, where node.error would place them at the value's own 1:1.)
      const auto sg = scenario_grafts.find(node.internal_path());
      const bool command_line_set = sg != scenario_grafts.end() && sg->second.line < 0;
      const auto error_here = [&](const std::string& msg, input::DiagnosticKind kind = input::DiagnosticKind::other) {
        if (command_line_set) ctx->diag->error({node.file(), 0, 0}, node.path(), msg, kind);
        else node.error(msg, kind);
      };
      // A point of a table keyed by data (a token count, a GEMM shape), new or not, by full or short path (without
      // "gpu."): the table's reader checks its key.
      static const std::vector<std::string> kDataKeyedTables = [] {
        std::vector<std::string> v = {"gpu.sustained_gemm.bf16.", "gpu.sustained_gemm.fp8.", "gpu.sustained_gemm.mxfp8.",
                                      "gpu.sustained_gemm.nvfp4."};
        for (const SizeTable& t : kSizeTables) v.push_back(std::string("gpu.") + t.field + ".");
        return v;
      }();
      const auto table_point = [&key]() -> std::string {
        for (const std::string_view table : kDataKeyedTables) {
          if (key.starts_with(table)) return key;
          if (key.starts_with(table.substr(4))) return "gpu." + key;
        }
        return "";
      };
      if (std::find(leaves.begin(), leaves.end(), key) != leaves.end()) {
        target = key;
      } else if (const std::string point = table_point(); !point.empty()) {
        target = point;
      } else {
        // A unique leaf name (e.g. `nvls`) stands for its full path (scale_up.nvls).
        std::vector<std::string> matches;
        for (const auto& l : leaves)
          if (l == key || l.ends_with("." + key)) matches.push_back(l);
        // Optional fields absent from this preset may still be set by full path.
        static const std::vector<std::string> optional_fields = [] {
          std::vector<std::string> v = {
              "gpu.sfu_exp", "gpu.l2_cache", "gpu.tdp", "gpu.fp8_blockwise_rate_ratio", "gpu.fp8_blockwise_wgrad_rate_ratio", "gpu.tensor_clock",
              "gpu.mla_attention_forward_rate", "gpu.mla_attention_backward_rate", "gpu.wgrad_accumulate_serial_bytes",
              "gpu.wgrad_accumulate_serial_bytes_fp8", "gpu.wgrad_accumulate_serial_bytes_fp8_blockwise",
              "gpu.wgrad_accumulate_serial_bytes_16bit", "gpu.peak_dense.tf32", "gpu.peak_dense.bf16", "gpu.peak_dense.fp8", "gpu.peak_dense.mxfp8",
              "gpu.peak_dense.nvfp4", "host.copy_efficiency", "memory.reserved", "gpu.matmul_efficiency.tf32",
              "gpu.matmul_efficiency.bf16", "gpu.matmul_efficiency.fp8", "gpu.matmul_efficiency.mxfp8",
              "gpu.matmul_efficiency.nvfp4", "gpu.sustained_gemm.source", "scale_out.nic_efficiency",
              "host.framework_speed"};
          for (const auto& f : kLaunchFields)
            if (!f.required) v.push_back(std::string("launch.") + f.name);
          for (const SizeTable& t : kSizeTables) v.push_back(std::string("gpu.") + t.field);
          return v;
        }();
        // An optional field absent from this preset is named by its short name the same way.
        if (matches.empty())
          for (const auto& f : optional_fields)
            if (f.ends_with("." + key)) matches.push_back(f);
        if (matches.size() == 1) {
          target = matches[0];
        } else if (std::find(optional_fields.begin(), optional_fields.end(), key) != optional_fields.end()) {
          target = key;
        } else if (matches.size() > 1) {
          std::string list;
          for (const auto& m : matches) list += (list.empty() ? "" : ", ") + m;
          error_here(fmt::format("'{}' is ambiguous; write the full path: {}", key, list));
          continue;
        } else {
          std::string msg = fmt::format("unknown preset field '{}'", key);
          auto near = sim::nearest(key, leaves, std::max<std::size_t>(3, key.size() / 3));
          if (!near) {
            // A misspelt short name: compare with the last part of each field path.
            std::vector<std::string> last;
            for (const auto& l : leaves) last.push_back(l.substr(l.rfind('.') + 1));
            if (auto n = sim::nearest(key, last, std::max<std::size_t>(2, key.size() / 3)))
              near = leaves[std::find(last.begin(), last.end(), *n) - last.begin()];
          }
          if (near) msg += fmt::format("; did you mean '{}'?", *near);
          error_here(msg, input::DiagnosticKind::unknown_key);
          continue;
        }
      }
      // One field under two spellings (short, dotted, nested) would be decided by their order in the mapping: in one
      // file that is an error; a set's spelling replaces the file's, whatever the order (the set is the what-if).
      const bool from_set = node.where().file != overrides_node->file();
      if (auto [it, fresh] = spelled.emplace(target, std::make_pair(key, from_set)); !fresh) {
        const auto& [first_key, first_from_set] = it->second;
        if (first_from_set && !from_set) continue;  // the set, read first, stands
        if (from_set == first_from_set) {
          error_here(first_key == key
                         ? fmt::format("sets {} a second time: give each preset field once", target)
                         : fmt::format("sets {} a second time (as '{}' after '{}'): give each preset field once", target,
                                       key, first_key));
          continue;
        }
        it->second = {key, from_set};  // a set after the file's entry: it wins below
      }
      // Datasheet facts a preset records and the model does not read: an override of one changes no number, and a
      // "power-capped GPU" what-if through gpu.tdp must not look as if it ran.
      // Said once per place and process (a sweep loads the scenario at every point, on several threads).
      const input::SourceLocation w = command_line_set ? input::SourceLocation{node.file(), 0, 0} : node.where();
      // "file:line:column", or the option alone for a command-line --set (no line).
      const std::string at = input::format_location(w);
      if (target == "gpu.tdp" || target == "gpu.l2_cache" || target == "gpu.tensor_clock") {
        const std::string message = fmt::format(
            "{}: {}: recorded, not modelled: no part of the step depends on {} (to change a GPU's rates, override "
            "gpu.peak_dense.*, gpu.matmul_efficiency.* or gpu.hbm_bandwidth)",
            at, node.path(), target);
        warn_once(message);
      }
      if (target == "gpu.sm_count") {
        // Read for the SM share a collective's CTAs take beside compute (replay.cpp) and a calibration's loop-fusion
        // rate (calibration.cpp): a "fewer SMs" what-if through it must not look as if the GEMMs had slowed.
        const std::string message = fmt::format(
            "{}: {}: sets only the share of the SMs a collective's CTAs take beside compute (and whether a "
            "calibration's loop-fusion index rate, measured at its own SM count, applies); GEMM, attention and "
            "element-wise rates come from gpu.peak_dense.*, gpu.matmul_efficiency.* and gpu.hbm_bandwidth (scale those "
            "for a part with fewer SMs)",
            at, node.path());
        warn_once(message);
      }
      input::set_by_path(tree, target, node.yaml());
      ctx->grafts[target] = {node.file(), node.path(), command_line_set ? -1 : 0, 0};
      // Keys of `sources` are dotted paths themselves: set the entry directly. A table replaced by one value (e.g.
      // gpu.bf16_wgrad_nt_time_ratio: 1) takes its points' citations with it.
      std::vector<std::string> replaced;
      for (auto it = tree["sources"].begin(); it != tree["sources"].end(); ++it)
        if (it->first.IsScalar() && it->first.Scalar().starts_with(target + ".")) replaced.push_back(it->first.Scalar());
      for (const auto& k : replaced) tree["sources"].remove(k);
      tree["sources"][target] = fmt::format("scenario override at {}", at);
    }
  }
  Node rooted(tree, path, "", "", ctx);
  out = parse_system_preset(rooted);
  if (!is_path && out.name != name && !out.name.empty())
    rooted.child("name").error(fmt::format("preset file is {}.yaml but its name is '{}'", name, out.name));
  ctx->grafts = std::move(scenario_grafts);
  if (ctx->diag->size() != errors_before)
    input::forget_parsed_yaml(path);  // (so that a later load places its errors)
  else if (!overrides_node)
    loaded.put(path, out);
  return true;
}

std::vector<PresetField> preset_fields(const std::string& name) {
  auto ctx = std::make_shared<input::LoadContext>();
  input::Diagnostics diag;
  ctx->diag = &diag;
  // (a preset file as load_system_preset reads one: `hw show PATH.yaml` had looked for presets/PATH.yaml.yaml)
  auto root = input::load_yaml_file(names_preset_file(name) ? name : preset_path(name), ctx);
  diag.throw_if_any();
  std::vector<std::string> leaves;
  input::collect_leaf_paths(root->yaml(), "", leaves, {"sources"});
  std::vector<PresetField> rows;
  for (const auto& leaf : leaves) {
    YAML::Node cur = YAML::Clone(root->yaml());
    for (const auto& part : input::split_path(leaf)) cur.reset(cur[part]);
    std::string src;
    YAML::Node sources = root->yaml()["sources"];
    if (sources && sources[leaf]) src = sources[leaf].Scalar();
    rows.push_back({leaf, cur.Scalar(), src});
  }
  return rows;
}

}  // namespace racksim::hw
