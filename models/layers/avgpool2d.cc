// AvgPool2d layer through the backend.
#include "models/layers/avgpool2d.h"

#include "models/layers/maxpool2d.h"

namespace pshard::models {

AvgPool2d::AvgPool2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t kernel, int64_t stride,
                     int64_t padding)
    : Layer(backend, in_shape, {}), geometry_(pool_geometry("AvgPool2d", in_shape, kernel, stride, padding)) {
  out_shape_ = {geometry_.c, geometry_.h_out, geometry_.w_out};
}

void AvgPool2d::forward(const Tensor& x, const Tensor& y, bool) {
  PoolShape s = geometry_;
  s.n = x.dim(0);
  backend_.avgpool2d_forward(s, x.data(), y.data());
}

void AvgPool2d::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  if (!dx) return;
  PoolShape s = geometry_;
  s.n = x.dim(0);
  backend_.avgpool2d_backward(s, dy.data(), dx->data());
}

}  // namespace pshard::models
