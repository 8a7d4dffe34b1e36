// Linear layer: three GEMMs on the PyTorch weight layout, no transposed copies.
#include "models/layers/linear.h"

#include <cmath>

#include "common/error.h"

namespace pshard::models {

Linear::Linear(Backend& backend, int64_t in_features, int64_t out_features, bool bias)
    : Layer(backend, {in_features}, {out_features}), in_(in_features), out_(out_features), has_bias_(bias) {
  if (in_features <= 0 || out_features <= 0) {
    throw Error("Linear: features must be > 0, got " + std::to_string(in_features) + " -> " +
                std::to_string(out_features));
  }
}

std::vector<ParamDecl> Linear::param_decls() const {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  std::vector<ParamDecl> d = {{"weight", {out_, in_}, ParamDecl::Init::kUniform, bound}};
  if (has_bias_) d.push_back({"bias", {out_}, ParamDecl::Init::kUniform, bound});
  return d;
}

void Linear::bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
  w_ = values.at(0), dw_ = grads.at(0);
  if (has_bias_) b_ = values.at(1), db_ = grads.at(1);
}

void Linear::forward(const Tensor& x, const Tensor& y, bool) {
  const int64_t n = x.dim(0);
  // y [n, out] = x [n, in] * W^T
  backend_.gemm(false, true, n, out_, in_, 1.0f, x.data(), in_, w_, in_, 0.0f, y.data(), out_);
  if (has_bias_) backend_.add_bias(y.data(), b_, n, out_, 1);
}

void Linear::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  const int64_t n = x.dim(0);
  // dW [out, in] = dy^T [out, n] * x [n, in]
  backend_.gemm(true, false, out_, in_, n, 1.0f, dy.data(), out_, x.data(), in_, 0.0f, dw_, in_);
  if (has_bias_) backend_.bias_grad(dy.data(), n, out_, 1, db_);
  // dx [n, in] = dy [n, out] * W [out, in]
  if (dx) backend_.gemm(false, false, n, in_, out_, 1.0f, dy.data(), out_, w_, in_, 0.0f, dx->data(), in_);
}

}  // namespace pshard::models
