// Internal to the oneDNN kernels (models/cpu/onednn_*.cc): the engine, the primitive caches and the helper that
// runs a primitive on plain tensors.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "models/cpu/onednn.h"

namespace pshard::models::cpu {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

inline memory::desc plain(const memory::dims& dims, Tag tag) { return memory::desc(dims, kF32, tag); }

// A layout without padding (a blocked one pads the channels up to a multiple of the block). Primitives read padding
// as zeros, which a reorder writes but a primitive's output need not: a padded output must not feed another
// primitive directly (a batch norm's dx with 3 channels in nChw16c made the convolution's dx NaN).
inline bool unpadded(const memory::desc& d) {
  size_t elements = 1;
  for (memory::dim v : d.dims()) elements *= static_cast<size_t>(v);
  return d.get_size() == elements * sizeof(float);
}

// One tensor argument of a primitive: the caller's plain buffer and the format the primitive chose for it.
struct Arg {
  int id;              // DNNL_ARG_*
  memory::desc want;   // the primitive's format
  memory::desc plain;  // the caller's NCHW / OIHW / x layout
  void* data;          // the caller's buffer (null for an internal output, see below)
  bool output;         // written by the primitive (reordered back after it), else read (reordered before it)
  // An output only later steps of the same run() read (in `want`), never the caller: it stays in arena memory and is
  // not reordered back (data names it for those steps; null when none reads it, e.g. a workspace).
  bool internal = false;
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

// The batch-norm primitives of one (n, c, h, w, eps), each made on first use.
struct BatchNormPrimitives {
  dnnl::batch_normalization_forward::primitive_desc train_pd, train_relu_pd, eval_pd;
  dnnl::batch_normalization_forward train, train_relu, eval;  // train_relu: ReLU fused (keeps a workspace)
  dnnl::batch_normalization_backward::primitive_desc backward_pd;
  dnnl::batch_normalization_backward backward;
};
using BatchNormKey = std::array<int64_t, 5>;  // n, c, h, w, bits of eps

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

// The convolution primitives of a shape, backward ones made if `backward` (onednn_conv.cc).
ConvPrimitives& conv_primitives(OneDnnKernels::State& st, const ConvShape& s, bool bias, bool backward);
std::string describe_conv(const ConvShape& s);  // "conv2d 64x16x32x32 -> 32 channels, kernel 3, ..." for errors
// Batch norm over [n, c, h, w] (onednn_batchnorm.cc; the Backend's [n, c, hw] is h = hw, w = 1, a convolution's
// output its real h, w so that its descriptors match the convolution's): the caller's NCHW layout and the blocked
// one the primitives run in; the training forward (ReLU fused or not) and the backward primitives, made on first use.
memory::desc batchnorm_data_desc(int64_t n, int64_t c, int64_t h, int64_t w);
memory::desc batchnorm_work_desc(int64_t n, int64_t c, int64_t h, int64_t w);
BatchNormPrimitives& batchnorm_train_primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t h, int64_t w,
                                                float eps, bool relu);
BatchNormPrimitives& batchnorm_backward_primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t h,
                                                   int64_t w);

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

  explicit State(Arena a);
  // One primitive and its arguments.
  struct Step {
    const dnnl::primitive& primitive;
    memory::desc scratchpad;
    std::vector<Arg> args;
  };
  // Runs the steps in order: inputs whose format differs from the caller's are reordered into arena memory first
  // (once, when several steps read the same buffer in the same format; not at all when an earlier step wrote it in
  // that format), outputs are computed in arena memory and reordered back to the caller's buffers after their step
  // (internal ones are not). Waits until done.
  void run(const std::vector<Step>& steps);
  void run(const dnnl::primitive& p, const memory::desc& scratchpad, const std::vector<Arg>& args) {
    run({Step{p, scratchpad, args}});
  }

  // Batch norm training around run(): the step (the variance goes to `variance`), then the layer's statistics from
  // it (1/std, running mean and unbiased variance; onednn_batchnorm.cc).
  Step batchnorm_train_step(const BatchNormPrimitives& p, bool relu, int64_t n, int64_t c, int64_t h, int64_t w,
                            const float* x, const float* gamma, const float* beta, float* save_mean, float* y);
  void finish_batchnorm_train(int64_t n, int64_t c, int64_t hw, float eps, float momentum, const float* save_mean,
                              float* running_mean, float* running_var, float* save_invstd);
  // The backward step; its dx (`dx_internal`: kept in the blocked layout for a later step of the same run).
  Step batchnorm_backward_step(const BatchNormPrimitives& p, int64_t n, int64_t c, int64_t h, int64_t w, const float* x,
                               const float* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                               float* dx, bool dx_internal, float* dgamma, float* dbeta);
};

}  // namespace pshard::models::cpu
