// CUDA elementwise kernels: fill, axpy, add, multiply, bias, ReLU, dropout and the ResNet option-A shortcut.
#include "models/cpu/kernels.h"
#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

// ---- kernels ----

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = global_index(); i < n; i += global_stride()) x[i] = value;
}

__global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] += alpha * x[i];
}

__global__ void add_kernel(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = a[i] + b[i];
}

__global__ void multiply_kernel(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = a[i] * b[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t total, int64_t channels, int64_t inner) {
  for (int64_t i = global_index(); i < total; i += global_stride()) y[i] += bias[(i / inner) % channels];
}

// inner == 1 (Linear): one thread per channel walks the rows, reads are coalesced across threads.
__global__ void bias_grad_rows_kernel(const float* dy, int64_t outer, int64_t channels, float* db) {
  for (int64_t c = global_index(); c < channels; c += global_stride()) {
    float s = 0.0f;
    for (int64_t o = 0; o < outer; ++o) s += dy[o * channels + c];
    db[c] = s;
  }
}

// inner > 1 (Conv2d): one block per channel; float partials per thread, double across threads.
__global__ void bias_grad_planes_kernel(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db) {
  const int64_t c = blockIdx.x;
  double sum = 0.0;
  for (int64_t o = 0; o < outer; ++o) {
    const float* p = dy + (o * channels + c) * inner;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) s += p[i];
    sum += s;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) db[c] = static_cast<float>(sum);
}

// Exponent bits all ones: NaN or infinity. One store per block that saw one.
__global__ void scale_and_check_kernel(float* x, int64_t n, float factor, unsigned* bad) {
  bool found = false;
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = x[i] * factor;
    x[i] = v;
    found = found || (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
  }
  if (__syncthreads_or(found) && threadIdx.x == 0) *bad = 1;
}

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void dropout_forward_kernel(const float* x, float* y, float* mask, int64_t n, float p, float scale,
                                       uint64_t seed, uint64_t counter) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float m = cpu::dropout_keep(seed, counter, static_cast<uint64_t>(i), p) ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

// One thread per output element of y [n, c_out, ho, wo].
__global__ void shortcut_pad_forward_kernel(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride,
                                            int64_t c_out, int64_t ho, int64_t wo, const float* x, float* y) {
  const int64_t total = n * c_out * ho * wo, off = (c_out - c_in) / 2;
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t j = idx % wo, i = (idx / wo) % ho, co = (idx / (wo * ho)) % c_out, b = idx / (wo * ho * c_out);
    const int64_t ci = co - off;
    y[idx] = (ci < 0 || ci >= c_in) ? 0.0f : x[((b * c_in + ci) * h + i * stride) * w + j * stride];
  }
}

// One thread per element of dy; each maps to at most one element of dx, so there are no races.
__global__ void shortcut_pad_backward_kernel(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride,
                                             int64_t c_out, int64_t ho, int64_t wo, const float* dy, float* dx) {
  const int64_t total = n * c_out * ho * wo, off = (c_out - c_in) / 2;
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t j = idx % wo, i = (idx / wo) % ho, co = (idx / (wo * ho)) % c_out, b = idx / (wo * ho * c_out);
    const int64_t ci = co - off;
    if (ci >= 0 && ci < c_in) dx[((b * c_in + ci) * h + i * stride) * w + j * stride] += dy[idx];
  }
}

}  // namespace

// ---- launchers ----

void scale_and_check(float* x, int64_t n, float factor, unsigned* bad, cudaStream_t stream) {
  if (n <= 0) return;
  scale_and_check_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, factor, bad);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void axpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  axpy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, alpha, x, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void add(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void multiply(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  multiply_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * channels * inner;
  if (total <= 0) return;
  add_bias_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, bias, total, channels, inner);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db, cudaStream_t stream) {
  if (channels <= 0) return;
  if (inner == 1) {
    bias_grad_rows_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(dy, outer, channels, db);
  } else {
    bias_grad_planes_kernel<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(dy, outer, channels, inner, db);
  }
  PSHARD_CUDA_CHECK_LAUNCH();
}

void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed, uint64_t counter,
                     cudaStream_t stream) {
  if (n <= 0) return;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // as the CPU reference computes it
  dropout_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, mask, n, p, scale, seed, counter);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out, const float* x,
                          float* y, cudaStream_t stream) {
  const int64_t ho = (h + stride - 1) / stride, wo = (w + stride - 1) / stride, total = n * c_out * ho * wo;
  if (total <= 0) return;
  shortcut_pad_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(n, c_in, h, w, stride, c_out, ho, wo, x, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                           const float* dy, float* dx, cudaStream_t stream) {
  const int64_t ho = (h + stride - 1) / stride, wo = (w + stride - 1) / stride, total = n * c_out * ho * wo;
  if (total <= 0) return;
  shortcut_pad_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(n, c_in, h, w, stride, c_out, ho, wo, dy,
                                                                           dx);
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda
