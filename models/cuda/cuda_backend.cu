// CudaBackend: device memory, streams, cuBLAS GEMM, asynchronous transfers and the launchers of the custom kernels.
#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "common/util/log.h"
#include "models/cuda/check.h"
#include "models/cuda/cuda_backend.h"
#include "models/cuda/cuda_libraries.h"
#include "models/cuda_arch.h"
#include "models/device.h"

namespace pshard::models {
namespace {

int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) {
    throw Error(std::string("cuda backend: ") + what + " = " + std::to_string(v) + " does not fit the 32-bit API");
  }
  return static_cast<int>(v);
}

}  // namespace

// ---- DeviceScratch ----

DeviceScratch::~DeviceScratch() {
  if (data_) cudaFree(data_);  // destructor: nothing to report to
}

void* DeviceScratch::get(size_t bytes, cudaStream_t stream) {
  if (bytes > bytes_ || !data_) {
    if (data_) {
      PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));  // queued kernels may still use the old buffer
      PSHARD_CUDA_CHECK(cudaFree(data_));
      data_ = nullptr;
      bytes_ = 0;
    }
    const size_t want = bytes ? bytes : 256;
    PSHARD_CUDA_CHECK(cudaMalloc(&data_, want));
    bytes_ = want;
  }
  return data_;
}

// ---- lifetime ----

CudaBackend::CudaBackend(int device, bool allow_tf32, CudaConvWgrad wgrad, size_t wgrad_workspace_bytes,
                         Precision precision)
    : device_(device),
      allow_tf32_(allow_tf32),
      precision_(precision),
      wgrad_(precision == Precision::kFp32 ? wgrad : CudaConvWgrad::kCudnn),  // the GEMM one is float32 SGEMM
      wgrad_workspace_bytes_(wgrad_workspace_bytes) {
  try {
    init();
  } catch (...) {
    release();  // a destructor does not run for a constructor that throws: free the handles made so far
    throw;
  }
}

void CudaBackend::init() {
  const int count = cuda_device_count();
  if (count == 0) throw Error("cuda backend: " + describe_cuda_devices());
  if (device_ < 0 || device_ >= count) {
    throw Error("cuda backend: device " + std::to_string(device_) + " does not exist (" + std::to_string(count) +
                " GPU" + (count == 1 ? "" : "s") + ": " + describe_cuda_devices() + ")");
  }
  PSHARD_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  PSHARD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = prop.name;
  // A GPU the build has no code for would fail at the first kernel with "no kernel image": say so now, by name.
  if (const std::string why = cuda_arch_mismatch(prop.major, prop.minor, cuda_build_archs()); !why.empty()) {
    throw Error("cuda backend: device " + std::to_string(device_) + " (" + name_ + "): " + why);
  }
  PSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&transfer_stream_, cudaStreamNonBlocking));
  PSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
  PSHARD_CUBLAS_CHECK(cublasCreate(&cublas_));
  PSHARD_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Full FP32 unless TF32 is allowed: CUBLAS_DEFAULT_MATH never uses TF32 tensor cores.
  PSHARD_CUBLAS_CHECK(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  PSHARD_CUDNN_CHECK(cudnnCreate(&cudnn_));
  PSHARD_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  PSHARD_CUDA_CHECK(cudaMalloc(&totals_, sizeof(cuda::LossTotals)));
  PSHARD_CUDA_CHECK(cudaMallocHost(&totals_host_, sizeof(cuda::LossTotals)));
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() {
  // Destructor (or a failed constructor): errors cannot be reported, the device is released as far as it can be;
  // every handle is null until created.
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (transfer_stream_) cudaStreamSynchronize(transfer_stream_);
  for (auto& [key, plan] : conv_plans_) {
    cudnnDestroyTensorDescriptor(plan.x);
    cudnnDestroyTensorDescriptor(plan.y);
    cudnnDestroyFilterDescriptor(plan.w);
    cudnnDestroyConvolutionDescriptor(plan.conv);
  }
  for (auto& [ticket, ev] : pending_) cudaEventDestroy(ev);
  for (cudaEvent_t ev : spare_events_) cudaEventDestroy(ev);
  if (totals_) cudaFree(totals_);
  if (totals_host_) cudaFreeHost(totals_host_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (compute_mark_) cudaEventDestroy(compute_mark_);
  if (transfer_stream_) cudaStreamDestroy(transfer_stream_);
  if (stream_) cudaStreamDestroy(stream_);
  cudaGetLastError();  // a failed release leaves no error behind for the next backend on this thread
}

std::string CudaBackend::describe() const {
  // The cuDNN that was loaded (pip's libcudnn.so.9 may be newer than the headers built against): 90501 = 9.5.1.
  const size_t v = cudnnGetVersion();
  return "cuda:" + std::to_string(device_) + " (" + name_ + ", cuBLAS, cuDNN " + std::to_string(v / 10000) + "." +
         std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         (precision_ != Precision::kFp32 ? std::string(", ") + precision_name(precision_) + " tensor cores"
          : allow_tf32_                  ? std::string(", TF32")
                                         : std::string(", FP32")) +
         ", wgrad " + cuda_conv_wgrad_name(wgrad_) + ")";
}

void CudaBackend::use_device() const {
  thread_local int current = -1;
  if (current != device_) {
    PSHARD_CUDA_CHECK(cudaSetDevice(device_));
    current = device_;
  }
}

void CudaBackend::synchronize() {
  use_device();
  PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// ---- memory ----

void* CudaBackend::allocate(size_t bytes) {
  use_device();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuda backend: cannot allocate " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device_) +
                ": " + cudaGetErrorString(err));
  }
  return p;
}

void CudaBackend::deallocate(void* p) {
  if (!p) return;
  use_device();
  // Called from tensor destructors: report, never throw. cudaFree waits for work that may still use p.
  const cudaError_t err = cudaFree(p);
  if (err != cudaSuccess) PSHARD_LOG(kError) << "cuda backend: cudaFree failed: " << cudaGetErrorString(err);
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  use_device();
  PSHARD_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // From pageable memory the call returns once the source has been staged; from pinned memory it returns at once,
  // so wait there: upload() promises that the caller may reuse host_src when it returns.
  cudaPointerAttributes attr{};
  PSHARD_CUDA_CHECK(cudaPointerGetAttributes(&attr, host_src));
  if (attr.type == cudaMemoryTypeHost) PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  use_device();
  PSHARD_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(float* dst, const float* src, int64_t n) {
  if (dst == src || n <= 0) return;
  use_device();
  PSHARD_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill(float* x, int64_t n, float value) {
  use_device();
  cuda::fill(x, n, value, stream_);
}

bool CudaBackend::scale_and_check(const std::vector<std::pair<float*, int64_t>>& tensors, float factor) {
  use_device();
  // One flag for all tensors, read back once.
  unsigned* bad = reinterpret_cast<unsigned*>(scratch_doubles(1));
  PSHARD_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(unsigned), stream_));
  for (const auto& [x, n] : tensors) cuda::scale_and_check(x, n, factor, bad, stream_);
  unsigned host_bad = 0;
  PSHARD_CUDA_CHECK(cudaMemcpyAsync(&host_bad, bad, sizeof(unsigned), cudaMemcpyDeviceToHost, stream_));
  PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return host_bad == 0;
}

float* CudaBackend::workspace(int64_t floats) {
  use_device();
  return static_cast<float*>(workspace_.get(sizeof(float) * static_cast<size_t>(floats > 0 ? floats : 1), stream_));
}

std::vector<void*> CudaBackend::half_buffers(std::initializer_list<int64_t> counts) {
  constexpr size_t kAlign = 256;  // cudaMalloc's alignment, which tensor-core kernels want for every operand
  std::vector<size_t> offsets;
  size_t total = 0;
  for (int64_t count : counts) {
    offsets.push_back(total);
    total += (2 * static_cast<size_t>(std::max<int64_t>(count, 0)) + kAlign - 1) / kAlign * kAlign;
  }
  char* base = static_cast<char*>(half_.get(total, stream_));
  std::vector<void*> out;
  for (size_t off : offsets) out.push_back(base + off);
  return out;
}

double* CudaBackend::scratch_doubles(int64_t count) {
  return static_cast<double*>(scratch_.get(sizeof(double) * static_cast<size_t>(count > 0 ? count : 1), stream_));
}

// ---- BLAS ----

void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  use_device();
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the flags.
  if (precision_ != Precision::kFp32 && k > 0) {
    // Tensor cores: 16-bit copies of A and B (each stored matrix whole, its leading dimension kept), float32
    // accumulation and a float32 C, so beta * C keeps C's bits.
    const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k,
                  b_cols = trans_b ? k : n;
    const int64_t a_count = (a_rows - 1) * lda + a_cols, b_count = (b_rows - 1) * ldb + b_cols;
    const std::vector<void*> half = half_buffers({a_count, b_count});
    cuda::to_16bit(a, a_count, precision_, half[0], stream_);
    cuda::to_16bit(b, b_count, precision_, half[1], stream_);
    const cudaDataType type = precision_ == Precision::kFp16 ? CUDA_R_16F : CUDA_R_16BF;
    PSHARD_CUBLAS_CHECK(cublasGemmEx(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     checked_int(n, "gemm n"), checked_int(m, "gemm m"), checked_int(k, "gemm k"),
                                     &alpha, half[1], type, checked_int(ldb, "gemm ldb"), half[0], type,
                                     checked_int(lda, "gemm lda"), &beta, c, CUDA_R_32F, checked_int(ldc, "gemm ldc"),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  PSHARD_CUBLAS_CHECK(cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  checked_int(n, "gemm n"), checked_int(m, "gemm m"), checked_int(k, "gemm k"), &alpha,
                                  b, checked_int(ldb, "gemm ldb"), a, checked_int(lda, "gemm lda"), &beta, c,
                                  checked_int(ldc, "gemm ldc")));
}

void CudaBackend::axpy(int64_t n, float alpha, const float* x, float* y) {
  use_device();
  cuda::axpy(n, alpha, x, y, stream_);
}
void CudaBackend::add(int64_t n, const float* a, const float* b, float* y) {
  use_device();
  cuda::add(n, a, b, y, stream_);
}
void CudaBackend::multiply(int64_t n, const float* a, const float* b, float* y) {
  use_device();
  cuda::multiply(n, a, b, y, stream_);
}

// ---- bias, activation, dropout, shortcut ----

void CudaBackend::add_bias(float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner) {
  use_device();
  cuda::add_bias(y, bias, outer, channels, inner, stream_);
}
void CudaBackend::bias_grad(const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db) {
  use_device();
  cuda::bias_grad(dy, outer, channels, inner, db, stream_);
}
void CudaBackend::relu_forward(const float* x, float* y, int64_t n) {
  use_device();
  cuda::relu_forward(x, y, n, stream_);
}
void CudaBackend::relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  use_device();
  cuda::relu_backward(y, dy, dx, n, stream_);
}
void CudaBackend::dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
                                  uint64_t counter) {
  use_device();
  cuda::dropout_forward(x, y, mask, n, p, seed, counter, stream_);
}
void CudaBackend::shortcut_pad_forward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                                       const float* x, float* y) {
  use_device();
  cuda::shortcut_pad_forward(n, c_in, h, w, stride, c_out, x, y, stream_);
}
void CudaBackend::shortcut_pad_backward(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out,
                                        const float* dy, float* dx) {
  use_device();
  cuda::shortcut_pad_backward(n, c_in, h, w, stride, c_out, dy, dx, stream_);
}

// ---- pooling ----

void CudaBackend::maxpool2d_forward(const PoolShape& s, const float* x, float* y) {
  use_device();
  cuda::maxpool2d_forward(s, x, y, stream_);
}
void CudaBackend::maxpool2d_backward(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) {
  use_device();
  cuda::maxpool2d_backward(s, x, y, dy, dx, stream_);
}
void CudaBackend::avgpool2d_forward(const PoolShape& s, const float* x, float* y) {
  use_device();
  cuda::avgpool2d_forward(s, x, y, stream_);
}
void CudaBackend::avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  use_device();
  cuda::avgpool2d_backward(s, dy, dx, stream_);
}

// ---- batch normalisation ----

void CudaBackend::batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                          const float* beta, float eps, float momentum, float* running_mean,
                                          float* running_var, float* save_mean, float* save_invstd, float* y) {
  use_device();
  double* scratch = scratch_doubles(cuda::batchnorm_scratch_doubles(n, c));
  cuda::batchnorm_forward_train(n, c, hw, x, gamma, beta, eps, momentum, running_mean, running_var, save_mean,
                                save_invstd, y, scratch, stream_);
}
void CudaBackend::batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                         const float* beta, float eps, const float* running_mean,
                                         const float* running_var, float* y) {
  use_device();
  double* scratch = scratch_doubles(cuda::batchnorm_scratch_doubles(n, c));
  cuda::batchnorm_forward_eval(n, c, hw, x, gamma, beta, eps, running_mean, running_var, y, scratch, stream_);
}
void CudaBackend::batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy,
                                     const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                                     float* dgamma, float* dbeta) {
  use_device();
  double* scratch = scratch_doubles(cuda::batchnorm_scratch_doubles(n, c));
  cuda::batchnorm_backward(n, c, hw, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, scratch, stream_);
}

// ---- losses ----

cuda::LossTotals CudaBackend::read_totals() {
  PSHARD_CUDA_CHECK(cudaMemcpyAsync(totals_host_, totals_, sizeof(cuda::LossTotals), cudaMemcpyDeviceToHost, stream_));
  PSHARD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *totals_host_;
}

void CudaBackend::softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                                       float* probs, double* loss_sum, int64_t* correct) {
  use_device();
  cuda::softmax_xent_forward(logits, labels, n, classes, probs, scratch_doubles(cuda::loss_scratch_doubles(n)), totals_,
                             stream_);
  const cuda::LossTotals t = read_totals();
  if (t.first_bad < n) {
    int32_t label = 0;
    download(&label, labels + t.first_bad, sizeof(label));
    throw Error("softmax cross-entropy: label " + std::to_string(label) + " of sample " + std::to_string(t.first_bad) +
                " is outside [0, " + std::to_string(classes) + ")");
  }
  *loss_sum = t.loss_sum;
  *correct = t.correct;
}

void CudaBackend::softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes,
                                        float* dlogits) {
  use_device();
  cuda::softmax_xent_backward(probs, labels, n, classes, dlogits, stream_);
}

void CudaBackend::mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum) {
  use_device();
  cuda::mse_forward(pred, target, n, dim, scratch_doubles(cuda::loss_scratch_doubles(n)), totals_, stream_);
  *loss_sum = read_totals().loss_sum;
}

void CudaBackend::mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred) {
  use_device();
  cuda::mse_backward(pred, target, n, dim, dpred, stream_);
}

// ---- asynchronous transfers ----

void* CudaBackend::allocate_host(size_t bytes) {
  use_device();
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, bytes ? bytes : 256);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuda backend: cannot allocate " + std::to_string(bytes) +
                " bytes of pinned host memory: " + cudaGetErrorString(err));
  }
  return p;
}

void CudaBackend::deallocate_host(void* p) {
  if (!p) return;
  const cudaError_t err = cudaFreeHost(p);
  if (err != cudaSuccess) PSHARD_LOG(kError) << "cuda backend: cudaFreeHost failed: " << cudaGetErrorString(err);
}

Backend::TransferTicket CudaBackend::record_transfer() {
  cudaEvent_t ev = nullptr;
  if (spare_events_.empty()) {
    PSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  } else {
    ev = spare_events_.back();
    spare_events_.pop_back();
  }
  PSHARD_CUDA_CHECK(cudaEventRecord(ev, transfer_stream_));
  const TransferTicket ticket = next_ticket_++;
  pending_.emplace(ticket, ev);
  return ticket;
}

Backend::TransferTicket CudaBackend::begin_download(void* host_dst, const void* src, size_t bytes) {
  use_device();
  // The transfer stream starts after everything queued on the compute stream (the backward that wrote src).
  PSHARD_CUDA_CHECK(cudaEventRecord(compute_mark_, stream_));
  PSHARD_CUDA_CHECK(cudaStreamWaitEvent(transfer_stream_, compute_mark_, 0));
  if (bytes > 0) {
    PSHARD_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, transfer_stream_));
  }
  return record_transfer();
}

Backend::TransferTicket CudaBackend::begin_upload(void* dst, const void* host_src, size_t bytes) {
  use_device();
  // Overwrite dst only after queued compute that still reads its old values, and make later compute wait for it.
  PSHARD_CUDA_CHECK(cudaEventRecord(compute_mark_, stream_));
  PSHARD_CUDA_CHECK(cudaStreamWaitEvent(transfer_stream_, compute_mark_, 0));
  if (bytes > 0) {
    PSHARD_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, transfer_stream_));
  }
  const TransferTicket ticket = record_transfer();
  PSHARD_CUDA_CHECK(cudaStreamWaitEvent(stream_, pending_.at(ticket), 0));
  return ticket;
}

void CudaBackend::wait_transfer(TransferTicket ticket, double timeout_s) {
  if (ticket == 0) return;
  auto it = pending_.find(ticket);
  if (it == pending_.end()) {
    if (ticket < next_ticket_) return;  // waited for before
    throw Error("cuda backend: wait_transfer: unknown transfer ticket " + std::to_string(ticket));
  }
  use_device();
  // A transfer of a training step ends within microseconds to a millisecond: the host spins (yielding) for the
  // first 2 ms, since a sleep costs the timer slack (~50 us) each time, and sleeps 50 us, growing to 1 ms, after.
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = start + std::chrono::milliseconds(2);
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(50);
  while (true) {
    const cudaError_t st = cudaEventQuery(it->second);
    if (st == cudaSuccess) break;
    if (st != cudaErrorNotReady) PSHARD_CUDA_CHECK(st);
    // "Not ready" is an answer, not a failure, but the runtime keeps it as the thread's last error: left there, the
    // next kernel launch check (cudaGetLastError) would throw it. PyTorch and Caffe2 clear it the same way.
    cudaGetLastError();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      throw Error("cuda backend: transfer " + std::to_string(ticket) + " on cuda:" + std::to_string(device_) +
                  " not finished after " + std::to_string(timeout_s) + " s");
    }
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(1)) pause *= 2;
  }
  spare_events_.push_back(it->second);
  pending_.erase(it);
}

bool CudaBackend::transfer_done(TransferTicket ticket) {
  if (ticket == 0) return true;
  auto it = pending_.find(ticket);
  if (it == pending_.end()) {
    if (ticket < next_ticket_) return true;  // waited for before
    throw Error("cuda backend: transfer_done: unknown transfer ticket " + std::to_string(ticket));
  }
  use_device();
  const cudaError_t st = cudaEventQuery(it->second);
  if (st == cudaErrorNotReady) {
    cudaGetLastError();  // an answer, not a failure (see wait_transfer)
    return false;
  }
  PSHARD_CUDA_CHECK(st);
  spare_events_.push_back(it->second);
  pending_.erase(it);
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(int device, bool allow_tf32, CudaConvWgrad wgrad,
                                           size_t wgrad_workspace_bytes, Precision precision) {
  cuda::load_cuda_libraries();  // cuBLAS and cuDNN are opened here, not at process start (cuda_libraries.h)
  return std::make_unique<CudaBackend>(device, allow_tf32, wgrad, wgrad_workspace_bytes, precision);
}

}  // namespace pshard::models
