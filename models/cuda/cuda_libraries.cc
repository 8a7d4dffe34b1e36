// cuBLAS and cuDNN are opened when the first CUDA backend is made: this file defines the cuBLAS/cuDNN entry points the
// CUDA code calls (the exported names, with the headers' own declarations) and forwards each to the library opened by
// load_cuda_libraries(), so the executable has no DT_NEEDED on them (see cuda_libraries.h).
#ifdef PSHARD_HAVE_CUDA
#include "models/cuda/cuda_libraries.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>

#include "common/error.h"

// Folders CMake found the libraries in (models/CMakeLists.txt), tried after the soname so that a build finds what it
// was configured with without LD_LIBRARY_PATH.
#ifndef PSHARD_CUBLAS_DIR
#define PSHARD_CUBLAS_DIR ""
#endif
#ifndef PSHARD_CUDNN_DIR
#define PSHARD_CUDNN_DIR ""
#endif

// The sonames as string literals (not built at run time): scripts/gpu-bundle.sh reads them out of the executable to
// say which libraries the GPU machine must provide (gnu::used: kept in .rodata even where the uses are inlined).
#define PSHARD_STRINGIFY2(x) #x
#define PSHARD_STRINGIFY(x) PSHARD_STRINGIFY2(x)

namespace pshard::models::cuda {
namespace {

[[gnu::used]] constexpr char kCublasSoname[] = "libcublas.so." PSHARD_STRINGIFY(CUBLAS_VER_MAJOR);
[[gnu::used]] constexpr char kCudnnSoname[] = "libcudnn.so." PSHARD_STRINGIFY(CUDNN_MAJOR);

struct Handles {
  void* cublas = nullptr;
  void* cudnn = nullptr;
};

// Function-local static: opened once, thread-safe; an exception leaves it unopened, so the next call tries again.
const Handles& handles() {
  static const Handles h = [] {
    Handles out;
    out.cublas = open_library(cublas_soname(), PSHARD_CUBLAS_DIR,
                              "install cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + " or put it on LD_LIBRARY_PATH");
    out.cudnn = open_library(cudnn_soname(), PSHARD_CUDNN_DIR,
                             "install cuDNN " + std::to_string(CUDNN_MAJOR) + " or put it on LD_LIBRARY_PATH");
    return out;
  }();
  return h;
}

enum class Library { kCublas, kCudnn };

// The address of `name` in a loaded library. Reached only after make_cuda_backend loaded them; a symbol missing from
// a library of the right major is still an Error, not a crash.
void* symbol(Library lib, const char* name) {
  const Handles& h = handles();
  void* handle = lib == Library::kCublas ? h.cublas : h.cudnn;
  dlerror();
  void* fn = dlsym(handle, name);
  if (!fn) {
    const char* why = dlerror();
    throw Error(std::string("cuda backend: ") + (lib == Library::kCublas ? cublas_soname() : cudnn_soname()) +
                " has no " + name + ": " + (why ? why : "null symbol"));
  }
  return fn;
}

}  // namespace

std::string cublas_soname() { return kCublasSoname; }
std::string cudnn_soname() { return kCudnnSoname; }

void* open_library(const std::string& soname, const std::string& fallback_dir, const std::string& hint) {
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle) return handle;
  const char* first = dlerror();
  std::string why = first ? first : "not found";
  if (!fallback_dir.empty()) {
    const std::string path = fallback_dir + "/" + soname;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) return handle;
    const char* second = dlerror();
    const std::string again = second ? second : path + ": not found";
    if (again != why) why += "; " + again;  // the soname may have found the same broken file
  }
  throw Error("cannot load " + soname + ": " + why + " (" + hint + ")");
}

void load_cuda_libraries() {
  try {
    handles();
  } catch (const Error& e) {
    throw Error(std::string("cuda backend: no usable GPU: ") + e.what());
  }
}

}  // namespace pshard::models::cuda

using pshard::models::cuda::Library;

