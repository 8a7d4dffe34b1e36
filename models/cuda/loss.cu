// CUDA losses: softmax cross-entropy (one warp per sample) and mean squared error, with per-sample results reduced
// in a fixed order into LossTotals (deterministic).
#include <cuda_runtime.h>

#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/launch.h"

namespace pshard::models::cuda {
namespace {

constexpr int kWarpsPerBlock = kThreads / 32;

// ---- kernels ----

// One warp per sample: softmax into probs, per-sample loss into row_loss and 1 / 0 (hit / miss) or -1 (label
// outside [0, classes)) into row_flag.
__global__ void softmax_xent_rows_kernel(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                                         float* probs, double* row_loss, double* row_flag) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const float* z = logits + row * classes;
  float* p = probs + row * classes;
  // First argmax: the largest value, the smallest index among equals.
  float best = -INFINITY;
  int64_t arg = classes;
  for (int64_t j = lane; j < classes; j += 32) {
    if (arg == classes || z[j] > best) {
      best = z[j];
      arg = j;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_down_sync(0xffffffffu, best, off);
    const int64_t oa = __shfl_down_sync(0xffffffffu, arg, off);
    if (oa < classes && (arg == classes || ob > best || (ob == best && oa < arg))) {
      best = ob;
      arg = oa;
    }
  }
  arg = __shfl_sync(0xffffffffu, arg, 0);
  const float mx = z[arg];
  double sum = 0.0;
  for (int64_t j = lane; j < classes; j += 32) {
    const float e = expf(z[j] - mx);
    p[j] = e;
    sum += e;
  }
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
  sum = __shfl_sync(0xffffffffu, sum, 0);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = lane; j < classes; j += 32) p[j] *= inv;
  if (lane == 0) {
    const int32_t label = labels[row];
    if (label < 0 || label >= classes) {
      row_loss[row] = 0.0;
      row_flag[row] = -1.0;
    } else {
      row_loss[row] = log(sum) - static_cast<double>(z[label] - mx);
      row_flag[row] = arg == label ? 1.0 : 0.0;
    }
  }
}

// One block: totals->loss_sum = scale * sum(values); correct / first_bad from flags (null: 0 / count).
__global__ void totals_kernel(const double* values, const double* flags, int64_t count, double scale,
                              LossTotals* totals) {
  double sum = 0.0, hits = 0.0;
  long long bad = count;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    sum += values[i];
    if (flags) {
      if (flags[i] < 0.0) {
        if (i < bad) bad = i;
      } else {
        hits += flags[i];
      }
    }
  }
  sum = block_sum(sum);
  hits = block_sum(hits);
  __shared__ long long bads[kThreads];
  bads[threadIdx.x] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < static_cast<int>(blockDim.x); ++i) bad = bads[i] < bad ? bads[i] : bad;
    totals->loss_sum = sum * scale;
    totals->correct = static_cast<long long>(hits);
    totals->first_bad = bad;
  }
}

__global__ void softmax_xent_backward_kernel(const float* probs, const int32_t* labels, int64_t n, int64_t classes,
                                             float inv_n, float* dlogits) {
  const int64_t total = n * classes;
  for (int64_t i = global_index(); i < total; i += global_stride()) {
    const int64_t row = i / classes, j = i % classes;
    const float d = probs[i] * inv_n;
    dlogits[i] = j == labels[row] ? d - inv_n : d;
  }
}

// Block partials of sum (pred - target)^2 in double.
__global__ void squared_error_kernel(const float* pred, const float* target, int64_t total, double* partial) {
  double sum = 0.0;
  for (int64_t i = global_index(); i < total; i += global_stride()) {
    const double d = static_cast<double>(pred[i]) - target[i];
    sum += d * d;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void mse_backward_kernel(const float* pred, const float* target, int64_t total, float k, float* dpred) {
  for (int64_t i = global_index(); i < total; i += global_stride()) dpred[i] = k * (pred[i] - target[i]);
}

}  // namespace

// ---- launchers ----

int64_t loss_scratch_doubles(int64_t n) { return 2 * (n > kMaxBlocks ? n : kMaxBlocks); }

void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                          double* scratch, LossTotals* totals, cudaStream_t stream) {
  if (n > 0) {
    const unsigned blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
    softmax_xent_rows_kernel<<<blocks, kThreads, 0, stream>>>(logits, labels, n, classes, probs, scratch, scratch + n);
    PSHARD_CUDA_CHECK_LAUNCH();
  }
  totals_kernel<<<1, kThreads, 0, stream>>>(scratch, scratch + n, n, 1.0, totals);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes, float* dlogits,
                           cudaStream_t stream) {
  const int64_t total = n * classes;
  if (total <= 0) return;
  const float inv_n = 1.0f / static_cast<float>(n);
  softmax_xent_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(probs, labels, n, classes, inv_n, dlogits);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* scratch, LossTotals* totals,
                 cudaStream_t stream) {
  const int64_t total = n * dim;
  const unsigned blocks = blocks_for(total);
  if (total > 0) {
    squared_error_kernel<<<blocks, kThreads, 0, stream>>>(pred, target, total, scratch);
    PSHARD_CUDA_CHECK_LAUNCH();
  }
  totals_kernel<<<1, kThreads, 0, stream>>>(scratch, nullptr, total > 0 ? blocks : 0,
                                            dim > 0 ? 1.0 / static_cast<double>(dim) : 0.0, totals);
  PSHARD_CUDA_CHECK_LAUNCH();
}

void mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred, cudaStream_t stream) {
  const int64_t total = n * dim;
  if (total <= 0) return;
  const float k = 2.0f / static_cast<float>(total);
  mse_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(pred, target, total, k, dpred);
  PSHARD_CUDA_CHECK_LAUNCH();
}

}  // namespace pshard::models::cuda
