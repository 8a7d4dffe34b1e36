// Shared by the dense codecs (none, fp16, bf16): a frame of n fixed-size elements.
#pragma once

#include <cstddef>
#include <string>

#include "common/compression/codec.h"

namespace pshard::compression {

// Ok when `bytes` == n * element_bytes, else a wrongLength naming both sizes.
CheckResult check_dense(const char* name, size_t element_bytes, size_t bytes, size_t n);

}  // namespace pshard::compression
