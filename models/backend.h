// The compute backend interface: every layer runs through it (CPU: models/cpu/, CUDA: models/cuda/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/backend_ops.h"
#include "models/precision.h"

namespace pshard::models {

// Geometry of a 2-D convolution over a batch (NCHW input, OIHW weights, square padding and stride).
struct ConvShape {
  int64_t n = 0, c_in = 0, h = 0, w = 0;  // input
  int64_t c_out = 0, kh = 0, kw = 0;      // weights [c_out, c_in, kh, kw]
  int64_t stride = 1, pad = 0;
  int64_t h_out = 0, w_out = 0;  // (h + 2*pad - kh) / stride + 1
  // Fills h_out/w_out; an Error when the kernel does not fit the padded input.
  static ConvShape make(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t k, int64_t stride,
                        int64_t pad);
};

// Geometry of 2-D pooling over a batch: window k x k, stride, zero padding (padded cells never win a max and
// count in an average, as PyTorch's count_include_pad=True).
struct PoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 2, stride = 2, pad = 0;
  int64_t h_out = 0, w_out = 0;
  static PoolShape make(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad);
};

// A device that runs the kernels of forward and backward. All pointers are to memory from allocate() ("device
// memory") unless a parameter says host. Shapes are passed as plain integers so that each CUDA kernel can be tested
// against the CPU reference with the same arguments. Calls are made from one thread at a time.
//
//   auto backend = make_cpu_backend(/*threads=*/2);
//   float* w = static_cast<float*>(backend->allocate(n * sizeof(float)));
//   backend->gemm(false, true, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);   // y = x w^T
class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string describe() const = 0;  // "cpu (oneDNN, 2 threads)"
  virtual bool host_accessible() const = 0;  // memory from allocate() can be read and written by the host
  virtual int threads() const = 0;           // compute threads (CPU); 0 when not meaningful
  virtual void synchronize() {}              // waits until queued work is done

  // ---- memory ----
  virtual void* allocate(size_t bytes) = 0;  // an Error when out of memory
  virtual void deallocate(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(float* dst, const float* src, int64_t n) = 0;
  virtual void fill(float* x, int64_t n, float value) = 0;
  // Scratch of at least `floats` floats, owned by the backend and reused (grown, never shrunk). Valid until the
  // next call of workspace(); layers must not keep it across backend calls.
  virtual float* workspace(int64_t floats) = 0;

  // ---- compute: every operation of models/backend_ops.h, with what it does written there ----
  PSHARD_BACKEND_COMPUTE_OPS(PSHARD_PURE_OP)

  // ---- loss scaling ----
  // x *= factor for every value of every tensor (pointer, count); true when every result is finite (no NaN, no
  // infinity). The unscaling of a step's gradients (worker/trainer/loss_scaler.h): one wait for the device at most.
  virtual bool scale_and_check(const std::vector<std::pair<float*, int64_t>>& tensors, float factor) = 0;

  // ---- activation layout ----
  // Layers hand each other 4-D activations [n, c, h, w] in the backend's layout: NCHW, except where a backend keeps
  // the channels in blocks of B = channel_block(c) > 1, element (b, k, i, j) then at
  // (((b * c / B + k / B) * h + i) * w + j) * B + k % B. The CPU backend's oneDNN kernels keep c % 16 == 0 in blocks
  // of 16 (oneDNN's nChw16c, the layout their convolution and batch norm run in, so that no reorder is needed between
  // layers); in bf16 (models/precision.h) every c in one block of c, which is NHWC (the layout of its AMX kernels).
  // Elementwise operations do not see the difference; the model's edges do, and convert with regroup_channels: Model
  // its NCHW input, Flatten its output.
  virtual int64_t channel_block(int64_t c) const {
    (void)c;
    return 1;
  }
  // y = x [n, c, hw] with its channels regrouped from blocks of `from` to blocks of `to` (1: NCHW); x and y do not
  // overlap. The default copies when from == to and is an Error otherwise (a backend without blocks).
  virtual void regroup_channels(int64_t n, int64_t c, int64_t hw, int64_t from, int64_t to, const float* x, float* y);

  // ---- asynchronous host <-> device transfers (the worker's push/pull path; helpers in models/transfer.h) ----
  // The defaults (models/transfer.cc) are synchronous memcpy through download()/upload() and return ticket 0, which
  // is always complete: right for every host-accessible backend. The CUDA backend overrides them: allocate_host gives
  // pinned memory, copies run on a side stream and a ticket is an event.
  //   begin_download: copies device src to host dst AFTER all work queued so far (e.g. the backward that wrote a
  //                   gradient); dst is valid once wait_transfer(ticket) returns.
  //   begin_upload:   copies host src to device dst; every operation queued after it sees the new values; src must
  //                   stay unchanged until wait_transfer(ticket) returns.
  //   wait_transfer:  blocks until the copy is done; an Error after timeout_s seconds. Waiting for a ticket twice is
  //                   allowed (the second wait returns at once); wait for every ticket once so its event is recycled.
  //   transfer_done:  never blocks: true once the copy is done (the ticket then counts as waited for), false while
  //                   it is in flight.
  //
  //   float* staging = static_cast<float*>(backend.allocate_host(bytes));    // once; reuse every step
  //   TransferTicket t = backend.begin_download(staging, p.grad, bytes);    // in backward's on_grads_ready
  //   backend.wait_transfer(t, 30.0);                                       // then push `staging`
  using TransferTicket = uint64_t;
  virtual void* allocate_host(size_t bytes);  // an Error when out of memory
  virtual void deallocate_host(void* p);
  virtual TransferTicket begin_download(void* host_dst, const void* src, size_t bytes);
  virtual TransferTicket begin_upload(void* dst, const void* host_src, size_t bytes);
  virtual void wait_transfer(TransferTicket ticket, double timeout_s);
  virtual bool transfer_done(TransferTicket ticket);
};

