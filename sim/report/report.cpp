#include "sim/report/report.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string_view>
#include <vector>

#include "hardware_models/calibration.h"
#include "hardware_models/system_preset.h"
#include "input/diagnostics.h"
#include "input/files.h"

namespace racksim::sim {

using nlohmann::json;
using namespace racksim::workloads;

std::string version() {
#ifdef RACKSIM_VERSION
  return RACKSIM_VERSION;
#else
  return "0.1.0";
#endif
}

json make_report(const Job& job, const ReplayResult& r, const StepInfo& in) {
  // The inputs are bounded where they are read (docs/decisions.md, "Input limits"); a figure
  // beyond what the report can print exactly (llround of 2^63 bytes is negative) is still an
  // error naming the input, never a report.
  auto in_range = [&](double v, double max, const char* what) {
    if (std::isfinite(v) && v >= 0 && v <= max) return;
    input::Diagnostic d;
    d.where.file = in.file.empty() ? "<scenario>" : in.file;
    d.message = fmt::format("the {} would be {:.6g}, beyond what racksim reports ({:.3g}): the sizes of this input "
                            "are out of range",
                            what, v, max);
    throw input::InputError(std::vector<input::Diagnostic>{d});
  };
  constexpr double kMaxBytes = 9.0e18;  // below 2^63
  in_range(r.memory.peak_hbm_bytes, kMaxBytes, "peak memory per GPU in bytes");
  in_range(r.memory.peak_host_bytes, kMaxBytes, "pinned host memory per GPU in bytes");
  for (int c = 0; c < kMemCategoryCount; ++c) in_range(r.memory.at_peak[c], kMaxBytes, "memory of one category in bytes");
  if (!(r.step_time_s <= 1e7) && std::isfinite(r.step_time_s)) {
    // Which part of the step is out of range says which figures to look at (an override of HBM bandwidth at 1 MB/s, in
    // its range, had given this error naming no part: a red-team pass).
    static constexpr std::array<std::pair<double Breakdown::*, const char*>, 7> kNamed = {{
        {&Breakdown::compute_s, "compute (the GPU's rates: gpu.* figures, the calibration)"},
        {&Breakdown::recompute_s, "recompute (the GPU's rates)"},
        {&Breakdown::exposed_communication_s, "exposed communication (scale_up / scale_out figures)"},
        {&Breakdown::exposed_offload_s, "exposed offload (the host link)"},
        {&Breakdown::launch_overhead_s, "launch overhead (launch.* host figures)"},
        {&Breakdown::pipeline_bubble_s, "pipeline bubble"},
        {&Breakdown::idle_s, "idle time"},
    }};
    const auto most = std::max_element(kNamed.begin(), kNamed.end(), [&](const auto& a, const auto& b) {
      return r.breakdown.*(a.first) < r.breakdown.*(b.first);
    });
    throw input::input_error(in.file.empty() ? "<scenario>" : in.file, 0, 0, "",
                             fmt::format("the step time would be {:.6g} s, beyond what racksim reports (1e+07 s), most of "
                                         "it {:.6g} s of {}: a figure of this input is out of range",
                                         r.step_time_s, r.breakdown.*(most->first), most->second));
  }
  in_range(r.step_time_s, 1e7, "step time in seconds");
  in_range(in.tokens_per_step, 1e18, "tokens per step");
  in_range(in.model_flops_per_step, 1e30, "model FLOPs per step");
  const double step = r.step_time_s;
  const double gpus = job.system.gpus;
  const double tokens = in.tokens_per_step;
  const double model_flops = in.model_flops_per_step;
  const double peak = hw::peak_flops_per_s(job.system.spec, job.precision);
  const double model_tflops = step > 0 ? model_flops / step / gpus / 1e12 : 0;
  // What the framework can allocate: the device total less what the driver, the CUDA context,
  // cuBLAS workspaces and NCCL buffers hold (preset memory.reserved). peak_memory_bytes is
  // the framework's own high-water mark, comparable to torch max_memory_allocated or JAX
  // peak_bytes_in_use.
  const double device_capacity = job.system.spec.gpu.hbm_capacity_bytes - job.system.spec.memory.reserved_bytes;
  // JAX preallocates its pool as a fraction of the card's total memory; what the CUDA context and libraries hold
  // comes out of the rest, so the pool is the bound unless the fraction leaves them less than they need.
  const double pool = job.allocator_fraction * job.system.spec.gpu.hbm_capacity_bytes;
  const double capacity = job.allocator_fraction > 0 ? std::min(device_capacity, pool) : device_capacity;
  const double host_capacity_per_gpu =
      job.system.spec.host.memory_capacity_bytes / job.system.spec.host.gpus_sharing_memory(job.system.gpus);

  std::vector<std::string> warnings = in.notes;
  warnings.insert(warnings.end(), r.warnings.begin(), r.warnings.end());
  if (job.system.spec.calibration)
    for (const auto& w : job.system.spec.calibration->warnings) warnings.push_back("calibration: " + w);
  if (job.allocator_fraction > 0)
    warnings.push_back(fmt::format(
        "memory capacity: JAX's allocator pool, {:g} of the card's {:.1f} GB = {:.1f} GB (training.xla_client_mem_fraction, "
        "XLA_PYTHON_CLIENT_MEM_FRACTION){}",
        job.allocator_fraction, job.system.spec.gpu.hbm_capacity_bytes / 1e9, pool / 1e9,
        pool > device_capacity ? fmt::format("; the card less its reserved {:.1f} GB bounds it first",
                                             job.system.spec.memory.reserved_bytes / 1e9)
                               : ""));
  if (!job.system.calibration)
    warnings.push_back(
        "uncalibrated: GEMMs at the preset's best-shape efficiency for every shape (set system.calibration)");
  if (step > 0 && r.breakdown.idle_s > 0.01 * step)
    warnings.push_back(fmt::format("{:.1f}% of the step the GPU waits with nothing running (dependencies)",
                                   100.0 * r.breakdown.idle_s / step));
  if (job.nvls && !job.system.spec.scale_up.nvls)
    warnings.push_back(fmt::format("training.nvls is on but {} has no NVLink SHARP; collectives use ring/tree",
                                   job.system.spec.name));
  const bool host_fits = r.memory.peak_host_bytes <= host_capacity_per_gpu;
  if (!host_fits)
    warnings.push_back(fmt::format("pinned host memory {:.1f} GB per GPU exceeds the host's {:.1f} GB per GPU",
                                   r.memory.peak_host_bytes / 1e9, host_capacity_per_gpu / 1e9));
  const bool fits = r.memory.peak_hbm_bytes <= capacity && host_fits;
  if (r.memory.peak_hbm_bytes > capacity)
    warnings.push_back(fmt::format("does not fit: peak {:.1f} GB of HBM against {:.1f} GB", r.memory.peak_hbm_bytes / 1e9,
                                   capacity / 1e9));

  const double mfu = model_tflops * 1e12 / peak;
  if (mfu > 1)
    warnings.push_back(fmt::format(
        "MFU {:.3f} is above 1: the model FLOP count (6 x active parameters x tokens + attention, docs/contracts.md) credits "
        "work this step does not do on the GPU (the input embedding's parameters count as a matmul's, a lookup on the "
        "GPU), which weighs most in a model of few layers and a large vocabulary",
        mfu));
  // One line per distinct warning, in first-seen order (each pipeline stage's graph can say the same thing).
  {
    std::vector<std::string> unique;
    for (auto& w : warnings)
      if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(std::move(w));
    warnings = std::move(unique);
  }

  json mem = json::object();
  for (int c = 0; c < kMemCategoryCount; ++c)
    mem[to_string(static_cast<MemCategory>(c))] = std::llround(r.memory.at_peak[c]);

  const auto& b = r.breakdown;
  json report = {
      {"racksim_version", version()},
      {"scenario", in.scenario},
      {"step_time_s", step},
      {"tokens_per_s_per_gpu", step > 0 ? tokens / step / gpus : 0},
      {"model_tflops_per_gpu", model_tflops},
      {"mfu", mfu},
      {"peak_memory_bytes", std::llround(r.memory.peak_hbm_bytes)},
      {"memory_capacity_bytes", std::llround(capacity)},
      {"fits", fits},
      {"memory_breakdown_bytes", mem},
      {"host_memory_bytes", std::llround(r.memory.peak_host_bytes)},
      {"breakdown_s",
       {{"compute", b.compute_s},
        {"recompute", b.recompute_s},
        {"exposed_communication", b.exposed_communication_s},
        {"exposed_offload", b.exposed_offload_s},
        {"launch_overhead", b.launch_overhead_s},
        {"pipeline_bubble", b.pipeline_bubble_s},
        {"idle", b.idle_s}}},
      {"warnings", warnings}};
  if (!in.section.empty()) report[in.section] = in.section_json;
  return report;
}

void for_each_trace_event(const Job& job, const OpGraph& g, const ReplayResult& r,
                          const std::function<void(const json&)>& emit) {
  // Each event is built, handed over and dropped: a 256-GPU step with every micro-step replayed has millions of
  // events, which as one JSON document had taken 9.4 GB of memory (nlohmann's values cost ~100 bytes each).
  struct Events {
    const std::function<void(const json&)>& emit;
    void push_back(const json& e) const { emit(e); }
  } events{emit};
  // One thread per stream, then the host launch thread.
  auto thread_name = [](int tid) {
    return tid < kStreamCount ? to_string(static_cast<StreamKind>(tid)) : std::string("host launch");
  };
  const int host_tid = kStreamCount;
  for (int pid = 0; pid < g.ranks; ++pid) {
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
                      {"args", {{"name", g.ranks > 1 ? fmt::format("pipeline stage {} of {} (a job of {} x {})", pid, g.ranks,
                                                                   job.system.gpus, job.system.spec.name)
                                                     : fmt::format("rank role 0 (a job of {} x {})", job.system.gpus,
                                                                   job.system.spec.name)}}}});
    for (int tid = 0; tid <= kStreamCount; ++tid)
      events.push_back(
          {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", thread_name(tid)}}}});
  }
  auto us = [](double s) { return s * 1e6; };
  auto kind_name = [](OpKind k) {
    return k == OpKind::kernel ? "kernel" : k == OpKind::collective ? "collective" : "copy";
  };
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const OpRecord& rec = r.ops[i];
    const int pid = op.rank;
    json args = {{"phase", to_string(op.phase)}, {"bound_by", std::string(rec.bound_by)}};
    if (op.kind == OpKind::kernel) {
      args["flops"] = op.flops;
      args["hbm_bytes"] = op.hbm_bytes;
    } else if (op.kind == OpKind::collective) {
      args["collective"] = to_string(op.coll);
      args["group"] = to_string(op.group);
      args["bytes"] = op.coll_bytes;  // the op's nominal size (nccl-tests' 'size'; an exchange's token copies)
      args["algorithm"] = std::string(rec.algorithm);
      args["nic_bytes_per_rank"] = rec.nic_bytes;  // as modelled: what crossed this rank's NICs and NVLink
      args["nvlink_bytes_per_rank"] = rec.nvlink_bytes;
    } else {
      args["bytes"] = op.copy_bytes;
    }
    const std::string name = g.op_name(static_cast<OpId>(i));
    // Categories (Perfetto's "cat" filter): what the op is and which part of the step it belongs to.
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", static_cast<int>(op.stream)},
                      {"name", name},
                      {"cat", fmt::format("{},{}", kind_name(op.kind), to_string(op.phase))},
                      {"ts", us(rec.start_s)},
                      {"dur", us(rec.end_s - rec.start_s)},
                      {"args", args}});
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", host_tid},
                      {"name", "launch " + name},
                      {"cat", "launch"},
                      {"ts", us(rec.launch_start_s)},
                      {"dur", us(rec.launch_end_s - rec.launch_start_s)}});
  }
  // Flow arrows for the dependencies the streams alone do not show: across streams (a collective
  // waiting for the GEMM that produced its input) and across ranks (pipeline sends). The arrow
  // leaves the producer just before its end and enters the consumer at its start.
  std::uint64_t flow_id = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (OpId d : op.deps) {
      const Op& from = g.ops[d];
      if (from.stream == op.stream && from.rank == op.rank) continue;
      const OpRecord& a = r.ops[d];
      const OpRecord& b = r.ops[i];
      const bool cross_rank = from.rank != op.rank;
      const char* cat = cross_rank ? "dependency,cross-rank" : "dependency,cross-stream";
      ++flow_id;
      events.push_back({{"ph", "s"}, {"id", flow_id}, {"pid", from.rank}, {"tid", static_cast<int>(from.stream)},
                        {"ts", us(std::max(a.start_s, a.end_s - 1e-12))}, {"name", cross_rank ? "send" : "dependency"},
                        {"cat", cat}});
      events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"pid", op.rank}, {"tid", static_cast<int>(op.stream)},
                        {"ts", us(b.start_s)}, {"name", cross_rank ? "send" : "dependency"}, {"cat", cat}});
    }
  }
  // HBM in use per rank, by category (a stacked counter track), and pinned host memory when used:
  // tensors allocated when their op starts and freed when it ends, frees first at equal times,
  // as the engine's memory high-water mark counts them.
  {
    const std::vector<MemoryEvent> ev = memory_events(g, r.ops);
    const int R = std::max(1, g.ranks);
    MemoryInUse in_use(g, R);
    bool any_host = false;  // the host track starts with the first pinned tensor
    for (TensorId id : g.resident) any_host = any_host || g.tensors[id].on_host;
    auto counter = [&](int rank, double t) {
      json a = json::object();
      for (int c = 0; c < kMemCategoryCount; ++c) a[to_string(static_cast<MemCategory>(c))] = in_use.hbm(rank)[c] / 1e9;
      events.push_back({{"ph", "C"}, {"pid", rank}, {"name", "HBM in use (GB)"}, {"cat", "memory"}, {"ts", us(t)}, {"args", a}});
      if (any_host)
        events.push_back({{"ph", "C"}, {"pid", rank}, {"name", "host memory in use (GB)"}, {"cat", "memory"},
                          {"ts", us(t)}, {"args", {{"pinned", in_use.host(rank) / 1e9}}}});
    };
    for (int rank = 0; rank < R; ++rank) counter(rank, 0);
    // One sample per rank and instant, after every change at that instant.
    for (std::size_t k = 0; k < ev.size();) {
      const double t = ev[k].t_s;
      std::vector<char> touched(R, 0);
      for (; k < ev.size() && ev[k].t_s == t; ++k) {
        in_use.apply(ev[k].tensor, ev[k].alloc);
        any_host = any_host || g.tensors[ev[k].tensor].on_host;
        const int rank = g.tensors[ev[k].tensor].rank;
        if (rank < R) touched[rank] = 1;
      }
      for (int rank = 0; rank < R; ++rank)
        if (touched[rank]) counter(rank, t);
    }
  }
}

