// Calibrated parameters (hardware_models/calibrated/NAME.yaml): what was measured on one real
// GPU, fitted, and how it is applied to a SystemSpec -- to the preset of the device measured, or
// transferred to another preset by one written rule. docs/calibration.md describes the file,
// the fits and the transfer rule; `racksim calibrate fit` writes the file (calib::fit_calibration
// in calibration/fit + write_calibration_yaml), scenarios select it with `system.calibration`.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hardware_models/collective_op.h"
#include "hardware_models/system_spec.h"
#include "input/yaml_reader.h"

namespace racksim::hw {

// One measured GEMM and how the fitted model does on it.
struct GemmPoint {
  int source = 0;             // index into Calibration::sources
  std::string label;          // the measurement's own label ("D2048 qkv")
  double m = 0, n = 0, k = 0;
  int batch = 1;
  std::string layout = "TN";  // operand layout as measured (TN: both K-contiguous)
  std::string out = "bf16";   // result dtype as measured (bf16 | f32)
  double measured_s = 0;      // per product, back-to-back (median)
  double efficiency = 0;      // achieved / datasheet dense peak of the base preset
  bool hbm_bound = false;     // its operand + result bytes at the calibrated HBM rate take > half its time
  double model_s = 0;         // the model's roofline time: max(compute model, bytes / HBM rate)
  double residual = 0;        // (model_s - measured_s) / measured_s
};

// GEMM time on the tensor cores, per dtype:  t = t0 + F / (P * e_max) * (1 + k0 / K)
// (F = 2 * batch * M * N * K; P = datasheet dense peak). e_max is the large-shape ceiling, k0 the
// per-output-tile prologue/epilogue overhead in units of K, t0 the fixed cost of one product.
// Fitted by weighted linear least squares on the compute-bound measurements.
struct GemmModel {
  double peak_flops_per_s = 0;  // the base preset's datasheet dense peak the fractions refer to
  double e_max = 0;
  double k0 = 0;
  double t0_s = 0;
  int points_fitted = 0;
  int points_hbm_bound = 0;
  double rms_residual = 0;      // over the fitted (compute-bound) points, relative time
  double max_abs_residual = 0;
  double rms_residual_all = 0;  // over every point, with the roofline
  double max_abs_residual_all = 0;
  double repeat_spread = 0;     // largest (max/min - 1) of the measured time of one shape measured more than once
  std::vector<GemmPoint> shapes;

