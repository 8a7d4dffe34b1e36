// The 16-bit operands of mixed precision (train.precision = bf16 | fp16): the model's tensors stay float32 NCHW, and
// each tensor-core GEMM or convolution reads copies rounded to bfloat16 or IEEE half (round to nearest even, as the
// CPU's oneDNN path and PyTorch's autocast round). Convolution operands are written channels-last (NHWC activations,
// KRSC filters) by the same pass that rounds them: cuDNN's half and bf16 tensor-core kernels run on that layout
// natively, and a transposing copy costs the same bytes as a plain one.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

template <typename T>
__device__ T round16(float v);
template <>
__device__ __half round16<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 round16<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
__device__ float widen(__half v) { return __half2float(v); }
__device__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void round_kernel(const float* src, int64_t n, T* dst) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dst[i] = round16<T>(src[i]);
}

// One 32 x 32 tile of one [channels, inner] plane per block (32 x 8 threads); the padded row keeps the transposed
// reads free of shared-memory bank conflicts. Planes beyond gridDim.z (65535) are walked by the same blocks.
constexpr int kTile = 32, kTileRows = 8;

template <typename T>
__global__ void channels_last_kernel(const float* src, int64_t outer, int64_t channels, int64_t inner, T* dst) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTile, c0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t plane = channels * inner;
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    const float* s = src + o * plane;
    T* d = dst + o * plane;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // read along inner: coalesced
      const int64_t c = c0 + r, i = i0 + threadIdx.x;
      if (c < channels && i < inner) tile[r][threadIdx.x] = s[c * inner + i];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // write along channels: coalesced
      const int64_t i = i0 + r, c = c0 + threadIdx.x;
      if (c < channels && i < inner) d[i * channels + c] = round16<T>(tile[threadIdx.x][r]);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void channels_first_kernel(const T* src, int64_t outer, int64_t channels, int64_t inner, float* dst) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTile, c0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t plane = channels * inner;
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    const T* s = src + o * plane;
    float* d = dst + o * plane;
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // read along channels
      const int64_t i = i0 + r, c = c0 + threadIdx.x;
      if (c < channels && i < inner) tile[r][threadIdx.x] = widen(s[i * channels + c]);
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {  // write along inner
      const int64_t c = c0 + r, i = i0 + threadIdx.x;
      if (c < channels && i < inner) d[c * inner + i] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

dim3 tile_grid(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t tiles_c = (channels + kTile - 1) / kTile;
  if (tiles_c > 65535) {
    throw Error("cuda backend: " + std::to_string(channels) + " channels exceed the channels-last conversion's grid");
  }
  return dim3(static_cast<unsigned>((inner + kTile - 1) / kTile), static_cast<unsigned>(tiles_c),
              static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
}

void require_16bit(Precision precision) {
  if (precision == Precision::kFp32) throw Error("cuda backend: a 16-bit conversion was asked for fp32 operands");
}

}  // namespace

void to_16bit(const float* src, int64_t n, Precision precision, void* dst, cudaStream_t stream) {
  require_16bit(precision);
  if (n <= 0) return;
  if (precision == Precision::kFp16) {
    round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, static_cast<__half*>(dst));
  } else {
    round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, static_cast<__nv_bfloat16*>(dst));
  }
  PSHARD_CUDA_CHECK_LAUNCH();
}

void to_16bit_channels_last(const float* src, int64_t outer, int64_t channels, int64_t inner, Precision precision,
                            void* dst, cudaStream_t stream) {
  require_16bit(precision);
  if (outer <= 0 || channels <= 0 || inner <= 0) return;
  const dim3 grid = tile_grid(outer, channels, inner), block(kTile, kTileRows);
  if (precision == Precision::kFp16) {
    channels_last_kernel<<<grid, block, 0, stream>>>(src, outer, channels, inner, static_cast<__half*>(dst));
  } else {
    channels_last_kernel<<<grid, block, 0, stream>>>(src, outer, channels, inner, static_cast<__nv_bfloat16*>(dst));
  }
  PSHARD_CUDA_CHECK_LAUNCH();
}

void from_16bit_channels_last(const void* src, int64_t outer, int64_t channels, int64_t inner, Precision precision,
                              float* dst, cudaStream_t stream) {
  require_16bit(precision);
  if (outer <= 0 || channels <= 0 || inner <= 0) return;
  const dim3 grid = tile_grid(outer, channels, inner), block(kTile, kTileRows);
  if (precision == Precision::kFp16) {
    channels_first_kernel<<<grid, block, 0, stream>>>(static_cast<const __half*>(src), outer, channels, inner, dst);
  } else {
    channels_first_kernel<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), outer, channels, inner,
                                                      dst);
  }
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda
