// oneDNN batch normalisation: training forward (batch statistics, ReLU optionally fused), inference forward and
// backward.
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

BatchNormPrimitives& primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t h, int64_t w, float eps) {
  uint32_t bits;
  std::memcpy(&bits, &eps, sizeof bits);
  return st.batchnorms[{n, c, h, w, bits}];
}

std::string describe(int64_t n, int64_t c, int64_t hw) {
  return "batch norm of " + std::to_string(n) + " x " + std::to_string(c) + " channels x " + std::to_string(hw);
}

}  // namespace

// [n, c, h, w] as the caller holds it (the Backend's [n, c, hw] is h = hw, w = 1).
memory::desc batchnorm_data_desc(int64_t n, int64_t c, int64_t h, int64_t w) { return plain({n, c, h, w}, Tag::nchw); }
// The layout the primitive runs in: channels blocked by 16, with a reorder on each side. On NCHW oneDNN has only a
// scalar implementation; ResNet-20 batch 64, 1 thread, process CPU ms per step: 102-104 blocked, 112-120 NHWC, 131-138
// NCHW, 120-130 with the reference kernels (load average 5-6; docs/PERFORMANCE.md).
memory::desc batchnorm_work_desc(int64_t n, int64_t c, int64_t h, int64_t w) {
  return plain({n, c, h, w}, Tag::nChw16c);
}

BatchNormPrimitives& batchnorm_train_primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t h, int64_t w,
                                                float eps, bool relu) {
  BatchNormPrimitives& p = primitives(st, n, c, h, w, eps);
  auto& pd = relu ? p.train_relu_pd : p.train_pd;
  auto& prim = relu ? p.train_relu : p.train;
  if (!prim) {
    const auto flags = relu ? kScaleShift | dnnl::normalization_flags::fuse_norm_relu : kScaleShift;
    pd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, batchnorm_work_desc(n, c, h, w), eps,
                                                flags),
        st.attr, st.engine);
    prim = dnnl::batch_normalization_forward(pd);
  }
  return p;
}

// Backward only uses 1/sqrt(variance + eps), which the layer saved as save_invstd: with eps = 0 and variance =
// 1/invstd^2 (batchnorm_backward_step), oneDNN sees the same value without needing the layer's eps.
BatchNormPrimitives& batchnorm_backward_primitives(OneDnnKernels::State& st, int64_t n, int64_t c, int64_t h,
                                                   int64_t w) {
  BatchNormPrimitives& p = primitives(st, n, c, h, w, 0.0f);
  if (!p.backward) {
    const memory::desc work = batchnorm_work_desc(n, c, h, w);
    p.train_pd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, work, 0.0f, kScaleShift), st.attr,
        st.engine);
    p.backward_pd = dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, work, work, 0.0f, kScaleShift), st.attr,
        st.engine, p.train_pd);
    p.backward = dnnl::batch_normalization_backward(p.backward_pd);
  }
  return p;
}

OneDnnKernels::State::Step OneDnnKernels::State::batchnorm_train_step(const BatchNormPrimitives& p, bool relu,
                                                                      int64_t n, int64_t c, int64_t h, int64_t w,
                                                                      const float* x, const float* gamma,
                                                                      const float* beta, float* save_mean, float* y) {
  const auto& pd = relu ? p.train_relu_pd : p.train_pd;
  const memory::desc data = batchnorm_data_desc(n, c, h, w), work = batchnorm_work_desc(n, c, h, w),
                     vec = plain({c}, Tag::x);
  variance.resize(static_cast<size_t>(c));
  Step step{relu ? p.train_relu : p.train,
            pd.scratchpad_desc(),
            {{DNNL_ARG_SRC, work, data, const_cast<float*>(x), false},
             {DNNL_ARG_SCALE, vec, vec, const_cast<float*>(gamma), false},
             {DNNL_ARG_SHIFT, vec, vec, const_cast<float*>(beta), false},
             {DNNL_ARG_DST, work, data, y, true},
             {DNNL_ARG_MEAN, vec, vec, save_mean, true},
             {DNNL_ARG_VARIANCE, vec, vec, variance.data(), true}}};
  // The ReLU's mask, which only a backward with the same flag would read: the layers take it from y > 0 instead.
  if (relu) step.args.push_back({DNNL_ARG_WORKSPACE, pd.workspace_desc(), memory::desc(), nullptr, true, true});
  return step;
}

