// Dropout layer: a mask from the counter-based hash, kept for backward.
#include "models/layers/dropout.h"

#include "common/error.h"

namespace pshard::models {

Dropout::Dropout(Backend& backend, std::vector<int64_t> shape, float p) : Layer(backend, shape, shape), p_(p) {
  if (!(p >= 0.0f && p < 1.0f)) throw Error("Dropout: probability must be in [0, 1), got " + std::to_string(p));
}

void Dropout::reset_state(uint64_t seed) {
  seed_ = seed;
  counter_ = 0;
}

void Dropout::forward(const Tensor& x, const Tensor& y, bool train) {
  if (!train) {
    backend_.copy(y.data(), x.data(), x.numel());
    return;
  }
  Tensor mask = mask_.get(backend_, x.shape());
  backend_.dropout_forward(x.data(), y.data(), mask.data(), x.numel(), p_, seed_, counter_++);
}

void Dropout::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  if (!dx) return;
  Tensor mask = mask_.get(backend_, x.shape());
  backend_.multiply(dy.numel(), dy.data(), mask.data(), dx->data());
}

}  // namespace pshard::models
