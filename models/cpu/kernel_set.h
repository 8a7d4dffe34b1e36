// The CPU operations with two implementations (train.cpu_kernels): oneDNN (onednn.h) and the reference
// (reference_kernels.h). CpuBackend runs every other operation on models/cpu/kernels.h directly.
#pragma once

#include <cstdint>

#include "models/backend.h"

namespace pshard::models::cpu {

// Each method has the semantics of the Backend method of the same name (models/backend.h); the caller has set the
// OpenMP thread count.
class KernelSet {
 public:
  virtual ~KernelSet() = default;

  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) = 0;
  virtual void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) = 0;
  virtual void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, float* db) = 0;
  virtual void maxpool2d_forward(const PoolShape& s, const float* x, float* y) = 0;
  virtual void maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) = 0;
  virtual void avgpool2d_forward(const PoolShape& s, const float* x, float* y) = 0;
  virtual void avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) = 0;
  virtual void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                       const float* beta, float eps, float momentum, float* running_mean,
                                       float* running_var, float* save_mean, float* save_invstd, float* y) = 0;
  virtual void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                      const float* beta, float eps, const float* running_mean, const float* running_var,
                                      float* y) = 0;
  virtual void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                                  const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                                  float* dbeta) = 0;
};

}  // namespace pshard::models::cpu
