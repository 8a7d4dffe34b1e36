// CPU-only answers to the device queries; the CUDA build uses cuda/device.cu.
#include "models/device.h"

#ifndef PSHARD_HAVE_CUDA
namespace pshard::models {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string describe_cuda_devices() { return "CUDA backend not built (nvcc was not found at configure time)"; }

}  // namespace pshard::models
#endif
