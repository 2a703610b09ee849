#include "sim/workflow/validate.h"

#include <map>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/text.h"
#include "core/units.h"
#include "input/diagnostics.h"
#include "input/yaml_reader.h"
#include "sim/run/run.h"
#include "sim/workflow/sweep.h"
#include "sim/workflow/thread_pool.h"
#include "sim/workflow/util.h"

namespace racksim::workflow {

namespace fs = std::filesystem;
using input::MapReader;
using input::Node;
using nlohmann::json;

namespace {

std::vector<std::string> measurable_fields() {
  std::vector<std::string> f = report_columns();
  f.push_back("fits");
  return f;
}

// A path named at `n`, resolved against the suite; an error at `n` when no such file exists.
std::optional<std::string> existing_file(const Node& n, const std::string& suite_file, const char* what) {
  auto s = n.as_string();
  if (!s) return std::nullopt;
  const std::string path = relative_to(suite_file, *s);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    const bool special = fs::exists(path, ec) && !fs::is_directory(path, ec);
    n.error(fmt::format("cannot open the {} '{}' (looked for {}{})", what, *s, path,
                        special ? ": not a regular file (a device, a pipe or a socket)" : ""));
    return std::nullopt;
  }
  return path;
}

std::vector<sim::SetOverride> parse_sets(const Node& n) {
  std::vector<sim::SetOverride> out;
  if (!n.yaml().IsMap()) {
    n.error(fmt::format("expected a mapping of key paths to values ({{training.micro_batch: 2}}), got {}",
                        n.describe()));
    return out;
  }
  std::vector<std::string> seen;
  for (auto it = n.yaml().begin(); it != n.yaml().end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    const Node v = n.child(key);
    if (!input::key_is_new(n, it->first, seen)) continue;  // (the later one had won, unsaid)
    if (!is_key_path(key)) {
      const YAML::Mark m = it->first.Mark();
      n.diag().error({n.file(), m.line + 1, m.column + 1}, n.path(),
                     fmt::format("'{}' is not a key path (letters, digits, '_', '-' joined by '.')", key));
      continue;
    }
    if (!it->second.IsDefined() || it->second.IsNull()) {
      v.error("expected a value, got nothing (null)");
      continue;
    }
    const YAML::Mark m = it->first.Mark();  // errors about the set name the suite's entry, not a --set
    out.push_back({key, flow_yaml(it->second), "set:", {n.file(), m.line + 1, m.column + 1}});
  }
  return out;
}

std::optional<ScenarioRef> parse_side(const Node& n, const std::string& suite_file) {
  if (n.yaml().IsScalar()) {
    auto p = existing_file(n, suite_file, "scenario");
    if (!p) return std::nullopt;
    return ScenarioRef{*p, {}};
  }
  if (!n.yaml().IsMap()) {
    n.error(fmt::format("expected a scenario path or {{scenario: PATH, set: {{...}}}}, got {}", n.describe()));
    return std::nullopt;
  }
  MapReader r(n);
  ScenarioRef ref;
  bool ok = true;
  if (auto s = r.get("scenario", true)) {
    auto p = existing_file(*s, suite_file, "scenario");
    ok = ok && p.has_value();
    if (p) ref.path = *p;
  } else {
    ok = false;
  }
  if (auto s = r.get("set")) ref.sets = parse_sets(*s);
  r.finish();
  if (!ok) return std::nullopt;
  return ref;
}

// A measured value: a plain number, or a quantity in the unit the field's name implies.
std::optional<double> measured_number(const Node& v, const std::string& field) {
  if (v.yaml().IsScalar()) {
    const std::string& s = v.yaml().Scalar();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return d;
    auto ends_with = [&](const char* suffix) {
      const std::string x(suffix);
      return field.size() >= x.size() && field.compare(field.size() - x.size(), x.size(), x) == 0;
    };
    if (ends_with("_bytes")) return v.as_quantity(sim::QuantityKind::bytes);
    if (ends_with("_s")) return v.as_quantity(sim::QuantityKind::seconds);
  }
  return v.as_number(-1e308, 1e308);
}

void parse_measured(const Node& n, SuiteCase& c) {
  if (!n.yaml().IsMap() || n.yaml().size() == 0) {
    n.error(fmt::format("expected a mapping of report fields to measured values ({{step_time_s: 0.418}}), got {}",
                        n.yaml().IsMap() ? "an empty mapping" : n.describe()));
    return;
  }
  const auto fields = measurable_fields();
  for (auto it = n.yaml().begin(); it != n.yaml().end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    const YAML::Mark m = it->first.Mark();
    const input::SourceLocation kloc{n.file(), m.line + 1, m.column + 1};
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      std::string msg = fmt::format("'{}' is not a scalar field of the run report", key);
      if (auto near = sim::nearest(key, fields, std::max<std::size_t>(3, key.size() / 3)))
        msg += fmt::format("; did you mean '{}'?", *near);
      else
        msg += "; expected one of " + [&] {
          std::string l;
          for (const auto& f : fields) l += (l.empty() ? "" : ", ") + f;
          return l;
        }();
      n.diag().error(kloc, n.path() + "." + key, msg);
      continue;
    }
    bool dup = false;
    for (const auto& e : c.measured) dup = dup || e.field == key;
    if (dup) {
      n.diag().error(kloc, n.path() + "." + key, "duplicate key");
      continue;
    }
    const Node v = n.child(key);
    Expectation e;
    e.field = key;
    if (key == "fits") {
      auto b = v.as_bool();
      if (!b) continue;
      e.is_bool = true;
      e.flag = *b;
    } else {
      auto d = measured_number(v, key);
      if (!d) continue;
      if (!(*d > 0)) {  // (the check is an error relative to it)
        v.error(fmt::format("a measured {} must be positive: the check is the prediction's error relative to it, got {}",
                            key, v.describe()));
        continue;
      }
      if (key == "mfu" && *d > 1) {  // (the report's mfu is a fraction; 51.1 is a percentage written as one)
        v.error(fmt::format("mfu is a fraction of the peak (0.511 for 51.1%), at most 1; got {}", v.describe()));
        continue;
      }
      e.value = *d;
    }
    c.measured.push_back(e);
  }
}

