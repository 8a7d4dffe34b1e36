// Which GPU each worker of a host gets: the same rule for `pshard launch` and scheduler tasks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

// The GPUs workers on this host are spread over, as CUDA_VISIBLE_DEVICES values: the entries of
// `cuda_visible_devices` when it is set (nullptr: unset; set and empty: none), else "0".."gpu_count-1".
//
//   host_gpus(nullptr, 2)  -> {"0", "1"}
//   host_gpus("3,5", 8)    -> {"3", "5"}
std::vector<std::string> host_gpus(const char* cuda_visible_devices, int64_t gpu_count);

// The GPU of the worker with index `local_rank` among the workers of its host (round robin); "" when there is none.
std::string gpu_for_local_rank(const std::vector<std::string>& gpus, int64_t local_rank);

// NVIDIA GPUs the driver exposes on this host (/proc/driver/nvidia/gpus has one entry per GPU), without starting
// the CUDA runtime; 0 without the driver.
int64_t count_nvidia_gpus(const std::string& proc_dir = "/proc/driver/nvidia/gpus");

}  // namespace pshard
