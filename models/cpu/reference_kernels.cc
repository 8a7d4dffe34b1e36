// ReferenceKernels: the kernel set on the plain functions of models/cpu/kernels.h.
#include "models/cpu/reference_kernels.h"

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {

void ReferenceKernels::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cpu::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void ReferenceKernels::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  cpu::conv2d_forward(s, x, w, bias, y, arena_(conv2d_workspace_floats(s)));
}
void ReferenceKernels::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                       float* dw, float* db) {
  cpu::conv2d_backward(s, x, w, dy, dx, dw, db, arena_(conv2d_workspace_floats(s)));
}
void ReferenceKernels::maxpool2d_forward(const PoolShape& s, const float* x, float* y) {
  cpu::maxpool2d_forward(s, x, y);
}
void ReferenceKernels::maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy,
                                          float* dx) {
  cpu::maxpool2d_backward(s, x, y, dy, dx);
}
void ReferenceKernels::avgpool2d_forward(const PoolShape& s, const float* x, float* y) {
  cpu::avgpool2d_forward(s, x, y);
}
void ReferenceKernels::avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  cpu::avgpool2d_backward(s, dy, dx);
}
void ReferenceKernels::batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                               const float* beta, float eps, float momentum, float* running_mean,
                                               float* running_var, float* save_mean, float* save_invstd, float* y) {
  cpu::batchnorm_forward_train(n, c, hw, x, gamma, beta, eps, momentum, running_mean, running_var, save_mean,
                               save_invstd, y);
}
void ReferenceKernels::batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                              const float* beta, float eps, const float* running_mean,
                                              const float* running_var, float* y) {
  cpu::batchnorm_forward_eval(n, c, hw, x, gamma, beta, eps, running_mean, running_var, y);
}
void ReferenceKernels::batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy,
                                          const float* gamma, const float* save_mean, const float* save_invstd,
                                          float* dx, float* dgamma, float* dbeta) {
  cpu::batchnorm_backward(n, c, hw, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

}  // namespace pshard::models::cpu
