// CPU reference kernels: plain functions behind CpuBackend, and the reference every CUDA kernel is tested against.
#pragma once

#include <cstdint>

#include "models/backend.h"

// Each function works on host float arrays with the shapes given in its arguments and has the semantics of the
// Backend method of the same name (models/backend.h). Loops are parallelised with OpenMP; the caller sets the
// thread count (CpuBackend does). Example, comparing a CUDA result with the reference:
//
//   std::vector<float> ref(n);
//   pshard::models::cpu::relu_forward(x.data(), ref.data(), n);
namespace pshard::models::cpu {

// ---- dropout random numbers (shared by every backend so masks agree) ----
// nvcc compiles the same three functions for the GPU (models/cuda/kernels.cu), so masks agree bit for bit.
#if defined(__CUDACC__)
#define PSHARD_HOST_DEVICE __host__ __device__
#else
#define PSHARD_HOST_DEVICE
#endif
// SplitMix64 finaliser: a bijective 64-bit mix.
PSHARD_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in [0, 1) with 24 random bits, a pure function of (seed, counter, i).
PSHARD_HOST_DEVICE inline float uniform01(uint64_t seed, uint64_t counter, uint64_t i) {
  uint64_t h = mix64(mix64(seed ^ mix64(counter)) + i);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}
// Element i of dropout call `counter` survives.
PSHARD_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t counter, uint64_t i, float p) {
  return uniform01(seed, counter, i) >= p;
}

// ---- GEMM ----
// Row-major C[m x n] = alpha op(A) op(B) + beta C. gemm() splits C over the OpenMP threads (each part one
// single-threaded OpenBLAS call); gemm_serial() is one call, for use inside parallel regions.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// ---- elementwise ----
void fill(float* x, int64_t n, float value);
void axpy(int64_t n, float alpha, const float* x, float* y);
void add(int64_t n, const float* a, const float* b, float* y);
void multiply(int64_t n, const float* a, const float* b, float* y);
void add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner);
void bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db);
void relu_forward(const float* x, float* y, int64_t n);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n);

// ---- convolution (im2col + GEMM) ----
// Column matrix of one sample x [c, h, w]: row r = (ci * kh + ki) * kw + kj, column p = oh * w_out + ow, stored at
// col[r * ld + p] (ld >= h_out * w_out lets several samples share one matrix side by side). Padding reads as 0.
void im2col(const float* x, const ConvShape& s, float* col, int64_t ld);
// The adjoint of im2col: x [c, h, w] is OVERWRITTEN with the sum of the column entries that read each pixel.
void col2im(const float* col, const ConvShape& s, int64_t ld, float* x);
// Floats of workspace conv2d_forward / conv2d_backward need for s with the current OpenMP thread count.
int64_t conv2d_workspace_floats(const ConvShape& s);
void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y, float* workspace);
void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                     float* db, float* workspace);

// ---- pooling ----
void maxpool2d_forward(const PoolShape& s, const float* x, float* y);
void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx);
void avgpool2d_forward(const PoolShape& s, const float* x, float* y);
void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx);

// ---- batch normalisation ----
void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                             float eps, float momentum, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* y);
void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                            float eps, const float* running_mean, const float* running_var, float* y);
void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta);

// ---- dropout ----
void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed, uint64_t counter);

// ---- losses ----
void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                          double* loss_sum, int64_t* correct);
void softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes, float* dlogits);
void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum);
void mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred);

// ---- activations with blocked channels (Backend::channel_block) ----
// Offset of element (b, k, i, j) of an activation [n, c, h, w] whose channels are in blocks of `block` (1: NCHW).
inline int64_t blocked_offset(int64_t c, int64_t h, int64_t w, int64_t block, int64_t b, int64_t k, int64_t i,
                              int64_t j) {
  return (((b * (c / block) + k / block) * h + i) * w + j) * block + k % block;
}
// Backend::regroup_channels.
void regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y);

// ---- ResNet option-A shortcut (x's channels in blocks of in_block, y's in blocks of out_block; 1: NCHW) ----
void shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                          int64_t in_block, int64_t out_block, const float* x, float* y);
void shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                           int64_t in_block, int64_t out_block, const float* dy, float* dx);

}  // namespace pshard::models::cpu