void parse_tolerance(const std::optional<Node>& n, const Node& case_node, SuiteCase& c) {
  const bool any_number = std::any_of(c.measured.begin(), c.measured.end(), [](const Expectation& e) { return !e.is_bool; });
  if (!n) {
    if (any_number)
      case_node.diag().error(case_node.where(), case_node.path() + ".tolerance",
                             "required key is missing (a relative tolerance such as 0.10, or one per field)");
    return;
  }
  // A tolerance is a fraction (0.10 is 10%): one above 1 is almost surely a percentage (10 meant as 10% passes a check
  // 1000% off), so it is refused, not read.
  const auto fraction = [](const Node& at, std::optional<double> t) -> std::optional<double> {
    if (t && *t < 0) {
      at.error(fmt::format("a tolerance is a fraction of the measured value between 0 and 1 (0.10 is 10%); got {:g}", *t));
      return std::nullopt;
    }
    if (t && *t > 1.0) {
      at.error(fmt::format("a tolerance is a fraction of the measured value (0.10 is 10%), at most 1; got {:g}, which "
                           "would pass a prediction {:g}% off (for {:g}%, write {:g})",
                           *t, *t * 100, *t, *t / 100));
      return std::nullopt;
    }
    return t;
  };
  if (n->yaml().IsScalar()) {
    auto t = fraction(*n, n->as_number(-1e6, 1e6));
    if (!t) return;
    for (auto& e : c.measured) e.tolerance = *t;
    return;
  }
  if (!n->yaml().IsMap()) {
    n->error(fmt::format("expected a relative tolerance (0.10) or a mapping of fields to tolerances, got {}",
                         n->describe()));
    return;
  }
  if (!any_number) {
    n->error("no measured figure to give a tolerance to: fits is checked as it is (true or false)");
    return;
  }
  MapReader r(*n);
  for (auto& e : c.measured) {
    if (e.is_bool) continue;
    if (auto t = fraction(n->child(e.field), r.number(e.field, true, -1e6, 1e6))) e.tolerance = *t;
  }
  r.finish();
}

