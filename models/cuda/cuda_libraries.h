// cuBLAS and cuDNN are opened when the first CUDA backend is made (dlopen), not at process start: linked, they cost
// every pshard process (coordinator, servers, CPU workers) ~150 MiB of RSS. cuda_libraries.cc defines the entry points
// the CUDA code calls and forwards them to the loaded libraries.
#pragma once

#include <string>

namespace pshard::models::cuda {

// The sonames opened, from the headers' version macros, so the loaded major is the compiled one: "libcublas.so.13",
// "libcudnn.so.9".
std::string cublas_soname();
std::string cudnn_soname();

// Opens cuBLAS and cuDNN once (thread-safe; a failure is retried on the next call). Throws Error
// "cuda backend: no usable GPU: cannot load libcudnn.so.9: <dlerror> (install cuDNN 9 or put it on LD_LIBRARY_PATH)".
void load_cuda_libraries();

// dlopen of `soname` (the usual search: LD_LIBRARY_PATH, RUNPATH, ld.so.cache), then of `fallback_dir`/`soname` (the
// folder CMake found the library in) when `fallback_dir` is not empty. Throws Error "cannot load <soname>: <dlerror>
// (<hint>)". The handle is never closed.
void* open_library(const std::string& soname, const std::string& fallback_dir, const std::string& hint);

}  // namespace pshard::models::cuda
