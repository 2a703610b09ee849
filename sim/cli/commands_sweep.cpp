// racksim sweep SWEEP.yaml [--out FILE.csv] [--jobs N] [--shard K/N] [--report FILE.html]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <ostream>

#include "sim/cli/commands.h"
#include "sim/input/diagnostics.h"
#include "sim/report/html.h"
#include "sim/workflow/sweep.h"

namespace racksim::cli {

namespace {

std::unique_ptr<std::ofstream> open_output(const std::string& path, const char* option) {
  auto f = std::make_unique<std::ofstream>(path, std::ios::binary);
  if (!*f) {
    input::Diagnostics diag;
    diag.error({std::string(option) + " " + path, 0, 0}, "", "cannot write this file");
    diag.throw_if_any();
  }
  return f;
}

// A progress bar for a terminal: redrawn in place on stderr at most ten times a second.
class ProgressBar {
 public:
  explicit ProgressBar(std::ostream& err) : err_(err), t0_(std::chrono::steady_clock::now()) {}
  void operator()(std::size_t done, std::size_t total) {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - t0_).count();
    const int width = 30;
    const int filled = total ? static_cast<int>(width * done / total) : width;
    std::string eta;
    if (done > 0 && done < total) eta = fmt::format(", ~{:.0f} s left", elapsed / done * (total - done));
    err_ << fmt::format("\r[{}{}] {}/{} points  {:.1f} s{}   ", std::string(filled, '#'),
                        std::string(width - filled, '.'), done, total, elapsed, eta)
         << std::flush;
    if (done == total && !finished_) {
      finished_ = true;
      err_ << '\n';
    }
  }

 private:
  std::ostream& err_;
  std::chrono::steady_clock::time_point t0_, last_{};
  bool finished_ = false;
};

bool stderr_is_terminal(const std::ostream& err) {
  return err.rdbuf() == std::cerr.rdbuf() && isatty(fileno(stderr));
}

int cmd_sweep(const std::string& file, const std::string& csv, int jobs, const std::string& shard_text,
              const std::string& html, bool exact, std::ostream& out, std::ostream& err) {
  const workflow::Shard shard = shard_text.empty() ? workflow::Shard{} : workflow::parse_shard(shard_text);
  const workflow::SweepSpec spec = workflow::load_sweep(file);
  // Open the outputs before the (long) run so a bad path fails at once.
  std::unique_ptr<std::ofstream> csv_file, html_file;
  if (!csv.empty()) csv_file = open_output(csv, "--out");
  if (!html.empty()) html_file = open_output(html, "--report");

  const auto points = workflow::shard_points(spec.size(), shard);
  const bool tty = stderr_is_terminal(err);
  workflow::ProgressFn progress;
  std::shared_ptr<ProgressBar> bar;
  if (tty) {
    bar = std::make_shared<ProgressBar>(err);
    progress = [bar](std::size_t d, std::size_t t) { (*bar)(d, t); };
  }
  const auto t0 = std::chrono::steady_clock::now();
  workflow::SweepOptions options;
  options.exact = exact;
  const auto results = workflow::run_sweep(spec, points, jobs, progress, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  workflow::write_csv(csv_file ? static_cast<std::ostream&>(*csv_file) : out, spec, results);
  if (html_file) {
    std::vector<std::string> keys;
    for (const auto& k : spec.keys) keys.push_back(k.path);
    std::vector<sim::SweepPointView> views;
    views.reserve(results.size());
    for (const auto& r : results) views.push_back({r.values, r.report, r.error});
    *html_file << sim::html_sweep_report(file, spec.base, keys, views);
  }
  if (tty) {
    std::size_t invalid = 0, nofit = 0;
    for (const auto& r : results) {
      if (!r.error.empty())
        ++invalid;
      else if (!r.report.value("fits", true))
        ++nofit;
    }
    err << fmt::format("{} points in {:.1f} s on {} thread{}: {} fit, {} do not fit, {} invalid\n", results.size(), wall,
                       jobs, jobs == 1 ? "" : "s", results.size() - invalid - nofit, nofit, invalid);
  }
  return kOk;
}

}  // namespace

Registered register_sweep(CLI::App& app) {
  struct S { std::string file, csv, shard, html; int jobs = workflow::hardware_jobs(); bool exact = false; };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("sweep", "simulate every point of a cartesian product of scenario overrides (CSV)");
  sub->add_option("sweep", s->file, "sweep YAML file (base: SCENARIO, vary: {KEY.PATH: [values]})")->required();
  sub->add_option("--out", s->csv, "write the CSV here instead of stdout");
  sub->add_option("--jobs", s->jobs,
                  "points simulated at once on this many threads (default: all cores; output does not depend on it)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--shard", s->shard, "run only points i with i % N == K (K from 0), e.g. 0/4; rows keep the global order");
  sub->add_option("--report", s->html, "write an HTML report: throughput against the varied keys");
  sub->add_flag("--exact", s->exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  return {sub, [s](std::ostream& out, std::ostream& err) {
            return cmd_sweep(s->file, s->csv, s->jobs, s->shard, s->html, s->exact, out, err);
          }};
}

}  // namespace racksim::cli
