// Which NVIDIA GPUs a CUDA build can run on: its architecture list against a device's compute capability.
#pragma once

#include <string>

namespace pshard::models {

// Whether code built for `build_archs` (CMake's CUDA_ARCHITECTURES, separated by ';' or ',', e.g.
// "75-real;80-real;90-real;120-virtual"; a plain "86" means both kinds) runs on a GPU of compute capability
// major.minor. Real code for X.Y runs on major X at minor >= Y; PTX (virtual) for X.Y runs on any capability >= X.Y,
// compiled by the driver at first use. Returns "" when some entry fits, else why not, naming the GPU's capability and
// the build's list, and what to do:
//   "this build has no code for compute capability 7.0 (built for 75-real;80-real;...): rebuild with
//    -DCMAKE_CUDA_ARCHITECTURES=70 ..."
std::string cuda_arch_mismatch(int major, int minor, const std::string& build_archs);

// The architectures this build was compiled for, separated by commas; "" without the CUDA backend.
std::string cuda_build_archs();

}  // namespace pshard::models
