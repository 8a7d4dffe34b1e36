// The CPU backend: oneDNN or reference kernels, OpenBLAS GEMM and OpenMP loops (models/cpu/kernels.h, onednn.h).
#pragma once

#include <memory>
#include <string>

#include "models/backend.h"
#include "models/precision.h"

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
  // block_channels (oneDNN only): activations with a multiple of 16 channels in blocks of 16 (channel_block), or in
  // bf16 all channels in one block (NHWC, the layout of oneDNN's AMX convolutions); false keeps every activation NCHW,
  // for tests that compare single operations with another backend's. precision: what the convolutions and GEMMs read
  // (models/precision.h); bf16 and fp16 need the oneDNN kernels (an Error otherwise).
  explicit CpuBackend(int threads = 0, CpuKernels kernels = CpuKernels::kOneDnn, bool block_channels = true,
                      Precision precision = Precision::kFp32);
  ~CpuBackend() override;

  std::string describe() const override;
  bool host_accessible() const override { return true; }
  int threads() const override { return threads_; }
  CpuKernels kernels() const { return kernels_; }
  Precision precision() const { return precision_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(float* dst, const float* src, int64_t n) override;
  void fill(float* x, int64_t n, float value) override;
  bool scale_and_check(const std::vector<std::pair<float*, int64_t>>& tensors, float factor) override;
  float* workspace(int64_t floats) override;

  PSHARD_BACKEND_COMPUTE_OPS(PSHARD_OVERRIDE_OP)

  int64_t channel_block(int64_t c) const override;
  void regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y) override;

 private:
  void use_threads();  // applies threads_ to OpenMP on the calling thread (cheap when already applied)

  int threads_;
  CpuKernels kernels_;
  bool block_channels_;
  Precision precision_;
  std::unique_ptr<cpu::KernelSet> kernel_set_;  // oneDNN or reference: convolution, batch norm, pooling, GEMM
  float* workspace_ = nullptr;
  int64_t workspace_floats_ = 0;
};

}  // namespace pshard::models
