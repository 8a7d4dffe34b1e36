// Softmax cross-entropy through the backend.
#include "models/layers/softmax_cross_entropy.h"

#include "common/error.h"

namespace pshard::models {

void SoftmaxCrossEntropy::forward(const Tensor& out, const int32_t* labels, const float*, double* loss_sum,
                                  int64_t* correct) {
  if (!labels) throw Error("softmax cross-entropy needs labels");
  Tensor probs = probs_.get(backend_, out.shape());
  backend_.softmax_xent_forward(out.data(), labels, out.dim(0), out.numel() / out.dim(0), probs.data(), loss_sum,
                                correct);
}

void SoftmaxCrossEntropy::backward(const Tensor& out, const int32_t* labels, const float*, const Tensor& dout) {
  Tensor probs = probs_.get(backend_, out.shape());
  backend_.softmax_xent_backward(probs.data(), labels, out.dim(0), out.numel() / out.dim(0), dout.data());
}

}  // namespace pshard::models
