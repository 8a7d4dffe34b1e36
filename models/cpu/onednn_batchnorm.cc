// oneDNN batch normalisation: training forward (batch statistics), inference forward and backward.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {

const dnnl::normalization_flags kScaleShift =
    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

// [n, c, hw] as the caller holds it: an activation (NCHW, or nChw16c where the kernels block its channels).
memory::desc data_desc(const OneDnnKernels::State& st, int64_t n, int64_t c, int64_t hw) {
  return st.activation({n, c, hw, 1});
}
// The layout the primitive runs in: channels blocked by 16, with a reorder on each side. On NCHW oneDNN has only a
// scalar implementation; ResNet-20 batch 64, 1 thread, process CPU ms per step: 102-104 blocked, 112-120 NHWC, 131-138
// NCHW, 120-130 with the reference kernels (load average 5-6; docs/PERFORMANCE.md). In bf16 the activations are NHWC
// (State::activation) and the batch norm runs on them as they are: a reorder on each side cost more than NHWC's loss.
memory::desc work_desc(const OneDnnKernels::State& st, int64_t n, int64_t c, int64_t hw) {
  return st.nhwc() ? st.activation({n, c, hw, 1}) : plain({n, c, hw, 1}, Tag::nChw16c);
}

BatchNormPrimitives& primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t hw, float eps) {
  uint32_t bits;
  std::memcpy(&bits, &eps, sizeof bits);
  return st.batchnorms[{n, c, hw, bits}];
}

std::string describe(int64_t n, int64_t c, int64_t hw) {
  return "batch norm of " + std::to_string(n) + " x " + std::to_string(c) + " channels x " + std::to_string(hw);
}

}  // namespace

void OneDnnKernels::batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                            const float* beta, float eps, float momentum, float* running_mean,
                                            float* running_var, float* save_mean, float* save_invstd, float* y) {
  if (n == 0) return;
  try {
    State& st = *state_;
    BatchNormPrimitives& p = primitives(st, n, c, hw, eps);
    const memory::desc data = data_desc(st, n, c, hw), work = work_desc(st, n, c, hw);
    if (!p.train) {
      p.train_pd = dnnl::batch_normalization_forward::primitive_desc(
          dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, work, eps, kScaleShift), st.attr,
          st.engine);
      p.train = dnnl::batch_normalization_forward(p.train_pd);
    }
    st.variance.resize(static_cast<size_t>(c));
    const memory::desc vec = plain({c}, Tag::x);
    st.run(p.train, p.train_pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, work, data, const_cast<float*>(x), false},
            {DNNL_ARG_SCALE, vec, vec, const_cast<float*>(gamma), false},
            {DNNL_ARG_SHIFT, vec, vec, const_cast<float*>(beta), false},
            {DNNL_ARG_DST, work, data, y, true},
            {DNNL_ARG_MEAN, vec, vec, save_mean, true},
            {DNNL_ARG_VARIANCE, vec, vec, st.variance.data(), true}});
    // oneDNN gives the biased batch variance; the running estimate uses the unbiased one (as PyTorch).
    const int64_t m = n * hw;
    const double unbias = m > 1 ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
    for (int64_t ch = 0; ch < c; ++ch) {
      const double var = st.variance[ch];
      save_invstd[ch] = static_cast<float>(1.0 / std::sqrt(var + eps));
      running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * save_mean[ch]);
      running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var * unbias);
    }
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(n, c, hw) + " forward failed: " + e.what());
  }
}

void OneDnnKernels::batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                           const float* beta, float eps, const float* running_mean,
                                           const float* running_var, float* y) {
  if (n == 0) return;
  try {
    State& st = *state_;
    BatchNormPrimitives& p = primitives(st, n, c, hw, eps);
    const memory::desc data = data_desc(st, n, c, hw), work = work_desc(st, n, c, hw);
    if (!p.eval) {
      p.eval_pd = dnnl::batch_normalization_forward::primitive_desc(
          dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, work, eps,
                                                  kScaleShift | dnnl::normalization_flags::use_global_stats),
          st.attr, st.engine);
      p.eval = dnnl::batch_normalization_forward(p.eval_pd);
    }
    const memory::desc vec = plain({c}, Tag::x);
    st.run(p.eval, p.eval_pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, work, data, const_cast<float*>(x), false},
            {DNNL_ARG_SCALE, vec, vec, const_cast<float*>(gamma), false},
            {DNNL_ARG_SHIFT, vec, vec, const_cast<float*>(beta), false},
            {DNNL_ARG_MEAN, vec, vec, const_cast<float*>(running_mean), false},
            {DNNL_ARG_VARIANCE, vec, vec, const_cast<float*>(running_var), false},
            {DNNL_ARG_DST, work, data, y, true}});
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(n, c, hw) + " inference failed: " + e.what());
  }
}

void OneDnnKernels::batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy,
                                       const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                                       float* dgamma, float* dbeta) {
  if (n == 0) return;
  try {
    State& st = *state_;
    // Backward only uses 1/sqrt(variance + eps), which the layer saved as save_invstd: with eps = 0 and variance =
    // 1/invstd^2, oneDNN sees the same value without needing the layer's eps.
    BatchNormPrimitives& p = primitives(st, n, c, hw, 0.0f);
    const memory::desc data = data_desc(st, n, c, hw), work = work_desc(st, n, c, hw);
    if (!p.backward) {
      p.train_pd = dnnl::batch_normalization_forward::primitive_desc(
          dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, work, 0.0f, kScaleShift), st.attr,
          st.engine);
      p.backward_pd = dnnl::batch_normalization_backward::primitive_desc(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, work, work, 0.0f, kScaleShift), st.attr,
          st.engine, p.train_pd);
      p.backward = dnnl::batch_normalization_backward(p.backward_pd);
    }
    st.variance.resize(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) st.variance[ch] = 1.0f / (save_invstd[ch] * save_invstd[ch]);
    if (st.zeros.size() < static_cast<size_t>(c)) st.zeros.resize(static_cast<size_t>(c), 0.0f);
    const memory::desc vec = plain({c}, Tag::x);
    st.run(p.backward, p.backward_pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, work, data, const_cast<float*>(x), false},
            {DNNL_ARG_DIFF_DST, work, data, const_cast<float*>(dy), false},
            {DNNL_ARG_SCALE, vec, vec, const_cast<float*>(gamma), false},
            {DNNL_ARG_SHIFT, vec, vec, st.zeros.data(), false},
            {DNNL_ARG_MEAN, vec, vec, const_cast<float*>(save_mean), false},
            {DNNL_ARG_VARIANCE, vec, vec, st.variance.data(), false},
            {DNNL_ARG_DIFF_SRC, work, data, dx, true},
            {DNNL_ARG_DIFF_SCALE, vec, vec, dgamma, true},
            {DNNL_ARG_DIFF_SHIFT, vec, vec, dbeta, true}});
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(n, c, hw) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