  // Shape factor in (0, 1]: efficiency / ceiling, for a GPU of peak `peak` running at `ceiling`.
  // `k0_scale` multiplies k0 for a datatype whose main loop runs that many times faster per K element
  // than the measured one's while the per-tile prologue/epilogue time stays (see compute_model.cpp).
  double shape_factor(double m, double n, double k, double batch, double peak, double ceiling,
                      double k0_scale = 1.0) const;
  // Achieved fraction of `peak` for this shape, with `ceiling` as the large-shape efficiency.
  double efficiency(double m, double n, double k, double batch, double peak, double ceiling,
                    double k0_scale = 1.0) const {
    return ceiling * shape_factor(m, n, k, batch, peak, ceiling, k0_scale);
  }
};

// t = latency + bytes / bandwidth, fitted over the measured sizes.
struct BandwidthFit {
  double bandwidth_Bps = 0;
  double latency_s = 0;
  int points = 0;
  double rms_residual = 0;
  double max_abs_residual = 0;
};

struct ContentionPoint {
  std::string background;     // h2d_pinned | d2h_pinned | d2d_memcpy | nccl_all_reduce
  std::string description;
  double gemm_slowdown = 1;   // GEMM time beside the background job / alone
  double background_slowdown = 1;
};

// nccl-tests' (or racksim-bench's) collective timings for one op and GPU count:
// t = latency + bytes / algbw (bytes as nccl-tests' `size` column); busbw = algbw * nccl-tests' factor.
struct NcclFit {
  CollectiveOp op = CollectiveOp::all_reduce;
  int gpus = 0;
  int source = 0;
  double latency_s = 0;
  double algbw_Bps = 0;
  double busbw_Bps = 0;
  int points = 0;
  double rms_residual = 0;
  double max_abs_residual = 0;
};

// XLA's Triton block-level fusions (softmax, norms, row reductions) keep each program's operand
// tiles in registers; the more bytes a thread holds, the fewer warps fit on an SM and the
// fewer loads are in flight (Little's law), so their bandwidth falls as 1 / thread bytes:
// t = max(bytes / HBM rate, bytes * thread_bytes / k). One point per measured kernel.
struct RowKernelPoint {
  std::string label;          // measurement / kernel name
  double bytes = 0;           // HBM bytes read + written (the importer's count)
  double thread_bytes = 0;    // operand bytes per thread (the importer's count)
  double measured_s = 0;
  double model_s = 0;
  double residual = 0;        // (model - measured) / measured
  bool fitted = false;        // slower than streaming: in the fit of k
  int source = 0;
};
struct RowKernelFit {
  double k_Bps_B = 0;         // achieved bandwidth x thread bytes, (bytes/s) x bytes
  int points = 0;             // fitted points
  double rms_residual = 0, max_abs_residual = 0;  // over every point, with the max() model
  std::vector<RowKernelPoint> kernels;
};

// XLA's loop emitter (kind=kLoop fusions: element-wise maps, fills) runs one thread per output
// index; measured on one architecture, no such kernel covers more than `index_rate` indices a
// second, however few bytes each index moves: t = max(bytes / HBM rate, indices / index_rate).
// One point per measured kernel.
struct LoopFusionPoint {
  std::string label;          // measurement / kernel name
  double bytes = 0;           // HBM bytes read + written (the importer's count)
  double indices = 0;         // output indices (the importer's count)
  double measured_s = 0;
  double model_s = 0;
  double residual = 0;        // (model - measured) / measured
  bool fitted = false;        // slower than streaming: in the fit of the rate
  int source = 0;
};
struct LoopFusionFit {
  double index_rate_per_s = 0;  // output indices a second
  int points = 0;               // fitted points
  double rms_residual = 0, max_abs_residual = 0;  // over every point, with the max() model
  std::vector<LoopFusionPoint> kernels;
};

// Fused (flash) attention kernels: efficiency against the bf16 dense peak grows with the key
// length S as e_max / (1 + s0 / S) (each query tile streams S keys; the prologue, epilogue and
// softmax bookkeeping are per tile), one curve per direction and mask.
struct AttentionCurve {
  double e_max = 0, s0 = 0;
  int points = 0;
  double rms_residual = 0, max_abs_residual = 0;
};
struct AttentionPoint {
  int batch = 0, heads = 0, seq = 0, head_dim = 0;
  bool causal = true;
  bool backward = false;
  double flops = 0, measured_s = 0, model_s = 0, residual = 0;
  int source = 0;
};
struct AttentionFit {
  AttentionCurve forward, forward_causal, backward, backward_causal;
  std::vector<AttentionPoint> rows;
  const AttentionCurve& curve(bool backward_pass, bool causal) const {
    return backward_pass ? (causal ? backward_causal : backward) : (causal ? forward_causal : forward);
  }
  AttentionCurve& curve(bool backward_pass, bool causal) {
    return backward_pass ? (causal ? backward_causal : backward) : (causal ? forward_causal : forward);
  }
};

// XLA's GPU runtime on the host, per program execution (one jitted step): exposed host time =
// program + command x commands + rerecord_ref x buffer references of the command buffers
// re-recorded (their buffers moved: no donation). From unrolled chains of tiny layers, where
// the GPU waits for all of it (exposed = synchronized step time - GPU span).
struct DispatchPoint {
  std::string label;
  bool command_buffers = true;  // false: XLA_FLAGS emptied --xla_gpu_enable_command_buffer (thunk rows)
  int commands = 0;
  double rerecorded_refs = 0;
  double exposed_s = 0;       // measured
  double model_s = 0;
  double residual = 0;
  int source = 0;
};
struct XlaRuntimeFit {
  double program_s = 0, command_s = 0, rerecord_ref_s = 0;
  int points = 0;
  double rms_residual = 0, max_abs_residual = 0;
  // Command buffers off: every kernel launched by XLA's thunk executor; on these launch-bound
  // programs the step is thunk_program + thunk_launch x kernels.
  double thunk_program_s = 0, thunk_launch_s = 0;
  int thunk_points = 0;
  double thunk_rms_residual = 0, thunk_max_abs_residual = 0;
  std::vector<DispatchPoint> rows;
};

struct CalibrationSource {
  std::string path;           // relative to the data root when inside it
  std::string date;           // the measurement's own UTC timestamp
  std::string schema;         // racksim-bench/1 | racksim-gemm-torch/1 | nccl-tests
  std::vector<std::string> used;  // which sections fed the fit
};

struct Calibration {
  std::string name;           // file stem (h200)
  std::string file;           // where it was loaded from
  std::string absolute_path;  // the same, absolute (a report's scenario names a calibration file by it)
  // The device measured and the preset it was fitted against.
  std::string device_name;    // as the tool reported it ("NVIDIA H200")
  std::string base_preset;    // h200-sxm
  std::string gpu_model;      // the base preset's gpu.model: identifies "the same device"
  // The base preset's GPU as its preset file gives it (cited ceilings gpu.matmul_efficiency, dense peaks,
  // gpu.sustained_gemm), read from the preset when the calibration is loaded, not from the calibration file;
  // empty when that preset cannot be loaded. The transfer scales the measured ceiling by the target's cited
  // ceiling over the base's on the same architecture, by one source's target / base sustained rates across
  // architectures (docs/calibration.md).
  GpuSpec base_gpu;
  // Why base_gpu is empty where base_preset names no shipped preset and no file (a user's own preset, whose `name:`
  // `calibrate fit --base FILE` writes, or a typo): said as a warning wherever the calibration applies.
  std::string base_preset_unknown;
  Architecture architecture = Architecture::hopper;
  HostLinkKind host_link = HostLinkKind::pcie_gen5_x16;
  int sm_count = 0;
  std::string driver;
  std::string fitted_by;      // the command line, without --out
  std::vector<CalibrationSource> sources;

