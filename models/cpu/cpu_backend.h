// The CPU backend: oneDNN or reference kernels, OpenBLAS GEMM and OpenMP loops (models/cpu/kernels.h, onednn.h).
#pragma once

#include <memory>
#include <string>

#include "models/backend.h"

namespace pshard::models {

namespace cpu {
class KernelSet;
}

// Runs every Backend operation on the host. threads = 0 uses one thread per core; the count is applied to OpenBLAS
// (process-wide) and to OpenMP (re-applied on whichever thread calls the backend), which oneDNN also runs on.
// `kernels` picks oneDNN or the reference for convolution, batch norm, pooling and GEMM (CpuKernels, backend.h).
//
//   CpuBackend cpu(/*threads=*/2);
//   Tensor x(cpu, {64, 784});
//   cpu.fill(x.data(), x.numel(), 0.0f);
class CpuBackend final : public Backend {
 public:
  // block_channels (oneDNN only): activations with a multiple of 16 channels in blocks of 16 (channel_block); false
  // keeps every activation NCHW, for tests that compare single operations with another backend's.
  explicit CpuBackend(int threads = 0, CpuKernels kernels = CpuKernels::kOneDnn, bool block_channels = true);
  ~CpuBackend() override;

  std::string describe() const override;
  bool host_accessible() const override { return true; }
  int threads() const override { return threads_; }
  CpuKernels kernels() const { return kernels_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(float* dst, const float* src, int64_t n) override;
  void fill(float* x, int64_t n, float value) override;
  float* workspace(int64_t floats) override;

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override;
  void axpy(int64_t n, float alpha, const float* x, float* y) override;
  void add(int64_t n, const float* a, const float* b, float* y) override;
  void multiply(int64_t n, const float* a, const float* b, float* y) override;
  void add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner) override;
  void bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db) override;
  void relu_forward(const float* x, float* y, int64_t n) override;
  void relu_backward(const float* y, const float* dy, float* dx, int64_t n) override;
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
  void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
                       uint64_t counter) override;
  void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                            double* loss_sum, int64_t* correct) override;
  void softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes,
                             float* dlogits) override;
  void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum) override;
  void mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred) override;
  int64_t channel_block(int64_t c) const override { return block_channels_ && c % 16 == 0 ? 16 : 1; }
  void regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y) override;
  void shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                            const float* x, float* y) override;
  void shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                             const float* dy, float* dx) override;

 private:
  void use_threads();  // applies threads_ to OpenMP on the calling thread (cheap when already applied)

  int threads_;
  CpuKernels kernels_;
  bool block_channels_;
  std::unique_ptr<cpu::KernelSet> kernel_set_;  // oneDNN or reference: convolution, batch norm, pooling, GEMM
  float* workspace_ = nullptr;
  int64_t workspace_floats_ = 0;
};

}  // namespace pshard::models
