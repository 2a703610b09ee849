// GPU-side cost of a kernel boundary in one stream: eager launches queued ahead of the GPU, the same kernels
// replayed from a CUDA graph, and eager launches with programmatic dependent launch (PDL). Standalone (no
// racksim-bench dependencies): nvcc -O2 -arch=sm_90 -o kernel_gap kernel_gap.cu && ./kernel_gap OUT.json
//
// Method. A spin kernel holds the stream for ~60 ms while the host launches N kernels behind it (N x ~5 us of
// host time, well inside the spin), so when the spin ends the GPU finds all N queued: the span from an event
// after the spin to an event after the N kernels, / N, is the GPU's time per kernel with the host out of the
// way. The same N kernels captured in a graph and launched behind a spin give the graph's time per node. With
// PDL each kernel carries cudaLaunchAttributeProgrammaticStreamSerialization and waits for its predecessor
// inside (griddepcontrol.wait), so its launch can overlap the predecessor's tail. Kernels: an empty one (1
// block, and 264 blocks of 256 threads), and a copy of B bytes (grid-stride, 264 x 256 threads) for several B:
// the boundary cost is the per-kernel span less the kernel's own time, which the largest N-independent part of
// the graph span approximates. Each case: reps repetitions, median and min reported.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <bool kPdl>
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  if constexpr (kPdl) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
  if constexpr (kPdl) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  }
}

struct Case {
  std::string name;
  int blocks;
  size_t bytes;  // 0: empty kernel
};

static void launch(cudaStream_t s, const Case& c, bool pdl, const float4* a, float4* b) {
  const size_t n = c.bytes / sizeof(float4);
  if (!pdl) {
    copy_kernel<false><<<c.blocks, 256, 0, s>>>(a, b, n);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(c.blocks);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, copy_kernel<true>, a, b, n));
}

int main(int argc, char** argv) {
  const char* out_path = argc > 1 ? argv[1] : "kernel_gap.json";
  const int N = 1000, reps = 15;
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const long long spin_cycles = (long long)(0.060 * clock_khz * 1e3);  // ~60 ms at the base rate
  const size_t max_bytes = size_t(64) << 20;
  float4 *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, max_bytes));
  CK(cudaMalloc(&b, max_bytes));
  CK(cudaMemset(a, 1, max_bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int fill = 2 * prop.multiProcessorCount;  // 264 on an H200
  std::vector<Case> cases = {{"empty_1x256", 1, 0},          {"empty_" + std::to_string(fill) + "x256", fill, 0},
                             {"copy_64KiB", fill, 64 << 10}, {"copy_1MiB", fill, 1 << 20},
                             {"copy_4MiB", fill, 4 << 20},   {"copy_16MiB", fill, 16 << 20}};
  std::FILE* f = std::fopen(out_path, "w");
  if (!f) return 1;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  int driver = 0;
  CK(cudaDriverGetVersion(&driver));
  // racksim calibrate fit reads this schema (calibration/fit/calibration_fit.cpp, launch.eager_kernel_gap).
  std::fprintf(f,
               "{\"schema\": \"racksim-kernel-gap/1\", \"date\": \"%s\", \"device\": \"%s\", \"cuda_driver_api\": %d, "
               "\"sms\": %d, \"clock_khz\": %d, \"n\": %d, \"reps\": %d, \"cases\": [\n",
               date, prop.name, driver, prop.multiProcessorCount, clock_khz, N, reps);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    auto median_min = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return std::make_pair(v[v.size() / 2], v.front());
    };
    // mode 0 eager, 1 eager+PDL, 2 graph, 3 graph+PDL, 4 one kernel alone (after a spin), per-kernel us
    double med[5], mn[5];
    for (int mode = 0; mode < 5; ++mode) {
      cudaGraphExec_t ge = nullptr;
      const bool pdl = mode == 1 || mode == 3;
      const int n = mode == 4 ? 1 : N;
      if (mode == 2 || mode == 3) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < n; ++i) launch(s, c, pdl, a, b);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphUpload(ge, s));
        CK(cudaGraphDestroy(g));
      }
      std::vector<double> per;
      for (int r = -2; r < reps; ++r) {
        CK(cudaStreamSynchronize(s));
        spin<<<1, 1, 0, s>>>(spin_cycles);
        CK(cudaEventRecord(e0, s));
        if (ge) CK(cudaGraphLaunch(ge, s));
        else
          for (int i = 0; i < n; ++i) launch(s, c, pdl, a, b);
        CK(cudaEventRecord(e1, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) per.push_back(ms * 1e3 / n);
      }
      if (ge) CK(cudaGraphExecDestroy(ge));
      auto [m, lo] = median_min(per);
      med[mode] = m;
      mn[mode] = lo;
    }
    std::printf("%-16s eager %7.3f  eager+pdl %7.3f  graph %7.3f  graph+pdl %7.3f  alone %8.3f  us/kernel (median)\n",
                c.name.c_str(), med[0], med[1], med[2], med[3], med[4]);
    std::fprintf(f,
                 "  {\"case\": \"%s\", \"blocks\": %d, \"threads\": 256, \"bytes\": %zu, "
                 "\"eager_us\": {\"median\": %.4f, \"min\": %.4f}, \"eager_pdl_us\": {\"median\": %.4f, \"min\": %.4f}, "
                 "\"graph_us\": {\"median\": %.4f, \"min\": %.4f}, \"graph_pdl_us\": {\"median\": %.4f, \"min\": %.4f}, "
                 "\"alone_us\": {\"median\": %.4f, \"min\": %.4f}}%s\n",
                 c.name.c_str(), c.blocks, c.bytes, med[0], mn[0], med[1], mn[1], med[2], mn[2], med[3], mn[3], med[4], mn[4],
                 ci + 1 < cases.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
  return 0;
}
