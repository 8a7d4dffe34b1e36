// Internal to the oneDNN kernels (models/cpu/onednn_*.cc): the engine, the primitive caches and the helper that
// runs a primitive on plain tensors.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "models/cpu/onednn.h"

namespace pshard::models::cpu {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr auto kBf16 = memory::data_type::bf16;
// Convolutions of fewer input channels compute in float32 whatever the precision (onednn_conv.cc says why).
constexpr int64_t kMinBf16InputChannels = 4;

inline memory::desc plain(const memory::dims& dims, Tag tag) { return memory::desc(dims, kF32, tag); }

// One tensor argument of a primitive: the caller's buffer and the format the primitive chose for it.
struct Arg {
  int id;              // DNNL_ARG_*
  memory::desc want;   // the primitive's format
  memory::desc plain;  // the caller's layout: OIHW / x, an activation's (State::activation)
  void* data;          // the caller's buffer
  bool output;         // written by the primitive (reordered back after it), else read (reordered before it)
};

// The convolution primitives of one shape (backward ones are made on the first backward: eval never needs them).
struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  bool has_backward = false;
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  dnnl::convolution_backward_weights weights;
};
using ConvKey = std::array<int64_t, 10>;  // ConvShape and whether there is a bias

// The batch-norm primitives of one (n, c, hw, eps), each made on first use.
struct BatchNormPrimitives {
  dnnl::batch_normalization_forward::primitive_desc train_pd, eval_pd;
  dnnl::batch_normalization_forward train, eval;
  dnnl::batch_normalization_backward::primitive_desc backward_pd;
  dnnl::batch_normalization_backward backward;
};
using BatchNormKey = std::array<int64_t, 4>;  // n, c, hw, bits of eps

// The pooling primitives of one shape and algorithm (max: the backward needs the forward's workspace, made by a
// training forward inside backward, since the Backend interface passes no workspace).
struct PoolPrimitives {
  dnnl::pooling_forward::primitive_desc infer_pd, train_pd;
  dnnl::pooling_forward infer, train;
  dnnl::pooling_backward::primitive_desc backward_pd;
  dnnl::pooling_backward backward;
};
using PoolKey = std::array<int64_t, 8>;  // PoolShape and max (1) / average (0)

// A matmul of one (transposes, sizes, leading dimensions, alpha, beta).
struct MatmulPrimitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
};
using MatmulKey = std::array<int64_t, 10>;

struct OneDnnKernels::State {
  Arena arena;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive_attr attr;  // scratchpad supplied by us (from the arena), not allocated by oneDNN per call
  std::map<ConvKey, ConvPrimitives> convs;
  std::map<BatchNormKey, BatchNormPrimitives> batchnorms;
  std::map<PoolKey, PoolPrimitives> pools;
  std::map<MatmulKey, MatmulPrimitive> matmuls;
  std::vector<float> variance;  // batch norm: the batch variance oneDNN works with (the layers keep 1/sqrt(var+eps))
  std::vector<float> zeros;     // batch norm backward: the shift oneDNN 2.6 asks for, though no gradient reads it
  std::vector<float> pool_dst;  // max pooling backward: the output of its training forward (discarded)
  std::vector<float> pool_workspace;  // max pooling backward: where each maximum was

  // Activations [n, c, h, w] with c % 16 == 0 are held in oneDNN's channel-blocked nChw16c between layers (the
  // layout its AVX-512 convolution and batch norm run in), so no primitive needs a reorder around it; other
  // activations are NCHW. In bf16 every activation is NHWC instead (the layout of oneDNN's AMX convolutions: with
  // nChw16c activations it runs its slower AVX512_BF16 kernels, or reorders each one to NHWC and back, which cost
  // more than bf16 saved). False: every activation NCHW (the layout the op-by-op comparisons with the reference use).
  bool block_channels;
  // What convolutions and matmuls read their operands (src, weights, diff_dst) as: f32, or bf16 (train.precision);
  // what they write is always f32.
  memory::data_type operand;
  // train.precision = fp16: oneDNN 2.6 has no fp16 convolution or matmul on CPU, so they run in f32 on copies of
  // their operands rounded to half precision (the values, range and overflow an fp16 kernel reads; slower than f32).
  bool fp16 = false;
  bool nhwc() const { return block_channels && operand == kBf16; }
  memory::desc activation(const memory::dims& nchw) const {
    if (nhwc()) return memory::desc(nchw, kF32, Tag::nhwc);
    return memory::desc(nchw, kF32, block_channels && nchw[1] % 16 == 0 ? Tag::nChw16c : Tag::nchw);
  }

  State(Arena a, bool block, memory::data_type operand_type, bool fp16_operands);
  // One primitive and its arguments.
  struct Step {
    const dnnl::primitive& primitive;
    memory::desc scratchpad;
    std::vector<Arg> args;
  };
  // Runs the steps in order: inputs whose format differs from the caller's (and fp16 operands) are reordered into
  // arena memory first (once, when several steps read the same buffer in the same format), outputs are computed in
  // arena memory and reordered back to the caller's buffers after their step. Waits until done.
  void run(const std::vector<Step>& steps);
  void run(const dnnl::primitive& p, const memory::desc& scratchpad, const std::vector<Arg>& args) {
    run({Step{p, scratchpad, args}});
  }
};

}  // namespace pshard::models::cpu
