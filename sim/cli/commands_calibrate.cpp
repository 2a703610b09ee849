// racksim calibrate fit --from DIR [--from DIR]... --base PRESET --out FILE.yaml
// Reads every racksim-bench JSON and nccl-tests log in the directories, fits the calibrated
// parameters (hardware_models/calibration.h) and writes them; prints the fit and its residuals.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <ostream>
#include <tuple>

#include "calibration/fit/calibration_fit.h"
#include "calibration/fit/nccl_tests.h"
#include "hardware_models/calibration.h"
#include "sim/cli/commands.h"
#include "input/diagnostics.h"
#include "input/files.h"
#include "workloads/hlo/hlo_cost.h"

namespace racksim::cli {

namespace {

// One profiled kernel of a kernel-model section (row kernels, loop fusions), with the section's own measure.
template <class Point>
void print_kernel_fit(std::ostream& out, const Point& p, const std::string& measure) {
  out << fmt::format("  {:>9.1f} MB {}  meas {:>8.1f} us  model {:>8.1f} us  {:>+6.1f}%{}  {}\n", p.bytes / 1e6, measure,
                     p.measured_s * 1e6, p.model_s * 1e6, 100 * p.residual, p.fitted ? "" : " [streams]", p.label);
}

void print_fit(const hw::Calibration& c, std::ostream& out) {
  out << fmt::format("device {} against {} ({} sources)\n", c.device_name, c.base_preset, c.sources.size());
  for (const auto& [d, m] : c.gemm) {
    out << fmt::format("gemm {}: e_max {:.4f}  k0 {:.1f}  t0 {:.3f} us  ({} shapes fitted, rms {:.2f}%, max {:.2f}%; "
                       "{} HBM-bound; all shapes with the roofline: rms {:.2f}%, max {:.2f}%)\n",
                       sim::to_string(d), m.e_max, m.k0, m.t0_s * 1e6, m.points_fitted, 100 * m.rms_residual,
                       100 * m.max_abs_residual, m.points_hbm_bound, 100 * m.rms_residual_all,
                       100 * m.max_abs_residual_all);
    out << fmt::format("  {:>5} {:>7} {:>7} {:>7}  {:>3} {:>4}  {:>10} {:>10} {:>9}  {}\n", "batch", "m", "n", "k", "lay",
                       "out", "meas TF/s", "model TF/s", "residual", "label");
    for (const auto& p : m.shapes) {
      const double f = 2.0 * p.batch * p.m * p.n * p.k;
      out << fmt::format("  {:>5} {:>7} {:>7} {:>7}  {:>3} {:>4}  {:>10.1f} {:>10.1f} {:>+8.1f}%  {}{}\n", p.batch, p.m,
                         p.n, p.k, p.layout, p.out, f / p.measured_s / 1e12, f / p.model_s / 1e12, 100 * p.residual,
                         p.hbm_bound ? "[HBM-bound] " : "", p.label);
    }
  }
  if (c.hbm)
    out << fmt::format("hbm: {:.1f} GB/s ({:.4f} of datasheet), latency {:.2f} us, rms {:.2f}%\n", c.hbm->bandwidth_Bps / 1e9,
                       c.hbm_efficiency, c.hbm->latency_s * 1e6, 100 * c.hbm->rms_residual);
  if (c.host_h2d && c.host_d2h && c.host_both)
    out << fmt::format("host: h2d {:.2f} GB/s, d2h {:.2f} GB/s, both {:.2f} GB/s; copy_efficiency {:.4f}, "
                       "both_directions_fraction {:.4f}\n",
                       c.host_h2d->bandwidth_Bps / 1e9, c.host_d2h->bandwidth_Bps / 1e9, c.host_both->bandwidth_Bps / 1e9,
                       c.copy_efficiency, c.both_directions_fraction);
  if (c.launch)
    out << fmt::format("launch: eager {:.3f} us/kernel, graph {:.3f} us/node + {:.3f} us/launch, min kernel {:.3f} us\n",
                       c.launch->eager_kernel_launch_s * 1e6, c.launch->graph_kernel_launch_s * 1e6,
                       c.launch->graph_launch_s * 1e6, c.launch->min_kernel_duration_s * 1e6);
  if (c.launch && c.launch->eager_gap_points > 0)
    out << fmt::format("launch: eager kernel gap {:.4f} us on the GPU (median of {}; {:.3f}-{:.3f} us)\n",
                       c.launch->eager_kernel_gap_s * 1e6, c.launch->eager_gap_points, c.launch->eager_gap_min_s * 1e6,
                       c.launch->eager_gap_max_s * 1e6);
  if (c.attention)
    for (const auto& [name, backward, causal] : {std::tuple{"forward", false, false}, {"forward_causal", false, true},
                                                 {"backward", true, false}, {"backward_causal", true, true}})
      if (const auto& cv = c.attention->curve(backward, causal); cv.points > 0)
        out << fmt::format("attention {}: e_max {:.5f} of the bf16 peak, s0 {:.1f} keys ({} points; rms {:.2f}%, max "
                           "{:.2f}%)\n",
                           name, cv.e_max, cv.s0, cv.points, 100 * cv.rms_residual, 100 * cv.max_abs_residual);
  for (const auto& f : c.nccl)
    out << fmt::format("nccl {} x{}: latency {:.2f} us, algbw {:.1f} GB/s, busbw {:.1f} GB/s (rms {:.2f}%)\n",
                       hw::to_string(f.op), f.gpus,
                       f.latency_s * 1e6, f.algbw_Bps / 1e9, f.busbw_Bps / 1e9, 100 * f.rms_residual);
  if (c.row_kernels) {
    const auto& f = *c.row_kernels;
    out << fmt::format("row kernels: k {:.0f} GB/s x B ({} fitted of {}; rms {:.2f}%, max {:.2f}% with the HBM roofline)\n",
                       f.k_Bps_B / 1e9, f.points, f.kernels.size(), 100 * f.rms_residual, 100 * f.max_abs_residual);
    for (const auto& p : f.kernels) print_kernel_fit(out, p, fmt::format("{:>6.1f} B/thread", p.thread_bytes));
  }
  if (c.loop_fusions) {
    const auto& f = *c.loop_fusions;
    out << fmt::format("loop fusions: {:.1f} G indices/s ({} index-bound of {}; rms {:.2f}%, max {:.2f}% with the HBM roofline)\n",
                       f.index_rate_per_s / 1e9, f.points, f.kernels.size(), 100 * f.rms_residual, 100 * f.max_abs_residual);
    for (const auto& p : f.kernels) print_kernel_fit(out, p, fmt::format("{:>12.0f} indices", p.indices));
  }
  if (c.xla_runtime) {
    const auto& f = *c.xla_runtime;
    out << fmt::format("xla runtime: {:.1f} us per program + {:.3f} us per command + {:.3f} us per re-recorded buffer "
                       "reference ({} rows, rms {:.2f}%, max {:.2f}%)\n",
                       f.program_s * 1e6, f.command_s * 1e6, f.rerecord_ref_s * 1e6, f.points, 100 * f.rms_residual,
                       100 * f.max_abs_residual);
    if (f.thunk_points > 0)
      out << fmt::format("xla runtime without command buffers: {:.1f} us per program + {:.3f} us per kernel launch "
                         "({} rows, rms {:.2f}%, max {:.2f}%)\n",
                         f.thunk_program_s * 1e6, f.thunk_launch_s * 1e6, f.thunk_points, 100 * f.thunk_rms_residual,
                         100 * f.thunk_max_abs_residual);
    for (const auto& p : f.rows)
      out << fmt::format("  {:>5} commands {:>6.0f} re-recorded refs  {} {:>8.1f} us  model {:>8.1f} us  {:>+6.1f}%  {}\n",
                         p.commands, p.rerecorded_refs, p.command_buffers ? "exposed" : "step   ", p.exposed_s * 1e6,
                         p.model_s * 1e6, 100 * p.residual, p.label);
  }
  for (const auto& n : c.notes) out << "note: " << n << '\n';
}

}  // namespace

Registered register_calibrate(CLI::App& app) {
  struct S {
    std::vector<std::string> from;
    std::string base, out;
    bool quiet = false;
  };
  auto s = std::make_shared<S>();
  auto* sub = app.add_subcommand("calibrate", "fit calibrated parameters from measurements");
  sub->require_subcommand(1);
  auto* fit = sub->add_subcommand("fit", "fit racksim-bench JSON and nccl-tests logs into a calibration file");
  fit->add_option("--from", s->from, "directory of measurements (repeatable)")->required();
  fit->add_option("--base", s->base, "the system preset of the device measured")->required();
  fit->add_option("--out", s->out, "calibration file to write (hardware_models/calibrated/NAME.yaml)")->check(path_given())->required();
  fit->add_flag("--quiet", s->quiet, "print nothing on success");
  auto read = std::make_shared<CalibrateRead>();
  auto* rd = sub->add_subcommand("read", "show what racksim reads from nccl-tests output (log, -C log, Slurm .out, -J JSON)");
  rd->add_option("files", read->files, "nccl-tests output files")->required();
  rd->add_flag("--json", read->json, "print JSON");
  return {sub, [s, rd, read](std::ostream& out, std::ostream&) -> int {
            if (rd->parsed()) return static_cast<int>(cmd_calibrate_read(*read, out));
            calib::FitOptions opt;
            opt.from_dirs = s->from;
            opt.base_preset = s->base;
            opt.xla_kernel_cost = calib::hlo_kernel_cost();
            opt.xla_program = calib::hlo_program_host_work();
            // --out must not replace a measurement the fit reads (an audit's finding: the raw JSON was overwritten).
            for (const auto& f : calib::measurement_files(s->from))
              if (input::same_file(s->out, f))
                throw input::input_error(s->out, 0, 0, "",
                                         "--out names a file in a --from directory, which the fit reads as a "
                                         "measurement: write the calibration elsewhere");
            const hw::Calibration c = input::load_guarding_outputs({{s->out, "--out"}}, {}, "a file the fit read",
                                                                   [&] { return calib::fit_calibration(opt); });
            const std::string text = hw::write_calibration_yaml(c);
            input::write_file_checked(s->out, text, "--out");
            if (!s->quiet) {
              print_fit(c, out);
              out << "wrote " << s->out << '\n';
            }
            return kOk;
          }};
}

}  // namespace racksim::cli