SuiteCase parse_case(const Node& n, const std::string& suite_file, std::size_t index) {
  SuiteCase c;
  MapReader r(n);
  if (!r.ok()) return c;
  if (auto s = r.string("name", true)) c.name = *s;
  if (c.name.empty()) c.name = fmt::format("case {}", index + 1);
  auto scenario = r.get("scenario");
  auto replay = r.get("replay");
  auto compare = r.get("compare");
  auto system = r.get("system");
  auto gpus = r.get("gpus");
  auto set = r.get("set");
  auto measured = r.get("measured");
  auto tolerance = r.get("tolerance");
  auto speedup = r.get("expect_speedup");
  r.finish();

  const int kinds = int(scenario.has_value()) + int(replay.has_value()) + int(compare.has_value());
  if (kinds != 1) {
    n.error(kinds == 0 ? "a case needs one of scenario, replay (an HLO module) or compare"
                       : "a case takes only one of scenario, replay and compare");
    return c;
  }
  std::vector<sim::SetOverride> sets;
  if (set) sets = parse_sets(*set);
  auto not_here = [](const std::optional<Node>& k, const std::string& why) {
    if (k) k->error(why);
  };

  if (scenario || replay) {
    if (scenario) {
      c.kind = SuiteCase::Kind::scenario;
      if (auto p = existing_file(*scenario, suite_file, "scenario")) c.scenario = {*p, sets};
      not_here(system, "only a replay case takes system: (a scenario names its own system)");
      not_here(gpus, "only a replay case takes gpus: (use set: {system.gpus: N} with a scenario)");
    } else {
      c.kind = SuiteCase::Kind::replay;
      if (auto p = existing_file(*replay, suite_file, "HLO module")) c.replay = *p;
      if (!system)
        n.diag().error(n.where(), n.path() + ".system", "required key is missing (the system preset to replay on)");
      else if (auto s = system->as_string())
        c.system = *s;
      if (gpus)
        if (auto g = gpus->as_integer(1, 1 << 20)) c.gpus = static_cast<int>(*g);
      // set: reaches the system side (e.g. system.calibration); the module fixes the workload.
      for (const auto& o : sets) c.replay_sets.push_back(o.key_path + "=" + o.value);
    }
    not_here(speedup, "only a compare case takes expect_speedup");
    if (!measured)
      n.diag().error(n.where(), n.path() + ".measured", "required key is missing (the measured report fields)");
    else
      parse_measured(*measured, c);
    parse_tolerance(tolerance, n, c);
    return c;
  }

  c.kind = SuiteCase::Kind::compare;
  not_here(system, "only a replay case takes system:");
  not_here(gpus, "only a replay case takes gpus:");
  not_here(measured, "a compare case checks expect_speedup, not measured fields");
  not_here(tolerance, "a compare case checks expect_speedup: [lo, hi], which is its tolerance");
  MapReader cr(*compare);
  if (cr.ok()) {
    auto b = cr.get("base", true);
    auto v = cr.get("variant", true);
    cr.finish();
    if (b)
      if (auto ref = parse_side(*b, suite_file)) c.base = *ref;
    if (v)
      if (auto ref = parse_side(*v, suite_file)) c.variant = *ref;
    // A case-level set: applies to both sides first; a side's own set: wins.
    c.base.sets.insert(c.base.sets.begin(), sets.begin(), sets.end());
    c.variant.sets.insert(c.variant.sets.begin(), sets.begin(), sets.end());
  }
  if (!speedup) {
    n.diag().error(n.where(), n.path() + ".expect_speedup", "required key is missing ([lo, hi]: variant / base tokens/s per GPU)");
  } else if (!speedup->yaml().IsSequence() || speedup->yaml().size() != 2) {
    speedup->error(fmt::format("expected [lo, hi], got {}", speedup->describe()));
  } else {
    auto lo = speedup->element(0).as_number(0, 1e6);
    auto hi = speedup->element(1).as_number(0, 1e6);
    if (lo && hi) {
      if (*lo > *hi || *lo <= 0)
        speedup->error(fmt::format("expected 0 < lo <= hi, got [{}, {}]", *lo, *hi));
      c.speedup_lo = *lo;
      c.speedup_hi = *hi;
    }
  }
  return c;
}

Suite parse_suite(const Node& root) {
  Suite s;
  s.file = root.file();
  if (input::refuse_other_kind_of_file(root, "validation suite")) root.diag().throw_if_any();
  MapReader r(root);
  auto cases = r.get("cases", true);
  r.finish();
  if (cases) {
    if (!cases->yaml().IsSequence())
      cases->error(fmt::format("expected a list of cases, got {}", cases->describe()));
    else if (cases->yaml().size() == 0)
      cases->error("the list of cases is empty");
    else {
      // A case is known by its name in the table, the JSON and the exit message: two of one name could not be told apart.
      std::map<std::string, int> first_line;
      for (std::size_t i = 0; i < cases->yaml().size(); ++i) {
        s.cases.push_back(parse_case(cases->element(i), s.file, i));
        const Node name = cases->element(i).child("name");
        const std::string& n = s.cases.back().name;
        if (n.empty()) continue;
        if (auto [it, fresh] = first_line.emplace(n, name.where().line); !fresh)
          name.error(fmt::format("a case named '{}' is at line {}: give each case its own name", n, it->second));
      }
    }
  }
  root.diag().throw_if_any();
  return s;
}

