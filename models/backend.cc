// Shape helpers of the backend interface (validated geometry of convolution and pooling).
#include "models/backend.h"

#include "common/error.h"

namespace pshard::models {

ConvShape ConvShape::make(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t k, int64_t stride,
                          int64_t pad) {
  if (n < 0 || c_in <= 0 || h <= 0 || w <= 0 || c_out <= 0 || k <= 0 || stride <= 0 || pad < 0) {
    throw Error("conv2d: invalid geometry (n " + std::to_string(n) + ", c_in " + std::to_string(c_in) + ", " +
                std::to_string(h) + "x" + std::to_string(w) + ", c_out " + std::to_string(c_out) + ", kernel " +
                std::to_string(k) + ", stride " + std::to_string(stride) + ", padding " + std::to_string(pad) + ")");
  }
  if (h + 2 * pad < k || w + 2 * pad < k) {
    throw Error("conv2d: kernel " + std::to_string(k) + "x" + std::to_string(k) + " does not fit an input of " +
                std::to_string(h) + "x" + std::to_string(w) + " with padding " + std::to_string(pad));
  }
  ConvShape s;
  s.n = n, s.c_in = c_in, s.h = h, s.w = w, s.c_out = c_out, s.kh = k, s.kw = k, s.stride = stride, s.pad = pad;
  s.h_out = (h + 2 * pad - k) / stride + 1;
  s.w_out = (w + 2 * pad - k) / stride + 1;
  return s;
}

void Backend::regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y) {
  if (from != to) {
    throw Error(describe() + ": regrouping " + std::to_string(c) + " channels from blocks of " + std::to_string(from) +
                " to " + std::to_string(to) + ", but this backend keeps every activation NCHW");
  }
  copy(y, x, n * c * hw);
}

CpuKernels cpu_kernels_from_name(const std::string& name) {
  if (name == "onednn") return CpuKernels::kOneDnn;
  if (name == "reference") return CpuKernels::kReference;
  throw Error("cpu kernels must be onednn or reference, got '" + name + "'");
}

const char* cpu_kernels_name(CpuKernels kernels) { return kernels == CpuKernels::kOneDnn ? "onednn" : "reference"; }

CudaConvWgrad cuda_conv_wgrad_from_name(const std::string& name) {
  if (name == "gemm") return CudaConvWgrad::kGemm;
  if (name == "cudnn") return CudaConvWgrad::kCudnn;
  throw Error("cuda conv weight gradient must be gemm or cudnn, got '" + name + "'");
}

const char* cuda_conv_wgrad_name(CudaConvWgrad wgrad) { return wgrad == CudaConvWgrad::kGemm ? "gemm" : "cudnn"; }

PoolShape PoolShape::make(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad) {
  if (n < 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || stride <= 0 || pad < 0 || 2 * pad > k) {
    throw Error("pool2d: invalid geometry (c " + std::to_string(c) + ", " + std::to_string(h) + "x" +
                std::to_string(w) + ", kernel " + std::to_string(k) + ", stride " + std::to_string(stride) +
                ", padding " + std::to_string(pad) + "; padding may be at most half the kernel)");
  }
  if (h + 2 * pad < k || w + 2 * pad < k) {
    throw Error("pool2d: window " + std::to_string(k) + "x" + std::to_string(k) + " does not fit an input of " +
                std::to_string(h) + "x" + std::to_string(w));
  }
  PoolShape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.stride = stride, s.pad = pad;
  s.h_out = (h + 2 * pad - k) / stride + 1;
  s.w_out = (w + 2 * pad - k) / stride + 1;
  return s;
}

}  // namespace pshard::models
