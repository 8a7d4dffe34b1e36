// CPU reference pooling: max and average over k x k windows, one (sample, channel) plane per task.
#include <cstring>
#include <limits>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {
namespace {
constexpr int64_t kParallelMin = 1 << 14;
}  // namespace

void maxpool2d_forward(const PoolShape& s, const float* x, float* y) {
  const int64_t planes = s.n * s.c;
#pragma omp parallel for if (planes * s.h * s.w > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.h_out * s.w_out;
    if (s.k == 2 && s.stride == 2 && s.pad == 0) {
      for (int64_t oh = 0; oh < s.h_out; ++oh) {
        const float* r0 = xp + 2 * oh * s.w;
        const float* r1 = r0 + s.w;
        for (int64_t ow = 0; ow < s.w_out; ++ow) {
          float m = r0[2 * ow];
          if (r0[2 * ow + 1] > m) m = r0[2 * ow + 1];
          if (r1[2 * ow] > m) m = r1[2 * ow];
          if (r1[2 * ow + 1] > m) m = r1[2 * ow + 1];
          yp[oh * s.w_out + ow] = m;
        }
      }
      continue;
    }
    for (int64_t oh = 0; oh < s.h_out; ++oh) {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t ki = 0; ki < s.k; ++ki) {
          const int64_t ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t kj = 0; kj < s.k; ++kj) {
            const int64_t iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w && xp[ih * s.w + iw] > m) m = xp[ih * s.w + iw];
          }
        }
        yp[oh * s.w_out + ow] = m;
      }
    }
  }
}

void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) {
  const int64_t planes = s.n * s.c;
#pragma omp parallel for if (planes * s.h * s.w > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    const float* yp = y + pl * s.h_out * s.w_out;
    const float* dyp = dy + pl * s.h_out * s.w_out;
    float* dxp = dx + pl * s.h * s.w;
    std::memset(dxp, 0, sizeof(float) * s.h * s.w);
    if (s.k == 2 && s.stride == 2 && s.pad == 0) {
      for (int64_t oh = 0; oh < s.h_out; ++oh) {
        const float* r0 = xp + 2 * oh * s.w;
        const float* r1 = r0 + s.w;
        float* d0 = dxp + 2 * oh * s.w;
        float* d1 = d0 + s.w;
        for (int64_t ow = 0; ow < s.w_out; ++ow) {
          const float m = yp[oh * s.w_out + ow], g = dyp[oh * s.w_out + ow];
          if (r0[2 * ow] == m) {
            d0[2 * ow] = g;
          } else if (r0[2 * ow + 1] == m) {
            d0[2 * ow + 1] = g;
          } else if (r1[2 * ow] == m) {
            d1[2 * ow] = g;
          } else {
            d1[2 * ow + 1] = g;
          }
        }
      }
      continue;
    }
    for (int64_t oh = 0; oh < s.h_out; ++oh) {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        // The first cell of the window (row-major) that holds the maximum, as forward found it.
        const float m = yp[oh * s.w_out + ow];
        int64_t at = -1;
        for (int64_t ki = 0; ki < s.k && at < 0; ++ki) {
          const int64_t ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t kj = 0; kj < s.k; ++kj) {
            const int64_t iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w && xp[ih * s.w + iw] == m) {
              at = ih * s.w + iw;
              break;
            }
          }
        }
        if (at >= 0) dxp[at] += dyp[oh * s.w_out + ow];
      }
    }
  }
}

void avgpool2d_forward(const PoolShape& s, const float* x, float* y) {
  const int64_t planes = s.n * s.c;
  const float inv = 1.0f / static_cast<float>(s.k * s.k);
#pragma omp parallel for if (planes * s.h * s.w > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.h_out * s.w_out;
    for (int64_t oh = 0; oh < s.h_out; ++oh) {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        float sum = 0.0f;
        for (int64_t ki = 0; ki < s.k; ++ki) {
          const int64_t ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t kj = 0; kj < s.k; ++kj) {
            const int64_t iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w) sum += xp[ih * s.w + iw];
          }
        }
        yp[oh * s.w_out + ow] = sum * inv;
      }
    }
  }
}

void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  const int64_t planes = s.n * s.c;
  const float inv = 1.0f / static_cast<float>(s.k * s.k);
#pragma omp parallel for if (planes * s.h * s.w > kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* dyp = dy + pl * s.h_out * s.w_out;
    float* dxp = dx + pl * s.h * s.w;
    std::memset(dxp, 0, sizeof(float) * s.h * s.w);
    for (int64_t oh = 0; oh < s.h_out; ++oh) {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        const float g = dyp[oh * s.w_out + ow] * inv;
        for (int64_t ki = 0; ki < s.k; ++ki) {
          const int64_t ih = oh * s.stride - s.pad + ki;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t kj = 0; kj < s.k; ++kj) {
            const int64_t iw = ow * s.stride - s.pad + kj;
            if (iw >= 0 && iw < s.w) dxp[ih * s.w + iw] += g;
          }
        }
      }
    }
  }
}

}  // namespace pshard::models::cpu
