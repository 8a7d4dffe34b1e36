// The reference implementation of the CPU kernel set (train.cpu_kernels = reference): OpenBLAS GEMM, im2col
// convolution and plain OpenMP loops (models/cpu/kernels.h), what the oneDNN kernels are tested against.
#pragma once

#include <functional>
#include <utility>

#include "models/cpu/kernel_set.h"

namespace pshard::models::cpu {

// `arena` gives the convolution's column buffers (the backend's reused workspace).
//
//   ReferenceKernels ref([&](int64_t floats) { return backend.workspace(floats); });
class ReferenceKernels final : public KernelSet {
 public:
  using Arena = std::function<float*(int64_t floats)>;
  explicit ReferenceKernels(Arena arena) : arena_(std::move(arena)) {}

  PSHARD_KERNEL_SET_OPS(PSHARD_OVERRIDE_OP)

 private:
  Arena arena_;
};

}  // namespace pshard::models::cpu
