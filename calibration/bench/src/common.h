// Shared helpers for racksim-bench: error checks, options, statistics, timing, ceilings.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"

namespace rb {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

[[noreturn]] void throw_error(const std::string& what, const char* file, int line);

#define RB_CUDA(call)                                                                        \
  do {                                                                                       \
    cudaError_t rb_err_ = (call);                                                            \
    if (rb_err_ != cudaSuccess)                                                              \
      ::rb::throw_error(std::string(#call) + ": " + cudaGetErrorString(rb_err_), __FILE__, __LINE__); \
  } while (0)

#define RB_CHECK_LAUNCH() RB_CUDA(cudaGetLastError())

struct Options {
  std::string out = "racksim-bench.json";
  bool quick = false;
  std::set<std::string> only;  // empty: every section
  int device = 0;
  int reps = 10;
  int warmup = 3;
  size_t hbm_max_bytes = 4 * GiB;
  size_t host_max_bytes = 4 * GiB;
  size_t nccl_max_bytes = 1 * GiB;
  int nccl_min_gpus = 2;
  bool allow_nvls = false;
  std::vector<std::string> argv;
  bool want(const std::string& section) const { return only.empty() || only.count(section) > 0; }
  bool named(const std::string& section) const { return only.count(section) > 0; }
};

// Upper bounds a measurement must not exceed (0 = unknown, not checked).
struct Ceilings {
  double bf16_tflops = 0;
  double fp8_tflops = 0;
  double fp4_tflops = 0;
  double hbm_Bps = 0;             // bytes/s, read+write counted
  double pcie_Bps_per_dir = 0;    // bytes/s per direction
  double nvlink_Bps_per_dir = 0;  // bytes/s per direction per GPU
  std::string source;
};

struct Stats {
  double median = 0, min = 0, max = 0, mean = 0;
  int n = 0;
};

inline Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int>(v.size());
  s.min = v.front();
  s.max = v.back();
  s.median = (v.size() % 2) ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  return s;
}

// {"median":..,"min":..,"max":..,"n":..} with values scaled by `scale`.
inline Json stats_json(const Stats& s, double scale = 1.0) {
  Json j = Json::object();
  j["median"] = s.median * scale;
  j["min"] = s.min * scale;
  j["max"] = s.max * scale;
  j["n"] = s.n;
  return j;
}

// A rate (work/second) from time statistics: median rate from median time, max rate from min time.
inline Json rate_json(const Stats& t, double work, double unit) {
  Json j = Json::object();
  j["median"] = t.median > 0 ? work / t.median / unit : 0.0;
  j["min"] = t.max > 0 ? work / t.max / unit : 0.0;
  j["max"] = t.min > 0 ? work / t.min / unit : 0.0;
  return j;
}

inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

struct Context {
  Options opt;
  Ceilings ceil;
  cudaDeviceProp prop{};
  int device = 0;
  int ngpus = 0;
  Json warnings = Json::array();

  void warn(const std::string& msg) {
    std::fprintf(stderr, "WARNING: %s\n", msg.c_str());
    std::fflush(stderr);
    warnings.push(msg);
  }
  // Prints and records a warning when value exceeds the ceiling (ceiling 0: unknown).
  bool check_ceiling(const std::string& what, double value, double ceiling, const char* unit) {
    if (ceiling <= 0 || value <= ceiling) return true;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s = %.4g %s exceeds the ceiling %.4g %s (%s)", what.c_str(), value, unit,
                  ceiling, unit, ceil.source.c_str());
    warn(buf);
    return false;
  }
};

// RAII CUDA event pair.
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  EventPair() {
    RB_CUDA(cudaEventCreate(&a));
    RB_CUDA(cudaEventCreate(&b));
  }
  ~EventPair() {
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double seconds() const {
    float ms = 0;
    RB_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }
};

inline double event_seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  RB_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

using Enqueue = std::function<void(cudaStream_t, int)>;

// One operation at a time, the stream synchronized before each: event-timed, includes the
// time the GPU waits for the submission after the first event (a one-shot cost).
Stats time_isolated(cudaStream_t s, int warmup, int reps, const Enqueue& op);

// `inner` operations captured once into a CUDA graph and replayed `reps` times; per-operation
// time = event span of one replay / inner (back-to-back cost, no host launch gaps).
Stats time_graph_batch(cudaStream_t s, int inner, int reps, const Enqueue& op);

// inner so that a batch lasts about target_s given a per-op estimate, clamped to [1, cap].
inline int pick_inner(double est_s, double target_s, int cap) {
  if (est_s <= 0) return 1;
  double n = target_s / est_s;
  if (n < 1) return 1;
  if (n > cap) return cap;
  return static_cast<int>(n);
}

// Fill kernels (bench_kernels.cu).
void fill_bf16(void* p, size_t n, uint32_t seed, float scale, cudaStream_t s);
void fill_fp8_e4m3(void* p, size_t n, uint32_t seed, float scale, cudaStream_t s);
void fill_bytes(void* p, size_t n, uint32_t seed, cudaStream_t s);
void fill_const_bytes(void* p, size_t n, uint8_t value, cudaStream_t s);
void copy_kernel(const void* src, void* dst, size_t bytes, int sm_count, cudaStream_t s);
void launch_empty(cudaStream_t s);
void launch_spin(cudaStream_t s, long long cycles);

// Sections.
Json device_identity(Context& ctx, bool full);
Json clocks_snapshot(Context& ctx);
Json bench_gemm(Context& ctx);
Json bench_wgrad(Context& ctx);  // opt-in: only with --only wgrad
Json bench_hbm(Context& ctx);
Json bench_host(Context& ctx);
Json bench_launch(Context& ctx);
Json bench_contention(Context& ctx);
Json bench_nccl(Context& ctx);
Json nccl_identity();

std::string fmt_bytes(size_t b);

}  // namespace rb
