// make_cuda_backend for builds without CUDA: a clear Error instead of a link failure.
#include "models/backend.h"

#ifndef PSHARD_HAVE_CUDA
#include "common/error.h"

namespace pshard::models {

std::unique_ptr<Backend> make_cuda_backend(int device, bool, CudaConvWgrad, size_t, Precision) {
  throw Error("cuda backend (device " + std::to_string(device) +
              ") requested, but pshard was built without CUDA (nvcc was not found at configure time); use "
              "train.device = \"cpu\" or rebuild on a machine with the CUDA toolkit");
}

}  // namespace pshard::models
#endif
