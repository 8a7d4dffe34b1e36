// MaxPool2d layer through the backend.
#include "models/layers/maxpool2d.h"

#include "common/error.h"

namespace pshard::models {

PoolShape pool_geometry(const char* layer, const std::vector<int64_t>& in, int64_t kernel, int64_t stride,
                        int64_t padding) {
  if (in.size() != 3)
    throw Error(std::string(layer) + ": input must be {C, H, W} per sample, got " + shape_to_string(in));
  return PoolShape::make(0, in[0], in[1], in[2], kernel, stride, padding);
}

MaxPool2d::MaxPool2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t kernel, int64_t stride,
                     int64_t padding)
    : Layer(backend, in_shape, {}), geometry_(pool_geometry("MaxPool2d", in_shape, kernel, stride, padding)) {
  out_shape_ = {geometry_.c, geometry_.h_out, geometry_.w_out};
}

void MaxPool2d::forward(const Tensor& x, const Tensor& y, bool) {
  PoolShape s = geometry_;
  s.n = x.dim(0);
  backend_.maxpool2d_forward(s, x.data(), y.data());
}

void MaxPool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) {
  if (!dx) return;
  PoolShape s = geometry_;
  s.n = x.dim(0);
  backend_.maxpool2d_backward(s, x.data(), y.data(), dy.data(), dx->data());
}

}  // namespace pshard::models
