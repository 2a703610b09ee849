// GEMM throughput through cuBLASLt: bf16 (fp32 accumulate, bf16 out), fp8 e4m3 (per-tensor
// scales, bf16 out), fp4 e2m1 (16-element ue4m3 block scales, bf16 out) where the GPU has it.
// Section "wgrad" (opt-in): weight-gradient products as Transformer Engine runs them, writing bf16
// or accumulating into an fp32 (or a bf16) main gradient in place.
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "gemm.h"

namespace rb {

#define RB_CUBLAS(call)                                                                                 \
  do {                                                                                                  \
    cublasStatus_t rb_st_ = (call);                                                                     \
    if (rb_st_ != CUBLAS_STATUS_SUCCESS)                                                                \
      ::rb::throw_error(std::string(#call) + ": cublas status " + std::to_string(static_cast<int>(rb_st_)), \
                        __FILE__, __LINE__);                                                            \
  } while (0)

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::BF16: return "bf16";
    case GemmType::FP8: return "fp8_e4m3";
    case GemmType::FP4: return "fp4_e2m1";
  }
  return "?";
}

namespace {

double elem_bytes(GemmType t) {
  switch (t) {
    case GemmType::BF16: return 2.0;
    case GemmType::FP8: return 1.0;
    case GemmType::FP4: return 0.5;
  }
  return 2.0;
}

cudaDataType_t ab_type(GemmType t) {
  switch (t) {
    case GemmType::BF16: return CUDA_R_16BF;
    case GemmType::FP8: return CUDA_R_8F_E4M3;
    case GemmType::FP4: return CUDA_R_4F_E2M1;
  }
  return CUDA_R_16BF;
}

long long round_up(long long x, long long m) { return (x + m - 1) / m * m; }

// fp4 block-scale tensor bytes (16-element blocks along K, padded to the 128 x 4 tiles).
size_t fp4_scale_bytes(long long outer, long long k) {
  return static_cast<size_t>(round_up(outer, 128) * round_up((k + 15) / 16, 4));
}

float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float e4m3_to_float(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return s ? -v : v;
}

float e2m1_to_float(uint8_t nib) {
  static const float t[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = t[nib & 7];
  return (nib & 8) ? -v : v;
}

// The K values of operand row `row` as floats. K-contiguous (TN): row * k + q; outer-contiguous (NT, the
// operand stored outer x K column-major): row + q * outer, gathered with one strided copy.
std::vector<float> fetch_row(GemmType t, const void* base, long long row, long long k, GemmLayout layout = GemmLayout::TN,
                             long long outer = 0) {
  std::vector<float> out(static_cast<size_t>(k));
  if (t != GemmType::FP4) {
    const size_t e = t == GemmType::BF16 ? 2 : 1;
    std::vector<uint8_t> h(static_cast<size_t>(k) * e);
    const auto* b = static_cast<const uint8_t*>(base);
    if (layout == GemmLayout::TN)
      RB_CUDA(cudaMemcpy(h.data(), b + row * k * e, k * e, cudaMemcpyDeviceToHost));
    else
      RB_CUDA(cudaMemcpy2D(h.data(), e, b + row * e, outer * e, e, k, cudaMemcpyDeviceToHost));
    for (long long i = 0; i < k; ++i) {
      if (t == GemmType::BF16) {
        uint16_t v;
        std::memcpy(&v, h.data() + i * 2, 2);
        out[i] = bf16_to_float(v);
      } else {
        out[i] = e4m3_to_float(h[i]);
      }
    }
  } else {
    std::vector<uint8_t> h(static_cast<size_t>(k / 2));
    RB_CUDA(cudaMemcpy(h.data(), static_cast<const uint8_t*>(base) + row * (k / 2), k / 2, cudaMemcpyDeviceToHost));
    for (long long i = 0; i < k; ++i) out[i] = e2m1_to_float((i & 1) ? (h[i / 2] >> 4) : (h[i / 2] & 0xF));
  }
  return out;
}

}  // namespace

size_t gemm_bytes_per_set(GemmType t, long long m, long long n, long long k, bool d_fp32) {
  double e = elem_bytes(t);
  return static_cast<size_t>(e * m * k + e * n * k + (d_fp32 ? 4.0 : 2.0) * m * n);
}

std::string gemm_variant_name(GemmType t, const GemmVariant& v) {
  std::string s = t == GemmType::FP8 && v.fp8_block_scaled ? (v.fp8_block_2d_a ? "fp8_block2d" : "fp8_block")
                                                             : gemm_type_name(t);
  s += v.layout == GemmLayout::TN ? "_tn" : v.layout == GemmLayout::NT ? "_nt" : "_nn";
  s += v.accumulate_fp32 ? "_acc_fp32" : v.accumulate_bf16 ? "_acc_bf16" : "_out_bf16";
  return s;
}

int gemm_nbuf_for(size_t bytes_per_set, size_t l2_bytes) {
  if (bytes_per_set == 0) return 1;
  size_t want = (3 * l2_bytes + bytes_per_set - 1) / bytes_per_set;
  if (want < 1) want = 1;
  if (want > 256) want = 256;
  while (want > 1 && want * bytes_per_set > 2 * GiB) --want;
  return static_cast<int>(want);
}

Gemm::Gemm(cublasLtHandle_t h, GemmType t, long long m, long long n, long long k, void* workspace, size_t ws_bytes,
           int nbuf, cudaStream_t fill_stream, GemmVariant v)
    : h_(h), t_(t), v_(v), m_(m), n_(n), k_(k), ws_(workspace), ws_bytes_(ws_bytes), nbuf_(nbuf < 1 ? 1 : nbuf) {
  if (v.layout != GemmLayout::TN && t != GemmType::BF16)
    throw_error("only bf16 products run in NT or NN (Hopper's and Blackwell's fp8/fp4 kernels need TN)", __FILE__, __LINE__);
  if (v.fp8_block_scaled && t != GemmType::FP8) throw_error("block scaling is an fp8 variant", __FILE__, __LINE__);
  if (v.accumulate_fp32 && v.accumulate_bf16) throw_error("one accumulate dtype", __FILE__, __LINE__);
  double e = elem_bytes(t);
  a_bytes_ = static_cast<size_t>(e * m * k);
  b_bytes_ = static_cast<size_t>(e * n * k);
  d_bytes_ = static_cast<size_t>((v.accumulate_fp32 ? 4 : 2) * m * n);
  try {
    for (int i = 0; i < nbuf_; ++i) {
      void *a = nullptr, *b = nullptr, *d = nullptr;
      RB_CUDA(cudaMalloc(&a, a_bytes_));
      a_.push_back(a);
      RB_CUDA(cudaMalloc(&b, b_bytes_));
      b_.push_back(b);
      RB_CUDA(cudaMalloc(&d, d_bytes_));
      d_.push_back(d);
      uint32_t seed = 1234u + 17u * i;
      if (t == GemmType::BF16) {
        fill_bf16(a, m * k, seed, 1.0f, fill_stream);
        fill_bf16(b, n * k, seed + 7, 1.0f, fill_stream);
      } else if (t == GemmType::FP8) {
        fill_fp8_e4m3(a, m * k, seed, 1.0f, fill_stream);
        fill_fp8_e4m3(b, n * k, seed + 7, 1.0f, fill_stream);
      } else {
        fill_bytes(a, a_bytes_, seed, fill_stream);  // every e2m1 nibble is a finite value
        fill_bytes(b, b_bytes_, seed + 7, fill_stream);
      }
      // Poison (NaN in bf16) for an overwritten D; an accumulated D starts at zero, as a main gradient does.
      RB_CUDA(cudaMemsetAsync(d, v.accumulates() ? 0 : 0xFF, d_bytes_, fill_stream));
    }

    RB_CUBLAS(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // A is K-major (op T) only in TN; B is K-major (op N) but in NT.
    const bool a_outer = v.layout != GemmLayout::TN, b_outer = v.layout == GemmLayout::NT;
    cublasOperation_t ta = a_outer ? CUBLAS_OP_N : CUBLAS_OP_T, tb = b_outer ? CUBLAS_OP_T : CUBLAS_OP_N;
    RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (t == GemmType::FP8 && v.fp8_block_scaled) {
      // One fp32 scale per 128 K-elements of every row of A and B (cuBLASLt's VEC128_32F on both operands, as
      // TE's Float8BlockScaling runs a wgrad: 1x128 tiles on both), or for A one per 128x128 block (BLK128x128_32F,
      // its fprop and dgrad: the weight's blocks); sized generously (twice the 1x128 count), all 1.0 so that the
      // result check holds.
      a_scale_bytes_ = 2 * static_cast<size_t>(round_up(m, 128) * round_up((k + 127) / 128, 4)) * sizeof(float);
      b_scale_bytes_ = 2 * static_cast<size_t>(round_up(n, 128) * round_up((k + 127) / 128, 4)) * sizeof(float);
      RB_CUDA(cudaMalloc(&a_scale_, a_scale_bytes_));
      RB_CUDA(cudaMalloc(&b_scale_, b_scale_bytes_));
      for (auto [p, bytes] : {std::pair{a_scale_, a_scale_bytes_}, std::pair{b_scale_, b_scale_bytes_}}) {
        std::vector<float> ones(bytes / sizeof(float), 1.0f);
        RB_CUDA(cudaMemcpy(p, ones.data(), bytes, cudaMemcpyHostToDevice));
      }
      cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      const cublasLtMatmulMatrixScale_t a_mode = v.fp8_block_2d_a ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : mode;
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale_, sizeof a_scale_));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale_, sizeof b_scale_));
    } else if (t == GemmType::FP8) {
      // Per-tensor scales (device pointers to one float each), as cuBLASLt requires for fp8.
      RB_CUDA(cudaMalloc(&a_scale_, sizeof(float)));
      RB_CUDA(cudaMalloc(&b_scale_, sizeof(float)));
      float one = 1.0f;
      RB_CUDA(cudaMemcpy(a_scale_, &one, sizeof one, cudaMemcpyHostToDevice));
      RB_CUDA(cudaMemcpy(b_scale_, &one, sizeof one, cudaMemcpyHostToDevice));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale_, sizeof a_scale_));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale_, sizeof b_scale_));
    } else if (t == GemmType::FP4) {
      a_scale_bytes_ = fp4_scale_bytes(m, k);
      b_scale_bytes_ = fp4_scale_bytes(n, k);
      RB_CUDA(cudaMalloc(&a_scale_, a_scale_bytes_));
      RB_CUDA(cudaMalloc(&b_scale_, b_scale_bytes_));
      fill_const_bytes(a_scale_, a_scale_bytes_, 0x38, fill_stream);  // ue4m3 1.0
      fill_const_bytes(b_scale_, b_scale_bytes_, 0x38, fill_stream);
      cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale_, sizeof a_scale_));
      RB_CUBLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale_, sizeof b_scale_));
    }
    if (a_outer)
      RB_CUBLAS(cublasLtMatrixLayoutCreate(&la_, ab_type(t), m, k, m));
    else
      RB_CUBLAS(cublasLtMatrixLayoutCreate(&la_, ab_type(t), k, m, k));
    if (b_outer)
      RB_CUBLAS(cublasLtMatrixLayoutCreate(&lb_, ab_type(t), n, k, n));
    else
      RB_CUBLAS(cublasLtMatrixLayoutCreate(&lb_, ab_type(t), k, n, k));
    RB_CUBLAS(cublasLtMatrixLayoutCreate(&ld_, v.accumulate_fp32 ? CUDA_R_32F : CUDA_R_16BF, m, n, m));

    cublasLtMatmulPreference_t pref = nullptr;
    RB_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = ws_bytes_;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    int returned = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(h_, desc_, la_, lb_, ld_, ld_, pref, 1, &heur_, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || returned < 1 || heur_.state != CUBLAS_STATUS_SUCCESS)
      throw_error("cublasLtMatmulAlgoGetHeuristic found no algorithm (status " + std::to_string(static_cast<int>(st)) +
                      ", returned " + std::to_string(returned) + ")",
                  __FILE__, __LINE__);
    RB_CUDA(cudaStreamSynchronize(fill_stream));
  } catch (...) {
    release();
    throw;
  }
}