// Which kernels the CPU backend runs for convolution, batch norm, pooling and GEMM (train.cpu_kernels): oneDNN's
// primitives (fast; the library PyTorch uses), or the reference kernels (OpenBLAS GEMM, im2col convolution, plain
// loops) that the tests compare oneDNN against. Everything else (elementwise, losses) runs models/cpu/kernels.h in
// both.
enum class CpuKernels { kOneDnn, kReference };
// "onednn" / "reference"; an Error naming the value otherwise.
CpuKernels cpu_kernels_from_name(const std::string& name);
const char* cpu_kernels_name(CpuKernels kernels);

// The CPU backend (oneDNN or reference convolution, batch norm, pooling and GEMM; OpenMP). threads = 0: one
// per core. Sets both OpenBLAS's and OpenMP's (and so oneDNN's) thread counts. With oneDNN it keeps activations of a
// multiple of 16 channels in blocks of 16 (Backend::channel_block). `precision`: what convolutions and GEMMs read
// (models/precision.h): bf16 and fp16 need the oneDNN kernels (fp16: operands rounded to half, OneDnnKernels).
std::unique_ptr<Backend> make_cpu_backend(int threads, CpuKernels kernels = CpuKernels::kOneDnn,
                                          Precision precision = Precision::kFp32);

// How the CUDA backend computes a convolution's weight gradient (train.cuda_conv_wgrad): im2col of a chunk of samples
// and one cuBLAS SGEMM per chunk (models/cuda/conv_wgrad_gemm.cu), or cuDNN's deterministic direct algorithms. Both
// are deterministic (same inputs, same bits).
enum class CudaConvWgrad { kGemm, kCudnn };
// "gemm" / "cudnn"; an Error naming the value otherwise.
CudaConvWgrad cuda_conv_wgrad_from_name(const std::string& name);
const char* cuda_conv_wgrad_name(CudaConvWgrad wgrad);

// Device memory the GEMM weight gradient's chunk (im2col columns and the rearranged dy) may use: the samples of a
// batch are cut into chunks that fit (one sample per chunk at least, whatever its size).
constexpr size_t kCudaWgradWorkspaceBytes = size_t{256} << 20;

// The CUDA backend on GPU `device` (cuBLAS GEMM, cuDNN convolution, custom kernels, one stream; models/cuda/).
// allow_tf32 = false keeps GEMM and convolution in full FP32 (results match the CPU backend to ~1e-5); true lets
// cuBLAS/cuDNN use TF32 tensor cores (faster on Ampere/Hopper, ~1e-3 relative error). `wgrad` picks the weight
// gradient's algorithm, `wgrad_workspace_bytes` its chunk limit (tests make it small to run several chunks).
// `precision` bf16 or fp16: GEMMs and convolutions on tensor cores, reading 16-bit copies of their operands
// (models/cuda/half.cu; the weight gradient then always runs cuDNN's). An Error when pshard was built without CUDA,
// when no GPU is usable or when `device` does not exist.
//
//   auto gpu = make_cuda_backend(/*device=*/0);
std::unique_ptr<Backend> make_cuda_backend(int device, bool allow_tf32 = false,
                                           CudaConvWgrad wgrad = CudaConvWgrad::kGemm,
                                           size_t wgrad_workspace_bytes = kCudaWgradWorkspaceBytes,
                                           Precision precision = Precision::kFp32);

}  // namespace pshard::models
