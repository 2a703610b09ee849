// Host time of Transformer Engine's grouped expert GEMM path, replicated with cuBLASLt alone.
//
// TE 2.6.0.dev0 (NVIDIA/TransformerEngine@07afda98, the image of yanring/Megatron-MoE-ModelZoo@e8650517's
// dockers/H100.Dockerfile) runs GroupedLinear's GEMMs through nvte_multi_stream_cublas_gemm
// (transformer_engine/common/gemm/cublaslt_gemm.cu:678-713): one event recorded on the caller's stream and
// waited on by up to 4 compute streams, then for every GEMM i cublas_gemm on compute stream i % 4, then one
// event recorded on each compute stream and waited on by the caller's stream. cublas_gemm (same file,
// 238-613) builds everything from scratch each call: 4 matrix layouts, a matmul descriptor and its
// attributes, a preference and its attributes, cublasLtMatmulAlgoGetHeuristic, cublasLtMatmul, 6 destroys.
// This program issues that sequence, and its parts alone, with the GPU kept busy by a spin kernel on the
// caller's stream (so no call waits for the GPU), and reports host microseconds per GEMM (events: per call).
//
//   te_grouped_gemm_host [--tokens 512,2048] [--experts 4,16] [--batches 12] [--json OUT.jsonl]
// Run once more with CUBLASLT_HEURISTICS_CACHE_CAPACITY=0 to see the heuristic without cuBLASLt's cache.
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)
#define CB(x)                                                                                   \
  do {                                                                                          \
    cublasStatus_t s_ = (x);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_));           \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace {

constexpr int kStreams = 4;                        // TE's num_compute_streams (util/multi_stream.cpp)
constexpr size_t kWorkspaceBytes = 33'554'432;     // TE's Hopper cuBLAS workspace (pytorch/module/base.py:65-69)

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// One GEMM class of an expert MLP, in TE's column-major terms (cublas_gemm: m, n, k; op of A and B).
struct Gemm {
  std::string name;
  int m = 0, n = 0, k = 0;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  bool fp8 = false;          // e4m3 A and B, per-tensor scales (TE's delayed / current scaling), bf16 D
  bool fp32_accumulate = false;  // wgrad into Megatron's fp32 main_grad (fuse_wgrad_accumulation), beta 1
};

// What one GEMM's descriptors are: built per call by cublas_gemm, or kept by the parts-alone variants.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
};

struct Buffers {
  void *a = nullptr, *b = nullptr, *d = nullptr;
  size_t a_stride = 0, b_stride = 0, d_stride = 0;  // bytes per expert, 256-aligned
  float* scales = nullptr;                          // A and B scale-inverses (fp8)
  std::vector<void*> workspace;
};

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

unsigned alignment_of(const void* p) {  // TE's _getAlignment: the largest power of two up to 256
  const auto v = reinterpret_cast<uintptr_t>(p);
  unsigned a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// cublas_gemm's descriptor work (cublaslt_gemm.cu:322-575, the attributes set for a GEMM without bias or
// GELU): layouts A, B, D, matmul descriptor (TRANSA, TRANSB, fp8: FAST_ACCUM, A/B scale pointers and
// modes), layout C, EPILOGUE, preference (workspace, 4 alignments).
void create_descs(const Gemm& g, void* A, void* B, void* D, const float* scales, Descs& s) {
  const cudaDataType_t ab = g.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const cudaDataType_t dt = g.fp32_accumulate ? CUDA_R_32F : CUDA_R_16BF;
  const int lda = g.ta == CUBLAS_OP_N ? g.m : g.k, ldb = g.tb == CUBLAS_OP_N ? g.k : g.n;
  CB(cublasLtMatrixLayoutCreate(&s.a, ab, g.ta == CUBLAS_OP_N ? g.m : g.k, g.ta == CUBLAS_OP_N ? g.k : g.m, lda));
  CB(cublasLtMatrixLayoutCreate(&s.b, ab, g.tb == CUBLAS_OP_N ? g.k : g.n, g.tb == CUBLAS_OP_N ? g.n : g.k, ldb));
  CB(cublasLtMatrixLayoutCreate(&s.d, dt, g.m, g.n, g.m));
  CB(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &g.ta, sizeof(g.ta)));
  CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &g.tb, sizeof(g.tb)));
  if (g.fp8) {
    const int8_t fast = 1;
    CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    const float* sa = scales;
    const float* sb = scales + 1;
    CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
    CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
  }
  CB(cublasLtMatrixLayoutCreate(&s.c, dt, g.m, g.n, g.m));
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  CB(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  CB(cublasLtMatmulPreferenceCreate(&s.pref));
  const size_t ws = kWorkspaceBytes;
  CB(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const unsigned al[4] = {alignment_of(A), alignment_of(B), alignment_of(D), alignment_of(D)};
  CB(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof(al[0])));
  CB(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof(al[1])));
  CB(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof(al[2])));
  CB(cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], sizeof(al[3])));
}

