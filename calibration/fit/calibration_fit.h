// Fitting a calibration (`racksim calibrate fit`): reads racksim-bench JSON, nccl-tests logs and
// the XLA measurement scripts' files under --from directories, fits the models of
// hardware_models/calibration.h (GEMM shape model, bandwidths, row kernels, attention, XLA's host
// runtime, collectives) by least squares (Eigen), and returns the Calibration that
// hw::write_calibration_yaml writes. It sits above workloads: XLA measurements are costed by the
// HLO importer (hlo_kernel_cost, hlo_program_host_work).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hardware_models/calibration.h"

namespace racksim::calib {

// What the HLO importer says one measured XLA kernel moves: HBM bytes and operand bytes per
// thread (0 if it is not a Triton block-level fusion). hlo_kernel_cost() asks the importer; a
// test may supply its own.
struct XlaKernelCost {
  double bytes = 0;
  double thread_bytes = 0;
  double loop_indices = 0;  // output indices of a loop-emitter kernel (0 if it is not one)
};
using XlaKernelCostFn =
    std::function<std::optional<XlaKernelCost>(const std::string& hlo_path, const std::string& kernel_name)>;
// And what the importer says one whole program asks of the host: commands over all its
// command-buffer executions and the buffer references it re-records per step.
struct XlaProgramHostWork {
  int commands = 0;
  int executions = 0;
  double rerecorded_refs = 0;
};
using XlaProgramFn = std::function<std::optional<XlaProgramHostWork>(const std::string& hlo_path)>;

struct FitOptions {
  std::vector<std::string> from_dirs;  // read every racksim-bench JSON and nccl-tests log in these
  std::string base_preset;             // the preset the fractions refer to
  XlaKernelCostFn xla_kernel_cost;     // for racksim-xla-runtime/1 files; they are skipped without it
  XlaProgramFn xla_program;            // likewise, for their dispatch rows
};
// Throws input::InputError for unreadable or malformed inputs.
hw::Calibration fit_calibration(const FitOptions& opt);

// Whether the fit reads a file as a measurement (by its extension: .json, .log, .txt, .out; others are skipped), and
// the files of the --from directories it so reads (directories it cannot list give none: the fit reports them).
bool is_measurement_file(const std::string& path);
std::vector<std::string> measurement_files(const std::vector<std::string>& from_dirs);

// The HLO importer's answers for the fit: the bytes and thread bytes of a kernel that a profile of
// an XLA program names, found in the program's HLO file (instruction "fusion.20" runs as kernel
// "fusion_20"; nullopt when no fusion has that name; each file parsed once), and the host work of a
// whole program lowered on one device (its commands, command-buffer executions and the buffer
// references re-recorded per step).
XlaKernelCostFn hlo_kernel_cost();
XlaProgramFn hlo_program_host_work();

}  // namespace racksim::calib
