// Tensor storage, views and reshapes.
#include "models/tensor.h"

#include "common/error.h"
#include "models/backend.h"

namespace pshard::models {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("tensor shape " + shape_to_string(shape) + " has a negative dimension");
    n *= d;
  }
  return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(Backend& backend, std::vector<int64_t> shape) : shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  Backend* b = &backend;
  float* p = static_cast<float*>(backend.allocate(static_cast<size_t>(numel_ > 0 ? numel_ : 1) * sizeof(float)));
  storage_ = std::shared_ptr<float>(p, [b](float* q) { b->deallocate(q); });
  data_ = p;
}

Tensor Tensor::view(float* data, std::vector<int64_t> shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.data_ = data;
  return t;
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  if (shape_numel(shape) != numel_) {
    throw Error("cannot reshape a tensor of shape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::narrow(int64_t first, int64_t count) const {
  if (shape_.empty() || first < 0 || count < 0 || first + count > shape_[0]) {
    throw Error("narrow(" + std::to_string(first) + ", " + std::to_string(count) + ") is outside a tensor of shape " +
                shape_to_string(shape_));
  }
  Tensor t = *this;
  int64_t row = shape_[0] > 0 ? numel_ / shape_[0] : 0;
  t.data_ = data_ + first * row;
  t.shape_[0] = count;
  t.numel_ = count * row;
  return t;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += ndim();
  if (i < 0 || i >= ndim()) {
    throw Error("dimension " + std::to_string(i) + " of a tensor of shape " + shape_to_string(shape_));
  }
  return shape_[i];
}

Tensor ReusableBuffer::get(Backend& backend, const std::vector<int64_t>& shape) {
  int64_t n = shape_numel(shape);
  if (storage_.empty() || storage_.numel() < n) storage_ = Tensor(backend, {n});
  return Tensor::view(storage_.data(), shape);
}

}  // namespace pshard::models
