// CudaBackend convolution through cuDNN: descriptors and algorithms chosen once per geometry (heuristics of
// cudnnGet*Algorithm_v7, deterministic direct algorithms only, FP32 FMA math unless TF32 is allowed), one reused
// workspace. The weight gradient runs conv_wgrad_gemm.cu instead unless train.cuda_conv_wgrad = cudnn. In bf16 and
// fp16 the convolutions run channels-last on tensor cores over 16-bit copies of their operands (models/cuda/half.cu).
#include <algorithm>
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

// Tensor-core variants (TF32 on float32 data), excluded unless TF32 is allowed or the data are 16-bit.
bool tensor_op(cudnnMathType_t m) { return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; }

// FFT and Winograd compute in a transformed domain: deterministic, but their rounding error does not shrink with
// the result, so values near zero (cancelling weight-gradient sums of thousands of terms) are off by far more than
// a direct FP32 sum's error, and CUDA would stop following the CPU run. Only direct (GEMM-style) algorithms qualify.
bool transform_based(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transform_based(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transform_based(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first heuristic result (best first) that succeeded, is deterministic (same inputs, same bits: no atomics), is
// direct (not FFT or Winograd), is allowed, runs under the math type we will set and whose workspace fits the limit.
// workspace(algo, math, &bytes) queries cuDNN and returns false when the pair is not supported. Returns false when none
// qualifies.
template <typename Perf, typename Algo, typename Query>
bool pick(const Perf* perf, int count, bool tensor_cores, Query workspace, Algo* algo, cudnnMathType_t* math,
          size_t* bytes) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    if (transform_based(perf[i].algo)) continue;
    if (!tensor_cores && tensor_op(perf[i].mathType)) continue;
    const cudnnMathType_t run_math = tensor_cores ? perf[i].mathType : CUDNN_FMA_MATH;
    size_t need = 0;
    if (!workspace(perf[i].algo, run_math, &need) || need > kMaxConvWorkspace) continue;
    *algo = perf[i].algo, *math = run_math, *bytes = need;
    return true;
  }
  return false;
}

void destroy_descriptors(ConvPlan& plan) {
  if (plan.x) cudnnDestroyTensorDescriptor(plan.x);
  if (plan.y) cudnnDestroyTensorDescriptor(plan.y);
  if (plan.w) cudnnDestroyFilterDescriptor(plan.w);
  if (plan.conv) cudnnDestroyConvolutionDescriptor(plan.conv);
  plan = ConvPlan{};
}

}  // namespace

ConvPlan& CudaBackend::conv_plan(const ConvShape& s) {
  const ConvKey key = {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad};
  auto found = conv_plans_.find(key);
  if (found != conv_plans_.end()) return found->second;

  // Inserted now; if a step throws, the catch below destroys the descriptors and forgets the plan.
  ConvPlan& plan = conv_plans_.emplace(key, ConvPlan{}).first->second;
  try {
    // bf16/fp16: 16-bit channels-last first; a geometry cuDNN has no such algorithm for (few input channels, say)
    // runs in float32 instead, as the fp32 backend would, rather than failing the model.
    bool planned = false;
    if (precision_ != Precision::kFp32) {
      planned = plan_convolution(s, /*mixed=*/true, plan);
      if (!planned) destroy_descriptors(plan);
    }
    if (!planned) planned = plan_convolution(s, /*mixed=*/false, plan);
    if (!planned) {  // not reached: the float32 fallbacks below always qualify
      throw Error("conv2d (cuda): cuDNN offers no algorithm for a " + std::to_string(s.c_in) + "->" +
                  std::to_string(s.c_out) + " convolution");
    }
  } catch (...) {
    destroy_descriptors(plan);
    conv_plans_.erase(key);
    throw;
  }
  return plan;
}

