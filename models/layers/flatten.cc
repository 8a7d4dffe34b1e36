// Flatten: reshapes; copies only when given separate buffers.
#include "models/layers/flatten.h"

namespace pshard::models {

Flatten::Flatten(Backend& backend, std::vector<int64_t> in_shape) : Layer(backend, in_shape, {shape_numel(in_shape)}) {}

void Flatten::forward(const Tensor& x, const Tensor& y, bool) { backend_.copy(y.data(), x.data(), x.numel()); }

void Flatten::backward(const Tensor&, const Tensor&, const Tensor& dy, const Tensor* dx) {
  if (dx) backend_.copy(dx->data(), dy.data(), dy.numel());
}

}  // namespace pshard::models