void destroy_descs(Descs& s) {  // cublaslt_gemm.cu:607-612
  CB(cublasLtMatmulPreferenceDestroy(s.pref));
  CB(cublasLtMatrixLayoutDestroy(s.d));
  CB(cublasLtMatrixLayoutDestroy(s.c));
  CB(cublasLtMatrixLayoutDestroy(s.b));
  CB(cublasLtMatrixLayoutDestroy(s.a));
  CB(cublasLtMatmulDescDestroy(s.op));
  s = Descs{};
}

cublasLtMatmulHeuristicResult_t heuristic(cublasLtHandle_t h, const Descs& s) {
  cublasLtMatmulHeuristicResult_t r = {};
  int n = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(h, s.op, s.a, s.b, s.c, s.d, s.pref, 1, &r, &n));
  if (n == 0) {
    std::fprintf(stderr, "no cuBLASLt algorithm\n");
    std::exit(1);
  }
  return r;
}

void matmul(cublasLtHandle_t h, const Gemm& g, const Descs& s, const cublasLtMatmulAlgo_t& algo, void* A, void* B,
            void* D, void* ws, cudaStream_t st) {
  const float one = 1.0f, beta = g.fp32_accumulate ? 1.0f : 0.0f;
  CB(cublasLtMatmul(h, s.op, &one, A, s.a, B, s.b, &beta, D, s.c, D, s.d, &algo, ws, kWorkspaceBytes, st));
}

enum class Variant { te_full, descriptors, heuristic_only, matmul_only, events_only };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::te_full: return "te_full";
    case Variant::descriptors: return "descriptors";
    case Variant::heuristic_only: return "heuristic";
    case Variant::matmul_only: return "matmul";
    case Variant::events_only: return "events";
  }
  return "?";
}

struct Ctx;
bool supported(Ctx& c, const Gemm& g, Buffers& b);

struct Ctx {
  cublasLtHandle_t h = nullptr;
  cudaStream_t main = nullptr;
  cudaStream_t comp[kStreams] = {};
  cudaEvent_t ev[kStreams] = {};   // TE's compute-stream events (cudaEventCreate: timing on)
  cudaEvent_t spin_done = nullptr;
  long long spin_cycles = 0;
};