bool CudaBackend::plan_convolution(const ConvShape& s, bool mixed, ConvPlan& plan) {
  plan.mixed = mixed;
  PSHARD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.x));
  PSHARD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.y));
  PSHARD_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan.w));
  PSHARD_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan.conv));
  // Mixed: bf16 or half tensors in NHWC (filters KRSC), float32 accumulation (cuDNN's PSEUDO_HALF and
  // PSEUDO_BFLOAT16 configurations), tensor cores allowed; fp32: NCHW float32, FP32 FMA unless TF32 is allowed.
  const cudnnDataType_t data = !mixed                           ? CUDNN_DATA_FLOAT
                               : precision_ == Precision::kFp16 ? CUDNN_DATA_HALF
                                                                : CUDNN_DATA_BFLOAT16;
  const cudnnTensorFormat_t format = mixed ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const bool tensor_cores = mixed || allow_tf32_;
  const cudnnMathType_t default_math = mixed ? CUDNN_TENSOR_OP_MATH : allow_tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  PSHARD_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(plan.x, format, data, dim(s.n, s), dim(s.c_in, s), dim(s.h, s), dim(s.w, s)));
  PSHARD_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(plan.w, data, format, dim(s.c_out, s), dim(s.c_in, s), dim(s.kh, s), dim(s.kw, s)));
  PSHARD_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv, dim(s.pad, s), dim(s.pad, s), dim(s.stride, s),
                                                     dim(s.stride, s), 1, 1, CUDNN_CROSS_CORRELATION,
                                                     CUDNN_DATA_FLOAT));
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, default_math));
  int n = 0, c = 0, h = 0, w = 0;
  PSHARD_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.conv, plan.x, plan.w, &n, &c, &h, &w));
  if (n != s.n || c != s.c_out || h != s.h_out || w != s.w_out) {
    throw Error("conv2d (cuda): cuDNN computes an output of " + std::to_string(h) + "x" + std::to_string(w) +
                " where pshard expects " + std::to_string(s.h_out) + "x" + std::to_string(s.w_out));
  }
  PSHARD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y, format, data, n, c, h, w));

  // Heuristic rankings (cudnnGet*_v7), then the first candidate cuDNN accepts under our math type. In float32 the
  // fallbacks (implicit GEMM, algo 1) need no workspace and always run; in 16 bits there is none (the caller plans
  // the geometry in float32 instead).
  const cudnnHandle_t handle = cudnn_;
  const cudnnConvolutionDescriptor_t conv = plan.conv;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  PSHARD_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x, plan.w, conv, plan.y,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd));
  auto fwd_bytes = [&](cudnnConvolutionFwdAlgo_t a, cudnnMathType_t m, size_t* b) {
    return cudnnSetConvolutionMathType(conv, m) == CUDNN_STATUS_SUCCESS &&
           cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x, plan.w, conv, plan.y, a, b) == CUDNN_STATUS_SUCCESS;
  };
  if (!pick(fwd, count, tensor_cores, fwd_bytes, &plan.fwd_algo, &plan.fwd_math, &plan.fwd_bytes)) {
    if (mixed) return false;
    plan.fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, plan.fwd_math = CUDNN_FMA_MATH;
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, plan.fwd_math));
    PSHARD_CUDNN_CHECK(
        cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x, plan.w, conv, plan.y, plan.fwd_algo, &plan.fwd_bytes));
  }
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, default_math));
  cudnnConvolutionBwdDataAlgoPerf_t data_perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, plan.w, plan.y, conv, plan.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, data_perf));
  auto data_bytes = [&](cudnnConvolutionBwdDataAlgo_t a, cudnnMathType_t m, size_t* b) {
    return cudnnSetConvolutionMathType(conv, m) == CUDNN_STATUS_SUCCESS &&
           cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w, plan.y, conv, plan.x, a, b) ==
               CUDNN_STATUS_SUCCESS;
  };
  if (!pick(data_perf, count, tensor_cores, data_bytes, &plan.data_algo, &plan.data_math, &plan.data_bytes)) {
    if (mixed) return false;
    plan.data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, plan.data_math = CUDNN_FMA_MATH;
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, plan.data_math));
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w, plan.y, conv, plan.x,
                                                                    plan.data_algo, &plan.data_bytes));
  }
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, default_math));
  cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle, plan.x, plan.y, conv, plan.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, filter));
  auto filter_bytes = [&](cudnnConvolutionBwdFilterAlgo_t a, cudnnMathType_t m, size_t* b) {
    return cudnnSetConvolutionMathType(conv, m) == CUDNN_STATUS_SUCCESS &&
           cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x, plan.y, conv, plan.w, a, b) ==
               CUDNN_STATUS_SUCCESS;
  };
  if (!pick(filter, count, tensor_cores, filter_bytes, &plan.filter_algo, &plan.filter_math, &plan.filter_bytes)) {
    if (mixed) return false;
    plan.filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, plan.filter_math = CUDNN_FMA_MATH;
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, plan.filter_math));
    PSHARD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x, plan.y, conv, plan.w,
                                                                      plan.filter_algo, &plan.filter_bytes));
  }
  return true;
}

bool CudaBackend::convolution_runs_16bit(const ConvShape& s) {
  use_device();
  return conv_plan(s).mixed;
}

