// Kernels and timing helpers shared by the sections.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdio>

#include "common.h"

namespace rb {

[[noreturn]] void throw_error(const std::string& what, const char* file, int line) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%s:%d)", file, line);
  throw std::runtime_error(what + buf);
}

std::string fmt_bytes(size_t b) {
  char buf[64];
  if (b >= GiB && b % GiB == 0)
    std::snprintf(buf, sizeof buf, "%zuGiB", b / GiB);
  else if (b >= MiB && b % MiB == 0)
    std::snprintf(buf, sizeof buf, "%zuMiB", b / MiB);
  else if (b >= KiB && b % KiB == 0)
    std::snprintf(buf, sizeof buf, "%zuKiB", b / KiB);
  else
    std::snprintf(buf, sizeof buf, "%zuB", b);
  return buf;
}

namespace {

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Uniform in [-scale, scale).
__device__ __forceinline__ float uniform(uint64_t i, uint32_t seed, float scale) {
  uint32_t h = hash32(i * 0x9E3779B97F4A7C15ULL + seed);
  return (static_cast<float>(h) * (1.0f / 4294967296.0f) * 2.0f - 1.0f) * scale;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(uniform(i, seed, scale));
}

__global__ void fill_fp8_kernel(__nv_fp8_e4m3* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __nv_fp8_e4m3(uniform(i, seed, scale));
}

__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>(hash32(i + (static_cast<uint64_t>(seed) << 40)) >> 11);
}

__global__ void copy_kernel_impl(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  // Four independent 16-byte loads in flight per thread before the stores.
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i];
    int4 b = src[i + stride];
    int4 c = src[i + 2 * stride];
    int4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void copy_tail_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int grid_for(size_t n, int threads) {
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535ull * 8) blocks = 65535ull * 8;
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

}  // namespace

void fill_bf16(void* p, size_t n, uint32_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<grid_for(n, 256), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale);
  RB_CHECK_LAUNCH();
}

void fill_fp8_e4m3(void* p, size_t n, uint32_t seed, float scale, cudaStream_t s) {
  fill_fp8_kernel<<<grid_for(n, 256), 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed, scale);
  RB_CHECK_LAUNCH();
}

void fill_bytes(void* p, size_t n, uint32_t seed, cudaStream_t s) {
  fill_bytes_kernel<<<grid_for(n, 256), 256, 0, s>>>(static_cast<uint8_t*>(p), n, seed);
  RB_CHECK_LAUNCH();
}

void fill_const_bytes(void* p, size_t n, uint8_t value, cudaStream_t s) { RB_CUDA(cudaMemsetAsync(p, value, n, s)); }

void copy_kernel(const void* src, void* dst, size_t bytes, int sm_count, cudaStream_t s) {
  const int threads = 512;
  size_t n16 = bytes / 16;
  if (n16) {
    size_t want = (n16 + threads - 1) / threads;
    size_t cap = static_cast<size_t>(sm_count) * 4;  // 4 blocks of 512 threads fill an SM (2048 threads)
    int blocks = static_cast<int>(want < cap ? want : cap);
    copy_kernel_impl<<<blocks, threads, 0, s>>>(static_cast<const int4*>(src), static_cast<int4*>(dst), n16);
    RB_CHECK_LAUNCH();
  }
  size_t tail = bytes - n16 * 16;
  if (tail) {
    copy_tail_kernel<<<1, 32, 0, s>>>(static_cast<const uint8_t*>(src) + n16 * 16,
                                      static_cast<uint8_t*>(dst) + n16 * 16, tail);
    RB_CHECK_LAUNCH();
  }
}

void launch_empty(cudaStream_t s) { empty_kernel<<<1, 1, 0, s>>>(); }

void launch_spin(cudaStream_t s, long long cycles) {
  spin_kernel<<<1, 1, 0, s>>>(cycles);
  RB_CHECK_LAUNCH();
}

Stats time_isolated(cudaStream_t s, int warmup, int reps, const Enqueue& op) {
  for (int i = 0; i < warmup; ++i) op(s, i);
  RB_CUDA(cudaStreamSynchronize(s));
  EventPair ev;
  std::vector<double> t;
  t.reserve(reps);
  for (int r = 0; r < reps; ++r) {
    RB_CUDA(cudaEventRecord(ev.a, s));
    op(s, warmup + r);
    RB_CUDA(cudaEventRecord(ev.b, s));
    RB_CUDA(cudaEventSynchronize(ev.b));
    t.push_back(ev.seconds());
  }
  return summarize(t);
}

Stats time_graph_batch(cudaStream_t s, int inner, int reps, const Enqueue& op) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  RB_CUDA(cudaStreamSynchronize(s));
  RB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < inner; ++i) op(s, i);
  } catch (...) {
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  RB_CUDA(cudaStreamEndCapture(s, &g));
  RB_CUDA(cudaGraphInstantiate(&ge, g, 0));
  std::vector<double> t;
  try {
    RB_CUDA(cudaGraphLaunch(ge, s));  // warm-up replay (uploads the graph)
    RB_CUDA(cudaStreamSynchronize(s));
    EventPair ev;
    for (int r = 0; r < reps; ++r) {
      RB_CUDA(cudaEventRecord(ev.a, s));
      RB_CUDA(cudaGraphLaunch(ge, s));
      RB_CUDA(cudaEventRecord(ev.b, s));
      RB_CUDA(cudaEventSynchronize(ev.b));
      t.push_back(ev.seconds() / inner);
    }
  } catch (...) {
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    throw;
  }
  RB_CUDA(cudaGraphExecDestroy(ge));
  RB_CUDA(cudaGraphDestroy(g));
  return summarize(t);
}

}  // namespace rb