// One grouped call of `experts` GEMMs, as the variant issues it. kept/algo: the parts-alone variants'
// pre-built descriptors and algorithm per expert.
void grouped_call(Ctx& c, Variant v, const Gemm& g, Buffers& b, int experts, std::vector<Descs>& kept,
                  std::vector<cublasLtMatmulAlgo_t>& algo) {
  const int used = std::min(kStreams, experts);
  const bool events = v == Variant::te_full || v == Variant::events_only;
  if (events) {  // cublaslt_gemm.cu:691-695
    CK(cudaEventRecord(c.ev[0], c.main));
    for (int s = 0; s < used; ++s) CK(cudaStreamWaitEvent(c.comp[s], c.ev[0]));
  }
  for (int i = 0; i < experts && v != Variant::events_only; ++i) {
    char* A = static_cast<char*>(b.a) + i * b.a_stride;
    char* B = static_cast<char*>(b.b) + i * b.b_stride;
    char* D = static_cast<char*>(b.d) + i * b.d_stride;
    cudaStream_t st = c.comp[i % kStreams];
    if (v == Variant::te_full) {
      Descs s;
      create_descs(g, A, B, D, b.scales, s);
      const auto r = heuristic(c.h, s);
      matmul(c.h, g, s, r.algo, A, B, D, b.workspace[i % kStreams], st);
      destroy_descs(s);
    } else if (v == Variant::descriptors) {
      Descs s;
      create_descs(g, A, B, D, b.scales, s);
      destroy_descs(s);
    } else if (v == Variant::heuristic_only) {
      (void)heuristic(c.h, kept[i]);
    } else {
      matmul(c.h, g, kept[i], algo[i], A, B, D, b.workspace[i % kStreams], st);
    }
  }
  if (events) {  // cublaslt_gemm.cu:704-711
    for (int s = 0; s < used; ++s) CK(cudaEventRecord(c.ev[s], c.comp[s]));
    for (int s = 0; s < used; ++s) CK(cudaStreamWaitEvent(c.main, c.ev[s]));
  }
}

struct Result {
  double median_us = 0, p10_us = 0, p90_us = 0;  // per GEMM (events: per grouped call)
  int valid_batches = 0, batches = 0;
};

// `batches` times: spin kernel on the main stream (compute streams wait behind it), `calls` grouped calls
// timed on the host clock, then a check that the spin kernel was still running when the last call
// returned (else the batch is dropped: the host may have waited for the GPU), then a sync.
Result measure(Ctx& c, Variant v, const Gemm& g, Buffers& b, int experts, int calls, int batches) {
  std::vector<Descs> kept(experts);
  std::vector<cublasLtMatmulAlgo_t> algo(experts);
  if (v == Variant::heuristic_only || v == Variant::matmul_only) {
    for (int i = 0; i < experts; ++i) {
      create_descs(g, static_cast<char*>(b.a) + i * b.a_stride, static_cast<char*>(b.b) + i * b.b_stride,
                   static_cast<char*>(b.d) + i * b.d_stride, b.scales, kept[i]);
      algo[i] = heuristic(c.h, kept[i]).algo;
    }
  }
  // Warm-up: cuBLASLt's first heuristic for a shape, kernel loads.
  for (int w = 0; w < 2; ++w) grouped_call(c, Variant::te_full, g, b, experts, kept, algo);
  CK(cudaDeviceSynchronize());
  std::vector<double> per;
  Result res;
  res.batches = batches;
  for (int it = 0; it < batches; ++it) {
    spin<<<1, 1, 0, c.main>>>(c.spin_cycles);
    CK(cudaGetLastError());
    CK(cudaEventRecord(c.spin_done, c.main));
    if (v == Variant::matmul_only)  // keep the compute streams behind the spin without timing events
      for (int s = 0; s < kStreams; ++s) CK(cudaStreamWaitEvent(c.comp[s], c.spin_done));
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < calls; ++k) grouped_call(c, v, g, b, experts, kept, algo);
    const auto t1 = std::chrono::steady_clock::now();
    const bool busy = cudaEventQuery(c.spin_done) == cudaErrorNotReady;
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    if (!busy) continue;
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    per.push_back(us / (v == Variant::events_only ? calls : double(calls) * experts));
  }
  for (auto& s : kept)
    if (s.op) destroy_descs(s);
  res.valid_batches = static_cast<int>(per.size());
  if (!per.empty()) {
    std::sort(per.begin(), per.end());
    res.median_us = per[per.size() / 2];
    res.p10_us = per[per.size() / 10];
    res.p90_us = per[per.size() * 9 / 10];
  }
  return res;
}

