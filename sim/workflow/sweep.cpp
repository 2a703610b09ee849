#include "sim/workflow/sweep.h"

#include "hardware_models/calibration.h"

#include <cmath>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <ostream>

#include "core/units.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "input/yaml_reader.h"
#include "sim/run/run.h"
#include "sim/workflow/util.h"

namespace racksim::workflow {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using nlohmann::json;

namespace {

// One value of an axis as the override it makes; a warning about it (a mapping value that drops the base's keys) names
// the axis where the sweep file has it.
sim::SetOverride axis_set(const SweepSpec& spec, const VaryKey& key, const std::string& value) {
  sim::SetOverride set{key.path, value};
  set.warn_label = fmt::format("{}:{}:{}: vary.{} value {}", spec.file, key.line, key.column, key.path, value);
  return set;
}
// The same at a point: what its value drops was said when the sweep was loaded (each value is probed then), not again
// at every point.
sim::SetOverride point_set(const SweepSpec& spec, const VaryKey& key, const std::string& value) {
  sim::SetOverride set = axis_set(spec, key, value);
  set.warn_dropped = false;
  return set;
}

// A load error about a key itself (a name the scenario or the preset does not have), not about a value.
bool names_a_key(const input::Diagnostic& d) { return d.kind == input::DiagnosticKind::unknown_key; }

SweepSpec parse_sweep(const Node& root) {
  SweepSpec spec;
  spec.file = root.file();
  input::Diagnostics& diag = root.diag();
  if (input::refuse_other_kind_of_file(root, "sweep")) diag.throw_if_any();
  MapReader r(root);
  std::optional<Node> base_node = r.get("base", true);
  std::optional<Node> vary = r.get("vary", true);
  r.finish();
  const std::size_t errors_before_base = diag.size();
  if (base_node) {
    if (auto b = base_node->as_string()) {
      spec.base = relative_to(spec.file, *b);
      std::error_code ec;
      if (!fs::is_regular_file(spec.base, ec)) {
        base_node->error(fmt::format("cannot open the base scenario '{}' (looked for {})", *b, spec.base));
      } else if (!spec.file.empty() && input::same_file(spec.base, spec.file)) {
        base_node->error(fmt::format("the base scenario '{}' is this sweep file: name the scenario the points vary", *b));
      } else {
        // A base that cannot be read as YAML (empty, binary, malformed) fails every point alike: said once, here, with
        // its own file:line:column, instead of a sweep that "succeeds" with an error in every row. What a point's
        // values make invalid stays that point's error.
        input::LoadSession base_session;
        const auto base_root = input::load_yaml_file(spec.base, base_session.ctx);
        base_session.diag.throw_if_any();
        if (base_root && !base_root->yaml().IsMap())
          base_node->error(fmt::format("the base scenario '{}' is not a mapping of scenario keys ({})", *b,
                                       base_root->describe()));
      }
    }
  }
  // (A base that cannot be read is said above; its keys are not probed below.)
  const bool base_readable = !spec.base.empty() && diag.size() == errors_before_base;
  std::vector<YAML::Mark> key_marks;
  std::vector<std::vector<YAML::Mark>> value_marks;  // per key, per value
  if (vary) {
    spec.vary_line = vary->where().line;
    spec.vary_column = vary->where().column;
    if (!vary->yaml().IsMap()) {
      vary->error(fmt::format("expected a mapping of key paths to lists of values, got {}", vary->describe()));
    } else if (vary->yaml().size() == 0) {
      vary->error("needs at least one key path with a list of values");
    } else {
      for (auto it = vary->yaml().begin(); it != vary->yaml().end(); ++it) {
        const YAML::Mark km = it->first.Mark();
        const input::SourceLocation kloc{spec.file, km.line + 1, km.column + 1};
        if (!it->first.IsScalar()) {
          diag.error(kloc, vary->path(), "a key must be a scenario key path such as training.parallelism.tp");
          continue;
        }
        const std::string key = it->first.Scalar();
        const std::string kpath = "vary." + key;
        if (!is_key_path(key)) {
          diag.error(kloc, kpath, fmt::format("'{}' is not a key path (letters, digits, '_', '-' joined by '.')", key));
          continue;
        }
        bool dup = false;
        for (const auto& k : spec.keys) dup = dup || k.path == key;
        if (dup) {
          diag.error(kloc, kpath, "duplicate key");
          continue;
        }
        // One axis inside another's value (training.parallelism and training.parallelism.tp): whichever is applied
        // last wins, so a row's label would not say what ran.
        const auto inside = [](const std::string& a, const std::string& b) { return a.rfind(b + ".", 0) == 0; };
        const auto nested = std::find_if(spec.keys.begin(), spec.keys.end(),
                                         [&](const VaryKey& k) { return inside(key, k.path) || inside(k.path, key); });
        if (nested != spec.keys.end()) {
          diag.error(kloc, kpath, fmt::format("'{}' and the axis '{}' set the same key (one lies inside the other's value): "
                                              "vary one of them",
                                              key, nested->path));
          continue;
        }
        const Node values = vary->child(key);
        if (!values.yaml().IsSequence()) {
          values.error(fmt::format("expected a list of values ([a, b, ...]), got {}", values.describe()));
          continue;
        }
        if (values.yaml().size() == 0) {
          values.error("the list of values is empty: a sweep needs at least one value per key");
          continue;
        }
        VaryKey vk{key, {}, km.line + 1, km.column + 1};
        std::vector<YAML::Mark> marks;
        for (std::size_t i = 0; i < values.yaml().size(); ++i) {
          const Node v = values.element(i);
          if (!v.yaml().IsDefined() || v.yaml().IsNull()) {
            v.error("expected a value, got nothing (null)");
            continue;
          }
          vk.values.push_back(flow_yaml(v.yaml()));
          marks.push_back(v.yaml().Mark());
        }
        if (vk.values.empty()) continue;  // every value refused above: nothing of this key to probe
        spec.keys.push_back(std::move(vk));
        key_marks.push_back(km);
        value_marks.push_back(std::move(marks));
      }
    }
  }
  // The product must be countable.
  if (diag.empty()) {
    double n = 1;
    for (const auto& k : spec.keys) n *= static_cast<double>(k.values.size());
    if (n > kMaxSweepTotalPoints)
      vary->error(fmt::format("{:.4g} points: more than a sweep file may describe ({:.0e}, however it is sharded; "
                              "docs/decisions.md, \"Input limits\")",
                              n, kMaxSweepTotalPoints));
  }
  // (No stop here unless the base is unreadable: the keys read so far are probed with the errors above, so that one
  // file's mistakes are said together; a review found a misspelt key hidden behind an empty list until it was fixed.)
  if (!base_readable) diag.throw_if_any();

  // A vary key the scenario does not have would make every row an error; report it here, at
  // the key. Probe the base with the first value of every key and keep only the errors about
  // the keys themselves (invalid values are per-point results).
  std::vector<sim::SetOverride> probe;
  for (const auto& k : spec.keys) probe.push_back(point_set(spec, k, k.values.front()));  // (each value says its own below)
  try {
    sim::load_scenario(spec.base, probe);
  } catch (const input::InputError& e) {
    for (const auto& d : e.diagnostics()) {
      // (An unknown field of system.overrides is the preset's "unknown preset field". A key inside a mapping value,
      // `training.parallelism: [{tpp: 2}]`, is the value's fault: the per-value probe below reports it there.)
      if (!names_a_key(d)) continue;
      for (std::size_t i = 0; i < spec.keys.size(); ++i) {
        const std::string& p = spec.keys[i].path;
        if (d.key_path == p || p.rfind(d.key_path + ".", 0) == 0) {
          diag.error({spec.file, key_marks[i].line + 1, key_marks[i].column + 1}, "vary." + p,
                     fmt::format("not a key of the base scenario: {}", d.message));
          break;
        }
      }
    }
  } catch (const std::exception&) {
    // Anything else is a per-point result.
  }
  diag.throw_if_any();
  // A value its key cannot take (not a number, no unit, not one of the names) is an input error, reported at the
  // value; a value that is well-formed but makes the layout impossible (tp not dividing heads) stays a per-point
  // result, as the other keys' values may decide it. Each distinct value is probed alone on the base.
  for (std::size_t i = 0; i < spec.keys.size(); ++i) {
    const auto& k = spec.keys[i];
    for (std::size_t j = 0; j < k.values.size(); ++j) {
      if (std::find(k.values.begin(), k.values.begin() + static_cast<std::ptrdiff_t>(j), k.values[j]) !=
          k.values.begin() + static_cast<std::ptrdiff_t>(j))
        continue;  // probed already
      try {
        sim::load_scenario(spec.base, {axis_set(spec, k, k.values[j])});
      } catch (const input::InputError& e) {
        for (const auto& d : e.diagnostics()) {
          const bool inside = d.key_path.rfind(k.path + ".", 0) == 0;  // a key of the value's own mapping
          // (A value outside its key's fixed range is as invalid whatever the other axes hold: the reader's bounds
          // are constants. So is a preset or calibration name that names none, or a file of one that cannot be read
          // as one.) The loaders say which a diagnostic is where they write it (input::DiagnosticKind).
          const bool malformed = d.kind == input::DiagnosticKind::malformed_value ||
                                 d.kind == input::DiagnosticKind::unknown_name || (inside && names_a_key(d));
          if (!malformed || !(d.key_path == k.path || inside)) continue;
          const YAML::Mark& m = value_marks[i][j];
          diag.error({spec.file, m.line + 1, m.column + 1}, "vary." + k.path,
                     inside ? fmt::format("a value of this axis: {}", d.message) : d.message);
          break;
        }
      } catch (const std::exception&) {
        // A per-point result.
      }
    }
  }
  diag.throw_if_any();
  return spec;
}

SweepSpec load_from(std::optional<Node> root, input::Diagnostics& diag) {
  if (!root) diag.throw_if_any();
  return parse_sweep(*root);
}

// How a row shows an error: a diagnostic that came from the point's own --set value needs no
// location (the row shows the values); one from a file keeps file:line:col.
std::string describe_error(const input::InputError& e) {
  std::string out;
  for (const auto& d : e.diagnostics()) {
    std::string one;
    if (d.where.file.rfind("--set ", 0) == 0)
      one = (d.key_path.empty() ? "" : d.key_path + ": ") + d.message;
    else
      one = d.format();
    out += (out.empty() ? "" : "; ") + one;
  }
  return one_line(out);
}

std::string number_cell(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return "";
}

const json* lookup(const json& report, const std::string& column) {
  const json* cur = &report;
  std::size_t pos = 0;
  while (true) {
    const std::size_t dot = column.find('.', pos);
    const std::string part = column.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

}  // namespace

std::size_t SweepSpec::size() const {
  std::size_t n = keys.empty() ? 0 : 1;
  for (const auto& k : keys) n *= k.values.size();
  return n;
}

SweepSpec load_sweep(const std::string& path) {
  input::LoadSession session;
  return load_from(input::load_yaml_file(path, session.ctx), session.diag);
}

SweepSpec load_sweep_text(const std::string& text, const std::string& file_label) {
  input::LoadSession session;
  return load_from(input::load_yaml_text(text, file_label, session.ctx), session.diag);
}

std::vector<std::string> point_values(const SweepSpec& spec, std::size_t index) {
  // Mixed radix, the last key fastest.
  std::vector<std::string> out(spec.keys.size());
  for (std::size_t k = spec.keys.size(); k-- > 0;) {
    const auto& vals = spec.keys[k].values;
    out[k] = vals[index % vals.size()];
    index /= vals.size();
  }
  return out;
}

std::vector<sim::SetOverride> point_overrides(const SweepSpec& spec, std::size_t index) {
  const auto vals = point_values(spec, index);
  std::vector<sim::SetOverride> sets;
  for (std::size_t k = 0; k < spec.keys.size(); ++k) sets.push_back(point_set(spec, spec.keys[k], vals[k]));
  return sets;
}

Shard parse_shard(const std::string& text) {
  auto fail = [&] {
    input::Diagnostics diag;
    diag.error({"--shard " + text, 0, 0}, "", "expected K/N with 0 <= K < N (e.g. --shard 0/4; K counts from 0)");
    diag.throw_if_any();
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) fail();
  auto parse = [&](const std::string& s) -> long {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail();
    return std::strtol(s.c_str(), nullptr, 10);
  };
  const long k = parse(text.substr(0, slash));
  const long n = parse(text.substr(slash + 1));
  if (n < 1 || k >= n) fail();
  return {static_cast<int>(k), static_cast<int>(n)};
}

std::size_t shard_size(std::size_t total, Shard shard) {
  const auto k = static_cast<std::size_t>(shard.index), n = static_cast<std::size_t>(shard.count);
  return k >= total ? 0 : (total - k + n - 1) / n;
}

void check_sweep_size(const SweepSpec& spec, Shard shard, bool html_report) {
  const std::size_t total = spec.size();
  const std::size_t here = shard_size(total, shard);
  const std::size_t limit = html_report ? kMaxSweepReportPoints : kMaxSweepPoints;
  // More shards than points (a job array larger than the sweep): this one has nothing to run; the CSV is its header.
  if (here == 0)
    spdlog::warn("shard {}/{} of a sweep of {} points has no points: only the CSV header is written", shard.index,
                 shard.count, total);
  if (here <= limit) return;
  const std::size_t shards = (total + limit - 1) / limit;
  const std::string whole = shard.count > 1 ? fmt::format(" (shard {}/{} of {} points)", shard.index, shard.count, total) : "";
  input::Diagnostics diag;
  diag.error({spec.file, spec.vary_line, spec.vary_column}, "vary",
             html_report
                 ? fmt::format("{} points in this run{}: an HTML report (--report) charts at most {}; shard the sweep "
                               "(--shard K/{} or more) or leave out --report",
                               here, whole, kMaxSweepReportPoints, shards)
                 : fmt::format("{} points in this run{}: more than the {} one run simulates (docs/decisions.md, "
                               "\"Input limits\"); split it with --shard K/N, N >= {} (a Slurm job array)",
                               here, whole, kMaxSweepPoints, shards));
  diag.throw_if_any();
}

std::vector<std::size_t> shard_points(std::size_t total, Shard shard) {
  std::vector<std::size_t> out;
  for (std::size_t i = static_cast<std::size_t>(shard.index); i < total; i += static_cast<std::size_t>(shard.count))
    out.push_back(i);
  return out;
}

PointResult run_point(const SweepSpec& spec, std::size_t index, const SweepOptions& options, sim::ReplayCache* cache) {
  PointResult r;
  r.index = index;
  r.values = point_values(spec, index);
  try {
    sim::SimulateOptions opt;
    opt.exact = options.exact;
    opt.keep_detail = false;
    opt.cache = cache;
    opt.report_scenario = false;  // erased below
    auto res = sim::simulate(sim::load_scenario(spec.base, point_overrides(spec, index)), opt);
    r.report = std::move(res.report);
    r.report.erase("scenario");
    // A sweep over presets can mix a preset's default calibration with a preset that has none: the CSV says which.
    r.calibration = hw::applied_calibration_name(res.job.system.spec);
  } catch (const input::InputError& e) {
    r.error = describe_error(e);
  } catch (const sim::UnitError& e) {
    r.error = one_line(e.what());
  } catch (const std::invalid_argument& e) {
    r.error = one_line(e.what());
  } catch (const std::exception& e) {
    r.error = one_line(std::string("internal error: ") + e.what());
  }
  if (!r.error.empty()) r.report = nullptr;
  return r;
}

std::vector<PointResult> run_sweep(const SweepSpec& spec, const std::vector<std::size_t>& points, int jobs,
                                   const ProgressFn& progress, const SweepOptions& options) {
  std::vector<PointResult> out(points.size());
  sim::ReplayCache cache;
  parallel_for(points.size(), jobs, [&](std::size_t i) { out[i] = run_point(spec, points[i], options, &cache); },
               progress);
  return out;
}

void run_sweep_streaming(const SweepSpec& spec, Shard shard, int jobs, const ProgressFn& progress,
                         const std::function<void(PointResult&&)>& row, const SweepOptions& options) {
  const std::size_t n = shard_size(spec.size(), shard);
  sim::ReplayCache cache;
  const auto index = [&](std::size_t k) {
    return static_cast<std::size_t>(shard.index) + k * static_cast<std::size_t>(shard.count);
  };
  // Points that differ only in the last varied key are neighbours (the last key varies fastest) and, when
  // that key is the global batch as in a capacity sweep, share their replays (ReplayCache). A worker takes
  // such a run of points as one item: two workers that took neighbours one by one made the same replay,
  // one of them waiting for the other (a 2-thread sweep ran on about one core). Kept to one point an item
  // when there would be fewer than two items per worker, or with a shard (its points are not neighbours).
  const std::size_t last = spec.keys.empty() ? 1 : std::max<std::size_t>(1, spec.keys.back().values.size());
  const auto workers = static_cast<std::size_t>(std::max(1, jobs));
  const std::size_t run = shard.count == 1 && n / last >= 2 * workers ? last : 1;
  const std::size_t items = (n + run - 1) / run;
  auto points_of = [&](std::size_t item) {
    return std::make_pair(item * run, std::min(n, (item + 1) * run));  // [first, end) of shard positions
  };
  // Results wait here from when they finish until every earlier point is written.
  std::mutex m;
  std::map<std::size_t, PointResult> waiting;
  ProgressFn item_progress;
  if (progress) item_progress = [&](std::size_t d, std::size_t) { progress(std::min(n, d * run), n); };
  parallel_for(
      items, jobs,
      [&](std::size_t item) {
        for (auto [k, end] = points_of(item); k < end; ++k) {
          PointResult r = run_point(spec, index(k), options, &cache);
          std::lock_guard<std::mutex> lock(m);
          waiting.emplace(k, std::move(r));
        }
      },
      item_progress, 100, [&](std::size_t item) {
        for (auto [k, end] = points_of(item); k < end; ++k) {
          PointResult r;
          {
            std::lock_guard<std::mutex> lock(m);
            auto it = waiting.find(k);
            r = std::move(it->second);
            waiting.erase(it);
          }
          row(std::move(r));
        }
      });
}

const std::vector<std::string>& report_columns() {
  static const std::vector<std::string> cols = {
      "step_time_s",
      "tokens_per_s_per_gpu",
      "model_tflops_per_gpu",
      "mfu",
      "peak_memory_bytes",
      "memory_capacity_bytes",
      "host_memory_bytes",
      "breakdown_s.compute",
      "breakdown_s.recompute",
      "breakdown_s.exposed_communication",
      "breakdown_s.exposed_offload",
      "breakdown_s.launch_overhead",
      "breakdown_s.pipeline_bubble",
      "breakdown_s.idle",
      "memory_breakdown_bytes.weights",
      "memory_breakdown_bytes.gradients",
      "memory_breakdown_bytes.optimizer",
      "memory_breakdown_bytes.activations",
      "memory_breakdown_bytes.communication_buffers",
      "memory_breakdown_bytes.other",
  };
  return cols;
}

std::optional<double> report_number(const json& report, const std::string& column) {
  const json* v = lookup(report, column);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>() ? 1.0 : 0.0;
  if (v->is_number()) return v->get<double>();
  return std::nullopt;
}

std::vector<std::string> csv_header(const SweepSpec& spec) {
  std::vector<std::string> h = {"point"};  // the point's index in the whole sweep (shards keep it)
  for (const auto& k : spec.keys) h.push_back(k.path);
  for (const auto& c : report_columns()) h.push_back(c);
  h.push_back("fits");
  h.push_back("error");
  h.push_back("warnings");
  h.push_back("calibration");  // added 2026-12-07 (after warnings, so a CSV reader by position keeps working)
  return h;
}

// A point's caveats for the CSV: the report's warnings, joined with " | ", less what says the same on every point of a
// system (the calibration's statement of its own fit, or that there is none; how the step was extrapolated from its
// micro-steps) and what `fits` already says. A row the framework would refuse (layers the virtual stages do not divide) or whose GPUs idle
// must not look as clean as the others.
std::string point_warnings(const json& report) {
  const json* w = report.is_null() ? nullptr : lookup(report, "warnings");
  if (!w || !w->is_array()) return "";
  std::string out;
  for (const auto& e : *w) {
    if (!e.is_string()) continue;
    const std::string& text = e.get_ref<const std::string&>();
    if (text.starts_with("calibration: ") || text.starts_with("uncalibrated: ") || text.starts_with("does not fit: ") ||
        text.find(" micro-steps: simulated ") != std::string::npos)
      continue;
    out += (out.empty() ? "" : " | ") + text;
  }
  return out;
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i) out += ',';
    const std::string& c = cells[i];
    if (c.find_first_of(",\"\n\r") == std::string::npos) {
      out += c;
    } else {
      out += '"';
      for (char ch : c) {
        if (ch == '"') out += '"';
        out += ch;
      }
      out += '"';
    }
  }
  out += '\n';
  return out;
}

std::string csv_row(const SweepSpec&, const PointResult& r) {
  std::vector<std::string> cells = {std::to_string(r.index)};
  cells.insert(cells.end(), r.values.begin(), r.values.end());
  for (const auto& c : report_columns()) {
    const json* v = r.report.is_null() ? nullptr : lookup(r.report, c);
    cells.push_back(v ? number_cell(*v) : "");
  }
  const json* fits = r.report.is_null() ? nullptr : lookup(r.report, "fits");
  cells.push_back(fits ? number_cell(*fits) : "");
  cells.push_back(r.error);
  cells.push_back(point_warnings(r.report));
  cells.push_back(r.error.empty() ? r.calibration : "");
  return csv_line(cells);
}

void write_csv(std::ostream& out, const SweepSpec& spec, const std::vector<PointResult>& results) {
  out << csv_line(csv_header(spec));
  for (const auto& r : results) out << csv_row(spec, r);
}

namespace {

// RFC 4180 records of `text` (quoted fields may hold commas, quotes doubled, line breaks), each with
// the line it starts on.
std::vector<std::pair<int, std::vector<std::string>>> parse_csv(const std::string& text) {
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  int line = 1, start = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        cell += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(cell));
      cell.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !cell.empty()) {
        row.push_back(std::move(cell));
        rows.emplace_back(start, std::move(row));
      }
      row.clear();
      cell.clear();
      any = false;
      start = ++line;
    } else {
      cell += c;
      any = true;
    }
  }
  if (any || !cell.empty()) {
    row.push_back(std::move(cell));
    rows.emplace_back(start, std::move(row));
  }
  return rows;
}

