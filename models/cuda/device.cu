// Device queries for the CUDA build.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "models/device.h"

namespace pshard::models {
namespace {

// "12.8" from the runtime's encoding 12080.
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why cudaGetDeviceCount found no GPU, in words a user can act on.
std::string no_gpu_reason(cudaError_t err) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (err == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (driver == 0) return "no NVIDIA driver (libcuda.so.1 is not installed or not on the library path)";
    return "the NVIDIA driver is too old: it supports CUDA " + cuda_version_text(driver) + ", this build needs " +
           cuda_version_text(runtime);
  }
  if (err == cudaSuccess || err == cudaErrorNoDevice) {
    if (visible && std::string(visible).find_first_not_of(" ") == std::string::npos) {
      return "CUDA_VISIBLE_DEVICES is set and empty: it hides every GPU";
    }
    if (visible) return "CUDA_VISIBLE_DEVICES='" + std::string(visible) + "' names no GPU the driver has";
    return "the NVIDIA driver finds no CUDA device";
  }
  return std::string("the CUDA runtime cannot start: ") + cudaGetErrorString(err);
}

}  // namespace

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  // No driver or no GPU is a normal answer here (0), not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls are not confused
    return 0;
  }
  return n;
}

std::string describe_cuda_devices() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (err != cudaSuccess || n == 0) return "no usable GPU: " + no_gpu_reason(err);
  std::string out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out += (i ? ", " : "") + std::string("cuda:") + std::to_string(i) + " (" + prop.name + ")";
  }
  return out;
}

}  // namespace pshard::models
