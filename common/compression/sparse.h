// Shared by the sparse codecs (topk, randomk): k uint32 indices, strictly increasing and < n, then k float32 values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/compression/codec.h"

namespace pshard::compression {

// How many of n values a sparse codec with `ratio` sends: ceil(ratio x n), at least 1, at most n.
size_t sparse_count(double ratio, size_t n);
// Writes the chosen (sorted) indices of `in` and their values into `out`; returns the bytes written (8 per index).
size_t write_sparse(const std::vector<uint32_t>& sorted_indices, const float* in, uint8_t* out);
// Ok when `bytes` is 8 x k for 1 <= k <= n and the indices are strictly increasing and < n.
CheckResult check_sparse(const char* name, const uint8_t* in, size_t bytes, size_t n);
// Zeros, then the k values at their indices.
void decode_sparse(const uint8_t* in, size_t bytes, size_t n, float* out);

}  // namespace pshard::compression