// A CSV number cell back to JSON: true/false, an integer, or a double; null when empty.
json cell_value(const std::string& c) {
  if (c.empty()) return nullptr;
  if (c == "true") return true;
  if (c == "false") return false;
  const bool integer = c.find_first_not_of("-0123456789") == std::string::npos;
  char* end = nullptr;
  if (integer) {
    const long long v = std::strtoll(c.c_str(), &end, 10);
    if (end && *end == '\0') return v;
  }
  const double d = std::strtod(c.c_str(), &end);
  if (!end || *end != '\0') return nullptr;
  return d;
}

}  // namespace

std::vector<PointResult> read_sweep_csvs(const SweepSpec& spec, const std::vector<std::string>& paths,
                                         std::size_t* missing) {
  const auto header = csv_header(spec);
  const std::size_t total = spec.size();
  const std::size_t nkeys = spec.keys.size();
  std::map<std::size_t, std::pair<std::string, int>> seen;  // point -> file, line
  std::vector<PointResult> out;
  for (const auto& path : paths) {
    auto fail = [&](int line, const std::string& msg) {
      input::Diagnostics diag;
      diag.error({path, line, 0}, "", msg);
      diag.throw_if_any();
    };
    const std::string text =
        input::read_file_bounded(path, input::limits::kMaxMeasurementFileBytes, "a sweep CSV", input::Binary::stop);
    const auto rows = parse_csv(text);
    // A shard written before the warnings column (2026-12-05) or the calibration column (2026-12-07) is read as it was.
    const std::vector<std::string> before_calibration(header.begin(), header.end() - 1);
    const std::vector<std::string> before_warnings(header.begin(), header.end() - 2);
    const bool has_calibration = !rows.empty() && rows.front().second == header;
    const bool has_warnings = has_calibration || (!rows.empty() && rows.front().second == before_calibration);
    if (rows.empty() || (!has_warnings && rows.front().second != before_warnings))
      fail(1, fmt::format("not a CSV of the sweep {}: expected the header '{}'", spec.file,
                          one_line(csv_line(header))));
    const std::size_t width =
        has_calibration ? header.size() : has_warnings ? before_calibration.size() : before_warnings.size();
    const std::size_t fits_col = 1 + nkeys + report_columns().size(), error_col = fits_col + 1;
    for (std::size_t r = 1; r < rows.size(); ++r) {
      const auto& [line, cells] = rows[r];
      if (cells.size() != width)
        fail(line, fmt::format("{} cells, expected {}", cells.size(), width));
      const json idx = cell_value(cells[0]);
      if (!idx.is_number_integer() || idx.get<long long>() < 0 || static_cast<std::size_t>(idx.get<long long>()) >= total)
        fail(line, fmt::format("point '{}' is not a point index of the sweep (0 to {})", cells[0], total - 1));
      PointResult p;
      p.index = static_cast<std::size_t>(idx.get<long long>());
      p.values.assign(cells.begin() + 1, cells.begin() + 1 + static_cast<std::ptrdiff_t>(nkeys));
      if (p.values != point_values(spec, p.index))
        fail(line, fmt::format("point {} has other values than the sweep's point {} (a CSV of another sweep?)",
                               p.index, p.index));
      if (auto [it, fresh] = seen.emplace(p.index, std::make_pair(path, line)); !fresh)
        fail(line, fmt::format("point {} is also in {} (line {}): shards must not overlap", p.index,
                               it->second.first, it->second.second));
      p.error = cells[error_col];
      if (has_calibration) p.calibration = cells[error_col + 2];
      if (p.error.empty()) {
        p.report = json::object();
        const auto& cols = report_columns();
        for (std::size_t c = 0; c < cols.size(); ++c) {
          const std::string& cell = cells[1 + nkeys + c];
          json v = cell_value(cell);
          // A report figure is a finite number, none negative (a shard edited or damaged by hand had passed as an empty
          // cell, 'nan' or -5 into the merged CSV and the report).
          if (!cell.empty() && (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0))
            fail(line, fmt::format("column {} ({}): '{}' is not a report figure (a finite number, not negative)",
                                   2 + nkeys + c, cols[c], cell));
          if (v.is_null()) continue;
          json* cur = &p.report;
          std::size_t pos = 0;
          const std::string& name = cols[c];
          for (std::size_t dot; (dot = name.find('.', pos)) != std::string::npos; pos = dot + 1)
            cur = &(*cur)[name.substr(pos, dot - pos)];
          (*cur)[name.substr(pos)] = std::move(v);
        }
        // A point that ran says whether it fits (a cell of TRUE or maybe had been dropped without a word).
        if (json f = cell_value(cells[fits_col]); f.is_boolean())
          p.report["fits"] = f;
        else
          fail(line, fmt::format("column {} (fits): '{}' is not true or false", 1 + fits_col, cells[fits_col]));
        if (has_warnings && !cells[error_col + 1].empty()) {
          json& w = p.report["warnings"] = json::array();
          const std::string& all = cells[error_col + 1];
          for (std::size_t pos = 0;;) {
            const std::size_t bar = all.find(" | ", pos);
            w.push_back(all.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
            if (bar == std::string::npos) break;
            pos = bar + 3;
          }
        }
      }
      out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const PointResult& a, const PointResult& b) { return a.index < b.index; });
  if (missing) *missing = total - out.size();
  return out;
}

std::string one_line(const std::string& message) {
  std::string out;
  for (std::size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '\n') {
      if (!out.empty() && i + 1 < message.size()) out += "; ";
    } else if (c == '\r' || c == '\t') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace racksim::workflow