Suite load_from(std::optional<Node> root, input::Diagnostics& diag) {
  if (!root) diag.throw_if_any();
  return parse_suite(*root);
}

json simulate_report(const ScenarioRef& ref, bool exact) {
  sim::SimulateOptions opt;
  opt.exact = exact;
  opt.keep_detail = false;
  return sim::simulate(sim::load_scenario(ref.path, ref.sets), opt).report;
}

// "does not fit (...)" for a report whose job does not fit in memory, with the report's own reason; "" when it fits. A
// passing check on a job that could not start is said, not hidden (an audit's finding).
std::string fit_note(const json& report, const std::string& who) {
  const auto fits = report.find("fits");
  if (fits == report.end() || !fits->is_boolean() || fits->get<bool>()) return "";
  std::string why;
  if (const auto w = report.find("warnings"); w != report.end() && w->is_array())
    for (const auto& e : *w)
      if (e.is_string() && (e.get<std::string>().starts_with("does not fit: ") ||
                            e.get<std::string>().starts_with("pinned host memory ")))
        why += (why.empty() ? "" : "; ") + e.get<std::string>();
  return fmt::format("{} does not fit in memory{}", who, why.empty() ? "" : " (" + why + ")");
}

std::vector<CheckRow> run_case(const SuiteCase& c, bool exact) {
  std::vector<CheckRow> rows;
  auto fail = [&](const std::string& message) {
    rows.clear();
    CheckRow row;
    row.case_name = c.name;
    row.message = message;
    rows.push_back(row);
  };
  try {
    if (c.kind == SuiteCase::Kind::compare) {
      const json a = simulate_report(c.base, exact);
      const json b = simulate_report(c.variant, exact);
      const double ta = a.at("tokens_per_s_per_gpu").get<double>();
      const double tb = b.at("tokens_per_s_per_gpu").get<double>();
      CheckRow row;
      row.case_name = c.name;
      row.field = "speedup";
      const double s = ta > 0 ? tb / ta : 0;
      row.predicted = s;
      row.measured = json::array({c.speedup_lo, c.speedup_hi});
      row.error = s < c.speedup_lo ? (s - c.speedup_lo) / c.speedup_lo
                  : s > c.speedup_hi ? (s - c.speedup_hi) / c.speedup_hi
                                     : 0.0;
      row.pass = s >= c.speedup_lo && s <= c.speedup_hi;
      for (const auto& n : {fit_note(a, "the base"), fit_note(b, "the variant")})
        if (!n.empty()) row.note += (row.note.empty() ? "" : "; ") + n;
      rows.push_back(row);
      return rows;
    }
    json report;
    if (c.kind == SuiteCase::Kind::scenario) {
      report = simulate_report(c.scenario, exact);
    } else {
      report = sim::run_hlo(c.replay, c.system, c.gpus, c.replay_sets).report;
    }
    for (const auto& e : c.measured) {
      CheckRow row;
      row.case_name = c.name;
      row.field = e.field;
      if (e.is_bool) {
        const auto it = report.find("fits");
        if (it == report.end() || !it->is_boolean()) {
          fail("the report has no 'fits'");
          return rows;
        }
        row.predicted = it->get<bool>();
        row.measured = e.flag;
        row.pass = it->get<bool>() == e.flag;
      } else {
        const auto p = report_number(report, e.field);
        if (!p) {
          fail(fmt::format("the report has no '{}'", e.field));
          return rows;
        }
        row.predicted = *p;
        row.measured = e.value;
        if (e.value != 0) {
          row.error = (*p - e.value) / e.value;
          row.pass = std::abs(*row.error) <= e.tolerance * (1 + 1e-12);
        } else {
          row.pass = *p == 0;
        }
        row.note = fit_note(report, "the prediction");
      }
      rows.push_back(row);
    }
  } catch (const input::InputError& e) {
    fail(e.what());
  } catch (const sim::UnitError& e) {
    fail(e.what());
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  } catch (const std::exception& e) {
    fail(std::string("internal error: ") + e.what());
  }
  return rows;
}

