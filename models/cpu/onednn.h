// oneDNN kernels of the CPU backend (train.cpu_kernels = onednn): convolution forward, backward-data and
// backward-weights, batch normalisation, pooling and GEMM (matmul), with primitives created once per shape.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "models/cpu/kernel_set.h"
#include "models/precision.h"

namespace pshard::models::cpu {

// "" when oneDNN has the bf16 convolutions and matmuls of Precision::kBf16 for this CPU (AVX-512; AVX2 alone has none),
// else why not, naming oneDNN's version (checked once).
std::string bf16_kernels_missing();

// The kernel set (kernel_set.h) on oneDNN primitives, run on the calling thread's OpenMP pool (Debian's libdnnl uses
// OpenMP, the same runtime as the reference kernels, so CpuBackend's thread count applies to both). Weights are OIHW
// at this interface and activations NCHW, or nChw16c for a multiple of 16 channels with block_channels (the layout
// the primitives run in: no reorder between a convolution and the batch norm after it); each primitive gets the memory
// format oneDNN prefers, with reorders where the caller's differs, and all temporary memory (reordered tensors,
// oneDNN's scratchpad) comes from `arena`, the backend's reused workspace. Results are run-to-run identical for a given
// thread count (oneDNN's CPU primitives reduce in a fixed order).
//
// Precision::kBf16: convolutions and matmuls read their operands (src, weights, diff_dst) as bfloat16, reordered
// from the caller's float32 into the arena, and accumulate and write (dst, diff_src, diff_weights, bias) in float32
// (AMX / AVX512_BF16 kernels); batch norm and pooling stay float32. oneDNN 2.6 has no fp16 convolution or matmul on
// CPU: with Precision::kFp16 the float32 primitives read copies of their operands rounded to half precision (fp16's
// values, range and overflow; slower than float32, for checking fp16 training where no fp16 hardware is).
//
//   OneDnnKernels dnn([&](int64_t floats) { return backend.workspace(floats); }, /*block_channels=*/true);
//   dnn.conv2d_forward(shape, x, w, bias, y);
class OneDnnKernels final : public KernelSet {
 public:
  using Arena = std::function<float*(int64_t floats)>;
  // block_channels: activations with a multiple of 16 channels in nChw16c (State::activation in onednn_state.h).
  OneDnnKernels(Arena arena, bool block_channels, Precision precision = Precision::kFp32);
  ~OneDnnKernels() override;
  OneDnnKernels(const OneDnnKernels&) = delete;
  OneDnnKernels& operator=(const OneDnnKernels&) = delete;

  PSHARD_KERNEL_SET_OPS(PSHARD_OVERRIDE_OP)

  struct State;  // engine, primitive caches (models/cpu/onednn_state.h, internal)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace pshard::models::cpu
