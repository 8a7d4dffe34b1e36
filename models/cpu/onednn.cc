// oneDNN primitives of the CPU backend: cached per shape, formats chosen by oneDNN, temporaries from the arena.
#include "models/cpu/onednn.h"

#include <array>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.h"

namespace pshard::models::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr size_t kAlign = 64;  // bytes; oneDNN's JIT kernels want cache-line aligned buffers

memory::desc plain(const memory::dims& dims, Tag tag) { return memory::desc(dims, kF32, tag); }

// One tensor argument of a primitive: the caller's plain buffer and the format the primitive chose for it.
struct Arg {
  int id;              // DNNL_ARG_*
  memory::desc want;   // the primitive's format
  memory::desc plain;  // the caller's NCHW / OIHW / x layout
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

// The convolution descriptors of a shape, formats left to oneDNN (any) except the bias (always a plain vector).
struct ConvDescs {
  memory::desc src, wei, dst, bias;
  memory::dims strides, pad_l, pad_r;
  ConvDescs(const ConvShape& s, bool has_bias)
      : src({s.n, s.c_in, s.h, s.w}, kF32, Tag::any),
        wei({s.c_out, s.c_in, s.kh, s.kw}, kF32, Tag::any),
        dst({s.n, s.c_out, s.h_out, s.w_out}, kF32, Tag::any),
        bias(has_bias ? plain({s.c_out}, Tag::x) : memory::desc()),
        strides({s.stride, s.stride}),
        pad_l({s.pad, s.pad}),
        // oneDNN wants (h + pad_l + pad_r - k) / stride + 1 exact: pad_r leaves out the rows the floor drops.
        pad_r({(s.h_out - 1) * s.stride + s.kh - s.h - s.pad, (s.w_out - 1) * s.stride + s.kw - s.w - s.pad}) {}
};

using ConvKey = std::array<int64_t, 10>;

ConvKey key_of(const ConvShape& s, bool bias) {
  return {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, bias ? 1 : 0};
}

}  // namespace

struct OneDnnKernels::State {
  Arena arena;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive_attr attr;  // scratchpad supplied by us (from the arena), not allocated by oneDNN per call
  std::map<ConvKey, ConvPrimitives> convs;

  explicit State(Arena a) : arena(std::move(a)) { attr.set_scratchpad_mode(dnnl::scratchpad_mode::user); }

  // Runs primitive p on `args`: inputs whose format differs from the caller's are reordered into arena memory first,
  // outputs are computed in arena memory and reordered back to the caller's buffers afterwards.
  void run(const dnnl::primitive& p, const memory::desc& scratchpad, const std::vector<Arg>& args) {
    size_t bytes = 0;
    auto take = [&](size_t n) {
      size_t at = bytes;
      bytes += (n + kAlign - 1) / kAlign * kAlign;
      return at;
    };
    std::vector<size_t> offsets(args.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].want != args[i].plain) offsets[i] = take(args[i].want.get_size());
    }
    const size_t scratch_at = take(scratchpad.get_size());
    char* base = reinterpret_cast<char*>(arena(static_cast<int64_t>(bytes / sizeof(float)) + 1));

    std::unordered_map<int, memory> exec_args;
    std::vector<std::pair<memory, memory>> write_back;  // (primitive's, caller's)
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      memory user(a.plain, engine, a.data);
      if (a.want == a.plain) {
        exec_args.emplace(a.id, user);
        continue;
      }
      memory mine(a.want, engine, base + offsets[i]);
      if (a.output) {
        write_back.emplace_back(mine, user);
      } else {
        dnnl::reorder(user, mine).execute(stream, user, mine);
      }
      exec_args.emplace(a.id, mine);
    }
    exec_args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine, base + scratch_at));
    p.execute(stream, exec_args);
    for (auto& [mine, user] : write_back) dnnl::reorder(mine, user).execute(stream, mine, user);
    stream.wait();
  }

  ConvPrimitives& conv(const ConvShape& s, bool bias) {
    auto it = convs.find(key_of(s, bias));
    if (it != convs.end()) return it->second;
    const ConvDescs d(s, bias);
    ConvPrimitives c;
    c.fwd_pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, d.src,
                                        d.wei, d.bias, d.dst, d.strides, d.pad_l, d.pad_r),
        attr, engine);
    c.fwd = dnnl::convolution_forward(c.fwd_pd);
    return convs.emplace(key_of(s, bias), std::move(c)).first->second;
  }

  void make_backward(const ConvShape& s, bool bias, ConvPrimitives& c) {
    const ConvDescs d(s, bias);
    c.data_pd = dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d.src, d.wei, d.dst, d.strides,
                                              d.pad_l, d.pad_r),
        attr, engine, c.fwd_pd);
    c.data = dnnl::convolution_backward_data(c.data_pd);
    c.weights_pd = dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.src, d.wei, d.bias, d.dst,
                                                 d.strides, d.pad_l, d.pad_r),
        attr, engine, c.fwd_pd);
    c.weights = dnnl::convolution_backward_weights(c.weights_pd);
    c.has_backward = true;
  }
};

OneDnnKernels::OneDnnKernels(Arena arena) : state_(std::make_unique<State>(std::move(arena))) {}
OneDnnKernels::~OneDnnKernels() = default;

namespace {
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
    ConvPrimitives& c = st.conv(s, bias != nullptr);
    std::vector<Arg> args = {
        {DNNL_ARG_SRC, c.fwd_pd.src_desc(), plain({s.n, s.c_in, s.h, s.w}, Tag::nchw), const_cast<float*>(x), false},
        {DNNL_ARG_WEIGHTS, c.fwd_pd.weights_desc(), plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
         const_cast<float*>(w), false},
        {DNNL_ARG_DST, c.fwd_pd.dst_desc(), plain({s.n, s.c_out, s.h_out, s.w_out}, Tag::nchw), y, true}};
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
    ConvPrimitives& c = st.conv(s, db != nullptr);
    if (!c.has_backward) st.make_backward(s, db != nullptr, c);
    const memory::desc x_plain = plain({s.n, s.c_in, s.h, s.w}, Tag::nchw),
                       w_plain = plain({s.c_out, s.c_in, s.kh, s.kw}, Tag::oihw),
                       y_plain = plain({s.n, s.c_out, s.h_out, s.w_out}, Tag::nchw);
    std::vector<Arg> args = {{DNNL_ARG_SRC, c.weights_pd.src_desc(), x_plain, const_cast<float*>(x), false},
                             {DNNL_ARG_DIFF_DST, c.weights_pd.diff_dst_desc(), y_plain, const_cast<float*>(dy), false},
                             {DNNL_ARG_DIFF_WEIGHTS, c.weights_pd.diff_weights_desc(), w_plain, dw, true}};
    if (db) args.push_back({DNNL_ARG_DIFF_BIAS, c.weights_pd.diff_bias_desc(), plain({s.c_out}, Tag::x), db, true});
    st.run(c.weights, c.weights_pd.scratchpad_desc(), args);
    if (dx) {
      st.run(c.data, c.data_pd.scratchpad_desc(),
             {{DNNL_ARG_DIFF_DST, c.data_pd.diff_dst_desc(), y_plain, const_cast<float*>(dy), false},
              {DNNL_ARG_WEIGHTS, c.data_pd.weights_desc(), w_plain, const_cast<float*>(w), false},
              {DNNL_ARG_DIFF_SRC, c.data_pd.diff_src_desc(), x_plain, dx, true}});
    }
  } catch (const dnnl::error& e) {
    throw Error("onednn: " + describe(s) + " backward failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
