// CPU reference kernels: elementwise ops, bias, ReLU, dropout and the ResNet option-A shortcut.
#include <algorithm>
#include <cstring>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {
namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void fill(float* x, int64_t n, float value) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void axpy(int64_t n, float alpha, const float* x, float* y) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add(int64_t n, const float* a, const float* b, float* y) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void multiply(int64_t n, const float* a, const float* b, float* y) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner) {
  if (inner == 1) {
#pragma omp parallel for if (outer * channels > kParallelMin)
    for (int64_t o = 0; o < outer; ++o) {
      float* row = y + o * channels;
      for (int64_t c = 0; c < channels; ++c) row[c] += bias[c];
    }
    return;
  }
#pragma omp parallel for if (outer * channels * inner > kParallelMin)
  for (int64_t oc = 0; oc < outer * channels; ++oc) {
    const float b = bias[oc % channels];
    float* p = y + oc * inner;
    for (int64_t i = 0; i < inner; ++i) p[i] += b;
  }
}

void bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db) {
  if (inner == 1) {
    std::fill(db, db + channels, 0.0f);
    for (int64_t o = 0; o < outer; ++o) {
      const float* row = dy + o * channels;
      for (int64_t c = 0; c < channels; ++c) db[c] += row[c];
    }
    return;
  }
#pragma omp parallel for if (outer * channels * inner > kParallelMin)
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      const float* p = dy + (o * channels + c) * inner;
      float s = 0.0f;
      for (int64_t i = 0; i < inner; ++i) s += p[i];
      sum += s;
    }
    db[c] = static_cast<float>(sum);
  }
}

void relu_forward(const float* x, float* y, int64_t n) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];  // loaded unconditionally so that the loop vectorises (no branch per element)
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed, uint64_t counter) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = dropout_keep(seed, counter, static_cast<uint64_t>(i), p) ? scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

void regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y) {
  if (from == to) {
    std::memcpy(y, x, sizeof(float) * n * c * hw);
    return;
  }
#pragma omp parallel for if (n * c * hw > kParallelMin)
  for (int64_t nk = 0; nk < n * c; ++nk) {
    const int64_t b = nk / c, k = nk % c;
    for (int64_t p = 0; p < hw; ++p) {
      y[blocked_offset(c, hw, 1, to, b, k, p, 0)] = x[blocked_offset(c, hw, 1, from, b, k, p, 0)];
    }
  }
}

void shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                          int64_t in_block, int64_t out_block, const float* x, float* y) {
  const int64_t ho = (h + stride - 1) / stride, wo = (w + stride - 1) / stride, off = (c_out - c_in) / 2;
#pragma omp parallel for if (n * c_out * ho * wo > kParallelMin)
  for (int64_t nc = 0; nc < n * c_out; ++nc) {
    const int64_t b = nc / c_out, co = nc % c_out, ci = co - off;
    const bool copied = ci >= 0 && ci < c_in;
    for (int64_t i = 0; i < ho; ++i) {
      for (int64_t j = 0; j < wo; ++j) {
        y[blocked_offset(c_out, ho, wo, out_block, b, co, i, j)] =
            copied ? x[blocked_offset(c_in, h, w, in_block, b, ci, i * stride, j * stride)] : 0.0f;
      }
    }
  }
}

void shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                           int64_t in_block, int64_t out_block, const float* dy, float* dx) {
  const int64_t ho = (h + stride - 1) / stride, wo = (w + stride - 1) / stride, off = (c_out - c_in) / 2;
#pragma omp parallel for if (n * c_in * h * w > kParallelMin)
  for (int64_t nc = 0; nc < n * c_in; ++nc) {  // each (sample, input channel) writes its own elements of dx
    const int64_t b = nc / c_in, ci = nc % c_in, co = ci + off;
    if (co < 0 || co >= c_out) continue;
    for (int64_t i = 0; i < ho; ++i) {
      for (int64_t j = 0; j < wo; ++j) {
        dx[blocked_offset(c_in, h, w, in_block, b, ci, i * stride, j * stride)] +=
            dy[blocked_offset(c_out, ho, wo, out_block, b, co, i, j)];
      }
    }
  }
}

}  // namespace pshard::models::cpu
