// BatchNorm layer: batch statistics in training, running statistics in evaluation.
#include "models/layers/batchnorm.h"

#include "common/error.h"

namespace pshard::models {

BatchNorm::BatchNorm(Backend& backend, std::vector<int64_t> shape, float momentum, float eps)
    : Layer(backend, shape, shape), momentum_(momentum), eps_(eps) {
  if (shape.size() != 1 && shape.size() != 3) {
    throw Error("BatchNorm: input must be {C, H, W} or {F} per sample, got " + shape_to_string(shape));
  }
  if (!(momentum >= 0.0f && momentum <= 1.0f) || !(eps > 0.0f)) {
    throw Error("BatchNorm: momentum must be in [0, 1] and eps > 0");
  }
  c_ = shape[0];
  hw_ = shape.size() == 3 ? shape[1] * shape[2] : 1;
  running_mean_ = Tensor(backend, {c_});
  running_var_ = Tensor(backend, {c_});
  save_mean_ = Tensor(backend, {c_});
  save_invstd_ = Tensor(backend, {c_});
  reset_state(0);
}

std::vector<ParamDecl> BatchNorm::param_decls() const {
  return {{"weight", {c_}, ParamDecl::Init::kConstant, 1.0f}, {"bias", {c_}, ParamDecl::Init::kConstant, 0.0f}};
}

void BatchNorm::bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
  gamma_ = values.at(0), beta_ = values.at(1), dgamma_ = grads.at(0), dbeta_ = grads.at(1);
}

std::vector<BufferRef> BatchNorm::buffers() {
  return {{"running_mean", {c_}, c_, running_mean_.data()}, {"running_var", {c_}, c_, running_var_.data()}};
}

void BatchNorm::reset_state(uint64_t) {
  backend_.fill(running_mean_.data(), c_, 0.0f);
  backend_.fill(running_var_.data(), c_, 1.0f);
}

void BatchNorm::forward(const Tensor& x, const Tensor& y, bool train) {
  const int64_t n = x.dim(0);
  if (train) {
    backend_.batchnorm_forward_train(n, c_, hw_, x.data(), gamma_, beta_, eps_, momentum_, running_mean_.data(),
                                     running_var_.data(), save_mean_.data(), save_invstd_.data(), y.data());
  } else {
    backend_.batchnorm_forward_eval(n, c_, hw_, x.data(), gamma_, beta_, eps_, running_mean_.data(),
                                    running_var_.data(), y.data());
  }
}

void BatchNorm::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  float* out = dx ? dx->data() : dx_scratch_.get(backend_, x.shape()).data();
  backend_.batchnorm_backward(x.dim(0), c_, hw_, x.data(), dy.data(), gamma_, save_mean_.data(), save_invstd_.data(),
                              out, dgamma_, dbeta_);
}

}  // namespace pshard::models
