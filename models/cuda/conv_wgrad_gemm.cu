// CudaBackend's convolution weight gradient as im2col + one cuBLAS SGEMM per chunk of samples (train.cuda_conv_wgrad =
// gemm): deterministic, and faster than cuDNN's deterministic direct algorithms on small-channel layers.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>

#include "models/cuda/check.h"
#include "models/cuda/cuda_backend.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

// Geometry of one sample, in int: wgrad_chunk() has checked that every size, c*kh*kw, h_out*w_out and a chunk's
// samples * h_out * w_out fit, so only the flat element index needs 64 bits.
struct Geo {
  int c, h, w, kh, kw, stride, pad, h_out, w_out;
};

// ---- kernels ----

// cols[(n, p), (c, r, q)] = x[n, c, oh*stride - pad + r, ow*stride - pad + q], 0 in the padding, where p = oh*w_out +
// ow and x starts at the chunk's first sample: row-major [rows = nb*P, C*KH*KW], the CPU reference's im2col transposed
// and stacked over samples.
//
// Why tiles: along a row of cols, consecutive columns (c, r, q) read x in runs of KW floats, then jump a row or a
// channel plane, while down a column consecutive rows (p) read consecutive iw. So each block moves one tile of
// kIm2colTile rows x kIm2colTile columns through shared memory: it reads the tile with consecutive threads on
// consecutive rows (coalesced reads of x), then writes it with consecutive threads on consecutive columns (coalesced
// writes of cols). A tile is any rectangle of the flat [rows, C*KH*KW] matrix: every element works out its own sample,
// pixel and (c, r, q), so tiles may span samples and channels, and the remainders at the right and bottom edges are
// only bounds checks. Tiles are numbered row-band by row-band (a band's column tiles are neighbours, sharing its x).
constexpr int kIm2colTile = 32;
constexpr int kIm2colPasses = 8;  // blockDim.y: each thread moves kIm2colTile / kIm2colPasses elements per phase

__global__ void im2col_rows_kernel(Geo g, const float* __restrict__ x, int64_t rows, float* __restrict__ cols) {
  __shared__ float tile[kIm2colTile][kIm2colTile + 1];  // [column][row]; the + 1 puts a column's rows on 32 banks
  const int k2 = g.kh * g.kw, crs = g.c * k2, p_count = g.h_out * g.w_out;
  const int64_t col_tiles = (static_cast<int64_t>(crs) + kIm2colTile - 1) / kIm2colTile;
  const int64_t tiles = (rows + kIm2colTile - 1) / kIm2colTile * col_tiles;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / col_tiles * kIm2colTile, col0 = t % col_tiles * kIm2colTile;
    // Read: thread tx takes row row0 + tx (one output pixel), ty the tile's columns ty, ty + kIm2colPasses, ...
    if (row0 + tx < rows) {
      const int row = static_cast<int>(row0 + tx);
      const int n = row / p_count, p = row - n * p_count;
      const int oh = p / g.w_out, ow = p - oh * g.w_out;
      const float* xn = x + static_cast<int64_t>(n) * g.c * g.h * g.w;
      for (int j = ty; j < kIm2colTile && col0 + j < crs; j += kIm2colPasses) {
        const int col = static_cast<int>(col0 + j);
        const int c = col / k2, rq = col - c * k2, r = rq / g.kw, q = rq - r * g.kw;
        const int ih = oh * g.stride - g.pad + r, iw = ow * g.stride - g.pad + q;
        const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
        tile[j][tx] = inside ? xn[(static_cast<int64_t>(c) * g.h + ih) * g.w + iw] : 0.0f;
      }
    }
    __syncthreads();
    // Write: thread tx takes column col0 + tx, ty the tile's rows ty, ty + kIm2colPasses, ...
    if (col0 + tx < crs) {
      for (int i = ty; i < kIm2colTile && row0 + i < rows; i += kIm2colPasses) {
        cols[(row0 + i) * crs + col0 + tx] = tile[tx][i];
      }
    }
    __syncthreads();  // the next tile's reads overwrite `tile`
  }
}

// dy_t[k, n*P + p] = dy[n, k, p] for the chunk's nb samples (dy starts at the first): [n][k][p] -> [k][n][p], so each
// output channel's terms of the whole chunk are one row. p stays innermost: reads and writes are both coalesced.
__global__ void samples_to_channel_rows_kernel(const float* dy, int nb, int k_count, int p_count, float* dy_t) {
  const int row_len = nb * p_count;
  const int64_t total = static_cast<int64_t>(k_count) * row_len;
  for (int64_t idx = global_index(); idx < total; idx += global_stride()) {
    const int k = static_cast<int>(idx / row_len), j = static_cast<int>(idx - static_cast<int64_t>(k) * row_len);
    const int n = j / p_count, p = j - n * p_count;
    dy_t[idx] = dy[(static_cast<int64_t>(n) * k_count + k) * p_count + p];
  }
}

[[noreturn]] void too_large(const ConvShape& s, const std::string& what, int64_t v) {
  throw Error("conv2d (cuda): the weight gradient of a " + std::to_string(s.c_in) + "->" + std::to_string(s.c_out) +
              " convolution (k" + std::to_string(s.kh) + ", " + std::to_string(s.h) + "x" + std::to_string(s.w) +
              ") has " + what + " = " + std::to_string(v) +
              ", more than cuBLAS's 32-bit sizes allow (train.cuda_conv_wgrad = cudnn avoids it)");
}

}  // namespace

