// CPU reference convolution: im2col / col2im and GEMM (OpenBLAS), several samples per GEMM.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 14;
// Samples are put side by side in one column matrix (one GEMM per chunk of samples) up to about this many floats,
// so that the matrix im2col writes is still in the L2 cache when the GEMM reads it.
constexpr int64_t kColumnTargetFloats = int64_t{1} << 15;  // 128 KiB: best of 8 Ki..4 Mi floats for lenet here

int64_t rows_of(const ConvShape& s) { return s.c_in * s.kh * s.kw; }

// Samples per GEMM for this shape.
int64_t chunk_samples(const ConvShape& s) {
  const int64_t per_sample = rows_of(s) * s.h_out * s.w_out;
  return std::max<int64_t>(1, std::min<int64_t>(s.n, kColumnTargetFloats / per_sample));
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
      // Rows are short (tens of floats): a plain loop beats a memcpy call.
      const float* src = xr - s.pad + kj;
      for (int64_t ow = 0; ow < lo; ++ow) d[ow] = 0.0f;
      for (int64_t ow = lo; ow < hi; ++ow) d[ow] = src[ow];
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

namespace {

// How a convolution over the batch is split: chunks of g samples (one GEMM each); with several threads and enough
// chunks, each thread takes whole chunks with single-threaded GEMMs and its own slot of workspace (no nested
// parallelism, no synchronisation inside a chunk); otherwise chunks run one after the other with parallel GEMMs.
struct ConvPlan {
  int64_t g = 1, chunks = 1, slots = 1, slot_floats = 0;
  bool by_chunk = false;
};

ConvPlan plan_for(const ConvShape& s) {
  ConvPlan p;
  const int64_t cols = chunk_samples(s) * s.h_out * s.w_out, k = rows_of(s);
  p.g = chunk_samples(s);
  p.chunks = (s.n + p.g - 1) / p.g;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  p.by_chunk = threads > 1 && p.chunks >= threads;
  p.slots = p.by_chunk ? threads : 1;
  // col [k, cols] + tmp/dyp [c_out, cols] + a private dW and db for the reduction of backward.
  p.slot_floats = (k + s.c_out) * cols + s.c_out * k + s.c_out;
  return p;
}

// Forward of samples [n0, n0 + gn) with the slot's col and tmp.
void forward_chunk(const ConvShape& s, const float* x, const float* w, const float* bias, float* y, int64_t n0,
                   int64_t gn, float* col, float* tmp) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s), ld = gn * p;
  im2col_chunk(x, s, n0, gn, col);
  if (gn == 1) {
    float* yn = y + n0 * s.c_out * p;
    gemm(false, false, s.c_out, p, k, 1.0f, w, k, col, ld, 0.0f, yn, p);
    if (bias) add_bias(yn, bias, 1, s.c_out, p);
    return;
  }
  gemm(false, false, s.c_out, ld, k, 1.0f, w, k, col, ld, 0.0f, tmp, ld);
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

// Backward of samples [n0, n0 + gn): dw/db get this chunk's sum (first: overwritten, else added), dx (if not null)
// its rows.
void backward_chunk(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db, bool first, int64_t n0, int64_t gn, float* col, float* dyp) {
  const int64_t p = s.h_out * s.w_out, k = rows_of(s), ld = gn * p;
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
  gemm(false, true, s.c_out, k, ld, 1.0f, d, ld, col, ld, first ? 0.0f : 1.0f, dw, k);
  if (db) {
    for (int64_t c = 0; c < s.c_out; ++c) {
      const float* row = d + c * ld;
      float sum = 0.0f;
      for (int64_t j = 0; j < ld; ++j) sum += row[j];
      db[c] = first ? sum : db[c] + sum;
    }
  }
  if (dx) {
    // dcol = W^T dY (into col, no longer needed), then scattered back to the images.
    gemm(true, false, k, ld, s.c_out, 1.0f, w, k, d, ld, 0.0f, col, ld);
    const int64_t in = s.c_in * s.h * s.w;
#pragma omp parallel for if (gn * in > kParallelMin)
    for (int64_t ic = 0; ic < gn * s.c_in; ++ic) {
      const int64_t i = ic / s.c_in, ci = ic % s.c_in;
      col2im_channel(col + i * p, s, ld, ci, dx + (n0 + i) * in + ci * s.h * s.w);
    }
  }
}

}  // namespace

int64_t conv2d_workspace_floats(const ConvShape& s) {
  const ConvPlan p = plan_for(s);
  return p.slots * p.slot_floats;
}

void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y, float* ws) {
  const ConvPlan plan = plan_for(s);
  const int64_t cols = plan.g * s.h_out * s.w_out, k = rows_of(s);
  if (!plan.by_chunk) {
    for (int64_t c = 0; c < plan.chunks; ++c) {
      const int64_t n0 = c * plan.g;
      forward_chunk(s, x, w, bias, y, n0, std::min(plan.g, s.n - n0), ws, ws + k * cols);
    }
    return;
  }
#pragma omp parallel for schedule(static, 1) num_threads(static_cast <int>(plan.slots))
  for (int64_t c = 0; c < plan.chunks; ++c) {
    float* slot = ws + omp_get_thread_num() * plan.slot_floats;
    const int64_t n0 = c * plan.g;
    forward_chunk(s, x, w, bias, y, n0, std::min(plan.g, s.n - n0), slot, slot + k * cols);
  }
}

void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                     float* db, float* ws) {
  const ConvPlan plan = plan_for(s);
  const int64_t cols = plan.g * s.h_out * s.w_out, k = rows_of(s);
  if (!plan.by_chunk) {
    for (int64_t c = 0; c < plan.chunks; ++c) {
      const int64_t n0 = c * plan.g;
      backward_chunk(s, x, w, dy, dx, dw, db, c == 0, n0, std::min(plan.g, s.n - n0), ws, ws + k * cols);
    }
    return;
  }
  // Each thread sums its chunks into a private dW/db; the partial sums are then added in thread order
  // (deterministic for a given thread count).
  const int64_t wsize = s.c_out * k;
  std::vector<char> used(static_cast<size_t>(plan.slots), 0);
#pragma omp parallel num_threads(static_cast <int>(plan.slots))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* slot = ws + t * plan.slot_floats;
    float* col = slot;
    float* dyp = slot + k * cols;
    float* pdw = dyp + s.c_out * cols;
    float* pdb = pdw + wsize;
    bool first = true;
    for (int64_t c = t; c < plan.chunks; c += nt) {
      const int64_t n0 = c * plan.g;
      backward_chunk(s, x, w, dy, dx, pdw, db ? pdb : nullptr, first, n0, std::min(plan.g, s.n - n0), col, dyp);
      first = false;
    }
    used[t] = first ? 0 : 1;
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t i = 0; i < wsize + s.c_out; ++i) {
      if (i >= wsize && !db) continue;
      float sum = 0.0f;
      for (int u = 0; u < nt; ++u) {
        if (used[u]) sum += ws[u * plan.slot_floats + (k + s.c_out) * cols + i];
      }
      if (i < wsize) {
        dw[i] = sum;
      } else {
        db[i - wsize] = sum;
      }
    }
  }
}

}  // namespace pshard::models::cpu
