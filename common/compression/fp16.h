// IEEE half precision for compute that reads fp16 operands (train.precision = fp16 on a CPU without fp16 kernels).
#pragma once

#include <cstddef>

namespace pshard::compression {

// x[i] = the float of the nearest half of x[i] (round to nearest even; beyond 65504 infinity, below 2^-25 zero):
// what a kernel reading fp16 operands sees. The same conversion as the fp16 codec (make_fp16_codec).
void round_to_fp16(float* x, size_t n);

}  // namespace pshard::compression