void CudaBackend::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  if (s.n == 0) return;
  use_device();
  ConvPlan& plan = conv_plan(s);
  void* ws = conv_workspace_.get(plan.fwd_bytes, stream_);
  const float one = 1.0f, zero = 0.0f;
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.fwd_math));
  if (plan.mixed) {
    const int64_t hw = s.h * s.w, khw = s.kh * s.kw, hw_out = s.h_out * s.w_out;
    const std::vector<void*> half = half_buffers({s.n * s.c_in * hw, s.c_out * s.c_in * khw, s.n * s.c_out * hw_out});
    cuda::to_16bit_channels_last(x, s.n, s.c_in, hw, precision_, half[0], stream_);
    cuda::to_16bit_channels_last(w, s.c_out, s.c_in, khw, precision_, half[1], stream_);
    PSHARD_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, plan.x, half[0], plan.w, half[1], plan.conv, plan.fwd_algo,
                                               ws, plan.fwd_bytes, &zero, plan.y, half[2]));
    cuda::from_16bit_channels_last(half[2], s.n, s.c_out, hw_out, precision_, y, stream_);
  } else {
    PSHARD_CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, plan.x, x, plan.w, w, plan.conv, plan.fwd_algo, ws,
                                               plan.fwd_bytes, &zero, plan.y, y));
  }
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
  if (db) cuda::bias_grad(dy, s.n, s.c_out, s.h_out * s.w_out, db, stream_);  // float32 dy in every precision
  if (plan.mixed) {
    conv2d_backward_mixed(s, plan, x, w, dy, dx, dw);
    return;
  }
  // One workspace for both gradients: they run one after the other on the stream.
  const bool gemm_wgrad = wgrad_ == CudaConvWgrad::kGemm;
  const cuda::WgradChunk chunk = gemm_wgrad ? cuda::wgrad_chunk(s, wgrad_workspace_bytes_) : cuda::WgradChunk{};
  void* ws = conv_workspace_.get(std::max(gemm_wgrad ? chunk.bytes() : plan.filter_bytes, plan.data_bytes), stream_);
  if (gemm_wgrad) {
    conv2d_wgrad_gemm(s, chunk, x, dy, dw, static_cast<float*>(ws));
  } else {
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.filter_math));
    PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &one, plan.x, x, plan.y, dy, plan.conv, plan.filter_algo,
                                                      ws, plan.filter_bytes, &zero, plan.w, dw));
  }
  if (dx) {
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.data_math));
    PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &one, plan.w, w, plan.y, dy, plan.conv, plan.data_algo, ws,
                                                    plan.data_bytes, &zero, plan.x, dx));
  }
}

// 16-bit channels-last copies of x, dy (and w when dx is wanted); cuDNN's weight and data gradients into 16-bit
// buffers, widened back into the float32 NCHW dw and dx.
void CudaBackend::conv2d_backward_mixed(const ConvShape& s, ConvPlan& plan, const float* x, const float* w,
                                        const float* dy, float* dx, float* dw) {
  const int64_t hw = s.h * s.w, khw = s.kh * s.kw, hw_out = s.h_out * s.w_out;
  const int64_t nx = s.n * s.c_in * hw, nw = s.c_out * s.c_in * khw, ny = s.n * s.c_out * hw_out;
  // x16, w16, dy16, dx16, dw16
  const std::vector<void*> half = half_buffers({nx, dx ? nw : 0, ny, dx ? nx : 0, nw});
  void* ws = conv_workspace_.get(std::max(plan.filter_bytes, dx ? plan.data_bytes : size_t{0}), stream_);
  const float one = 1.0f, zero = 0.0f;
  cuda::to_16bit_channels_last(x, s.n, s.c_in, hw, precision_, half[0], stream_);
  cuda::to_16bit_channels_last(dy, s.n, s.c_out, hw_out, precision_, half[2], stream_);
  PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.filter_math));
  PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &one, plan.x, half[0], plan.y, half[2], plan.conv,
                                                    plan.filter_algo, ws, plan.filter_bytes, &zero, plan.w, half[4]));
  cuda::from_16bit_channels_last(half[4], s.c_out, s.c_in, khw, precision_, dw, stream_);
  if (dx) {
    cuda::to_16bit_channels_last(w, s.c_out, s.c_in, khw, precision_, half[1], stream_);
    PSHARD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.data_math));
    PSHARD_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &one, plan.w, half[1], plan.y, half[2], plan.conv,
                                                    plan.data_algo, ws, plan.data_bytes, &zero, plan.x, half[3]));
    cuda::from_16bit_channels_last(half[3], s.n, s.c_in, hw, precision_, dx, stream_);
  }
}

}  // namespace pshard::models
