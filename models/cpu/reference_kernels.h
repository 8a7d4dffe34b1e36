// The reference implementation of the CPU kernel set (train.cpu_kernels = reference): OpenBLAS GEMM, im2col
// convolution and plain OpenMP loops (models/cpu/kernels.h), what the oneDNN kernels are tested against.
#pragma once

#include <functional>
#include <utility>

#include "models/cpu/kernel_set.h"

namespace pshard::models::cpu {

// `arena` gives the convolution's column buffers (the backend's reused workspace).
//
//   ReferenceKernels ref([&](int64_t floats) { return backend.workspace(floats); });
class ReferenceKernels final : public KernelSet {
 public:
  using Arena = std::function<float*(int64_t floats)>;
  explicit ReferenceKernels(Arena arena) : arena_(std::move(arena)) {}

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override;
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) override;
  void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw,
                       float* db) override;
  void maxpool2d_forward(const PoolShape& s, const float* x, float* y) override;
  void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override;
  void avgpool2d_forward(const PoolShape& s, const float* x, float* y) override;
  void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) override;
  void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                               float eps, float momentum, float* running_mean, float* running_var, float* save_mean,
                               float* save_invstd, float* y) override;
  void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                              float eps, const float* running_mean, const float* running_var, float* y) override;
  void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                          const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                          float* dbeta) override;

 private:
  Arena arena_;
};

}  // namespace pshard::models::cpu
