// Launchers of the custom CUDA kernels behind CudaBackend; each has the semantics of the Backend method of the same
// name (models/backend.h) and of its CPU reference (models/cpu/kernels.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "models/backend.h"

// All pointers are device memory; every launcher queues work on `stream` and returns without waiting. Example:
//
//   pshard::models::cuda::relu_forward(x, y, n, stream);
namespace pshard::models::cuda {

// ---- elementwise ----
void fill(float* x, int64_t n, float value, cudaStream_t stream);
void axpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream);
void add(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream);
void multiply(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream);
void add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner, cudaStream_t stream);
void bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db, cudaStream_t stream);
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed, uint64_t counter,
                     cudaStream_t stream);
void shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out, const float* x,
                          float* y, cudaStream_t stream);
void shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                           const float* dy, float* dx, cudaStream_t stream);

// ---- pooling (max: the first cell of a window holding the maximum gets the gradient, as on the CPU) ----
void maxpool2d_forward(const PoolShape& s, const float* x, float* y, cudaStream_t stream);
void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx,
                        cudaStream_t stream);
void avgpool2d_forward(const PoolShape& s, const float* x, float* y, cudaStream_t stream);
void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx, cudaStream_t stream);

// ---- batch normalisation: per-channel statistics in double, reduced in a fixed order (deterministic) ----
// Doubles of device scratch the two batchnorm calls need for (n, c).
int64_t batchnorm_scratch_doubles(int64_t n, int64_t c);
void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                             float eps, float momentum, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* y, double* scratch, cudaStream_t stream);
void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                            float eps, const float* running_mean, const float* running_var, float* y, double* scratch,
                            cudaStream_t stream);
void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                        double* scratch, cudaStream_t stream);

// ---- convolution weight gradient as im2col + GEMM (conv_wgrad_gemm.cu) ----
// How many samples one chunk holds, and the device workspace of a chunk: the im2col columns [samples*P, C*KH*KW]
// (rounded up to 64 floats), then dy's rows [c_out, samples*P] (P = h_out*w_out).
struct WgradChunk {
  int64_t samples = 1;
  int64_t cols_floats = 0, dy_floats = 0;
  size_t bytes() const { return sizeof(float) * static_cast<size_t>(cols_floats + dy_floats); }
};
// The largest chunk within limit_bytes (at least one sample; at most s.n) whose sizes fit cuBLAS's ints; an Error
// naming the convolution when even one sample's do not.
WgradChunk wgrad_chunk(const ConvShape& s, size_t limit_bytes);
// cols[(n, p), (c, r, q)] of samples [0, nb) of x (x points at the chunk's first sample); 0 in the padding.
void im2col_rows(const ConvShape& s, const float* x, int64_t nb, float* cols, cudaStream_t stream);
// dy_t[k, n*P + p] = dy[n, k, p] for nb samples of dy [nb, c_out, P].
void samples_to_channel_rows(const float* dy, int64_t nb, int64_t c_out, int64_t p_count, float* dy_t,
                             cudaStream_t stream);

// ---- losses ----
// What a loss forward leaves in device memory for the host to read in one copy.
struct LossTotals {
  double loss_sum;
  long long correct;
  long long first_bad;  // first sample whose label is outside [0, classes); n when all are valid
};
// Doubles of device scratch the loss forwards need for n samples.
int64_t loss_scratch_doubles(int64_t n);
void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                          double* scratch, LossTotals* totals, cudaStream_t stream);
void softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes, float* dlogits,
                           cudaStream_t stream);
void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* scratch, LossTotals* totals,
                 cudaStream_t stream);
void mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred, cudaStream_t stream);

}  // namespace pshard::models::cuda
