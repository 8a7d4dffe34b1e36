// Which compute devices this process can use.
#pragma once

#include <string>

namespace pshard::models {

// True when pshard was built with the CUDA backend (nvcc was found).
bool cuda_compiled();
// Number of usable CUDA devices; 0 without CUDA support, driver or GPU.
// Never throws: `gpu` tests call it to decide whether to skip.
int cuda_device_count();
// One line for logs: "cuda:0 (NVIDIA H100 ...)", or why there is none: "no usable GPU: no NVIDIA driver (...)",
// "... the NVIDIA driver is too old ...", "... CUDA_VISIBLE_DEVICES is set and empty ...", "... finds no CUDA device".
std::string describe_cuda_devices();

}  // namespace pshard::models
