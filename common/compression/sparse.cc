// The byte layout and checks of the sparse codecs.
#include "common/compression/sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace pshard::compression {

size_t sparse_count(double ratio, size_t n) {
  const double k = std::ceil(ratio * static_cast<double>(n));
  return std::min(n, std::max<size_t>(1, static_cast<size_t>(k)));
}

size_t write_sparse(const std::vector<uint32_t>& idx, const float* in, uint8_t* out) {
  const size_t k = idx.size();
  std::memcpy(out, idx.data(), k * sizeof(uint32_t));
  uint8_t* values = out + k * sizeof(uint32_t);
  for (size_t i = 0; i < k; ++i) std::memcpy(values + i * sizeof(float), in + idx[i], sizeof(float));
  return k * 8;
}

CheckResult check_sparse(const char* name, const uint8_t* in, size_t bytes, size_t n) {
  const size_t k = bytes / 8;
  if (bytes % 8 != 0 || k == 0 || k > n) {
    return {CheckResult::kWrongLength,
            std::string(name) + " payload of " + std::to_string(bytes) +
                " bytes: expected 8 x k bytes (k indices and values) with 1 <= k <= " + std::to_string(n)};
  }
  int64_t previous = -1;
  for (size_t i = 0; i < k; ++i) {
    uint32_t index;
    std::memcpy(&index, in + i * sizeof(uint32_t), sizeof(index));
    if (index >= n || static_cast<int64_t>(index) <= previous) {
      return {CheckResult::kBadContent,
              std::string(name) + " index " + std::to_string(i) + " is " + std::to_string(index) +
                  (index >= n ? ", out of range for " + std::to_string(n) + " values"
                              : ", not above the previous index " + std::to_string(previous))};
    }
    previous = index;
  }
  return {};
}

void decode_sparse(const uint8_t* in, size_t bytes, size_t n, float* out) {
  const size_t k = bytes / 8;
  std::fill(out, out + n, 0.0f);
  const uint8_t* values = in + k * sizeof(uint32_t);
  for (size_t i = 0; i < k; ++i) {
    uint32_t index;
    std::memcpy(&index, in + i * sizeof(uint32_t), sizeof(index));
    std::memcpy(out + index, values + i * sizeof(float), sizeof(float));
  }
}

}  // namespace pshard::compression
