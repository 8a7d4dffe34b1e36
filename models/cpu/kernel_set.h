// The CPU operations with two implementations (train.cpu_kernels): oneDNN (onednn.h) and the reference
// (reference_kernels.h). CpuBackend runs every other operation on models/cpu/kernels.h directly.
#pragma once

#include <cstdint>

#include "models/backend.h"

namespace pshard::models::cpu {

// Each method has the semantics of the Backend operation of the same name (models/backend_ops.h); the caller has set
// the OpenMP thread count.
class KernelSet {
 public:
  virtual ~KernelSet() = default;

  PSHARD_KERNEL_SET_OPS(PSHARD_PURE_OP)
};

}  // namespace pshard::models::cpu
