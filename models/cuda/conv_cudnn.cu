// CudaBackend convolution through cuDNN: descriptors and algorithms chosen once per geometry (heuristics of
// cudnnGet*Algorithm_v7, restricted to FP32 FMA math unless TF32 is allowed), one reused workspace.
#include <climits>

#include "models/cuda/check.h"
#include "models/cuda/cuda_backend.h"

namespace pshard::models {
namespace {

// Largest cuDNN workspace an algorithm may ask for.
constexpr size_t kMaxConvWorkspace = size_t{512} << 20;

int dim(int64_t v, const ConvShape& s) {
  if (v < 0 || v > INT_MAX) {
    throw Error("conv2d (cuda): dimension " + std::to_string(v) + " of a " + std::to_string(s.c_in) + "->" +
                std::to_string(s.c_out) + " convolution does not fit cuDNN's 32-bit sizes");
  }
  return static_cast<int>(v);
}

// The first heuristic result that succeeded, fits the workspace limit and uses an allowed math type.
template <typename Perf>
const Perf* pick(const Perf* perf, int count, bool allow_tf32) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxConvWorkspace) continue;
    if (!allow_tf32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
    return &perf[i];
  }
  return nullptr;
}

}  // namespace

ConvPlan& CudaBackend::conv_plan(const ConvShape& s) {
  const ConvKey key = {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad};
  auto found = conv_plans_.find(key);
  if (found != conv_plans_.end()) return found->second;

  ConvPlan p;
  PSHARD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  PSHARD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  PSHARD_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  PSHARD_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  // Stored at once so that the destructor frees the descriptors even if a later step throws.
  ConvPlan& plan = conv_plans_.emplace(key, p).first->second;
  try {
    PSHARD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dim(s.n, s),
                                                  dim(s.c_in, s), dim(s.h, s), dim(s.w, s)));
    PSHARD_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, dim(s.c_out, s),
                                                  dim(s.c_in, s), dim(s.kh, s), dim(s.kw, s)));
    PSHARD_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv, dim(s.pad, s), dim(s.pad, s), dim(s.stride, s),
                                                       dim(s.stride, s), 1, 1, CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, allow_tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    PSHARD_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.conv, plan.x, plan.w, &n, &c, &h, &w));
    if (n != s.n || c != s.c_out || h != s.h_out || w != s.w_out) {
      throw Error("conv2d (cuda): cuDNN computes an output of " + std::to_string(h) + "x" + std::to_string(w) +
                  " where pshard expects " + std::to_string(s.h_out) + "x" + std::to_string(s.w_out));
    }
    PSHARD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));

    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, plan.x, plan.w, plan.conv, plan.y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd));
    if (const auto* best = pick(fwd, count, allow_tf32_)) {
      plan.fwd_algo = best->algo, plan.fwd_math = best->mathType;
    } else {
      plan.fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, plan.fwd_math = CUDNN_FMA_MATH;
    }
    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        cudnn_, plan.w, plan.y, plan.conv, plan.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, data));
    if (const auto* best = pick(data, count, allow_tf32_)) {
      plan.data_algo = best->algo, plan.data_math = best->mathType;
    } else {
      plan.data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, plan.data_math = CUDNN_FMA_MATH;
    }
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        cudnn_, plan.x, plan.y, plan.conv, plan.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, filter));
    if (const auto* best = pick(filter, count, allow_tf32_)) {
      plan.filter_algo = best->algo, plan.filter_math = best->mathType;
    } else {
      plan.filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, plan.filter_math = CUDNN_FMA_MATH;
    }
    // Workspace sizes under the math type each algorithm runs with.
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.fwd_math));
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, plan.x, plan.w, plan.conv, plan.y, plan.fwd_algo,
                                                               &plan.fwd_bytes));
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.data_math));
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, plan.w, plan.y, plan.conv, plan.x,
                                                                    plan.data_algo, &plan.data_bytes));
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.filter_math));
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, plan.x, plan.y, plan.conv, plan.w,
                                                                      plan.filter_algo, &plan.filter_bytes));
  } catch (...) {
    cudnnDestroyTensorDescriptor(plan.x);
    cudnnDestroyTensorDescriptor(plan.y);
    cudnnDestroyFilterDescriptor(plan.w);
    cudnnDestroyConvolutionDescriptor(plan.conv);
    conv_plans_.erase(key);
    throw;
  }
  return plan;
}

void CudaBackend::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  if (s.n == 0) return;
  use_device();
  ConvPlan& plan = conv_plan(s);
  void* ws = conv_workspace_.get(plan.fwd_bytes, stream_);
  const float one = 1.0f, zero = 0.0f;
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.fwd_math));
  PSHARD_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, plan.x, x, plan.w, w, plan.conv, plan.fwd_algo, ws,
                                             plan.fwd_bytes, &zero, plan.y, y));
  if (bias) cuda::add_bias(y, bias, s.n, s.c_out, s.h_out * s.w_out, stream_);
}

void CudaBackend::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                  float* dw, float* db) {
  use_device();
  if (s.n == 0) {  // no samples: zero gradients, as the CPU reference
    cuda::fill(dw, s.c_out * s.c_in * s.kh * s.kw, 0.0f, stream_);
    if (db) cuda::fill(db, s.c_out, 0.0f, stream_);
    return;
  }
  ConvPlan& plan = conv_plan(s);
  const float one = 1.0f, zero = 0.0f;
  if (db) cuda::bias_grad(dy, s.n, s.c_out, s.h_out * s.w_out, db, stream_);
  void* ws = conv_workspace_.get(std::max(plan.filter_bytes, plan.data_bytes), stream_);
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.filter_math));
  PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &one, plan.x, x, plan.y, dy, plan.conv, plan.filter_algo,
                                                    ws, plan.filter_bytes, &zero, plan.w, dw));
  if (dx) {
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.data_math));
    PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &one, plan.w, w, plan.y, dy, plan.conv, plan.data_algo, ws,
                                                    plan.data_bytes, &zero, plan.x, dx));
  }
}

}  // namespace pshard::models
