// The arithmetic precision of a worker's compute (train.precision): what its convolutions and GEMMs read.
#pragma once

#include <string>

namespace pshard::models {

// fp32: everything in float32. bf16: convolutions and GEMMs (Linear layers) read their operands (activations,
// weights, output gradients) as bfloat16 and accumulate and write in float32; batch norm, pooling, elementwise
// layers, the softmax and the loss stay float32 (docs/CONCEPTS.md, "Precision"). fp16: the same with IEEE half, on
// the CPU's oneDNN kernels only (float32 kernels reading operands rounded to half: oneDNN 2.6 has no fp16 ones).
enum class Precision { kFp32, kBf16, kFp16 };

// "fp32" / "bf16" / "fp16"; an Error naming the value otherwise.
Precision precision_from_name(const std::string& name);
const char* precision_name(Precision precision);

}  // namespace pshard::models