  std::map<sim::Dtype, GemmModel> gemm;
  std::optional<BandwidthFit> hbm;          // read+write bytes of a streaming copy kernel
  double hbm_efficiency = 0;                // hbm->bandwidth / base preset hbm_bandwidth
  std::optional<BandwidthFit> host_h2d, host_d2h, host_both;  // pinned; both = total of the two directions
  double copy_efficiency = 0;               // mean(h2d, d2h bandwidth) / base link_bandwidth_per_direction
  double both_directions_fraction = 0;      // host_both bandwidth / base link_bandwidth_both_directions
  struct Launch {
    double eager_kernel_launch_s = 0;
    double graph_kernel_launch_s = 0;
    double graph_launch_s = 0;
    double min_kernel_duration_s = 0;
    double eager_rms = 0, graph_node_rms = 0, graph_launch_rms = 0, min_kernel_rms = 0;
    // From racksim-kernel-gap/1 measurements (calibration/bench/kernel_gap.cu): an eager kernel's GPU time beyond a
    // graph node's with the host out of the way, the median over the measured kernels; 0: not measured.
    double eager_kernel_gap_s = 0;
    int eager_gap_points = 0;
    double eager_gap_min_s = 0, eager_gap_max_s = 0;
  };
  std::optional<Launch> launch;
  std::vector<ContentionPoint> contention;
  std::vector<NcclFit> nccl;
  std::optional<RowKernelFit> row_kernels;  // from racksim-xla-runtime/1 measurements
  std::optional<LoopFusionFit> loop_fusions;  // likewise (XLA's loop-emitter kernels)
  std::optional<XlaRuntimeFit> xla_runtime;  // likewise (dispatch rows)
  std::optional<AttentionFit> attention;     // from racksim-attention/1 measurements
  std::vector<std::string> notes;           // observations of the fit, written to the file

