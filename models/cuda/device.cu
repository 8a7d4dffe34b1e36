// Device queries for the CUDA build.
#include <cuda_runtime.h>

#include <string>

#include "models/device.h"

namespace pshard::models {

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
  int n = cuda_device_count();
  if (n == 0) return "CUDA backend built, no usable GPU";
  std::string out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out += (i ? ", " : "") + std::string("cuda:") + std::to_string(i) + " (" + prop.name + ")";
  }
  return out;
}

}  // namespace pshard::models
