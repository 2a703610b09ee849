// One cuBLASLt matrix product D[M,N] = op(A)[M,K] * op(B)[K,N], "TN": A stored K-major (K x M,
// column-major, lda = K, transposed), B stored K-major (K x N, lda = K), D column-major M x N.
// Row-major reading: D^T = B_rows . A_rows^T, i.e. both operands are K-contiguous like
// nn.Linear's x @ W^T. fp8 and fp4 on Hopper/Blackwell require this layout.
#pragma once

#include <cublasLt.h>

#include <string>
#include <vector>

#include "common.h"

namespace rb {

enum class GemmType { BF16, FP8, FP4 };
const char* gemm_type_name(GemmType t);

// How a product is laid out and written, beyond the default (TN, D bf16 overwritten, per-tensor fp8 scales).
// A weight gradient as Transformer Engine runs it (cublaslt_gemm.cu's cublas_gemm): bf16 operands in NT
// (tokens-major activations and output gradients, no transposed copies), fp8 operands in TN (TE's columnwise
// copies, the layout Hopper's fp8 kernels need); with fuse_wgrad_accumulation D is Megatron's fp32 main_grad,
// read as C and written back in place (beta 1).
// bf16 dgrad: NN (the weight as stored, the output gradients tokens-major).
enum class GemmLayout { TN, NT, NN };
struct GemmVariant {
  GemmLayout layout = GemmLayout::TN;
  bool accumulate_fp32 = false;  // D = C fp32, beta 1
  bool fp8_block_scaled = false; // fp8 with 1x128 scales along K on both operands (TE's Float8BlockScaling wgrad)
  bool fp8_block_2d_a = false;   // with fp8_block_scaled: A in 128x128 blocks (its fprop and dgrad: the weight's)
  bool accumulate_bf16 = false;  // D = C bf16, beta 1 (Megatron's 16-bit main_grad: --grad-reduce-in-bf16, --fp16)
  bool accumulates() const { return accumulate_fp32 || accumulate_bf16; }
};
std::string gemm_variant_name(GemmType t, const GemmVariant& v);

struct GemmShape {
  long long m, n, k;
  std::string label;
};

class Gemm {
 public:
  // nbuf copies of A and B (and D) are allocated and rotated so that repeated products read
  // their operands from HBM rather than L2.
  Gemm(cublasLtHandle_t h, GemmType t, long long m, long long n, long long k, void* workspace, size_t ws_bytes,
       int nbuf, cudaStream_t fill_stream, GemmVariant v = {});
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void enqueue(cudaStream_t s, int i) const;  // uses buffer set i % nbuf
  double flops() const { return 2.0 * m_ * n_ * k_; }
  size_t bytes_per_set() const { return a_bytes_ + b_bytes_ + d_bytes_; }
  int nbuf() const { return nbuf_; }
  Json algo_json() const;
  // Runs one product into set 0 (an accumulating one into a zeroed D), then: max over a few sampled outputs of
  // |D - ref| / sum_k |a_k b_k|, reference in double.
  double check(int samples, cudaStream_t s) const;

 private:
  void release();
  cublasLtHandle_t h_;
  GemmType t_;
  GemmVariant v_;
  long long m_, n_, k_;
  void* ws_;
  size_t ws_bytes_;
  int nbuf_;
  size_t a_bytes_ = 0, b_bytes_ = 0, d_bytes_ = 0, a_scale_bytes_ = 0, b_scale_bytes_ = 0;
  std::vector<void*> a_, b_, d_;
  void* a_scale_ = nullptr;
  void* b_scale_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
  cublasLtMatmulHeuristicResult_t heur_{};
};

size_t gemm_bytes_per_set(GemmType t, long long m, long long n, long long k, bool d_fp32 = false);
int gemm_nbuf_for(size_t bytes_per_set, size_t l2_bytes);

}  // namespace rb
