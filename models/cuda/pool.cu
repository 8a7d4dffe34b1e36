// CUDA max and average pooling with the CPU reference's semantics (first maximum wins, padding counts in averages).
#include <cuda_runtime.h>

#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

// Plain geometry for kernels (PoolShape by value would also work; this keeps the kernels' arguments explicit).
struct Geo {
  int64_t h, w, k, stride, pad, h_out, w_out;
};

Geo geo_of(const PoolShape& s) { return Geo{s.h, s.w, s.k, s.stride, s.pad, s.h_out, s.w_out}; }

// ---- kernels ----

// One thread per output cell; a strict > keeps the first (row-major) maximum, as the CPU does.
__global__ void maxpool_forward_kernel(Geo g, int64_t planes, const float* x, float* y) {
  const int64_t total = planes * g.h_out * g.w_out;
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t ow = idx % g.w_out, oh = (idx / g.w_out) % g.h_out, pl = idx / (g.w_out * g.h_out);
    const float* xp = x + pl * g.h * g.w;
    float m = -INFINITY;
    for (int64_t ki = 0; ki < g.k; ++ki) {
      const int64_t ih = oh * g.stride - g.pad + ki;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t kj = 0; kj < g.k; ++kj) {
        const int64_t iw = ow * g.stride - g.pad + kj;
        if (iw >= 0 && iw < g.w && xp[ih * g.w + iw] > m) m = xp[ih * g.w + iw];
      }
    }
    y[idx] = m;
  }
}

// Windows [first, last] along one axis that contain input position i.
__device__ inline void windows_of(int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t out, int64_t* first,
                                  int64_t* last) {
  const int64_t lo = i + pad - k + 1;  // the window start must be >= lo
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = (i + pad) / stride;
  if (*last > out - 1) *last = out - 1;
}

// One thread per input cell (a gather, so no atomics and a fixed summation order): the cell receives dy of every
// window whose first maximum it is.
__global__ void maxpool_backward_kernel(Geo g, int64_t planes, const float* x, const float* y, const float* dy,
                                        float* dx) {
  const int64_t total = planes * g.h * g.w;
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t iw = idx % g.w, ih = (idx / g.w) % g.h, pl = idx / (g.w * g.h);
    const float* xp = x + pl * g.h * g.w;
    const float* yp = y + pl * g.h_out * g.w_out;
    const float* dyp = dy + pl * g.h_out * g.w_out;
    int64_t oh0, oh1, ow0, ow1;
    windows_of(ih, g.k, g.stride, g.pad, g.h_out, &oh0, &oh1);
    windows_of(iw, g.k, g.stride, g.pad, g.w_out, &ow0, &ow1);
    float grad = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const float m = yp[oh * g.w_out + ow];
        int64_t at = -1;  // first cell of the window that holds the maximum
        for (int64_t ki = 0; ki < g.k && at < 0; ++ki) {
          const int64_t r = oh * g.stride - g.pad + ki;
          if (r < 0 || r >= g.h) continue;
          for (int64_t kj = 0; kj < g.k; ++kj) {
            const int64_t c = ow * g.stride - g.pad + kj;
            if (c >= 0 && c < g.w && xp[r * g.w + c] == m) {
              at = r * g.w + c;
              break;
            }
          }
        }
        if (at == ih * g.w + iw) grad += dyp[oh * g.w_out + ow];
      }
    }
    dx[idx] = grad;
  }
}

__global__ void avgpool_forward_kernel(Geo g, int64_t planes, const float* x, float* y) {
  const int64_t total = planes * g.h_out * g.w_out;
  const float inv = 1.0f / static_cast<float>(g.k * g.k);
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t ow = idx % g.w_out, oh = (idx / g.w_out) % g.h_out, pl = idx / (g.w_out * g.h_out);
    const float* xp = x + pl * g.h * g.w;
    float sum = 0.0f;
    for (int64_t ki = 0; ki < g.k; ++ki) {
      const int64_t ih = oh * g.stride - g.pad + ki;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t kj = 0; kj < g.k; ++kj) {
        const int64_t iw = ow * g.stride - g.pad + kj;
        if (iw >= 0 && iw < g.w) sum += xp[ih * g.w + iw];
      }
    }
    y[idx] = sum * inv;
  }
}

// Gather in the order the CPU scatters (windows row-major), so the sums agree bit for bit.
__global__ void avgpool_backward_kernel(Geo g, int64_t planes, const float* dy, float* dx) {
  const int64_t total = planes * g.h * g.w;
  const float inv = 1.0f / static_cast<float>(g.k * g.k);
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int64_t iw = idx % g.w, ih = (idx / g.w) % g.h, pl = idx / (g.w * g.h);
    const float* dyp = dy + pl * g.h_out * g.w_out;
    int64_t oh0, oh1, ow0, ow1;
    windows_of(ih, g.k, g.stride, g.pad, g.h_out, &oh0, &oh1);
    windows_of(iw, g.k, g.stride, g.pad, g.w_out, &ow0, &ow1);
    float grad = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) grad += dyp[oh * g.w_out + ow] * inv;
    }
    dx[idx] = grad;
  }
}

}  // namespace

// ---- launchers ----

void maxpool2d_forward(const PoolShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.h_out * s.w_out;
  if (total <= 0) return;
  maxpool_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(geo_of(s), s.n * s.c, x, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx,
                        cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total <= 0) return;
  maxpool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(geo_of(s), s.n * s.c, x, y, dy, dx);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void avgpool2d_forward(const PoolShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.h_out * s.w_out;
  if (total <= 0) return;
  avgpool_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(geo_of(s), s.n * s.c, x, y);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx, cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total <= 0) return;
  avgpool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(geo_of(s), s.n * s.c, dy, dx);
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda
