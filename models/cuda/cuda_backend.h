// The CUDA backend: cuBLAS GEMM, cuDNN convolution, custom kernels, one compute stream and one transfer stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/backend.h"
#include "models/cuda/kernels.h"

namespace pshard::models {

// Device memory grown on demand and reused (never shrunk); growing waits for the stream that uses it.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* get(size_t bytes, cudaStream_t stream);
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Descriptors and chosen algorithms of one convolution geometry (conv_cudnn.cu), cached per ConvShape.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  cudnnMathType_t fwd_math = CUDNN_FMA_MATH, data_math = CUDNN_FMA_MATH, filter_math = CUDNN_FMA_MATH;
  size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  // The descriptors are 16-bit channels-last (the backend's precision, bf16 or fp16): the convolution reads copies of
  // its operands rounded to that type and its outputs are widened back. False for fp32, and for a geometry cuDNN has
  // no 16-bit algorithm for (it then runs in float32 NCHW, as the fp32 backend does).
  bool mixed = false;
};

// Every Backend operation on one GPU. With precision bf16 or fp16, GEMMs and convolutions run on tensor cores: they
// read 16-bit copies of their float32 operands (convolutions channels-last), accumulate in float32 and write float32
// (GEMMs directly; convolutions through a 16-bit output that is widened); everything else stays float32. Work is queued
// on one stream; calls return without waiting except those that hand results to the host (download, loss forwards,
// synchronize). Gradient downloads and weight uploads of begin_download/begin_upload run on a second stream, ordered
// against compute with events.
//
//   auto gpu = make_cuda_backend(0);
//   float* x = static_cast<float*>(gpu->allocate(bytes));
//   gpu->upload(x, host, bytes);
class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool allow_tf32, CudaConvWgrad wgrad = CudaConvWgrad::kGemm,
              size_t wgrad_workspace_bytes = kCudaWgradWorkspaceBytes, Precision precision = Precision::kFp32);
  ~CudaBackend() override;

  std::string describe() const override;
  bool host_accessible() const override { return false; }
  int threads() const override { return 0; }
  void synchronize() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(float* dst, const float* src, int64_t n) override;
  void fill(float* x, int64_t n, float value) override;
  bool scale_and_check(const std::vector<std::pair<float*, int64_t>>& tensors, float factor) override;
  float* workspace(int64_t floats) override;

  PSHARD_BACKEND_COMPUTE_OPS(PSHARD_OVERRIDE_OP)

  // Whether convolutions of this geometry run in the backend's 16-bit precision (false for fp32, and where cuDNN
  // offers no 16-bit algorithm: they then run in float32). Plans the geometry if it was not yet.
  bool convolution_runs_16bit(const ConvShape& s);

  void* allocate_host(size_t bytes) override;
  void deallocate_host(void* p) override;
  TransferTicket begin_download(void* host_dst, const void* src, size_t bytes) override;
  TransferTicket begin_upload(void* dst, const void* host_src, size_t bytes) override;
  void wait_transfer(TransferTicket ticket, double timeout_s) override;
  bool transfer_done(TransferTicket ticket) override;

 private:
  using ConvKey = std::array<int64_t, 9>;
  void init();                              // the constructor's work: device, streams, handles, loss buffers
  void release();                           // frees whatever init() made (null members are skipped)
  void use_device() const;                  // makes device_ current on the calling thread
  double* scratch_doubles(int64_t count);   // internal reductions (not the layers' workspace())
  cuda::LossTotals read_totals();           // waits for the stream, copies the totals of the last loss forward
  ConvPlan& conv_plan(const ConvShape& s);  // conv_cudnn.cu
  // Fills plan's descriptors and algorithms for s in 16-bit channels-last (mixed) or float32 NCHW; false when no
  // algorithm qualifies for one of the three passes.
  bool plan_convolution(const ConvShape& s, bool mixed, ConvPlan& plan);
  void conv2d_backward_mixed(const ConvShape& s, ConvPlan& plan, const float* x, const float* w, const float* dy,
                             float* dx, float* dw);
  // Device memory for the 16-bit copies of one operation's operands: `count` buffers of the given element counts,
  // each 256-byte aligned, in one reused allocation.
  std::vector<void*> half_buffers(std::initializer_list<int64_t> counts);
  // dw of a convolution by im2col + cuBLAS SGEMM, chunk by chunk in `ws` (chunk.bytes(); conv_wgrad_gemm.cu).
  void conv2d_wgrad_gemm(const ConvShape& s, const cuda::WgradChunk& chunk, const float* x, const float* dy, float* dw,
                         float* ws);
  TransferTicket record_transfer();  // an event on the transfer stream, as a ticket

  int device_;
  bool allow_tf32_;
  Precision precision_;  // what convolutions and GEMMs read (models/precision.h)
  CudaConvWgrad wgrad_;
  size_t wgrad_workspace_bytes_;
  std::string name_;
  cudaStream_t stream_ = nullptr, transfer_stream_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr;  // re-recorded to order the transfer stream after queued compute
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceScratch workspace_, conv_workspace_, scratch_, half_;
  cuda::LossTotals* totals_ = nullptr;       // device
  cuda::LossTotals* totals_host_ = nullptr;  // pinned
  std::map<ConvKey, ConvPlan> conv_plans_;
  std::unordered_map<TransferTicket, cudaEvent_t> pending_;
  std::vector<cudaEvent_t> spare_events_;
  TransferTicket next_ticket_ = 1;
};

}  // namespace pshard::models
