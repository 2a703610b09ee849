// Times Transformer Engine's fused scaled upper-triangular masked softmax (forward and backward), the kernels TE's
// unfused DotProductAttention runs (NVTE_FUSED_ATTN=0), at attention-score shapes, against a device-to-device copy of
// the same bytes. TE's kernel source is not part of racksim: te_softmax.sh extracts it from a TransformerEngine
// checkout given on its command line and passes it in as TE_SOFTMAX_KERNELS. What this file adds is the prelude the
// extracted kernels need (TE's element types, its check macro, log2_ceil) and the timing loop.
#include <cuda.h>  // CUDA_VERSION, which the extracted kernels test
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define THREADS_PER_WARP 32
#define NVTE_CHECK(cond, msg)                         \
  do {                                                \
    if (!(cond)) {                                    \
      std::fprintf(stderr, "check failed: %s\n", msg); \
      std::exit(3);                                   \
    }                                                 \
  } while (0)
namespace transformer_engine {
using bf16 = __nv_bfloat16;
using fp16 = __half;
inline int log2_ceil(int value) {
  int l = 0;
  while ((1 << l) < value) ++l;
  return l;
}
}  // namespace transformer_engine

#include TE_SOFTMAX_KERNELS

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

__global__ void fill(__nv_bfloat16* p, size_t n, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(scale * static_cast<float>((i * 2654435761u) % 1000) / 1000.0f);
}

// Median of `reps` timings (ms) of `fn`, each over `inner` calls, after `warm` untimed calls.
template <typename F>
double median_ms(F fn, int warm, int reps, int inner) {
  for (int i = 0; i < warm; ++i) fn();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a);
    for (int i = 0; i < inner; ++i) fn();
    cudaEventRecord(b);
    check(cudaEventSynchronize(b), "timing");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms / inner);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using transformer_engine::bf16;
  // (attention batches = micro-batch x heads, sequence): Pax GPT-126M's (4 x 12, 2048) first.
  std::vector<std::pair<int, int>> shapes = {{48, 2048}, {48, 1024}, {96, 2048}, {32, 4096}, {128, 1024}};
  if (argc > 1 && std::string(argv[1]) == "--quick") shapes.resize(1);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");
  std::printf("{\"device\": \"%s\", \"sm_count\": %d}\n", prop.name, prop.multiProcessorCount);
  for (auto [bh, s] : shapes) {
    const size_t n = static_cast<size_t>(bh) * s * s;
    bf16 *x, *y, *g, *dx;
    check(cudaMalloc(&x, n * 2), "malloc");
    check(cudaMalloc(&y, n * 2), "malloc");
    check(cudaMalloc(&g, n * 2), "malloc");
    check(cudaMalloc(&dx, n * 2), "malloc");
    fill<<<1024, 256>>>(x, n, 4.0f);
    fill<<<1024, 256>>>(g, n, 1.0f);
    const bf16 scale = __float2bfloat16(0.125f);
    const double fwd = median_ms(
        [&] {
          transformer_engine::dispatch_scaled_upper_triang_masked_softmax_forward<bf16, bf16, float>(y, x, scale, s, s, bh,
                                                                                                    nullptr);
        },
        10, 15, 10);
    const double bwd = median_ms(
        [&] {
          transformer_engine::dispatch_scaled_upper_triang_masked_softmax_backward<bf16, bf16, float>(dx, g, y, 0.125f, s,
                                                                                                     s, bh, nullptr);
        },
        10, 15, 10);
    check(cudaGetLastError(), "kernels");
    // The same bytes as a device-to-device copy (a copy of N bytes reads N and writes N).
    const double fwd_bytes = 1.5 * 2.0 * n, bwd_bytes = 2.0 * 2.0 * n;
    const double copy_fwd = median_ms([&] { cudaMemcpyAsync(dx, x, static_cast<size_t>(fwd_bytes / 2), cudaMemcpyDeviceToDevice); }, 5, 15, 10);
    const double copy_bwd = median_ms([&] { cudaMemcpyAsync(dx, x, static_cast<size_t>(bwd_bytes / 2), cudaMemcpyDeviceToDevice); }, 5, 15, 10);
    std::printf(
        "{\"attn_batches\": %d, \"seq\": %d, \"forward_ms\": %.5f, \"backward_ms\": %.5f, \"forward_model_bytes\": %.0f, "
        "\"backward_model_bytes\": %.0f, \"forward_GBps\": %.1f, \"backward_GBps\": %.1f, \"copy_same_bytes_forward_ms\": %.5f, "
        "\"copy_same_bytes_backward_ms\": %.5f}\n",
        bh, s, fwd, bwd, fwd_bytes, bwd_bytes, fwd_bytes / fwd / 1e6, bwd_bytes / bwd / 1e6, copy_fwd, copy_bwd);
    cudaFree(x);
    cudaFree(y);
    cudaFree(g);
    cudaFree(dx);
  }
  return 0;
}
