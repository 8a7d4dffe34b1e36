// Dropout (inverted): in training, zeroes each element with probability p and scales the rest by 1/(1-p).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Deterministic: the mask of the k-th training forward is a pure function of (seed, k, element index), the same on
// every backend (models/cpu/kernels.h). Identity in evaluation.
//
//   Dropout drop(backend, {500}, 0.5f);
//   drop.reset_state(/*seed=*/42);
class Dropout final : public Layer {
 public:
  Dropout(Backend& backend, std::vector<int64_t> shape, float p);
  const char* type() const override { return "Dropout"; }
  void reset_state(uint64_t seed) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
  // Training forwards so far; set it to replay a mask (tests).
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t counter) { counter_ = counter; }

 private:
  float p_;
  uint64_t seed_ = 0, counter_ = 0;
  ReusableBuffer mask_;
};

}  // namespace pshard::models