// One forwarding definition: the signature as the header declares it, the library's function resolved on first use.
#define PSHARD_FORWARD(lib, ret, name, params, args)                                              \
  ret name params {                                                                               \
    using Fn = ret(*) params;                                                                     \
    static const Fn fn = reinterpret_cast<Fn>(pshard::models::cuda::symbol(Library::lib, #name)); \
    return fn args;                                                                               \
  }

// clang-format off
extern "C" {

// ---- cuBLAS (cublas_v2.h maps cublasCreate to cublasCreate_v2, and so on) ----
PSHARD_FORWARD(kCublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t* handle), (handle))
PSHARD_FORWARD(kCublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
PSHARD_FORWARD(kCublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
PSHARD_FORWARD(kCublas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId),
               (handle, streamId))
PSHARD_FORWARD(kCublas, cublasStatus_t, cublasSgemm_v2,
               (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
                int ldc),
               (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))

PSHARD_FORWARD(kCublas, cublasStatus_t, cublasGemmEx,
               (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                cublasGemmAlgo_t algo),
               (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                computeType, algo))

// ---- cuDNN: handles and errors ----
PSHARD_FORWARD(kCudnn, size_t, cudnnGetVersion, (void), ())
PSHARD_FORWARD(kCudnn, const char*, cudnnGetErrorString, (cudnnStatus_t status), (status))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t* handle), (handle))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t streamId),
               (handle, streamId))

// ---- cuDNN: descriptors ----
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t* tensorDesc),
               (tensorDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t tensorDesc),
               (tensorDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnSetTensor4dDescriptor,
               (cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format, cudnnDataType_t dataType, int n,
                int c, int h, int w),
               (tensorDesc, format, dataType, n, c, h, w))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t* filterDesc),
               (filterDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t filterDesc),
               (filterDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnSetFilter4dDescriptor,
               (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType, cudnnTensorFormat_t format, int k,
                int c, int h, int w),
               (filterDesc, dataType, format, k, c, h, w))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t* convDesc),
               (convDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t convDesc),
               (convDesc))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnSetConvolution2dDescriptor,
               (cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u, int v, int dilation_h,
                int dilation_w, cudnnConvolutionMode_t mode, cudnnDataType_t computeType),
               (convDesc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnSetConvolutionMathType,
               (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType), (convDesc, mathType))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolution2dForwardOutputDim,
               (const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t inputTensorDesc,
                const cudnnFilterDescriptor_t filterDesc, int* n, int* c, int* h, int* w),
               (convDesc, inputTensorDesc, filterDesc, n, c, h, w))

// ---- cuDNN: convolution algorithms and workspaces ----
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7,
               (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc,
                const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults),
               (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
               (cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc, const cudnnTensorDescriptor_t diffDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t gradDesc,
                const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t* perfResults),
               (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
               (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
                const int requestedAlgoCount, int* returnedAlgoCount,
                cudnnConvolutionBwdFilterAlgoPerf_t* perfResults),
               (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize,
               (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
                cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes),
               (handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataWorkspaceSize,
               (cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
                cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes),
               (handle, wDesc, dyDesc, convDesc, dxDesc, algo, sizeInBytes))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterWorkspaceSize,
               (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
                const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
                cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes),
               (handle, xDesc, dyDesc, convDesc, gradDesc, algo, sizeInBytes))

// ---- cuDNN: convolution ----
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionForward,
               (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
                const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
                cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                const cudnnTensorDescriptor_t yDesc, void* y),
               (handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, yDesc, y))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardData,
               (cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc, const void* w,
                const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
                cudnnConvolutionBwdDataAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                const cudnnTensorDescriptor_t dxDesc, void* dx),
               (handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dxDesc,
                dx))
PSHARD_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardFilter,
               (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
                const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
                cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                const cudnnFilterDescriptor_t dwDesc, void* dw),
               (handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dwDesc,
                dw))

}  // extern "C"
// clang-format on

#undef PSHARD_FORWARD
#endif  // PSHARD_HAVE_CUDA