  // Set when applied to a SystemSpec (apply_calibration): which preset, what transferred, and
  // the warnings a report shows.
  std::string applied_to;
  bool same_device = false;       // the target preset's gpu.model is the device measured
  // Which measured figures replaced the preset's (the rest stay the preset's cited values).
  bool applied_gemm_ceiling = false, applied_hbm = false, applied_host = false, applied_launch = false;
  bool applied_row_kernels = false;  // same architecture (register file and memory system)
  bool applied_loop_fusions = false; // same architecture (SMs, their block and store rates)
  bool applied_nccl = false;         // the device measured, its NVLink not overridden: measured collectives apply
  bool applied_attention = false;    // fused attention at the measured curve (another architecture: as a ratio to the GEMM ceiling)
  std::vector<std::string> warnings;
  // How it reached the preset, one line (report scenario.system.calibration_transfer, the info log):
  // "same device, measured figures used as measured..." or "transfer rule: ...".
  std::string transfer;

  const GemmModel* gemm_for(sim::Dtype d) const {
    auto it = gemm.find(d);
    return it == gemm.end() ? nullptr : &it->second;
  }
};

std::string calibrated_dir();                    // <data dir>/hardware_models/calibrated
std::vector<std::string> list_calibrations();    // sorted names

// Strict parse of a calibration document; errors go to the node's Diagnostics.
Calibration parse_calibration(const input::Node& root);

// `name` is a name under calibrated_dir() or a path (contains '/' or ends in .yaml; relative to
// the file holding `where_named`). Errors (unknown name with the nearest suggestion, file
// errors) are recorded at `where_named`. Returns null on error.
std::shared_ptr<const Calibration> load_calibration(const std::string& name, const input::Node* where_named,
                                                    const std::shared_ptr<input::LoadContext>& ctx);
std::shared_ptr<const Calibration> load_calibration_file(const std::string& path);  // throws InputError

// Applies `cal` to `spec` (see docs/calibration.md "Transfer"): GEMM shape model always, the
// ceiling, HBM, host-link and launch figures where the rule allows; fields set by a scenario
// override keep their value. Records "calibrated: FILE ..." in spec.sources and sets
// spec.calibration to a copy of `cal` holding the application's warnings.
void apply_calibration(SystemSpec& spec, const Calibration& cal);
// The name of the calibration applied to `spec` (its file stem, however the scenario named it), or "none".
std::string applied_calibration_name(const SystemSpec& spec);

// The calibration a scenario on `preset` uses when it names none (system.calibration absent; `none`
// turns it off): the one under calibrated_dir() fitted against that preset (device.base_preset),
// the first by name if several are. Empty when the preset has none.
std::optional<std::string> default_calibration_for(const std::string& preset,
                                                   const std::shared_ptr<input::LoadContext>& ctx);

// Loads and applies in one step, for the scenario loader (errors at `where_named`).
bool load_and_apply_calibration(const std::string& name, const input::Node& where_named,
                                const std::shared_ptr<input::LoadContext>& ctx, SystemSpec& spec);

// The file text: fixed key order, fixed number formatting, so a re-fit is byte-identical.
std::string write_calibration_yaml(const Calibration& cal);

// How the file writes numbers and shows paths; the fit (calibration/fit) quotes figures and files
// in its messages the same way.
namespace calibration_text {
// Plain decimal with `sig` significant digits, never exponent notation (so every number reads
// back through the quantity parser), trailing zeros dropped.
std::string num(double v, int sig = 6);
std::string signed4(double v);  // "+0.1234"
// Relative to the data root when inside it, so the text is the same on every checkout.
std::string display_path(const std::string& p);
}  // namespace calibration_text

}  // namespace racksim::hw
