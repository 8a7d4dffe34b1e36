// Launch geometry and block reductions shared by the .cu files of the CUDA backend (include from .cu only).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace pshard::models::cuda {

constexpr int kThreads = 256;  // threads per block of every elementwise kernel
constexpr int64_t kMaxBlocks = 8192;

// Blocks for a grid-stride loop over n elements.
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Grid-stride loop index helpers.
__device__ inline int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0. Fixed order.
template <typename T>
__device__ inline T block_sum(T v) {
  __shared__ T warp_sums[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  T total = 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) total += warp_sums[i];
  }
  return total;
}

}  // namespace pshard::models::cuda