json make_trace(const Job& job, const OpGraph& g, const ReplayResult& r) {
  json events = json::array();
  for_each_trace_event(job, g, r, [&](const json& e) { events.push_back(e); });
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

namespace {

// Where the trace's text goes, piece by piece: the file itself, or zlib's deflate in front of it (gzip framing, level
// 6). Nothing is held but a buffer, so a trace of any size writes in bounded memory.
class TraceSink {
 public:
  TraceSink(const std::string& path, bool gzip) : file_(path, "--trace"), gzip_(gzip), out_(std::size_t{1} << 20) {
    if (gzip_ && deflateInit2(&z_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: deflateInit2 failed");
    text_.reserve(kPiece);
  }
  ~TraceSink() {
    if (gzip_) deflateEnd(&z_);
  }
  void append(std::string_view s) {
    text_.append(s);
    bytes_ += s.size();
    if (text_.size() >= kPiece) flush(false);
  }
  void finish() {
    flush(true);
    file_.close();
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t kPiece = std::size_t{1} << 20;
  void flush(bool last) {
    if (!gzip_) {
      file_.write(text_);
      text_.clear();
      return;
    }
    z_.next_in = reinterpret_cast<Bytef*>(text_.data());
    z_.avail_in = static_cast<uInt>(text_.size());  // a piece is a few MB at most: within zlib's 32-bit counts
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&z_, last ? Z_FINISH : Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
      file_.write(std::string_view(out_.data(), out_.size() - z_.avail_out));
    } while (z_.avail_out == 0 || (last && rc != Z_STREAM_END));
    text_.clear();
  }
  input::OutputFile file_;
  bool gzip_;
  z_stream z_{};
  std::string text_;
  std::vector<char> out_;
  std::uint64_t bytes_ = 0;
};

}  // namespace

// The JSON chrome://tracing and Perfetto's web UI can still load (V8's 512 MiB string, less the page's own).
constexpr std::uint64_t kViewerTraceBytes = std::uint64_t{256} << 20;

void write_trace_file(const std::string& path, const Job& job, const OpGraph& g, const ReplayResult& r) {
  // ".gz" in any case (t.JSON.GZ had been written uncompressed under a compressed name).
  const bool gzip = path.size() > 3 && path[path.size() - 3] == '.' && std::tolower(static_cast<unsigned char>(path[path.size() - 2])) == 'g' &&
                    std::tolower(static_cast<unsigned char>(path.back())) == 'z';
  std::size_t events = 0;
  TraceSink sink(path, gzip);  // a path that cannot be opened is left as it was
  const input::PartialOutputGuard interrupted(path);  // (an interrupted write is removed, as a failed one is)
  bool warned = false;
  try {
    // The same text as make_trace(...).dump() + "\n": an object's keys in nlohmann's (sorted) order.
    sink.append("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    // A trace the viewers cannot open says so (an audit's finding: a 256-GPU MoE step with every micro-step replayed
    // wrote 3.6 M events, 635 MB, which chrome://tracing and Perfetto's UI, both bound by V8's 512 MiB string, cannot
    // load), when it passes that size: the largest a run may replay writes 2 GB in about a minute (a red-team pass).
    for_each_trace_event(job, g, r, [&](const json& e) {
      if (events++ > 0) sink.append(",");
      sink.append(e.dump());
      if (!warned && sink.bytes() > kViewerTraceBytes) {
        warned = true;
        spdlog::warn("{}: the trace passes {} events, {:.0f} MB of JSON, and grows: chrome://tracing and Perfetto's web "
                     "UI load at most about 500 MB (compressed or not); open it with Perfetto's trace_processor, or "
                     "trace a smaller job (fewer micro-batches: --set training.global_batch=...){}",
                     path, events, static_cast<double>(sink.bytes()) / 1e6,
                     input::partial_output_cleanup_enabled() ? "; an interrupted trace is removed" : "");
      }
    });
    sink.append("]}\n");
    sink.finish();
    if (warned) spdlog::info("{}: the trace holds {} events, {:.0f} MB of JSON", path, events, static_cast<double>(sink.bytes()) / 1e6);
  } catch (...) {
    input::remove_partial_output(path);
    throw;
  }
}

}  // namespace racksim::sim