// One plain run of the GEMM class (descriptors, heuristic, matmul, sync), without exiting on a cuBLASLt
// refusal: a class the library cannot run here is reported and skipped.
bool supported(Ctx& c, const Gemm& g, Buffers& b) {
  Descs s;
  create_descs(g, b.a, b.b, b.d, b.scales, s);
  cublasLtMatmulHeuristicResult_t r = {};
  int n = 0;
  bool ok = cublasLtMatmulAlgoGetHeuristic(c.h, s.op, s.a, s.b, s.c, s.d, s.pref, 1, &r, &n) ==
                CUBLAS_STATUS_SUCCESS && n > 0;
  if (ok) {
    const float one = 1.0f, beta = g.fp32_accumulate ? 1.0f : 0.0f;
    ok = cublasLtMatmul(c.h, s.op, &one, b.a, s.a, b.b, s.b, &beta, b.d, s.c, b.d, s.d, &r.algo, b.workspace[0],
                        kWorkspaceBytes, c.main) == CUBLAS_STATUS_SUCCESS;
  }
  CK(cudaStreamSynchronize(c.main));
  destroy_descs(s);
  return ok;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> tokens = {512, 2048}, experts_list = {4, 16};
  int batches = 12, hidden = 4096, ffn = 1536;
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--experts")) experts_list = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batches")) batches = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) hidden = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ffn")) ffn = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
  }
  FILE* out = json ? std::fopen(json, "a") : nullptr;

  Ctx c;
  CB(cublasLtCreate(&c.h));
  CK(cudaStreamCreateWithFlags(&c.main, cudaStreamNonBlocking));
  for (int s = 0; s < kStreams; ++s) {
    CK(cudaStreamCreateWithPriority(&c.comp[s], cudaStreamNonBlocking, -1));  // TE: priority -1
    CK(cudaEventCreate(&c.ev[s]));
  }
  CK(cudaEventCreateWithFlags(&c.spin_done, cudaEventDisableTiming));
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  c.spin_cycles = static_cast<long long>(clock_khz) * 25;  // ~25 ms at the boost clock
  const char* cache = std::getenv("CUBLASLT_HEURISTICS_CACHE_CAPACITY");
  std::printf("cuBLASLt %zu, spin %lld cycles, CUBLASLT_HEURISTICS_CACHE_CAPACITY=%s\n", cublasLtGetVersion(),
              c.spin_cycles, cache ? cache : "(default)");

  const int max_t = *std::max_element(tokens.begin(), tokens.end());
  const int max_e = *std::max_element(experts_list.begin(), experts_list.end());
  const size_t big = static_cast<size_t>(std::max(2 * ffn, hidden)) * std::max({max_t, hidden, 2 * ffn});
  Buffers b;
  b.a_stride = b.b_stride = align256(big * 2);
  b.d_stride = align256(big * 4);
  CK(cudaMalloc(&b.a, b.a_stride * max_e));
  CK(cudaMalloc(&b.b, b.b_stride * max_e));
  CK(cudaMalloc(&b.d, b.d_stride * max_e));
  CK(cudaMemset(b.a, 0x3c, b.a_stride * max_e));  // small finite bf16 / e4m3 values; the host path is timed
  CK(cudaMemset(b.b, 0x3c, b.b_stride * max_e));
  CK(cudaMemset(b.d, 0, b.d_stride * max_e));
  CK(cudaMalloc(&b.scales, 2 * sizeof(float)));
  const float ones[2] = {1.0f, 1.0f};
  CK(cudaMemcpy(b.scales, ones, sizeof(ones), cudaMemcpyHostToDevice));
  b.workspace.resize(kStreams);
  for (auto& w : b.workspace) CK(cudaMalloc(&w, kWorkspaceBytes));

  std::printf("%-14s %-5s %6s %7s %-12s %9s %9s %9s %6s\n", "gemm", "dtype", "tokens", "experts", "variant",
              "median_us", "p10_us", "p90_us", "valid");
  for (int t : tokens) {
    // Expert MLP with SwiGLU (fc1 out 2 ffn); TE's m, n, k and ops per GEMM class (grouped_linear.py:
    // forward "TN", dgrad "NN", wgrad "NT" into fp32 main_grad). FP8 GEMMs on Hopper run TN
    // (CanonicalizeGemmInput takes the transposed copies).
    const std::vector<Gemm> gemms = {
        {"fc1_fprop", 2 * ffn, t, hidden, CUBLAS_OP_T, CUBLAS_OP_N, false, false},
        {"fc2_fprop", hidden, t, ffn, CUBLAS_OP_T, CUBLAS_OP_N, false, false},
        {"fc1_dgrad", hidden, t, 2 * ffn, CUBLAS_OP_N, CUBLAS_OP_N, false, false},
        {"fc2_dgrad", ffn, t, hidden, CUBLAS_OP_N, CUBLAS_OP_N, false, false},
        {"fc1_wgrad", hidden, 2 * ffn, t, CUBLAS_OP_N, CUBLAS_OP_T, false, true},
        {"fc2_wgrad", ffn, hidden, t, CUBLAS_OP_N, CUBLAS_OP_T, false, true},
        {"fc1_fprop", 2 * ffn, t, hidden, CUBLAS_OP_T, CUBLAS_OP_N, true, false},
        {"fc2_fprop", hidden, t, ffn, CUBLAS_OP_T, CUBLAS_OP_N, true, false},
        {"fc1_dgrad", hidden, t, 2 * ffn, CUBLAS_OP_T, CUBLAS_OP_N, true, false},
        {"fc1_wgrad", hidden, 2 * ffn, t, CUBLAS_OP_T, CUBLAS_OP_N, true, true},
    };
    for (int e : experts_list) {
      const int calls = std::max(1, 128 / e);  // ~128 GEMMs a batch: well inside the launch queue
      for (const Gemm& g : gemms) {
        if (!supported(c, g, b)) {
          std::printf("%-14s %-5s %6d %7d unsupported by cuBLASLt here: skipped\n", g.name.c_str(),
                      g.fp8 ? "fp8" : "bf16", t, e);
          continue;
        }
        for (Variant v : {Variant::te_full, Variant::descriptors, Variant::heuristic_only, Variant::matmul_only,
                          Variant::events_only}) {
          if (v == Variant::events_only && &g != &gemms[0]) continue;  // shape-free: once per (tokens, experts)
          const Result r = measure(c, v, g, b, e, calls, batches);
          std::printf("%-14s %-5s %6d %7d %-12s %9.2f %9.2f %9.2f %3d/%d\n", g.name.c_str(), g.fp8 ? "fp8" : "bf16",
                      t, e, variant_name(v), r.median_us, r.p10_us, r.p90_us, r.valid_batches, r.batches);
          if (out)
            std::fprintf(out,
                         "{\"gemm\":\"%s\",\"dtype\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"tokens\":%d,\"experts\":%d,"
                         "\"calls_per_batch\":%d,\"variant\":\"%s\",\"per\":\"%s\",\"median_us\":%.3f,\"p10_us\":%.3f,"
                         "\"p90_us\":%.3f,\"valid_batches\":%d,\"batches\":%d,\"heuristics_cache\":\"%s\"}\n",
                         g.name.c_str(), g.fp8 ? "fp8" : "bf16", g.m, g.n, g.k, t, e, calls, variant_name(v),
                         v == Variant::events_only ? "grouped_call" : "gemm", r.median_us, r.p10_us, r.p90_us,
                         r.valid_batches, r.batches, cache ? cache : "default");
        }
      }
    }
  }
  if (out) std::fclose(out);
  return 0;
}
