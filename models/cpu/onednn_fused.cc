// oneDNN convolution + batch norm as one run: the convolution's output, and in backward the batch norm's input
// gradient, pass from one primitive to the next in the blocked layout both use, without a reorder to NCHW and back.
#include <vector>

#include "common/error.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {

void OneDnnKernels::conv2d_batchnorm_forward_train(const ConvShape& s, const float* x, const float* w, float* a,
                                                   const BatchNormTrain& bn, bool relu, float* y) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    const int64_t hw = s.h_out * s.w_out;
    ConvPrimitives& c = conv_primitives(st, s, false, false);
    const BatchNormPrimitives& p = batchnorm_train_primitives(st, s.n, s.c_out, s.h_out, s.w_out, bn.eps, relu);
    // `a` is written back (backward reads it); the batch norm reads the convolution's output where it still is,
    // when the convolution chose the batch norm's layout without padding (run() shares the arena copy), else from
    // `a`.
    const std::vector<State::Step> steps = {
        {c.fwd,
         c.fwd_pd.scratchpad_desc(),
         {{DNNL_ARG_SRC, c.fwd_pd.src_desc(), plain({s.n, s.c_in, s.h, s.w}, Tag::nchw), const_cast<float*>(x), false},
          {DNNL_ARG_WEIGHTS, c.fwd_pd.weights_desc(), plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
           const_cast<float*>(w), false},
          {DNNL_ARG_DST, c.fwd_pd.dst_desc(), plain({s.n, s.c_out, s.h_out, s.w_out}, Tag::nchw), a, true}}},
        st.batchnorm_train_step(p, relu, s.n, s.c_out, s.h_out, s.w_out, a, bn.gamma, bn.beta, bn.save_mean, y)};
    st.run(steps);
    st.finish_batchnorm_train(s.n, s.c_out, hw, bn.eps, bn.momentum, bn.save_mean, bn.running_mean, bn.running_var,
                              bn.save_invstd);
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe_conv(s) + " + batch norm forward failed: " + e.what());
  }
}

void OneDnnKernels::batchnorm_conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* a,
                                              const float* dy, const BatchNormGrad& bn, float* ga, float* dx,
                                              float* dw) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    ConvPrimitives& c = conv_primitives(st, s, false, true);
    const BatchNormPrimitives& p = batchnorm_backward_primitives(st, s.n, s.c_out, s.h_out, s.w_out);
    // The batch norm's dx (the convolution's dy) stays in the arena when both convolution backwards read it in the
    // batch norm's layout and it has no padding (channels a multiple of 16); otherwise it goes through the caller's
    // scratch `ga`.
    const memory::desc work = batchnorm_work_desc(s.n, s.c_out, s.h_out, s.w_out);
    const bool internal =
        unpadded(work) && c.weights_pd.diff_dst_desc() == work && (dx == nullptr || c.data_pd.diff_dst_desc() == work);
    const memory::desc x_plain = plain({s.n, s.c_in, s.h, s.w}, Tag::nchw),
                       w_plain = plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
                       y_plain = plain({s.n, s.c_out, s.h_out, s.w_out}, Tag::nchw);
    std::vector<State::Step> steps = {
        st.batchnorm_backward_step(p, s.n, s.c_out, s.h_out, s.w_out, a, dy, bn.gamma, bn.save_mean, bn.save_invstd, ga,
                                   internal, bn.dgamma, bn.dbeta),
        {c.weights,
         c.weights_pd.scratchpad_desc(),
         {{DNNL_ARG_SRC, c.weights_pd.src_desc(), x_plain, const_cast<float*>(x), false},
          {DNNL_ARG_DIFF_DST, c.weights_pd.diff_dst_desc(), y_plain, ga, false},
          {DNNL_ARG_DIFF_WEIGHTS, c.weights_pd.diff_weights_desc(), w_plain, dw, true}}}};
    if (dx) {
      steps.push_back({c.data,
                       c.data_pd.scratchpad_desc(),
                       {{DNNL_ARG_DIFF_DST, c.data_pd.diff_dst_desc(), y_plain, ga, false},
                        {DNNL_ARG_WEIGHTS, c.data_pd.weights_desc(), w_plain, const_cast<float*>(w), false},
                        {DNNL_ARG_DIFF_SRC, c.data_pd.diff_src_desc(), x_plain, dx, true}}});
    }
    st.run(steps);
  } catch (const dnnl::error& e) {
    throw Error("onednn: batch norm + " + describe_conv(s) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
