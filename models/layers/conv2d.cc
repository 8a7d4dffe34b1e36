// Conv2d layer: geometry checks and the backend's convolution.
#include "models/layers/conv2d.h"

#include <cmath>

#include "common/error.h"

namespace pshard::models {
namespace {

ConvShape geometry(const std::vector<int64_t>& in, int64_t out_channels, int64_t k, int64_t stride, int64_t pad) {
  if (in.size() != 3) throw Error("Conv2d: input must be {C, H, W} per sample, got " + shape_to_string(in));
  return ConvShape::make(0, in[0], in[1], in[2], out_channels, k, stride, pad);
}

}  // namespace

Conv2d::Conv2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t out_channels, int64_t kernel,
               int64_t stride, int64_t padding, bool bias)
    : Layer(backend, in_shape, {}),
      geometry_(geometry(in_shape, out_channels, kernel, stride, padding)),
      has_bias_(bias) {
  out_shape_ = {geometry_.c_out, geometry_.h_out, geometry_.w_out};
}

ConvShape Conv2d::shape_for(int64_t n) const {
  ConvShape s = geometry_;
  s.n = n;
  return s;
}

std::vector<ParamDecl> Conv2d::param_decls() const {
  const ConvShape& s = geometry_;
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.c_in * s.kh * s.kw));
  std::vector<ParamDecl> d = {{"weight", {s.c_out, s.c_in, s.kh, s.kw}, ParamDecl::Init::kUniform, bound}};
  if (has_bias_) d.push_back({"bias", {s.c_out}, ParamDecl::Init::kUniform, bound});
  return d;
}

void Conv2d::bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
  w_ = values.at(0), dw_ = grads.at(0);
  if (has_bias_) b_ = values.at(1), db_ = grads.at(1);
}

void Conv2d::forward(const Tensor& x, const Tensor& y, bool) {
  backend_.conv2d_forward(shape_for(x.dim(0)), x.data(), w_, b_, y.data());
}

void Conv2d::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  backend_.conv2d_backward(shape_for(x.dim(0)), x.data(), w_, dy.data(), dx ? dx->data() : nullptr, dw_, db_);
}

}  // namespace pshard::models
