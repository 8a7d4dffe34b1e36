// Softmax cross-entropy loss over class logits (mean over the batch for the gradient).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// out [n, classes], labels [n] in [0, classes). Keeps the softmax for backward.
//
//   SoftmaxCrossEntropy loss(backend);
//   loss.forward(logits, labels, nullptr, &loss_sum, &correct);
//   loss.backward(logits, labels, nullptr, dlogits);
class SoftmaxCrossEntropy final : public Loss {
 public:
  explicit SoftmaxCrossEntropy(Backend& backend) : backend_(backend) {}
  const char* type() const override { return "SoftmaxCrossEntropy"; }
  void forward(const Tensor& out, const int32_t* labels, const float* targets, double* loss_sum,
               int64_t* correct) override;
  void backward(const Tensor& out, const int32_t* labels, const float* targets, const Tensor& dout) override;

 private:
  Backend& backend_;
  ReusableBuffer probs_;
};

}  // namespace pshard::models
