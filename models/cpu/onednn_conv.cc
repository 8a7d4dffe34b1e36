// oneDNN convolution: forward, backward-data and backward-weights, primitives cached per shape.
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {

// The convolution descriptors of a shape, formats left to oneDNN (any) except the bias (always a plain vector) and a
// bf16 convolution's activations: NHWC, the layout they are kept in between layers then (State::activation). What a
// primitive reads (src and weights forward, diff_dst backward) is in the operand type (f32 or bf16), what it writes
// (dst, diff_src, diff_weights, the bias and its gradient) f32: oneDNN accumulates in f32 either way.
struct ConvDescs {
  memory::desc src, wei, dst, bias;        // read: operand type
  memory::desc src_out, wei_out, dst_out;  // written: f32
  memory::dims strides, pad_l, pad_r;
  ConvDescs(const ConvShape& s, bool has_bias, memory::data_type operand, Tag act)
      : src({s.n, s.c_in, s.h, s.w}, operand, act),
        wei({s.c_out, s.c_in, s.kh, s.kw}, operand, Tag::any),
        dst({s.n, s.c_out, s.h_out, s.w_out}, operand, act),
        bias(has_bias ? plain({s.c_out}, Tag::x) : memory::desc()),
        src_out({s.n, s.c_in, s.h, s.w}, kF32, act),
        wei_out({s.c_out, s.c_in, s.kh, s.kw}, kF32, Tag::any),
        dst_out({s.n, s.c_out, s.h_out, s.w_out}, kF32, act),
        strides({s.stride, s.stride}),
        pad_l({s.pad, s.pad}),
        // oneDNN wants (h + pad_l + pad_r - k) / stride + 1 exact: pad_r leaves out the rows the floor drops.
        pad_r({(s.h_out - 1) * s.stride + s.kh - s.h - s.pad, (s.w_out - 1) * s.stride + s.kw - s.w - s.pad}) {}
};

// What a convolution reads its operands as: the kernels' operand type, except that a convolution of fewer than
// kMinBf16InputChannels input channels stays float32: oneDNN 2.6's AMX backward-weights is slower than float32's there
// (LeNet's 1-channel first convolution, batch 64, 2 threads: LeNet 12.7k samples/s with it in bf16, 13.3-14.0k with it
// in float32; ResNet-20's 3-channel one is the same either way), and those layers are a small share of the work.
memory::data_type conv_operand(const OneDnnKernels::State& st, const ConvShape& s) {
  return s.c_in < kMinBf16InputChannels ? kF32 : st.operand;
}

ConvKey key_of(const ConvShape& s, bool bias) {
  return {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, bias ? 1 : 0};
}

ConvPrimitives& conv_primitives(OneDnnKernels::State& st, const ConvShape& s, bool bias) {
  auto it = st.convs.find(key_of(s, bias));
  if (it != st.convs.end()) return it->second;
  const ConvDescs d(s, bias, conv_operand(st, s), st.nhwc() ? Tag::nhwc : Tag::any);
  ConvPrimitives c;
  c.fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, d.src,
                                      d.wei, d.bias, d.dst_out, d.strides, d.pad_l, d.pad_r),
      st.attr, st.engine);
  c.fwd = dnnl::convolution_forward(c.fwd_pd);
  return st.convs.emplace(key_of(s, bias), std::move(c)).first->second;
}

void make_backward(OneDnnKernels::State& st, const ConvShape& s, bool bias, ConvPrimitives& c) {
  const ConvDescs d(s, bias, conv_operand(st, s), st.nhwc() ? Tag::nhwc : Tag::any);
  c.data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d.src_out, d.wei, d.dst, d.strides,
                                            d.pad_l, d.pad_r),
      st.attr, st.engine, c.fwd_pd);
  c.data = dnnl::convolution_backward_data(c.data_pd);
  c.weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.src, d.wei_out, d.bias, d.dst,
                                               d.strides, d.pad_l, d.pad_r),
      st.attr, st.engine, c.fwd_pd);
  c.weights = dnnl::convolution_backward_weights(c.weights_pd);
  c.has_backward = true;
}

std::string describe(const ConvShape& s) {
  return "conv2d " + std::to_string(s.n) + "x" + std::to_string(s.c_in) + "x" + std::to_string(s.h) + "x" +
         std::to_string(s.w) + " -> " + std::to_string(s.c_out) + " channels, kernel " + std::to_string(s.kh) +
         ", stride " + std::to_string(s.stride) + ", padding " + std::to_string(s.pad);
}

}  // namespace

void OneDnnKernels::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    ConvPrimitives& c = conv_primitives(st, s, bias != nullptr);
    std::vector<Arg> args = {
        {DNNL_ARG_SRC, c.fwd_pd.src_desc(), st.activation({s.n, s.c_in, s.h, s.w}), const_cast<float*>(x), false},
        {DNNL_ARG_WEIGHTS, c.fwd_pd.weights_desc(), plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
         const_cast<float*>(w), false},
        {DNNL_ARG_DST, c.fwd_pd.dst_desc(), st.activation({s.n, s.c_out, s.h_out, s.w_out}), y, true}};
    if (bias)
      args.push_back({DNNL_ARG_BIAS, c.fwd_pd.bias_desc(), plain({s.c_out}, Tag::x), const_cast<float*>(bias), false});
    st.run(c.fwd, c.fwd_pd.scratchpad_desc(), args);
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s) + " forward failed: " + e.what());
  }
}

void OneDnnKernels::conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                                    float* dw, float* db) {
  if (s.n == 0) return;
  try {
    State& st = *state_;
    ConvPrimitives& c = conv_primitives(st, s, db != nullptr);
    if (!c.has_backward) make_backward(st, s, db != nullptr, c);
    const memory::desc x_plain = st.activation({s.n, s.c_in, s.h, s.w}),
                       w_plain = plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
                       y_plain = st.activation({s.n, s.c_out, s.h_out, s.w_out});
    std::vector<State::Step> steps = {
        {c.weights,
         c.weights_pd.scratchpad_desc(),
         {{DNNL_ARG_SRC, c.weights_pd.src_desc(), x_plain, const_cast<float*>(x), false},
          {DNNL_ARG_DIFF_DST, c.weights_pd.diff_dst_desc(), y_plain, const_cast<float*>(dy), false},
          {DNNL_ARG_DIFF_WEIGHTS, c.weights_pd.diff_weights_desc(), w_plain, dw, true}}}};
    if (db) {
      steps[0].args.push_back({DNNL_ARG_DIFF_BIAS, c.weights_pd.diff_bias_desc(), plain({s.c_out}, Tag::x), db, true});
    }
    // Backward-data reads dy in the same format as backward-weights: run() reorders it once for both.
    if (dx) {
      steps.push_back({c.data,
                       c.data_pd.scratchpad_desc(),
                       {{DNNL_ARG_DIFF_DST, c.data_pd.diff_dst_desc(), y_plain, const_cast<float*>(dy), false},
                        {DNNL_ARG_WEIGHTS, c.data_pd.weights_desc(), w_plain, const_cast<float*>(w), false},
                        {DNNL_ARG_DIFF_SRC, c.data_pd.diff_src_desc(), x_plain, dx, true}}});
    }
    st.run(steps);
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