WgradChunk wgrad_chunk(const ConvShape& s, size_t limit_bytes) {
  const int64_t p_count = s.h_out * s.w_out, crs = s.c_in * s.kh * s.kw;
  for (int64_t v : {s.c_in, s.h, s.w, s.kh, s.kw, s.stride, s.pad, s.c_out}) {
    if (v > INT_MAX) too_large(s, "a dimension", v);
  }
  if (crs > INT_MAX) too_large(s, "c_in * kh * kw", crs);
  if (p_count > INT_MAX) too_large(s, "h_out * w_out", p_count);
  if (s.c_out * p_count > INT_MAX) too_large(s, "c_out * h_out * w_out", s.c_out * p_count);
  // Bytes of one sample's columns and dy rows; the columns of the chunk are rounded up to 64 floats so that dy_t
  // starts 256-byte aligned (cuBLAS's fast paths want aligned operands).
  const int64_t sample_bytes = static_cast<int64_t>(sizeof(float)) * (p_count * crs + s.c_out * p_count);
  int64_t samples = static_cast<int64_t>(limit_bytes) / sample_bytes;
  samples = std::max<int64_t>(1, std::min(samples, s.n));
  // The GEMM's reduction length samples * P is an int, and so are the kernels' row indices.
  samples = std::min(samples, INT_MAX / p_count);
  samples = std::min(samples, INT_MAX / std::max<int64_t>(1, s.c_out * p_count));
  samples = std::max<int64_t>(1, samples);
  WgradChunk chunk;
  chunk.samples = samples;
  chunk.cols_floats = (samples * p_count * crs + 63) / 64 * 64;
  chunk.dy_floats = samples * s.c_out * p_count;
  return chunk;
}

void im2col_rows(const ConvShape& s, const float* x, int64_t nb, float* cols, cudaStream_t stream) {
  const Geo g{static_cast<int>(s.c_in), static_cast<int>(s.h),     static_cast<int>(s.w),
              static_cast<int>(s.kh),   static_cast<int>(s.kw),    static_cast<int>(s.stride),
              static_cast<int>(s.pad),  static_cast<int>(s.h_out), static_cast<int>(s.w_out)};
  const int64_t rows = nb * s.h_out * s.w_out, crs = s.c_in * s.kh * s.kw;
  const int64_t tiles = (rows + kIm2colTile - 1) / kIm2colTile * ((crs + kIm2colTile - 1) / kIm2colTile);
  const dim3 block(kIm2colTile, kIm2colPasses);
  im2col_rows_kernel<<<static_cast<unsigned>(std::min(tiles, kMaxBlocks)), block, 0, stream>>>(g, x, rows, cols);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void samples_to_channel_rows(const float* dy, int64_t nb, int64_t c_out, int64_t p_count, float* dy_t,
                             cudaStream_t stream) {
  samples_to_channel_rows_kernel<<<blocks_for(nb * c_out * p_count), kThreads, 0, stream>>>(
      dy, static_cast<int>(nb), static_cast<int>(c_out), static_cast<int>(p_count), dy_t);
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda

namespace pshard::models {

// dW[c_out, C*KH*KW] = sum over chunks of dy_t[c_out, nb*P] x cols[nb*P, C*KH*KW]: each chunk's terms are reduced by
// one SGEMM (k = nb*P), and the chunks are added in sample order (beta 0 for the first, 1 after). The chunk size
// depends only on the shape and the workspace limit and cuBLAS is deterministic for a fixed shape, toolkit and GPU
// (no atomics: cublasSetAtomicsMode is never enabled), so the same inputs give the same bits. The GEMM is gemm()'s,
// in the handle's math mode: FP32 FMA, TF32 only when allowed.
void CudaBackend::conv2d_wgrad_gemm(const ConvShape& s, const cuda::WgradChunk& chunk, const float* x, const float* dy,
                                    float* dw, float* ws) {
  const int64_t p_count = s.h_out * s.w_out, crs = s.c_in * s.kh * s.kw;
  float* cols = ws;
  float* dy_t = ws + chunk.cols_floats;
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk.samples) {
    const int64_t nb = std::min(chunk.samples, s.n - n0);
    const float* dy_chunk = dy + n0 * s.c_out * p_count;
    cuda::im2col_rows(s, x + n0 * s.c_in * s.h * s.w, nb, cols, stream_);
    // One sample's dy is [c_out, P] already: only a chunk of several needs its rows gathered.
    const float* a = dy_chunk;
    if (nb > 1) {
      cuda::samples_to_channel_rows(dy_chunk, nb, s.c_out, p_count, dy_t, stream_);
      a = dy_t;
    }
    // Row-major dW[c_out, crs] = A[c_out, L] x B[L, crs] with L = nb*P, lda = L, ldb = ldc = crs; gemm() hands cuBLAS
    // the column-major dW^T[crs, c_out] = B^T[crs, L] x A^T[L, c_out], the same memory read column-major.
    gemm(false, false, s.c_out, crs, nb * p_count, 1.0f, a, nb * p_count, cols, crs, n0 == 0 ? 0.0f : 1.0f, dw, crs);
  }
}

}  // namespace pshard::models
