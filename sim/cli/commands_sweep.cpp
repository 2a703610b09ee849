// racksim sweep SWEEP.yaml [--out FILE.csv] [--jobs N] [--shard K/N] [--report FILE.html]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <ostream>

#include "sim/cli/commands.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "sim/report/html.h"
#include "sim/workflow/sweep.h"

namespace racksim::cli {

namespace {

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

// The sweep file, its base scenario and what that reads, with the outputs refused where they name one of them or one of
// the `named` inputs.
workflow::SweepSpec load_sweep_guarding(const std::string& file,
                                        const std::vector<std::pair<std::string, std::string>>& named,
                                        const std::vector<std::pair<std::string, std::string>>& outputs) {
  return input::load_guarding_outputs(outputs, named, "a file the base scenario reads", [&] {
    auto loaded = workflow::load_sweep(file);
    input::check_outputs(outputs, {{loaded.base, "its base scenario"}});
    return loaded;
  });
}

// --merge: no point runs; the rows of shard CSVs (a Slurm job array's) become one CSV and, with
// --report, one HTML report, the same as one unsharded run would have written.
int cmd_sweep_merge(const std::string& file, const std::string& csv, const std::vector<std::string>& shards,
                    const std::string& html, std::ostream& out, std::ostream& err) {
  // The merged CSV over one of the shards it merges would leave that shard's rows replaced (the rows are read first,
  // so the write succeeds) and a second merge short of them.
  const std::vector<std::pair<std::string, std::string>> outputs = {{csv, "--out"}, {html, "--report"}};
  std::vector<std::pair<std::string, std::string>> named = {{file, "the sweep file"}};
  for (const auto& shard : shards) named.emplace_back(shard, "a CSV --merge reads");
  const workflow::SweepSpec spec = load_sweep_guarding(file, named, outputs);
  std::size_t missing = 0;
  auto rows = workflow::read_sweep_csvs(spec, shards, &missing);
  if (!html.empty() && rows.size() > workflow::kMaxSweepReportPoints) {
    input::Diagnostics diag;
    diag.error({"--merge", 0, 0}, "",
               fmt::format("{} points to merge into an HTML report, more than its limit of {}", rows.size(),
                           workflow::kMaxSweepReportPoints));
    diag.throw_if_any();
  }
  std::string text = workflow::csv_line(workflow::csv_header(spec));
  for (const auto& r : rows) text += workflow::csv_row(spec, r);
  if (!csv.empty()) {
    input::write_file_checked(csv, text, "--out");
  } else {
    out << text;
    input::check_stream(out, "<stdout>", "standard output");
  }
  if (!html.empty()) {
    std::vector<sim::SweepPointView> views;
    views.reserve(rows.size());
    for (auto& r : rows) views.push_back({std::move(r.values), std::move(r.report), std::move(r.error)});
    std::vector<std::string> keys;
    for (const auto& k : spec.keys) keys.push_back(k.path);
    input::write_file_checked(html, sim::html_sweep_report(file, spec.base, keys, views), "--report");
  }
  if (missing > 0)
    spdlog::warn("{} of the sweep's {} points are in none of the {} CSV files (a shard not run or not finished)",
                 missing, spec.size(), shards.size());
  else
    spdlog::info("merged {} points from {} CSV files", rows.size(), shards.size());
  (void)err;
  return kOk;
}

int cmd_sweep(const std::string& file, const std::string& csv, int jobs, const std::string& shard_text,
              const std::string& html, bool exact, std::ostream& out, std::ostream& err) {
  workflow::Shard shard = shard_text.empty() ? workflow::Shard{} : workflow::parse_shard(shard_text);
  std::string from_slurm;
  if (shard_text.empty())
    if (auto s = workflow::shard_from_slurm_env(&from_slurm)) {
      shard = *s;  // a Slurm job array task runs its share without --shard
      spdlog::info("sweep shard {}", from_slurm);
    }
  // An output that names an input or the other output would be emptied before the run (both are opened at once).
  // load_sweep probes the base scenario: its model and calibration files are inputs too (the log closes with the
  // load, so the points' reads do not pass through its lock).
  const std::vector<std::pair<std::string, std::string>> outputs = {{csv, "--out"}, {html, "--report"}};
  const workflow::SweepSpec spec = load_sweep_guarding(file, {{file, "the sweep file"}}, outputs);
  workflow::check_sweep_size(spec, shard, !html.empty());
  // Open the outputs before the (long) run so a bad path fails at once.
  std::unique_ptr<input::OutputFile> csv_file, html_file;
  if (!csv.empty()) csv_file = std::make_unique<input::OutputFile>(csv, "--out");
  if (!html.empty()) html_file = std::make_unique<input::OutputFile>(html, "--report");
  // The report page is written at the end: whatever stops the sweep before (a failed write, stdout closed, an error)
  // leaves no empty page behind. (The CSV keeps the rows of an interrupted sweep, but not a write that failed.)
  struct RemoveUnlessWritten {
    std::string path;
    bool written = false;
    ~RemoveUnlessWritten() {
      if (written || path.empty()) return;
      try {
        input::remove_partial_output(path);
      } catch (...) {  // (a destructor: the error that stopped the sweep is the one to report)
      }
    }
  } page_guard{html};
  // Rows are written as the points finish, in point order: an interrupted sweep keeps them. A write that fails (a full
  // disk) leaves neither a CSV cut mid-row nor the report's empty page (a review's finding), as --trace and --report
  // of `run` leave nothing.
  auto write = [&](const std::string& text) {
    if (csv_file) {
      try {
        csv_file->write(text);
      } catch (...) {
        input::remove_partial_output(csv);
        throw;
      }
    } else {
      out << text;
      input::check_stream(out, "<stdout>", "standard output");
    }
  };
  write(workflow::csv_line(workflow::csv_header(spec)));

  const bool tty = stderr_is_terminal(err);
  workflow::ProgressFn progress;
  std::shared_ptr<ProgressBar> bar;
  if (tty) {
    bar = std::make_shared<ProgressBar>(err);
    progress = [bar](std::size_t d, std::size_t t) { (*bar)(d, t); };
  } else if (spdlog::default_logger()->level() <= spdlog::level::warn) {
    // Not a terminal (a batch job's log): one line every few seconds, unless -q.
    struct State {
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now(), last = t0;
    };
    auto st = std::make_shared<State>();
    progress = [st, &err](std::size_t d, std::size_t t) {
      const auto now = std::chrono::steady_clock::now();
      if (d >= t || now - st->last < std::chrono::seconds(5)) return;
      st->last = now;
      const double el = std::chrono::duration<double>(now - st->t0).count();
      err << fmt::format("sweep: {}/{} points, {:.0f} s{}\n", d, t, el,
                         d > 0 ? fmt::format(", ~{:.0f} s left", el / d * (t - d)) : "")
          << std::flush;
    };
  }
  std::vector<sim::SweepPointView> views;  // only with --report: what the page charts
  std::size_t points = 0, invalid = 0, nofit = 0;
  const auto t0 = std::chrono::steady_clock::now();
  workflow::SweepOptions options;
  options.exact = exact;
  workflow::run_sweep_streaming(spec, shard, jobs, progress, [&](workflow::PointResult&& r) {
    write(workflow::csv_row(spec, r));
    ++points;
    if (!r.error.empty())
      ++invalid;
    else if (!r.report.value("fits", true))
      ++nofit;
    if (html_file) {
      nlohmann::json slim = nullptr;
      if (r.error.empty()) {
        slim = nlohmann::json::object();
        for (const char* k : {"tokens_per_s_per_gpu", "step_time_s", "mfu", "peak_memory_bytes", "memory_capacity_bytes",
                              "fits"})
          if (r.report.contains(k)) slim[k] = r.report[k];
      }
      views.push_back({std::move(r.values), std::move(slim), std::move(r.error)});
    }
  }, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (csv_file) {
    try {
      csv_file->close();
    } catch (...) {
      input::remove_partial_output(csv);
      throw;
    }
  }
  if (html_file) {
    std::vector<std::string> keys;
    for (const auto& k : spec.keys) keys.push_back(k.path);
    html_file->write(sim::html_sweep_report(file, spec.base, keys, views));
    html_file->close();
    page_guard.written = true;
  }
  if (tty)
    err << fmt::format("{} points in {:.1f} s on {} thread{}: {} fit, {} do not fit, {} invalid\n", points, wall, jobs,
                       jobs == 1 ? "" : "s", points - invalid - nofit, nofit, invalid);
  return kOk;
}

}  // namespace

Registered register_sweep(CLI::App& app) {
  struct S {
    std::string file, csv, shard, html;
    std::vector<std::string> merge;
    int jobs = workflow::hardware_jobs();
    bool exact = false;
  };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("sweep", "simulate every point of a cartesian product of scenario overrides (CSV)");
  sub->add_option("sweep", s->file, "sweep YAML file (base: SCENARIO, vary: {KEY.PATH: [values]})")->required()->check(path_given());
  sub->footer("Rows are written as points finish, in point order. Limits: 1,000,000 points per run (shard larger\n"
              "sweeps with --shard), 100,000 with --report (docs/decisions.md, \"Input limits\").");
  sub->add_option("--out", s->csv, "write the CSV here instead of stdout")->check(path_given());
  sub->add_option("--jobs", s->jobs,
                  "points simulated at once on this many threads (default: all cores; output does not depend on it)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--shard", s->shard,
                  "run only points i with i % N == K (K from 0), e.g. 0/4; rows keep the global order and their point "
                  "index (default inside a Slurm job array: from SLURM_ARRAY_TASK_ID, _MIN, _STEP and _COUNT)");
  sub->add_option("--report", s->html, "write an HTML report: throughput against the varied keys")->check(path_given());
  sub->add_flag("--exact", s->exact, "replay every micro-step (no steady-state extrapolation of long steps)");
  auto* merge = sub->add_option("--merge", s->merge,
                                "run nothing: merge these CSVs of the sweep's shards (e.g. a Slurm job array's) into one "
                                "CSV (--out) and, with --report, one HTML report");
  merge->type_name("CSV...")->excludes(sub->get_option("--shard"))->excludes(sub->get_option("--exact"));
  return {sub, [s](std::ostream& out, std::ostream& err) {
            if (!s->merge.empty()) return cmd_sweep_merge(s->file, s->csv, s->merge, s->html, out, err);
            return cmd_sweep(s->file, s->csv, s->jobs, s->shard, s->html, s->exact, out, err);
          }};
}

}  // namespace racksim::cli
