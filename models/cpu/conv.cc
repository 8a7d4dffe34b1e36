// CPU reference convolution: im2col / col2im and GEMM (OpenBLAS), several samples per GEMM.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;
// Samples are put side by side in one column matrix until it has this many columns, so that small feature maps
// (8x8) still make GEMMs wide enough to run near peak...
constexpr int64_t kMinColumns = 512;
// ...but a column matrix stays below this many floats (cache and memory).
constexpr int64_t kMaxColumnFloats = int64_t{1} << 22;

int64_t rows_of(const ConvShape& s) { return s.c_in * s.kh * s.kw; }

// Samples per GEMM for this shape.
int64_t chunk_samples(const ConvShape& s) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s);
  int64_t g = std::max<int64_t>(1, std::min<int64_t>(s.n, (kMinColumns + p - 1) / p));
  while (g > 1 && k * g * p > kMaxColumnFloats) --g;
  return g;
}

// Row r of the column matrix of one sample into dst[0 .. h_out*w_out).
void im2col_row(const float* x, const ConvShape& s, int64_t r, float* dst) {
  const int64_t kj = r % s.kw, ki = (r / s.kw) % s.kh, ci = r / (s.kw * s.kh);
  const float* xc = x + ci * s.h * s.w;
  for (int64_t oh = 0; oh < s.h_out; ++oh) {
    const int64_t ih = oh * s.stride - s.pad + ki;
    float* d = dst + oh * s.w_out;
    if (ih < 0 || ih >= s.h) {
      std::memset(d, 0, sizeof(float) * s.w_out);
      continue;
    }
    const float* xr = xc + ih * s.w;
    if (s.stride == 1) {
      // iw = ow - pad + kj lies in [0, w) for ow in [lo, hi).
      const int64_t lo = std::max<int64_t>(0, s.pad - kj);
      const int64_t hi = std::min<int64_t>(s.w_out, s.w + s.pad - kj);
      for (int64_t ow = 0; ow < lo; ++ow) d[ow] = 0.0f;
      if (hi > lo) std::memcpy(d + lo, xr + lo - s.pad + kj, sizeof(float) * (hi - lo));
      for (int64_t ow = std::max(lo, hi); ow < s.w_out; ++ow) d[ow] = 0.0f;
    } else {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        const int64_t iw = ow * s.stride - s.pad + kj;
        d[ow] = (iw >= 0 && iw < s.w) ? xr[iw] : 0.0f;
      }
    }
  }
}

// Channel ci of one sample: overwritten with the sum of the column entries that read it.
void col2im_channel(const float* col, const ConvShape& s, int64_t ld, int64_t ci, float* xc) {
  std::memset(xc, 0, sizeof(float) * s.h * s.w);
  for (int64_t ki = 0; ki < s.kh; ++ki) {
    for (int64_t kj = 0; kj < s.kw; ++kj) {
      const float* src = col + ((ci * s.kh + ki) * s.kw + kj) * ld;
      for (int64_t oh = 0; oh < s.h_out; ++oh) {
        const int64_t ih = oh * s.stride - s.pad + ki;
        if (ih < 0 || ih >= s.h) continue;
        float* xr = xc + ih * s.w;
        const float* c = src + oh * s.w_out;
        if (s.stride == 1) {
          const int64_t lo = std::max<int64_t>(0, s.pad - kj);
          const int64_t hi = std::min<int64_t>(s.w_out, s.w + s.pad - kj);
          float* xo = xr - s.pad + kj;
          for (int64_t ow = lo; ow < hi; ++ow) xo[ow] += c[ow];
        } else {
          for (int64_t ow = 0; ow < s.w_out; ++ow) {
            const int64_t iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w) xr[iw] += c[ow];
          }
        }
      }
    }
  }
}

// Column matrix of samples [n0, n0 + gn) side by side: sample i in columns [i*p, (i+1)*p) of ld = gn*p.
void im2col_chunk(const float* x, const ConvShape& s, int64_t n0, int64_t gn, float* col) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s), ld = gn * p, in = s.c_in * s.h * s.w;
#pragma omp parallel for if (gn * k * p > kParallelMin)
  for (int64_t ir = 0; ir < gn * k; ++ir) {
    const int64_t i = ir / k, r = ir % k;
    im2col_row(x + (n0 + i) * in, s, r, col + r * ld + i * p);
  }
}

}  // namespace

