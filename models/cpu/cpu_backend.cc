// CpuBackend: forwards each Backend operation to the CPU kernels with the configured thread count.
#include "models/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "models/cpu/kernels.h"
#include "models/cpu/onednn.h"
#include "models/cpu/reference_kernels.h"

namespace pshard::models {
namespace {
// Each OpenMP-using thread remembers the count it last applied.
thread_local int applied_threads = -1;
constexpr size_t kAlignment = 64;
}  // namespace

CpuBackend::CpuBackend(int threads, CpuKernels kernels, bool block_channels, Precision precision)
    : threads_(threads),
      kernels_(kernels),
      block_channels_(block_channels && kernels == CpuKernels::kOneDnn),
      precision_(precision) {
  if (threads < 0) throw Error("cpu backend: train.threads must be >= 0, got " + std::to_string(threads));
  if (precision != Precision::kFp32 && kernels != CpuKernels::kOneDnn) {
    throw Error(std::string("cpu backend: train.precision = ") + precision_name(precision) +
                " needs train.cpu_kernels = onednn (the reference kernels compute in fp32 only)");
  }
  if (precision == Precision::kBf16) {
    const std::string missing = cpu::bf16_kernels_missing();
    if (!missing.empty()) {
      throw Error("cpu backend: train.precision = bf16: " + missing + "; train in fp32 on this machine");
    }
  }
  if (threads_ == 0) threads_ = omp_get_num_procs();
  if (threads_ < 1) threads_ = 1;
  // OpenMP gives a team at most OMP_THREAD_LIMIT threads; oneDNN must not be told to expect more.
  threads_ = std::min(threads_, omp_get_thread_limit());
  // One thread pool, OpenMP's: oneDNN runs on it (Debian builds libdnnl with OpenMP), the reference loops too, and
  // OpenBLAS runs single-threaded with cpu::gemm splitting each GEMM over the OpenMP threads. Two pools (OpenBLAS's
  // pthreads and OpenMP's) spin-wait against each other on the same cores between calls.
  openblas_set_num_threads(1);
  use_threads();
  // Both kernel sets take their temporaries (oneDNN: reordered tensors and scratchpad; reference: im2col columns)
  // from the backend's workspace: one buffer, reused.
  auto arena = [this](int64_t floats) { return workspace(floats); };
  if (kernels_ == CpuKernels::kOneDnn) {
    kernel_set_ = std::make_unique<cpu::OneDnnKernels>(arena, block_channels_, precision_);
  } else {
    kernel_set_ = std::make_unique<cpu::ReferenceKernels>(arena);
  }
}

CpuBackend::~CpuBackend() { std::free(workspace_); }

std::string CpuBackend::describe() const {
  return std::string(kernels_ == CpuKernels::kOneDnn ? "cpu (oneDNN, " : "cpu (reference kernels, OpenBLAS, ") +
         (precision_ == Precision::kFp32 ? "" : std::string(precision_name(precision_)) + " compute, ") +
         std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

void CpuBackend::use_threads() {
  if (applied_threads != threads_) {
    omp_set_num_threads(threads_);
    applied_threads = threads_;
  }
}

void* CpuBackend::allocate(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p) throw Error("cpu backend: out of memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void CpuBackend::deallocate(void* p) { std::free(p); }
void CpuBackend::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy(float* dst, const float* src, int64_t n) {
  if (dst != src) std::memcpy(dst, src, sizeof(float) * n);
}
void CpuBackend::fill(float* x, int64_t n, float value) {
  use_threads();
  cpu::fill(x, n, value);
}

bool CpuBackend::scale_and_check(const std::vector<std::pair<float*, int64_t>>& tensors, float factor) {
  // Integer tests on the bits (exponent all ones: NaN or infinity), so that the loop vectorises.
  uint32_t bad = 0;
  for (const auto& [x, n] : tensors) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i] * factor;
      x[i] = v;
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
  }
  return bad == 0;
}

float* CpuBackend::workspace(int64_t floats) {
  if (floats > workspace_floats_) {
    std::free(workspace_);
    workspace_ = nullptr;
    workspace_floats_ = 0;
    workspace_ = static_cast<float*>(allocate(sizeof(float) * floats));
    workspace_floats_ = floats;
  }
  return workspace_;
}

void CpuBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  use_threads();
  kernel_set_->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CpuBackend::axpy(int64_t n, float alpha, const float* x, float* y) {
  use_threads();
  cpu::axpy(n, alpha, x, y);
}
void CpuBackend::add(int64_t n, const float* a, const float* b, float* y) {
  use_threads();
  cpu::add(n, a, b, y);
}
void CpuBackend::multiply(int64_t n, const float* a, const float* b, float* y) {
  use_threads();
  cpu::multiply(n, a, b, y);
}
void CpuBackend::add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner) {
  use_threads();
  cpu::add_bias(y, bias, outer, channels, inner);
}
void CpuBackend::bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db) {
  use_threads();
  cpu::bias_grad(dy, outer, channels, inner, db);
}
void CpuBackend::relu_forward(const float* x, float* y, int64_t n) {
  use_threads();
  cpu::relu_forward(x, y, n);
}
void CpuBackend::relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  use_threads();
  cpu::relu_backward(y, dy, dx, n);
}
void CpuBackend::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  use_threads();
  kernel_set_->conv2d_forward(s, x, w, bias, y);
}
void CpuBackend::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                 float* dw, float* db) {
  use_threads();
  kernel_set_->conv2d_backward(s, x, w, dy, dx, dw, db);
}
void CpuBackend::maxpool2d_forward(const PoolShape& s, const float* x, float* y) {
  use_threads();
  kernel_set_->maxpool2d_forward(s, x, y);
}
void CpuBackend::maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) {
  use_threads();
  kernel_set_->maxpool2d_backward(s, x, y, dy, dx);
}
void CpuBackend::avgpool2d_forward(const PoolShape& s, const float* x, float* y) {
  use_threads();
  kernel_set_->avgpool2d_forward(s, x, y);
}
void CpuBackend::avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  use_threads();
  kernel_set_->avgpool2d_backward(s, dy, dx);
}
void CpuBackend::batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                         const float* beta, float eps, float momentum, float* running_mean,
                                         float* running_var, float* save_mean, float* save_invstd, float* y) {
  use_threads();
  kernel_set_->batchnorm_forward_train(n, c, hw, x, gamma, beta, eps, momentum, running_mean, running_var, save_mean,
                                       save_invstd, y);
}
void CpuBackend::batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                        const float* beta, float eps, const float* running_mean,
                                        const float* running_var, float* y) {
  use_threads();
  kernel_set_->batchnorm_forward_eval(n, c, hw, x, gamma, beta, eps, running_mean, running_var, y);
}
void CpuBackend::batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy,
                                    const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                                    float* dgamma, float* dbeta) {
  use_threads();
  kernel_set_->batchnorm_backward(n, c, hw, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}
void CpuBackend::dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
                                 uint64_t counter) {
  use_threads();
  cpu::dropout_forward(x, y, mask, n, p, seed, counter);
}
void CpuBackend::softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                                      float* probs, double* loss_sum, int64_t* correct) {
  use_threads();
  cpu::softmax_xent_forward(logits, labels, n, classes, probs, loss_sum, correct);
}
void CpuBackend::softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes,
                                       float* dlogits) {
  use_threads();
  cpu::softmax_xent_backward(probs, labels, n, classes, dlogits);
}
void CpuBackend::mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum) {
  use_threads();
  cpu::mse_forward(pred, target, n, dim, loss_sum);
}
void CpuBackend::mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred) {
  use_threads();
  cpu::mse_backward(pred, target, n, dim, dpred);
}
int64_t CpuBackend::channel_block(int64_t c) const {
  if (!block_channels_) return 1;
  // bf16: NHWC (one block of all c channels; OneDnnKernels::State::activation says why).
  if (precision_ == Precision::kBf16) return c;
  return c % 16 == 0 ? 16 : 1;
}
void CpuBackend::regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x,
                                  float* y) {
  for (int64_t block : {from, to}) {
    if (block != 1 && block != channel_block(c)) {
      throw Error("cpu backend: " + std::to_string(c) + " channels in blocks of " + std::to_string(block) +
                  " is not a layout of this backend");
    }
  }
  use_threads();
  cpu::regroup_channels(n, c, hw, from, to, x, y);
}
void CpuBackend::shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                                      const float* x, float* y) {
  use_threads();
  cpu::shortcut_pad_forward(n, c_in, h, w, stride, c_out, channel_block(c_in), channel_block(c_out), x, y);
}
void CpuBackend::shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                                       const float* dy, float* dx) {
  use_threads();
  cpu::shortcut_pad_backward(n, c_in, h, w, stride, c_out, channel_block(c_in), channel_block(c_out), dy, dx);
}

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuKernels kernels, Precision precision) {
  return std::make_unique<CpuBackend>(threads, kernels, /*block_channels=*/true, precision);
}

}  // namespace pshard::models
