// Flatten: reshapes; copies when given separate buffers, regroups blocked channels into NCHW order.
#include "models/layers/flatten.h"

namespace pshard::models {

Flatten::Flatten(Backend& backend, std::vector<int64_t> in_shape) : Layer(backend, in_shape, {shape_numel(in_shape)}) {}

namespace {
// Channel block of a [C, H, W] input in the backend's layout (1 for other ranks); 1 where the order of the flattened
// features is NCHW's anyway (one pixel per channel).
int64_t input_block(const Backend& backend, const std::vector<int64_t>& in) {
  return in.size() == 3 && in[1] * in[2] > 1 ? backend.channel_block(in[0]) : 1;
}
}  // namespace

bool Flatten::is_view() const { return input_block(backend_, in_shape_) == 1; }

void Flatten::forward(const Tensor& x, const Tensor& y, bool) {
  const int64_t block = input_block(backend_, in_shape_);
  if (block == 1) {
    backend_.copy(y.data(), x.data(), x.numel());
  } else {
    backend_.regroup_channels(x.shape()[0], in_shape_[0], in_shape_[1] * in_shape_[2], block, 1, x.data(), y.data());
  }
}

void Flatten::backward(const Tensor&, const Tensor&, const Tensor& dy, const Tensor* dx) {
  if (!dx) return;
  const int64_t block = input_block(backend_, in_shape_);
  if (block == 1) {
    backend_.copy(dx->data(), dy.data(), dy.numel());
  } else {
    backend_.regroup_channels(dy.shape()[0], in_shape_[0], in_shape_[1] * in_shape_[2], 1, block, dy.data(),
                              dx->data());
  }
}

}  // namespace pshard::models