Gemm::~Gemm() { release(); }

void Gemm::release() {
  for (void* p : a_) cudaFree(p);
  for (void* p : b_) cudaFree(p);
  for (void* p : d_) cudaFree(p);
  a_.clear();
  b_.clear();
  d_.clear();
  if (a_scale_) cudaFree(a_scale_);
  if (b_scale_) cudaFree(b_scale_);
  a_scale_ = b_scale_ = nullptr;
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (ld_) cublasLtMatrixLayoutDestroy(ld_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  la_ = lb_ = ld_ = nullptr;
  desc_ = nullptr;
}

void Gemm::enqueue(cudaStream_t s, int i) const {
  int j = i % nbuf_;
  const float alpha = 1.0f, beta = v_.accumulates() ? 1.0f : 0.0f;
  RB_CUBLAS(cublasLtMatmul(h_, desc_, &alpha, a_[j], la_, b_[j], lb_, &beta, d_[j], ld_, d_[j], ld_, &heur_.algo, ws_,
                           ws_bytes_, s));
}

Json Gemm::algo_json() const {
  Json j = Json::object();
  auto get32 = [&](cublasLtMatmulAlgoConfigAttributes_t a, const char* key) {
    uint32_t v = 0;
    size_t w = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&heur_.algo, a, &v, sizeof v, &w) == CUBLAS_STATUS_SUCCESS)
      j[key] = static_cast<long long>(v);
  };
  auto get16 = [&](cublasLtMatmulAlgoConfigAttributes_t a, const char* key) {
    uint16_t v = 0;
    size_t w = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&heur_.algo, a, &v, sizeof v, &w) == CUBLAS_STATUS_SUCCESS)
      j[key] = static_cast<long long>(v);
  };
  get32(CUBLASLT_ALGO_CONFIG_ID, "id");
  get32(CUBLASLT_ALGO_CONFIG_TILE_ID, "tile_id");
  get32(CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages_id");
  get32(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk_num");
  get32(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction_scheme");
  get32(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "cta_swizzling");
  get16(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster_shape_id");
  get16(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner_shape_id");
  j["workspace_bytes"] = static_cast<long long>(heur_.workspaceSize);
  j["waves_count"] = heur_.wavesCount;
  return j;
}

double Gemm::check(int samples, cudaStream_t s) const {
  // One product into set 0 first, so that the check does not depend on what ran before; an accumulating one twice into
  // a zeroed D, D = 2 A.B, so that beta 1 is checked too (beta 0 would leave A.B).
  if (v_.accumulates()) RB_CUDA(cudaMemsetAsync(d_[0], 0, d_bytes_, s));
  enqueue(s, 0);
  if (v_.accumulates()) enqueue(s, 0);
  const double times = v_.accumulates() ? 2.0 : 1.0;
  RB_CUDA(cudaStreamSynchronize(s));
  double worst = 0;
  uint64_t x = 0x243F6A8885A308D3ULL;
  for (int t = 0; t < samples; ++t) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    long long i = static_cast<long long>((x >> 33) % static_cast<uint64_t>(m_));
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    long long jcol = static_cast<long long>((x >> 33) % static_cast<uint64_t>(n_));
    if (t == 0) i = 0, jcol = 0;
    if (t == 1) i = m_ - 1, jcol = n_ - 1;
    const GemmLayout a_layout = v_.layout == GemmLayout::TN ? GemmLayout::TN : GemmLayout::NT;
    const GemmLayout b_layout = v_.layout == GemmLayout::NT ? GemmLayout::NT : GemmLayout::TN;
    std::vector<float> a = fetch_row(t_, a_[0], i, k_, a_layout, m_);
    std::vector<float> b = fetch_row(t_, b_[0], jcol, k_, b_layout, n_);
    double d = 0;
    if (v_.accumulate_fp32) {
      float dv = 0;
      RB_CUDA(cudaMemcpy(&dv, static_cast<const float*>(d_[0]) + jcol * m_ + i, 4, cudaMemcpyDeviceToHost));
      d = dv;
    } else {
      uint16_t dv = 0;
      RB_CUDA(cudaMemcpy(&dv, static_cast<const uint16_t*>(d_[0]) + jcol * m_ + i, 2, cudaMemcpyDeviceToHost));
      d = bf16_to_float(dv);
    }
    double ref = 0, mag = 0;
    for (long long q = 0; q < k_; ++q) {
      double p = times * static_cast<double>(a[q]) * b[q];
      ref += p;
      mag += std::fabs(p);
    }
    if (!std::isfinite(d)) return INFINITY;
    double err = std::fabs(d - ref) / (mag > 0 ? mag : 1.0);
    if (err > worst) worst = err;
  }
  return worst;
}

namespace {

// The cuBLASLt handle, workspace and stream a GEMM section times its products on.
struct GemmRig {
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  cudaStream_t s = nullptr;
  explicit GemmRig(size_t ws_bytes) {
    RB_CUBLAS(cublasLtCreate(&h));
    try {
      RB_CUDA(cudaMalloc(&ws, ws_bytes));
      RB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    } catch (...) {  // a constructor that throws runs no destructor
      release();
      throw;
    }
  }
  ~GemmRig() { release(); }
  void release() {
    if (s) cudaStreamDestroy(s);
    if (ws) cudaFree(ws);
    if (h) cublasLtDestroy(h);
    s = nullptr;
    ws = nullptr;
    h = nullptr;
  }
  GemmRig(const GemmRig&) = delete;
  GemmRig& operator=(const GemmRig&) = delete;
};

// One product timed alone (isolated_reps, stream synchronized before each), then back to back: `inner` products in
// one CUDA graph lasting about batch_target_s, replayed reps times.
struct GemmTiming {
  Stats isolated, batch;
  int inner = 1;
};
GemmTiming time_gemm(cudaStream_t s, int isolated_reps, int reps, double batch_target_s, const Enqueue& op) {
  GemmTiming t;
  t.isolated = time_isolated(s, 2, isolated_reps, op);
  t.inner = pick_inner(t.isolated.median, batch_target_s, 256);
  t.batch = time_graph_batch(s, t.inner, reps, op);
  return t;
}

std::vector<GemmShape> gemm_grid(bool quick) {
  std::vector<GemmShape> g;
  if (quick) {
    for (long long s : {256LL, 1024LL, 4096LL}) g.push_back({s, s, s, "square"});
    g.push_back({4096, 6144, 2048, "m1 qkv, 4k tokens"});
    g.push_back({2048, 8192, 4096, "wgrad-like, K=4096"});
    return g;
  }
  for (long long s : {256LL, 512LL, 1024LL, 2048LL, 4096LL, 6144LL, 8192LL, 12288LL, 16384LL})
    g.push_back({s, s, s, "square"});
  // Forward projections, tokens on M: the m1 model (D 2048, F 8192, V 32768) and a Llama-3-8B-like
  // layer (D 4096, GQA qkv 6144, fused gate+up 2x14336, F 14336, V 128256).
  for (long long t : {2048LL, 4096LL, 8192LL, 16384LL}) {
    g.push_back({t, 6144, 2048, "D2048 qkv"});
    g.push_back({t, 2048, 2048, "D2048 attn out"});
    g.push_back({t, 8192, 2048, "D2048 mlp up/gate"});
    g.push_back({t, 2048, 8192, "D2048 mlp down"});
    g.push_back({t, 32768, 2048, "D2048 lm head V32768"});
    g.push_back({t, 6144, 4096, "D4096 qkv (GQA)"});
    g.push_back({t, 4096, 4096, "D4096 attn out"});
    g.push_back({t, 28672, 4096, "D4096 gate+up fused"});
    g.push_back({t, 4096, 14336, "D4096 mlp down"});
    g.push_back({t, 128256, 4096, "D4096 lm head V128256"});
  }
  // D 1024 (s1 model), D 8192 (70B-like), and weight-gradient shapes (K = tokens).
  g.push_back({8192, 3072, 1024, "D1024 qkv"});
  g.push_back({8192, 1024, 1024, "D1024 attn out"});
  g.push_back({8192, 4096, 1024, "D1024 mlp up/gate"});
  g.push_back({8192, 1024, 4096, "D1024 mlp down"});
  g.push_back({8192, 8192, 8192, "D8192 attn out"});
  g.push_back({8192, 28672, 8192, "D8192 mlp up"});
  g.push_back({8192, 8192, 28672, "D8192 mlp down"});
  g.push_back({2048, 8192, 16384, "wgrad D2048xF8192, 16k tokens"});
  g.push_back({2048, 6144, 16384, "wgrad D2048 qkv, 16k tokens"});
  g.push_back({4096, 14336, 16384, "wgrad D4096xF14336, 16k tokens"});
  g.push_back({4096, 4096, 16384, "wgrad D4096xD4096, 16k tokens"});
  g.push_back({1024, 1024, 16384, "wgrad D1024xD1024, 16k tokens"});
  return g;
}

}  // namespace

Json bench_gemm(Context& ctx) {
  Json out = Json::object();
  const size_t ws_bytes = 32 * MiB;
  out["api"] = "cublasLtMatmul, heuristic algorithm (first of cublasLtMatmulAlgoGetHeuristic), workspace 32 MiB";
  out["layout"] =
      "TN: opA=T (A stored K x M column-major, lda=K), opB=N (B stored K x N, ldb=K), D M x N column-major (ldd=M); "
      "alpha=1, beta=0";
  out["types"] =
      "bf16: A,B,D bf16, compute 32F. fp8_e4m3: A,B e4m3 with per-tensor float scales 1.0, C/D bf16, compute 32F, "
      "fast-accumulation off (cuBLASLt default). fp4_e2m1: A,B e2m1 with 16-element ue4m3 block scales, D bf16";
  out["data"] = "uniform random in [-1,1] (bf16/fp8), random bytes (fp4); D poisoned with 0xFF before the first run";
  out["timing"] =
      "s: inner products captured in one CUDA graph, replayed reps times, per-product = replay span / inner (back-to-back); "
      "isolated_s: one product between two events, stream synchronized before each (includes submission latency). "
      "Operand sets are rotated (nbuf) so that operands come from HBM, not L2. tflops = 2*M*N*K / s.";
  Json res = Json::array();
  GemmRig rig(ws_bytes);
  cublasLtHandle_t h = rig.h;
  void* ws = rig.ws;
  cudaStream_t s = rig.s;
  const int reps = ctx.opt.reps;
  const double batch_target = ctx.opt.quick ? 0.5e-3 : 2e-3;

  std::vector<GemmType> types = {GemmType::BF16, GemmType::FP8};
  bool has_fp4 = ctx.prop.major >= 10;
  if (has_fp4) types.push_back(GemmType::FP4);
  else
    out["fp4"] = "skipped: compute capability " + std::to_string(ctx.prop.major) + "." + std::to_string(ctx.prop.minor) +
                 " has no fp4 tensor cores (needs >= 10.0)";

  // Bring the clocks up before the first measured product.
  try {
    Gemm warm(h, GemmType::BF16, 8192, 8192, 8192, ws, ws_bytes, 1, s);
    double t0 = now_s();
    int n = 0;
    while (now_s() - t0 < (ctx.opt.quick ? 0.1 : 0.5)) {
      warm.enqueue(s, 0);
      if (++n % 8 == 0) RB_CUDA(cudaStreamSynchronize(s));
    }
    RB_CUDA(cudaStreamSynchronize(s));
  } catch (const std::exception& e) {
    ctx.warn(std::string("gemm warm-up failed: ") + e.what());
  }

  for (const GemmShape& sh : gemm_grid(ctx.opt.quick)) {
    for (GemmType t : types) {
      Json r = Json::object();
      r["dtype"] = gemm_type_name(t);
      r["m"] = sh.m;
      r["n"] = sh.n;
      r["k"] = sh.k;
      r["label"] = sh.label;
      try {
        int nbuf = gemm_nbuf_for(gemm_bytes_per_set(t, sh.m, sh.n, sh.k), static_cast<size_t>(ctx.prop.l2CacheSize));
        Gemm g(h, t, sh.m, sh.n, sh.k, ws, ws_bytes, nbuf, s);
        Enqueue op = [&g](cudaStream_t st, int i) { g.enqueue(st, i); };
        const GemmTiming tm = time_gemm(s, reps, reps, batch_target, op);
        const Stats& iso = tm.isolated;
        const Stats& bat = tm.batch;
        const int inner = tm.inner;
        double err = g.check(ctx.opt.quick ? 8 : 6, s);
        r["flops"] = g.flops();
        r["s"] = stats_json(bat);
        r["tflops"] = rate_json(bat, g.flops(), 1e12);
        r["isolated_s"] = stats_json(iso);
        r["isolated_tflops_median"] = iso.median > 0 ? g.flops() / iso.median / 1e12 : 0.0;
        r["inner"] = inner;
        r["nbuf"] = g.nbuf();
        r["bytes_per_set"] = static_cast<long long>(g.bytes_per_set());
        r["algo"] = g.algo_json();
        r["check_max_rel_err"] = err;
        double ceiling = t == GemmType::BF16 ? ctx.ceil.bf16_tflops
                         : t == GemmType::FP8 ? ctx.ceil.fp8_tflops
                                              : ctx.ceil.fp4_tflops;
        char what[160];
        std::snprintf(what, sizeof what, "gemm %s %lldx%lldx%lld max", gemm_type_name(t), sh.m, sh.n, sh.k);
        ctx.check_ceiling(what, bat.min > 0 ? g.flops() / bat.min / 1e12 : 0.0, ceiling, "TFLOP/s");
        if (!(err < 2e-2)) {
          char msg[200];
          std::snprintf(msg, sizeof msg, "gemm %s %lldx%lldx%lld: result check failed, max rel err %.3g",
                        gemm_type_name(t), sh.m, sh.n, sh.k, err);
          ctx.warn(msg);
        }
        std::printf("gemm %-9s %6lld x %6lld x %6lld  %9.3f us  %7.1f TFLOP/s  (iso %9.3f us, inner %d, nbuf %d, err %.1e)\n",
                    gemm_type_name(t), sh.m, sh.n, sh.k, bat.median * 1e6, g.flops() / bat.median / 1e12,
                    iso.median * 1e6, inner, g.nbuf(), err);
        std::fflush(stdout);
      } catch (const std::exception& e) {
        r["error"] = e.what();
        std::printf("gemm %s %lldx%lldx%lld: ERROR %s\n", gemm_type_name(t), sh.m, sh.n, sh.k, e.what());
        cudaGetLastError();
      }
      res.push(r);
    }
  }
  out["results"] = res;
  out["clocks_after"] = clocks_snapshot(ctx);
  return out;
}

namespace {

// Weight gradients D[in, out] = X^T dY over K = tokens (m = in features, n = out features), at the weights of
// the at-scale rows' layers as one rank holds them.
struct WgradWeight {
  long long in, out;
  const char* label;
};
const WgradWeight kWgradWeights[] = {
    {4096, 4096, "h4096 attention out-projection"},
    {4096, 6144, "Megatron GPT 7.1B QKV at TP2"},
    {6144, 32768, "Mixtral 8x22B expert fc1 (gate+up)"},
    {16384, 6144, "Mixtral 8x22B expert fc2"},
    {8192, 28672, "Llama 70B MLP up at TP1"},
    {4096, 3072, "Qwen3-235B expert fc1 (gate+up)"},
    {1536, 4096, "Qwen3-235B expert fc2"},
    {7168, 4096, "DeepSeek-V3 expert fc1 (gate+up)"},
    {2048, 7168, "DeepSeek-V3 expert fc2"},
};

}  // namespace

Json bench_wgrad(Context& ctx) {
  Json out = Json::object();
  const size_t ws_bytes = 32 * MiB;  // TE's Hopper cuBLAS workspace (pytorch/module/base.py)
  out["what"] =
      "weight-gradient products D[in,out] = X^T dY, K = tokens, as Transformer Engine's cublas_gemm runs them: bf16 in "
      "NT (tokens-major operands as autograd holds them), fp8 e4m3 in TN (TE's columnwise copies; per-tensor scales, or "
      "1x128 scales along K on both operands for Float8BlockScaling), fast accumulation off (TE's split accumulator "
      "for wgrad); out_bf16: D bf16, beta 0; acc_fp32: D = C = an fp32 main gradient, beta 1 (fuse_wgrad_accumulation); "
      "acc_bf16: D = C = a bf16 main gradient, beta 1 (the same under --grad-reduce-in-bf16)";
  out["timing"] =
      "as section gemm: inner products captured in one CUDA graph, replayed reps times; operand sets (and main "
      "gradients) rotated past L2. Variants interleaved shape by shape, the whole grid repeated `rounds` times. Then the "
      "same weights' forward products (fprop_*: D[out, tokens], K = in, bf16 out): bf16, per-tensor fp8, fp8 with the weight in "
      "128x128 blocks and the activation 1x128 (fp8_block2d: TE's Float8BlockScaling fprop and dgrad), fp8 1x128 on both; "
      "and bf16 dgrad products (dgrad_*: D[in, tokens], K = out) in NN, as TE passes them, and TN.";
  const int rounds = ctx.opt.quick ? 1 : 3;
  out["rounds"] = rounds;
  Json res = Json::array();
  GemmRig rig(ws_bytes);
  cublasLtHandle_t h = rig.h;
  void* ws = rig.ws;
  cudaStream_t s = rig.s;
  const double batch_target = ctx.opt.quick ? 0.5e-3 : 2e-3;
  // One kind of product over every weight and token count, `rounds` times, variants interleaved shape by shape:
  // `prefix` names them, `shape` gives (m, n, k).
  using Shape = std::array<long long, 3>;
  const auto run_products = [&](const std::string& prefix, const std::vector<std::pair<GemmType, GemmVariant>>& kinds,
                                const std::vector<long long>& tokens_list, Shape (*shape)(const WgradWeight&, long long)) {
    for (int round = 0; round < rounds; ++round)
      for (const WgradWeight& w : kWgradWeights)
        for (long long tokens : tokens_list)
          for (const auto& [t, v] : kinds) {
            const std::string name = prefix + gemm_variant_name(t, v);
            const auto [m, n, k] = shape(w, tokens);
            Json r = Json::object();
            r["round"] = round;
            r["variant"] = name;
            r["m"] = m;
            r["n"] = n;
            r["k"] = k;
            r["label"] = w.label;
            try {
              int nbuf = gemm_nbuf_for(gemm_bytes_per_set(t, m, n, k, v.accumulate_fp32),
                                       static_cast<size_t>(ctx.prop.l2CacheSize));
              Gemm g(h, t, m, n, k, ws, ws_bytes, nbuf, s, v);
              Enqueue op = [&g](cudaStream_t st, int i) { g.enqueue(st, i); };
              const double err = g.check(4, s);
              const GemmTiming tm = time_gemm(s, 3, ctx.opt.reps, batch_target, op);
              r["s"] = stats_json(tm.batch);
              r["tflops_median"] = tm.batch.median > 0 ? g.flops() / tm.batch.median / 1e12 : 0.0;
              r["inner"] = tm.inner;
              r["nbuf"] = g.nbuf();
              r["algo"] = g.algo_json();
              r["check_max_rel_err"] = err;
              if (!(err < 2e-2)) ctx.warn("wgrad section " + name + " " + w.label + ": result check failed");
              std::printf("%-28s %6lld x %6lld x %6lld  %9.3f us  %7.1f TFLOP/s  (inner %d, nbuf %d, err %.1e)\n",
                          name.c_str(), m, n, k, tm.batch.median * 1e6, g.flops() / tm.batch.median / 1e12, tm.inner,
                          g.nbuf(), err);
              std::fflush(stdout);
            } catch (const std::exception& e) {
              r["error"] = e.what();
              std::printf("%s %lldx%lldx%lld: ERROR %s\n", name.c_str(), m, n, k, e.what());
              cudaGetLastError();
            }
            res.push(r);
          }
  };
  // Weight gradients (D[in, out] = X^T dY, K = tokens), writing bf16 or accumulating into fp32: bf16 in NT (TE's) and
  // TN, per-tensor fp8 and 1x128-block fp8 in TN.
  std::vector<long long> wgrad_tokens = {1024, 2048, 4096, 8192, 16384};
  if (ctx.opt.quick) wgrad_tokens = {4096};
  run_products("",
               {{GemmType::BF16, {GemmLayout::NT, false, false, false}}, {GemmType::BF16, {GemmLayout::NT, true, false, false}},
                {GemmType::BF16, {GemmLayout::NT, false, false, false, true}},
                {GemmType::BF16, {GemmLayout::TN, false, false, false}}, {GemmType::BF16, {GemmLayout::TN, true, false, false}},
                {GemmType::FP8, {GemmLayout::TN, false, false, false}},  {GemmType::FP8, {GemmLayout::TN, true, false, false}},
                {GemmType::FP8, {GemmLayout::TN, false, false, false, true}},
                {GemmType::FP8, {GemmLayout::TN, false, true, false}},   {GemmType::FP8, {GemmLayout::TN, true, true, false}}},
               wgrad_tokens, [](const WgradWeight& w, long long tokens) { return Shape{w.in, w.out, tokens}; });
  std::vector<long long> other_tokens = {2048, 4096, 8192};
  if (ctx.opt.quick) other_tokens = {4096};
  // Forward products (D[out, tokens] = W X^T, K = in), where TE's Float8BlockScaling scales the weight in 128x128
  // blocks: bf16, per-tensor fp8, 2D-block fp8 and 1D-block fp8, in TN.
  run_products("fprop_",
               {{GemmType::BF16, {GemmLayout::TN, false, false, false}},
                {GemmType::FP8, {GemmLayout::TN, false, false, false}},
                {GemmType::FP8, {GemmLayout::TN, false, true, true}},
                {GemmType::FP8, {GemmLayout::TN, false, true, false}}},
               other_tokens, [](const WgradWeight& w, long long tokens) { return Shape{w.out, tokens, w.in}; });
  // bf16 dgrad products (D[in, tokens] = W^T dY, K = out): NN as TE passes them, and TN (the layout racksim's GEMM
  // calibration measures).
  run_products("dgrad_",
               {{GemmType::BF16, {GemmLayout::NN, false, false, false}},
                {GemmType::BF16, {GemmLayout::TN, false, false, false}}},
               other_tokens, [](const WgradWeight& w, long long tokens) { return Shape{w.in, tokens, w.out}; });
  out["results"] = res;
  out["clocks_after"] = clocks_snapshot(ctx);
  return out;
}

}  // namespace rb
