// The rank-ordered sum and mean of a synchronous step (common/reduce/rank_sum.h).
#include "common/reduce/rank_sum.h"

namespace pshard::reduce {

void sum_start(const float* a, const float* b, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void sum_start_mean(const float* a, const float* b, float* out, size_t n, uint32_t count) {
  const float c = static_cast<float>(count);
  for (size_t i = 0; i < n; ++i) out[i] = (a[i] + b[i]) / c;
}

void sum_add(float* acc, const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += g[i];
}

void sum_add_mean(float* acc, const float* g, size_t n, uint32_t count) {
  const float c = static_cast<float>(count);
  for (size_t i = 0; i < n; ++i) acc[i] = (acc[i] + g[i]) / c;
}

void mean(const float* sum, float* out, size_t n, uint32_t count) {
  const float c = static_cast<float>(count);
  for (size_t i = 0; i < n; ++i) out[i] = sum[i] / c;
}

}  // namespace pshard::reduce
