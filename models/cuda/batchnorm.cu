// CUDA batch normalisation: per-channel two-pass statistics in double (as the CPU reference), split over blocks and
// reduced in a fixed order so that results are deterministic.
#include <cuda_runtime.h>

#include <algorithm>

#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

// Blocks per channel: enough blocks in total to fill a large GPU, at most one per sample.
int64_t splits_for(int64_t n, int64_t c) { return std::max<int64_t>(1, std::min<int64_t>(n, (512 + c - 1) / c)); }

// ---- kernels ----

// Block (channel, split) sums x (mean == null) or (x - mean)^2 over its samples; partial[ch * splits + split].
__global__ void channel_partial_kernel(int64_t n, int64_t c, int64_t hw, const float* x, const double* mean,
                                       double* partial) {
  const int64_t ch = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int64_t b0 = n * split / splits, b1 = n * (split + 1) / splits, count = (b1 - b0) * hw;
  const double mu = mean ? mean[ch] : 0.0;
  double sum = 0.0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    const float v = x[((b0 + t / hw) * c + ch) * hw + t % hw];
    if (mean) {
      const double d = v - mu;
      sum += d * d;
    } else {
      sum += v;
    }
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[ch * splits + split] = sum;
}

__global__ void mean_kernel(int64_t c, int64_t m, int64_t splits, const double* partial, double* mean) {
  for (int64_t ch = global_index(); ch < c; ch += global_stride()) {
    double s = 0.0;
    for (int64_t i = 0; i < splits; ++i) s += partial[ch * splits + i];
    mean[ch] = m > 0 ? s / static_cast<double>(m) : 0.0;
  }
}

// Variance, saved statistics, running statistics and the per-channel affine map (scale, shift) of forward.
__global__ void variance_kernel(int64_t c, int64_t m, int64_t splits, const double* partial, const double* mean,
                                const float* gamma, const float* beta, float eps, float momentum, float* running_mean,
                                float* running_var, float* save_mean, float* save_invstd, float* scale, float* shift) {
  for (int64_t ch = global_index(); ch < c; ch += global_stride()) {
    double sq = 0.0;
    for (int64_t i = 0; i < splits; ++i) sq += partial[ch * splits + i];
    const double var = m > 0 ? sq / static_cast<double>(m) : 0.0;
    const float invstd = static_cast<float>(1.0 / sqrt(var + eps));
    save_mean[ch] = static_cast<float>(mean[ch]);
    save_invstd[ch] = invstd;
    const double unbiased = m > 1 ? var * static_cast<double>(m) / static_cast<double>(m - 1) : var;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean[ch]);
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    scale[ch] = gamma[ch] * invstd;
    shift[ch] = beta[ch] - static_cast<float>(mean[ch]) * scale[ch];
  }
}

__global__ void eval_affine_kernel(int64_t c, const float* gamma, const float* beta, float eps,
                                   const float* running_mean, const float* running_var, float* scale, float* shift) {
  for (int64_t ch = global_index(); ch < c; ch += global_stride()) {
    scale[ch] = gamma[ch] / sqrtf(running_var[ch] + eps);
    shift[ch] = beta[ch] - running_mean[ch] * scale[ch];
  }
}

__global__ void affine_kernel(int64_t total, int64_t c, int64_t hw, const float* x, const float* scale,
                              const float* shift, float* y) {
  for (int64_t i = global_index(); i < total; i += global_stride()) {
    const int64_t ch = (i / hw) % c;
    y[i] = x[i] * scale[ch] + shift[ch];
  }
}

// Block (channel, split): partial sums of dy and dy * xhat.
__global__ void backward_partial_kernel(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy,
                                        const float* save_mean, const float* save_invstd, double* partial_dy,
                                        double* partial_dyx) {
  const int64_t ch = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int64_t b0 = n * split / splits, b1 = n * (split + 1) / splits, count = (b1 - b0) * hw;
  const float mean = save_mean[ch], invstd = save_invstd[ch];
  double sdy = 0.0, sdyx = 0.0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    const int64_t at = ((b0 + t / hw) * c + ch) * hw + t % hw;
    const float g = dy[at];
    sdy += g;
    sdyx += static_cast<double>(g) * ((x[at] - mean) * invstd);
  }
  sdy = block_sum(sdy);
  sdyx = block_sum(sdyx);
  if (threadIdx.x == 0) {
    partial_dy[ch * splits + split] = sdy;
    partial_dyx[ch * splits + split] = sdyx;
  }
}