std::string fmt_number(double v) { return fmt::format("{:.6g}", v); }

std::string fmt_value(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + fmt_value(v[i]);
    return out + "]";
  }
  if (v.is_number()) return fmt_number(v.get<double>());
  return v.dump();
}

}  // namespace

Suite load_suite(const std::string& path) {
  input::LoadSession session;
  return load_from(input::load_yaml_file(path, session.ctx), session.diag);
}

Suite load_suite_text(const std::string& text, const std::string& file_label) {
  input::LoadSession session;
  return load_from(input::load_yaml_text(text, file_label, session.ctx), session.diag);
}

SuiteResult run_suite(const Suite& suite, int jobs, bool exact) {
  std::vector<std::vector<CheckRow>> per_case(suite.cases.size());
  parallel_for(suite.cases.size(), jobs, [&](std::size_t i) { per_case[i] = run_case(suite.cases[i], exact); });
  SuiteResult out;
  for (auto& rows : per_case)
    for (auto& row : rows) {
      if (!row.message.empty()) {
        ++out.case_errors;
      } else {
        ++out.checks;
        if (!row.pass) ++out.failed;
      }
      out.rows.push_back(std::move(row));
    }
  return out;
}

std::string format_table(const SuiteResult& r) {
  std::vector<std::array<std::string, 6>> cells;
  cells.push_back({"case", "field", "predicted", "measured", "error", "pass"});
  for (const auto& row : r.rows) {
    if (!row.message.empty()) {
      cells.push_back({row.case_name, "-", "-", "-", "-", "ERROR"});
      continue;
    }
    cells.push_back({row.case_name, row.field, fmt_value(row.predicted), fmt_value(row.measured),
                     row.error ? fmt::format("{:+.2f}%", 100 * *row.error) : "-", row.pass ? "yes" : "NO"});
  }
  std::array<std::size_t, 6> w{};
  for (const auto& line : cells)
    for (std::size_t i = 0; i < 6; ++i) w[i] = std::max(w[i], line[i].size());
  const bool right[6] = {false, false, true, true, true, false};
  std::string out;
  auto emit = [&](const std::array<std::string, 6>& line) {
    std::string s;
    for (std::size_t i = 0; i < 6; ++i) {
      if (i) s += "  ";
      s += right[i] ? fmt::format("{:>{}}", line[i], w[i]) : fmt::format("{:<{}}", line[i], w[i]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out += s + '\n';
  };
  emit(cells[0]);
  std::array<std::string, 6> rule;
  for (std::size_t i = 0; i < 6; ++i) rule[i] = std::string(w[i], '-');
  emit(rule);
  for (std::size_t i = 1; i < cells.size(); ++i) emit(cells[i]);
  for (const auto& row : r.rows) {
    if (row.message.empty()) continue;
    out += fmt::format("\ncase '{}' could not run:\n", row.case_name);
    std::size_t pos = 0;
    while (pos <= row.message.size()) {
      const std::size_t nl = row.message.find('\n', pos);
      out += "  " + row.message.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + '\n';
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  std::string noted;  // once per case
  for (const auto& row : r.rows) {
    if (row.note.empty() || row.case_name == noted) continue;
    out += fmt::format("{}note: case '{}': {}\n", noted.empty() ? "\n" : "", row.case_name, row.note);
    noted = row.case_name;
  }
  out += fmt::format("\n{} checks: {} pass, {} outside tolerance", r.checks, r.checks - r.failed, r.failed);
  if (r.case_errors) out += fmt::format("; {} case{} could not run", r.case_errors, r.case_errors == 1 ? "" : "s");
  out += '\n';
  return out;
}

json to_json(const SuiteResult& r) {
  json list = json::array();
  for (const auto& row : r.rows) {
    json j = {{"case", row.case_name},
              {"field", row.field.empty() ? json(nullptr) : json(row.field)},
              {"predicted", row.predicted},
              {"measured", row.measured},
              {"error", row.error ? json(*row.error) : json(nullptr)},
              {"pass", row.pass}};
    if (!row.message.empty()) j["message"] = row.message;
    if (!row.note.empty()) j["note"] = row.note;
    list.push_back(std::move(j));
  }
  return list;
}

int exit_code(const SuiteResult& r) {
  if (r.case_errors > 0) return 1;
  if (r.failed > 0) return 4;
  return 0;
}

}  // namespace racksim::workflow
