// oneDNN max and average pooling (average counts padded cells, as PyTorch's count_include_pad=True).
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {

PoolPrimitives& primitives(OneDnnKernels::State& st, const PoolShape& s, bool max) {
  auto it = st.pools.find({s.n, s.c, s.h, s.w, s.k, s.stride, s.pad, max ? 1 : 0});
  if (it != st.pools.end()) return it->second;
  const memory::desc src = st.activation({s.n, s.c, s.h, s.w}), dst = st.activation({s.n, s.c, s.h_out, s.w_out});
  const memory::dims strides = {s.stride, s.stride}, kernel = {s.k, s.k}, pad_l = {s.pad, s.pad},
                     // as for convolution: (h + pad_l + pad_r - k) / stride + 1 must be exact
      pad_r = {(s.h_out - 1) * s.stride + s.k - s.h - s.pad, (s.w_out - 1) * s.stride + s.k - s.w - s.pad};
  const dnnl::algorithm alg = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
  PoolPrimitives p;
  p.infer_pd = dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, alg, src, dst, strides, kernel, pad_l, pad_r),
      st.attr, st.engine);
  p.infer = dnnl::pooling_forward(p.infer_pd);
  p.train_pd = dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, pad_l, pad_r),
      st.attr, st.engine);
  p.train = dnnl::pooling_forward(p.train_pd);
  p.backward_pd = dnnl::pooling_backward::primitive_desc(
      dnnl::pooling_backward::desc(alg, src, dst, strides, kernel, pad_l, pad_r), st.attr, st.engine, p.train_pd);
  p.backward = dnnl::pooling_backward(p.backward_pd);
  return st.pools.emplace(PoolKey{s.n, s.c, s.h, s.w, s.k, s.stride, s.pad, max ? 1 : 0}, std::move(p)).first->second;
}

std::string describe(const PoolShape& s, bool max) {
  return std::string(max ? "max" : "average") + " pooling " + std::to_string(s.n) + "x" + std::to_string(s.c) + "x" +
         std::to_string(s.h) + "x" + std::to_string(s.w) + ", window " + std::to_string(s.k) + ", stride " +
         std::to_string(s.stride) + ", padding " + std::to_string(s.pad);
}

void forward(OneDnnKernels::State& st, const PoolShape& s, bool max, const float* x, float* y) {
  PoolPrimitives& p = primitives(st, s, max);
  st.run(p.infer, p.infer_pd.scratchpad_desc(),
         {{DNNL_ARG_SRC, p.infer_pd.src_desc(), st.activation({s.n, s.c, s.h, s.w}), const_cast<float*>(x), false},
          {DNNL_ARG_DST, p.infer_pd.dst_desc(), st.activation({s.n, s.c, s.h_out, s.w_out}), y, true}});
}

}  // namespace

void OneDnnKernels::maxpool2d_forward(const PoolShape& s, const float* x, float* y) {
  if (s.n == 0) return;
  try {
    forward(*state_, s, true, x, y);
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s, true) + " forward failed: " + e.what());
  }
}

void OneDnnKernels::avgpool2d_forward(const PoolShape& s, const float* x, float* y) {
  if (s.n == 0) return;
  try {
    forward(*state_, s, false, x, y);
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s, false) + " forward failed: " + e.what());
  }
}

void OneDnnKernels::maxpool2d_backward(const PoolShape& s, const float* x, const float*, const float* dy, float* dx) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    PoolPrimitives& p = primitives(st, s, true);
    const memory::desc x_plain = st.activation({s.n, s.c, s.h, s.w}),
                       y_plain = st.activation({s.n, s.c, s.h_out, s.w_out}), ws = p.train_pd.workspace_desc();
    st.pool_dst.resize(y_plain.get_size() / sizeof(float));
    st.pool_workspace.resize(ws.get_size() / sizeof(float) + 1);
    // The training forward again, for the workspace (where each maximum is); its output is not needed.
    st.run({{p.train,
             p.train_pd.scratchpad_desc(),
             {{DNNL_ARG_SRC, p.train_pd.src_desc(), x_plain, const_cast<float*>(x), false},
              {DNNL_ARG_DST, y_plain, y_plain, st.pool_dst.data(), true},
              {DNNL_ARG_WORKSPACE, ws, ws, st.pool_workspace.data(), true}}},
            {p.backward,
             p.backward_pd.scratchpad_desc(),
             {{DNNL_ARG_DIFF_DST, p.backward_pd.diff_dst_desc(), y_plain, const_cast<float*>(dy), false},
              {DNNL_ARG_WORKSPACE, ws, ws, st.pool_workspace.data(), false},
              {DNNL_ARG_DIFF_SRC, p.backward_pd.diff_src_desc(), x_plain, dx, true}}}});
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s, true) + " backward failed: " + e.what());
  }
}

void OneDnnKernels::avgpool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    PoolPrimitives& p = primitives(st, s, false);
    st.run(p.backward, p.backward_pd.scratchpad_desc(),
           {{DNNL_ARG_DIFF_DST, p.backward_pd.diff_dst_desc(), st.activation({s.n, s.c, s.h_out, s.w_out}),
             const_cast<float*>(dy), false},
            {DNNL_ARG_DIFF_SRC, p.backward_pd.diff_src_desc(), st.activation({s.n, s.c, s.h, s.w}), dx, true}});
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s, false) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