void im2col(const float* x, const ConvShape& s, float* col, int64_t ld) {
  const int64_t k = rows_of(s);
#pragma omp parallel for if (k * s.h_out * s.w_out > kParallelMin)
  for (int64_t r = 0; r < k; ++r) im2col_row(x, s, r, col + r * ld);
}

void col2im(const float* col, const ConvShape& s, int64_t ld, float* x) {
#pragma omp parallel for if (s.c_in * s.h * s.w > kParallelMin)
  for (int64_t ci = 0; ci < s.c_in; ++ci) col2im_channel(col, s, ld, ci, x + ci * s.h * s.w);
}

int64_t conv2d_workspace_floats(const ConvShape& s) {
  return (rows_of(s) + s.c_out) * chunk_samples(s) * s.h_out * s.w_out;
}

void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y, float* ws) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s), g = chunk_samples(s);
  float* col = ws;
  float* tmp = ws + k * g * p;
  for (int64_t n0 = 0; n0 < s.n; n0 += g) {
    const int64_t gn = std::min(g, s.n - n0), ld = gn * p;
    im2col_chunk(x, s, n0, gn, col);
    if (gn == 1) {
      float* yn = y + n0 * s.c_out * p;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.c_out, p, k, 1.0f, w, k, col, ld, 0.0f, yn, p);
      if (bias) add_bias(yn, bias, 1, s.c_out, p);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.c_out, ld, k, 1.0f, w, k, col, ld, 0.0f, tmp, ld);
    // tmp [c_out, gn*p] -> y [gn, c_out, p], adding the bias on the way.
#pragma omp parallel for if (gn * s.c_out * p > kParallelMin)
    for (int64_t ic = 0; ic < gn * s.c_out; ++ic) {
      const int64_t i = ic / s.c_out, c = ic % s.c_out;
      const float* src = tmp + c * ld + i * p;
      float* dst = y + ((n0 + i) * s.c_out + c) * p;
      const float b = bias ? bias[c] : 0.0f;
      for (int64_t j = 0; j < p; ++j) dst[j] = src[j] + b;
    }
  }
}

void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                     float* db, float* ws) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s), g = chunk_samples(s);
  float* col = ws;
  float* dyp = ws + k * g * p;
  if (db) std::fill(db, db + s.c_out, 0.0f);
  for (int64_t n0 = 0; n0 < s.n; n0 += g) {
    const int64_t gn = std::min(g, s.n - n0), ld = gn * p;
    im2col_chunk(x, s, n0, gn, col);
    const float* d = dy + n0 * s.c_out * p;
    if (gn > 1) {
      // dy [gn, c_out, p] -> dyp [c_out, gn*p]
#pragma omp parallel for if (gn * s.c_out * p > kParallelMin)
      for (int64_t ic = 0; ic < gn * s.c_out; ++ic) {
        const int64_t i = ic / s.c_out, c = ic % s.c_out;
        std::memcpy(dyp + c * ld + i * p, d + (i * s.c_out + c) * p, sizeof(float) * p);
      }
      d = dyp;
    }
    // dw (+)= dY col^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.c_out, k, ld, 1.0f, d, ld, col, ld, n0 == 0 ? 0.0f : 1.0f,
                dw, k);
    if (db) {
      for (int64_t c = 0; c < s.c_out; ++c) {
        const float* row = d + c * ld;
        float sum = 0.0f;
        for (int64_t j = 0; j < ld; ++j) sum += row[j];
        db[c] += sum;
      }
    }
    if (dx) {
      // dcol = W^T dY (into col, no longer needed), then scattered back to the images.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, ld, s.c_out, 1.0f, w, k, d, ld, 0.0f, col, ld);
      const int64_t in = s.c_in * s.h * s.w;
#pragma omp parallel for if (gn * in > kParallelMin)
      for (int64_t ic = 0; ic < gn * s.c_in; ++ic) {
        const int64_t i = ic / s.c_in, ci = ic % s.c_in;
        col2im_channel(col + i * p, s, ld, ci, dx + (n0 + i) * in + ci * s.h * s.w);
      }
    }
  }
}

}  // namespace pshard::models::cpu
