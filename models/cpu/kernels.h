// CPU reference kernels: plain functions behind CpuBackend, and the reference every CUDA kernel is tested against.
#pragma once

#include <cstdint>

#include "models/backend.h"

// Each function works on host float arrays with the shapes given in its arguments and has the semantics of the
// Backend operation of the same name (models/backend_ops.h). Loops are parallelised with OpenMP; the caller sets the
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
PSHARD_GEMM_OPS(PSHARD_FUNCTION_OP)
#define PSHARD_SERIAL_FUNCTION_OP(name, params) void name##_serial params;
PSHARD_GEMM_OPS(PSHARD_SERIAL_FUNCTION_OP)
#undef PSHARD_SERIAL_FUNCTION_OP

// ---- elementwise ----
void fill(float* x, int64_t n, float value);
PSHARD_ELEMENTWISE_OPS(PSHARD_FUNCTION_OP)

// ---- convolution (im2col + GEMM) ----
// Column matrix of one sample x [c, h, w]: row r = (ci * kh + ki) * kw + kj, column p = oh * w_out + ow, stored at
// col[r * ld + p] (ld >= h_out * w_out lets several samples share one matrix side by side). Padding reads as 0.
void im2col(const float* x, const ConvShape& s, float* col, int64_t ld);
// The adjoint of im2col: x [c, h, w] is OVERWRITTEN with the sum of the column entries that read each pixel.
void col2im(const float* col, const ConvShape& s, int64_t ld, float* x);
// Floats of workspace conv2d_forward / conv2d_backward need for s with the current OpenMP thread count.
int64_t conv2d_workspace_floats(const ConvShape& s);
// Both take the workspace as a last parameter.
#define PSHARD_WORKSPACE_FUNCTION_OP(name, params) void name(PSHARD_OP_PARAMS params, float* workspace);
PSHARD_CONV_OPS(PSHARD_WORKSPACE_FUNCTION_OP)
#undef PSHARD_WORKSPACE_FUNCTION_OP

// ---- pooling ----
PSHARD_POOL_OPS(PSHARD_FUNCTION_OP)

// ---- batch normalisation ----
PSHARD_BATCHNORM_OPS(PSHARD_FUNCTION_OP)

// ---- losses ----
PSHARD_LOSS_FORWARD_OPS(PSHARD_FUNCTION_OP)
PSHARD_LOSS_BACKWARD_OPS(PSHARD_FUNCTION_OP)

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