// dgamma, dbeta and the per-channel constants of dx = k * (dy - mdy - xhat * mdx).
__global__ void backward_finish_kernel(int64_t c, int64_t m, int64_t splits, const double* partial_dy,
                                       const double* partial_dyx, const float* gamma, const float* save_invstd,
                                       float* dgamma, float* dbeta, float* k, float* mdy, float* mdx) {
  for (int64_t ch = global_index(); ch < c; ch += global_stride()) {
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t i = 0; i < splits; ++i) {
      sdy += partial_dy[ch * splits + i];
      sdyx += partial_dyx[ch * splits + i];
    }
    dbeta[ch] = static_cast<float>(sdy);
    dgamma[ch] = static_cast<float>(sdyx);
    k[ch] = gamma[ch] * save_invstd[ch];
    mdy[ch] = static_cast<float>(sdy / static_cast<double>(m));
    mdx[ch] = static_cast<float>(sdyx / static_cast<double>(m));
  }
}

__global__ void backward_dx_kernel(int64_t total, int64_t c, int64_t hw, const float* x, const float* dy,
                                   const float* save_mean, const float* save_invstd, const float* k, const float* mdy,
                                   const float* mdx, float* dx) {
  for (int64_t i = global_index(); i < total; i += global_stride()) {
    const int64_t ch = (i / hw) % c;
    dx[i] = k[ch] * (dy[i] - mdy[ch] - (x[i] - save_mean[ch]) * save_invstd[ch] * mdx[ch]);
  }
}

}  // namespace

// ---- launchers ----
// Scratch layout (doubles): two partial arrays of c * splits, the mean [c], then three float arrays of c (stored in
// c doubles each, so alignment never matters).

int64_t batchnorm_scratch_doubles(int64_t n, int64_t c) { return 2 * c * splits_for(n, c) + 4 * c; }

void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                             float eps, float momentum, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* y, double* scratch, cudaStream_t stream) {
  if (c <= 0) return;
  const int64_t splits = splits_for(n, c), m = n * hw;
  double* partial = scratch;
  double* mean = scratch + 2 * c * splits;
  float* scale = reinterpret_cast<float*>(mean + c);
  float* shift = reinterpret_cast<float*>(mean + 2 * c);
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  channel_partial_kernel<<<grid, kThreads, 0, stream>>>(n, c, hw, x, nullptr, partial);
  PSHARD_CUDA_CHECK_LAUNCH();
  mean_kernel<<<blocks_for(c), kThreads, 0, stream>>>(c, m, splits, partial, mean);
  PSHARD_CUDA_CHECK_LAUNCH();
  channel_partial_kernel<<<grid, kThreads, 0, stream>>>(n, c, hw, x, mean, partial);
  PSHARD_CUDA_CHECK_LAUNCH();
  variance_kernel<<<blocks_for(c), kThreads, 0, stream>>>(c, m, splits, partial, mean, gamma, beta, eps, momentum,
                                                          running_mean, running_var, save_mean, save_invstd, scale,
                                                          shift);
  PSHARD_CUDA_CHECK_LAUNCH();
  const int64_t total = n * c * hw;
  if (total <= 0) return;
  affine_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, c, hw, x, scale, shift, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                            float eps, const float* running_mean, const float* running_var, float* y, double* scratch,
                            cudaStream_t stream) {
  if (c <= 0) return;
  float* scale = reinterpret_cast<float*>(scratch);
  float* shift = reinterpret_cast<float*>(scratch + c);
  eval_affine_kernel<<<blocks_for(c), kThreads, 0, stream>>>(c, gamma, beta, eps, running_mean, running_var, scale,
                                                             shift);
  PSHARD_CUDA_CHECK_LAUNCH();
  const int64_t total = n * c * hw;
  if (total <= 0) return;
  affine_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, c, hw, x, scale, shift, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                        double* scratch, cudaStream_t stream) {
  if (c <= 0) return;
  const int64_t splits = splits_for(n, c), m = n * hw;
  double* partial_dy = scratch;
  double* partial_dyx = scratch + c * splits;
  float* k = reinterpret_cast<float*>(scratch + 2 * c * splits + c);
  float* mdy = reinterpret_cast<float*>(scratch + 2 * c * splits + 2 * c);
  float* mdx = reinterpret_cast<float*>(scratch + 2 * c * splits + 3 * c);
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  backward_partial_kernel<<<grid, kThreads, 0, stream>>>(n, c, hw, x, dy, save_mean, save_invstd, partial_dy,
                                                         partial_dyx);
  PSHARD_CUDA_CHECK_LAUNCH();
  backward_finish_kernel<<<blocks_for(c), kThreads, 0, stream>>>(c, m, splits, partial_dy, partial_dyx, gamma,
                                                                 save_invstd, dgamma, dbeta, k, mdy, mdx);
  PSHARD_CUDA_CHECK_LAUNCH();
  const int64_t total = n * c * hw;
  if (total <= 0) return;
  backward_dx_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, c, hw, x, dy, save_mean, save_invstd, k, mdy,
                                                                 mdx, dx);
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda
