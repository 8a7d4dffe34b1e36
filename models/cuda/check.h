// Checked CUDA, cuBLAS and cuDNN calls: a failure throws pshard::Error naming the call, the file and the line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "common/error.h"

namespace pshard::models::cuda {

// "cuda: cudaMalloc(&p, bytes) failed at models/cuda/cuda_backend.cu:42: out of memory"
[[noreturn]] inline void throw_call_error(const char* lib, const char* call, const char* file, int line,
                                          const std::string& why) {
  throw Error(std::string(lib) + ": " + call + " failed at " + file + ":" + std::to_string(line) + ": " + why);
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown cuBLAS status";
  }
}

}  // namespace pshard::models::cuda

// Wrap every runtime, cuBLAS and cuDNN call (llm.c style); kernel launches are followed by PSHARD_CUDA_CHECK_LAUNCH().
#define PSHARD_CUDA_CHECK(call)                                                                                     \
  do {                                                                                                              \
    cudaError_t pshard_err_ = (call);                                                                               \
    if (pshard_err_ != cudaSuccess) {                                                                               \
      ::pshard::models::cuda::throw_call_error("cuda", #call, __FILE__, __LINE__, cudaGetErrorString(pshard_err_)); \
    }                                                                                                               \
  } while (0)

#define PSHARD_CUDA_CHECK_LAUNCH() PSHARD_CUDA_CHECK(cudaGetLastError())

#define PSHARD_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                  \
    cublasStatus_t pshard_st_ = (call);                                                                 \
    if (pshard_st_ != CUBLAS_STATUS_SUCCESS) {                                                          \
      ::pshard::models::cuda::throw_call_error("cublas", #call, __FILE__, __LINE__,                     \
                                               ::pshard::models::cuda::cublas_status_name(pshard_st_)); \
    }                                                                                                   \
  } while (0)

#define PSHARD_CUDNN_CHECK(call)                                                                                     \
  do {                                                                                                               \
    cudnnStatus_t pshard_st_ = (call);                                                                               \
    if (pshard_st_ != CUDNN_STATUS_SUCCESS) {                                                                        \
      ::pshard::models::cuda::throw_call_error("cudnn", #call, __FILE__, __LINE__, cudnnGetErrorString(pshard_st_)); \
    }                                                                                                                \
  } while (0)