void OneDnnKernels::State::finish_batchnorm_train(int64_t n, int64_t c, int64_t hw, float eps, float momentum,
                                                  const float* save_mean, float* running_mean, float* running_var,
                                                  float* save_invstd) {
  // oneDNN gives the biased batch variance; the running estimate uses the unbiased one (as PyTorch).
  const int64_t m = n * hw;
  const double unbias = m > 1 ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
  for (int64_t ch = 0; ch < c; ++ch) {
    const double var = variance[ch];
    save_invstd[ch] = static_cast<float>(1.0 / std::sqrt(var + eps));
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * save_mean[ch]);
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * var * unbias);
  }
}

OneDnnKernels::State::Step OneDnnKernels::State::batchnorm_backward_step(
    const BatchNormPrimitives& p, int64_t n, int64_t c, int64_t h, int64_t w, const float* x, const float* dy,
    const float* gamma, const float* save_mean, const float* save_invstd, float* dx, bool dx_internal, float* dgamma,
    float* dbeta) {
  variance.resize(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) variance[ch] = 1.0f / (save_invstd[ch] * save_invstd[ch]);
  if (zeros.size() < static_cast<size_t>(c)) zeros.resize(static_cast<size_t>(c), 0.0f);
  const memory::desc data = batchnorm_data_desc(n, c, h, w), work = batchnorm_work_desc(n, c, h, w),
                     vec = plain({c}, Tag::x);
  return Step{p.backward,
              p.backward_pd.scratchpad_desc(),
              {{DNNL_ARG_SRC, work, data, const_cast<float*>(x), false},
               {DNNL_ARG_DIFF_DST, work, data, const_cast<float*>(dy), false},
               {DNNL_ARG_SCALE, vec, vec, const_cast<float*>(gamma), false},
               {DNNL_ARG_SHIFT, vec, vec, zeros.data(), false},
               {DNNL_ARG_MEAN, vec, vec, const_cast<float*>(save_mean), false},
               {DNNL_ARG_VARIANCE, vec, vec, variance.data(), false},
               {DNNL_ARG_DIFF_SRC, work, data, dx, true, dx_internal},
               {DNNL_ARG_DIFF_SCALE, vec, vec, dgamma, true},
               {DNNL_ARG_DIFF_SHIFT, vec, vec, dbeta, true}}};
}

void OneDnnKernels::batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma,
                                            const float* beta, float eps, float momentum, float* running_mean,
                                            float* running_var, float* save_mean, float* save_invstd, float* y) {
  if (n == 0) return;
  try {
    State& st = *state_;
    const BatchNormPrimitives& p = batchnorm_train_primitives(st, n, c, hw, 1, eps, false);
    st.run({st.batchnorm_train_step(p, false, n, c, hw, 1, x, gamma, beta, save_mean, y)});
    st.finish_batchnorm_train(n, c, hw, eps, momentum, save_mean, running_mean, running_var, save_invstd);
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
    BatchNormPrimitives& p = primitives(st, n, c, hw, 1, eps);
    const memory::desc data = batchnorm_data_desc(n, c, hw, 1), work = batchnorm_work_desc(n, c, hw, 1);
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
    const BatchNormPrimitives& p = batchnorm_backward_primitives(st, n, c, hw, 1);
    st.run(
        {st.batchnorm_backward_step(p, n, c, hw, 1, x, dy, gamma, save_mean, save_invstd, dx, false, dgamma, dbeta)});
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(n, c, hw) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
