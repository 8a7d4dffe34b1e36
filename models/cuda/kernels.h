// Launchers of the custom CUDA kernels behind CudaBackend; each has the semantics of the Backend method of the same
// name (models/backend_ops.h) and of its CPU reference (models/cpu/kernels.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "models/backend.h"

// All pointers are device memory; every launcher queues work on `stream` and returns without waiting. Example:
//
//   pshard::models::cuda::relu_forward(x, y, n, stream);
namespace pshard::models::cuda {

// The operations whose launcher takes the operation's parameters and the stream.
#define PSHARD_STREAM_LAUNCHER(name, params) void name(PSHARD_OP_PARAMS params, cudaStream_t stream);

// ---- elementwise, and the ResNet option-A shortcut ----
void fill(float* x, int64_t n, float value, cudaStream_t stream);
PSHARD_ELEMENTWISE_OPS(PSHARD_STREAM_LAUNCHER)
PSHARD_SHORTCUT_OPS(PSHARD_STREAM_LAUNCHER)

// ---- pooling (max: the first cell of a window holding the maximum gets the gradient, as on the CPU) ----
PSHARD_POOL_OPS(PSHARD_STREAM_LAUNCHER)

// ---- batch normalisation: per-channel statistics in double, reduced in a fixed order (deterministic) ----
// Doubles of device scratch the batch-norm launchers need for (n, c); each takes it before the stream.
int64_t batchnorm_scratch_doubles(int64_t n, int64_t c);
#define PSHARD_SCRATCH_STREAM_LAUNCHER(name, params) \
  void name(PSHARD_OP_PARAMS params, double* scratch, cudaStream_t stream);
PSHARD_BATCHNORM_OPS(PSHARD_SCRATCH_STREAM_LAUNCHER)
#undef PSHARD_SCRATCH_STREAM_LAUNCHER

// ---- convolution weight gradient as im2col + GEMM (conv_wgrad_gemm.cu) ----
// How many samples one chunk holds, and the device workspace of a chunk: the im2col columns [samples*P, C*KH*KW]
// (rounded up to 64 floats), then dy's rows [c_out, samples*P] (P = h_out*w_out).
struct WgradChunk {
  int64_t samples = 1;
  int64_t cols_floats = 0, dy_floats = 0;
  size_t bytes() const { return sizeof(float) * static_cast<size_t>(cols_floats + dy_floats); }
};
// The largest chunk within limit_bytes (at least one sample; at most s.n) whose sizes fit cuBLAS's ints; an Error
// naming the convolution when even one sample's do not.
WgradChunk wgrad_chunk(const ConvShape& s, size_t limit_bytes);
// cols[(n, p), (c, r, q)] of samples [0, nb) of x (x points at the chunk's first sample); 0 in the padding.
void im2col_rows(const ConvShape& s, const float* x, int64_t nb, float* cols, cudaStream_t stream);
// dy_t[k, n*P + p] = dy[n, k, p] for nb samples of dy [nb, c_out, P].
void samples_to_channel_rows(const float* dy, int64_t nb, int64_t c_out, int64_t p_count, float* dy_t,
                             cudaStream_t stream);

// ---- loss scaling: x *= factor; *bad becomes 1 when a result is not finite (bad is device memory, never reset
// here) ----
void scale_and_check(float* x, int64_t n, float factor, unsigned* bad, cudaStream_t stream);

// ---- 16-bit operands of mixed precision (half.cu); precision is kBf16 or kFp16 (an Error for kFp32) ----
// dst[i] = src[i] rounded to nearest even as 16 bits, i < n.
void to_16bit(const float* src, int64_t n, Precision precision, void* dst, cudaStream_t stream);
// dst [outer, inner, channels] (16-bit) = src [outer, channels, inner] (float32), rounded: activations NCHW -> NHWC,
// filters KCRS -> KRSC.
void to_16bit_channels_last(const float* src, int64_t outer, int64_t channels, int64_t inner, Precision precision,
                            void* dst, cudaStream_t stream);
// dst [outer, channels, inner] (float32) = src [outer, inner, channels] (16-bit): the way back, exact.
void from_16bit_channels_last(const void* src, int64_t outer, int64_t channels, int64_t inner, Precision precision,
                              float* dst, cudaStream_t stream);

// ---- losses ----
// What a loss forward leaves in device memory for the host to read in one copy.
struct LossTotals {
  double loss_sum;
  long long correct;
  long long first_bad;  // first sample whose label is outside [0, classes); n when all are valid
};
// Doubles of device scratch the loss forwards need for n samples.
int64_t loss_scratch_doubles(int64_t n);
void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                          double* scratch, LossTotals* totals, cudaStream_t stream);
void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* scratch, LossTotals* totals,
                 cudaStream_t stream);
PSHARD_LOSS_BACKWARD_OPS(PSHARD_STREAM_LAUNCHER)

#undef PSHARD_STREAM_LAUNCHER

}  // namespace pshard::models::cuda
